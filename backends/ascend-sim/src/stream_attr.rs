//! Stream properties: failure mode, priority, flags, id, the available-stream count and
//! `aclrtSetStreamAttribute` / `aclrtGetStreamAttribute` with their `AclrtStreamAttrValue`.

use crate::codes::*;
use crate::config::*;
use crate::device::*;
use crate::error::*;
use crate::registry::*;
use crate::stream::*;
use std::ffi::c_void;
use std::sync::atomic::Ordering::SeqCst;

/// C `aclrtStreamAttrValue` (16 bytes, align 8).
#[repr(C)]
#[derive(Clone, Copy)]
pub union AclrtStreamAttrValue {
    /// `failureMode` (attribute 1).
    pub failure_mode: u64,
    /// `overflowSwitch` (attribute 2).
    pub overflow_switch: u32,
    /// `userCustomTag` (attribute 3).
    pub user_custom_tag: u32,
    /// `cacheOpInfoSwitch` (attribute 4).
    pub cache_op_info_switch: u32,
    /// `streamPriority` (attribute 5).
    pub stream_priority: u32,
    /// `reserve[4]`.
    pub reserve: [u32; 4],
}

const _: () = assert!(std::mem::size_of::<AclrtStreamAttrValue>() == 16);
const _: () = assert!(std::mem::align_of::<AclrtStreamAttrValue>() == 8);

fn set_failure_mode(h: *mut c_void, mode: u64) -> R {
    if mode > ACL_STOP_ON_FAILURE {
        return err(ACL_ERROR_INVALID_PARAM, format!("bad failure mode {mode}"));
    }
    if h.is_null() && product() != Product::A2 {
        return err(
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
            "default-stream failure mode needs A2/A3/950",
        );
    }
    let s = stream_of(h)?;
    if s.flags & ACL_STREAM_DEVICE_USE_ONLY != 0 {
        return err(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "DEVICE_USE_ONLY stream");
    }
    let mut g = lock(&s.st);
    match g.failure_mode {
        Some(m) if m != mode => err(
            ACL_ERROR_RT_PARAM_INVALID,
            "failure mode may be set once per stream",
        ),
        _ => {
            g.failure_mode = Some(mode);
            Ok(())
        }
    }
}

/// `aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode)`.
///
/// # Safety
/// `stream` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetStreamFailureMode(stream: *mut c_void, mode: u64) -> i32 {
    ffi("aclrtSetStreamFailureMode", true, || {
        set_failure_mode(stream, mode)
    })
}

/// `aclError aclrtStreamGetPriority(aclrtStream stream, uint32_t* priority)`: effective value.
///
/// # Safety
/// `priority` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamGetPriority(stream: *mut c_void, priority: *mut u32) -> i32 {
    ffi("aclrtStreamGetPriority", true, || {
        non_null(priority, "priority")?;
        let s = stream_of(stream)?;
        // SAFETY: caller contract.
        unsafe { put(priority, s.priority.load(SeqCst)) }
    })
}

/// `aclError aclrtStreamGetFlags(aclrtStream stream, uint32_t* flags)`: OR of the kept flags.
///
/// # Safety
/// `flags` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamGetFlags(stream: *mut c_void, flags: *mut u32) -> i32 {
    ffi("aclrtStreamGetFlags", true, || {
        non_null(flags, "flags")?;
        let s = stream_of(stream)?;
        // SAFETY: caller contract.
        unsafe { put(flags, s.flags) }
    })
}

/// `aclError aclrtStreamGetId(aclrtStream stream, int32_t* streamId)`: the runtime's id, unique
/// among the device's live streams; a destroyed stream's id is handed out again (the lowest free
/// id, as the runtime's device-model driver allocates them).
///
/// # Safety
/// `stream_id` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamGetId(stream: *mut c_void, stream_id: *mut i32) -> i32 {
    ffi("aclrtStreamGetId", true, || {
        non_null(stream_id, "streamId")?;
        let s = stream_of(stream)?;
        // SAFETY: caller contract.
        unsafe { put(stream_id, s.rt_id) }
    })
}

/// `aclError aclrtGetStreamAvailableNum(uint32_t* streamCount)`: limit minus live streams
/// (default streams included) of the current device.
///
/// # Safety
/// `stream_count` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetStreamAvailableNum(stream_count: *mut u32) -> i32 {
    ffi("aclrtGetStreamAvailableNum", true, || {
        non_null(stream_count, "streamCount")?;
        let c = cur_ctx()?;
        let left = max_streams().saturating_sub(counts(c.device).0);
        // SAFETY: caller contract.
        unsafe { put(stream_count, left) }
    })
}

/// `aclError aclrtSetStreamAttribute(aclrtStream, aclrtStreamAttr, aclrtStreamAttrValue*)`.
///
/// # Safety
/// `value` must be NULL or point to a readable `aclrtStreamAttrValue`.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetStreamAttribute(
    stream: *mut c_void,
    attr: i32,
    value: *mut AclrtStreamAttrValue,
) -> i32 {
    ffi("aclrtSetStreamAttribute", true, || {
        non_null(value, "value")?;
        // SAFETY: non-NULL; caller contract; every bit pattern is a valid union value.
        let v = unsafe { value.read() };
        match attr {
            ACL_STREAM_ATTR_FAILURE_MODE => {
                // SAFETY: reading the u64 member of a plain-data union.
                set_failure_mode(stream, unsafe { v.failure_mode })
            }
            ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK..=ACL_STREAM_ATTR_CACHE_OP_INFO => {
                let s = stream_of(stream)?;
                // SAFETY: reading a u32 member of a plain-data union.
                lock(&s.st).attrs[attr as usize - 1] = unsafe { v.user_custom_tag };
                Ok(())
            }
            ACL_STREAM_ATTR_PRIORITY => {
                let s = stream_of(stream)?;
                // SAFETY: reading a u32 member of a plain-data union.
                let p = effective_priority(unsafe { v.stream_priority })?;
                s.priority.store(p, SeqCst);
                Ok(())
            }
            _ => err(
                ACL_ERROR_INVALID_PARAM,
                format!("unknown stream attribute {attr}"),
            ),
        }
    })
}

/// `aclError aclrtGetStreamAttribute(aclrtStream, aclrtStreamAttr, aclrtStreamAttrValue*)`.
///
/// # Safety
/// `value` must be NULL or valid for a write of `aclrtStreamAttrValue`.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetStreamAttribute(
    stream: *mut c_void,
    attr: i32,
    value: *mut AclrtStreamAttrValue,
) -> i32 {
    ffi("aclrtGetStreamAttribute", true, || {
        non_null(value, "value")?;
        let s = stream_of(stream)?;
        let g = lock(&s.st);
        let out = match attr {
            ACL_STREAM_ATTR_FAILURE_MODE => AclrtStreamAttrValue {
                failure_mode: g.failure_mode.unwrap_or(ACL_CONTINUE_ON_FAILURE),
            },
            ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK..=ACL_STREAM_ATTR_CACHE_OP_INFO => {
                let mut r = [0u32; 4];
                r[0] = g.attrs[attr as usize - 1];
                AclrtStreamAttrValue { reserve: r }
            }
            ACL_STREAM_ATTR_PRIORITY => AclrtStreamAttrValue {
                reserve: [s.priority.load(SeqCst), 0, 0, 0],
            },
            _ => {
                return err(
                    ACL_ERROR_INVALID_PARAM,
                    format!("unknown stream attribute {attr}"),
                )
            }
        };
        // SAFETY: caller contract.
        unsafe { put(value, out) }
    })
}
