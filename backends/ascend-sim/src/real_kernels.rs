//! The "real kernels" switch: `XSIM_REAL_KERNELS=1` (read once) or `xsimSetRealKernels(1)`
//! makes the simulator treat kernel binaries as a real CANN runtime does: the test-only format
//! (`crate::binary`, magic `XSIMKBIN`) is not an ELF kernel object, so `aclrtBinaryLoadFromData`
//! refuses it with 107000 (`ACL_ERROR_RT_PARAM_INVALID`), the code the runtime's loader gives
//! when it cannot make a program of the data (`BinaryLoader::LoadNonCpu`: no program →
//! `RT_ERROR_INVALID_VALUE`). Everything that needs no kernel binary (streams, events, copies,
//! callbacks, capture, value operations, `aclrtReduceAsync`) works as before, so a program
//! run against the simulator with the switch on takes the path it would take on an NPU
//! without a kernel compiler.

use crate::error::*;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::OnceLock;

/// 0: the environment decides; 1: off; 2: on.
static OVERRIDE: AtomicU8 = AtomicU8::new(0);

/// Whether test-only kernel binaries are refused.
pub(crate) fn real_kernels() -> bool {
    static ENV: OnceLock<bool> = OnceLock::new();
    match OVERRIDE.load(SeqCst) {
        1 => false,
        2 => true,
        _ => *ENV.get_or_init(|| {
            std::env::var("XSIM_REAL_KERNELS")
                .map(|v| matches!(v.trim(), "1" | "true" | "yes" | "on"))
                .unwrap_or(false)
        }),
    }
}

/// `aclError xsimSetRealKernels(int32_t on)`: 1 refuses the test-only kernel format from now
/// on, 0 accepts it, -1 goes back to `XSIM_REAL_KERNELS`. Other values → 100000.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn xsimSetRealKernels(on: i32) -> i32 {
    ffi("xsimSetRealKernels", false, || {
        let v = match on {
            -1 => 0,
            0 => 1,
            1 => 2,
            _ => {
                return err(
                    crate::codes::ACL_ERROR_INVALID_PARAM,
                    format!("xsimSetRealKernels({on}): 1, 0 or -1"),
                )
            }
        };
        OVERRIDE.store(v, SeqCst);
        Ok(())
    })
}
