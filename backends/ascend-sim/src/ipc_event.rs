//! IPC event handles: `aclrtIpcGetEventHandle` / `aclrtIpcOpenEventHandle`.
//!
//! The simulated chip has no IPC events (`aclrtCreateEventExWithFlag(ACL_EVENT_IPC)` returns
//! 207000, see [`crate::event`]). On such a chip the runtime checks its pointers at the ACL
//! layer first (`ACL_ERROR_INVALID_PARAM`, 100000: the handle, then the event, for the get
//! call; the event out-pointer for the open call), then refuses the feature before looking at
//! the event or the handle bytes: `ACL_ERROR_RT_FEATURE_NOT_SUPPORT` (207000). The simulator
//! does exactly that; it does not share events between processes.

use crate::codes::*;
use crate::error::*;
use std::ffi::{c_char, c_void};

/// `ACL_IPC_EVENT_HANDLE_SIZE`.
pub const ACL_IPC_EVENT_HANDLE_SIZE: usize = 64;

/// C `aclrtIpcEventHandle`: `{ char reserved[ACL_IPC_EVENT_HANDLE_SIZE]; }`, passed by value
/// to `aclrtIpcOpenEventHandle`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct AclrtIpcEventHandle {
    /// The opaque bytes.
    pub reserved: [c_char; ACL_IPC_EVENT_HANDLE_SIZE],
}

const NO_IPC: &str = "the simulated chip has no IPC events";

/// `aclError aclrtIpcGetEventHandle(aclrtEvent event, aclrtIpcEventHandle* handle)`.
///
/// # Safety
/// Pointers as the ACL contract says (they are only checked for NULL here).
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcGetEventHandle(
    event: *mut c_void,
    handle: *mut AclrtIpcEventHandle,
) -> i32 {
    ffi("aclrtIpcGetEventHandle", true, || {
        non_null(handle, "handle")?;
        non_null(event, "event")?;
        err(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, NO_IPC)
    })
}

/// `aclError aclrtIpcOpenEventHandle(aclrtIpcEventHandle handle, aclrtEvent* event)`.
///
/// # Safety
/// `event` as the ACL contract says (only checked for NULL here).
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcOpenEventHandle(
    handle: AclrtIpcEventHandle,
    event: *mut *mut c_void,
) -> i32 {
    ffi("aclrtIpcOpenEventHandle", true, || {
        let _ = handle;
        non_null(event, "event")?;
        err(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, NO_IPC)
    })
}
