//! `xsimLaunchHostTask` / `xsimHostTaskCancelled` (simulator-only, used by the HCCL
//! simulator): stream order, exactly one call per task (NULL token when it will never run),
//! cancellation, a failing task faulting the context, capture refused.

mod common;
use ascendcl::codes::*;
use ascendcl::*;
use std::ffi::c_void;
use std::sync::Mutex;

/// What the tasks saw: (tag, ran with a token).
static SEEN: Mutex<Vec<(usize, bool)>> = Mutex::new(Vec::new());

unsafe extern "C" fn record(user: *mut c_void, token: *const c_void) -> i32 {
    SEEN.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((user as usize, !token.is_null()));
    0
}

/// Waits (at most 5 s) until its stream is aborted.
unsafe extern "C" fn wait_cancel(user: *mut c_void, token: *const c_void) -> i32 {
    if !token.is_null() {
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        // SAFETY: `token` is this running task's token.
        while unsafe { xsimHostTaskCancelled(token) } == 0 && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    // SAFETY: the same recorder, same contract.
    unsafe { record(user, token) }
}

unsafe extern "C" fn fail(_: *mut c_void, token: *const c_void) -> i32 {
    if token.is_null() {
        0
    } else {
        507_904
    }
}

/// A task's `user` value carrying the tag `n` (never dereferenced).
fn tag(n: usize) -> *mut c_void {
    std::ptr::without_provenance_mut(n)
}

fn seen() -> Vec<(usize, bool)> {
    std::mem::take(&mut *SEEN.lock().unwrap_or_else(|e| e.into_inner()))
}

#[test]
fn host_tasks_run_in_order_once_and_are_released_when_dropped() {
    let _g = common::exclusive();
    seen();
    let s = common::stream();
    // SAFETY: live stream; the task functions accept any `user` value.
    unsafe {
        assert_eq!(xsimLaunchDelay(s, 20_000), 0);
        assert_eq!(xsimLaunchHostTask(s, Some(record), tag(1)), 0);
        assert_eq!(xsimLaunchHostTask(s, Some(record), tag(2)), 0);
        assert_eq!(aclrtSynchronizeStream(s), 0);
    }
    assert_eq!(seen(), vec![(1, true), (2, true)]);
    // A running task sees the abort through its token; the queued one is released unrun.
    // SAFETY: as above.
    unsafe {
        assert_eq!(xsimLaunchHostTask(s, Some(wait_cancel), tag(3)), 0);
        assert_eq!(xsimLaunchHostTask(s, Some(record), tag(4)), 0);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(aclrtStreamAbort(s), 0);
        let _ = aclrtSynchronizeStream(s);
    }
    let mut got = seen();
    got.sort_unstable();
    assert_eq!(got, vec![(3, true), (4, false)]);
    // SAFETY: NULL fn and NULL stream are argument errors; NULL token answers 1.
    unsafe {
        assert_eq!(
            xsimLaunchHostTask(s, None, std::ptr::null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(xsimHostTaskCancelled(std::ptr::null()), 1);
    }
    common::destroy(s);
}

#[test]
fn a_failing_host_task_faults_the_context_and_capture_refuses_host_tasks() {
    let _g = common::exclusive();
    let s = common::stream();
    let mut ri = std::ptr::null_mut();
    // SAFETY: live stream, valid out-pointers; the capture is ended before the fault.
    unsafe {
        assert_eq!(
            aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED),
            0
        );
        assert_eq!(
            xsimLaunchHostTask(s, Some(record), std::ptr::null_mut()),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        assert_eq!(aclmdlRICaptureEnd(s, &mut ri), 0);
        assert_eq!(aclmdlRIDestroy(ri), 0);
        assert_eq!(xsimLaunchHostTask(s, Some(fail), std::ptr::null_mut()), 0);
        assert_eq!(aclrtSynchronizeStream(s), 507_904);
        assert_eq!(xsimReset(), 0);
        assert_eq!(aclrtSynchronizeStream(s), 0);
    }
    common::destroy(s);
}
