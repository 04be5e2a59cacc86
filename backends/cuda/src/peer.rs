//! Peer access between CUDA devices and copies across them.
//!
//! `Device::enable_peer_access` calls `cuCtxEnablePeerAccess` from the device's primary
//! context to the peer's (an "already enabled" answer is absorbed) and records the peer;
//! `Stream::copy_peer` refuses a peer that was not enabled (`NotPermitted`), so the portable
//! rule is the same on every backend, then enqueues one `cuMemcpyPeerAsync` on the stream and
//! keeps both buffers alive until it completed. Buffers of the stream's own device go through
//! the ordinary `cuMemcpyDtoDAsync` copy.

use std::sync::MutexGuard;

use cudarc::driver::sys;
use xstream_core::{Error, Result};

use crate::ffi;
use crate::CudaDevice;

/// Whether device `cu_device` (ordinal `ordinal` of `count`) can access any other device: its
/// `Capabilities::PEER_COPY`.
pub(crate) fn has_peer(cu_device: sys::CUdevice, ordinal: usize, count: i32) -> bool {
    (0..count)
        .filter(|&o| o as usize != ordinal)
        .filter_map(|o| ffi::device_get(o).ok())
        .any(|peer| ffi::device_can_access_peer(cu_device, peer).unwrap_or(false))
}

fn peers(dev: &CudaDevice) -> MutexGuard<'_, std::collections::HashSet<usize>> {
    xstream_core::sync::lock(&dev.shared.peers)
}

/// Refuses the device itself as a peer; returns the peer's ordinal.
fn other(op: &str, dev: &CudaDevice, peer: &CudaDevice) -> Result<usize> {
    if dev.shared.raw_ctx == peer.shared.raw_ctx {
        return Err(Error::invalid(format!(
            "{op}: CUDA device {} is its own peer (same-device copies use Stream::copy)",
            dev.shared.info.ordinal
        )));
    }
    Ok(peer.shared.info.ordinal)
}

/// `Device::can_access_peer`.
pub(crate) fn can_access_peer(dev: &CudaDevice, peer: &CudaDevice) -> Result<bool> {
    if dev.shared.raw_ctx == peer.shared.raw_ctx {
        return Ok(false);
    }
    dev.shared.bind()?;
    ffi::device_can_access_peer(dev.shared.cu_device, peer.shared.cu_device)
        .map_err(|c| dev.shared.fail("cuDeviceCanAccessPeer", c))
}

/// `Device::enable_peer_access`.
pub(crate) fn enable(dev: &CudaDevice, peer: &CudaDevice) -> Result<()> {
    let theirs = other("enable_peer_access", dev, peer)?;
    if !can_access_peer(dev, peer)? {
        return Err(Error::unsupported(
            xstream_core::BackendKind::Cuda,
            "peer access: cuDeviceCanAccessPeer says this device cannot access the other",
        ));
    }
    let mut set = peers(dev);
    dev.shared.bind()?;
    match ffi::ctx_enable_peer_access(peer.shared.raw_ctx) {
        Ok(()) | Err(ffi::PEER_ACCESS_ALREADY_ENABLED) => {}
        Err(c) => return Err(dev.shared.fail("cuCtxEnablePeerAccess", c)),
    }
    set.insert(theirs);
    Ok(())
}

/// `Device::disable_peer_access`.
pub(crate) fn disable(dev: &CudaDevice, peer: &CudaDevice) -> Result<()> {
    let theirs = other("disable_peer_access", dev, peer)?;
    let mut set = peers(dev);
    if !set.contains(&theirs) {
        return Err(Error::invalid(format!(
            "disable_peer_access: CUDA device {} never enabled access to device {theirs}",
            dev.shared.info.ordinal
        )));
    }
    dev.shared.bind()?;
    match ffi::ctx_disable_peer_access(peer.shared.raw_ctx) {
        Ok(()) | Err(ffi::PEER_ACCESS_NOT_ENABLED) => {}
        Err(c) => return Err(dev.shared.fail("cuCtxDisablePeerAccess", c)),
    }
    set.remove(&theirs);
    Ok(())
}

/// Whether `dev` enabled access to device `ordinal`.
pub(crate) fn enabled(dev: &CudaDevice, ordinal: usize) -> bool {
    peers(dev).contains(&ordinal)
}
