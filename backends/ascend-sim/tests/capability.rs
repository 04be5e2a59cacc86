//! Capability queries: CANN attributes per simulated product (all three on the A2,
//! `JIT_COMPILE` alone on the 910 and 310P), the list in the runtime's order, device features
//! answered 0, and the runtime's refusals (NULL, unknown attribute, feature out of range or not
//! answered, unknown device, no current context).

mod common;
use ascendcl::codes::*;
use ascendcl::*;
use std::ptr::null_mut;

/// The attribute list as a vector, and each attribute's single answer.
unsafe fn attrs() -> (Vec<i32>, [i32; 3]) {
    let mut p: *const i32 = std::ptr::null();
    let mut n = usize::MAX;
    // SAFETY: valid out-pointers.
    assert_eq!(unsafe { aclGetCannAttributeList(&mut p, &mut n) }, 0);
    assert!(!p.is_null());
    // SAFETY: the simulator returned a static array of `n` values.
    let list = unsafe { std::slice::from_raw_parts(p, n) }.to_vec();
    let mut one = [-1; 3];
    for (a, v) in one.iter_mut().enumerate() {
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { aclGetCannAttribute(a as i32, v) }, 0);
    }
    (list, one)
}

#[test]
fn cann_attributes_follow_the_product() {
    let _g = common::exclusive();
    // SAFETY: valid out-pointers, NULL on purpose, C strings.
    unsafe {
        assert_eq!(xsimSetProduct(c"a2".as_ptr()), 0);
        let (list, one) = attrs();
        assert_eq!(
            list,
            [
                ACL_CANN_ATTR_INF_NAN,
                ACL_CANN_ATTR_BF16,
                ACL_CANN_ATTR_JIT_COMPILE
            ]
        );
        assert_eq!(one, [1, 1, 1]);
        for p in [c"910", c"310p"] {
            assert_eq!(xsimSetProduct(p.as_ptr()), 0);
            let (list, one) = attrs();
            assert_eq!(list, [ACL_CANN_ATTR_JIT_COMPILE], "{p:?}");
            assert_eq!(one, [0, 0, 1], "{p:?}");
        }
        assert_eq!(xsimSetProduct(std::ptr::null()), 0);
        let mut v = 0;
        for bad in [-1, 3, 99] {
            assert_eq!(
                aclGetCannAttribute(bad, &mut v),
                ACL_ERROR_INVALID_PARAM,
                "{bad}"
            );
        }
        assert_eq!(aclGetCannAttribute(0, null_mut()), ACL_ERROR_INVALID_PARAM);
        let mut n = 0usize;
        assert_eq!(
            aclGetCannAttributeList(null_mut(), &mut n),
            ACL_ERROR_INVALID_PARAM
        );
        let mut p: *const i32 = std::ptr::null();
        assert_eq!(
            aclGetCannAttributeList(&mut p, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
    }
}

#[test]
fn device_features_answer_and_refuse_as_the_runtime() {
    let _g = common::exclusive();
    common::setup();
    let mut v = -1;
    // SAFETY: valid out-pointers or NULL on purpose.
    unsafe {
        assert_eq!(aclrtSetDevice(0), 0);
        for f in [1, 21] {
            v = -1;
            assert_eq!(aclrtGetDeviceCapability(0, f, &mut v), 0, "{f}");
            assert_eq!(v, 0, "{f}");
        }
        assert_eq!(
            aclrtGetDeviceCapability(0, 1, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        for bad in [-1, 0, 2, 20, 20_002, i32::MAX] {
            assert_eq!(
                aclrtGetDeviceCapability(0, bad, &mut v),
                ACL_ERROR_RT_PARAM_INVALID,
                "{bad}"
            );
        }
        for unsimulated in [10_001, 20_001] {
            assert_eq!(
                aclrtGetDeviceCapability(0, unsimulated, &mut v),
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT
            );
        }
        assert_eq!(
            aclrtGetDeviceCapability(99, 1, &mut v),
            ACL_ERROR_RT_INVALID_DEVICEID
        );
    }
    // A thread with no current context.
    let r = std::thread::spawn(|| {
        let mut v = -1;
        // SAFETY: a valid out-pointer.
        unsafe { aclrtGetDeviceCapability(0, 21, &mut v) }
    })
    .join()
    .unwrap();
    assert_eq!(r, ACL_ERROR_RT_CONTEXT_NULL);
    // SAFETY: no pointers.
    unsafe { assert_eq!(aclrtResetDevice(0), 0) };
    common::teardown();
}
