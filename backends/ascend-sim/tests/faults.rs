//! ABI tests of the ACL simulator through the rlib. Errors and fault injection: error messages and
//! last error, fault rules, a launched fault poisoning only its context.

mod common;

use ascendcl::codes::*;
use ascendcl::*;
use common::*;
use std::ffi::c_void;
use std::ffi::CStr;
use std::ptr::null_mut;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

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
