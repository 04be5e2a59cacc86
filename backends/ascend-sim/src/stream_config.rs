//! Stream configuration objects: `aclrtCreateStreamConfigHandle`, `aclrtSetStreamConfigOpt`,
//! `aclrtDestroyStreamConfigHandle`, `aclrtCreateStreamV2`.
//!
//! The handle has the public layout `{ void* workptr; size_t workSize; size_t flag; uint32_t
//! priority; }`. `aclrtSetStreamConfigOpt` takes the value by address with its exact size:
//! `ACL_RT_STREAM_WORK_ADDR_PTR` (0) a `void*`, `ACL_RT_STREAM_WORK_SIZE` (1) a `size_t`,
//! `ACL_RT_STREAM_FLAG` (2) and `ACL_RT_STREAM_PRIORITY` (3) a `uint32_t`; another size, a NULL
//! handle or value, an unknown attribute or a handle this library did not create → 100000.
//! `aclrtCreateStreamV2` creates the stream exactly as `aclrtCreateStreamWithConfig(priority,
//! flag)` would (same flag rules, priority range and limits); the work memory is stored, not
//! used (the simulator runs no models that need it).

use crate::codes::*;
use crate::error::*;
use crate::stream::*;
use std::collections::HashSet;
use std::ffi::c_void;
use std::sync::Mutex;

/// C `aclrtStreamConfigHandle`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AclrtStreamConfigHandle {
    /// `workptr`.
    pub workptr: *mut c_void,
    /// `workSize`.
    pub work_size: usize,
    /// `flag`.
    pub flag: usize,
    /// `priority`.
    pub priority: u32,
}

/// `ACL_RT_STREAM_WORK_ADDR_PTR`.
pub const ACL_RT_STREAM_WORK_ADDR_PTR: i32 = 0;
/// `ACL_RT_STREAM_WORK_SIZE`.
pub const ACL_RT_STREAM_WORK_SIZE: i32 = 1;
/// `ACL_RT_STREAM_FLAG`.
pub const ACL_RT_STREAM_FLAG: i32 = 2;
/// `ACL_RT_STREAM_PRIORITY`.
pub const ACL_RT_STREAM_PRIORITY: i32 = 3;

/// Handles this library created and has not destroyed, by address.
static LIVE: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

fn check_live(h: *const AclrtStreamConfigHandle) -> R {
    non_null(h, "handle")?;
    if lock(&LIVE)
        .as_ref()
        .is_some_and(|s| s.contains(&(h as usize)))
    {
        Ok(())
    } else {
        err(ACL_ERROR_INVALID_PARAM, "unknown stream config handle")
    }
}

/// `aclrtStreamConfigHandle* aclrtCreateStreamConfigHandle(void)`: a zeroed handle (NULL when
/// an injected fault hits this symbol).
///
/// # Safety
/// No arguments; release the handle with `aclrtDestroyStreamConfigHandle`.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateStreamConfigHandle() -> *mut AclrtStreamConfigHandle {
    let mut out = std::ptr::null_mut();
    ffi("aclrtCreateStreamConfigHandle", false, || {
        let h = Box::into_raw(Box::new(AclrtStreamConfigHandle {
            workptr: std::ptr::null_mut(),
            work_size: 0,
            flag: 0,
            priority: 0,
        }));
        lock(&LIVE)
            .get_or_insert_with(HashSet::new)
            .insert(h as usize);
        out = h;
        Ok(())
    });
    out
}

/// `aclError aclrtDestroyStreamConfigHandle(aclrtStreamConfigHandle* handle)`.
///
/// # Safety
/// `handle` must not be used afterwards.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyStreamConfigHandle(
    handle: *mut AclrtStreamConfigHandle,
) -> i32 {
    ffi("aclrtDestroyStreamConfigHandle", false, || {
        check_live(handle)?;
        if let Some(s) = lock(&LIVE).as_mut() {
            s.remove(&(handle as usize));
        }
        // SAFETY: created by Box::into_raw in aclrtCreateStreamConfigHandle, removed from the
        // live set just now, so freed once.
        drop(unsafe { Box::from_raw(handle) });
        Ok(())
    })
}

/// Reads a `T` from `value` if `size` is exactly its size.
///
/// # Safety
/// `value` must be valid for `size` bytes of reads.
unsafe fn read_exact<T: Copy>(value: *const c_void, size: usize) -> R<T> {
    if size != std::mem::size_of::<T>() {
        return err(
            ACL_ERROR_INVALID_PARAM,
            format!("valueSize {size} must be {}", std::mem::size_of::<T>()),
        );
    }
    // SAFETY: caller contract; read_unaligned needs no alignment.
    Ok(unsafe { (value as *const T).read_unaligned() })
}

/// `aclError aclrtSetStreamConfigOpt(aclrtStreamConfigHandle* handle, aclrtStreamConfigAttr
/// attr, const void* attrValue, size_t valueSize)`.
///
/// # Safety
/// `attr_value` must be valid for `value_size` bytes of reads.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetStreamConfigOpt(
    handle: *mut AclrtStreamConfigHandle,
    attr: i32,
    attr_value: *const c_void,
    value_size: usize,
) -> i32 {
    ffi("aclrtSetStreamConfigOpt", false, || {
        check_live(handle)?;
        non_null(attr_value, "attrValue")?;
        // SAFETY: live handle created by this library; no other reference exists during the call.
        let h = unsafe { &mut *handle };
        // SAFETY: the caller guarantees `value_size` readable bytes at `attr_value`;
        // read_exact checks the size against the attribute's type.
        let (word, size, wide) = unsafe {
            (
                read_exact::<u32>(attr_value, value_size),
                read_exact::<usize>(attr_value, value_size),
                read_exact::<*mut c_void>(attr_value, value_size),
            )
        };
        match attr {
            ACL_RT_STREAM_WORK_ADDR_PTR => h.workptr = wide?,
            ACL_RT_STREAM_WORK_SIZE => h.work_size = size?,
            ACL_RT_STREAM_FLAG => h.flag = word? as usize,
            ACL_RT_STREAM_PRIORITY => h.priority = word?,
            _ => return err(ACL_ERROR_INVALID_PARAM, format!("bad config attr {attr}")),
        }
        Ok(())
    })
}

/// `aclError aclrtCreateStreamV2(aclrtStream* stream, const aclrtStreamConfigHandle* handle)`.
///
/// # Safety
/// `stream` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateStreamV2(
    stream: *mut *mut c_void,
    handle: *const AclrtStreamConfigHandle,
) -> i32 {
    ffi("aclrtCreateStreamV2", true, || {
        check_live(handle)?;
        // SAFETY: live handle created by this library.
        let h = unsafe { *handle };
        let flag = u32::try_from(h.flag)
            .or_else(|_| err(ACL_ERROR_RT_PARAM_INVALID, "flag out of range"))?;
        create_stream(stream, h.priority, flag)
    })
}
