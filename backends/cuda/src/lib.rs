//! # xstream-cuda
//!
//! The CUDA backend of xstream, over the CUDA **driver** API through
//! [cudarc](https://docs.rs/cudarc) 0.19 (`driver`, `fallback-dynamic-loading`, by default the
//! `cuda-13000` bindings: libcuda is opened at run time, so this crate builds and its tests run,
//! as skips, on machines without a GPU). The cudarc it was built with is re-exported as
//! [`cudarc`], so interop types ([`CudaStream::from_cudarc`], ...) match by construction; a crate
//! with its own cudarc dependency of a compatible version (`0.19`) gets the same one.
//!
//! ## Modules
//! | layer | module | what |
//! |---|---|---|
//! | sys | `cudarc::driver::sys` | the raw table (cudarc) |
//! | result | `ffi` (private), `ffi/` | the only `unsafe` code: typed wrappers, trampolines, handle newtypes; one file per area (context, stream, callback, graph, event, memory, kernel, attribute) |
//! | backend | `lib.rs` | [`CudaBackend`]: availability probe, device count, open |
//! | device | `device` | [`CudaDevice`]: primary context, pending callbacks, sticky state, kernels |
//! | stream | `stream`, `stream/` | [`CudaStream`]: the portable impl; `stream/`: create, capture, callback, memory, memop, attribute, native (CUDA-only), drop |
//! | event | `event`, `event_pool` | [`CudaEvent`]; the context's internal pool of ordering events (joins, stream-ordered frees) |
//! | graph | `graph` | [`CudaGraph`]: instantiate once, replay with `cuGraphLaunch` |
//! | memory | [`memory`], `hostmem` | [`CudaBuffer`], managed and stream-ordered memory; page-locked host memory; cudarc slices adopted ([`CudaBuffer::from_cudarc`]) |
//! | modules | [`module`], `nvrtc` (feature `nvrtc`) | [`CudaModule`], [`CudaFunction`]: PTX / cubin / fatbin loading, parameter layouts, checked launches; NVRTC compilation |
//! | tables | [`conv`], [`error`] | flags, enums, `CUresult` mapping |
//! | collectives | `collective` (feature `nccl`), `ffi/nccl.rs` | `NcclComm`: NCCL communicators on xstream streams |
//!
//! ## Design choices
//! - **Availability never panics.** cudarc's run-time loader panics at the first driver call
//!   when libcuda is absent; [`CudaBackend::availability`] first checks that libcuda opens
//!   (`ffi/library.rs`, which works with every cudarc loading mode), then `cuInit`, the driver
//!   version (>= 12.8, the newest symbol used: `cuStreamGetDevice`, `cuEventElapsedTime_v2`)
//!   and the device count, and says why in `Error::NotAvailable`.
//! - **Contexts.** A device is its primary context (cudarc `CudaContext`). Every entry point
//!   first refuses calls from inside a host callback (`ensure_not_in_callback`), then binds
//!   the context to the calling thread through a thread-local cache (`cuCtxSetCurrent` only
//!   when it differs; [`CudaDevice::rebind_thread`] after foreign context switches).
//! - **Threads.** Every type is `Send + Sync`: CUDA driver handles are thread-safe.
//! - **Callback failure path.** Host callbacks use `cuLaunchHostFunc` (stream-blocking) with
//!   an `extern "C"` trampoline that receives `Arc::into_raw(CallbackSlot)` and fires it with
//!   `Ok(())` inside `catch_unwind`. CUDA silently drops host functions after a context fault
//!   (driver behaviour in docs/semantics.md), so every slot is also tracked in the device's `PendingCallbacks`:
//!   (1) any call that maps a sticky error poisons the device and fails all pending slots with
//!   it; (2) while any slot is pending, a check registered with the shared poller
//!   (`xstream_core::completion::poll_until`, 10-200 µs period) queries an idle internal
//!   stream (`cuStreamQuery`), which reports the sticky error once the driver detected the
//!   fault (~110-150 ms after it), and fails the slots even if nobody calls xstream. The slot
//!   fires once whichever path comes first. Slots come from the pending list itself
//!   (`PendingCallbacks::slot`): one that fired and that the driver no longer references is
//!   reused for a later callback (at most 256 kept), so a steady stream of callbacks allocates
//!   no slot and none is freed on the driver's or the poller's thread; the watcher's periodic
//!   check looks only at the front of the list (`PendingCallbacks::any_pending`), not at every
//!   slot. The poller thread switches itself to RELAXED
//!   capture mode (`cuThreadExchangeStreamCaptureMode`) so it never invalidates a user capture,
//!   and so do the dispatcher thread and the stream reaper thread (which runs the teardown of
//!   dropped streams, so a drop never waits for the stream's work on the dropping thread, see
//!   docs/semantics.md) when xstream uses them. `cuStreamAddCallback` stays
//!   reachable as [`CudaStream::add_status_callback`] (runs even after a fault, with the
//!   status).
//! - **Timeouts** are emulated: `cuStreamQuery`/`cuEventQuery` plus sleeps starting at 20 µs
//!   and doubling to [`TIMED_WAIT_MAX_NAP`] (100 µs), so a wait wakes at most ~100 µs plus the
//!   sleep's overshoot after the work completes (measured: docs/performance.md). `FAST_SYNC`
//!   streams spin on `cuStreamQuery` instead (one busy core).
//! - **Buffer lifetime**: see [`memory`]: enqueues keep their buffers alive; release is
//!   deferred behind the stream's work with a host function (never an early `cuMemFree`).
//!   `write` relies on CUDA staging pageable sources before `cuMemcpyHtoDAsync` returns (the
//!   bytes are kept with the graph during capture); `read` copies into an owned `Box<[u8]>`
//!   that a host function moves into the `Readback` (for pageable memory CUDA may return from
//!   `cuMemcpyDtoHAsync` only after the copy, so `read` can block the caller).
//! - **Capture** follows `xstream_core::CaptureCell`: query/synchronize/callbacks/read on a
//!   capturing stream are refused before the driver is called, and invalidate the capture
//!   (CUDA's own rule). Driver capture errors map to `Error::Capture` and invalidate too.
//!   `PERSISTENT` streams begin a RELAXED capture at creation and again after each
//!   `end_capture`.
//! - **Kernels.** The builtin module (`xstream_delay`, `xstream_lcg`, and `xs_fault` for
//!   tests) is hand-written PTX (`.version 8.0`, `.target sm_70`, falling back to `sm_90`),
//!   loaded once per device on the same path as users' modules ([`module`]): every launch is
//!   checked against the driver's parameter layout and the device's limits, and allocates
//!   nothing.
//! - **Interop with cudarc** moves no data and keeps one owner per object: streams are
//!   borrowed either way ([`CudaStream::from_cudarc`], [`CudaStream::cudarc_stream`]); events
//!   and slices are adopted ([`CudaEvent::from_cudarc`], [`CudaBuffer::from_cudarc`]: xstream
//!   owns them, cudarc's drop releases them); see docs/semantics.md.

#![deny(unsafe_code)]

#[cfg(feature = "nccl")]
pub mod collective;
pub mod conv;
mod device;
pub mod error;
mod event;
mod event_pool;
#[cfg(unix)]
pub mod fdpass;
mod ffi;
mod flag_memo;
mod graph;
mod hostmem;
pub mod memory;
pub mod module;
#[cfg(feature = "nvrtc")]
mod nvrtc;
mod peer;
mod stream;
pub mod vmm;

use std::sync::OnceLock;

use xstream_core::{Backend, BackendKind, Error, FlagTable, Result};

pub use conv::CUDA_FLAGS;

/// The cudarc this backend is built on; use it (or a `cudarc = "0.19"` dependency, which cargo
/// unifies with it) for the types that cross between xstream and cudarc.
pub use cudarc;

/// The longest sleep between two queries of the emulated `synchronize_timeout` (stream and
/// event): sleeps start at 20 µs and double up to this, bounding the wake-up delay after the
/// work completes. 100 µs keeps the waiting thread at a few percent of a core
/// (docs/performance.md).
pub const TIMED_WAIT_MAX_NAP: std::time::Duration = std::time::Duration::from_micros(100);

/// The sleeps of the emulated `synchronize_timeout` (stream and event): 20 µs, doubling up to
/// [`TIMED_WAIT_MAX_NAP`], through [`xstream_core::sync::wait_with_backoff`].
pub(crate) const TIMED_WAIT_BACKOFF: xstream_core::sync::Backoff =
    xstream_core::sync::Backoff::new(std::time::Duration::from_micros(20), TIMED_WAIT_MAX_NAP);
pub use device::{ptx_source, CudaDevice};
pub use event::CudaEvent;
pub use ffi::{
    CuContext, CuEvent, CuFunction, CuGraph, CuGraphExec, CuGraphNode, CuMemPool, CuModule,
    CuStream,
};
pub use graph::CudaGraph;
#[allow(deprecated)]
pub use hostmem::{CUDA_HOST_MEM_FLAGS, CUDA_HOST_REGISTER_FLAGS};
pub use hostmem::{CUDA_PINNED_FLAGS, CUDA_PINNED_REGISTER_FLAGS};
pub use memory::{CudaAsyncAllocator, CudaBuffer, CudaManagedBuffer};
pub use module::{CudaFunction, CudaModule};
pub use stream::{
    exchange_thread_capture_mode, undispatched_driver_jobs, CaptureInfo, CudaStream,
    DependencyUpdate, MemAttach,
};

/// The oldest driver whose symbols this crate uses (`cuStreamGetDevice`, 12.8).
pub const MIN_DRIVER_VERSION: i32 = 12080;

/// The CUDA backend.
#[derive(Debug, Clone, Copy, Default)]
pub struct CudaBackend;

fn probe() -> std::result::Result<usize, String> {
    if !ffi::culib_present() {
        return Err(
            "libcuda could not be opened (tried libcuda.so, libcuda.so.<major>, ..., libcuda.so.1); put the \
             driver's directory on LD_LIBRARY_PATH (e.g. /usr/local/nvidia/lib64), never the \
             CUDA stubs"
                .into(),
        );
    }
    if let Err(c) = ffi::init() {
        let i = error::code_info(c);
        return Err(format!("cuInit failed with {} ({c})", i.name));
    }
    let v = ffi::driver_version().map_err(|c| {
        format!(
            "cuDriverGetVersion failed with {}",
            error::code_info(c).name
        )
    })?;
    if v < MIN_DRIVER_VERSION {
        return Err(format!(
            "the CUDA driver is {}.{}; xstream-cuda needs >= 12.8",
            v / 1000,
            (v % 1000) / 10
        ));
    }
    let n = ffi::device_count()
        .map_err(|c| format!("cuDeviceGetCount failed with {}", error::code_info(c).name))?;
    if n <= 0 {
        return Err("the CUDA driver reports no device".into());
    }
    Ok(n as usize)
}

fn probed() -> &'static std::result::Result<usize, String> {
    static P: OnceLock<std::result::Result<usize, String>> = OnceLock::new();
    P.get_or_init(probe)
}

pub(crate) fn availability_checked() -> Result<usize> {
    probed().clone().map_err(|reason| Error::NotAvailable {
        backend: BackendKind::Cuda,
        reason,
    })
}

impl Backend for CudaBackend {
    const KIND: BackendKind = BackendKind::Cuda;
    type Device = CudaDevice;
    type Stream = CudaStream;
    type Event = CudaEvent;
    type Graph = CudaGraph;
    type Buffer = CudaBuffer;
    type Module = CudaModule;
    type Function = CudaFunction;

    fn availability() -> Result<()> {
        availability_checked().map(|_| ())
    }

    fn device_count() -> Result<usize> {
        availability_checked()
    }

    fn open(ordinal: usize) -> Result<CudaDevice> {
        xstream_core::ensure_not_in_callback()?;
        availability_checked()?;
        CudaDevice::open(ordinal)
    }

    fn flag_table() -> &'static FlagTable {
        &CUDA_FLAGS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn availability_never_panics() {
        match CudaBackend::availability() {
            Ok(()) => assert!(CudaBackend::device_count().unwrap() > 0),
            Err(Error::NotAvailable { backend, reason }) => {
                assert_eq!(backend, BackendKind::Cuda);
                assert!(!reason.is_empty());
                assert!(CudaBackend::open(0).is_err());
            }
            Err(e) => panic!("unexpected {e:?}"),
        }
    }

    #[test]
    fn ptx_mentions_every_kernel() {
        let p = ptx_source("sm_90");
        for k in [
            "xstream_delay",
            "xstream_lcg",
            ".param .u32 xstream_lcg_words",
            "xs_fault",
            "%globaltimer",
            ".visible .entry xstream_reduce_f32(",
            ".visible .entry xstream_reduce_s32(",
            ".visible .entry xstream_reduce_s16(",
            ".visible .entry xstream_reduce_s8(",
            "ld.global.s8 %v1",
            ".visible .entry xstream_reduce_f16(",
            "cvt.rn.f16.f32 %h3, %f3;",
            ".visible .entry xstream_reduce_bf16(",
            "setp.nan.f32 %q1, %f3, %f3;",
            ".visible .entry xstream_reduce_s64(",
            "ld.global.s64 %v1",
            "xstream_reduce_s8_loop:",
            ".target sm_90",
        ] {
            assert!(p.contains(k), "{k}");
        }
    }
}
