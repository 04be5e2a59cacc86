//! # xstream-ascend
//!
//! The Huawei Ascend backend of xstream, over the ACL runtime (`libascendcl.so`) loaded at run
//! time with `libloading`: nothing links against CANN, and a machine without it gets
//! [`Error::NotAvailable`] listing every place searched.
//!
//! ## Modules
//! | layer | module | what |
//! |---|---|---|
//! | sys | [`sys`] | `AclFns`: the raw function table (C names; required vs `Option` symbols) |
//! | loader | [`loader`] | discovery, the process-wide table, `aclInit` once |
//! | result | `result` (private), `result/` | `Result`-returning wrappers, `MaybeUninit` out-params; `result/sysinfo`: package version, SoC, cores, run mode, fault detail, `aclrtMemset` |
//! | error | [`error`] | [`AclError`], the name table, the mapping to [`Error`] |
//! | conv | [`conv`] | [`ACL_FLAGS`], the flag translation table |
//! | device | [`device`] | [`AscendDevice`] (context binding, capabilities), [`AscendBuffer`] |
//! | dtype | [`dtype`] | xstream element types as `aclDataType`, checked against `aclDataTypeSize` |
//! | blocks | [`blocks`] | stream-ordered allocation emulated with events: the per-device block cache |
//! | stream | [`stream`], `stream/` | [`AscendStream`]: the portable impl; `stream/`: create, capture, callback, memory, memop, attribute, native (ACL-only), drop |
//! | event | [`event`] | [`AscendEvent`] |
//! | graph | [`graph`] | [`AscendGraph`]: a model run instance from capture |
//! | module | [`module`], `result/kernel` | [`AscendModule`], [`AscendFunction`]: kernel binaries; the simulator-format builtin binary |
//! | callbacks | `callback` (private) | report thread, reaper, `extern "C"` trampolines |
//! | collectives | `hccl` (feature `hccl`), `hccl/` | `libhccl.so` loaded at run time; `AscendComm`, the HCCL op × dtype table |
//!
//! Design choices:
//! - **Context binding.** ACL contexts are per thread. A device holds its ordinal's primary
//!   context; every entry point makes it current on the calling thread when a thread-local
//!   cache says it is not (`aclrtSetCurrentContext` only when different). Every entry point
//!   first calls [`ensure_not_in_callback`](xstream_core::ensure_not_in_callback).
//! - **Callbacks** use ACL's report style only: one report thread per device loops
//!   `aclrtProcessReport(100)`; streams are subscribed lazily; callbacks are
//!   `ACL_CALLBACK_BLOCK`. Exactly-once holds with errors: the trampoline asks the stream for a
//!   sticky fault before calling, and sticky errors seen anywhere fail the device's pending
//!   callbacks. Their slots come from that list (`xstream_core::callback::PendingCallbacks`),
//!   which reuses one that ran and that nothing else references; each slot is tracked there
//!   only. `aclrtLaunchHostFunc` is reachable through
//!   [`AscendStream::launch_host_func`]; mixing the two styles on one stream is refused.
//! - **Drop never blocks**: streams, buffers and graphs are released by a background reaper
//!   after their work completed (stream: synchronize → unsubscribe → unregister allocator →
//!   destroy; buffer: device synchronize → `aclrtFree`). A buffer freed with `free_async` goes
//!   to the device's block cache instead, ordered by events ([`blocks`]).
//! - **No `aclFinalize` at exit**: a destructor at process exit could race with runtime
//!   threads; call [`AscendBackend::finalize`] explicitly if needed.
//! - **Modules and kernels** ([`module`]) go through ACL's kernel-binary API
//!   (`aclrtBinaryLoadFromData`, `aclrtBinaryGetFunction`, `aclrtLaunchKernelWithConfig`),
//!   used when the runtime exports it ([`Capabilities::MODULES`](xstream_core::Capabilities)).
//!   The builtin module behind [`Kernel::Delay`](xstream_core::Kernel::Delay) and
//!   [`Kernel::Lcg`](xstream_core::Kernel::Lcg) is a binary in the simulator's test-only format:
//!   it runs only on the simulator (`xstream-ascend-sim`); on real hardware it is
//!   [`Error::Unsupported`] and the device lacks `KERNELS`. `Kernel::Fault` (feature `testing`)
//!   uses the simulator's `xsimLaunchFault` extension.
//! - **Raw handles**: [`AscendStream`] and [`AscendEvent`] hand out their `aclrtStream` /
//!   `aclrtEvent` (`as_raw`) for vendor operator libraries, and wrap handles created elsewhere
//!   (`Stream::borrow_raw`, [`AscendEvent::borrow_raw`]) without ever destroying them.
//!
//! # Threads
//! Every type is `Send + Sync`. ACL handles are usable from any thread once the right context
//! is current on it, and xstream makes it current before every call.
#![deny(unsafe_code)]

pub mod blocks;
mod callback;
pub mod conv;
pub mod device;
pub mod dtype;
pub mod error;
pub mod event;
pub mod graph;
#[cfg(feature = "hccl")]
pub mod hccl;
mod ipc_mem;
pub mod loader;
pub mod module;
mod peer;
mod result;
pub mod stream;
pub mod sys;
pub mod vmm;

use xstream_core::{Backend, BackendKind, Error, FlagTable, Result};

pub use conv::ACL_FLAGS;
#[allow(deprecated)]
pub use device::ACL_HOST_MEM_FLAGS;
pub use device::{
    AscendBuffer, AscendDevice, CannAttribute, DeviceFeature, SaturationMode, ACL_PINNED_FLAGS,
};
pub use error::{map_error, AclError};
pub use event::AscendEvent;
pub use graph::AscendGraph;
pub use module::{AscendFunction, AscendModule};
pub use stream::AscendStream;
pub use sys::{
    AclFns, DevPtr, LoadError, RawBinary, RawContext, RawEvent, RawFunction, RawModel, RawStream,
};

/// The code `Kernel::Fault` poisons the context with on the
/// simulator (`ACL_ERROR_RT_AICORE_EXCEPTION`).
pub const FAULT_CODE: i32 = 507_015;

/// The Ascend backend.
#[derive(Debug, Clone, Copy, Default)]
pub struct AscendBackend;

impl AscendBackend {
    /// The loaded function table (after `aclInit`).
    ///
    /// # Errors
    /// Load errors.
    pub fn fns() -> Result<&'static AclFns> {
        loader::acl()
    }

    /// The optional ACL symbols the loaded library exports (capabilities by name).
    ///
    /// # Errors
    /// Load errors.
    pub fn optional_symbols() -> Result<Vec<&'static str>> {
        Ok(loader::table()?.present_optional())
    }

    /// Drops xstream's `aclInit` reference: `aclFinalizeReference` when the library has it
    /// (returns the remaining count), else `aclFinalize` (returns 0). Call only when no xstream
    /// object is alive any more; xstream never does this itself.
    ///
    /// # Errors
    /// Vendor errors; [`Error::NotPermitted`] inside a callback.
    pub fn finalize() -> Result<u64> {
        xstream_core::ensure_not_in_callback()?;
        result::finalize(loader::acl()?)
    }
}

impl Backend for AscendBackend {
    const KIND: BackendKind = BackendKind::Ascend;
    type Device = AscendDevice;
    type Stream = AscendStream;
    type Event = AscendEvent;
    type Graph = AscendGraph;
    type Buffer = AscendBuffer;
    type Module = AscendModule;
    type Function = AscendFunction;

    fn availability() -> Result<()> {
        std::panic::catch_unwind(|| {
            let t = loader::acl()?;
            match result::device::count(t)? {
                0 => Err(Error::NotAvailable {
                    backend: BackendKind::Ascend,
                    reason: format!("{} reports no device", t.library),
                }),
                _ => Ok(()),
            }
        })
        .unwrap_or_else(|_| {
            Err(Error::NotAvailable {
                backend: BackendKind::Ascend,
                reason: "panic while probing the ACL runtime".into(),
            })
        })
    }

    fn device_count() -> Result<usize> {
        device::device_count()
    }

    fn open(ordinal: usize) -> Result<AscendDevice> {
        AscendDevice::open(ordinal)
    }

    fn flag_table() -> &'static FlagTable {
        &ACL_FLAGS
    }
}
