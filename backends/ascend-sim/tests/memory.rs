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
