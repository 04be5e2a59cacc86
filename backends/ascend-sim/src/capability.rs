//! Capability queries: the attributes of the installed CANN (`aclGetCannAttribute`,
//! `aclGetCannAttributeList`) and device features (`aclrtGetDeviceCapability`), with the checks
//! and codes of the CANN runtime (`hicann/runtime`: `src/acl/aclrt_impl/acl.cpp`,
//! `src/acl/utils/cann_info_utils.cpp`, `src/acl/aclrt_impl/device.cpp`,
//! `src/runtime/api/api_c_device.cc` `rtsDeviceGetCapability`, `api/impl/api_error.cc` and
//! `api/impl/api_impl.cc` `GetDeviceCapability`).
//!
//! The CANN attributes: the runtime finds an attribute available when the installed runtime's
//! version meets the minimum of its feature list (`swFeatureList.json`: 7.1 for `INF_NAN` and
//! `BF16`, 6.4 for `JIT_COMPILE`) and, for the first two, when the SoC's platform file says
//! `support_inf_nan=1` / `support_bf16=1` (the 910B files do; the 310P and 910A files have no
//! such key). The simulator models an installation that meets the minimums, so the answer
//! follows the simulated product: all three on the A2, `JIT_COMPILE` alone elsewhere. The
//! list is in the runtime's order (its `std::map` keyed by the attribute's value).
//!
//! Device features: `ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV` (1) and
//! `ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV` (21) are answered 0 (the simulator updates no
//! captured task in place and has no memory queues); the runtime's other two features
//! (10001, 20001: AI CPU scheduling and the task id width) are not simulated and answer
//! 207000; any other value in range answers 107000, as the runtime does.

use crate::codes::*;
use crate::config::{product, Product};
use crate::device::{check_device, cur_ctx};
use crate::error::*;

/// `ACL_CANN_ATTR_INF_NAN`.
pub const ACL_CANN_ATTR_INF_NAN: i32 = 0;
/// `ACL_CANN_ATTR_BF16`.
pub const ACL_CANN_ATTR_BF16: i32 = 1;
/// `ACL_CANN_ATTR_JIT_COMPILE`.
pub const ACL_CANN_ATTR_JIT_COMPILE: i32 = 2;

/// `RT_DEV_FEATURE_MAX`: one past the runtime's largest device feature (20001).
const RT_DEV_FEATURE_MAX: i32 = 20_002;

static A2_ATTRS: [i32; 3] = [
    ACL_CANN_ATTR_INF_NAN,
    ACL_CANN_ATTR_BF16,
    ACL_CANN_ATTR_JIT_COMPILE,
];
static OTHER_ATTRS: [i32; 1] = [ACL_CANN_ATTR_JIT_COMPILE];

/// The available attributes of the simulated installation.
fn available() -> &'static [i32] {
    if product() == Product::A2 {
        &A2_ATTRS
    } else {
        &OTHER_ATTRS
    }
}

/// `aclError aclGetCannAttributeList(const aclCannAttr** cannAttrList, size_t* num)`: a pointer
/// to a static array of the available attributes and its length; NULL → 100000.
///
/// # Safety
/// `list` and `num` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclGetCannAttributeList(list: *mut *const i32, num: *mut usize) -> i32 {
    ffi("aclGetCannAttributeList", false, || {
        non_null(list, "cannAttrList")?;
        non_null(num, "num")?;
        let a = available();
        // SAFETY: both checked non-NULL; caller contract. The array is static.
        unsafe {
            list.write(a.as_ptr());
            num.write(a.len());
        }
        Ok(())
    })
}

/// `aclError aclGetCannAttribute(aclCannAttr cannAttr, int32_t* value)`: 1 when available, 0
/// when not; NULL → 100000; an attribute the runtime does not know → 100000.
///
/// # Safety
/// `value` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclGetCannAttribute(attr: i32, value: *mut i32) -> i32 {
    ffi("aclGetCannAttribute", false, || {
        non_null(value, "value")?;
        if !(ACL_CANN_ATTR_INF_NAN..=ACL_CANN_ATTR_JIT_COMPILE).contains(&attr) {
            return err(
                ACL_ERROR_INVALID_PARAM,
                format!("unknown CANN attribute {attr}"),
            );
        }
        let v = i32::from(available().contains(&attr));
        // SAFETY: checked non-NULL; caller contract.
        unsafe { value.write(v) };
        Ok(())
    })
}

/// `aclError aclrtGetDeviceCapability(int32_t deviceId, aclrtDevFeatureType devFeatureType,
/// int32_t* value)`: NULL → 100000; a feature outside [0, 20002) or one the runtime does not
/// answer → 107000; an unknown device → 107001; no current context → 107002.
///
/// # Safety
/// `value` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDeviceCapability(
    device: i32,
    feature: i32,
    value: *mut i32,
) -> i32 {
    ffi("aclrtGetDeviceCapability", false, || {
        non_null(value, "value")?;
        if !(0..RT_DEV_FEATURE_MAX).contains(&feature) {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("device feature {feature} outside [0, {RT_DEV_FEATURE_MAX})"),
            );
        }
        match feature {
            1 | 21 => {}
            10_001 | 20_001 => {
                return err(
                    ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                    format!("device feature {feature} is not simulated"),
                )
            }
            _ => {
                return err(
                    ACL_ERROR_RT_PARAM_INVALID,
                    format!("device feature {feature} is not one the runtime answers"),
                )
            }
        }
        check_device(device)?;
        cur_ctx()?;
        // SAFETY: checked non-NULL; caller contract.
        unsafe { value.write(0) };
        Ok(())
    })
}
