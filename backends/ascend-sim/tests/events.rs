//! ABI tests of the ACL simulator through the rlib. Events: status enums and waits, creation flag
//! rules, elapsed time and timestamps.

mod common;

use ascendcl::codes::*;
use ascendcl::*;
use common::*;
use std::ptr::null_mut;
use std::time::Duration;

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
        // The default A2 has IPC events (the refusal with XSIM_IPC=0: ipc_event.rs).
        if std::env::var_os("XSIM_IPC").is_none() {
            let mut ipc = null_mut();
            assert_eq!(aclrtCreateEventExWithFlag(&mut ipc, ACL_EVENT_IPC), 0);
            assert_eq!(aclrtDestroyEvent(ipc), 0);
        }
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

/// The runtime's first status query of a timing event whose record ran but whose completion it
/// has not collected says NOT_READY on the STARS products and collects it; a synchronize
/// collects too; events without a time line and other products answer from the device.
#[test]
fn first_query_after_completion_collects_on_stars_products() {
    let _g = exclusive();
    let a = stream();
    let timing = event(None);
    let plain = event(Some(ACL_EVENT_SYNC));
    let last = event(Some(ACL_EVENT_SYNC));
    let query = |e| {
        let mut st = -1;
        // SAFETY: valid out-pointer.
        assert_eq!(unsafe { aclrtQueryEventStatus(e, &mut st) }, 0);
        st
    };
    // Records run on the device; `last` has no time line, so polling it collects nothing.
    let run = |evs: &[*mut std::ffi::c_void]| {
        // SAFETY: handles from the simulator.
        unsafe {
            for &e in evs {
                assert_eq!(aclrtRecordEvent(e, a), 0);
            }
            assert_eq!(aclrtRecordEvent(last, a), 0);
        }
        let mut polls = 0;
        while query(last) != ACL_EVENT_RECORDED_STATUS_COMPLETE {
            polls += 1;
            assert!(polls < 100_000, "the records never ran");
            std::thread::sleep(Duration::from_micros(100));
        }
    };
    run(&[timing, plain]);
    assert_eq!(query(timing), ACL_EVENT_RECORDED_STATUS_NOT_READY);
    assert_eq!(query(timing), ACL_EVENT_RECORDED_STATUS_COMPLETE);
    assert_eq!(query(plain), ACL_EVENT_RECORDED_STATUS_COMPLETE);
    // A stream synchronize, and an event synchronize, collect the stream's records.
    run(&[timing]);
    // SAFETY: a live stream.
    assert_eq!(unsafe { aclrtSynchronizeStream(a) }, 0);
    assert_eq!(query(timing), ACL_EVENT_RECORDED_STATUS_COMPLETE);
    run(&[timing]);
    // SAFETY: a live event.
    assert_eq!(unsafe { aclrtSynchronizeEvent(last) }, 0);
    assert_eq!(query(timing), ACL_EVENT_RECORDED_STATUS_COMPLETE);
    // 310P (no STARS): the answer comes from the device.
    // SAFETY: a valid C string.
    assert_eq!(unsafe { xsimSetProduct(c"310p".as_ptr()) }, 0);
    run(&[timing]);
    assert_eq!(query(timing), ACL_EVENT_RECORDED_STATUS_COMPLETE);
    // SAFETY: NULL restores the configured product.
    assert_eq!(unsafe { xsimSetProduct(std::ptr::null()) }, 0);
    // SAFETY: handles from the simulator.
    unsafe {
        aclrtDestroyEvent(timing);
        aclrtDestroyEvent(plain);
        aclrtDestroyEvent(last);
    }
    destroy(a);
    teardown();
}
