//! Peer access between Ascend devices: `aclrtDeviceCanAccessPeer`,
//! `aclrtDeviceEnablePeerAccess` / `aclrtDeviceDisablePeerAccess` (optional symbols, one
//! capability group: `Capabilities::PEER_COPY`, kept only where another device is
//! accessible), and the portable rule of `Stream::copy_peer`: the stream's device must have
//! enabled access to the other buffer's device (`NotPermitted` otherwise, checked before the
//! runtime is called), then one `aclrtMemcpyAsync` with `ACL_MEMCPY_DEVICE_TO_DEVICE` across
//! the devices, both buffers kept alive by the stream until it completed.

use std::sync::MutexGuard;

use xstream_core::{BackendKind, Error, Result};

use crate::result;
use crate::sys::AclFns;
use crate::AscendDevice;

/// Whether device `ordinal` can access any other device (its `PEER_COPY`).
pub(crate) fn has_peer(t: &AclFns, ordinal: usize) -> bool {
    let n = result::device::count(t).unwrap_or(0) as usize;
    (0..n)
        .filter(|&o| o != ordinal)
        .any(|o| result::device::can_access_peer(t, ordinal as i32, o as i32).unwrap_or(false))
}

fn peers(dev: &AscendDevice) -> MutexGuard<'_, std::collections::HashSet<usize>> {
    xstream_core::sync::lock(&dev.inner.peers)
}

/// Refuses the device itself as a peer; returns the peer's ordinal.
fn other(op: &str, dev: &AscendDevice, peer: &AscendDevice) -> Result<usize> {
    if dev.inner.ordinal == peer.inner.ordinal {
        return Err(Error::invalid(format!(
            "{op}: Ascend device {} is its own peer (same-device copies use Stream::copy)",
            dev.inner.ordinal
        )));
    }
    Ok(peer.inner.ordinal)
}

/// `Device::can_access_peer`: `false` for the device itself and without the symbols.
pub(crate) fn can_access_peer(dev: &AscendDevice, peer: &AscendDevice) -> Result<bool> {
    let t = dev.inner.t;
    if dev.inner.ordinal == peer.inner.ordinal || t.aclrtDeviceCanAccessPeer.is_none() {
        return Ok(false);
    }
    result::device::can_access_peer(t, dev.inner.ordinal as i32, peer.inner.ordinal as i32)
}

/// `Device::enable_peer_access`.
pub(crate) fn enable(dev: &AscendDevice, peer: &AscendDevice) -> Result<()> {
    let theirs = other("enable_peer_access", dev, peer)?;
    if !dev
        .info_caps()
        .contains(xstream_core::Capabilities::PEER_COPY)
        || !can_access_peer(dev, peer)?
    {
        return Err(Error::unsupported(
            BackendKind::Ascend,
            format!(
                "peer access from device {} to device {theirs} (aclrtDeviceCanAccessPeer says \
                 no, or the runtime does not export the peer-access API)",
                dev.inner.ordinal
            ),
        ));
    }
    let mut set = peers(dev);
    dev.bind()?;
    result::device::enable_peer_access(dev.inner.t, theirs as i32)?;
    set.insert(theirs);
    Ok(())
}

/// `Device::disable_peer_access`.
pub(crate) fn disable(dev: &AscendDevice, peer: &AscendDevice) -> Result<()> {
    let theirs = other("disable_peer_access", dev, peer)?;
    let mut set = peers(dev);
    if !set.contains(&theirs) {
        return Err(Error::invalid(format!(
            "disable_peer_access: Ascend device {} never enabled access to device {theirs}",
            dev.inner.ordinal
        )));
    }
    dev.bind()?;
    result::device::disable_peer_access(dev.inner.t, theirs as i32)?;
    set.remove(&theirs);
    Ok(())
}

/// Whether `dev` enabled access to device `ordinal`.
pub(crate) fn enabled(dev: &AscendDevice, ordinal: usize) -> bool {
    peers(dev).contains(&ordinal)
}
