//! The device saturation mode: saturation at start, inf/NaN settable on the `a2` product,
//! refused on a saturation-only product, out-of-range modes and NULL refused with the runtime's
//! codes.

mod common;
use ascendcl::codes::*;
use ascendcl::*;
use std::ptr::null_mut;

#[test]
fn saturation_mode_round_trips_and_refuses_as_the_runtime() {
    let _g = common::exclusive();
    // SAFETY: valid out-pointers or NULL on purpose; no other pointer arguments.
    unsafe {
        let mut m = -1;
        assert_eq!(aclrtGetDeviceSatMode(&mut m), 0);
        assert_eq!(m, ACL_RT_OVERFLOW_MODE_SATURATION);
        assert_eq!(aclrtGetDeviceSatMode(null_mut()), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_INFNAN), 0);
        assert_eq!(aclrtGetDeviceSatMode(&mut m), 0);
        assert_eq!(m, ACL_RT_OVERFLOW_MODE_INFNAN);
        for bad in [ACL_RT_OVERFLOW_MODE_UNDEF, -1, 7] {
            assert_eq!(
                aclrtSetDeviceSatMode(bad),
                ACL_ERROR_RT_PARAM_INVALID,
                "{bad}"
            );
        }
        assert_eq!(aclrtGetDeviceSatMode(&mut m), 0);
        assert_eq!(
            m, ACL_RT_OVERFLOW_MODE_INFNAN,
            "a refused set changed the mode"
        );
        assert_eq!(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_SATURATION), 0);
        // The 910 has only the saturation mode.
        assert_eq!(xsimSetProduct(c"910".as_ptr()), 0);
        assert_eq!(
            aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_INFNAN),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        assert_eq!(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_SATURATION), 0);
        assert_eq!(aclrtGetDeviceSatMode(&mut m), 0);
        assert_eq!(m, ACL_RT_OVERFLOW_MODE_SATURATION);
        assert_eq!(xsimSetProduct(std::ptr::null()), 0);
    }
}
