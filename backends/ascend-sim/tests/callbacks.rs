//! ABI tests of the ACL simulator through the rlib. Host callbacks: report-style callbacks
//! (blocking and not, on another thread, auto-unsubscribe) and `aclrtLaunchHostFunc`.

mod common;

use ascendcl::codes::*;
use ascendcl::*;
use common::*;
use std::ffi::c_void;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

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
