//! Library, `cuInit`, devices, contexts: binding a context to the calling thread (with a
//! per-thread cache), capture modes of xstream's own threads, the cudarc stream view.

use std::cell::Cell;
use std::mem::MaybeUninit;
use std::sync::Arc;

use cudarc::driver::sys;

use super::{ok, CuContext, CuMemPool, CuResult, CuStream};

/// Whether libcuda can be opened (never panics; cudarc's run-time loader panics at the first
/// call otherwise). Asked through [`super::library`], so it builds with every cudarc loading
/// mode.
pub(crate) fn culib_present() -> bool {
    static P: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *P.get_or_init(|| super::library::present(&["cuda", "nvcuda"]))
}

/// `cuInit(0)`.
pub(crate) fn init() -> CuResult<()> {
    // SAFETY: no pointers; the library is present (checked by the caller).
    ok(unsafe { sys::cuInit(0) })
}

/// `cuDriverGetVersion`.
pub(crate) fn driver_version() -> CuResult<i32> {
    let mut v = 0;
    // SAFETY: `v` is a valid out-pointer.
    ok(unsafe { sys::cuDriverGetVersion(&mut v) })?;
    Ok(v)
}

/// `cuDeviceGetCount`.
pub(crate) fn device_count() -> CuResult<i32> {
    let mut n = 0;
    // SAFETY: `n` is a valid out-pointer.
    ok(unsafe { sys::cuDeviceGetCount(&mut n) })?;
    Ok(n)
}

/// `cuDeviceGetAttribute`.
pub(crate) fn device_attribute(dev: sys::CUdevice, attr: sys::CUdevice_attribute) -> CuResult<i32> {
    let mut v = 0;
    // SAFETY: `v` is a valid out-pointer.
    ok(unsafe { sys::cuDeviceGetAttribute(&mut v, attr, dev) })?;
    Ok(v)
}

/// `cuDeviceTotalMem`: the device's memory in bytes.
pub(crate) fn device_total_mem(dev: sys::CUdevice) -> CuResult<u64> {
    let mut n = 0usize;
    // SAFETY: `n` is a valid out-pointer.
    ok(unsafe { sys::cuDeviceTotalMem_v2(&mut n, dev) })?;
    Ok(n as u64)
}

/// `cuMemGetInfo`: free and total bytes of the current context's device (the caller bound it).
pub(crate) fn mem_get_info() -> CuResult<(u64, u64)> {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: valid out-pointers.
    ok(unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) })?;
    Ok((free as u64, total as u64))
}

/// `cuDeviceGetUuid` (the `_v2` entry point, CUDA 11.4 and later).
pub(crate) fn device_uuid(dev: sys::CUdevice) -> CuResult<[u8; 16]> {
    let mut u = sys::CUuuid_st { bytes: [0; 16] };
    // SAFETY: `u` is a valid out-pointer to 16 bytes.
    ok(unsafe { sys::cuDeviceGetUuid_v2(&mut u, dev) })?;
    Ok(u.bytes.map(|b| b as u8))
}

/// `cuDeviceGetPCIBusId`: `domain:bus:device.function`.
pub(crate) fn device_pci_bus_id(dev: sys::CUdevice) -> CuResult<String> {
    let mut buf = [0 as std::ffi::c_char; 64];
    // SAFETY: `buf` is writable for its length, which is passed; the driver NUL-terminates.
    ok(unsafe { sys::cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as i32, dev) })?;
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// `cuDeviceGetDefaultMemPool`.
pub(crate) fn device_default_mem_pool(dev: sys::CUdevice) -> CuResult<CuMemPool> {
    let mut p = MaybeUninit::uninit();
    // SAFETY: `p` is a valid out-pointer, written on success.
    ok(unsafe { sys::cuDeviceGetDefaultMemPool(p.as_mut_ptr(), dev) })?;
    // SAFETY: written by the driver on success.
    Ok(CuMemPool(unsafe { p.assume_init() }))
}

thread_local! {
    /// The context this crate last made current on this thread (a cache: `cuCtxSetCurrent` is
    /// only called when it differs).
    static CURRENT: Cell<usize> = const { Cell::new(0) };
    /// Whether this thread already switched itself to RELAXED capture mode.
    static RELAXED: Cell<bool> = const { Cell::new(false) };
}

/// Makes `ctx` current on the calling thread unless the per-thread cache says it already is.
pub(crate) fn bind(ctx: CuContext) -> CuResult<()> {
    let want = ctx.0 as usize;
    if CURRENT.with(|c| c.get()) == want {
        return Ok(());
    }
    // SAFETY: `ctx` is the retained primary context of a live device.
    ok(unsafe { sys::cuCtxSetCurrent(ctx.0) })?;
    CURRENT.with(|c| c.set(want));
    Ok(())
}

/// Forgets the per-thread cache, so the next [`bind`] calls `cuCtxSetCurrent` (for threads that
/// also switch contexts through other libraries).
pub(crate) fn forget_bound_context() {
    CURRENT.with(|c| c.set(0));
}

/// `cuCtxGetStreamPriorityRange` of the current context: `(least, greatest)`.
pub(crate) fn ctx_stream_priority_range() -> CuResult<(i32, i32)> {
    let (mut least, mut greatest) = (0, 0);
    // SAFETY: valid out-pointers.
    ok(unsafe { sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest) })?;
    Ok((least, greatest))
}

/// `cuCtxSynchronize` of the current context.
pub(crate) fn ctx_synchronize() -> CuResult<()> {
    // SAFETY: no arguments.
    ok(unsafe { sys::cuCtxSynchronize() })
}

/// Switches the calling thread to RELAXED capture mode, once per thread: for xstream's own
/// threads (poller, dispatcher), so that their queries never invalidate a user's GLOBAL capture
/// (driver behaviour in docs/semantics.md).
pub(crate) fn ensure_relaxed_capture_mode() {
    if RELAXED.with(|r| r.replace(true)) {
        return;
    }
    let mut mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
    // SAFETY: `mode` is a valid in/out pointer.
    let r = ok(unsafe { sys::cuThreadExchangeStreamCaptureMode(&mut mode) });
    if let Err(code) = r {
        tracing::warn!(code, "cuThreadExchangeStreamCaptureMode(RELAXED) failed");
    }
}

/// `cuThreadExchangeStreamCaptureMode`: sets the calling thread's mode, returns the old one.
pub(crate) fn exchange_capture_mode(
    mode: sys::CUstreamCaptureMode,
) -> CuResult<sys::CUstreamCaptureMode> {
    let mut m = mode;
    // SAFETY: `m` is a valid in/out pointer.
    ok(unsafe { sys::cuThreadExchangeStreamCaptureMode(&mut m) })?;
    Ok(m)
}

/// Wraps a raw stream of `ctx` as a cudarc stream that cudarc will not destroy.
pub(crate) fn cudarc_wrap_borrowed(
    ctx: &Arc<cudarc::driver::CudaContext>,
    s: CuStream,
) -> Arc<cudarc::driver::CudaStream> {
    // SAFETY: `s` belongs to `ctx` (created in it, or a special handle of it); the wrapper is
    // non-owning, and xstream keeps the handle alive as long as the wrapper can be reached
    // through xstream (see `StreamHandle`'s drop, which never destroys a handle whose cudarc
    // wrapper is still shared).
    unsafe { ctx.wrap_borrowed_stream(s.0) }
}
