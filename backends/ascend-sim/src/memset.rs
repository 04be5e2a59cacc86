//! The synchronous memset `aclrtMemset`, with the checks of the CANN runtime in their order
//! (`hicann/runtime`: `src/acl/aclrt_impl/memory.cpp` `aclrtMemsetImpl`,
//! `src/runtime/api/api_c.cc` `rtMemset`, `src/runtime/api/impl/api_error.cc` and
//! `api_impl.cc` `MemSetSync`, `src/runtime/driver/npu_driver_mem.cc`).

use crate::capture::captures_affecting_me;
use crate::codes::*;
use crate::device::*;
use crate::error::*;
use std::ffi::c_void;

/// `ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT`: the call is not allowed while the thread captures
/// (unless it switched to RELAXED).
pub const ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT: i32 = 107_030;

/// `aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count)`: sets
/// `count` bytes at `devPtr` to the low byte of `value` on the calling thread, before the call
/// returns. In order: `count == 0` → 0 with nothing checked or written; NULL `devPtr` →
/// 100000; no current context → 107002; the thread captures in GLOBAL or THREAD_LOCAL mode →
/// 107030 (the capture stays valid); `count > maxCount` → 107000 (the driver's check,
/// modelled: the driver's source is not public). Needs no `aclInit` of its own (without it
/// there is no context: 107002).
///
/// # Safety
/// `dev_ptr` must be valid for `count` byte writes.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemset(
    dev_ptr: *mut c_void,
    max_count: usize,
    value: i32,
    count: usize,
) -> i32 {
    ffi("aclrtMemset", false, || {
        if count == 0 {
            return Ok(());
        }
        non_null(dev_ptr, "devPtr")?;
        cur_ctx()?;
        if !captures_affecting_me().is_empty() {
            return err(
                ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
                "synchronous memset while the thread captures (only RELAXED allows it)",
            );
        }
        if count > max_count {
            return err(ACL_ERROR_RT_PARAM_INVALID, "count exceeds maxCount");
        }
        // SAFETY: non-NULL; the caller guarantees `count` writable bytes.
        unsafe { std::ptr::write_bytes(dev_ptr.cast::<u8>(), value as u8, count) };
        Ok(())
    })
}
