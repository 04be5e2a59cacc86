//! Exported ACL entry points: host callbacks, allocator registry, memory, capture / model run
//! instances and error reporting.

use crate::codes::*;
use crate::device::{non_null, put};
use crate::stream::*;
use crate::{
    AclrtAllocatorAllocAdviseFunc, AclrtAllocatorAllocFunc, AclrtAllocatorFreeFunc,
    AclrtAllocatorGetAddrFromBlockFunc, AclrtCallback,
};
use std::alloc::Layout;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// Host callbacks
// ---------------------------------------------------------------------------------------------

/// `aclError aclrtLaunchCallback(aclrtCallback fn, void* userData, aclrtCallbackBlockType
/// blockType, aclrtStream stream)`: report-style callback; needs a subscribed thread (107015).
///
/// # Safety
/// `func` must be a valid callback for `user_data`; handles are lookup keys.
#[no_mangle]
pub unsafe extern "C" fn aclrtLaunchCallback(
    func: AclrtCallback,
    user_data: *mut c_void,
    block_type: i32,
    stream: *mut c_void,
) -> i32 {
    ffi("aclrtLaunchCallback", true, || {
        let Some(f) = func else {
            return err(ACL_ERROR_INVALID_PARAM, "callback is NULL");
        };
        if block_type != ACL_CALLBACK_BLOCK && block_type != ACL_CALLBACK_NO_BLOCK {
            return err(
                ACL_ERROR_INVALID_PARAM,
                format!("bad blockType {block_type}"),
            );
        }
        let s = enqueue_stream(stream)?;
        let Some(tid) = lock(&s.st).sub_tid else {
            return err(
                ACL_ERROR_RT_STREAM_NO_CB_REG,
                "no thread subscribed to this stream",
            );
        };
        s.push(Task::Callback {
            f,
            data: user_data as usize,
            block: block_type == ACL_CALLBACK_BLOCK,
            tid,
        })
    })
}

/// `aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream)`: `threadId` is the
/// processing thread's `pthread_self()`.
///
/// # Safety
/// `stream` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtSubscribeReport(thread_id: u64, stream: *mut c_void) -> i32 {
    ffi("aclrtSubscribeReport", true, || {
        let s = stream_of(stream)?;
        let key = Arc::as_ptr(&s) as usize;
        let mut g = lock(&s.st);
        if g.sub_tid.is_some() {
            return err(ACL_ERROR_RT_STREAM_SUBSCRIBE, "stream already subscribed");
        }
        if g.hostfunc {
            return err(
                ACL_ERROR_RT_STREAM_SUBSCRIBE,
                "stream uses aclrtLaunchHostFunc",
            );
        }
        let mut subs = lock(subs());
        let e = subs.entry(thread_id).or_insert_with(|| Sub {
            device: s.ctx.device,
            streams: HashSet::new(),
            pending: Default::default(),
        });
        if e.device != s.ctx.device {
            return err(
                ACL_ERROR_RT_THREAD_SUBSCRIBE,
                "thread subscribed on another device",
            );
        }
        e.streams.insert(key);
        g.sub_tid = Some(thread_id);
        Ok(())
    })
}

/// `aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream)`.
///
/// # Safety
/// `stream` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtUnSubscribeReport(thread_id: u64, stream: *mut c_void) -> i32 {
    ffi("aclrtUnSubscribeReport", true, || {
        let s = stream_of(stream)?;
        let mut g = lock(&s.st);
        match g.sub_tid {
            None => err(ACL_ERROR_RT_STREAM_SUBSCRIBE, "stream not subscribed"),
            Some(t) if t != thread_id => err(
                ACL_ERROR_RT_THREAD_SUBSCRIBE,
                "stream subscribed by another thread",
            ),
            Some(_) => {
                g.sub_tid = None;
                drop(g);
                unsubscribe(thread_id, Arc::as_ptr(&s) as usize);
                Ok(())
            }
        }
    })
}

/// `aclError aclrtProcessReport(int32_t timeout)`: waits up to `timeout` ms (-1 forever; 0 or
/// < -1 → 100000) and runs every pending callback inline; none → 507012; thread without
/// subscription → 107012.
///
/// # Safety
/// Runs user callbacks.
#[no_mangle]
pub unsafe extern "C" fn aclrtProcessReport(timeout: i32) -> i32 {
    ffi("aclrtProcessReport", true, || {
        let dl = deadline(timeout, ACL_ERROR_INVALID_PARAM)?;
        let tid = self_tid();
        let mut g = lock(subs());
        let batch = loop {
            let Some(e) = g.get_mut(&tid) else {
                return err(ACL_ERROR_RT_THREAD_SUBSCRIBE, "thread has no subscription");
            };
            if !e.pending.is_empty() {
                break std::mem::take(&mut e.pending);
            }
            let mut slice = Duration::from_millis(100);
            if let Some(d) = dl {
                let now = Instant::now();
                if now >= d {
                    return err(ACL_ERROR_RT_REPORT_TIMEOUT, "no callback within timeout");
                }
                slice = slice.min(d - now);
            }
            g = SUBS_CV
                .wait_timeout(g, slice)
                .map_or_else(|p| p.into_inner().0, |r| r.0);
        };
        if g.get(&tid).is_some_and(|e| e.streams.is_empty()) {
            g.remove(&tid);
        }
        drop(g);
        for rep in batch {
            rep.run();
        }
        Ok(())
    })
}

/// `aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void* args)`: runs on
/// the context's internal callback thread; always blocks the stream. Mixing with report-style
/// subscription → 107011.
///
/// # Safety
/// `func` must be a valid host function for `args`; `stream` is a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtLaunchHostFunc(
    stream: *mut c_void,
    func: AclrtCallback,
    args: *mut c_void,
) -> i32 {
    ffi("aclrtLaunchHostFunc", true, || {
        let Some(f) = func else {
            return err(ACL_ERROR_INVALID_PARAM, "host func is NULL");
        };
        let s = enqueue_stream(stream)?;
        {
            let mut g = lock(&s.st);
            if g.sub_tid.is_some() {
                return err(
                    ACL_ERROR_RT_STREAM_SUBSCRIBE,
                    "stream uses report-style callbacks",
                );
            }
            g.hostfunc = true;
        }
        s.ctx.ensure_hf_thread()?;
        s.push(Task::HostFunc {
            f,
            data: args as usize,
        })
    })
}

// ---------------------------------------------------------------------------------------------
// Allocator registry
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Default)]
struct Desc {
    obj: usize,
    alloc: AclrtAllocatorAllocFunc,
    free: AclrtAllocatorFreeFunc,
    advise: AclrtAllocatorAllocAdviseFunc,
    get_addr: AclrtAllocatorGetAddrFromBlockFunc,
}

#[derive(Default)]
struct AllocReg {
    descs: HashMap<usize, Desc>,
    by_stream: HashMap<usize, (usize, Desc)>,
}

fn areg() -> &'static Mutex<AllocReg> {
    static A: OnceLock<Mutex<AllocReg>> = OnceLock::new();
    A.get_or_init(Default::default)
}

fn with_desc(h: *mut c_void, f: impl FnOnce(&mut Desc)) -> R {
    non_null(h, "allocatorDesc")?;
    let mut g = lock(areg());
    let d = g.descs.get_mut(&(h as usize)).map_or_else(
        || err(ACL_ERROR_INVALID_PARAM, "unknown allocator desc"),
        Ok,
    )?;
    f(d);
    Ok(())
}

/// `aclrtAllocatorDesc aclrtAllocatorCreateDesc()`: NULL on failure.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclrtAllocatorCreateDesc() -> *mut c_void {
    count_call("aclrtAllocatorCreateDesc");
    catch_unwind(|| {
        let h = Box::into_raw(Box::new(0u64)) as usize;
        lock(areg()).descs.insert(h, Desc::default());
        h as *mut c_void
    })
    .unwrap_or(std::ptr::null_mut())
}

/// `aclError aclrtAllocatorDestroyDesc(aclrtAllocatorDesc allocatorDesc)`.
///
/// # Safety
/// `desc` must be NULL or a handle from `aclrtAllocatorCreateDesc`.
#[no_mangle]
pub unsafe extern "C" fn aclrtAllocatorDestroyDesc(desc: *mut c_void) -> i32 {
    ffi("aclrtAllocatorDestroyDesc", false, || {
        non_null(desc, "allocatorDesc")?;
        if lock(areg()).descs.remove(&(desc as usize)).is_none() {
            return err(ACL_ERROR_INVALID_PARAM, "unknown allocator desc");
        }
        // SAFETY: the handle was produced by Box::into_raw in aclrtAllocatorCreateDesc and has
        // just been removed from the registry, so it is freed exactly once.
        drop(unsafe { Box::from_raw(desc as *mut u64) });
        Ok(())
    })
}

/// `aclError aclrtAllocatorSetObjToDesc(aclrtAllocatorDesc, aclrtAllocator)`.
///
/// # Safety
/// `desc` is a lookup key; `allocator` is stored, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn aclrtAllocatorSetObjToDesc(
    desc: *mut c_void,
    allocator: *mut c_void,
) -> i32 {
    ffi("aclrtAllocatorSetObjToDesc", false, || {
        with_desc(desc, |d| d.obj = allocator as usize)
    })
}

/// `aclError aclrtAllocatorSetAllocFuncToDesc(aclrtAllocatorDesc, aclrtAllocatorAllocFunc)`.
///
/// # Safety
/// `desc` is a lookup key; the function is stored, never called.
#[no_mangle]
pub unsafe extern "C" fn aclrtAllocatorSetAllocFuncToDesc(
    desc: *mut c_void,
    func: AclrtAllocatorAllocFunc,
) -> i32 {
    ffi("aclrtAllocatorSetAllocFuncToDesc", false, || {
        with_desc(desc, |d| d.alloc = func)
    })
}

/// `aclError aclrtAllocatorSetFreeFuncToDesc(aclrtAllocatorDesc, aclrtAllocatorFreeFunc)`.
///
/// # Safety
/// `desc` is a lookup key; the function is stored, never called.
#[no_mangle]
pub unsafe extern "C" fn aclrtAllocatorSetFreeFuncToDesc(
    desc: *mut c_void,
    func: AclrtAllocatorFreeFunc,
) -> i32 {
    ffi("aclrtAllocatorSetFreeFuncToDesc", false, || {
        with_desc(desc, |d| d.free = func)
    })
}

/// `aclError aclrtAllocatorSetAllocAdviseFuncToDesc(aclrtAllocatorDesc,
/// aclrtAllocatorAllocAdviseFunc)`.
///
/// # Safety
/// `desc` is a lookup key; the function is stored, never called.
#[no_mangle]
pub unsafe extern "C" fn aclrtAllocatorSetAllocAdviseFuncToDesc(
    desc: *mut c_void,
    func: AclrtAllocatorAllocAdviseFunc,
) -> i32 {
    ffi("aclrtAllocatorSetAllocAdviseFuncToDesc", false, || {
        with_desc(desc, |d| d.advise = func)
    })
}

/// `aclError aclrtAllocatorSetGetAddrFromBlockFuncToDesc(aclrtAllocatorDesc,
/// aclrtAllocatorGetAddrFromBlockFunc)`.
///
/// # Safety
/// `desc` is a lookup key; the function is stored, never called.
#[no_mangle]
pub unsafe extern "C" fn aclrtAllocatorSetGetAddrFromBlockFuncToDesc(
    desc: *mut c_void,
    func: AclrtAllocatorGetAddrFromBlockFunc,
) -> i32 {
    ffi("aclrtAllocatorSetGetAddrFromBlockFuncToDesc", false, || {
        with_desc(desc, |d| d.get_addr = func)
    })
}

/// `aclError aclrtAllocatorRegister(aclrtStream stream, aclrtAllocatorDesc allocatorDesc)`:
/// copies the desc into a map keyed by the stream pointer; stream, obj, alloc, free and getAddr
/// must be non-NULL (100000); re-register replaces.
///
/// # Safety
/// Handles are lookup keys.
#[no_mangle]
pub unsafe extern "C" fn aclrtAllocatorRegister(stream: *mut c_void, desc: *mut c_void) -> i32 {
    ffi("aclrtAllocatorRegister", false, || {
        non_null(stream, "stream")?;
        non_null(desc, "allocatorDesc")?;
        let mut g = lock(areg());
        let d = *g.descs.get(&(desc as usize)).map_or_else(
            || err(ACL_ERROR_INVALID_PARAM, "unknown allocator desc"),
            Ok,
        )?;
        if d.obj == 0 || d.alloc.is_none() || d.free.is_none() || d.get_addr.is_none() {
            return err(
                ACL_ERROR_INVALID_PARAM,
                "allocator desc lacks obj/alloc/free/getAddrFromBlock",
            );
        }
        g.by_stream.insert(stream as usize, (desc as usize, d));
        Ok(())
    })
}

/// `aclError aclrtAllocatorGetByStream(aclrtStream, aclrtAllocatorDesc*, aclrtAllocator*,
/// aclrtAllocatorAllocFunc*, aclrtAllocatorFreeFunc*, aclrtAllocatorAllocAdviseFunc*,
/// aclrtAllocatorGetAddrFromBlockFunc*)`: stream and desc out-pointer required; others optional;
/// unknown stream → 100000.
///
/// # Safety
/// Every non-NULL out-pointer must be valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtAllocatorGetByStream(
    stream: *mut c_void,
    desc: *mut *mut c_void,
    allocator: *mut *mut c_void,
    alloc_func: *mut AclrtAllocatorAllocFunc,
    free_func: *mut AclrtAllocatorFreeFunc,
    advise_func: *mut AclrtAllocatorAllocAdviseFunc,
    get_addr_func: *mut AclrtAllocatorGetAddrFromBlockFunc,
) -> i32 {
    ffi("aclrtAllocatorGetByStream", false, || {
        non_null(stream, "stream")?;
        non_null(desc, "allocatorDesc")?;
        let (h, d) = lock(areg())
            .by_stream
            .get(&(stream as usize))
            .copied()
            .map_or_else(
                || err(ACL_ERROR_INVALID_PARAM, "no allocator registered"),
                Ok,
            )?;
        // SAFETY: caller contract; optional outputs are written only when non-NULL.
        unsafe {
            put(desc, h as *mut c_void)?;
            if !allocator.is_null() {
                put(allocator, d.obj as *mut c_void)?;
            }
            if !alloc_func.is_null() {
                put(alloc_func, d.alloc)?;
            }
            if !free_func.is_null() {
                put(free_func, d.free)?;
            }
            if !advise_func.is_null() {
                put(advise_func, d.advise)?;
            }
            if !get_addr_func.is_null() {
                put(get_addr_func, d.get_addr)?;
            }
        }
        Ok(())
    })
}

/// `aclError aclrtAllocatorUnregister(aclrtStream stream)`: NULL → 100000; unknown or repeated
/// → 0.
///
/// # Safety
/// `stream` is a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtAllocatorUnregister(stream: *mut c_void) -> i32 {
    ffi("aclrtAllocatorUnregister", false, || {
        non_null(stream, "stream")?;
        lock(areg()).by_stream.remove(&(stream as usize));
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------------

const ALIGN: usize = 64;

fn allocs() -> &'static Mutex<HashMap<usize, Layout>> {
    static A: OnceLock<Mutex<HashMap<usize, Layout>>> = OnceLock::new();
    A.get_or_init(Default::default)
}

fn sim_alloc(out: *mut *mut c_void, size: usize) -> R {
    non_null(out, "pointer")?;
    if size == 0 {
        return err(ACL_ERROR_INVALID_PARAM, "size is 0");
    }
    let layout = Layout::from_size_align(size, ALIGN)
        .or_else(|_| err(ACL_ERROR_INVALID_PARAM, "size too large"))?;
    // SAFETY: layout has non-zero size.
    let p = unsafe { std::alloc::alloc(layout) };
    if p.is_null() {
        return err(207_001, "out of memory");
    }
    lock(allocs()).insert(p as usize, layout);
    // SAFETY: checked non-NULL; caller contract.
    unsafe { put(out, p as *mut c_void) }
}

fn sim_free(p: *mut c_void) -> R {
    non_null(p, "pointer")?;
    let Some(layout) = lock(allocs()).remove(&(p as usize)) else {
        return err(
            ACL_ERROR_INVALID_PARAM,
            "pointer not allocated by the simulator",
        );
    };
    // SAFETY: `p` was returned by std::alloc::alloc with exactly this layout and is freed once.
    unsafe { std::alloc::dealloc(p as *mut u8, layout) };
    Ok(())
}

/// `aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy)`: host memory
/// standing in for device memory (64-byte aligned, policy ignored); needs a current context.
///
/// # Safety
/// `dev_ptr` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtMalloc(dev_ptr: *mut *mut c_void, size: usize, policy: i32) -> i32 {
    let _ = policy;
    ffi("aclrtMalloc", true, || {
        cur_ctx()?;
        sim_alloc(dev_ptr, size)
    })
}

/// `aclError aclrtFree(void* devPtr)`.
///
/// # Safety
/// `dev_ptr` must come from `aclrtMalloc` and not be in use by queued work.
#[no_mangle]
pub unsafe extern "C" fn aclrtFree(dev_ptr: *mut c_void) -> i32 {
    ffi("aclrtFree", true, || sim_free(dev_ptr))
}

/// `aclError aclrtMallocHost(void** hostPtr, size_t size)`: "pinned" host memory.
///
/// # Safety
/// `host_ptr` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtMallocHost(host_ptr: *mut *mut c_void, size: usize) -> i32 {
    ffi("aclrtMallocHost", true, || {
        sim_alloc(host_ptr, size)?;
        // SAFETY: sim_alloc wrote the block's address through the checked-non-NULL pointer.
        crate::host_mem::add(unsafe { *host_ptr } as usize, size);
        Ok(())
    })
}

/// `aclError aclrtFreeHost(void* hostPtr)`.
///
/// # Safety
/// `host_ptr` must come from `aclrtMallocHost` and not be in use by queued work.
#[no_mangle]
pub unsafe extern "C" fn aclrtFreeHost(host_ptr: *mut c_void) -> i32 {
    ffi("aclrtFreeHost", true, || {
        sim_free(host_ptr)?;
        crate::host_mem::remove(host_ptr as usize);
        Ok(())
    })
}

/// `aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count,
/// aclrtMemcpyKind kind, aclrtStream stream)`: executes in stream order on the stream's worker
/// (pageable host memory is treated like pinned memory, except inside a capture, where a
/// pageable host side is refused: see `host_mem`). `count > destMax` → 100000.
///
/// # Safety
/// Both ranges must stay valid until the copy has executed.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemcpyAsync(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: i32,
    stream: *mut c_void,
) -> i32 {
    ffi("aclrtMemcpyAsync", true, || {
        non_null(dst, "dst")?;
        non_null(src, "src")?;
        if count > dest_max {
            return err(ACL_ERROR_INVALID_PARAM, "count exceeds destMax");
        }
        if !(0..=7).contains(&kind) {
            return err(ACL_ERROR_INVALID_PARAM, format!("bad memcpy kind {kind}"));
        }
        let s = enqueue_stream(stream)?;
        if s.capture().is_some() {
            crate::host_mem::check_captured_copy(kind, dst as usize, src as usize, count)?;
        }
        s.push(Task::Copy {
            dst: dst as usize,
            src: src as usize,
            n: count,
        })
    })
}

/// `aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count,
/// aclrtStream stream)`: `count > maxCount` → 100000.
///
/// # Safety
/// The range must stay valid until the memset has executed.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemsetAsync(
    dev_ptr: *mut c_void,
    max_count: usize,
    value: i32,
    count: usize,
    stream: *mut c_void,
) -> i32 {
    ffi("aclrtMemsetAsync", true, || {
        non_null(dev_ptr, "devPtr")?;
        if count > max_count {
            return err(ACL_ERROR_INVALID_PARAM, "count exceeds maxCount");
        }
        let s = enqueue_stream(stream)?;
        s.push(Task::Set {
            dst: dev_ptr as usize,
            val: value as u8,
            n: count,
        })
    })
}

// ---------------------------------------------------------------------------------------------
// Capture / model run instances
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// `const char* aclGetRecentErrMsg()`: the calling thread's last error message, drained by the
/// call; NULL when none. Valid until the next call on the same thread.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclGetRecentErrMsg() -> *const c_char {
    count_call("aclGetRecentErrMsg");
    catch_unwind(take_err_msg).unwrap_or(std::ptr::null())
}

/// `aclError aclrtPeekAtLastError(aclrtLastErrLevel level)`: the thread's last error code,
/// not cleared. Level other than `ACL_RT_THREAD_LEVEL` (0) → 100000.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclrtPeekAtLastError(level: i32) -> i32 {
    count_call("aclrtPeekAtLastError");
    catch_unwind(AssertUnwindSafe(|| {
        if level != 0 {
            ACL_ERROR_INVALID_PARAM
        } else {
            last_error(false)
        }
    }))
    .unwrap_or(ACL_ERROR_RT_INTERNAL_ERROR)
}

/// `aclError aclrtGetLastError(aclrtLastErrLevel level)`: the thread's last error code, then
/// clears it.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetLastError(level: i32) -> i32 {
    count_call("aclrtGetLastError");
    catch_unwind(AssertUnwindSafe(|| {
        if level != 0 {
            ACL_ERROR_INVALID_PARAM
        } else {
            last_error(true)
        }
    }))
    .unwrap_or(ACL_ERROR_RT_INTERNAL_ERROR)
}
