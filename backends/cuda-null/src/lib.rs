//! # The null driver: a CPU test double of the CUDA driver, for counting
//!
//! `libxstream_cuda_null.so` exports the CUDA driver functions that xstream-cuda calls to open
//! a device, create streams and events, allocate, copy, load PTX and launch, and nothing else.
//! A test links it as `libcuda.so` in a directory of its own and starts a process with that
//! directory on `LD_LIBRARY_PATH`; cudarc, which resolves each driver symbol on first call,
//! then calls into it. It answers two questions on a machine without a GPU: **which driver
//! functions, and how many calls, an xstream operation makes**, and what xstream's wrapper
//! costs on the CPU against a raw call into the same double.
//!
//! It is **not a CUDA simulator** and verifies no CUDA behaviour:
//! - every operation completes at once; kernels never run (`cuLaunchKernel` checks the handle,
//!   the dimensions and one value pointer per parameter, then only counts);
//! - device memory is host heap memory, so copies and memsets really move bytes (a copy's
//!   result is right), and a range outside every allocation is `CUDA_ERROR_INVALID_VALUE`;
//! - `cuModuleLoadDataEx` reads only the `.entry` and `.param` lines of PTX text (never a
//!   cubin), so that `cuModuleGetFunction` and `cuFuncGetParamInfo` answer from them;
//! - `cuLaunchHostFunc` queues to one background thread that runs host functions in order, so
//!   a host function on any stream runs after every one queued before it on any stream (one
//!   queued behind a `cuStreamWaitEvent` never runs before the event's host functions);
//!   synchronize waits for the host functions a stream or event is ordered after, queries say
//!   `CUDA_ERROR_NOT_READY` until they ran, and copies and memsets wait for them before
//!   copying (so a host function that waits for work enqueued after it blocks that work);
//! - virtual memory: a reservation is zeroed heap memory, a mapping makes its part of it device
//!   memory (so copies and memsets reach it) and one handle mapped twice does not alias;
//!   granularity 2 MiB; `CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED` is 1;
//!   `CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED` is 1: an exported handle
//!   is a descriptor of an unlinked file holding only the size, which another process imports
//!   as a handle of that size (no bytes are shared);
//! - stream-ordered allocation from the default pool only (`cuDeviceGetDefaultMemPool`,
//!   `cuMemAllocAsync`, `cuMemAllocFromPoolAsync` of that pool, `cuMemFreeAsync`, `CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED` 1): each
//!   allocates or frees at once, like `cuMemAlloc_v2` / `cuMemFree_v2`, after the host functions
//!   the stream waits for; the pool handle is only a handle (no pool attributes);
//! - one device, one (primary) context, no capture, no managed memory, no peers, fixed device
//!   attributes (an H100-like sm_90 with 132 multiprocessors).
//!
//! Cold caches: `XNULL_EVICT_KB=<n>` makes every driver call read an `n` KiB buffer of its
//! own first (`xnull_thread_evict_ns()` is the time the calling thread spent so).
//! Counters: `xnull_calls(name)` (all threads), `xnull_thread_calls(name)` (the calling
//! thread), `xnull_wait_ns()` (time callers spent blocked waiting for host functions),
//! `xnull_reset()`, `xnull_functions(names, cap)` (the exported driver functions),
//! `xnull_stream_host_fns(stream)` (host functions launched on one stream),
//! `xnull_last_call(name)` (where the latest call of `name` stands in the order of every
//! driver call since the process started: which of two functions was called last),
//! `xnull_host_fn_calls()` (driver calls made from inside a host function, which CUDA does not
//! permit: 0 for a correct caller). Failure
//! injection: `xnull_fail_next(name, n, code)` makes the next `n` calls of a driver function
//! return `code`.
//! Every exported function counts its call, then runs inside `catch_unwind`.

mod driver;
mod ptx;
mod state;

use std::ffi::CString;
use std::sync::OnceLock;

/// The exported driver functions' names as C strings (for `xnull_functions`).
fn c_names() -> &'static [CString] {
    static N: OnceLock<Vec<CString>> = OnceLock::new();
    N.get_or_init(|| {
        state::NAMES
            .iter()
            .map(|n| CString::new(*n).unwrap_or_default())
            .collect()
    })
}
