//! The one module that touches `cudarc::driver::sys` (the raw driver table), split by area:
//! `context` (library, init, devices, contexts), `stream`, `callback` (trampolines), `graph`
//! (capture and graphs), `event`, `image` (the bounds check of CUDA binaries), `memory` (allocation, copies, memory operations, page-locked
//! host memory), `peer` (peer access and copies between devices), `kernel` (modules and launches), `attribute` (the stream attribute union).
//! Each submodule's items are re-exported here, so the rest of the crate says `ffi::name`.
//!
//! Every function here is a thin, typed wrapper: out-parameters become return values, a
//! `CUresult` other than `CUDA_SUCCESS` becomes `Err(code)` (the raw `u32`), and raw handles
//! travel in `Copy` newtypes. The rest of the crate is `#![deny(unsafe_code)]`.
//!
//! # The invariant the safe wrappers rely on
//! CUDA does not promise to reject a stale handle: a destroyed stream's or event's value may
//! be reused by the driver for a new object, and passing one is undefined behaviour (the
//! `CUDA_ERROR_INVALID_HANDLE` some calls return for it is best effort, not a contract). The
//! wrappers that take handles are therefore safe only because of how this crate holds them:
//! every handle passed in comes from a live owner (a `RawStream` from a live `StreamHandle` or
//! one of the special handles `CU_STREAM_LEGACY` / `CU_STREAM_PER_THREAD`, a `RawEvent` from a
//! live `EventHandle`, a context from a live `Shared`, ...), and owners destroy their handle
//! only in `Drop`, after every holder is gone. The wrappers stay crate-private for that reason.
//!
//! Where soundness depends on what the caller does *after* the call, which no borrow can
//! express, the wrapper is an `unsafe fn` with a `# Safety` section and each caller states why
//! it holds: host memory the device reads or writes after the call returns
//! ([`memcpy_htod_async`], [`memcpy_dtoh_async`] and their page-locked `_span` forms), and
//! device memory freed while work may still use it ([`mem_free`], [`mem_free_async`]). Device
//! ranges passed to the other memory wrappers (memset, device-to-device copies, stream memory
//! operations) are checked by their callers against the buffer they come from.
//!
//! # Threads
//! CUDA driver handles are thread-safe: any thread may pass them to the driver (the driver
//! serialises internally), which is why the handle newtypes are `Send + Sync`. A call that
//! needs a *current* context (creation, allocation, the special stream handles) is preceded by
//! [`bind`], which keeps a per-thread cache of the current `CUcontext`.
#![allow(unsafe_code)]

use cudarc::driver::sys;

/// A failed driver call: the raw `CUresult` value.
pub(crate) type Code = u32;
/// The result of a wrapper.
pub(crate) type CuResult<T> = Result<T, Code>;

/// `CUDA_ERROR_NOT_READY`.
pub(crate) const NOT_READY: Code = 600;
/// `CUDA_ERROR_DEINITIALIZED`: the driver is shutting down (process exit).
pub(crate) const DEINITIALIZED: Code = 4;

#[inline]
fn ok(r: sys::CUresult) -> CuResult<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(r as u32)
    }
}

macro_rules! handle {
    ($(#[$m:meta])* $name:ident, $raw:ty) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name(pub(crate) $raw);

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}({:p})", stringify!($name), self.0)
            }
        }

        impl $name {
            /// The driver's raw pointer value (for interop with other CUDA libraries).
            pub fn as_ptr(self) -> $raw {
                self.0
            }
        }

        // SAFETY: CUDA driver handles are opaque tokens that the driver accepts from any
        // thread (the driver API is thread-safe); the newtype carries no Rust-side data.
        unsafe impl Send for $name {}
        // SAFETY: as for `Send`: sharing the token shares no Rust memory.
        unsafe impl Sync for $name {}
    };
}

handle!(
    /// A raw `CUstream` (`Copy`, `Send + Sync`: driver handles are thread-safe). Never a
    /// stream identity: handles are recycled after destroy; use `Stream::id`.
    CuStream,
    sys::CUstream
);
handle!(
    /// A raw `CUevent`.
    CuEvent,
    sys::CUevent
);
handle!(
    /// A raw `CUcontext`.
    CuContext,
    sys::CUcontext
);
handle!(
    /// A raw `CUgraph` (a captured, not yet instantiated graph).
    CuGraph,
    sys::CUgraph
);
handle!(
    /// A raw `CUgraphExec` (an instantiated graph).
    CuGraphExec,
    sys::CUgraphExec
);
handle!(
    /// A raw `CUgraphNode`, as reported by `cuStreamGetCaptureInfo_v3`.
    CuGraphNode,
    sys::CUgraphNode
);
handle!(
    /// A raw `CUmodule`.
    CuModule,
    sys::CUmodule
);
handle!(
    /// A raw `CUfunction`.
    CuFunction,
    sys::CUfunction
);
handle!(
    /// A raw `CUmemoryPool`.
    CuMemPool,
    sys::CUmemoryPool
);

impl CuStream {
    /// `CU_STREAM_LEGACY`: the legacy default stream of the current context.
    pub const LEGACY: CuStream = CuStream(0x1 as sys::CUstream);
    /// `CU_STREAM_PER_THREAD`: the calling thread's per-thread default stream.
    pub const PER_THREAD: CuStream = CuStream(0x2 as sys::CUstream);
}

impl CuGraph {
    pub(crate) fn is_null(self) -> bool {
        self.0.is_null()
    }
}

mod attribute;
mod callback;
mod context;
mod event;
mod graph;
mod image;
mod ipc;
mod kernel;
mod library;
mod memory;
#[cfg(feature = "nccl")]
pub(crate) mod nccl;
mod peer;
mod stream;
mod vmm;

pub(crate) use self::attribute::*;
pub(crate) use self::callback::*;
pub(crate) use self::context::*;
pub(crate) use self::event::*;
pub(crate) use self::graph::*;
pub(crate) use self::image::*;
pub(crate) use self::ipc::*;
pub(crate) use self::kernel::*;
pub(crate) use self::memory::*;
pub(crate) use self::peer::*;
pub(crate) use self::stream::*;
pub(crate) use self::vmm::*;
