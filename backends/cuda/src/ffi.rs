//! The one module that touches `cudarc::driver::sys` (the raw driver table).
//!
//! Every function here is a thin, typed wrapper: out-parameters become return values, a
//! `CUresult` other than `CUDA_SUCCESS` becomes `Err(code)` (the raw `u32`), and raw handles
//! travel in `Copy` newtypes. The rest of the crate is `#![deny(unsafe_code)]`.
//!
//! # The invariant the safe wrappers rely on
//! The wrappers are crate-private and safe to call because the crate only passes handles it
//! keeps alive: a `RawStream` comes from a live `StreamHandle` (or is one of the special handles
//! `CU_STREAM_LEGACY` / `CU_STREAM_PER_THREAD`), a `RawEvent` from a live `EventHandle`, and so
//! on. The driver itself validates handles and returns `CUDA_ERROR_INVALID_HANDLE` /
//! `CUDA_ERROR_INVALID_CONTEXT` for stale ones rather than touching freed memory.
//!
//! # Threads
//! CUDA driver handles are thread-safe: any thread may pass them to the driver (the driver
//! serialises internally), which is why the handle newtypes are `Send + Sync`. A call that
//! needs a *current* context (creation, allocation, the special stream handles) is preceded by
//! [`bind`], which keeps a per-thread cache of the current `CUcontext`.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::ffi::{c_void, CStr};
use std::mem::MaybeUninit;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::Arc;

use cudarc::driver::sys;
use xstream_core::callback::CallbackSlot;

/// A failed driver call: the raw `CUresult` value.
pub(crate) type Code = u32;
/// The result of a wrapper.
pub(crate) type CuResult<T> = Result<T, Code>;

/// `CUDA_ERROR_NOT_READY`.
pub(crate) const NOT_READY: Code = 600;

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

// ---------------------------------------------------------------------------------------------
// Library, init, devices, contexts

/// Whether libcuda can be opened (never panics; cudarc panics at the first call otherwise).
pub(crate) fn culib_present() -> bool {
    // SAFETY: only tries to dlopen the candidate names and drops the handles.
    unsafe { sys::is_culib_present() }
}

/// `cuInit(0)`.
pub(crate) fn init() -> CuResult<()> {
    // SAFETY: no pointers; the library is present (checked by the caller).
    ok(unsafe { sys::cuInit(0) })
}

/// `cuDriverGetVersion`.
pub(crate) fn driver_version() -> CuResult<i32> {
    let mut v = 0;
    // SAFETY: `v` is a valid out-pointer.
    ok(unsafe { sys::cuDriverGetVersion(&mut v) })?;
    Ok(v)
}

/// `cuDeviceGetCount`.
pub(crate) fn device_count() -> CuResult<i32> {
    let mut n = 0;
    // SAFETY: `n` is a valid out-pointer.
    ok(unsafe { sys::cuDeviceGetCount(&mut n) })?;
    Ok(n)
}

/// `cuDeviceGetAttribute`.
pub(crate) fn device_attribute(dev: sys::CUdevice, attr: sys::CUdevice_attribute) -> CuResult<i32> {
    let mut v = 0;
    // SAFETY: `v` is a valid out-pointer.
    ok(unsafe { sys::cuDeviceGetAttribute(&mut v, attr, dev) })?;
    Ok(v)
}

/// `cuDeviceGetDefaultMemPool`.
pub(crate) fn device_default_mem_pool(dev: sys::CUdevice) -> CuResult<CuMemPool> {
    let mut p = MaybeUninit::uninit();
    // SAFETY: `p` is a valid out-pointer, written on success.
    ok(unsafe { sys::cuDeviceGetDefaultMemPool(p.as_mut_ptr(), dev) })?;
    // SAFETY: written by the driver on success.
    Ok(CuMemPool(unsafe { p.assume_init() }))
}

thread_local! {
    /// The context this crate last made current on this thread (a cache: `cuCtxSetCurrent` is
    /// only called when it differs).
    static CURRENT: Cell<usize> = const { Cell::new(0) };
    /// Whether this thread already switched itself to RELAXED capture mode.
    static RELAXED: Cell<bool> = const { Cell::new(false) };
}

/// Makes `ctx` current on the calling thread unless the per-thread cache says it already is.
pub(crate) fn bind(ctx: CuContext) -> CuResult<()> {
    let want = ctx.0 as usize;
    if CURRENT.with(|c| c.get()) == want {
        return Ok(());
    }
    // SAFETY: `ctx` is the retained primary context of a live device.
    ok(unsafe { sys::cuCtxSetCurrent(ctx.0) })?;
    CURRENT.with(|c| c.set(want));
    Ok(())
}

/// Forgets the per-thread cache, so the next [`bind`] calls `cuCtxSetCurrent` (for threads that
/// also switch contexts through other libraries).
pub(crate) fn forget_bound_context() {
    CURRENT.with(|c| c.set(0));
}

/// `cuCtxGetStreamPriorityRange` of the current context: `(least, greatest)`.
pub(crate) fn ctx_stream_priority_range() -> CuResult<(i32, i32)> {
    let (mut least, mut greatest) = (0, 0);
    // SAFETY: valid out-pointers.
    ok(unsafe { sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest) })?;
    Ok((least, greatest))
}

/// `cuCtxSynchronize` of the current context.
pub(crate) fn ctx_synchronize() -> CuResult<()> {
    // SAFETY: no arguments.
    ok(unsafe { sys::cuCtxSynchronize() })
}

/// Switches the calling thread to RELAXED capture mode, once per thread: for xstream's own
/// threads (poller, dispatcher), so that their queries never invalidate a user's GLOBAL capture
/// (reference row 9).
pub(crate) fn ensure_relaxed_capture_mode() {
    if RELAXED.with(|r| r.replace(true)) {
        return;
    }
    let mut mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
    // SAFETY: `mode` is a valid in/out pointer.
    let r = ok(unsafe { sys::cuThreadExchangeStreamCaptureMode(&mut mode) });
    if let Err(code) = r {
        tracing::warn!(code, "cuThreadExchangeStreamCaptureMode(RELAXED) failed");
    }
}

/// `cuThreadExchangeStreamCaptureMode`: sets the calling thread's mode, returns the old one.
pub(crate) fn exchange_capture_mode(
    mode: sys::CUstreamCaptureMode,
) -> CuResult<sys::CUstreamCaptureMode> {
    let mut m = mode;
    // SAFETY: `m` is a valid in/out pointer.
    ok(unsafe { sys::cuThreadExchangeStreamCaptureMode(&mut m) })?;
    Ok(m)
}

/// Wraps a raw stream of `ctx` as a cudarc stream that cudarc will not destroy.
pub(crate) fn cudarc_wrap_borrowed(
    ctx: &Arc<cudarc::driver::CudaContext>,
    s: CuStream,
) -> Arc<cudarc::driver::CudaStream> {
    // SAFETY: `s` belongs to `ctx` (created in it, or a special handle of it); the wrapper is
    // non-owning, and xstream keeps the handle alive as long as the wrapper can be reached
    // through xstream (see `StreamHandle`'s drop, which never destroys a handle whose cudarc
    // wrapper is still shared).
    unsafe { ctx.wrap_borrowed_stream(s.0) }
}

// ---------------------------------------------------------------------------------------------
// Streams

/// `cuStreamCreate`.
pub(crate) fn stream_create(flags: u32) -> CuResult<CuStream> {
    let mut s = ptr::null_mut();
    // SAFETY: `s` is a valid out-pointer; the caller bound the context.
    ok(unsafe { sys::cuStreamCreate(&mut s, flags) })?;
    Ok(CuStream(s))
}

/// `cuStreamCreateWithPriority`.
pub(crate) fn stream_create_with_priority(flags: u32, priority: i32) -> CuResult<CuStream> {
    let mut s = ptr::null_mut();
    // SAFETY: `s` is a valid out-pointer; the caller bound the context.
    ok(unsafe { sys::cuStreamCreateWithPriority(&mut s, flags, priority) })?;
    Ok(CuStream(s))
}

/// `cuStreamDestroy` (returns at once; the driver releases the stream after its work).
pub(crate) fn stream_destroy(s: CuStream) -> CuResult<()> {
    // SAFETY: `s` is an owned stream that is never used again.
    ok(unsafe { sys::cuStreamDestroy_v2(s.0) })
}

/// `cuStreamQuery`: `Ok` when idle, `Err(NOT_READY)` when busy.
pub(crate) fn stream_query(s: CuStream) -> CuResult<()> {
    // SAFETY: `s` is live (module invariant).
    ok(unsafe { sys::cuStreamQuery(s.0) })
}

/// `cuStreamSynchronize`.
pub(crate) fn stream_synchronize(s: CuStream) -> CuResult<()> {
    // SAFETY: `s` is live.
    ok(unsafe { sys::cuStreamSynchronize(s.0) })
}

/// `cuStreamWaitEvent`.
pub(crate) fn stream_wait_event(s: CuStream, e: CuEvent, flags: u32) -> CuResult<()> {
    // SAFETY: both handles are live.
    ok(unsafe { sys::cuStreamWaitEvent(s.0, e.0, flags) })
}

/// `cuStreamGetFlags`.
pub(crate) fn stream_get_flags(s: CuStream) -> CuResult<u32> {
    let mut f = 0;
    // SAFETY: valid out-pointer; `s` live.
    ok(unsafe { sys::cuStreamGetFlags(s.0, &mut f) })?;
    Ok(f)
}

/// `cuStreamGetPriority`.
pub(crate) fn stream_get_priority(s: CuStream) -> CuResult<i32> {
    let mut p = 0;
    // SAFETY: valid out-pointer; `s` live.
    ok(unsafe { sys::cuStreamGetPriority(s.0, &mut p) })?;
    Ok(p)
}

/// `cuStreamGetId`.
pub(crate) fn stream_get_id(s: CuStream) -> CuResult<u64> {
    let mut id = 0;
    // SAFETY: valid out-pointer; `s` live.
    ok(unsafe { sys::cuStreamGetId(s.0, &mut id) })?;
    Ok(id)
}

/// `cuStreamGetDevice`.
pub(crate) fn stream_get_device(s: CuStream) -> CuResult<i32> {
    let mut d = 0;
    // SAFETY: valid out-pointer; `s` live.
    ok(unsafe { sys::cuStreamGetDevice(s.0, &mut d) })?;
    Ok(d)
}

/// `cuStreamGetCtx`.
pub(crate) fn stream_get_ctx(s: CuStream) -> CuResult<CuContext> {
    let mut c = ptr::null_mut();
    // SAFETY: valid out-pointer; `s` live.
    ok(unsafe { sys::cuStreamGetCtx(s.0, &mut c) })?;
    Ok(CuContext(c))
}

/// `cuStreamGetCtx_v2`: `(context, green context address or 0)`.
pub(crate) fn stream_get_ctx_v2(s: CuStream) -> CuResult<(CuContext, usize)> {
    let mut c = ptr::null_mut();
    let mut g = ptr::null_mut();
    // SAFETY: valid out-pointers; `s` live.
    ok(unsafe { sys::cuStreamGetCtx_v2(s.0, &mut c, &mut g) })?;
    Ok((CuContext(c), g as usize))
}

/// `cuStreamGetAttribute`.
pub(crate) fn stream_get_attribute(
    s: CuStream,
    id: sys::CUstreamAttrID,
) -> CuResult<sys::CUstreamAttrValue> {
    let mut v = MaybeUninit::<sys::CUstreamAttrValue>::zeroed();
    // SAFETY: `v` is a valid, zeroed out-pointer of the union type; `s` live.
    ok(unsafe { sys::cuStreamGetAttribute(s.0, id, v.as_mut_ptr()) })?;
    // SAFETY: zero-initialised plain-data union, written by the driver on success.
    Ok(unsafe { v.assume_init() })
}

/// `cuStreamSetAttribute`.
pub(crate) fn stream_set_attribute(
    s: CuStream,
    id: sys::CUstreamAttrID,
    v: &sys::CUstreamAttrValue,
) -> CuResult<()> {
    // SAFETY: `v` points to a valid value for the duration of the call; `s` live.
    ok(unsafe { sys::cuStreamSetAttribute(s.0, id, v) })
}

/// `cuStreamCopyAttributes`.
pub(crate) fn stream_copy_attributes(dst: CuStream, src: CuStream) -> CuResult<()> {
    // SAFETY: both live.
    ok(unsafe { sys::cuStreamCopyAttributes(dst.0, src.0) })
}

/// `cuStreamAttachMemAsync`.
pub(crate) fn stream_attach_mem_async(
    s: CuStream,
    ptr: u64,
    len: usize,
    flags: u32,
) -> CuResult<()> {
    // SAFETY: `ptr` is a live managed allocation of the caller; `s` live.
    ok(unsafe { sys::cuStreamAttachMemAsync(s.0, ptr, len, flags) })
}

// ---------------------------------------------------------------------------------------------
// Host callbacks

/// The `cuLaunchHostFunc` trampoline: `user` is `Arc::into_raw` of a [`CallbackSlot`].
extern "C" fn host_fn_trampoline(user: *mut c_void) {
    let r = catch_unwind(AssertUnwindSafe(|| {
        let _span = tracing::trace_span!("cuda_host_callback").entered();
        // SAFETY: `user` came from `Arc::into_raw(Arc<CallbackSlot>)` in `launch_host_func`,
        // and the driver calls a host function at most once, so the reference is consumed once.
        let slot = unsafe { Arc::from_raw(user as *const CallbackSlot) };
        slot.fire(Ok(()));
    }));
    if r.is_err() {
        tracing::error!(
            "panic escaped a CUDA host function (dropped, not unwound into the driver)"
        );
    }
}

/// `cuLaunchHostFunc` of a slot. On success the driver owns one reference of `slot` until the
/// host function runs (if it never runs, after a context fault, that reference leaks: the
/// slot itself is failed by xstream). On failure the reference is reclaimed and dropped, and
/// the callback inside is **not** called.
pub(crate) fn launch_host_func(s: CuStream, slot: Arc<CallbackSlot>) -> CuResult<()> {
    let raw = Arc::into_raw(slot) as *mut c_void;
    // SAFETY: the trampoline matches `CUhostFn`; `raw` stays valid until the trampoline
    // consumes it; `s` live.
    let r = ok(unsafe { sys::cuLaunchHostFunc(s.0, Some(host_fn_trampoline), raw) });
    if r.is_err() {
        // SAFETY: the driver refused the call, so it will never run the trampoline: the
        // reference made above is still ours.
        drop(unsafe { Arc::from_raw(raw as *const CallbackSlot) });
    }
    r
}

/// A status-carrying callback (`cuStreamAddCallback`): called with the raw `CUresult`.
pub(crate) type StatusFn = Box<dyn FnOnce(Code) + Send + 'static>;

extern "C" fn stream_callback_trampoline(
    _stream: sys::CUstream,
    status: sys::CUresult,
    user: *mut c_void,
) {
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `user` came from `Box::into_raw(Box<StatusFn>)` in `stream_add_callback`;
        // CUDA runs each added callback exactly once (reference row 6: also after a fault).
        let f = unsafe { Box::from_raw(user as *mut StatusFn) };
        f(status as u32);
    }));
    if r.is_err() {
        tracing::error!("panic escaped a CUDA stream callback");
    }
}

/// `cuStreamAddCallback`. On failure the callback is dropped without being called.
pub(crate) fn stream_add_callback(s: CuStream, f: StatusFn) -> CuResult<()> {
    let raw = Box::into_raw(Box::new(f)) as *mut c_void;
    // SAFETY: the trampoline matches `CUstreamCallback`; flags must be 0; `s` live.
    let r = ok(unsafe { sys::cuStreamAddCallback(s.0, Some(stream_callback_trampoline), raw, 0) });
    if r.is_err() {
        // SAFETY: refused, so the driver never calls the trampoline; the box is still ours.
        drop(unsafe { Box::from_raw(raw as *mut StatusFn) });
    }
    r
}

// ---------------------------------------------------------------------------------------------
// Capture and graphs

/// `cuStreamBeginCapture` (the `_v2` symbol, which takes a mode).
pub(crate) fn stream_begin_capture(s: CuStream, mode: sys::CUstreamCaptureMode) -> CuResult<()> {
    // SAFETY: `s` live.
    ok(unsafe { sys::cuStreamBeginCapture_v2(s.0, mode) })
}

/// `cuStreamBeginCaptureToGraph` with no dependencies.
pub(crate) fn stream_begin_capture_to_graph(
    s: CuStream,
    g: CuGraph,
    mode: sys::CUstreamCaptureMode,
) -> CuResult<()> {
    // SAFETY: `s` and `g` live; zero dependencies with null arrays.
    ok(unsafe { sys::cuStreamBeginCaptureToGraph(s.0, g.0, ptr::null(), ptr::null(), 0, mode) })
}

/// `cuStreamEndCapture`. The graph may be null on failure.
pub(crate) fn stream_end_capture(s: CuStream) -> (CuResult<()>, CuGraph) {
    let mut g = ptr::null_mut();
    // SAFETY: valid out-pointer; `s` live.
    let r = ok(unsafe { sys::cuStreamEndCapture(s.0, &mut g) });
    (r, CuGraph(g))
}

/// `cuStreamIsCapturing`.
pub(crate) fn stream_is_capturing(s: CuStream) -> CuResult<sys::CUstreamCaptureStatus> {
    let mut st = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: valid out-pointer; `s` live.
    ok(unsafe { sys::cuStreamIsCapturing(s.0, &mut st) })?;
    Ok(st)
}

/// What `cuStreamGetCaptureInfo_v3` reports.
pub(crate) struct RawCaptureInfo {
    pub status: sys::CUstreamCaptureStatus,
    pub id: u64,
    pub graph: CuGraph,
    pub deps: Vec<CuGraphNode>,
}

/// `cuStreamGetCaptureInfo_v3` (edge data is not copied out).
pub(crate) fn stream_get_capture_info(s: CuStream) -> CuResult<RawCaptureInfo> {
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let mut id = 0u64;
    let mut graph = ptr::null_mut();
    let mut deps: *const sys::CUgraphNode = ptr::null();
    let mut edges: *const sys::CUgraphEdgeData = ptr::null();
    let mut n = 0usize;
    // SAFETY: all out-pointers are valid; `s` live.
    ok(unsafe {
        sys::cuStreamGetCaptureInfo_v3(
            s.0,
            &mut status,
            &mut id,
            &mut graph,
            &mut deps,
            &mut edges,
            &mut n,
        )
    })?;
    let deps = if deps.is_null() || n == 0 {
        Vec::new()
    } else {
        // SAFETY: the driver returned an array of `n` nodes, valid until the next capture
        // call on this stream; it is copied at once.
        unsafe { std::slice::from_raw_parts(deps, n) }
            .iter()
            .map(|&d| CuGraphNode(d))
            .collect()
    };
    Ok(RawCaptureInfo {
        status,
        id,
        graph: CuGraph(graph),
        deps,
    })
}

/// `cuStreamUpdateCaptureDependencies_v2` (no edge data).
pub(crate) fn stream_update_capture_dependencies(
    s: CuStream,
    nodes: &[CuGraphNode],
    flags: u32,
) -> CuResult<()> {
    let mut raw: Vec<sys::CUgraphNode> = nodes.iter().map(|n| n.0).collect();
    // SAFETY: `raw` holds `raw.len()` nodes for the duration of the call; null edge data
    // means default edges; `s` live.
    ok(unsafe {
        sys::cuStreamUpdateCaptureDependencies_v2(
            s.0,
            raw.as_mut_ptr(),
            ptr::null(),
            raw.len(),
            flags,
        )
    })
}

/// `cuGraphCreate`.
pub(crate) fn graph_create() -> CuResult<CuGraph> {
    let mut g = ptr::null_mut();
    // SAFETY: valid out-pointer.
    ok(unsafe { sys::cuGraphCreate(&mut g, 0) })?;
    Ok(CuGraph(g))
}

/// `cuGraphGetNodes` (count only).
pub(crate) fn graph_node_count(g: CuGraph) -> CuResult<usize> {
    let mut n = 0usize;
    // SAFETY: null node array asks for the count only; `g` live.
    ok(unsafe { sys::cuGraphGetNodes(g.0, ptr::null_mut(), &mut n) })?;
    Ok(n)
}

/// `cuGraphInstantiateWithFlags(flags = 0)`.
pub(crate) fn graph_instantiate(g: CuGraph) -> CuResult<CuGraphExec> {
    let mut e = ptr::null_mut();
    // SAFETY: valid out-pointer; `g` live.
    ok(unsafe { sys::cuGraphInstantiateWithFlags(&mut e, g.0, 0) })?;
    Ok(CuGraphExec(e))
}

/// `cuGraphLaunch`.
pub(crate) fn graph_launch(e: CuGraphExec, s: CuStream) -> CuResult<()> {
    // SAFETY: both live.
    ok(unsafe { sys::cuGraphLaunch(e.0, s.0) })
}

/// `cuGraphDestroy`.
pub(crate) fn graph_destroy(g: CuGraph) -> CuResult<()> {
    // SAFETY: `g` is owned and never used again.
    ok(unsafe { sys::cuGraphDestroy(g.0) })
}

/// `cuGraphExecDestroy`.
pub(crate) fn graph_exec_destroy(e: CuGraphExec) -> CuResult<()> {
    // SAFETY: `e` is owned and never used again.
    ok(unsafe { sys::cuGraphExecDestroy(e.0) })
}

// ---------------------------------------------------------------------------------------------
// Events

/// `cuEventCreate`.
pub(crate) fn event_create(flags: u32) -> CuResult<CuEvent> {
    let mut e = ptr::null_mut();
    // SAFETY: valid out-pointer; context bound by the caller.
    ok(unsafe { sys::cuEventCreate(&mut e, flags) })?;
    Ok(CuEvent(e))
}

/// `cuEventRecord`.
pub(crate) fn event_record(e: CuEvent, s: CuStream) -> CuResult<()> {
    // SAFETY: both live.
    ok(unsafe { sys::cuEventRecord(e.0, s.0) })
}

/// `cuEventQuery`.
pub(crate) fn event_query(e: CuEvent) -> CuResult<()> {
    // SAFETY: live.
    ok(unsafe { sys::cuEventQuery(e.0) })
}

/// `cuEventSynchronize`.
pub(crate) fn event_synchronize(e: CuEvent) -> CuResult<()> {
    // SAFETY: live.
    ok(unsafe { sys::cuEventSynchronize(e.0) })
}

/// `cuEventElapsedTime_v2` (the only elapsed-time binding of the CUDA 13.0 headers).
pub(crate) fn event_elapsed_ms(start: CuEvent, end: CuEvent) -> CuResult<f32> {
    let mut ms = 0f32;
    // SAFETY: valid out-pointer; both live.
    ok(unsafe { sys::cuEventElapsedTime_v2(&mut ms, start.0, end.0) })?;
    Ok(ms)
}

/// `cuEventDestroy`.
pub(crate) fn event_destroy(e: CuEvent) -> CuResult<()> {
    // SAFETY: owned, never used again.
    ok(unsafe { sys::cuEventDestroy_v2(e.0) })
}

// ---------------------------------------------------------------------------------------------
// Memory

/// `cuMemAlloc`.
pub(crate) fn mem_alloc(len: usize) -> CuResult<u64> {
    let mut p = 0;
    // SAFETY: valid out-pointer; context bound.
    ok(unsafe { sys::cuMemAlloc_v2(&mut p, len) })?;
    Ok(p)
}

/// `cuMemAllocManaged`.
pub(crate) fn mem_alloc_managed(len: usize, flags: u32) -> CuResult<u64> {
    let mut p = 0;
    // SAFETY: valid out-pointer; context bound.
    ok(unsafe { sys::cuMemAllocManaged(&mut p, len, flags) })?;
    Ok(p)
}

/// `cuMemFree`.
pub(crate) fn mem_free(p: u64) -> CuResult<()> {
    // SAFETY: `p` is an allocation this crate owns and no pending work uses.
    ok(unsafe { sys::cuMemFree_v2(p) })
}

/// `cuMemAllocFromPoolAsync`.
pub(crate) fn mem_alloc_from_pool_async(len: usize, pool: CuMemPool, s: CuStream) -> CuResult<u64> {
    let mut p = 0;
    // SAFETY: valid out-pointer; pool and stream live.
    ok(unsafe { sys::cuMemAllocFromPoolAsync(&mut p, len, pool.0, s.0) })?;
    Ok(p)
}

/// `cuMemAllocAsync` (from the device's current pool).
pub(crate) fn mem_alloc_async(len: usize, s: CuStream) -> CuResult<u64> {
    let mut p = 0;
    // SAFETY: valid out-pointer; stream live.
    ok(unsafe { sys::cuMemAllocAsync(&mut p, len, s.0) })?;
    Ok(p)
}

/// `cuMemFreeAsync`.
pub(crate) fn mem_free_async(p: u64, s: CuStream) -> CuResult<()> {
    // SAFETY: `p` came from a stream-ordered allocation; `s` live.
    ok(unsafe { sys::cuMemFreeAsync(p, s.0) })
}

/// `cuMemsetD8Async`.
pub(crate) fn memset_d8_async(p: u64, value: u8, len: usize, s: CuStream) -> CuResult<()> {
    // SAFETY: the range lies inside a live allocation (checked by the caller); `s` live.
    ok(unsafe { sys::cuMemsetD8Async(p, value, len, s.0) })
}

/// `cuStreamWaitValue32` (the `_v2` symbol, CUDA >= 11.7): `flags` is a
/// `CU_STREAM_WAIT_VALUE_*` comparison.
pub(crate) fn stream_wait_value32(s: CuStream, addr: u64, value: u32, flags: u32) -> CuResult<()> {
    // SAFETY: `addr` is an aligned word inside a live allocation the stream keeps (checked by
    // the caller); `s` is live.
    ok(unsafe { sys::cuStreamWaitValue32_v2(s.0, addr, value, flags) })
}

/// `cuStreamWaitValue64` (`_v2`).
pub(crate) fn stream_wait_value64(s: CuStream, addr: u64, value: u64, flags: u32) -> CuResult<()> {
    // SAFETY: as in `stream_wait_value32`.
    ok(unsafe { sys::cuStreamWaitValue64_v2(s.0, addr, value, flags) })
}

/// `cuStreamWriteValue32` (`_v2`, `CU_STREAM_WRITE_VALUE_DEFAULT`).
pub(crate) fn stream_write_value32(s: CuStream, addr: u64, value: u32) -> CuResult<()> {
    // SAFETY: as in `stream_wait_value32`.
    ok(unsafe { sys::cuStreamWriteValue32_v2(s.0, addr, value, 0) })
}

/// `cuStreamWriteValue64` (`_v2`, `CU_STREAM_WRITE_VALUE_DEFAULT`).
pub(crate) fn stream_write_value64(s: CuStream, addr: u64, value: u64) -> CuResult<()> {
    // SAFETY: as in `stream_wait_value32`.
    ok(unsafe { sys::cuStreamWriteValue64_v2(s.0, addr, value, 0) })
}

/// `cuMemcpyHtoDAsync`. `src` must stay alive until the copy has consumed it: for pageable
/// memory (every `Vec`) CUDA stages the source before returning (CUDA "API synchronization
/// behavior"); during capture the caller keeps it alive with the graph.
pub(crate) fn memcpy_htod_async(dst: u64, src: &[u8], s: CuStream) -> CuResult<()> {
    // SAFETY: `src` is valid for `src.len()` bytes during the call (see above for later);
    // the destination range was checked by the caller.
    ok(unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src.as_ptr() as *const c_void, src.len(), s.0) })
}

/// `cuMemcpyDtoHAsync`. The caller keeps `dst`'s heap memory alive (not moved: a `Box`'s
/// contents) until the stream got past the copy.
pub(crate) fn memcpy_dtoh_async(dst: &mut [u8], src: u64, s: CuStream) -> CuResult<()> {
    // SAFETY: `dst` is valid for writes of `dst.len()` bytes and kept alive by the caller
    // until completion; the source range was checked.
    ok(unsafe { sys::cuMemcpyDtoHAsync_v2(dst.as_mut_ptr() as *mut c_void, src, dst.len(), s.0) })
}

/// `cuMemcpyDtoDAsync`.
pub(crate) fn memcpy_dtod_async(dst: u64, src: u64, len: usize, s: CuStream) -> CuResult<()> {
    // SAFETY: both ranges checked by the caller; `s` live.
    ok(unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, len, s.0) })
}

/// `cuMemcpyHtoDAsync` from page-locked memory: a true asynchronous copy. `src` is a span
/// of a live page-locked allocation that the caller keeps alive (stream keep list) until the
/// stream got past the copy.
pub(crate) fn memcpy_htod_async_span(
    dst: u64,
    src: &xstream_core::HostSpan,
    s: CuStream,
) -> CuResult<()> {
    // SAFETY: the span lies inside a live allocation that the caller keeps until completion
    // and that host code does not touch meanwhile (HostBuffer fence); destination checked.
    ok(unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src.as_ptr() as *const c_void, src.len(), s.0) })
}

/// `cuMemcpyDtoHAsync` into page-locked memory; as [`memcpy_htod_async_span`].
pub(crate) fn memcpy_dtoh_async_span(
    dst: &xstream_core::HostSpan,
    src: u64,
    s: CuStream,
) -> CuResult<()> {
    // SAFETY: as in `memcpy_htod_async_span`; the host buffer was borrowed mutably to
    // enqueue this copy, so no host reference to those bytes is alive.
    ok(unsafe { sys::cuMemcpyDtoHAsync_v2(dst.as_ptr() as *mut c_void, src, dst.len(), s.0) })
}

/// `cuMemPoolSetAttribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)`.
pub(crate) fn mem_pool_set_release_threshold(pool: CuMemPool, bytes: u64) -> CuResult<()> {
    let mut v: u64 = bytes;
    // SAFETY: live pool; the attribute takes a pointer to a cuuint64_t.
    ok(unsafe {
        sys::cuMemPoolSetAttribute(
            pool.0,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            &mut v as *mut u64 as *mut c_void,
        )
    })
}

/// Page-locked host memory from `cuMemHostAlloc`, or caller memory page-locked with
/// `cuMemHostRegister`; released (`cuMemFreeHost` / `cuMemHostUnregister`) on drop.
#[derive(Debug)]
pub(crate) struct PinnedAlloc {
    ptr: *mut u8,
    len: usize,
    ctx: CuContext,
    ordinal: usize,
    /// The caller's memory, for a registration (unregistered, then dropped).
    registered: Option<Vec<u8>>,
}

// SAFETY: the pointer is plain host memory owned by this value; access is synchronised by the
// HostBuffer fence.
unsafe impl Send for PinnedAlloc {}
// SAFETY: as above.
unsafe impl Sync for PinnedAlloc {}

impl PinnedAlloc {
    /// `cuMemHostAlloc(len, flags)` in the bound context, zeroed.
    pub(crate) fn alloc(ctx: CuContext, ordinal: usize, len: usize, flags: u32) -> CuResult<Self> {
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: valid out-pointer; context bound by the caller.
        ok(unsafe { sys::cuMemHostAlloc(&mut p, len, flags) })?;
        // SAFETY: the driver returned `len` writable bytes at `p`.
        unsafe { ptr::write_bytes(p as *mut u8, 0, len) };
        Ok(Self {
            ptr: p as *mut u8,
            len,
            ctx,
            ordinal,
            registered: None,
        })
    }

    /// `cuMemHostRegister` of the caller's bytes (taken over; returned to nobody).
    pub(crate) fn register(
        ctx: CuContext,
        ordinal: usize,
        mut v: Vec<u8>,
        flags: u32,
    ) -> CuResult<Self> {
        let (p, len) = (v.as_mut_ptr(), v.len());
        // SAFETY: the Vec's heap block is valid for `len` bytes and is not moved or freed
        // before the unregistration in `drop` (the Vec is kept in `registered`).
        ok(unsafe { sys::cuMemHostRegister_v2(p as *mut c_void, len, flags) })?;
        Ok(Self {
            ptr: p,
            len,
            ctx,
            ordinal,
            registered: Some(v),
        })
    }
}

impl Drop for PinnedAlloc {
    fn drop(&mut self) {
        let (p, ctx, reg) = (self.ptr as usize, self.ctx, self.registered.take());
        let free = move || {
            if bind(ctx).is_ok() {
                // SAFETY: `p` came from cuMemHostAlloc / cuMemHostRegister of this context and
                // no queued copy uses it (its last user dropped its keep-alive clone).
                let r = unsafe {
                    if reg.is_some() {
                        sys::cuMemHostUnregister(p as *mut c_void)
                    } else {
                        sys::cuMemFreeHost(p as *mut c_void)
                    }
                };
                if r != sys::CUresult::CUDA_SUCCESS {
                    tracing::debug!(code = r as u32, "releasing page-locked host memory failed");
                }
            }
            drop(reg);
        };
        if xstream_core::callback::in_callback() {
            xstream_core::callback::dispatch(Box::new(move || {
                ensure_relaxed_capture_mode();
                free();
            }));
        } else {
            free();
        }
    }
}

// SAFETY: `ptr` is fixed for the value's life and valid for `len` bytes (driver allocation or
// the kept Vec's block).
unsafe impl xstream_core::HostAllocation for PinnedAlloc {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn page_locked(&self) -> bool {
        true
    }
    fn ordinal(&self) -> usize {
        self.ordinal
    }
}

// ---------------------------------------------------------------------------------------------
// Modules and kernels

/// `cuModuleLoadData` of NUL-terminated PTX text.
pub(crate) fn module_load_data(ptx: &CStr) -> CuResult<CuModule> {
    let mut m = ptr::null_mut();
    // SAFETY: `ptx` is NUL-terminated text, valid during the call; context bound.
    ok(unsafe { sys::cuModuleLoadData(&mut m, ptx.as_ptr() as *const c_void) })?;
    Ok(CuModule(m))
}

/// `cuModuleGetFunction`.
pub(crate) fn module_get_function(m: CuModule, name: &CStr) -> CuResult<CuFunction> {
    let mut f = ptr::null_mut();
    // SAFETY: valid out-pointer; `m` live; `name` NUL-terminated.
    ok(unsafe { sys::cuModuleGetFunction(&mut f, m.0, name.as_ptr()) })?;
    Ok(CuFunction(f))
}

/// `cuModuleUnload`.
pub(crate) fn module_unload(m: CuModule) -> CuResult<()> {
    // SAFETY: owned, never used again.
    ok(unsafe { sys::cuModuleUnload(m.0) })
}

fn launch(
    f: CuFunction,
    s: CuStream,
    grid: u32,
    block: u32,
    params: &mut [*mut c_void],
) -> CuResult<()> {
    // SAFETY: `params` points to one pointer per kernel parameter, each pointing to a value
    // of the parameter's PTX type, all alive during the call (the driver copies them).
    ok(unsafe {
        sys::cuLaunchKernel(
            f.0,
            grid,
            1,
            1,
            block,
            1,
            1,
            0,
            s.0,
            params.as_mut_ptr(),
            ptr::null_mut(),
        )
    })
}

/// Launches `xs_delay(u64 ns)` on one thread.
pub(crate) fn launch_delay(f: CuFunction, s: CuStream, ns: u64) -> CuResult<()> {
    let mut ns = ns;
    launch(f, s, 1, 1, &mut [&mut ns as *mut u64 as *mut c_void])
}

/// Launches `xs_lcg(u32* data, u64 words, u32 rounds)`.
pub(crate) fn launch_lcg(
    f: CuFunction,
    s: CuStream,
    grid: u32,
    block: u32,
    data: u64,
    words: u64,
    rounds: u32,
) -> CuResult<()> {
    let (mut d, mut w, mut r) = (data, words, rounds);
    launch(
        f,
        s,
        grid,
        block,
        &mut [
            &mut d as *mut u64 as *mut c_void,
            &mut w as *mut u64 as *mut c_void,
            &mut r as *mut u32 as *mut c_void,
        ],
    )
}

/// Launches `xs_fault()` (a store to address 0).
pub(crate) fn launch_fault(f: CuFunction, s: CuStream) -> CuResult<()> {
    launch(f, s, 1, 1, &mut [])
}

// ---------------------------------------------------------------------------------------------
// Stream attribute values (a C union)

/// Reads the `priority` member of an attribute value written for `CU_LAUNCH_ATTRIBUTE_PRIORITY`.
pub(crate) fn attr_priority(v: &sys::CUstreamAttrValue) -> i32 {
    // SAFETY: plain-data union, zero-initialised before the driver wrote it; any bit pattern
    // is a valid `c_int`.
    unsafe { v.priority }
}

/// Reads the `syncPolicy` member (written for `CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY`).
pub(crate) fn attr_sync_policy(v: &sys::CUstreamAttrValue) -> sys::CUsynchronizationPolicy {
    // SAFETY: read as a raw `u32` first so an unexpected value cannot produce an invalid enum.
    let raw: u32 = unsafe { v.priority } as u32;
    match raw {
        2 => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_SPIN,
        3 => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_YIELD,
        4 => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_BLOCKING_SYNC,
        _ => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_AUTO,
    }
}

/// Reads the `accessPolicyWindow` member (for `CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW`).
pub(crate) fn attr_access_policy_window(v: &sys::CUstreamAttrValue) -> sys::CUaccessPolicyWindow {
    // SAFETY: the window's enum fields are read as raw integers below, so no invalid enum
    // value is ever materialised; the pointer and numbers are plain data.
    let w: &RawWindow = unsafe { &*(v as *const sys::CUstreamAttrValue as *const RawWindow) };
    let prop = |p: u32| match p {
        1 => sys::CUaccessProperty::CU_ACCESS_PROPERTY_STREAMING,
        2 => sys::CUaccessProperty::CU_ACCESS_PROPERTY_PERSISTING,
        _ => sys::CUaccessProperty::CU_ACCESS_PROPERTY_NORMAL,
    };
    sys::CUaccessPolicyWindow {
        base_ptr: w.base_ptr,
        num_bytes: w.num_bytes,
        hitRatio: w.hit_ratio,
        hitProp: prop(w.hit_prop),
        missProp: prop(w.miss_prop),
    }
}

/// `CUaccessPolicyWindow` with its enums as raw integers (same layout: `repr(C)`, `u32` enums).
#[repr(C)]
struct RawWindow {
    base_ptr: *mut c_void,
    num_bytes: usize,
    hit_ratio: f32,
    hit_prop: u32,
    miss_prop: u32,
}

const _: () =
    assert!(std::mem::size_of::<RawWindow>() == std::mem::size_of::<sys::CUaccessPolicyWindow>());
const _: () =
    assert!(std::mem::size_of::<RawWindow>() <= std::mem::size_of::<sys::CUstreamAttrValue>());

fn zeroed_attr() -> sys::CUstreamAttrValue {
    // SAFETY: the union is plain C data (integers, floats, pointers, u32 enums whose 0 ... is
    // not read back as an enum by this crate); all-zero bytes are a valid `pad` member.
    unsafe { MaybeUninit::<sys::CUstreamAttrValue>::zeroed().assume_init() }
}

/// An attribute value holding a priority.
pub(crate) fn attr_from_priority(p: i32) -> sys::CUstreamAttrValue {
    let mut v = zeroed_attr();
    v.priority = p;
    v
}

/// An attribute value holding a sync policy.
pub(crate) fn attr_from_sync_policy(p: sys::CUsynchronizationPolicy) -> sys::CUstreamAttrValue {
    let mut v = zeroed_attr();
    v.syncPolicy = p;
    v
}

/// An attribute value holding an access-policy window.
pub(crate) fn attr_from_access_policy_window(
    w: sys::CUaccessPolicyWindow,
) -> sys::CUstreamAttrValue {
    let mut v = zeroed_attr();
    v.accessPolicyWindow = w;
    v
}
