//! Host callbacks: the `cuLaunchHostFunc` and `cuStreamAddCallback` trampolines (each runs
//! its Rust callback inside `catch_unwind`: no panic crosses into the driver). The whole body
//! of a trampoline runs marked as inside a host callback (`xstream_core::callback::run_guarded`),
//! not only the user's callback: whatever the trampoline drops after it (the slot, the status
//! callback's device state) then knows it is on the driver's callback thread, where no driver
//! call is permitted.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys;
use xstream_core::callback::{run_guarded, CallbackSlot};

use super::{ok, Code, CuResult, CuStream};

/// The `cuLaunchHostFunc` trampoline: `user` is `Arc::into_raw` of a [`CallbackSlot`].
extern "C" fn host_fn_trampoline(user: *mut c_void) {
    let r = run_guarded(|| {
        let _span = tracing::trace_span!("cuda_host_callback").entered();
        // SAFETY: `user` came from `Arc::into_raw(Arc<CallbackSlot>)` in `launch_host_func`,
        // and the driver calls a host function at most once, so the reference is consumed once.
        let slot = unsafe { Arc::from_raw(user as *const CallbackSlot) };
        slot.fire(Ok(()));
    });
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
    let r = run_guarded(|| {
        // SAFETY: `user` came from `Box::into_raw(Box<StatusFn>)` in `stream_add_callback`;
        // CUDA runs each added callback exactly once (driver behaviour in docs/semantics.md: also after a fault).
        let f = unsafe { Box::from_raw(user as *mut StatusFn) };
        f(status as u32);
    });
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

/// Registers `f` to run at process exit (`atexit`). Handlers run in reverse order of
/// registration, so one registered after the driver was initialised runs before the driver's
/// own teardown. Returns whether the C library accepted it.
pub(crate) fn register_at_exit(f: extern "C" fn()) -> bool {
    #[cfg(not(miri))]
    {
        // SAFETY: `f` is a plain `extern "C" fn()` with no arguments; the callers' handlers
        // catch panics, so none unwinds into the C library.
        unsafe { libc::atexit(f) == 0 }
    }
    #[cfg(miri)]
    {
        let _ = f;
        false
    }
}
