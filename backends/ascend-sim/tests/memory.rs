//! ABI tests of the ACL simulator through the rlib. Memory: allocation, async copies and the
//! simulated LCG kernel.

mod common;

use ascendcl::codes::*;
use ascendcl::*;
use common::*;
use std::ptr::null_mut;

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
            ACL_ERROR_RT_PARAM_INVALID
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
        assert_eq!(
            aclrtFreeHost(dev),
            ACL_ERROR_RT_PARAM_INVALID,
            "device memory is not freed as host memory"
        );
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
fn malloc_aligns_and_pads_like_the_runtime() {
    let _g = shared();
    // (size, policy, bytes the runtime allocates): size plus 32 of alignment and 32 of
    // padding, minus one, rounded down to 32 (src/acl/aclrt_impl/memory.cpp of the runtime);
    // the two HUGE1G policies (6, 7) are aligned but not padded.
    let cases = [
        (1usize, 0, 64u64),
        (32, 0, 64),
        (33, 0, 96),
        (2062, 0, 2112),
        (2560, 0, 2592),
        (32, 6, 32),
        (33, 7, 64),
    ];
    // SAFETY: each block is freed once; the pointers are only compared by the xsim calls.
    unsafe {
        for (size, policy, real) in cases {
            let mut p = null_mut();
            assert_eq!(aclrtMalloc(&mut p, size, policy), 0);
            assert_eq!(xsimAllocSize(p), real, "size {size} policy {policy}");
            assert_eq!(xsimAllocRequested(p), size as u64);
            assert_eq!(aclrtFree(p), 0);
            assert_eq!(xsimAllocSize(p), 0, "a freed block has no record");
        }
        let mut p = null_mut();
        assert_eq!(
            aclrtMalloc(&mut p, usize::MAX - 40, 0),
            ACL_ERROR_INVALID_PARAM,
            "the padded size overflows"
        );
        assert_eq!(aclrtMalloc(&mut p, 0, 0), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtMalloc(null_mut(), 8, 0), ACL_ERROR_INVALID_PARAM);
    }
}

/// A count of 0 succeeds before any other check (`aclrtMemcpyImpl`, `aclrtMemcpyAsyncImpl`,
/// `aclrtMemsetAsyncImpl` in the runtime's `src/acl/aclrt_impl/memory.cpp`): NULL pointers,
/// an unknown kind, an unknown stream handle, a zero capacity and a thread with no context
/// are all accepted.
#[test]
fn zero_count_succeeds_before_any_check() {
    let _g = shared();
    let bogus = 0x10 as *mut std::ffi::c_void;
    // SAFETY: count 0: nothing is read or written, no handle is used.
    unsafe {
        assert_eq!(aclrtMemcpy(null_mut(), 0, std::ptr::null(), 0, 99), 0);
        assert_eq!(aclrtMemcpy(null_mut(), 0, std::ptr::null(), 0, 6), 0);
        assert_eq!(
            aclrtMemcpyAsync(null_mut(), 0, std::ptr::null(), 0, 7, bogus),
            0
        );
        assert_eq!(aclrtMemsetAsync(null_mut(), 0, 1, 0, bogus), 0);
    }
    std::thread::spawn(|| {
        // SAFETY: as above, on a thread with no current context.
        unsafe {
            assert_eq!(aclrtMemcpy(null_mut(), 0, std::ptr::null(), 0, 1), 0);
            assert_eq!(
                aclrtMemcpyAsync(null_mut(), 0, std::ptr::null(), 0, 1, null_mut()),
                0
            );
            assert_eq!(aclrtMemsetAsync(null_mut(), 0, 1, 0, null_mut()), 0);
        }
    })
    .join()
    .unwrap();
    teardown();
}

/// The order and codes of the copy checks: NULL `dst`, NULL `src`, then the kind (only 0..=5
/// are translated; 6, 7 and anything else → 100000), all in the ACL layer; then, in the
/// runtime layer, the stream handle (async only) and `count > destMax` → 107000.
#[test]
fn copy_checks_in_the_runtime_order() {
    let _g = shared();
    let s = stream();
    let src = [5u8; 16];
    let mut dst = [0u8; 16];
    let (d, p) = (
        dst.as_mut_ptr().cast::<std::ffi::c_void>(),
        src.as_ptr().cast::<std::ffi::c_void>(),
    );
    let bogus = 0x10 as *mut std::ffi::c_void;
    // SAFETY: live local buffers of 16 bytes; `s` is a live stream.
    unsafe {
        // NULL pointers come first, before the kind and the count.
        assert_eq!(
            aclrtMemcpy(null_mut(), 0, p, 16, 9),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtMemcpy(d, 0, std::ptr::null(), 16, 9),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtMemcpyAsync(null_mut(), 0, p, 16, 9, bogus),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtMemsetAsync(null_mut(), 0, 1, 16, bogus),
            ACL_ERROR_INVALID_PARAM
        );
        // The kind comes before the count: 6 and 7 exist in the enum but are refused.
        for kind in [6, 7, 8, -1, i32::MAX] {
            assert_eq!(
                aclrtMemcpy(d, 8, p, 16, kind),
                ACL_ERROR_INVALID_PARAM,
                "kind {kind}"
            );
            assert_eq!(
                aclrtMemcpyAsync(d, 8, p, 16, kind, s),
                ACL_ERROR_INVALID_PARAM,
                "async kind {kind}"
            );
        }
        // The stream handle comes before the count (async).
        assert_eq!(
            aclrtMemcpyAsync(d, 8, p, 16, 1, bogus),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtMemsetAsync(d, 8, 1, 16, bogus),
            ACL_ERROR_INVALID_PARAM
        );
        // count > capacity is the runtime's RT_ERROR_INVALID_VALUE: 107000.
        assert_eq!(aclrtMemcpy(d, 8, p, 16, 1), ACL_ERROR_RT_PARAM_INVALID);
        assert_eq!(aclrtMemcpy(d, 0, p, 16, 1), ACL_ERROR_RT_PARAM_INVALID);
        assert_eq!(
            aclrtMemcpyAsync(d, 15, p, 16, 1, s),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(
            aclrtMemsetAsync(d, 15, 1, 16, s),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(dst, [0u8; 16], "nothing written by a refused call");
        // Every translated kind copies.
        for kind in 0..=5 {
            dst = [0u8; 16];
            let d = dst.as_mut_ptr().cast::<std::ffi::c_void>();
            assert_eq!(aclrtMemcpy(d, 16, p, 16, kind), 0, "kind {kind}");
            assert_eq!(dst, src, "kind {kind}");
            dst = [0u8; 16];
            let d = dst.as_mut_ptr().cast::<std::ffi::c_void>();
            assert_eq!(aclrtMemcpyAsync(d, 16, p, 16, kind, s), 0, "kind {kind}");
            assert_eq!(aclrtSynchronizeStream(s), 0);
            assert_eq!(dst, src, "async kind {kind}");
        }
        // A copy onto itself succeeds.
        assert_eq!(aclrtMemcpy(d, 16, d, 16, 3), 0);
        assert_eq!(aclrtMemcpyAsync(d, 16, d, 16, 3, s), 0);
        assert_eq!(aclrtSynchronizeStream(s), 0);
    }
    destroy(s);
    teardown();
}

/// The runtime checks the count before it looks for a context (the context check is in
/// `ApiImpl::MemCopySync` / `MemcpyAsync` / `MemsetAsync`, after `ApiErrorDecorator`'s
/// checks), and a synchronous copy onto itself returns before it too. `aclrtMalloc` checks
/// its pointer and size before the context.
#[test]
fn count_before_context() {
    let _g = shared();
    std::thread::spawn(|| {
        let src = [5u8; 16];
        let mut dst = [0u8; 16];
        let (d, p) = (
            dst.as_mut_ptr().cast::<std::ffi::c_void>(),
            src.as_ptr().cast::<std::ffi::c_void>(),
        );
        // SAFETY: live local buffers of 16 bytes; no current context on this thread.
        unsafe {
            assert_eq!(aclrtMemcpy(d, 8, p, 16, 1), ACL_ERROR_RT_PARAM_INVALID);
            assert_eq!(aclrtMemcpy(d, 16, p, 16, 1), ACL_ERROR_RT_CONTEXT_NULL);
            assert_eq!(aclrtMemcpy(d, 16, d, 16, 1), 0, "dst == src");
            assert_eq!(
                aclrtMemcpyAsync(d, 8, p, 16, 1, null_mut()),
                ACL_ERROR_RT_PARAM_INVALID
            );
            assert_eq!(
                aclrtMemcpyAsync(d, 16, p, 16, 1, null_mut()),
                ACL_ERROR_RT_CONTEXT_NULL
            );
            assert_eq!(
                aclrtMemsetAsync(d, 8, 1, 16, null_mut()),
                ACL_ERROR_RT_PARAM_INVALID
            );
            assert_eq!(
                aclrtMemsetAsync(d, 16, 1, 16, null_mut()),
                ACL_ERROR_RT_CONTEXT_NULL
            );
            assert_eq!(dst, [0u8; 16]);
            let mut dev = null_mut();
            assert_eq!(aclrtMalloc(null_mut(), 16, 0), ACL_ERROR_INVALID_PARAM);
            assert_eq!(aclrtMalloc(&mut dev, 0, 0), ACL_ERROR_INVALID_PARAM);
            assert_eq!(aclrtMalloc(&mut dev, 16, 0), ACL_ERROR_RT_CONTEXT_NULL);
            assert_eq!(aclrtFree(null_mut()), ACL_ERROR_INVALID_PARAM);
            assert_eq!(aclrtMallocHost(null_mut(), 16), ACL_ERROR_INVALID_PARAM);
            assert_eq!(aclrtFreeHost(null_mut()), ACL_ERROR_INVALID_PARAM);
        }
    })
    .join()
    .unwrap();
    teardown();
}

/// During a GLOBAL capture of the thread a synchronous copy → 107030 with the capture left
/// valid (`CHECK_CAPTURE_MODE_SUPPORT` in `ApiImpl::MemCopySync`); RELAXED lets it copy. A
/// captured asynchronous copy from pageable host memory → 107000.
#[test]
fn copies_during_capture() {
    let _g = shared();
    let s = stream();
    let src = [3u8; 16];
    let mut dst = [0u8; 16];
    let (d, p) = (
        dst.as_mut_ptr().cast::<std::ffi::c_void>(),
        src.as_ptr().cast::<std::ffi::c_void>(),
    );
    // SAFETY: live local buffers of 16 bytes; `s` is a live stream; `dev` is allocated.
    unsafe {
        let mut dev = null_mut();
        assert_eq!(aclrtMalloc(&mut dev, 16, 0), 0);
        assert_eq!(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), 0);
        assert_eq!(
            aclrtMemcpy(d, 16, p, 16, 0),
            ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT
        );
        assert_eq!(dst, [0u8; 16]);
        // The argument checks still come first.
        assert_eq!(aclrtMemcpy(d, 8, p, 16, 0), ACL_ERROR_RT_PARAM_INVALID);
        assert_eq!(aclrtMemcpy(d, 16, p, 16, 6), ACL_ERROR_INVALID_PARAM);
        assert_eq!(
            aclrtMemcpyAsync(dev, 16, p, 16, 1, s),
            ACL_ERROR_RT_PARAM_INVALID,
            "pageable host source in a capture"
        );
        let mut mode = ACL_MODEL_RI_CAPTURE_MODE_RELAXED;
        assert_eq!(aclmdlRICaptureThreadExchangeMode(&mut mode), 0);
        assert_eq!(aclrtMemcpy(d, 16, p, 16, 0), 0);
        assert_eq!(dst, src);
        assert_eq!(aclmdlRICaptureThreadExchangeMode(&mut mode), 0);
        let mut ri = null_mut();
        assert_eq!(aclmdlRICaptureEnd(s, &mut ri), 0, "capture still valid");
        assert!(!ri.is_null());
        assert_eq!(aclmdlRIDestroy(ri), 0);
        assert_eq!(aclrtFree(dev), 0);
    }
    destroy(s);
    teardown();
}
