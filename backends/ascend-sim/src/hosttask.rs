//! Host tasks: `xsimLaunchHostTask` / `xsimHostTaskCancelled`, a **simulator-only** extension
//! (not part of ACL) through which another simulated library loaded in the same process (the
//! HCCL simulator `backends/hccl-sim`) runs its work in stream order on this simulator's
//! streams, the way a real collective library enqueues its tasks on ACL streams.
//!
//! A host task is a C function `int32_t fn(void* user, const void* token)`. It is called
//! **exactly once**:
//! * on the stream's worker, in order with the stream's other tasks, with a non-NULL `token`
//!   that [`xsimHostTaskCancelled`] accepts while the call lasts. A long wait inside `fn` must
//!   poll it and return once it answers 1 (the stream was aborted or force-destroyed, or its
//!   context is poisoned). A non-zero return value is an ACL error code: the task failed like
//!   a device fault (the exception callback sees the code, the stream's context is poisoned
//!   with it, so synchronize returns it);
//! * or with `token` NULL when the task will never run (the stream was aborted or destroyed
//!   first, or its context is poisoned), so that `fn` can release `user`.
//!
//! Host tasks are not captured: on a capturing or persistent stream the launch returns
//! `ACL_ERROR_RT_FEATURE_NOT_SUPPORT` (207000). The stream need not belong to the calling
//! thread's current context (a collective library enqueues for several devices from one
//! thread).

use crate::codes::*;
use crate::error::*;
use crate::registry::*;
use crate::stream::*;
use crate::task::*;
use std::ffi::c_void;
use std::panic::catch_unwind;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

/// The C type of a host task: `int32_t (*)(void* user, const void* token)`.
pub type XsimHostTaskFn = unsafe extern "C" fn(*mut c_void, *const c_void) -> i32;

struct HostTask {
    f: XsimHostTaskFn,
    user: usize,
    /// Still to be called (run, or released when dropped unrun).
    pending: AtomicBool,
}

/// What a token points to while a host task runs.
struct Token<'a> {
    stream: &'a Stream,
    epoch: u64,
}

impl ExtTask for HostTask {
    fn run(&self, stream: &Stream, epoch: u64) {
        if !self.pending.swap(false, SeqCst) {
            return;
        }
        let tok = Token { stream, epoch };
        let f = self.f;
        let user = self.user as *mut c_void;
        let tp = &tok as *const Token<'_> as *const c_void;
        // SAFETY: the launcher promised `f` is callable with `user`; `tp` stays valid for the
        // call. A panic of `f` (a Rust function) is caught here.
        let rc = catch_unwind(AssertUnwindSafe(|| unsafe { f(user, tp) }))
            .unwrap_or(ACL_ERROR_RT_INTERNAL_ERROR);
        if rc != ACL_SUCCESS {
            crate::exception::raise(stream, rc);
            stream.ctx.poison.store(rc, SeqCst);
        }
    }
}

impl Drop for HostTask {
    fn drop(&mut self) {
        if self.pending.swap(false, SeqCst) {
            let f = self.f;
            let user = self.user as *mut c_void;
            // SAFETY: as in `run`; a NULL token tells `f` that the task will never run.
            let _ = catch_unwind(AssertUnwindSafe(|| unsafe { f(user, std::ptr::null()) }));
        }
    }
}

/// `aclError xsimLaunchHostTask(aclrtStream stream, int32_t (*fn)(void*, const void*), void*
/// user)`: enqueues the host task `fn(user, token)` on `stream` (see the module docs). On an
/// error return `fn` is never called.
///
/// # Safety
/// `fn` must be callable with `user` from any thread until it has been called once.
#[no_mangle]
pub unsafe extern "C" fn xsimLaunchHostTask(
    stream: *mut c_void,
    f: Option<XsimHostTaskFn>,
    user: *mut c_void,
) -> i32 {
    ffi("xsimLaunchHostTask", true, || {
        let Some(f) = f else {
            return err(ACL_ERROR_INVALID_PARAM, "fn is NULL");
        };
        non_null(stream, "stream")?;
        let s = stream_of(stream)?;
        if s.capture().is_some() || s.flags & ACL_STREAM_PERSISTENT != 0 {
            return err(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                "host tasks are not captured",
            );
        }
        s.ctx.check_poison()?;
        let t = HostTask {
            f,
            user: user as usize,
            pending: AtomicBool::new(true),
        };
        // On failure the task is dropped unrun: it must not call `fn` then.
        let t = Arc::new(t);
        let r = s.push(Task::Ext(t.clone()));
        if r.is_err() {
            t.pending.store(false, SeqCst);
        }
        r
    })
}

/// `int32_t xsimHostTaskCancelled(const void* token)`: 1 when the running host task whose
/// token this is should stop (stream aborted or force-destroyed, context poisoned), else 0;
/// 1 for a NULL token.
///
/// # Safety
/// `token` must be NULL or the token passed to a host task that is still running.
#[no_mangle]
pub unsafe extern "C" fn xsimHostTaskCancelled(token: *const c_void) -> i32 {
    if token.is_null() {
        return 1;
    }
    // SAFETY: the caller passes the token of a running host task (a live `Token`).
    let t = unsafe { &*(token as *const Token<'_>) };
    catch_unwind(AssertUnwindSafe(|| {
        i32::from(t.stream.cancelled(t.epoch) || t.stream.ctx.poisoned() != 0)
    }))
    .unwrap_or(1)
}
