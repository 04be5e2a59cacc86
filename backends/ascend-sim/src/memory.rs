//! Synchronous memory copy: `aclrtMemcpy`.
//!
//! The copy happens on the calling thread before the call returns. Like every simulated copy it
//! reads and writes host memory, so all eight `aclrtMemcpyKind` values behave alike. During a
//! capture in GLOBAL or THREAD_LOCAL mode the capturing thread gets 107027 and the capture is
//! invalidated (synchronous copies are illegal in a capture unless the thread switched to
//! RELAXED).

use crate::codes::*;
use crate::device::non_null;
use crate::stream::*;
use std::ffi::c_void;

/// `aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
/// aclrtMemcpyKind kind)`: synchronous copy. NULL pointers, `count > destMax` or a kind outside
/// 0..=7 → 100000; no current context → 107002; poisoned context → its code.
///
/// # Safety
/// `src` must be valid for `count` reads and `dst` for `count` writes.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemcpy(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: i32,
) -> i32 {
    ffi("aclrtMemcpy", true, || {
        non_null(dst, "dst")?;
        non_null(src, "src")?;
        if count > dest_max {
            return err(ACL_ERROR_INVALID_PARAM, "count exceeds destMax");
        }
        if !(0..=7).contains(&kind) {
            return err(ACL_ERROR_INVALID_PARAM, format!("bad memcpy kind {kind}"));
        }
        let ctx = cur_ctx()?;
        let caps = captures_affecting_me();
        if !caps.is_empty() {
            for c in caps {
                c.invalidate();
            }
            return err(
                ACL_ERROR_RT_STREAM_CAPTURED,
                "synchronous copy during capture",
            );
        }
        ctx.check_poison()?;
        // SAFETY: both non-NULL; the caller guarantees `count` valid bytes on each side;
        // `copy` tolerates overlap.
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, count) };
        Ok(())
    })
}

/// `aclError aclrtGetVersion(int32_t* majorVersion, int32_t* minorVersion, int32_t*
/// patchVersion)`: the ACL API version the simulator models, 1.17.0 (CANN 9.x). Needs no
/// `aclInit`.
///
/// # Safety
/// Each pointer must be NULL (→ 100000) or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetVersion(major: *mut i32, minor: *mut i32, patch: *mut i32) -> i32 {
    ffi("aclrtGetVersion", false, || {
        non_null(major, "majorVersion")?;
        non_null(minor, "minorVersion")?;
        non_null(patch, "patchVersion")?;
        let (a, b, c) = crate::faults::acl_version();
        // SAFETY: checked non-NULL; the caller guarantees validity for writes.
        unsafe {
            major.write(a);
            minor.write(b);
            patch.write(c);
        }
        Ok(())
    })
}
