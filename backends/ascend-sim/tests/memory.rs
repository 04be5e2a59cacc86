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
    teardown();
}
