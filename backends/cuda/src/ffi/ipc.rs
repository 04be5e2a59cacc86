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

/// `CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS`: the only flag of `cuIpcOpenMemHandle`.
pub(crate) const IPC_MEM_LAZY_ENABLE_PEER_ACCESS: u32 = 1;

/// `cuIpcGetMemHandle`: the handle of the allocation holding `p` (a `cuMemAlloc` base).
pub(crate) fn ipc_get_mem_handle(p: u64) -> CuResult<[u8; IPC_EVENT_HANDLE_SIZE]> {
    let mut h = sys::CUipcMemHandle_st {
        reserved: [0; IPC_EVENT_HANDLE_SIZE],
    };
    // SAFETY: valid out-pointer of the driver's size; `p` is a live allocation of this crate
    // and its context is bound by the caller.
    ok(unsafe { sys::cuIpcGetMemHandle(&mut h, p) })?;
    Ok(h.reserved.map(|c| c as u8))
}

/// `cuIpcOpenMemHandle` (lazy peer access): the base of another process's allocation, mapped
/// in the current context until [`ipc_close_mem_handle`].
pub(crate) fn ipc_open_mem_handle(bytes: &[u8; IPC_EVENT_HANDLE_SIZE]) -> CuResult<u64> {
    let h = sys::CUipcMemHandle_st {
        reserved: bytes.map(|b| b as std::ffi::c_char),
    };
    let mut p: sys::CUdeviceptr = 0;
    // SAFETY: valid out-pointer; the handle is plain bytes passed by value that the driver
    // validates; context bound by the caller.
    ok(unsafe { sys::cuIpcOpenMemHandle_v2(&mut p, h, IPC_MEM_LAZY_ENABLE_PEER_ACCESS) })?;
    Ok(p)
}

/// `cuIpcCloseMemHandle`: unmaps an opened allocation (never used again afterwards).
pub(crate) fn ipc_close_mem_handle(p: u64) -> CuResult<()> {
    // SAFETY: `p` came from `ipc_open_mem_handle` and no pending work uses it.
    ok(unsafe { sys::cuIpcCloseMemHandle(p) })
}
