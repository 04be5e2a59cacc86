//! Exported ACL entry points: init, device, context, stream and event APIs.

use crate::codes::*;
use crate::stream::*;
use crate::AclrtStreamAttrValue;
use std::ffi::{c_char, c_void};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Writes `v` through an out-pointer, rejecting NULL with `ACL_ERROR_INVALID_PARAM`.
///
/// # Safety
/// `p` must be NULL or valid for a write of `T`.
pub(crate) unsafe fn put<T>(p: *mut T, v: T) -> R {
    if p.is_null() {
        return err(ACL_ERROR_INVALID_PARAM, "NULL output pointer");
    }
    // SAFETY: non-NULL, and the caller guarantees validity for writes.
    unsafe { p.write(v) };
    Ok(())
}

/// Rejects a NULL pointer argument with `ACL_ERROR_INVALID_PARAM`.
pub(crate) fn non_null<T>(p: *const T, what: &str) -> R {
    if p.is_null() {
        return err(ACL_ERROR_INVALID_PARAM, format!("{what} is NULL"));
    }
    Ok(())
}

static PRIMARY_LOCK: Mutex<()> = Mutex::new(());

// ---------------------------------------------------------------------------------------------
// Init
// ---------------------------------------------------------------------------------------------

/// `aclError aclInit(const char* configPath)`: reference-counted init; a second call returns
/// 100002 (`ACL_ERROR_REPEAT_INITIALIZE`) and still increments the count. The config is ignored.
///
/// # Safety
/// `config_path` must be NULL or a valid C string (it is not read).
#[no_mangle]
pub unsafe extern "C" fn aclInit(config_path: *const c_char) -> i32 {
    let _ = config_path;
    ffi("aclInit", false, || {
        let mut n = lock(&INIT_COUNT);
        *n += 1;
        if INITED.swap(true, SeqCst) {
            return err(ACL_ERROR_REPEAT_INITIALIZE, "aclInit called again");
        }
        *n = 1;
        Ok(())
    })
}

/// `aclError aclFinalize()`: finalizes at once and zeroes the count; 100037 when not initialized.
/// Simulator choice: resources (contexts, streams) are not torn down.
///
/// # Safety
/// No pointer arguments; always safe to call.
#[no_mangle]
pub unsafe extern "C" fn aclFinalize() -> i32 {
    ffi("aclFinalize", false, || {
        let mut n = lock(&INIT_COUNT);
        if !INITED.swap(false, SeqCst) {
            return err(ACL_ERROR_REPEAT_FINALIZE, "aclFinalize without aclInit");
        }
        *n = 0;
        Ok(())
    })
}

/// `aclError aclFinalizeReference(uint64_t* refCount)`: decrements the init count, finalizing at
/// zero; writes the remaining count.
///
/// # Safety
/// `ref_count` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclFinalizeReference(ref_count: *mut u64) -> i32 {
    ffi("aclFinalizeReference", false, || {
        non_null(ref_count, "refCount")?;
        let mut n = lock(&INIT_COUNT);
        if !INITED.load(SeqCst) {
            return err(ACL_ERROR_REPEAT_FINALIZE, "not initialized");
        }
        *n = n.saturating_sub(1);
        if *n == 0 {
            INITED.store(false, SeqCst);
        }
        // SAFETY: checked non-NULL; caller contract.
        unsafe { put(ref_count, *n) }
    })
}

// ---------------------------------------------------------------------------------------------
// Device and context
// ---------------------------------------------------------------------------------------------

/// `aclError aclrtSetDevice(int32_t deviceId)`: binds the thread to the device's primary context
/// (reference counted). Invalid id → 107001.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetDevice(device_id: i32) -> i32 {
    ffi("aclrtSetDevice", true, || {
        check_device(device_id)?;
        let _g = lock(&PRIMARY_LOCK);
        let existing = lock(reg()).primary.get(&device_id).map(|p| p.0.clone());
        let ctx = match existing {
            Some(c) => c,
            None => {
                let c = new_context(device_id, true)?;
                lock(reg()).primary.insert(device_id, (c.clone(), 0));
                c
            }
        };
        if let Some(p) = lock(reg()).primary.get_mut(&device_id) {
            p.1 += 1;
        }
        set_cur_ctx(Some(ctx));
        Ok(())
    })
}

fn reset_device(device_id: i32, force: bool) -> R {
    check_device(device_id)?;
    let _g = lock(&PRIMARY_LOCK);
    let victim = {
        let mut r = lock(reg());
        let Some(p) = r.primary.get_mut(&device_id) else {
            return Ok(());
        };
        p.1 = p.1.saturating_sub(1);
        if force || p.1 == 0 {
            r.primary.remove(&device_id).map(|p| p.0)
        } else {
            None
        }
    };
    if let Some(c) = victim {
        destroy_context(&c);
    }
    Ok(())
}

/// `aclError aclrtResetDevice(int32_t deviceId)`: releases one reference of the primary context;
/// at zero the context, its streams and pending work are destroyed.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclrtResetDevice(device_id: i32) -> i32 {
    ffi("aclrtResetDevice", true, || reset_device(device_id, false))
}

/// `aclError aclrtResetDeviceForce(int32_t deviceId)`: destroys the primary context regardless
/// of its reference count.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclrtResetDeviceForce(device_id: i32) -> i32 {
    ffi("aclrtResetDeviceForce", true, || {
        reset_device(device_id, true)
    })
}

/// `aclError aclrtGetDevice(int32_t* deviceId)`: device of the current context (107002 if none).
///
/// # Safety
/// `device_id` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDevice(device_id: *mut i32) -> i32 {
    ffi("aclrtGetDevice", true, || {
        non_null(device_id, "deviceId")?;
        let c = cur_ctx()?;
        // SAFETY: caller contract.
        unsafe { put(device_id, c.device) }
    })
}

/// `aclError aclrtGetDeviceCount(uint32_t* count)`: `XSIM_DEVICES` (default 1).
///
/// # Safety
/// `count` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDeviceCount(count: *mut u32) -> i32 {
    // SAFETY: caller contract.
    ffi("aclrtGetDeviceCount", true, || unsafe {
        put(count, device_count())
    })
}

fn sync_device(dl: Option<Instant>) -> R {
    let ctx = cur_ctx()?;
    let caps = captures_affecting_me();
    if !caps.is_empty() {
        for c in caps {
            c.invalidate();
        }
        return err(
            ACL_ERROR_RT_STREAM_CAPTURED,
            "device synchronize during capture",
        );
    }
    let streams: Vec<Arc<Stream>> = lock(reg())
        .streams
        .values()
        .filter(|s| s.ctx.device == ctx.device && !s.sync_noop())
        .cloned()
        .collect();
    for s in streams {
        if s.capture().is_some() {
            continue;
        }
        match s.wait_idle(dl, ACL_ERROR_RT_STREAM_SYNC_TIMEOUT) {
            Ok(()) => {}
            Err(e) if e.code == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT => return Err(e),
            // Poison of another context / aborts of other streams do not fail a device sync.
            Err(_) => {}
        }
    }
    ctx.check_poison()
}

/// `aclError aclrtSynchronizeDevice(void)`: waits for every stream of the current device.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclrtSynchronizeDevice() -> i32 {
    ffi("aclrtSynchronizeDevice", true, || sync_device(None))
}

/// `aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout)`: ms, -1 forever, 0 or < -1 →
/// 107000, expiry → 507046.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclrtSynchronizeDeviceWithTimeout(timeout: i32) -> i32 {
    ffi("aclrtSynchronizeDeviceWithTimeout", true, || {
        sync_device(deadline(timeout, ACL_ERROR_RT_PARAM_INVALID)?)
    })
}

/// `aclError aclrtCreateContext(aclrtContext* context, int32_t deviceId)`: creates a context
/// with its own default stream and makes it current.
///
/// # Safety
/// `context` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateContext(context: *mut *mut c_void, device_id: i32) -> i32 {
    ffi("aclrtCreateContext", true, || {
        non_null(context, "context")?;
        check_device(device_id)?;
        let c = new_context(device_id, false)?;
        let h = Arc::as_ptr(&c) as *mut c_void;
        set_cur_ctx(Some(c));
        // SAFETY: caller contract.
        unsafe { put(context, h) }
    })
}

fn ctx_of(h: *mut c_void) -> R<Arc<Context>> {
    non_null(h, "context")?;
    lock(reg()).ctxs.get(&(h as usize)).cloned().map_or_else(
        || err(ACL_ERROR_INVALID_PARAM, "unknown context handle"),
        Ok,
    )
}

/// `aclError aclrtDestroyContext(aclrtContext context)`: destroys a context created by
/// `aclrtCreateContext` (a primary context → 107000; use `aclrtResetDevice`).
///
/// # Safety
/// `context` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyContext(context: *mut c_void) -> i32 {
    ffi("aclrtDestroyContext", true, || {
        let c = ctx_of(context)?;
        if c.primary {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                "cannot destroy a primary context",
            );
        }
        destroy_context(&c);
        Ok(())
    })
}

/// `aclError aclrtSetCurrentContext(aclrtContext context)`: thread-local switch.
///
/// # Safety
/// `context` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetCurrentContext(context: *mut c_void) -> i32 {
    ffi("aclrtSetCurrentContext", true, || {
        let c = ctx_of(context)?;
        set_cur_ctx(Some(c));
        Ok(())
    })
}

/// `aclError aclrtGetCurrentContext(aclrtContext* context)`: 107002 when none.
///
/// # Safety
/// `context` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetCurrentContext(context: *mut *mut c_void) -> i32 {
    ffi("aclrtGetCurrentContext", true, || {
        non_null(context, "context")?;
        let c = cur_ctx()?;
        // SAFETY: caller contract.
        unsafe { put(context, Arc::as_ptr(&c) as *mut c_void) }
    })
}

/// `aclError aclrtCtxGetCurrentDefaultStream(aclrtStream* stream)`: the current context's
/// default stream handle (usable interchangeably with NULL).
///
/// # Safety
/// `stream` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCtxGetCurrentDefaultStream(stream: *mut *mut c_void) -> i32 {
    ffi("aclrtCtxGetCurrentDefaultStream", true, || {
        non_null(stream, "stream")?;
        let s = cur_ctx()?.default_stream()?;
        // SAFETY: caller contract.
        unsafe { put(stream, s.handle()) }
    })
}

/// `aclError aclrtDeviceGetStreamPriorityRange(int32_t* least, int32_t* greatest)`: 7 and 0.
///
/// # Safety
/// Both pointers must be NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn aclrtDeviceGetStreamPriorityRange(
    least: *mut i32,
    greatest: *mut i32,
) -> i32 {
    ffi("aclrtDeviceGetStreamPriorityRange", true, || {
        non_null(least, "leastPriority")?;
        non_null(greatest, "greatestPriority")?;
        // SAFETY: caller contract, both checked non-NULL.
        unsafe {
            put(least, 7)?;
            put(greatest, 0)
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------------------------------

fn effective_priority(p: u32) -> R<u32> {
    if p <= 7 {
        Ok(p)
    } else if product() == Product::P310 {
        err(
            ACL_ERROR_RT_PARAM_INVALID,
            format!("priority {p} out of range [0,7]"),
        )
    } else {
        Ok(7)
    }
}

pub(crate) fn create_stream(out: *mut *mut c_void, priority: u32, flag: u32) -> R {
    non_null(out, "stream")?;
    let ctx = cur_ctx()?;
    let flags = flag & 0x3F;
    if flags & ACL_STREAM_DEVICE_USE_ONLY != 0 && flags != ACL_STREAM_DEVICE_USE_ONLY {
        return err(
            ACL_ERROR_RT_PARAM_INVALID,
            "DEVICE_USE_ONLY must be the only flag",
        );
    }
    let prio = effective_priority(priority)?;
    let s = new_stream(&ctx, flags, prio, false, false)?;
    // SAFETY: checked non-NULL; caller contract.
    unsafe { put(out, s.handle()) }
}

/// `aclError aclrtCreateStream(aclrtStream* stream)`.
///
/// # Safety
/// `stream` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateStream(stream: *mut *mut c_void) -> i32 {
    ffi("aclrtCreateStream", true, || create_stream(stream, 0, 0))
}

/// `aclError aclrtCreateStreamWithConfig(aclrtStream* stream, uint32_t priority, uint32_t flag)`.
///
/// # Safety
/// `stream` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateStreamWithConfig(
    stream: *mut *mut c_void,
    priority: u32,
    flag: u32,
) -> i32 {
    ffi("aclrtCreateStreamWithConfig", true, || {
        create_stream(stream, priority, flag)
    })
}

fn destroy_stream(h: *mut c_void, force: bool) -> R {
    non_null(h, "stream")?;
    let ctx = cur_ctx()?;
    let s = stream_of(h)?;
    if !Arc::ptr_eq(&s.ctx, &ctx) {
        return err(
            ACL_ERROR_RT_STREAM_CONTEXT,
            "stream does not belong to the current context",
        );
    }
    if s.is_default {
        return err(
            ACL_ERROR_INVALID_PARAM,
            "the default stream cannot be destroyed",
        );
    }
    if s.capture().is_some() {
        return err(ACL_ERROR_RT_STREAM_CAPTURED, "stream is capturing");
    }
    let bound = lock(&s.st).bound_ri.take();
    if let Some(ri) = bound {
        if let Ok(ri) = ri_of(ri as *mut c_void) {
            lock(&ri.st).bound.retain(|b| !Arc::ptr_eq(b, &s));
        }
    }
    if force {
        force_destroy_stream(&s);
    } else {
        // Errors (poison, abort) do not prevent destruction.
        let _ = s.wait_idle(None, ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
        retire_stream(&s);
        s.wait_worker_exit(std::time::Duration::from_secs(2));
    }
    Ok(())
}

/// `aclError aclrtDestroyStream(aclrtStream stream)`: waits for queued work, then destroys.
///
/// # Safety
/// `stream` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyStream(stream: *mut c_void) -> i32 {
    ffi("aclrtDestroyStream", true, || destroy_stream(stream, false))
}

/// `aclError aclrtDestroyStreamForce(aclrtStream stream)`: drops pending work and destroys.
///
/// # Safety
/// `stream` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyStreamForce(stream: *mut c_void) -> i32 {
    ffi("aclrtDestroyStreamForce", true, || {
        destroy_stream(stream, true)
    })
}

fn sync_stream(h: *mut c_void, dl: Option<Instant>) -> R {
    cur_ctx()?;
    let s = stream_of(h)?;
    if s.capture().is_some() {
        // Refused, but the capture stays valid (the runtime does not invalidate it).
        return err(
            ACL_ERROR_RT_STREAM_CAPTURED,
            "synchronize of a capturing stream",
        );
    }
    check_default_in_capture(&s)?;
    if s.sync_noop() {
        return Ok(());
    }
    s.wait_idle(dl, ACL_ERROR_RT_STREAM_SYNC_TIMEOUT)
}

/// `aclError aclrtSynchronizeStream(aclrtStream stream)`: needs some current context.
///
/// # Safety
/// `stream` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtSynchronizeStream(stream: *mut c_void) -> i32 {
    ffi("aclrtSynchronizeStream", true, || sync_stream(stream, None))
}

/// `aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout)`: ms, -1
/// forever, 0 or < -1 → 107000, expiry → 507046.
///
/// # Safety
/// `stream` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtSynchronizeStreamWithTimeout(
    stream: *mut c_void,
    timeout: i32,
) -> i32 {
    ffi("aclrtSynchronizeStreamWithTimeout", true, || {
        sync_stream(stream, deadline(timeout, ACL_ERROR_RT_PARAM_INVALID)?)
    })
}

/// `aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus* status)`:
/// COMPLETE=0 / NOT_READY=1.
///
/// # Safety
/// `status` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamQuery(stream: *mut c_void, status: *mut i32) -> i32 {
    ffi("aclrtStreamQuery", true, || {
        non_null(status, "status")?;
        cur_ctx()?;
        let s = stream_of(stream)?;
        if s.capture().is_some() {
            // Refused, but the capture stays valid (the runtime does not invalidate it).
            return err(ACL_ERROR_RT_STREAM_CAPTURED, "query of a capturing stream");
        }
        check_default_in_capture(&s)?;
        s.ctx.check_poison()?;
        let busy = !s.sync_noop() && lock(&s.st).worker;
        let v = if busy {
            ACL_STREAM_STATUS_NOT_READY
        } else {
            ACL_STREAM_STATUS_COMPLETE
        };
        // SAFETY: caller contract.
        unsafe { put(status, v) }
    })
}

/// `aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event)`: the wait uses the
/// record current at enqueue time; never-recorded events do not block.
///
/// # Safety
/// Handles are only used as lookup keys.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamWaitEvent(stream: *mut c_void, event: *mut c_void) -> i32 {
    ffi("aclrtStreamWaitEvent", true, || {
        let e = event_of(event)?;
        let s = enqueue_stream(stream)?;
        if e.ctx.device != s.ctx.device {
            return err(
                ACL_ERROR_RT_STREAM_CONTEXT,
                "event and stream on different devices",
            );
        }
        let waitable = e.kind == EvKind::Default
            || e.flags & ACL_EVENT_SYNC != 0
            || e.flags == ACL_EVENT_EXTERNAL;
        if !waitable {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                "event without ACL_EVENT_SYNC cannot be waited on",
            );
        }
        let capture_ok = e.kind == EvKind::Ex || e.flags == ACL_EVENT_EXTERNAL;
        let s_cap = s.capture();
        let e_cap = e.active_capture();
        if (s_cap.is_some() || e_cap.is_some()) && !capture_ok {
            if let Some(c) = s_cap.as_ref().or(e_cap.as_ref()) {
                c.invalidate();
            }
            return err(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                "cross-stream capture needs aclrtCreateEventExWithFlag events",
            );
        }
        match (s_cap, e_cap) {
            (_, Some(ec)) => {
                // Dependency inside the capture: joins `s` to the capture if needed.
                let mut g = lock(&s.st);
                let joined = g.capture.as_ref().is_some_and(|c| Arc::ptr_eq(c, &ec));
                if !joined {
                    if g.capture.as_ref().is_some_and(|c| lock(&c.st).active) {
                        ec.invalidate();
                        return err(ACL_ERROR_RT_STREAM_CAPTURED, "stream is in another capture");
                    }
                    g.capture = Some(ec.clone());
                    lock(&ec.st).joined.push(s.clone());
                }
                Ok(())
            }
            _ => s.push(Task::Wait { ev: e, target: 0 }),
        }
    })
}

fn set_failure_mode(h: *mut c_void, mode: u64) -> R {
    if mode > ACL_STOP_ON_FAILURE {
        return err(ACL_ERROR_INVALID_PARAM, format!("bad failure mode {mode}"));
    }
    if h.is_null() && product() != Product::A2 {
        return err(
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
            "default-stream failure mode needs A2/A3/950",
        );
    }
    let s = stream_of(h)?;
    if s.flags & ACL_STREAM_DEVICE_USE_ONLY != 0 {
        return err(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "DEVICE_USE_ONLY stream");
    }
    let mut g = lock(&s.st);
    match g.failure_mode {
        Some(m) if m != mode => err(
            ACL_ERROR_RT_PARAM_INVALID,
            "failure mode may be set once per stream",
        ),
        _ => {
            g.failure_mode = Some(mode);
            Ok(())
        }
    }
}

/// `aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode)`.
///
/// # Safety
/// `stream` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetStreamFailureMode(stream: *mut c_void, mode: u64) -> i32 {
    ffi("aclrtSetStreamFailureMode", true, || {
        set_failure_mode(stream, mode)
    })
}

/// `aclError aclrtStreamGetPriority(aclrtStream stream, uint32_t* priority)`: effective value.
///
/// # Safety
/// `priority` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamGetPriority(stream: *mut c_void, priority: *mut u32) -> i32 {
    ffi("aclrtStreamGetPriority", true, || {
        non_null(priority, "priority")?;
        let s = stream_of(stream)?;
        // SAFETY: caller contract.
        unsafe { put(priority, s.priority.load(SeqCst)) }
    })
}

/// `aclError aclrtStreamGetFlags(aclrtStream stream, uint32_t* flags)`: OR of the kept flags.
///
/// # Safety
/// `flags` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamGetFlags(stream: *mut c_void, flags: *mut u32) -> i32 {
    ffi("aclrtStreamGetFlags", true, || {
        non_null(flags, "flags")?;
        let s = stream_of(stream)?;
        // SAFETY: caller contract.
        unsafe { put(flags, s.flags) }
    })
}

/// `aclError aclrtStreamGetId(aclrtStream stream, int32_t* streamId)`: process-unique,
/// increasing, never reused.
///
/// # Safety
/// `stream_id` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamGetId(stream: *mut c_void, stream_id: *mut i32) -> i32 {
    ffi("aclrtStreamGetId", true, || {
        non_null(stream_id, "streamId")?;
        let s = stream_of(stream)?;
        // SAFETY: caller contract.
        unsafe { put(stream_id, s.id) }
    })
}

/// `aclError aclrtGetStreamAvailableNum(uint32_t* streamCount)`: limit minus live streams
/// (default streams included) of the current device.
///
/// # Safety
/// `stream_count` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetStreamAvailableNum(stream_count: *mut u32) -> i32 {
    ffi("aclrtGetStreamAvailableNum", true, || {
        non_null(stream_count, "streamCount")?;
        let c = cur_ctx()?;
        let left = max_streams().saturating_sub(counts(c.device).0);
        // SAFETY: caller contract.
        unsafe { put(stream_count, left) }
    })
}

/// `aclError aclrtSetStreamAttribute(aclrtStream, aclrtStreamAttr, aclrtStreamAttrValue*)`.
///
/// # Safety
/// `value` must be NULL or point to a readable `aclrtStreamAttrValue`.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetStreamAttribute(
    stream: *mut c_void,
    attr: i32,
    value: *mut AclrtStreamAttrValue,
) -> i32 {
    ffi("aclrtSetStreamAttribute", true, || {
        non_null(value, "value")?;
        // SAFETY: non-NULL; caller contract; every bit pattern is a valid union value.
        let v = unsafe { value.read() };
        match attr {
            ACL_STREAM_ATTR_FAILURE_MODE => {
                // SAFETY: reading the u64 member of a plain-data union.
                set_failure_mode(stream, unsafe { v.failure_mode })
            }
            ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK..=ACL_STREAM_ATTR_CACHE_OP_INFO => {
                let s = stream_of(stream)?;
                // SAFETY: reading a u32 member of a plain-data union.
                lock(&s.st).attrs[attr as usize - 1] = unsafe { v.user_custom_tag };
                Ok(())
            }
            ACL_STREAM_ATTR_PRIORITY => {
                let s = stream_of(stream)?;
                // SAFETY: reading a u32 member of a plain-data union.
                let p = effective_priority(unsafe { v.stream_priority })?;
                s.priority.store(p, SeqCst);
                Ok(())
            }
            _ => err(
                ACL_ERROR_INVALID_PARAM,
                format!("unknown stream attribute {attr}"),
            ),
        }
    })
}

/// `aclError aclrtGetStreamAttribute(aclrtStream, aclrtStreamAttr, aclrtStreamAttrValue*)`.
///
/// # Safety
/// `value` must be NULL or valid for a write of `aclrtStreamAttrValue`.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetStreamAttribute(
    stream: *mut c_void,
    attr: i32,
    value: *mut AclrtStreamAttrValue,
) -> i32 {
    ffi("aclrtGetStreamAttribute", true, || {
        non_null(value, "value")?;
        let s = stream_of(stream)?;
        let g = lock(&s.st);
        let out = match attr {
            ACL_STREAM_ATTR_FAILURE_MODE => AclrtStreamAttrValue {
                failure_mode: g.failure_mode.unwrap_or(ACL_CONTINUE_ON_FAILURE),
            },
            ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK..=ACL_STREAM_ATTR_CACHE_OP_INFO => {
                let mut r = [0u32; 4];
                r[0] = g.attrs[attr as usize - 1];
                AclrtStreamAttrValue { reserve: r }
            }
            ACL_STREAM_ATTR_PRIORITY => AclrtStreamAttrValue {
                reserve: [s.priority.load(SeqCst), 0, 0, 0],
            },
            _ => {
                return err(
                    ACL_ERROR_INVALID_PARAM,
                    format!("unknown stream attribute {attr}"),
                )
            }
        };
        // SAFETY: caller contract.
        unsafe { put(value, out) }
    })
}

/// `aclError aclrtStreamAbort(aclrtStream stream)`: discards queued work; concurrent
/// synchronize calls on the stream return 107023.
///
/// # Safety
/// `stream` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamAbort(stream: *mut c_void) -> i32 {
    ffi("aclrtStreamAbort", true, || {
        let s = stream_of(stream)?;
        s.abort();
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------------

fn create_event(out: *mut *mut c_void, flags: u32, kind: EvKind) -> R {
    non_null(out, "event")?;
    let ctx = cur_ctx()?;
    let e = new_event(&ctx, flags, kind)?;
    // SAFETY: checked non-NULL; caller contract.
    unsafe { put(out, Arc::as_ptr(&e) as *mut c_void) }
}

/// `aclError aclrtCreateEvent(aclrtEvent* event)`: flags `0x4|0x8|0x2` (timeline on).
///
/// # Safety
/// `event` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateEvent(event: *mut *mut c_void) -> i32 {
    ffi("aclrtCreateEvent", true, || {
        create_event(
            event,
            ACL_EVENT_DDSYNC | ACL_EVENT_TIME_LINE | ACL_EVENT_CAPTURE_STREAM_PROGRESS,
            EvKind::Default,
        )
    })
}

/// `aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag)`: mask 0x3F,
/// DEVICE_USE_ONLY/EXTERNAL alone, 0 → 107000.
///
/// # Safety
/// `event` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateEventWithFlag(event: *mut *mut c_void, flag: u32) -> i32 {
    ffi("aclrtCreateEventWithFlag", true, || {
        non_null(event, "event")?;
        let alone = ACL_EVENT_DEVICE_USE_ONLY | ACL_EVENT_EXTERNAL;
        if flag == 0 || flag & !0x3F != 0 || (flag & alone != 0 && flag.count_ones() != 1) {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("invalid event flag {flag:#x}"),
            );
        }
        create_event(event, flag, EvKind::Legacy)
    })
}

/// `aclError aclrtCreateEventExWithFlag(aclrtEvent* event, uint32_t flag)`: mask 0x4F, IPC
/// alone (and then 207000: the simulated chip has no IPC events), 0 → 107000.
///
/// # Safety
/// `event` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateEventExWithFlag(event: *mut *mut c_void, flag: u32) -> i32 {
    ffi("aclrtCreateEventExWithFlag", true, || {
        non_null(event, "event")?;
        if flag == 0 || flag & !0x4F != 0 || (flag & ACL_EVENT_IPC != 0 && flag != ACL_EVENT_IPC) {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("invalid event flag {flag:#x}"),
            );
        }
        if flag == ACL_EVENT_IPC {
            return err(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                "IPC events unsupported on the simulated chip",
            );
        }
        create_event(event, flag, EvKind::Ex)
    })
}

/// `aclError aclrtDestroyEvent(aclrtEvent event)`: does not block.
///
/// # Safety
/// `event` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyEvent(event: *mut c_void) -> i32 {
    ffi("aclrtDestroyEvent", true, || {
        let e = event_of(event)?;
        let mut r = lock(reg());
        if r.events.remove(&(event as usize)).is_some() {
            if let Some(n) = r.event_count.get_mut(&e.ctx.device) {
                *n = n.saturating_sub(1);
            }
        }
        Ok(())
    })
}

/// `aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)`.
///
/// # Safety
/// Handles are only used as lookup keys.
#[no_mangle]
pub unsafe extern "C" fn aclrtRecordEvent(event: *mut c_void, stream: *mut c_void) -> i32 {
    ffi("aclrtRecordEvent", true, || {
        let e = event_of(event)?;
        let s = enqueue_stream(stream)?;
        if e.ctx.device != s.ctx.device {
            return err(
                ACL_ERROR_RT_STREAM_CONTEXT,
                "event and stream on different devices",
            );
        }
        s.push(Task::Record { ev: e, gen: 0 })
    })
}

/// `aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream)`: legacy events only
/// (Ex events → 207000).
///
/// # Safety
/// Handles are only used as lookup keys.
#[no_mangle]
pub unsafe extern "C" fn aclrtResetEvent(event: *mut c_void, stream: *mut c_void) -> i32 {
    ffi("aclrtResetEvent", true, || {
        let e = event_of(event)?;
        let s = enqueue_stream(stream)?;
        if e.kind == EvKind::Ex {
            return err(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "reset of an Ex event");
        }
        if e.ctx.device != s.ctx.device {
            return err(
                ACL_ERROR_RT_STREAM_CONTEXT,
                "event and stream on different devices",
            );
        }
        s.push(Task::Reset(e))
    })
}

fn query_checks(e: &Event) -> R {
    if let Some(c) = e.active_capture() {
        c.invalidate();
        return err(
            ACL_ERROR_RT_EVENT_CAPTURED,
            "event recorded in an active capture",
        );
    }
    e.ctx.check_poison()
}

/// `aclError aclrtQueryEventStatus(aclrtEvent, aclrtEventRecordedStatus*)`: INVERTED enum,
/// NOT_READY=0 / COMPLETE=1; COMPLETE before any record.
///
/// # Safety
/// `status` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtQueryEventStatus(event: *mut c_void, status: *mut i32) -> i32 {
    ffi("aclrtQueryEventStatus", true, || {
        non_null(status, "status")?;
        let e = event_of(event)?;
        query_checks(&e)?;
        let v = if e.is_complete() {
            ACL_EVENT_RECORDED_STATUS_COMPLETE
        } else {
            ACL_EVENT_RECORDED_STATUS_NOT_READY
        };
        // SAFETY: caller contract.
        unsafe { put(status, v) }
    })
}

/// `aclError aclrtQueryEvent(aclrtEvent, aclrtEventStatus*)` (deprecated): COMPLETE=0 /
/// NOT_READY=1; Ex events → 207000.
///
/// # Safety
/// `status` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtQueryEvent(event: *mut c_void, status: *mut i32) -> i32 {
    ffi("aclrtQueryEvent", true, || {
        non_null(status, "status")?;
        let e = event_of(event)?;
        if e.kind == EvKind::Ex {
            return err(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                "aclrtQueryEvent on an Ex event",
            );
        }
        query_checks(&e)?;
        let v = if e.is_complete() {
            ACL_EVENT_STATUS_COMPLETE
        } else {
            ACL_EVENT_STATUS_NOT_READY
        };
        // SAFETY: caller contract.
        unsafe { put(status, v) }
    })
}

/// `aclError aclrtQueryEventWaitStatus(aclrtEvent, aclrtEventWaitStatus*)`: Ex → 207000;
/// WithFlag events without SYNC → 107000.
///
/// # Safety
/// `status` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtQueryEventWaitStatus(event: *mut c_void, status: *mut i32) -> i32 {
    ffi("aclrtQueryEventWaitStatus", true, || {
        non_null(status, "status")?;
        let e = event_of(event)?;
        if e.kind == EvKind::Ex {
            return err(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                "wait status of an Ex event",
            );
        }
        if e.kind == EvKind::Legacy && e.flags & ACL_EVENT_SYNC == 0 {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                "wait status needs ACL_EVENT_SYNC",
            );
        }
        query_checks(&e)?;
        let v = if e.is_complete() {
            ACL_EVENT_WAIT_STATUS_COMPLETE
        } else {
            ACL_EVENT_WAIT_STATUS_NOT_READY
        };
        // SAFETY: caller contract.
        unsafe { put(status, v) }
    })
}

fn sync_event(h: *mut c_void, dl: Option<Instant>) -> R {
    let e = event_of(h)?;
    query_checks(&e)?;
    let mut g = lock(&e.st);
    while !g.latest_done() {
        drop(g);
        e.ctx.check_poison()?;
        let mut slice = std::time::Duration::from_millis(20);
        if let Some(d) = dl {
            let now = Instant::now();
            if now >= d {
                return err(
                    ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
                    "event synchronize timed out",
                );
            }
            slice = slice.min(d - now);
        }
        g = lock(&e.st);
        if g.latest_done() {
            break;
        }
        g =
            e.cv.wait_timeout(g, slice)
                .map_or_else(|p| p.into_inner().0, |r| r.0);
    }
    drop(g);
    e.ctx.check_poison()
}

/// `aclError aclrtSynchronizeEvent(aclrtEvent event)`: needs no context.
///
/// # Safety
/// `event` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtSynchronizeEvent(event: *mut c_void) -> i32 {
    ffi("aclrtSynchronizeEvent", true, || sync_event(event, None))
}

/// `aclError aclrtSynchronizeEventWithTimeout(aclrtEvent, int32_t timeout)`: ms, -1 forever,
/// 0 or < -1 → 107000, expiry → 507047.
///
/// # Safety
/// `event` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtSynchronizeEventWithTimeout(event: *mut c_void, timeout: i32) -> i32 {
    ffi("aclrtSynchronizeEventWithTimeout", true, || {
        sync_event(event, deadline(timeout, ACL_ERROR_RT_PARAM_INVALID)?)
    })
}

fn timestamp_of(e: &Event) -> R<u64> {
    let g = lock(&e.st);
    if !g.recorded {
        return err(ACL_ERROR_RT_INTERNAL_ERROR, "event was never recorded");
    }
    if !e.has_timeline() {
        return err(
            ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
            "event has no ACL_EVENT_TIME_LINE",
        );
    }
    if !g.latest_done() {
        return err(ACL_ERROR_RT_INTERNAL_ERROR, "event not complete yet");
    }
    g.ts_ns.map_or_else(
        || err(ACL_ERROR_RT_INTERNAL_ERROR, "event has no timestamp"),
        Ok,
    )
}

/// `aclError aclrtEventElapsedTime(float* ms, aclrtEvent start, aclrtEvent end)`: end − start
/// in ms (may be negative). Not recorded / not complete → 507000; no timeline → 107006.
///
/// # Safety
/// `ms` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtEventElapsedTime(
    ms: *mut f32,
    start: *mut c_void,
    end: *mut c_void,
) -> i32 {
    ffi("aclrtEventElapsedTime", true, || {
        non_null(ms, "ms")?;
        let (a, b) = (event_of(start)?, event_of(end)?);
        query_checks(&a)?;
        query_checks(&b)?;
        let (ta, tb) = (timestamp_of(&a)?, timestamp_of(&b)?);
        let v = (tb as f64 - ta as f64) / 1e6;
        // SAFETY: caller contract.
        unsafe { put(ms, v as f32) }
    })
}

/// `aclError aclrtEventGetTimestamp(aclrtEvent event, uint64_t* timestamp)`: µs since the
/// simulated device booted (library load).
///
/// # Safety
/// `timestamp` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtEventGetTimestamp(event: *mut c_void, timestamp: *mut u64) -> i32 {
    ffi("aclrtEventGetTimestamp", true, || {
        non_null(timestamp, "timestamp")?;
        let e = event_of(event)?;
        query_checks(&e)?;
        let t = timestamp_of(&e)?;
        // SAFETY: caller contract.
        unsafe { put(timestamp, t / 1000) }
    })
}

/// `aclError aclrtGetEventId(aclrtEvent event, uint32_t* eventId)`: unique, increasing.
///
/// # Safety
/// `event_id` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetEventId(event: *mut c_void, event_id: *mut u32) -> i32 {
    ffi("aclrtGetEventId", true, || {
        non_null(event_id, "eventId")?;
        let e = event_of(event)?;
        // SAFETY: caller contract.
        unsafe { put(event_id, e.id) }
    })
}

/// `aclError aclrtGetEventAvailNum(uint32_t* eventCount)`: limit minus live events of the
/// current device.
///
/// # Safety
/// `event_count` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetEventAvailNum(event_count: *mut u32) -> i32 {
    ffi("aclrtGetEventAvailNum", true, || {
        non_null(event_count, "eventCount")?;
        let c = cur_ctx()?;
        let left = max_events().saturating_sub(counts(c.device).1);
        // SAFETY: caller contract.
        unsafe { put(event_count, left) }
    })
}
