//! The `XSIM_REAL_KERNELS` switch (`xsimSetRealKernels`): the test-only kernel format is refused
//! as a real runtime refuses it, and work that needs no kernel binary goes on.

mod common;

use ascendcl::binary::*;
use ascendcl::codes::*;
use ascendcl::*;
use common::*;
use std::ptr::{null, null_mut};

#[test]
fn switch_refuses_test_only_binaries_and_keeps_the_rest() {
    let _g = exclusive();
    let b = xsim_binary(&[("my_delay", 1, &[XSIM_PARAM_U64])]);
    let load = || {
        let mut h = null_mut();
        // SAFETY: `b` is readable for its length; `h` is writable.
        let rc = unsafe { aclrtBinaryLoadFromData(b.as_ptr().cast(), b.len(), null(), &mut h) };
        if rc == 0 {
            // SAFETY: a handle just loaded.
            assert_eq!(unsafe { aclrtBinaryUnLoad(h) }, 0);
        }
        rc
    };
    // SAFETY: plain calls; the arrays outlive the synchronize.
    unsafe {
        assert_eq!(xsimSetRealKernels(0), 0);
        assert_eq!(load(), 0, "switch off: the format loads");
        assert_eq!(xsimSetRealKernels(1), 0);
        assert_eq!(load(), ACL_ERROR_RT_PARAM_INVALID, "switch on: refused");
        assert_eq!(xsimSetRealKernels(7), ACL_ERROR_INVALID_PARAM);
        // A runtime task needs no binary.
        let s = stream();
        let mut a = [1.0f32, 2.0];
        let mut c = [0.5f32, 0.25];
        assert_eq!(
            aclrtReduceAsync(
                a.as_mut_ptr().cast(),
                c.as_mut_ptr().cast(),
                8,
                ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM,
                0,
                s,
                null_mut()
            ),
            0
        );
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(a, [1.5, 2.25]);
        destroy(s);
        assert_eq!(xsimSetRealKernels(-1), 0);
    }
}
