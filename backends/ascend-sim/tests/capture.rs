//! ABI tests of the ACL simulator through the rlib. Capture and model run instances: record and
//! replay, invalidation and illegal operations, the build API on persistent streams.

mod common;

use ascendcl::codes::*;
use ascendcl::*;
use common::*;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::time::Duration;

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
