//! Peer access between simulated devices (`XSIM_DEVICES`): `aclrtDeviceCanAccessPeer`,
//! `aclrtDeviceEnablePeerAccess`, `aclrtDeviceDisablePeerAccess`, and the rule that a
//! device-to-device copy (`aclrtMemcpy` / `aclrtMemcpyAsync` with
//! `ACL_MEMCPY_DEVICE_TO_DEVICE`) touching memory of another device needs peer access from the
//! copying device (the current context's, or the stream's) to that device.
//!
//! Every pair of distinct simulated devices can access each other. Access is per device (all
//! its contexts), enabled by the current context's device toward `peerDeviceId`, and lasts
//! until disabled (or the process ends). The public API reference names no return codes for
//! these calls; the simulator's choices: `ACL_ERROR_INVALID_PARAM` (100000) for a device that
//! is its own peer, non-zero `flags`, disabling access that is not enabled, and a copy to or
//! from a device without peer access; `ACL_ERROR_RT_INVALID_DEVICEID` (107001) for an unknown
//! device; enabling twice succeeds. Each call can fail on demand through `XSIM_FAULTS` like any
//! other.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use crate::codes::ACL_ERROR_INVALID_PARAM;
use crate::device::{check_device, cur_ctx};
use crate::error::{err, ffi, lock, non_null, put, R};
use crate::memory::{home_of, Home};

/// `ACL_MEMCPY_DEVICE_TO_DEVICE`.
const D2D: i32 = 3;

/// Enabled pairs: (accessing device, peer device).
fn enabled() -> &'static Mutex<HashSet<(i32, i32)>> {
    static E: OnceLock<Mutex<HashSet<(i32, i32)>>> = OnceLock::new();
    E.get_or_init(Default::default)
}

/// The copy rule: for a device-to-device copy made by device `me`, each side that lies in
/// memory of another device needs `me`'s peer access to it. Other kinds, and addresses the
/// simulator did not allocate, are not checked.
pub(crate) fn check_copy_access(me: i32, kind: i32, dst: usize, src: usize, n: usize) -> R {
    if kind != D2D {
        return Ok(());
    }
    for (side, p) in [("destination", dst), ("source", src)] {
        if let Some(Home::Device(d)) = home_of(p, n) {
            if d != me && !lock(enabled()).contains(&(me, d)) {
                return err(
                    ACL_ERROR_INVALID_PARAM,
                    format!(
                        "the copy's {side} is memory of device {d}; device {me} has not enabled \
                         peer access to it (aclrtDeviceEnablePeerAccess)"
                    ),
                );
            }
        }
    }
    Ok(())
}

/// `aclError aclrtDeviceCanAccessPeer(int32_t* canAccessPeer, int32_t deviceId, int32_t
/// peerDeviceId)`: 1 for two distinct simulated devices; the same id twice → 100000; an
/// unknown id → 107001.
///
/// # Safety
/// `can_access_peer` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtDeviceCanAccessPeer(
    can_access_peer: *mut i32,
    device_id: i32,
    peer_device_id: i32,
) -> i32 {
    ffi("aclrtDeviceCanAccessPeer", true, || {
        non_null(can_access_peer, "canAccessPeer")?;
        check_device(device_id)?;
        check_device(peer_device_id)?;
        if device_id == peer_device_id {
            return err(ACL_ERROR_INVALID_PARAM, "deviceId equals peerDeviceId");
        }
        // SAFETY: checked non-NULL; caller contract.
        unsafe { put(can_access_peer, 1) }
    })
}

/// The current context's device and a checked peer distinct from it.
fn pair(peer_device_id: i32) -> R<(i32, i32)> {
    let me = cur_ctx()?.device;
    check_device(peer_device_id)?;
    if me == peer_device_id {
        return err(
            ACL_ERROR_INVALID_PARAM,
            "peerDeviceId is the current device",
        );
    }
    Ok((me, peer_device_id))
}

/// `aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags)`: the current
/// context's device may then copy to and from `peerDeviceId`'s memory. `flags` must be 0.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclrtDeviceEnablePeerAccess(peer_device_id: i32, flags: u32) -> i32 {
    ffi("aclrtDeviceEnablePeerAccess", true, || {
        if flags != 0 {
            return err(ACL_ERROR_INVALID_PARAM, "flags is reserved and must be 0");
        }
        let p = pair(peer_device_id)?;
        lock(enabled()).insert(p);
        Ok(())
    })
}

/// `aclError aclrtDeviceDisablePeerAccess(int32_t peerDeviceId)`: withdraws the access;
/// access that is not enabled → 100000. Copies already enqueued still run.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclrtDeviceDisablePeerAccess(peer_device_id: i32) -> i32 {
    ffi("aclrtDeviceDisablePeerAccess", true, || {
        let p = pair(peer_device_id)?;
        if !lock(enabled()).remove(&p) {
            return err(
                ACL_ERROR_INVALID_PARAM,
                "peer access to this device is not enabled",
            );
        }
        Ok(())
    })
}
