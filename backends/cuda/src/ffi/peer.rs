//! Peer access between devices: `cuDeviceGet`, `cuDeviceCanAccessPeer`,
//! `cuCtxEnablePeerAccess` / `cuCtxDisablePeerAccess` and `cuMemcpyPeerAsync`.

use cudarc::driver::sys;

use super::{ok, Code, CuContext, CuResult, CuStream};

/// `CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED`.
pub(crate) const PEER_ACCESS_ALREADY_ENABLED: Code = 704;
/// `CUDA_ERROR_PEER_ACCESS_NOT_ENABLED`.
pub(crate) const PEER_ACCESS_NOT_ENABLED: Code = 705;

/// `cuDeviceGet`: the handle of device `ordinal`.
pub(crate) fn device_get(ordinal: i32) -> CuResult<sys::CUdevice> {
    let mut d = 0;
    // SAFETY: `d` is a valid out-pointer; the driver checks the ordinal.
    ok(unsafe { sys::cuDeviceGet(&mut d, ordinal) })?;
    Ok(d)
}

/// `cuDeviceCanAccessPeer`: whether `dev` can access the memory of `peer`.
pub(crate) fn device_can_access_peer(dev: sys::CUdevice, peer: sys::CUdevice) -> CuResult<bool> {
    let mut v = 0;
    // SAFETY: `v` is a valid out-pointer; the driver checks both device handles.
    ok(unsafe { sys::cuDeviceCanAccessPeer(&mut v, dev, peer) })?;
    Ok(v != 0)
}

/// `cuCtxEnablePeerAccess` (flags 0) from the bound context to `peer`.
pub(crate) fn ctx_enable_peer_access(peer: CuContext) -> CuResult<()> {
    // SAFETY: `peer` is a live primary context (held by its device's `Shared`); the caller
    // bound the accessing context.
    ok(unsafe { sys::cuCtxEnablePeerAccess(peer.0, 0) })
}

/// `cuCtxDisablePeerAccess` from the bound context to `peer`.
pub(crate) fn ctx_disable_peer_access(peer: CuContext) -> CuResult<()> {
    // SAFETY: as `ctx_enable_peer_access`.
    ok(unsafe { sys::cuCtxDisablePeerAccess(peer.0) })
}

/// `cuMemcpyPeerAsync`: `len` bytes from `src` (of context `src_ctx`) to `dst` (of
/// `dst_ctx`), in the order of stream `s`.
pub(crate) fn memcpy_peer_async(
    dst: u64,
    dst_ctx: CuContext,
    src: u64,
    src_ctx: CuContext,
    len: usize,
    s: CuStream,
) -> CuResult<()> {
    // SAFETY: both ranges were checked against live allocations of their contexts, which the
    // caller keeps alive (stream keep list) until the copy completed; `s` and both contexts
    // are live.
    ok(unsafe { sys::cuMemcpyPeerAsync(dst, dst_ctx.0, src, src_ctx.0, len, s.0) })
}
