//! Interprocess events: `cuIpcGetEventHandle`, `cuIpcOpenEventHandle`.

use std::ptr;

use cudarc::driver::sys;

use super::{ok, CuEvent, CuResult};

/// `CU_IPC_HANDLE_SIZE`: the bytes of a `CUipcEventHandle`.
pub(crate) const IPC_EVENT_HANDLE_SIZE: usize = 64;

/// `cuIpcGetEventHandle`: the handle of an event created with
/// `CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING`.
pub(crate) fn ipc_get_event_handle(e: CuEvent) -> CuResult<[u8; IPC_EVENT_HANDLE_SIZE]> {
    let mut h = sys::CUipcEventHandle_st {
        reserved: [0; IPC_EVENT_HANDLE_SIZE],
    };
    // SAFETY: valid out-pointer to a handle of the driver's size; the event is live and its
    // context bound by the caller.
    ok(unsafe { sys::cuIpcGetEventHandle(&mut h, e.0) })?;
    Ok(h.reserved.map(|c| c as u8))
}

/// `cuIpcOpenEventHandle`: an event of the current context for another process's handle
/// (destroyed with `cuEventDestroy`).
pub(crate) fn ipc_open_event_handle(bytes: &[u8; IPC_EVENT_HANDLE_SIZE]) -> CuResult<CuEvent> {
    let h = sys::CUipcEventHandle_st {
        reserved: bytes.map(|b| b as std::ffi::c_char),
    };
    let mut e = ptr::null_mut();
    // SAFETY: valid out-pointer; the handle is passed by value (plain bytes the driver
    // validates); context bound by the caller.
    ok(unsafe { sys::cuIpcOpenEventHandle(&mut e, h) })?;
    Ok(CuEvent(e))
}
