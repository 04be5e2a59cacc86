//! Streams: create, destroy, query, synchronize, waits, getters, attributes, managed attach.

use std::mem::MaybeUninit;
use std::ptr;

use cudarc::driver::sys;

use super::{ok, CuContext, CuEvent, CuResult, CuStream};

/// `cuStreamCreate`.
pub(crate) fn stream_create(flags: u32) -> CuResult<CuStream> {
    let mut s = ptr::null_mut();
    // SAFETY: `s` is a valid out-pointer; the caller bound the context.
    ok(unsafe { sys::cuStreamCreate(&mut s, flags) })?;
    Ok(CuStream(s))
}

/// `cuStreamCreateWithPriority`.
pub(crate) fn stream_create_with_priority(flags: u32, priority: i32) -> CuResult<CuStream> {
    let mut s = ptr::null_mut();
    // SAFETY: `s` is a valid out-pointer; the caller bound the context.
    ok(unsafe { sys::cuStreamCreateWithPriority(&mut s, flags, priority) })?;
    Ok(CuStream(s))
}

/// `cuStreamDestroy` (returns at once; the driver releases the stream after its work).
pub(crate) fn stream_destroy(s: CuStream) -> CuResult<()> {
    // SAFETY: `s` is an owned stream that is never used again.
    ok(unsafe { sys::cuStreamDestroy_v2(s.0) })
}

/// `cuStreamQuery`: `Ok` when idle, `Err(NOT_READY)` when busy.
pub(crate) fn stream_query(s: CuStream) -> CuResult<()> {
    // SAFETY: `s` is live (module invariant).
    ok(unsafe { sys::cuStreamQuery(s.0) })
}

/// `cuStreamSynchronize`.
pub(crate) fn stream_synchronize(s: CuStream) -> CuResult<()> {
    // SAFETY: `s` is live.
    ok(unsafe { sys::cuStreamSynchronize(s.0) })
}

/// `cuStreamWaitEvent`.
pub(crate) fn stream_wait_event(s: CuStream, e: CuEvent, flags: u32) -> CuResult<()> {
    // SAFETY: both handles are live.
    ok(unsafe { sys::cuStreamWaitEvent(s.0, e.0, flags) })
}

/// `cuStreamGetFlags`.
pub(crate) fn stream_get_flags(s: CuStream) -> CuResult<u32> {
    let mut f = 0;
    // SAFETY: valid out-pointer; `s` live.
    ok(unsafe { sys::cuStreamGetFlags(s.0, &mut f) })?;
    Ok(f)
}

/// `cuStreamGetPriority`.
pub(crate) fn stream_get_priority(s: CuStream) -> CuResult<i32> {
    let mut p = 0;
    // SAFETY: valid out-pointer; `s` live.
    ok(unsafe { sys::cuStreamGetPriority(s.0, &mut p) })?;
    Ok(p)
}

/// `cuStreamGetId`.
pub(crate) fn stream_get_id(s: CuStream) -> CuResult<u64> {
    let mut id = 0;
    // SAFETY: valid out-pointer; `s` live.
    ok(unsafe { sys::cuStreamGetId(s.0, &mut id) })?;
    Ok(id)
}

/// `cuStreamGetDevice`.
pub(crate) fn stream_get_device(s: CuStream) -> CuResult<i32> {
    let mut d = 0;
    // SAFETY: valid out-pointer; `s` live.
    ok(unsafe { sys::cuStreamGetDevice(s.0, &mut d) })?;
    Ok(d)
}

/// `cuStreamGetCtx`.
pub(crate) fn stream_get_ctx(s: CuStream) -> CuResult<CuContext> {
    let mut c = ptr::null_mut();
    // SAFETY: valid out-pointer; `s` live.
    ok(unsafe { sys::cuStreamGetCtx(s.0, &mut c) })?;
    Ok(CuContext(c))
}

/// `cuStreamGetCtx_v2`: `(context, green context address or 0)`.
pub(crate) fn stream_get_ctx_v2(s: CuStream) -> CuResult<(CuContext, usize)> {
    let mut c = ptr::null_mut();
    let mut g = ptr::null_mut();
    // SAFETY: valid out-pointers; `s` live.
    ok(unsafe { sys::cuStreamGetCtx_v2(s.0, &mut c, &mut g) })?;
    Ok((CuContext(c), g as usize))
}

/// `cuStreamGetAttribute`.
pub(crate) fn stream_get_attribute(
    s: CuStream,
    id: sys::CUstreamAttrID,
) -> CuResult<sys::CUstreamAttrValue> {
    let mut v = MaybeUninit::<sys::CUstreamAttrValue>::zeroed();
    // SAFETY: `v` is a valid, zeroed out-pointer of the union type; `s` live.
    ok(unsafe { sys::cuStreamGetAttribute(s.0, id, v.as_mut_ptr()) })?;
    // SAFETY: zero-initialised plain-data union, written by the driver on success.
    Ok(unsafe { v.assume_init() })
}

/// `cuStreamSetAttribute`.
pub(crate) fn stream_set_attribute(
    s: CuStream,
    id: sys::CUstreamAttrID,
    v: &sys::CUstreamAttrValue,
) -> CuResult<()> {
    // SAFETY: `v` points to a valid value for the duration of the call; `s` live.
    ok(unsafe { sys::cuStreamSetAttribute(s.0, id, v) })
}

/// `cuStreamCopyAttributes`.
pub(crate) fn stream_copy_attributes(dst: CuStream, src: CuStream) -> CuResult<()> {
    // SAFETY: both live.
    ok(unsafe { sys::cuStreamCopyAttributes(dst.0, src.0) })
}

/// `cuStreamAttachMemAsync`.
pub(crate) fn stream_attach_mem_async(
    s: CuStream,
    ptr: u64,
    len: usize,
    flags: u32,
) -> CuResult<()> {
    // SAFETY: `ptr` is a live managed allocation of the caller; `s` live.
    ok(unsafe { sys::cuStreamAttachMemAsync(s.0, ptr, len, flags) })
}
