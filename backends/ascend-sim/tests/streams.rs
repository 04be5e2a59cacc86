//! ABI tests of the ACL simulator through the rlib. Streams: flags, priorities, limits, ids,
//! timeouts, destroy / abort / force destroy, attributes and failure mode.

mod common;

use ascendcl::codes::*;
use ascendcl::*;
use common::*;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::time::Duration;
use std::time::Instant;

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

/// Per product, as the runtime's chip configurations say: the 310P has no huge streams, the
/// Ascend 910 no DEVICE_USE_ONLY (coprocessor) streams; the combination rule comes first.
#[test]
fn stream_flags_per_product() {
    let _g = exclusive();
    let create = |flag: u32| {
        let mut s = null_mut();
        // SAFETY: a valid out-pointer.
        let rc = unsafe { aclrtCreateStreamWithConfig(&mut s, 0, flag) };
        if rc == 0 {
            destroy(s);
        }
        rc
    };
    let set = |p: &std::ffi::CStr| {
        // SAFETY: a valid C string.
        assert_eq!(unsafe { xsimSetProduct(p.as_ptr()) }, 0);
    };
    let mixed = ACL_STREAM_DEVICE_USE_ONLY | ACL_STREAM_FAST_LAUNCH;
    set(c"a2");
    assert_eq!(create(ACL_STREAM_HUGE), 0);
    assert_eq!(create(ACL_STREAM_DEVICE_USE_ONLY), 0);
    set(c"310p");
    assert_eq!(create(ACL_STREAM_HUGE), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    assert_eq!(create(ACL_STREAM_DEVICE_USE_ONLY), 0);
    set(c"910");
    assert_eq!(create(ACL_STREAM_HUGE), 0);
    assert_eq!(
        create(ACL_STREAM_DEVICE_USE_ONLY),
        ACL_ERROR_RT_FEATURE_NOT_SUPPORT
    );
    assert_eq!(create(mixed), ACL_ERROR_RT_PARAM_INVALID);
    // SAFETY: NULL restores the configured product.
    assert_eq!(unsafe { xsimSetProduct(std::ptr::null()) }, 0);
    teardown();
}

#[test]
fn stream_ids_reused_event_ids_increase() {
    let _g = exclusive();
    // SAFETY: valid out-pointers; handles from the simulator.
    unsafe {
        let (a, b) = (stream(), stream());
        let (mut ia, mut ib) = (0, 0);
        assert_eq!(aclrtStreamGetId(a, &mut ia), 0);
        assert_eq!(aclrtStreamGetId(b, &mut ib), 0);
        assert_ne!(ia, ib);
        // The runtime's driver hands out the lowest free id: a's comes back.
        destroy(a);
        let c = stream();
        let mut ic = 0;
        assert_eq!(aclrtStreamGetId(c, &mut ic), 0);
        assert_eq!(ic, ia, "a destroyed stream's id is reused");
        destroy(b);
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
