//! ABI-level tests of the ACL simulator, calling the exported functions through the rlib.
//!
//! Tests run in parallel threads of one process. Tests that change process-global state (init
//! ref count, limits, product, fault rules) take the exclusive side of `GLOBAL`; the others take
//! the shared side.

use ascendcl::codes::*;
use ascendcl::*;
use std::ffi::{c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

static GLOBAL: RwLock<()> = RwLock::new(());

fn shared() -> RwLockReadGuard<'static, ()> {
    let g = GLOBAL.read().unwrap_or_else(|e| e.into_inner());
    setup();
    g
}

fn exclusive() -> RwLockWriteGuard<'static, ()> {
    let g = GLOBAL.write().unwrap_or_else(|e| e.into_inner());
    setup();
    g
}

fn setup() {
    // SAFETY: plain calls without pointers into the simulator.
    unsafe {
        let r = aclInit(std::ptr::null());
        assert!(r == 0 || r == ACL_ERROR_REPEAT_INITIALIZE, "aclInit {r}");
        assert_eq!(aclrtSetDevice(0), 0);
    }
}

fn teardown() {
    // SAFETY: no pointers.
    unsafe { assert_eq!(aclrtResetDevice(0), 0) };
}

fn stream() -> *mut c_void {
    let mut s = null_mut();
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { aclrtCreateStream(&mut s) }, 0);
    s
}

fn destroy(s: *mut c_void) {
    // SAFETY: handle from aclrtCreateStream.
    assert_eq!(unsafe { aclrtDestroyStream(s) }, 0);
}

fn event(flags: Option<u32>) -> *mut c_void {
    let mut e = null_mut();
    // SAFETY: valid out-pointer.
    let r = unsafe {
        match flags {
            None => aclrtCreateEvent(&mut e),
            Some(f) => aclrtCreateEventExWithFlag(&mut e, f),
        }
    };
    assert_eq!(r, 0);
    e
}

fn lcg(mut x: u32, rounds: u32) -> u32 {
    for _ in 0..rounds {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
    }
    x
}

fn tid() -> u64 {
    // SAFETY: no preconditions.
    unsafe { libc::pthread_self() as u64 }
}

static HITS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count_cb(data: *mut c_void) {
    // SAFETY: tests pass a pointer to an AtomicUsize.
    let c = unsafe { &*(data as *const AtomicUsize) };
    c.fetch_add(1, Ordering::SeqCst);
    HITS.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn init_refcount_and_uninitialized() {
    let _g = exclusive();
    // SAFETY: no pointers except valid out-pointers.
    unsafe {
        while aclFinalize() == 0 {}
        assert_eq!(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
        let mut s = null_mut();
        assert_eq!(aclrtCreateStream(&mut s), ACL_ERROR_UNINITIALIZE);
        assert_eq!(aclrtSetDevice(0), ACL_ERROR_UNINITIALIZE);
        assert_eq!(aclInit(std::ptr::null()), 0);
        assert_eq!(aclInit(std::ptr::null()), ACL_ERROR_REPEAT_INITIALIZE);
        let mut n = 0u64;
        assert_eq!(aclFinalizeReference(&mut n), 0);
        assert_eq!(n, 1);
        assert_eq!(aclrtCreateStream(&mut s), 0);
        destroy(s);
        assert_eq!(aclFinalizeReference(&mut n), 0);
        assert_eq!(n, 0);
        assert_eq!(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
        assert_eq!(aclInit(std::ptr::null()), 0);
    }
    teardown();
}

#[test]
fn context_binding_is_thread_local() {
    let _g = shared();
    // SAFETY: valid out-pointers.
    unsafe {
        let mut ctx = null_mut();
        assert_eq!(aclrtGetCurrentContext(&mut ctx), 0);
        let h = ctx as usize;
        std::thread::spawn(move || {
            let mut s = null_mut();
            assert_eq!(aclrtCreateStream(&mut s), ACL_ERROR_RT_CONTEXT_NULL);
            let mut d = 0;
            assert_eq!(aclrtGetDevice(&mut d), ACL_ERROR_RT_CONTEXT_NULL);
            assert_eq!(aclrtSetCurrentContext(h as *mut c_void), 0);
            assert_eq!(aclrtGetDevice(&mut d), 0);
            assert_eq!(d, 0);
        })
        .join()
        .unwrap();
        let mut ds = null_mut();
        assert_eq!(aclrtCtxGetCurrentDefaultStream(&mut ds), 0);
        assert!(!ds.is_null());
        assert_eq!(aclrtDestroyStream(ds), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtDestroyStream(null_mut()), ACL_ERROR_INVALID_PARAM);
        let mut count = 0;
        assert_eq!(aclrtGetDeviceCount(&mut count), 0);
        assert!(count >= 1);
        assert_eq!(aclrtSetDevice(9999), ACL_ERROR_RT_INVALID_DEVICEID);
    }
    teardown();
}

#[test]
fn stream_flags() {
    let _g = shared();
    // SAFETY: valid out-pointers; handles from the simulator.
    unsafe {
        let mut s = null_mut();
        let bad = ACL_STREAM_DEVICE_USE_ONLY | ACL_STREAM_FAST_LAUNCH;
        assert_eq!(
            aclrtCreateStreamWithConfig(&mut s, 0, bad),
            ACL_ERROR_RT_PARAM_INVALID
        );
        let cases = [
            (ACL_STREAM_DEVICE_USE_ONLY, ACL_STREAM_DEVICE_USE_ONLY),
            (0x100, 0),
            (ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC, 3),
            (ACL_STREAM_HUGE | 0x8000_0000, ACL_STREAM_HUGE),
            (ACL_STREAM_PERSISTENT, ACL_STREAM_PERSISTENT),
        ];
        for (flag, kept) in cases {
            assert_eq!(
                aclrtCreateStreamWithConfig(&mut s, 0, flag),
                0,
                "flag {flag:#x}"
            );
            let mut f = 99;
            assert_eq!(aclrtStreamGetFlags(s, &mut f), 0);
            assert_eq!(f, kept);
            if kept & (ACL_STREAM_PERSISTENT | ACL_STREAM_DEVICE_USE_ONLY) != 0 {
                // Persistent / device-only streams: synchronize returns at once, query COMPLETE.
                assert_eq!(xsimLaunchDelay(s, 1_000_000), 0);
                assert_eq!(aclrtSynchronizeStream(s), 0);
                let mut st = 9;
                assert_eq!(aclrtStreamQuery(s, &mut st), 0);
                assert_eq!(st, ACL_STREAM_STATUS_COMPLETE);
            }
            destroy(s);
        }
    }
    teardown();
}

#[test]
fn priority_range_and_clamp() {
    let _g = exclusive();
    // SAFETY: valid out-pointers; handles from the simulator.
    unsafe {
        let (mut least, mut greatest) = (0, 0);
        assert_eq!(
            aclrtDeviceGetStreamPriorityRange(&mut least, &mut greatest),
            0
        );
        assert_eq!((least, greatest), (7, 0));
        let mut s = null_mut();
        assert_eq!(aclrtCreateStreamWithConfig(&mut s, 9, 0), 0);
        let mut p = 0;
        assert_eq!(aclrtStreamGetPriority(s, &mut p), 0);
        assert_eq!(p, 7);
        destroy(s);
        assert_eq!(aclrtCreateStreamWithConfig(&mut s, 3, 0), 0);
        assert_eq!(aclrtStreamGetPriority(s, &mut p), 0);
        assert_eq!(p, 3);
        destroy(s);
        assert_eq!(xsimSetProduct(c"310p".as_ptr()), 0);
        assert_eq!(
            aclrtCreateStreamWithConfig(&mut s, 8, 0),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(xsimSetProduct(c"no-such".as_ptr()), ACL_ERROR_INVALID_PARAM);
        assert_eq!(xsimSetProduct(std::ptr::null()), 0);
    }
    teardown();
}

#[test]
fn stream_and_event_limits() {
    let _g = exclusive();
    // SAFETY: valid out-pointers; handles from the simulator.
    unsafe {
        let mut avail = 0;
        assert_eq!(aclrtGetStreamAvailableNum(&mut avail), 0);
        assert_eq!(avail, 1984 - 1 - xsimLiveStreams() as u32);
        let used = 1984 - avail;
        assert_eq!(xsimSetLimits(used + 2, 0), 0);
        let (a, b) = (stream(), stream());
        let mut c = null_mut();
        assert_eq!(aclrtCreateStream(&mut c), ACL_ERROR_RT_NO_STREAM_RESOURCE);
        assert_eq!(aclrtGetStreamAvailableNum(&mut avail), 0);
        assert_eq!(avail, 0);
        destroy(a);
        assert_eq!(aclrtCreateStream(&mut c), 0);
        destroy(b);
        destroy(c);

        let mut ev_avail = 0;
        assert_eq!(aclrtGetEventAvailNum(&mut ev_avail), 0);
        let ev_used = 65536 - ev_avail;
        assert_eq!(xsimSetLimits(0, ev_used + 1), 0);
        let e = event(None);
        let mut e2 = null_mut();
        assert_eq!(aclrtCreateEvent(&mut e2), ACL_ERROR_RT_NO_EVENT_RESOURCE);
        assert_eq!(aclrtGetEventAvailNum(&mut ev_avail), 0);
        assert_eq!(ev_avail, 0);
        assert_eq!(aclrtDestroyEvent(e), 0);
        assert_eq!(xsimSetLimits(0, 0), 0);
    }
    teardown();
}

#[test]
fn many_streams_can_exist() {
    let _g = shared();
    let v: Vec<_> = (0..300).map(|_| stream()).collect();
    let mut buf = vec![0u8; 300];
    for (i, s) in v.iter().enumerate() {
        // SAFETY: buf outlives the synchronize below.
        unsafe {
            assert_eq!(
                aclrtMemsetAsync(buf.as_mut_ptr().add(i).cast(), 1, 7, 1, *s),
                0
            );
        }
    }
    for s in v {
        // SAFETY: handle from the simulator.
        unsafe { assert_eq!(aclrtSynchronizeStream(s), 0) };
        destroy(s);
    }
    assert!(buf.iter().all(|&b| b == 7));
    teardown();
}

#[test]
fn ids_are_unique_and_increasing() {
    let _g = shared();
    // SAFETY: valid out-pointers; handles from the simulator.
    unsafe {
        let (a, b) = (stream(), stream());
        let (mut ia, mut ib) = (0, 0);
        assert_eq!(aclrtStreamGetId(a, &mut ia), 0);
        assert_eq!(aclrtStreamGetId(b, &mut ib), 0);
        assert!(ib > ia);
        destroy(a);
        destroy(b);
        let c = stream();
        let mut ic = 0;
        assert_eq!(aclrtStreamGetId(c, &mut ic), 0);
        assert!(ic > ib);
        destroy(c);
        let (e1, e2) = (event(None), event(None));
        let (mut x, mut y) = (0, 0);
        assert_eq!(aclrtGetEventId(e1, &mut x), 0);
        assert_eq!(aclrtGetEventId(e2, &mut y), 0);
        assert!(y > x);
        aclrtDestroyEvent(e1);
        aclrtDestroyEvent(e2);
    }
    teardown();
}

#[test]
fn report_callbacks_block_and_no_block() {
    let _g = shared();
    let hits = AtomicUsize::new(0);
    let data = &hits as *const AtomicUsize as *mut c_void;
    let s = stream();
    let mut buf = [0u8; 4];
    // SAFETY: `hits` and `buf` outlive all work (synchronized below).
    unsafe {
        assert_eq!(
            aclrtLaunchCallback(Some(count_cb), data, ACL_CALLBACK_BLOCK, s),
            ACL_ERROR_RT_STREAM_NO_CB_REG
        );
        assert_eq!(aclrtProcessReport(10), ACL_ERROR_RT_THREAD_SUBSCRIBE);
        assert_eq!(aclrtSubscribeReport(tid(), s), 0);
        assert_eq!(
            aclrtSubscribeReport(tid(), s),
            ACL_ERROR_RT_STREAM_SUBSCRIBE
        );
        assert_eq!(aclrtProcessReport(0), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtProcessReport(-2), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtProcessReport(10), ACL_ERROR_RT_REPORT_TIMEOUT);
        assert_eq!(
            aclrtLaunchCallback(Some(count_cb), data, 7, s),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtLaunchHostFunc(s, Some(count_cb), data),
            ACL_ERROR_RT_STREAM_SUBSCRIBE
        );

        // BLOCK: the memset behind the callback waits for aclrtProcessReport.
        assert_eq!(
            aclrtLaunchCallback(Some(count_cb), data, ACL_CALLBACK_BLOCK, s),
            0
        );
        assert_eq!(aclrtMemsetAsync(buf.as_mut_ptr().cast(), 4, 1, 4, s), 0);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(buf, [0; 4]);
        let mut st = 0;
        assert_eq!(aclrtStreamQuery(s, &mut st), 0);
        assert_eq!(st, ACL_STREAM_STATUS_NOT_READY);
        assert_eq!(
            aclrtSynchronizeStreamWithTimeout(s, 20),
            ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        );
        assert_eq!(aclrtProcessReport(1000), 0);
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(buf, [1; 4]);

        // NO_BLOCK: the stream proceeds; the callback runs when the thread processes reports.
        assert_eq!(
            aclrtLaunchCallback(Some(count_cb), data, ACL_CALLBACK_NO_BLOCK, s),
            0
        );
        assert_eq!(aclrtMemsetAsync(buf.as_mut_ptr().cast(), 4, 2, 4, s), 0);
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(buf, [2; 4]);
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        assert_eq!(aclrtProcessReport(1000), 0);
        assert_eq!(hits.load(Ordering::SeqCst), 2);

        assert_eq!(
            aclrtUnSubscribeReport(tid() + 1, s),
            ACL_ERROR_RT_THREAD_SUBSCRIBE
        );
        assert_eq!(aclrtUnSubscribeReport(tid(), s), 0);
        assert_eq!(
            aclrtUnSubscribeReport(tid(), s),
            ACL_ERROR_RT_STREAM_SUBSCRIBE
        );
        assert_eq!(aclrtProcessReport(10), ACL_ERROR_RT_THREAD_SUBSCRIBE);
    }
    destroy(s);
    teardown();
}

#[test]
fn report_callbacks_on_a_separate_thread_and_auto_unsubscribe() {
    let _g = shared();
    let hits = AtomicUsize::new(0);
    let s = stream();
    let (tx, rx) = std::sync::mpsc::channel();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let worker = std::thread::spawn(move || {
        tx.send(tid()).unwrap();
        while !stop2.load(Ordering::SeqCst) {
            // SAFETY: no pointers.
            let _ = unsafe { aclrtProcessReport(20) };
        }
    });
    let t = rx.recv().unwrap();
    // SAFETY: `hits` outlives the synchronize.
    unsafe {
        assert_eq!(aclrtSubscribeReport(t, s), 0);
        let data = &hits as *const AtomicUsize as *mut c_void;
        for _ in 0..5 {
            assert_eq!(
                aclrtLaunchCallback(Some(count_cb), data, ACL_CALLBACK_BLOCK, s),
                0
            );
        }
        assert_eq!(aclrtSynchronizeStream(s), 0);
    }
    assert_eq!(hits.load(Ordering::SeqCst), 5);
    destroy(s); // auto-unsubscribes
    stop.store(true, Ordering::SeqCst);
    worker.join().unwrap();
    teardown();
}

#[test]
fn host_func_runs_in_order_on_internal_thread() {
    let _g = shared();
    let hits = AtomicUsize::new(0);
    let data = &hits as *const AtomicUsize as *mut c_void;
    let s = stream();
    let mut buf = [0u8; 8];
    // SAFETY: `hits`/`buf` outlive the synchronize.
    unsafe {
        assert_eq!(aclrtLaunchHostFunc(s, None, data), ACL_ERROR_INVALID_PARAM);
        assert_eq!(xsimLaunchDelay(s, 20_000), 0);
        assert_eq!(aclrtLaunchHostFunc(s, Some(count_cb), data), 0);
        assert_eq!(aclrtMemsetAsync(buf.as_mut_ptr().cast(), 8, 3, 8, s), 0);
        assert_eq!(
            aclrtSubscribeReport(tid(), s),
            ACL_ERROR_RT_STREAM_SUBSCRIBE
        );
        assert_eq!(aclrtSynchronizeStream(s), 0);
    }
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    assert_eq!(buf, [3; 8]);
    destroy(s);
    teardown();
}

#[test]
fn event_status_enums_and_waits() {
    let _g = shared();
    let (a, b) = (stream(), stream());
    let e = event(None);
    let mut buf = [0u8; 4];
    // SAFETY: buf outlives the synchronize.
    unsafe {
        let mut st = -1;
        assert_eq!(aclrtQueryEventStatus(e, &mut st), 0);
        assert_eq!(st, ACL_EVENT_RECORDED_STATUS_COMPLETE);
        assert_eq!(xsimLaunchDelay(a, 100_000), 0);
        assert_eq!(aclrtRecordEvent(e, a), 0);
        assert_eq!(aclrtStreamWaitEvent(b, e), 0);
        assert_eq!(aclrtMemsetAsync(buf.as_mut_ptr().cast(), 4, 9, 4, b), 0);
        assert_eq!(aclrtQueryEventStatus(e, &mut st), 0);
        assert_eq!(st, ACL_EVENT_RECORDED_STATUS_NOT_READY);
        assert_eq!(aclrtQueryEvent(e, &mut st), 0);
        assert_eq!(st, ACL_EVENT_STATUS_NOT_READY);
        assert_eq!(aclrtQueryEventWaitStatus(e, &mut st), 0);
        assert_eq!(st, ACL_EVENT_WAIT_STATUS_NOT_READY);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(buf, [0; 4], "wait must hold stream b");
        assert_eq!(
            aclrtSynchronizeEventWithTimeout(e, 5),
            ACL_ERROR_RT_EVENT_SYNC_TIMEOUT
        );
        assert_eq!(aclrtSynchronizeEvent(e), 0);
        assert_eq!(aclrtQueryEventStatus(e, &mut st), 0);
        assert_eq!(st, ACL_EVENT_RECORDED_STATUS_COMPLETE);
        assert_eq!(aclrtQueryEvent(e, &mut st), 0);
        assert_eq!(st, ACL_EVENT_STATUS_COMPLETE);
        assert_eq!(aclrtSynchronizeStream(b), 0);
        assert_eq!(buf, [9; 4]);
        assert_eq!(
            aclrtSynchronizeEventWithTimeout(e, 0),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(
            aclrtSynchronizeEventWithTimeout(e, -5),
            ACL_ERROR_RT_PARAM_INVALID
        );

        // Ex events: deprecated query is unsupported; waits need SYNC.
        let ex = event(Some(ACL_EVENT_TIME_LINE));
        assert_eq!(
            aclrtQueryEvent(ex, &mut st),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        assert_eq!(aclrtStreamWaitEvent(b, ex), ACL_ERROR_RT_PARAM_INVALID);
        assert_eq!(aclrtDestroyEvent(ex), 0);
        assert_eq!(aclrtDestroyEvent(e), 0);
        assert_eq!(aclrtDestroyEvent(null_mut()), ACL_ERROR_INVALID_PARAM);
    }
    destroy(a);
    destroy(b);
    teardown();
}

#[test]
fn event_creation_rules() {
    let _g = shared();
    // SAFETY: valid out-pointers.
    unsafe {
        let mut e = null_mut();
        let with = |f| {
            let mut x = null_mut();
            aclrtCreateEventWithFlag(&mut x, f)
        };
        assert_eq!(with(0), ACL_ERROR_RT_PARAM_INVALID);
        assert_eq!(with(0x80), ACL_ERROR_RT_PARAM_INVALID);
        assert_eq!(with(ACL_EVENT_IPC), ACL_ERROR_RT_PARAM_INVALID);
        assert_eq!(
            with(ACL_EVENT_DEVICE_USE_ONLY | ACL_EVENT_SYNC),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(
            with(ACL_EVENT_EXTERNAL | ACL_EVENT_TIME_LINE),
            ACL_ERROR_RT_PARAM_INVALID
        );
        for ok in [
            ACL_EVENT_SYNC,
            ACL_EVENT_EXTERNAL,
            ACL_EVENT_DEVICE_USE_ONLY,
            0xF,
        ] {
            assert_eq!(aclrtCreateEventWithFlag(&mut e, ok), 0, "{ok:#x}");
            assert_eq!(aclrtDestroyEvent(e), 0);
        }
        let ex = |f| {
            let mut x = null_mut();
            aclrtCreateEventExWithFlag(&mut x, f)
        };
        assert_eq!(ex(0), ACL_ERROR_RT_PARAM_INVALID);
        assert_eq!(ex(ACL_EVENT_DEVICE_USE_ONLY), ACL_ERROR_RT_PARAM_INVALID);
        assert_eq!(ex(ACL_EVENT_EXTERNAL), ACL_ERROR_RT_PARAM_INVALID);
        assert_eq!(
            ex(ACL_EVENT_IPC | ACL_EVENT_SYNC),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(ex(ACL_EVENT_IPC), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        assert_eq!(
            aclrtCreateEventExWithFlag(&mut e, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE | 0x4),
            0
        );
        assert_eq!(aclrtDestroyEvent(e), 0);
        assert_eq!(
            aclrtCreateEventExWithFlag(null_mut(), 1),
            ACL_ERROR_INVALID_PARAM
        );
        std::thread::spawn(|| {
            let mut e = null_mut();
            assert_eq!(aclrtCreateEvent(&mut e), ACL_ERROR_RT_CONTEXT_NULL);
        })
        .join()
        .unwrap();
    }
    teardown();
}

#[test]
fn elapsed_time_and_timestamp() {
    let _g = shared();
    let s = stream();
    // SAFETY: valid out-pointers; handles from the simulator.
    unsafe {
        let (a, b) = (event(None), event(None));
        let mut ms = 0f32;
        assert_eq!(
            aclrtEventElapsedTime(&mut ms, a, b),
            ACL_ERROR_RT_INTERNAL_ERROR
        );
        assert_eq!(aclrtRecordEvent(a, s), 0);
        assert_eq!(xsimLaunchDelay(s, 20_000), 0);
        assert_eq!(aclrtRecordEvent(b, s), 0);
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(aclrtEventElapsedTime(&mut ms, a, b), 0);
        assert!((19.0..2000.0).contains(&ms), "elapsed {ms}");
        let (mut ta, mut tb) = (0u64, 0u64);
        assert_eq!(aclrtEventGetTimestamp(a, &mut ta), 0);
        assert_eq!(aclrtEventGetTimestamp(b, &mut tb), 0);
        assert!(tb - ta >= 19_000, "µs timestamps {ta} {tb}");
        let nt = event(Some(ACL_EVENT_SYNC));
        assert_eq!(aclrtRecordEvent(nt, s), 0);
        assert_eq!(aclrtSynchronizeEvent(nt), 0);
        assert_eq!(
            aclrtEventElapsedTime(&mut ms, a, nt),
            ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID
        );
        assert_eq!(
            aclrtEventGetTimestamp(nt, &mut ta),
            ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID
        );
        for e in [a, b, nt] {
            assert_eq!(aclrtDestroyEvent(e), 0);
        }
    }
    destroy(s);
    teardown();
}

#[test]
fn timeouts() {
    let _g = shared();
    let s = stream();
    // SAFETY: handles from the simulator.
    unsafe {
        assert_eq!(
            aclrtSynchronizeStreamWithTimeout(s, 0),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(
            aclrtSynchronizeStreamWithTimeout(s, -2),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(
            aclrtSynchronizeDeviceWithTimeout(0),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(xsimLaunchDelay(s, 300_000), 0);
        let t = Instant::now();
        assert_eq!(
            aclrtSynchronizeStreamWithTimeout(s, 20),
            ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        );
        assert!(t.elapsed() < Duration::from_millis(250));
        assert_eq!(
            aclrtSynchronizeDeviceWithTimeout(20),
            ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        );
        assert_eq!(aclrtSynchronizeStreamWithTimeout(s, -1), 0);
    }
    destroy(s);
    teardown();
}

#[test]
fn destroy_abort_and_force() {
    let _g = shared();
    let mut buf = [0u8; 4];
    // SAFETY: buf outlives the work (destroy waits or drops it).
    unsafe {
        let s = stream();
        assert_eq!(xsimLaunchDelay(s, 30_000), 0);
        assert_eq!(aclrtMemsetAsync(buf.as_mut_ptr().cast(), 4, 5, 4, s), 0);
        assert_eq!(aclrtDestroyStream(s), 0);
        assert_eq!(buf, [5; 4], "DestroyStream waits for queued work");

        let s = stream();
        assert_eq!(xsimLaunchDelay(s, 200_000), 0);
        assert_eq!(aclrtMemsetAsync(buf.as_mut_ptr().cast(), 4, 6, 4, s), 0);
        assert_eq!(aclrtDestroyStreamForce(s), 0);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(buf, [5; 4], "DestroyStreamForce drops pending work");
        assert_eq!(aclrtDestroyStreamForce(null_mut()), ACL_ERROR_INVALID_PARAM);

        let s = stream();
        assert_eq!(xsimLaunchDelay(s, 2_000_000), 0);
        assert_eq!(aclrtMemsetAsync(buf.as_mut_ptr().cast(), 4, 7, 4, s), 0);
        let h = s as usize;
        let syncer = std::thread::spawn(move || {
            aclrtSetDevice(0);
            let r = aclrtSynchronizeStream(h as *mut c_void);
            aclrtResetDevice(0);
            r
        });
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(aclrtStreamAbort(s), 0);
        assert_eq!(syncer.join().unwrap(), ACL_ERROR_RT_STREAM_ABORT);
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(buf, [5; 4], "abort discards queued work");
        destroy(s);
    }
    teardown();
}

#[test]
fn stream_context_ownership() {
    let _g = shared();
    // SAFETY: valid out-pointers; handles from the simulator.
    unsafe {
        let mut primary = null_mut();
        assert_eq!(aclrtGetCurrentContext(&mut primary), 0);
        let s = stream();
        let e = event(None);
        let mut ctx = null_mut();
        assert_eq!(aclrtCreateContext(&mut ctx, 0), 0);
        assert_eq!(aclrtRecordEvent(e, s), ACL_ERROR_RT_STREAM_CONTEXT);
        assert_eq!(aclrtStreamWaitEvent(s, e), ACL_ERROR_RT_STREAM_CONTEXT);
        assert_eq!(aclrtDestroyStream(s), ACL_ERROR_RT_STREAM_CONTEXT);
        // Synchronize needs only some current context; event query/sync need none.
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(aclrtSynchronizeEvent(e), 0);
        assert_eq!(aclrtDestroyContext(ctx), 0);
        assert_eq!(aclrtSetCurrentContext(primary), 0);
        assert_eq!(aclrtDestroyContext(primary), ACL_ERROR_RT_PARAM_INVALID);
        assert_eq!(aclrtDestroyEvent(e), 0);
        destroy(s);
    }
    teardown();
}

#[test]
fn memcpy_and_lcg_kernel() {
    let _g = shared();
    let s = stream();
    // SAFETY: buffers outlive the synchronize.
    unsafe {
        let mut dev = null_mut();
        assert_eq!(aclrtMalloc(&mut dev, 16, 0), 0);
        let src: [u32; 4] = [1, 2, 3, 4];
        let mut out = [0u32; 4];
        assert_eq!(
            aclrtMemcpyAsync(dev, 8, src.as_ptr().cast(), 16, 1, s),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtMemcpyAsync(dev, 16, src.as_ptr().cast(), 16, 9, s),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtMemcpyAsync(dev, 16, src.as_ptr().cast(), 16, 1, s), 0);
        assert_eq!(xsimLaunchLcg(s, dev, 4, 3), 0);
        assert_eq!(
            aclrtMemcpyAsync(out.as_mut_ptr().cast(), 16, dev, 16, 2, s),
            0
        );
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(out, src.map(|x| lcg(x, 3)));
        assert_eq!(aclrtFree(dev), 0);
        assert_eq!(aclrtFree(dev), ACL_ERROR_INVALID_PARAM);
        let mut host = null_mut();
        assert_eq!(aclrtMallocHost(&mut host, 0), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtMallocHost(&mut host, 64), 0);
        assert_eq!(aclrtFreeHost(host), 0);
    }
    destroy(s);
    teardown();
}

#[test]
fn capture_record_and_replay() {
    let _g = shared();
    let s = stream();
    let mut buf = [0u32; 8];
    let p = buf.as_mut_ptr().cast::<c_void>();
    // SAFETY: buf outlives all replays (synchronized).
    unsafe {
        let mut st = -1;
        let mut ri = null_mut();
        assert_eq!(aclmdlRICaptureGetInfo(s, &mut st, &mut ri), 0);
        assert_eq!(st, ACL_MODEL_RI_CAPTURE_STATUS_NONE);
        assert_eq!(
            aclmdlRICaptureEnd(s, &mut ri),
            ACL_ERROR_RT_STREAM_NOT_CAPTURED
        );
        // The ACL layer's NULL check comes before the default-stream rule.
        assert_eq!(aclmdlRICaptureBegin(null_mut(), 0), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclmdlRICaptureBegin(s, 0), 0);
        assert_eq!(aclmdlRICaptureBegin(s, 0), ACL_ERROR_RT_STREAM_CAPTURED);
        assert_eq!(xsimLaunchLcg(s, p, 8, 1), 0);
        let e = event(Some(ACL_EVENT_SYNC));
        assert_eq!(aclrtRecordEvent(e, s), 0);
        assert_eq!(aclmdlRICaptureGetInfo(s, &mut st, &mut ri), 0);
        assert_eq!(st, ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE);
        assert!(!ri.is_null());
        let h = s as usize;
        std::thread::spawn(move || {
            let mut ri = null_mut();
            assert_eq!(
                aclmdlRICaptureEnd(h as *mut c_void, &mut ri),
                ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD
            );
        })
        .join()
        .unwrap();
        std::thread::sleep(Duration::from_millis(10));
        assert_eq!(buf, [0; 8], "captured work is not run");
        assert_eq!(aclmdlRICaptureEnd(s, &mut ri), 0);
        assert!(!ri.is_null());
        assert_eq!(aclmdlRIExecuteAsync(ri, s), 0);
        assert_eq!(aclmdlRIExecuteAsync(ri, s), 0);
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(buf, [lcg(0, 2); 8]);
        assert_eq!(aclmdlRIExecute(ri, 0), ACL_ERROR_RT_PARAM_INVALID);
        assert_eq!(aclmdlRIExecute(ri, -1), 0);
        assert_eq!(buf, [lcg(0, 3); 8]);
        assert_eq!(aclrtSynchronizeEvent(e), 0);
        assert_eq!(aclmdlRIDestroy(ri), 0);
        assert_eq!(aclmdlRIDestroy(ri), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtDestroyEvent(e), 0);
    }
    destroy(s);
    teardown();
}

#[test]
fn capture_invalidation_and_illegal_ops() {
    let _g = shared();
    let (s, t) = (stream(), stream());
    // SAFETY: handles from the simulator.
    unsafe {
        let mut st = 0;
        let mut ri = null_mut();
        // Query / synchronize of the capturing stream are refused with 107027 but do not
        // invalidate the capture: CaptureEnd then succeeds and returns the model.
        assert_eq!(
            aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL),
            0
        );
        assert_eq!(aclrtStreamQuery(s, &mut st), ACL_ERROR_RT_STREAM_CAPTURED);
        assert_eq!(aclrtSynchronizeStream(s), ACL_ERROR_RT_STREAM_CAPTURED);
        assert_eq!(
            aclrtSynchronizeStreamWithTimeout(s, 10),
            ACL_ERROR_RT_STREAM_CAPTURED
        );
        assert_eq!(aclrtDestroyStream(s), ACL_ERROR_RT_STREAM_CAPTURED);
        assert_eq!(aclmdlRICaptureGetInfo(s, &mut st, null_mut()), 0);
        assert_eq!(st, ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE);
        assert_eq!(aclmdlRICaptureEnd(s, &mut ri), 0);
        assert!(!ri.is_null());
        assert_eq!(aclmdlRIDestroy(ri), 0);
        ri = null_mut();

        // Default stream during capture → 107031; event recorded in capture → 107028.
        assert_eq!(aclmdlRICaptureBegin(s, 0), 0);
        let mut buf = [0u8; 4];
        assert_eq!(
            aclrtMemsetAsync(buf.as_mut_ptr().cast(), 4, 1, 4, null_mut()),
            ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT
        );
        let ex = event(Some(ACL_EVENT_SYNC));
        assert_eq!(aclrtRecordEvent(ex, s), 0);
        assert_eq!(
            aclrtQueryEventStatus(ex, &mut st),
            ACL_ERROR_RT_EVENT_CAPTURED
        );
        assert_eq!(
            aclmdlRICaptureEnd(s, &mut ri),
            ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED
        );

        // Cross-stream capture: Ex events join the other stream; legacy events → 207000.
        assert_eq!(aclmdlRICaptureBegin(s, 0), 0);
        assert_eq!(aclrtRecordEvent(ex, s), 0);
        assert_eq!(aclrtStreamWaitEvent(t, ex), 0);
        assert_eq!(xsimLaunchLcg(t, buf.as_mut_ptr().cast(), 1, 1), 0);
        assert_eq!(aclmdlRICaptureGetInfo(t, &mut st, null_mut()), 0);
        assert_eq!(st, ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE);
        assert_eq!(
            aclmdlRICaptureEnd(t, &mut ri),
            ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED
        );
        assert_eq!(aclmdlRICaptureEnd(s, &mut ri), 0);
        assert_eq!(buf, [0; 4]);
        assert_eq!(aclmdlRIExecuteAsync(ri, t), 0);
        assert_eq!(aclrtSynchronizeStream(t), 0);
        assert_eq!(u32::from_ne_bytes(buf), lcg(0, 1));
        assert_eq!(aclmdlRIDestroy(ri), 0);

        let legacy = event(None);
        assert_eq!(aclmdlRICaptureBegin(s, 0), 0);
        assert_eq!(
            aclrtStreamWaitEvent(s, legacy),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        assert_eq!(
            aclmdlRICaptureEnd(s, &mut ri),
            ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED
        );

        // RELAXED exchange mode lets the capturing thread use the default stream.
        assert_eq!(aclmdlRICaptureBegin(s, 0), 0);
        let mut mode = ACL_MODEL_RI_CAPTURE_MODE_RELAXED;
        assert_eq!(aclmdlRICaptureThreadExchangeMode(&mut mode), 0);
        assert_eq!(mode, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
        assert_eq!(aclrtSynchronizeStream(null_mut()), 0);
        assert_eq!(aclmdlRICaptureThreadExchangeMode(&mut mode), 0);
        assert_eq!(aclmdlRICaptureEnd(s, &mut ri), 0);
        assert_eq!(aclmdlRIDestroy(ri), 0);
        assert_eq!(aclrtDestroyEvent(ex), 0);
        assert_eq!(aclrtDestroyEvent(legacy), 0);
    }
    destroy(s);
    destroy(t);
    teardown();
}

#[test]
fn persistent_stream_build() {
    let _g = shared();
    let mut buf = [0u32; 4];
    // SAFETY: buf outlives the replays.
    unsafe {
        let mut ps = null_mut();
        assert_eq!(
            aclrtCreateStreamWithConfig(&mut ps, 0, ACL_STREAM_PERSISTENT),
            0
        );
        assert_eq!(xsimLaunchLcg(ps, buf.as_mut_ptr().cast(), 4, 2), 0);
        std::thread::sleep(Duration::from_millis(10));
        assert_eq!(buf, [0; 4], "persistent tasks are kept, not run");
        let mut ri = null_mut();
        assert_eq!(aclmdlRIBuildBegin(&mut ri, 0), 0);
        let s = stream();
        assert_eq!(aclmdlRIBindStream(ri, s, 0), ACL_ERROR_RT_PARAM_INVALID);
        assert_eq!(aclmdlRIBindStream(ri, ps, 0), 0);
        assert_eq!(aclmdlRIEndTask(ri, ps), 0);
        assert_eq!(aclmdlRIExecuteAsync(ri, s), ACL_ERROR_RT_PARAM_INVALID);
        assert_eq!(aclmdlRIBuildEnd(ri, null_mut()), 0);
        assert_eq!(aclmdlRIExecuteAsync(ri, s), 0);
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(buf, [lcg(0, 2); 4]);
        assert_eq!(aclmdlRIExecute(ri, 5000), 0);
        assert_eq!(buf, [lcg(0, 4); 4]);
        assert_eq!(aclmdlRIUnbindStream(ri, ps), 0);
        assert_eq!(aclmdlRIUnbindStream(ri, ps), ACL_ERROR_RT_PARAM_INVALID);
        assert_eq!(aclmdlRIDestroy(ri), 0);
        destroy(ps);
        destroy(s);
    }
    teardown();
}

unsafe extern "C" fn fake_alloc(_a: *mut c_void, _n: usize) -> *mut c_void {
    null_mut()
}
unsafe extern "C" fn fake_free(_a: *mut c_void, _b: *mut c_void) {}
unsafe extern "C" fn fake_addr(b: *mut c_void) -> *mut c_void {
    b
}

#[test]
fn allocator_registry() {
    let _g = shared();
    let s = stream();
    // SAFETY: valid out-pointers; handles from the simulator.
    unsafe {
        let d = aclrtAllocatorCreateDesc();
        assert!(!d.is_null());
        assert_eq!(aclrtAllocatorRegister(s, d), ACL_ERROR_INVALID_PARAM);
        let obj = 0x1234usize as *mut c_void;
        assert_eq!(aclrtAllocatorSetObjToDesc(d, obj), 0);
        assert_eq!(aclrtAllocatorSetAllocFuncToDesc(d, Some(fake_alloc)), 0);
        assert_eq!(aclrtAllocatorSetFreeFuncToDesc(d, Some(fake_free)), 0);
        assert_eq!(
            aclrtAllocatorRegister(s, d),
            ACL_ERROR_INVALID_PARAM,
            "getAddr missing"
        );
        assert_eq!(
            aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, Some(fake_addr)),
            0
        );
        assert_eq!(
            aclrtAllocatorRegister(null_mut(), d),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtAllocatorRegister(s, d), 0);
        // Later desc edits do not affect the registration.
        assert_eq!(aclrtAllocatorSetObjToDesc(d, null_mut()), 0);
        let mut od = null_mut();
        let mut oo = null_mut();
        let mut advise: AclrtAllocatorAllocAdviseFunc = Some(std::mem::transmute::<
            usize,
            unsafe extern "C" fn(*mut c_void, usize, *mut c_void) -> *mut c_void,
        >(1));
        let mut ga: AclrtAllocatorGetAddrFromBlockFunc = None;
        assert_eq!(
            aclrtAllocatorGetByStream(
                s,
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut()
            ),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtAllocatorGetByStream(
                s,
                &mut od,
                &mut oo,
                null_mut(),
                null_mut(),
                &mut advise,
                &mut ga
            ),
            0
        );
        assert_eq!(od, d);
        assert_eq!(oo, obj);
        assert!(advise.is_none());
        assert_eq!(
            ga.map(|f| f as *const () as usize),
            Some(fake_addr as *const () as usize)
        );
        let other = stream();
        assert_eq!(
            aclrtAllocatorGetByStream(
                other,
                &mut od,
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut()
            ),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtAllocatorUnregister(null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtAllocatorUnregister(s), 0);
        assert_eq!(aclrtAllocatorUnregister(s), 0);
        assert_eq!(aclrtAllocatorUnregister(other), 0);
        assert_eq!(aclrtAllocatorDestroyDesc(d), 0);
        assert_eq!(
            aclrtAllocatorDestroyDesc(null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        destroy(other);
    }
    destroy(s);
    teardown();
}

#[test]
fn stream_attributes_and_failure_mode() {
    let _g = shared();
    let s = stream();
    // SAFETY: valid pointers.
    unsafe {
        let mut v = AclrtStreamAttrValue { reserve: [0; 4] };
        assert_eq!(
            aclrtGetStreamAttribute(s, ACL_STREAM_ATTR_FAILURE_MODE, &mut v),
            0
        );
        assert_eq!(v.failure_mode, ACL_CONTINUE_ON_FAILURE);
        assert_eq!(aclrtSetStreamFailureMode(s, 5), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtSetStreamFailureMode(s, ACL_STOP_ON_FAILURE), 0);
        assert_eq!(
            aclrtGetStreamAttribute(s, ACL_STREAM_ATTR_FAILURE_MODE, &mut v),
            0
        );
        assert_eq!(v.failure_mode, ACL_STOP_ON_FAILURE);
        v.failure_mode = ACL_CONTINUE_ON_FAILURE;
        assert_eq!(
            aclrtSetStreamAttribute(s, ACL_STREAM_ATTR_FAILURE_MODE, &mut v),
            ACL_ERROR_RT_PARAM_INVALID
        );
        v = AclrtStreamAttrValue { reserve: [0; 4] };
        v.user_custom_tag = 42;
        assert_eq!(
            aclrtSetStreamAttribute(s, ACL_STREAM_ATTR_USER_CUSTOM_TAG, &mut v),
            0
        );
        v.reserve = [0; 4];
        assert_eq!(
            aclrtGetStreamAttribute(s, ACL_STREAM_ATTR_USER_CUSTOM_TAG, &mut v),
            0
        );
        assert_eq!(v.user_custom_tag, 42);
        v.stream_priority = 4;
        assert_eq!(
            aclrtSetStreamAttribute(s, ACL_STREAM_ATTR_PRIORITY, &mut v),
            0
        );
        let mut p = 0;
        assert_eq!(aclrtStreamGetPriority(s, &mut p), 0);
        assert_eq!(p, 4);
        assert_eq!(
            aclrtGetStreamAttribute(s, 99, &mut v),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtGetStreamAttribute(s, 1, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        let mut d = null_mut();
        assert_eq!(
            aclrtCreateStreamWithConfig(&mut d, 0, ACL_STREAM_DEVICE_USE_ONLY),
            0
        );
        assert_eq!(
            aclrtSetStreamFailureMode(d, 1),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        destroy(d);
    }
    destroy(s);
    teardown();
}

#[test]
fn error_messages_and_last_error() {
    let _g = shared();
    // SAFETY: valid pointers.
    unsafe {
        while !aclGetRecentErrMsg().is_null() {}
        aclrtGetLastError(0);
        assert_eq!(aclrtPeekAtLastError(0), 0);
        assert_eq!(aclrtCreateStream(null_mut()), ACL_ERROR_INVALID_PARAM);
        let m = aclGetRecentErrMsg();
        assert!(!m.is_null());
        let text = CStr::from_ptr(m).to_string_lossy().into_owned();
        assert!(text.contains("aclrtCreateStream"), "{text}");
        assert!(aclGetRecentErrMsg().is_null(), "drained by the call");
        assert_eq!(aclrtPeekAtLastError(0), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtGetLastError(0), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtGetLastError(0), 0);
        assert!(CStr::from_ptr(xsimVersion())
            .to_string_lossy()
            .contains("sim"));
    }
    teardown();
}

#[test]
fn fault_injection_rules() {
    let _g = exclusive();
    // SAFETY: valid pointers.
    unsafe {
        assert_eq!(xsimReset(), 0);
        assert_eq!(
            xsimSetFaults(c"aclrtCreateStream:2:507899;aclrtStreamQuery:*:507001".as_ptr()),
            0
        );
        let a = stream();
        let mut b = null_mut();
        assert_eq!(aclrtCreateStream(&mut b), 507_899);
        let c = stream();
        let mut st = 0;
        assert_eq!(aclrtStreamQuery(a, &mut st), 507_001);
        assert_eq!(aclrtStreamQuery(a, &mut st), 507_001);
        assert_eq!(xsimCallCount(c"aclrtCreateStream".as_ptr()), 3);
        assert_eq!(xsimCallCount(c"aclrtStreamQuery".as_ptr()), 2);
        assert_eq!(xsimSetFaults(c"garbage".as_ptr()), ACL_ERROR_INVALID_PARAM);
        assert_eq!(xsimSetFaults(std::ptr::null()), 0);
        assert_eq!(aclrtStreamQuery(a, &mut st), 0);

        // hang: the stream does not finish its current task until released.
        let mut id = 0;
        assert_eq!(aclrtStreamGetId(a, &mut id), 0);
        let spec = std::ffi::CString::new(format!("hang:{id}")).unwrap();
        assert_eq!(xsimSetFaults(spec.as_ptr()), 0);
        assert_eq!(xsimLaunchDelay(a, 1), 0);
        assert_eq!(
            aclrtSynchronizeStreamWithTimeout(a, 30),
            ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        );
        assert_eq!(xsimReleaseHang(), 0);
        assert_eq!(aclrtSynchronizeStream(a), 0);

        // poison: every context fails with the code until xsimReset.
        assert_eq!(xsimSetFaults(c"poison:507010".as_ptr()), 0);
        assert_eq!(aclrtSynchronizeStream(a), 507_010);
        assert_eq!(xsimReset(), 0);
        assert_eq!(aclrtSynchronizeStream(a), 0);
        assert_eq!(xsimCallCount(c"aclrtCreateStream".as_ptr()), 0);
        destroy(a);
        destroy(c);
    }
    teardown();
}

#[test]
fn launch_fault_poisons_only_its_context() {
    let _g = shared();
    let hits = AtomicUsize::new(0);
    // SAFETY: valid pointers; `hits`/`buf` outlive the work.
    unsafe {
        let mut primary = null_mut();
        assert_eq!(aclrtGetCurrentContext(&mut primary), 0);
        let mut ctx = null_mut();
        assert_eq!(aclrtCreateContext(&mut ctx, 0), 0);
        let s = stream();
        assert_eq!(aclrtSubscribeReport(tid(), s), 0);
        let mut buf = [0u8; 4];
        assert_eq!(xsimLaunchFault(s, 0), ACL_ERROR_INVALID_PARAM);
        // Keep the stream busy so the later enqueues happen before the fault executes.
        assert_eq!(xsimLaunchDelay(s, 100_000), 0);
        assert_eq!(xsimLaunchFault(s, 507_010), 0);
        assert_eq!(aclrtMemsetAsync(buf.as_mut_ptr().cast(), 4, 1, 4, s), 0);
        let data = &hits as *const AtomicUsize as *mut c_void;
        assert_eq!(
            aclrtLaunchCallback(Some(count_cb), data, ACL_CALLBACK_NO_BLOCK, s),
            0
        );
        assert_eq!(aclrtSynchronizeStream(s), 507_010);
        assert_eq!(buf, [0; 4], "work after the fault is skipped");
        let mut st = 0;
        assert_eq!(aclrtStreamQuery(s, &mut st), 507_010);
        assert_eq!(
            aclrtMemsetAsync(buf.as_mut_ptr().cast(), 4, 1, 4, s),
            507_010
        );
        assert_eq!(aclrtProcessReport(1000), 0, "report callbacks still run");
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        destroy(s);
        assert_eq!(aclrtDestroyContext(ctx), 0);
        assert_eq!(aclrtSetCurrentContext(primary), 0);
        let t = stream();
        assert_eq!(aclrtSynchronizeStream(t), 0, "primary context unaffected");
        destroy(t);
    }
    teardown();
}

#[test]
fn no_leaks_after_teardown() {
    let _g = exclusive();
    // SAFETY: valid pointers.
    unsafe {
        let (s0, e0, t0) = (xsimLiveStreams(), xsimLiveEvents(), xsimLiveThreads());
        let hits = AtomicUsize::new(0);
        let data = &hits as *const AtomicUsize as *mut c_void;
        let mut ctx = null_mut();
        assert_eq!(aclrtCreateContext(&mut ctx, 0), 0);
        let streams: Vec<_> = (0..4).map(|_| stream()).collect();
        let ev = event(None);
        for s in &streams {
            assert_eq!(xsimLaunchDelay(*s, 1000), 0);
            assert_eq!(aclrtLaunchHostFunc(*s, Some(count_cb), data), 0);
            assert_eq!(aclrtRecordEvent(ev, *s), 0);
        }
        assert!(xsimLiveThreads() > t0);
        assert_eq!(xsimLiveStreams(), s0 + 4);
        assert_eq!(xsimLiveEvents(), e0 + 1);
        for s in streams {
            destroy(s);
        }
        assert_eq!(hits.load(Ordering::SeqCst), 4);
        assert_eq!(aclrtDestroyEvent(ev), 0);
        assert_eq!(aclrtDestroyContext(ctx), 0);
        assert_eq!(xsimLiveStreams(), s0);
        assert_eq!(xsimLiveEvents(), e0);
        assert_eq!(xsimLiveThreads(), t0);
    }
    teardown();
}
