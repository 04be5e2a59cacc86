//! Init, devices and contexts: `aclInit` / `aclFinalize*`, `aclrtSetDevice` / `aclrtResetDevice*`,
//! device queries and synchronize, context create / destroy / current, and the `Context`
//! object (its poison state; its host-func thread lives in `callback`).

use crate::callback::*;
use crate::capture::*;
use crate::codes::*;
use crate::config::*;
use crate::error::*;
use crate::faults::*;
use crate::registry::*;
use crate::stream::*;
use std::cell::RefCell;
use std::ffi::c_char;
use std::ffi::c_void;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicI32;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::sync::Condvar;
use std::sync::Mutex;
use std::time::Instant;

/// Whether `aclInit` is in effect.
pub(crate) static INITED: AtomicBool = AtomicBool::new(false);

/// `aclInit` reference count.
pub(crate) static INIT_COUNT: Mutex<u64> = Mutex::new(0);

thread_local! {
    static CURRENT: RefCell<Option<Arc<Context>>> = const { RefCell::new(None) };
}

/// A context (primary per device, or user-created).
pub(crate) struct Context {
    pub(crate) device: i32,
    pub(crate) primary: bool,
    pub(crate) poison: AtomicI32,
    pub(crate) destroyed: AtomicBool,
    pub(crate) default_stream: Mutex<Option<Arc<Stream>>>,
    pub(crate) hf: Mutex<HfState>,
    pub(crate) hf_cv: Condvar,
}

impl Context {
    /// Sticky error code of the context (0 = healthy).
    pub(crate) fn poisoned(&self) -> i32 {
        let own = self.poison.load(SeqCst);
        if own != 0 {
            own
        } else {
            GLOBAL_POISON.load(SeqCst)
        }
    }

    pub(crate) fn check_poison(&self) -> R {
        match self.poisoned() {
            0 => Ok(()),
            c => err(c, "context poisoned by an earlier device fault"),
        }
    }

    pub(crate) fn default_stream(&self) -> R<Arc<Stream>> {
        lock(&self.default_stream)
            .clone()
            .map_or_else(|| err(ACL_ERROR_RT_CONTEXT_NULL, "context destroyed"), Ok)
    }
}

/// The calling thread's current context.
pub(crate) fn cur_ctx() -> R<Arc<Context>> {
    let c = CURRENT.with(|c| c.borrow().clone());
    match c {
        Some(c) if !c.destroyed.load(SeqCst) => Ok(c),
        _ => err(
            ACL_ERROR_RT_CONTEXT_NULL,
            "no current context on this thread",
        ),
    }
}

pub(crate) fn set_cur_ctx(c: Option<Arc<Context>>) {
    CURRENT.with(|cur| *cur.borrow_mut() = c);
}

fn clear_cur_if(ctx: &Arc<Context>) {
    CURRENT.with(|cur| {
        let mut b = cur.borrow_mut();
        if b.as_ref().is_some_and(|c| Arc::ptr_eq(c, ctx)) {
            *b = None;
        }
    });
}

/// Creates a context with its default stream.
pub(crate) fn new_context(device: i32, primary: bool) -> R<Arc<Context>> {
    let ctx = Arc::new(Context {
        device,
        primary,
        poison: AtomicI32::new(0),
        destroyed: AtomicBool::new(false),
        default_stream: Mutex::new(None),
        hf: Mutex::new(HfState::default()),
        hf_cv: Condvar::new(),
    });
    let ds = new_stream(&ctx, 0, 0, true, false)?;
    *lock(&ctx.default_stream) = Some(ds);
    lock(reg())
        .ctxs
        .insert(Arc::as_ptr(&ctx) as usize, ctx.clone());
    Ok(ctx)
}

/// Destroys a context: drops work on all its streams, stops its host-func thread.
pub(crate) fn destroy_context(ctx: &Arc<Context>) {
    ctx.destroyed.store(true, SeqCst);
    let streams: Vec<Arc<Stream>> = {
        let mut r = lock(reg());
        r.ctxs.remove(&(Arc::as_ptr(ctx) as usize));
        r.streams
            .values()
            .filter(|s| Arc::ptr_eq(&s.ctx, ctx))
            .cloned()
            .collect()
    };
    for s in &streams {
        force_destroy_stream(s);
    }
    lock(&ctx.default_stream).take();
    ctx.stop_hf();
    clear_cur_if(ctx);
}

/// Validates a device id.
pub(crate) fn check_device(d: i32) -> R {
    if d < 0 || d as u32 >= device_count() {
        return err(
            ACL_ERROR_RT_INVALID_DEVICEID,
            format!("invalid device id {d}"),
        );
    }
    Ok(())
}

static PRIMARY_LOCK: Mutex<()> = Mutex::new(());

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
    refuse_in_capture(
        ACL_ERROR_RT_STREAM_CAPTURED,
        "device synchronize during capture",
    )?;
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
            Ok(()) => collect_records(s.id),
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
