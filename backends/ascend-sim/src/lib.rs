//! # xstream-ascend-sim: a CPU **simulator / test double** of Huawei's `libascendcl.so`
//!
//! This crate is **not** an NPU driver and does not talk to Ascend hardware. It builds a
//! `libascendcl.so` (cdylib, `[lib] name = "ascendcl"`) that implements, on the CPU, the subset of
//! the ACL runtime C ABI that the xstream Ascend backend uses: init, devices and contexts,
//! streams, events, report-style and host-func callbacks, host-func subscriptions, the
//! per-stream allocator registry, synchronous and async memory copies, value wait / write,
//! stream configuration handles, exception info, capture / model run instances (`aclmdlRI*`),
//! kernel binaries and launches (over a documented test-only binary format whose kernels are
//! built-in CPU functions), the runtime version and error reporting. The
//! semantics follow the CANN AscendCL API reference; every choice made where that reference
//! leaves the behaviour open is listed in the crate's `README.md`.
//!
//! ## Modules
//!
//! One module per ACL area, its `extern "C"` exports beside the state they touch:
//!
//! | Module | Holds |
//! | --- | --- |
//! | `allocator` | the external per-stream allocator registry (`aclrtAllocator*`) |
//! | `binary` | the simulator's test-only kernel binary format (parser, built-in CPU kernels) |
//! | `callback` | report callbacks (`aclrtLaunchCallback`, `*Report`) and `aclrtLaunchHostFunc` |
//! | `capture` | capture and model run instances (`aclmdlRI*`), the capture rules |
//! | `codes` | ACL error codes and constants |
//! | `config` | product, limits, device count, clock, version (`aclrtGetVersion`, `xsimSet*`) |
//! | `device` | init, devices, contexts (`aclInit`, `aclrtSetDevice`, `aclrtCreateContext`, ...) |
//! | `dtype` | `aclDataTypeSize`, `aclFloat16ToFloat`, `aclFloatToFloat16` |
//! | `error` | the export wrapper, the thread's last error / message, argument helpers |
//! | `event` | events (`aclrtCreateEvent*`, record, query, sync, timestamps, `aclrtStreamWaitEvent`) |
//! | `exception` | exception info (`aclrtSetExceptionInfoCallback`, `aclrtGet*FromExceptionInfo`) |
//! | `faults` | fault injection, call counts, hangs, poison (`xsimSetFaults`, `xsimLaunchFault`) |
//! | `host_mem` | which host ranges are page-locked (the captured-copy rule) |
//! | `hosttask` | host tasks of other simulated libraries (`xsimLaunchHostTask`; simulator-only) |
//! | `hostfunc` | host-func subscriptions (`aclrtSubscribeHostFunc`, `aclrtProcessHostFunc`) |
//! | `ipc_event` | IPC event handles (`aclrtIpcGetEventHandle`, `aclrtIpcOpenEventHandle`): across processes on A2/A3 (on unless `XSIM_IPC=0`), else refused (207000) |
//! | `ipc_mem` | IPC memory (`aclrtIpcMemGetExportKey`, `aclrtIpcMemSetImportPid`, `aclrtIpcMemImportByKey`, `aclrtIpcMemClose`): across processes (on unless `XSIM_IPC=0`), else refused (207000) |
//! | `ipc_shm` | the shared memory (memfd) behind both; the switch `xsimSetIpc` |
//! | `kernel` | kernel binaries and launches (`aclrtBinaryLoadFromData`, `aclrtKernelArgs*`, `aclrtLaunchKernel*`) |
//! | `memory` | `aclrtMalloc/Free`, `aclrtMallocHost/FreeHost`, `aclrtMemcpy`, `*Async` copies |
//! | `memset` | the synchronous `aclrtMemset` |
//! | `real_kernels` | the `XSIM_REAL_KERNELS` switch (`xsimSetRealKernels`): refuse the test-only kernel format as a real runtime does |
//! | `random` | `aclrtRandomNumAsync`, the runtime's built-in random-number task, with its checks and codes |
//! | `reduce` | `aclrtReduceAsync`, the runtime's built-in reduce task, with its checks per product |
//! | `registry` | live handles by address, lookups, live counters (`xsimLive*`) |
//! | `capability` | capability queries: CANN attributes (`aclGetCannAttribute`, `aclGetCannAttributeList`) and device features (`aclrtGetDeviceCapability`) |
//! | `satmode` | the device saturation mode (`aclrtSetDeviceSatMode` / `aclrtGetDeviceSatMode`) |
//! | `stream` | the stream object and worker; create, destroy, synchronize, query, abort |
//! | `stream_attr` | stream properties: failure mode, priority, flags, id, attributes |
//! | `stream_config` | stream configuration handles and `aclrtCreateStreamV2` |
//! | `sysinfo` | run mode, CANN package versions (`aclsysGetVersion*`), SoC name, thread resources, error detail (`aclrtGetErrorVerbose`) |
//! | `task` | the tasks a stream worker runs; simulated kernels (`xsimLaunchDelay/Lcg`) |
//! | `value` | `aclrtValueWait` / `aclrtValueWrite` |
//!
//! Model of the simulated device:
//! * "Device memory" is plain host memory; `aclrtMalloc` returns host pointers.
//! * Each stream runs its tasks in order on a worker thread that is spawned when work is queued
//!   and exits once the stream is idle (so thousands of streams can exist).
//! * Simulated kernels (`xsimLaunchDelay`, `xsimLaunchLcg`, `xsimLaunchFault`) and fault
//!   injection (`XSIM_FAULTS`, `xsimSetFaults`) are simulator-only extensions, **not part of
//!   ACL**.
//!
//! Every exported function catches panics and returns 507000 (`ACL_ERROR_RT_INTERNAL_ERROR`)
//! instead of unwinding across the FFI boundary. The exported functions are also callable from
//! Rust through this rlib (they are `unsafe` because they take raw C pointers).

pub mod allocator;
pub mod binary;
pub mod callback;
pub mod capability;
pub mod capture;
pub mod codes;
pub mod config;
pub mod device;
pub mod dtype;
mod elementwise;
pub mod error;
pub mod event;
pub mod exception;
pub mod faults;
mod host_mem;
pub mod hostfunc;
pub mod hosttask;
pub mod ipc_event;
pub mod ipc_mem;
mod ipc_shm;
pub mod kernel;
pub mod memory;
pub mod memset;
pub mod peer;
mod physmem;
pub mod random;
pub mod real_kernels;
pub mod reduce;
pub mod registry;
pub mod satmode;
pub mod stream;
pub mod stream_attr;
pub mod stream_config;
pub mod sysinfo;
pub mod task;
pub mod value;
pub mod vmm;

pub use allocator::*;
pub use callback::*;
pub use capability::*;
pub use capture::*;
pub use config::*;
pub use device::*;
pub use dtype::*;
pub use error::*;
pub use event::*;
pub use exception::*;
pub use faults::*;
pub use hostfunc::*;
pub use hosttask::*;
pub use ipc_event::*;
pub use ipc_mem::*;
pub use ipc_shm::xsimSetIpc;
pub use kernel::*;
pub use memory::*;
pub use memset::*;
pub use real_kernels::*;
pub use reduce::*;
pub use registry::*;
pub use satmode::*;
pub use stream::*;
pub use stream_attr::*;
pub use stream_config::*;
pub use sysinfo::*;
pub use task::*;
pub use value::*;
pub use vmm::*;
