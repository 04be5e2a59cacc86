//! Events: create, record, query, synchronize, elapsed time, destroy.

use std::ptr;

use cudarc::driver::sys;

use super::{ok, CuEvent, CuResult, CuStream};

/// `cuEventCreate`.
pub(crate) fn event_create(flags: u32) -> CuResult<CuEvent> {
    let mut e = ptr::null_mut();
    // SAFETY: valid out-pointer; context bound by the caller.
    ok(unsafe { sys::cuEventCreate(&mut e, flags) })?;
    Ok(CuEvent(e))
}

/// `cuEventRecord`.
pub(crate) fn event_record(e: CuEvent, s: CuStream) -> CuResult<()> {
    // SAFETY: both live.
    ok(unsafe { sys::cuEventRecord(e.0, s.0) })
}

/// `cuEventQuery`.
pub(crate) fn event_query(e: CuEvent) -> CuResult<()> {
    // SAFETY: live.
    ok(unsafe { sys::cuEventQuery(e.0) })
}

/// `cuEventSynchronize`.
pub(crate) fn event_synchronize(e: CuEvent) -> CuResult<()> {
    // SAFETY: live.
    ok(unsafe { sys::cuEventSynchronize(e.0) })
}

/// `cuEventElapsedTime_v2` (the only elapsed-time binding of the CUDA 13.0 headers).
pub(crate) fn event_elapsed_ms(start: CuEvent, end: CuEvent) -> CuResult<f32> {
    let mut ms = 0f32;
    // SAFETY: valid out-pointer; both live.
    ok(unsafe { sys::cuEventElapsedTime_v2(&mut ms, start.0, end.0) })?;
    Ok(ms)
}

/// `cuEventDestroy`.
pub(crate) fn event_destroy(e: CuEvent) -> CuResult<()> {
    // SAFETY: owned, never used again.
    ok(unsafe { sys::cuEventDestroy_v2(e.0) })
}
