//! The device saturation mode `aclrtSetDeviceSatMode` / `aclrtGetDeviceSatMode`: whether
//! floating-point overflow saturates or gives inf/NaN, with the checks of the CANN runtime
//! (`hicann/runtime`: `src/acl/aclrt_impl/device.cpp`, `src/runtime/api/api_c.cc`
//! `rtSetDeviceSatMode`, `api/impl/api_error.cc`, `api/impl/api_impl.cc`).
//!
//! The mode is one value for the process (the runtime's `Runtime::satMode_`), saturation at
//! start. Which modes a chip has is its `supportOverflowMode` (`src/runtime/config/*/
//! dev_info_reg.cc`): both on the 910B/910C (`a2`), saturation only on the 910 (`cloud`) and
//! the 310P (`dc`). Nothing in the simulator computes with it: kernels and the built-in reduce
//! behave as before; the value is kept and answered.

use crate::codes::*;
use crate::config::{product, Product};
use crate::error::*;
use std::sync::atomic::AtomicI32;
use std::sync::atomic::Ordering::SeqCst;

/// `ACL_RT_OVERFLOW_MODE_SATURATION`.
pub const ACL_RT_OVERFLOW_MODE_SATURATION: i32 = 0;
/// `ACL_RT_OVERFLOW_MODE_INFNAN`.
pub const ACL_RT_OVERFLOW_MODE_INFNAN: i32 = 1;
/// `ACL_RT_OVERFLOW_MODE_UNDEF`.
pub const ACL_RT_OVERFLOW_MODE_UNDEF: i32 = 2;

static MODE: AtomicI32 = AtomicI32::new(ACL_RT_OVERFLOW_MODE_SATURATION);

/// `aclError aclrtSetDeviceSatMode(aclrtFloatOverflowMode mode)`: a mode the chip lacks →
/// 207000 (setting saturation on a saturation-only chip succeeds and changes nothing); a
/// mode outside [0, 2) → 107000. Needs no context.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetDeviceSatMode(mode: i32) -> i32 {
    ffi("aclrtSetDeviceSatMode", false, || {
        let infnan = product() == Product::A2;
        match mode {
            ACL_RT_OVERFLOW_MODE_INFNAN if !infnan => err(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                "only the saturation mode can be set on this chip",
            ),
            ACL_RT_OVERFLOW_MODE_SATURATION if !infnan => Ok(()),
            ACL_RT_OVERFLOW_MODE_SATURATION | ACL_RT_OVERFLOW_MODE_INFNAN => {
                MODE.store(mode, SeqCst);
                Ok(())
            }
            _ => err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("overflow mode {mode} outside [0, 2)"),
            ),
        }
    })
}

/// `aclError aclrtGetDeviceSatMode(aclrtFloatOverflowMode* mode)`: NULL → 100000.
///
/// # Safety
/// `mode` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDeviceSatMode(mode: *mut i32) -> i32 {
    ffi("aclrtGetDeviceSatMode", false, || {
        non_null(mode, "mode")?;
        // SAFETY: checked non-NULL; caller contract.
        unsafe { mode.write(MODE.load(SeqCst)) };
        Ok(())
    })
}
