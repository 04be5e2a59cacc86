//! Error rules of the newer ACL areas the simulator models (host-func subscriptions, value
//! operations, stream configuration handles, synchronous copies, exception info, version),
//! called through the rlib. Every test holds one lock: several of these areas are
//! process-wide (the exception callback, fault rules, poison).

use ascendcl::codes::*;
use ascendcl::*;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::SeqCst};
use std::sync::{Mutex, MutexGuard};

static LOCK: Mutex<()> = Mutex::new(());

fn setup() -> MutexGuard<'static, ()> {
    let g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: plain calls without pointers into the simulator.
    unsafe {
        let r = aclInit(std::ptr::null());
        assert!(r == 0 || r == ACL_ERROR_REPEAT_INITIALIZE, "aclInit {r}");
        assert_eq!(aclrtSetDevice(0), 0);
    }
    g
}

fn stream() -> *mut c_void {
    let mut s = null_mut();
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { aclrtCreateStream(&mut s) }, 0);
    s
}

fn me() -> u64 {
    // SAFETY: no preconditions.
    unsafe { libc::pthread_self() as u64 }
}

static RUNS: AtomicUsize = AtomicUsize::new(0);
unsafe extern "C" fn count(_: *mut c_void) {
    RUNS.fetch_add(1, SeqCst);
}

#[test]
fn host_func_subscription_rules() {
    let _g = setup();
    let (s, other) = (stream(), stream());
    // SAFETY: live handles from this library; `count` is a valid host func.
    unsafe {
        assert_eq!(
            aclrtProcessHostFunc(10),
            ACL_ERROR_RT_THREAD_SUBSCRIBE,
            "no subscription"
        );
        assert_eq!(aclrtSubscribeHostFunc(me(), s), 0);
        assert_eq!(
            aclrtSubscribeHostFunc(me() + 1, s),
            ACL_ERROR_RT_STREAM_SUBSCRIBE
        );
        assert_eq!(aclrtProcessHostFunc(0), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtProcessHostFunc(10), ACL_ERROR_RT_REPORT_TIMEOUT);
        // A report-subscribed stream cannot take a host-func thread.
        assert_eq!(aclrtSubscribeReport(me(), other), 0);
        assert_eq!(
            aclrtSubscribeHostFunc(me(), other),
            ACL_ERROR_RT_STREAM_SUBSCRIBE
        );
        assert_eq!(aclrtUnSubscribeReport(me(), other), 0);

        // The subscribed thread runs the host func; the stream waits for it.
        let before = RUNS.load(SeqCst);
        assert_eq!(aclrtLaunchHostFunc(s, Some(count), null_mut()), 0);
        assert_eq!(aclrtProcessHostFunc(2000), 0);
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(RUNS.load(SeqCst), before + 1);

        // Pending host funcs run when the thread unsubscribes; only the subscriber may.
        assert_eq!(aclrtLaunchHostFunc(s, Some(count), null_mut()), 0);
        assert_eq!(
            aclrtSynchronizeStreamWithTimeout(s, 30),
            ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        );
        assert_eq!(
            aclrtUnSubscribeHostFunc(me() + 1, s),
            ACL_ERROR_RT_THREAD_SUBSCRIBE
        );
        assert_eq!(aclrtUnSubscribeHostFunc(me(), s), 0);
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(RUNS.load(SeqCst), before + 2);
        // Unsubscribed: host funcs go back to the internal thread.
        assert_eq!(aclrtLaunchHostFunc(s, Some(count), null_mut()), 0);
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(RUNS.load(SeqCst), before + 3);
        assert_eq!(aclrtDestroyStream(s), 0);
        assert_eq!(aclrtDestroyStream(other), 0);
    }
}

#[test]
fn value_operation_rules() {
    let _g = setup();
    let s = stream();
    let mut words = [0u64; 4];
    let base = words.as_mut_ptr().cast::<c_void>();
    // SAFETY: `words` outlives every task (each stream is synchronized or aborted below).
    unsafe {
        let odd = base.cast::<u8>().add(4).cast::<c_void>();
        assert_eq!(
            aclrtValueWrite(odd, 1, 0, s),
            ACL_ERROR_INVALID_PARAM,
            "misaligned"
        );
        assert_eq!(
            aclrtValueWait(base, 1, 4, s),
            ACL_ERROR_INVALID_PARAM,
            "bad flag"
        );
        assert_eq!(
            aclrtValueWrite(base, 1, 1, s),
            ACL_ERROR_INVALID_PARAM,
            "reserved flag"
        );
        assert_eq!(
            aclrtValueWrite(null_mut(), 1, 0, s),
            ACL_ERROR_INVALID_PARAM
        );
        // NOR: ~(word | value) != 0 holds for 0 | 0.
        assert_eq!(aclrtValueWait(base, 0, ACL_VALUE_WAIT_NOR, s), 0);
        assert_eq!(aclrtSynchronizeStream(s), 0);
        // A wait that never holds ends with an abort; the stream is usable afterwards.
        assert_eq!(aclrtValueWait(base, 5, ACL_VALUE_WAIT_EQ, s), 0);
        assert_eq!(
            aclrtSynchronizeStreamWithTimeout(s, 20),
            ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        );
        assert_eq!(aclrtStreamAbort(s), 0);
        assert_eq!(aclrtSynchronizeStream(s), 0);
        // Captured writes run only on replay.
        let w = base.cast::<u64>().add(1).cast::<c_void>();
        assert_eq!(
            aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED),
            0
        );
        assert_eq!(aclrtValueWrite(w, 77, 0, s), 0);
        let mut ri = null_mut();
        assert_eq!(aclmdlRICaptureEnd(s, &mut ri), 0);
        assert_eq!(
            std::ptr::read_volatile(w.cast::<u64>()),
            0,
            "captured write ran"
        );
        assert_eq!(aclmdlRIExecuteAsync(ri, s), 0);
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(std::ptr::read_volatile(w.cast::<u64>()), 77);
        assert_eq!(aclmdlRIDestroy(ri), 0);
        assert_eq!(aclrtDestroyStream(s), 0);
    }
}

#[test]
fn stream_config_rules() {
    let _g = setup();
    // SAFETY: handles come from this library; values are live locals of the size passed.
    unsafe {
        let h = aclrtCreateStreamConfigHandle();
        assert!(!h.is_null());
        let p9: u32 = 9;
        let p: *const c_void = (&p9 as *const u32).cast();
        assert_eq!(
            aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_PRIORITY, p, 8),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtSetStreamConfigOpt(h, 4, p, 4), ACL_ERROR_INVALID_PARAM);
        assert_eq!(
            aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_PRIORITY, std::ptr::null(), 4),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_PRIORITY, p, 4), 0);
        let work: usize = 4096;
        let pw: *const c_void = (&work as *const usize).cast();
        assert_eq!(
            aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_WORK_SIZE, pw, 8),
            0
        );
        assert_eq!((*h).priority, 9);
        assert_eq!((*h).work_size, 4096);
        // Priority 9 clamps to 7 on the default product, as aclrtCreateStreamWithConfig does.
        let mut s = null_mut();
        assert_eq!(aclrtCreateStreamV2(&mut s, h), 0);
        let mut prio = 0u32;
        assert_eq!(aclrtStreamGetPriority(s, &mut prio), 0);
        assert_eq!(prio, 7);
        assert_eq!(aclrtDestroyStream(s), 0);
        // The flag rules are the same too: DEVICE_USE_ONLY must stand alone.
        let bad: u32 = ACL_STREAM_DEVICE_USE_ONLY | ACL_STREAM_FAST_SYNC;
        let pb: *const c_void = (&bad as *const u32).cast();
        assert_eq!(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_FLAG, pb, 4), 0);
        assert_eq!(aclrtCreateStreamV2(&mut s, h), ACL_ERROR_RT_PARAM_INVALID);
        assert_eq!(aclrtDestroyStreamConfigHandle(h), 0);
        assert_eq!(
            aclrtDestroyStreamConfigHandle(h),
            ACL_ERROR_INVALID_PARAM,
            "twice"
        );
        let mut fake = AclrtStreamConfigHandle {
            workptr: null_mut(),
            work_size: 0,
            flag: 0,
            priority: 0,
        };
        assert_eq!(
            aclrtCreateStreamV2(&mut s, &fake),
            ACL_ERROR_INVALID_PARAM,
            "foreign handle"
        );
        assert_eq!(
            aclrtSetStreamConfigOpt(&mut fake, ACL_RT_STREAM_PRIORITY, p, 4),
            ACL_ERROR_INVALID_PARAM
        );
    }
}

#[test]
fn synchronous_copy_rules() {
    let _g = setup();
    let src = [7u8; 16];
    let mut dst = [0u8; 16];
    let s = stream();
    // SAFETY: live local buffers of the sizes passed.
    unsafe {
        let (d, p) = (
            dst.as_mut_ptr().cast::<c_void>(),
            src.as_ptr().cast::<c_void>(),
        );
        assert_eq!(
            aclrtMemcpy(d, 8, p, 16, 1),
            ACL_ERROR_RT_PARAM_INVALID,
            "count > destMax"
        );
        assert_eq!(
            aclrtMemcpy(d, 16, p, 16, 8),
            ACL_ERROR_INVALID_PARAM,
            "bad kind"
        );
        assert_eq!(aclrtMemcpy(d, 16, p, 16, 0), 0);
        assert_eq!(dst, src);
        // Refused in a GLOBAL capture of this thread (107030); the capture stays valid.
        assert_eq!(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), 0);
        assert_eq!(
            aclrtMemcpy(d, 16, p, 16, 0),
            ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT
        );
        let mut ri = null_mut();
        assert_eq!(aclmdlRICaptureEnd(s, &mut ri), 0);
        assert!(!ri.is_null());
        assert_eq!(aclmdlRIDestroy(ri), 0);
        assert_eq!(aclrtDestroyStream(s), 0);
    }
}

static EXC_CALLS: AtomicU32 = AtomicU32::new(0);
static EXC_TASK: AtomicU32 = AtomicU32::new(0);
unsafe extern "C" fn on_exception(info: *mut AclrtExceptionInfo) {
    EXC_CALLS.fetch_add(1, SeqCst);
    // SAFETY: the pointer the simulator passes, valid during the call.
    EXC_TASK.store(unsafe { aclrtGetTaskIdFromExceptionInfo(info) }, SeqCst);
}

#[test]
fn exception_callback_rules() {
    let _g = setup();
    let s = stream();
    // SAFETY: live handles; `on_exception` matches the callback type.
    unsafe {
        assert_eq!(
            aclrtGetStreamIdFromExceptionInfo(std::ptr::null()),
            u32::MAX
        );
        assert_eq!(
            aclrtGetErrorCodeFromExceptionInfo(std::ptr::null()),
            u32::MAX
        );
        assert_eq!(aclrtSetExceptionInfoCallback(Some(on_exception)), 0);
        let before = EXC_CALLS.load(SeqCst);
        assert_eq!(xsimLaunchDelay(s, 1), 0);
        assert_eq!(xsimLaunchDelay(s, 1), 0);
        assert_eq!(xsimLaunchFault(s, 507_015), 0);
        assert_eq!(aclrtSynchronizeStream(s), 507_015);
        assert_eq!(EXC_CALLS.load(SeqCst), before + 1);
        assert_eq!(EXC_TASK.load(SeqCst), 3, "third task of the stream");
        assert_eq!(xsimReset(), 0);
        // Cleared: a later fault calls nothing.
        assert_eq!(aclrtSetExceptionInfoCallback(None), 0);
        assert_eq!(xsimLaunchFault(s, 507_015), 0);
        assert_eq!(aclrtSynchronizeStream(s), 507_015);
        assert_eq!(EXC_CALLS.load(SeqCst), before + 1);
        assert_eq!(xsimReset(), 0);
        assert_eq!(aclrtDestroyStream(s), 0);
    }
}

#[test]
fn version_rules() {
    let _g = setup();
    let (mut a, mut b, mut c) = (0, 0, 0);
    // SAFETY: out-pointers to live locals.
    unsafe {
        assert_eq!(
            aclrtGetVersion(&mut a, &mut b, std::ptr::null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtGetVersion(&mut a, &mut b, &mut c), 0);
        assert_eq!((a, b, c), (1, 17, 0));
        assert_eq!(xsimSetVersion(-1, 0, 0), ACL_ERROR_INVALID_PARAM);
        assert_eq!(xsimSetVersion(1, 16, 0), 0);
        assert_eq!(aclrtGetVersion(&mut a, &mut b, &mut c), 0);
        assert_eq!((a, b, c), (1, 16, 0));
        assert_eq!(xsimSetVersion(0, 0, 0), 0);
        assert_eq!(aclrtGetVersion(&mut a, &mut b, &mut c), 0);
        assert_eq!((a, b, c), (1, 17, 0));
    }
}
