//! ABI tests of the ACL simulator through the rlib. Init, devices and contexts: init reference
//! counting, thread-local context binding, stream ownership by context, and teardown leaving
//! nothing behind.

mod common;

use ascendcl::codes::*;
use ascendcl::*;
use common::*;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

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
