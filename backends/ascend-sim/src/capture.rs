//! Capture and model run instances (`aclmdlRI*`): the `Capture` and `Ri` objects, the
//! thread's capture mode, the "illegal during capture" rules, capture begin / info / end, the
//! build API on persistent streams, execute and destroy.

use crate::codes::*;
use crate::device::*;
use crate::error::*;
use crate::registry::*;
use crate::stream::*;
use crate::task::*;
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::Arc;
use std::sync::Mutex;

#[derive(Default)]
pub(crate) struct RiState {
    pub(crate) tasks: Vec<Task>,
    pub(crate) built: bool,
    pub(crate) bound: Vec<Arc<Stream>>,
}

/// An `aclmdlRI`.
#[derive(Default)]
pub(crate) struct Ri {
    pub(crate) st: Mutex<RiState>,
}

#[derive(Default)]
pub(crate) struct CapState {
    pub(crate) active: bool,
    pub(crate) invalidated: bool,
    pub(crate) joined: Vec<Arc<Stream>>,
}

/// An active (or ended) capture.
pub(crate) struct Capture {
    pub(crate) origin: usize,
    pub(crate) mode: i32,
    pub(crate) thread: u64,
    pub(crate) ri: Arc<Ri>,
    pub(crate) st: Mutex<CapState>,
}

impl Capture {
    pub(crate) fn invalidate(&self) {
        lock(&self.st).invalidated = true;
    }
}

/// Active captures.
pub(crate) static CAPTURES: Mutex<Vec<Arc<Capture>>> = Mutex::new(Vec::new());

thread_local! {
    static CAP_MODE: Cell<i32> = const { Cell::new(ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) };
}

/// Thread capture-interaction mode (`aclmdlRICaptureThreadExchangeMode`).
pub(crate) fn exchange_cap_mode(new: i32) -> i32 {
    CAP_MODE.with(|c| c.replace(new))
}

/// Captures that forbid unsafe calls (default stream, device sync) on the calling thread.
/// Simplification: only the capturing thread is affected (unless it switched to RELAXED).
pub(crate) fn captures_affecting_me() -> Vec<Arc<Capture>> {
    let me = self_tid();
    let mode = CAP_MODE.with(|c| c.get());
    if mode == ACL_MODEL_RI_CAPTURE_MODE_RELAXED {
        return Vec::new();
    }
    lock(&CAPTURES)
        .iter()
        .filter(|c| c.thread == me && c.mode != ACL_MODEL_RI_CAPTURE_MODE_RELAXED)
        .cloned()
        .collect()
}

/// Refuses a call that is illegal while the calling thread captures: invalidates every
/// capture affecting the thread and returns `code` with `what`; `Ok` outside a capture.
pub(crate) fn refuse_in_capture(code: i32, what: &str) -> R {
    let caps = captures_affecting_me();
    if caps.is_empty() {
        return Ok(());
    }
    for c in caps {
        c.invalidate();
    }
    err(code, what)
}

/// Rejects use of a default stream by a thread inside capture (invalidating the capture).
pub(crate) fn check_default_in_capture(s: &Stream) -> R {
    if s.is_default {
        return refuse_in_capture(
            ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT,
            "default stream used during capture",
        );
    }
    Ok(())
}

fn new_ri() -> Arc<Ri> {
    let ri = Arc::new(Ri::default());
    lock(reg())
        .ris
        .insert(Arc::as_ptr(&ri) as usize, ri.clone());
    ri
}

/// `aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode)`: default stream
/// → 107031; already capturing → 107027; persistent stream → 107000.
///
/// # Safety
/// `stream` is a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICaptureBegin(stream: *mut c_void, mode: i32) -> i32 {
    ffi("aclmdlRICaptureBegin", true, || {
        // The ACL layer's NULL check runs before the runtime's default-stream rule.
        non_null(stream, "stream")?;
        if !(0..=2).contains(&mode) {
            return err(ACL_ERROR_INVALID_PARAM, format!("bad capture mode {mode}"));
        }
        let ctx = cur_ctx()?;
        let s = stream_of(stream)?;
        if s.is_default {
            return err(
                ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT,
                "cannot capture the default stream",
            );
        }
        if !Arc::ptr_eq(&s.ctx, &ctx) {
            return err(
                ACL_ERROR_RT_STREAM_CONTEXT,
                "stream not in the current context",
            );
        }
        if s.flags & ACL_STREAM_PERSISTENT != 0 {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                "cannot capture a persistent stream",
            );
        }
        s.ctx.check_poison()?;
        let mut g = lock(&s.st);
        if g.capture.as_ref().is_some_and(|c| lock(&c.st).active) {
            return err(ACL_ERROR_RT_STREAM_CAPTURED, "stream is already capturing");
        }
        let cap = Arc::new(Capture {
            origin: Arc::as_ptr(&s) as usize,
            mode,
            thread: self_tid(),
            ri: new_ri(),
            st: Mutex::new(CapState {
                active: true,
                ..Default::default()
            }),
        });
        g.capture = Some(cap.clone());
        lock(&CAPTURES).push(cap);
        Ok(())
    })
}

/// `aclError aclmdlRICaptureGetInfo(aclrtStream, aclmdlRICaptureStatus*, aclmdlRI*)`:
/// NONE=0 / ACTIVE=1 / INVALIDATED=2; `modelRI` optional.
///
/// # Safety
/// Non-NULL out-pointers must be valid for writes.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICaptureGetInfo(
    stream: *mut c_void,
    status: *mut i32,
    model_ri: *mut *mut c_void,
) -> i32 {
    ffi("aclmdlRICaptureGetInfo", true, || {
        non_null(status, "status")?;
        let s = stream_of(stream)?;
        let (st, ri) = match s.capture() {
            Some(c) => {
                let v = if lock(&c.st).invalidated {
                    ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED
                } else {
                    ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE
                };
                (v, Arc::as_ptr(&c.ri) as *mut c_void)
            }
            None => (ACL_MODEL_RI_CAPTURE_STATUS_NONE, std::ptr::null_mut()),
        };
        // SAFETY: caller contract.
        unsafe {
            put(status, st)?;
            if !model_ri.is_null() {
                put(model_ri, ri)?;
            }
        }
        Ok(())
    })
}

/// `aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI* modelRI)`: not capturing →
/// 107029; joined (non-origin) stream → 107036; other thread in non-RELAXED mode → 107038;
/// invalidated capture → 507903 (capture ends, `*modelRI` = NULL).
///
/// # Safety
/// `model_ri` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICaptureEnd(
    stream: *mut c_void,
    model_ri: *mut *mut c_void,
) -> i32 {
    ffi("aclmdlRICaptureEnd", true, || {
        non_null(model_ri, "modelRI")?;
        let s = stream_of(stream)?;
        let Some(cap) = s.capture() else {
            return err(ACL_ERROR_RT_STREAM_NOT_CAPTURED, "stream is not capturing");
        };
        if cap.origin != Arc::as_ptr(&s) as usize {
            return err(
                ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED,
                "capture began on another stream",
            );
        }
        if cap.mode != ACL_MODEL_RI_CAPTURE_MODE_RELAXED && cap.thread != self_tid() {
            return err(
                ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD,
                "capture began on another thread",
            );
        }
        let (invalid, joined) = {
            let mut c = lock(&cap.st);
            c.active = false;
            (c.invalidated, std::mem::take(&mut c.joined))
        };
        lock(&CAPTURES).retain(|c| !Arc::ptr_eq(c, &cap));
        for j in joined.iter().chain(std::iter::once(&s)) {
            let mut g = lock(&j.st);
            if g.capture.as_ref().is_some_and(|c| Arc::ptr_eq(c, &cap)) {
                g.capture = None;
            }
        }
        if invalid {
            lock(reg()).ris.remove(&(Arc::as_ptr(&cap.ri) as usize));
            // SAFETY: caller contract.
            unsafe { put(model_ri, std::ptr::null_mut())? };
            return err(
                ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED,
                "capture was invalidated",
            );
        }
        lock(&cap.ri.st).built = true;
        // SAFETY: caller contract.
        unsafe { put(model_ri, Arc::as_ptr(&cap.ri) as *mut c_void) }
    })
}

/// `aclError aclmdlRICaptureThreadExchangeMode(aclmdlRICaptureMode* mode)`: swaps the calling
/// thread's capture-interaction mode.
///
/// # Safety
/// `mode` must be NULL or valid for reads and writes.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICaptureThreadExchangeMode(mode: *mut i32) -> i32 {
    ffi("aclmdlRICaptureThreadExchangeMode", true, || {
        non_null(mode, "mode")?;
        // SAFETY: non-NULL; caller contract.
        let new = unsafe { mode.read() };
        if !(0..=2).contains(&new) {
            return err(ACL_ERROR_INVALID_PARAM, format!("bad capture mode {new}"));
        }
        let old = exchange_cap_mode(new);
        // SAFETY: caller contract.
        unsafe { put(mode, old) }
    })
}

fn built_tasks(ri: &Ri) -> R<Vec<Task>> {
    let g = lock(&ri.st);
    if !g.built {
        return err(ACL_ERROR_RT_PARAM_INVALID, "model RI is not complete");
    }
    Ok(g.tasks.clone())
}

/// `aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream)`: replays the recorded
/// tasks in order on `stream`.
///
/// # Safety
/// Handles are lookup keys; resources used by the recorded tasks must still be alive.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIExecuteAsync(model_ri: *mut c_void, stream: *mut c_void) -> i32 {
    ffi("aclmdlRIExecuteAsync", true, || {
        let ri = ri_of(model_ri)?;
        let tasks = built_tasks(&ri)?;
        let s = enqueue_stream(stream)?;
        s.push_all(&tasks)
    })
}

/// `aclError aclmdlRIExecute(aclmdlRI modelRI, int32_t timeout)`: replays synchronously on an
/// internal stream of the current context; ms, -1 forever, 0 or < -1 → 107000, expiry → 507046.
///
/// # Safety
/// `model_ri` is a lookup key; resources used by the recorded tasks must still be alive.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIExecute(model_ri: *mut c_void, timeout: i32) -> i32 {
    ffi("aclmdlRIExecute", true, || {
        let ri = ri_of(model_ri)?;
        let tasks = built_tasks(&ri)?;
        let dl = deadline(timeout, ACL_ERROR_RT_PARAM_INVALID)?;
        let ctx = cur_ctx()?;
        ctx.check_poison()?;
        let s = new_stream(&ctx, 0, 0, false, true)?;
        s.push_all(&tasks)?;
        s.wait_idle(dl, ACL_ERROR_RT_STREAM_SYNC_TIMEOUT)
    })
}

/// `aclError aclmdlRIDestroy(aclmdlRI modelRI)`.
///
/// # Safety
/// `model_ri` is a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIDestroy(model_ri: *mut c_void) -> i32 {
    ffi("aclmdlRIDestroy", true, || {
        let ri = ri_of(model_ri)?;
        if !lock(&ri.st).built && lock(&CAPTURES).iter().any(|c| Arc::ptr_eq(&c.ri, &ri)) {
            return err(
                ACL_ERROR_RT_STREAM_CAPTURED,
                "model RI is still being captured",
            );
        }
        lock(reg()).ris.remove(&(model_ri as usize));
        // Lock order is ri.st → s.st (see aclmdlRIBuildEnd); release ri.st first anyway.
        let bound = std::mem::take(&mut lock(&ri.st).bound);
        for s in bound {
            lock(&s.st).bound_ri = None;
        }
        Ok(())
    })
}

/// `aclError aclmdlRIBuildBegin(aclmdlRI* modelRI, uint32_t flag)`.
///
/// # Safety
/// `model_ri` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIBuildBegin(model_ri: *mut *mut c_void, flag: u32) -> i32 {
    let _ = flag;
    ffi("aclmdlRIBuildBegin", true, || {
        non_null(model_ri, "modelRI")?;
        let ri = new_ri();
        // SAFETY: caller contract.
        unsafe { put(model_ri, Arc::as_ptr(&ri) as *mut c_void) }
    })
}

/// `aclError aclmdlRIBindStream(aclmdlRI modelRI, aclrtStream stream, uint32_t flag)`: the
/// stream must be PERSISTENT and unbound (else 107000).
///
/// # Safety
/// Handles are lookup keys.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIBindStream(
    model_ri: *mut c_void,
    stream: *mut c_void,
    flag: u32,
) -> i32 {
    let _ = flag;
    ffi("aclmdlRIBindStream", true, || {
        let ri = ri_of(model_ri)?;
        let s = stream_of(stream)?;
        if s.flags & ACL_STREAM_PERSISTENT == 0 {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                "only PERSISTENT streams can be bound",
            );
        }
        let mut g = lock(&s.st);
        if g.bound_ri.is_some() {
            return err(ACL_ERROR_RT_PARAM_INVALID, "stream already bound");
        }
        g.bound_ri = Some(model_ri as usize);
        drop(g);
        lock(&ri.st).bound.push(s.clone());
        Ok(())
    })
}

fn bound_to(ri_h: *mut c_void, stream: *mut c_void) -> R<(Arc<Ri>, Arc<Stream>)> {
    let ri = ri_of(ri_h)?;
    let s = stream_of(stream)?;
    if lock(&s.st).bound_ri != Some(ri_h as usize) {
        return err(
            ACL_ERROR_RT_PARAM_INVALID,
            "stream not bound to this model RI",
        );
    }
    Ok((ri, s))
}

/// `aclError aclmdlRIEndTask(aclmdlRI modelRI, aclrtStream stream)`: marks the end of the
/// stream's task list (bookkeeping only in the simulator).
///
/// # Safety
/// Handles are lookup keys.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIEndTask(model_ri: *mut c_void, stream: *mut c_void) -> i32 {
    ffi("aclmdlRIEndTask", true, || {
        bound_to(model_ri, stream).map(|_| ())
    })
}

/// `aclError aclmdlRIBuildEnd(aclmdlRI modelRI, void* reserve)`: the body becomes the tasks of
/// all bound persistent streams, in issue order.
///
/// # Safety
/// `model_ri` is a lookup key; `reserve` is ignored.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIBuildEnd(model_ri: *mut c_void, reserve: *mut c_void) -> i32 {
    let _ = reserve;
    ffi("aclmdlRIBuildEnd", true, || {
        let ri = ri_of(model_ri)?;
        let mut g = lock(&ri.st);
        let mut all: Vec<(u64, Task)> = Vec::new();
        for s in &g.bound {
            all.extend(lock(&s.st).persistent.iter().cloned());
        }
        all.sort_by_key(|(seq, _)| *seq);
        g.tasks = all.into_iter().map(|(_, t)| t).collect();
        g.built = true;
        Ok(())
    })
}

/// `aclError aclmdlRIUnbindStream(aclmdlRI modelRI, aclrtStream stream)`.
///
/// # Safety
/// Handles are lookup keys.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIUnbindStream(model_ri: *mut c_void, stream: *mut c_void) -> i32 {
    ffi("aclmdlRIUnbindStream", true, || {
        let (ri, s) = bound_to(model_ri, stream)?;
        lock(&s.st).bound_ri = None;
        lock(&ri.st).bound.retain(|b| !Arc::ptr_eq(b, &s));
        Ok(())
    })
}
