//! Virtual memory on Ascend ([`VirtualMemory`] for [`AscendDevice`]) over the ACL functions
//! `aclrtMemGetAllocationGranularity`, `aclrtReserveMemAddress` / `aclrtReleaseMemAddress`,
//! `aclrtMallocPhysical` / `aclrtFreePhysical`, `aclrtMapMem` / `aclrtUnmapMem` and
//! `aclrtMemSetAccess` (optional symbols, loader group "virtual memory"): pinned device
//! memory (`ACL_HBM_MEM_HUGE`), read and write access. The device has
//! [`Capabilities::VIRTUAL_MEMORY`](xstream_core::Capabilities::VIRTUAL_MEMORY) when the
//! runtime exports them all and answers the granularity at open.
//!
//! Sharing with another process: `aclrtMemExportToShareableHandle` with
//! `ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION` (any process given the 64-bit value may
//! import it, as any process given a CUDA descriptor may: the portable API names no
//! importer, so the runtime's PID whitelist, `aclrtMemSetPidToShareableHandle`, is not used)
//! and `aclrtMemImportFromShareableHandle` (optional symbols, loader group "virtual memory
//! sharing", giving
//! [`Capabilities::SHAREABLE_PHYSICAL`](xstream_core::Capabilities::SHAREABLE_PHYSICAL)).
//! The payload of the handle is the 64-bit value, little-endian.
//!
//! Each handle type releases in its drop (binding the device's context first); a failure
//! there is logged, never raised. A buffer of mapped bytes drops its mappings on the reaper
//! thread after the device's queued work, where an `aclrtFree` would run.

use std::any::Any;
use std::sync::Arc;

use xstream_core::{
    Device as _, Error, Granularity, Result, ShareableHandle, ShareablePayload, VirtualMemory,
};

use crate::device::BufInner;
use crate::result;
use crate::sys::DevPtr;
use crate::{AscendBuffer, AscendDevice};

/// A reserved address range (`aclrtReserveMemAddress`); `aclrtReleaseMemAddress` at drop.
#[derive(Debug)]
pub struct AscendReservation {
    dev: AscendDevice,
    ptr: u64,
}

/// Physical device memory (`aclrtMallocPhysical`, the `aclrtDrvMemHandle` kept as an
/// integer); `aclrtFreePhysical` at drop.
#[derive(Debug)]
pub struct AscendPhysical {
    dev: AscendDevice,
    handle: u64,
}

impl AscendPhysical {
    /// The runtime's `aclrtDrvMemHandle`, as an integer.
    pub fn handle(&self) -> u64 {
        self.handle
    }
}

/// A mapping (`aclrtMapMem`); `aclrtUnmapMem` at drop.
#[derive(Debug)]
pub struct AscendMapping {
    dev: AscendDevice,
    ptr: u64,
}

/// Binds the device's context, then runs a release (a failure is logged).
fn released(dev: &AscendDevice, what: &str, f: impl FnOnce() -> Result<()>) {
    if dev.inner.bind().is_err() {
        return;
    }
    if let Err(e) = f() {
        tracing::debug!(error = %e, "{what} failed");
    }
}

impl Drop for AscendReservation {
    fn drop(&mut self) {
        released(&self.dev, "aclrtReleaseMemAddress", || {
            result::vmm::release(self.dev.inner.t, at(self.ptr))
        });
    }
}

impl Drop for AscendPhysical {
    fn drop(&mut self) {
        released(&self.dev, "aclrtFreePhysical", || {
            result::vmm::free_physical(self.dev.inner.t, at(self.handle))
        });
    }
}

impl Drop for AscendMapping {
    fn drop(&mut self) {
        released(&self.dev, "aclrtUnmapMem", || {
            result::vmm::unmap(self.dev.inner.t, at(self.ptr))
        });
    }
}

/// `ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION`.
const EXPORT_DISABLE_PID_VALIDATION: u64 = 1;

fn at(address: u64) -> DevPtr {
    DevPtr(address as usize as *mut std::ffi::c_void)
}

impl VirtualMemory for AscendDevice {
    type Reservation = AscendReservation;
    type Physical = AscendPhysical;
    type Mapping = AscendMapping;

    fn raw_granularity(&self) -> Result<Granularity> {
        let d = &self.inner;
        d.bind()?;
        Ok(Granularity {
            minimum: result::vmm::granularity(d.t, d.ordinal, 0)?,
            recommended: result::vmm::granularity(d.t, d.ordinal, 1)?,
        })
    }

    fn raw_reserve(&self, size: usize, align: usize) -> Result<(AscendReservation, u64)> {
        let d = &self.inner;
        d.bind()?;
        let ptr = result::vmm::reserve(d.t, size, align)?.0 as usize as u64;
        Ok((
            AscendReservation {
                dev: self.clone(),
                ptr,
            },
            ptr,
        ))
    }

    fn raw_create(&self, size: usize) -> Result<AscendPhysical> {
        let d = &self.inner;
        d.bind()?;
        let handle = result::vmm::malloc_physical(d.t, d.ordinal, size)?.0 as usize as u64;
        Ok(AscendPhysical {
            dev: self.clone(),
            handle,
        })
    }

    fn raw_map(
        &self,
        _res: &AscendReservation,
        address: u64,
        phys: &AscendPhysical,
        size: usize,
    ) -> Result<AscendMapping> {
        let d = &self.inner;
        d.bind()?;
        result::vmm::map(d.t, at(address), size, at(phys.handle))?;
        Ok(AscendMapping {
            dev: self.clone(),
            ptr: address,
        })
    }

    fn raw_set_access(
        &self,
        _map: &AscendMapping,
        address: u64,
        size: usize,
        peer: &AscendDevice,
    ) -> Result<()> {
        let d = &self.inner;
        d.bind()?;
        result::vmm::set_access(d.t, at(address), size, peer.info().ordinal)
    }

    fn raw_export(&self, phys: &AscendPhysical, _size: usize) -> Result<ShareablePayload> {
        let d = &self.inner;
        d.bind()?;
        let v = result::vmm::export(d.t, at(phys.handle), EXPORT_DISABLE_PID_VALIDATION)?;
        Ok(ShareablePayload {
            bytes: v.to_le_bytes().to_vec(),
            fd: None,
        })
    }

    fn raw_import(&self, handle: &ShareableHandle) -> Result<AscendPhysical> {
        let v: [u8; 8] = handle.payload().try_into().map_err(|_| {
            Error::invalid(format!(
                "an Ascend shareable handle carries 8 payload bytes, not {}",
                handle.payload().len()
            ))
        })?;
        let d = &self.inner;
        d.bind()?;
        let h = result::vmm::import(d.t, u64::from_le_bytes(v), d.ordinal)?;
        Ok(AscendPhysical {
            dev: self.clone(),
            handle: h.0 as usize as u64,
        })
    }

    fn raw_buffer(
        &self,
        address: u64,
        len: usize,
        keep: Arc<dyn Any + Send + Sync>,
    ) -> Result<AscendBuffer> {
        Ok(AscendBuffer {
            inner: Arc::new(BufInner {
                device: self.clone(),
                ptr: at(address),
                len,
                ordered: None,
                leaked: std::sync::atomic::AtomicBool::new(false),
                mapped: Some(keep),
            }),
        })
    }
}
