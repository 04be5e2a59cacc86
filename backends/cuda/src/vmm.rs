//! Virtual memory on CUDA ([`VirtualMemory`] for [`CudaDevice`]) over the driver's virtual
//! memory management: `cuMemGetAllocationGranularity` (pinned device memory),
//! `cuMemAddressReserve` / `cuMemAddressFree`, `cuMemCreate` / `cuMemRelease`, `cuMemMap` /
//! `cuMemUnmap` and `cuMemSetAccess` (read and write). The device has
//! [`Capabilities::VIRTUAL_MEMORY`](xstream_core::Capabilities::VIRTUAL_MEMORY) when
//! `CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED` is set.
//!
//! Sharing with another process: where the device has
//! `CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED` (Linux), it has
//! [`Capabilities::SHAREABLE_PHYSICAL`](xstream_core::Capabilities::SHAREABLE_PHYSICAL) and
//! every `cuMemCreate` asks for `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`, so any physical
//! memory can be exported (`cuMemExportToShareableHandle`). The handle carries the
//! descriptor; send it with [`crate::fdpass`] (`SCM_RIGHTS`). The importer
//! (`cuMemImportFromShareableHandle`) may close the descriptor once imported (dropping the
//! handle does).
//!
//! Each handle type releases in its drop (binding the device's context first); a failure
//! there is logged, never raised. A mapping is dropped where a buffer's `cuMemFree` would run
//! (`crate::memory`): after the work using its buffers, off any host function.

use std::any::Any;
use std::sync::Arc;

use xstream_core::{
    Capabilities, Device as _, Error, Granularity, Result, ShareableHandle, ShareablePayload,
    VirtualMemory,
};

use crate::ffi;
use crate::{CudaBuffer, CudaDevice};

/// A reserved address range (`cuMemAddressReserve`); `cuMemAddressFree` at drop.
#[derive(Debug)]
pub struct CudaReservation {
    dev: CudaDevice,
    address: u64,
    size: usize,
}

/// Physical device memory (`cuMemCreate`); `cuMemRelease` at drop.
#[derive(Debug)]
pub struct CudaPhysical {
    dev: CudaDevice,
    handle: u64,
}

impl CudaPhysical {
    /// The driver's `CUmemGenericAllocationHandle`.
    pub fn handle(&self) -> u64 {
        self.handle
    }
}

/// A mapping (`cuMemMap`); `cuMemUnmap` at drop.
#[derive(Debug)]
pub struct CudaMapping {
    dev: CudaDevice,
    address: u64,
    size: usize,
}

/// Binds the device's context, then runs a release (a failure is logged). Inside a host
/// callback, where the driver permits no call, the release runs on the dispatcher, holding
/// the device (and so its context) until it ran.
fn released(
    dev: &CudaDevice,
    what: &'static str,
    f: impl FnOnce() -> ffi::CuResult<()> + Send + 'static,
) {
    fn now(ctx: ffi::CuContext, what: &str, f: impl FnOnce() -> ffi::CuResult<()>) {
        if ffi::bind(ctx).is_err() {
            return;
        }
        if let Err(c) = f() {
            tracing::debug!(code = c, "{what} failed");
        }
    }
    let ctx = dev.shared.raw_ctx;
    crate::stream::release_now_or_dispatched(dev, move || now(ctx, what, f));
}

impl Drop for CudaReservation {
    fn drop(&mut self) {
        let (address, size) = (self.address, self.size);
        released(&self.dev, "cuMemAddressFree", move || {
            ffi::mem_address_free(address, size)
        });
    }
}

impl Drop for CudaPhysical {
    fn drop(&mut self) {
        let handle = self.handle;
        released(&self.dev, "cuMemRelease", move || ffi::mem_release(handle));
    }
}

impl Drop for CudaMapping {
    fn drop(&mut self) {
        let (address, size) = (self.address, self.size);
        released(&self.dev, "cuMemUnmap", move || {
            ffi::mem_unmap(address, size)
        });
    }
}

impl VirtualMemory for CudaDevice {
    type Reservation = CudaReservation;
    type Physical = CudaPhysical;
    type Mapping = CudaMapping;

    fn raw_granularity(&self) -> Result<Granularity> {
        let sh = &self.shared;
        sh.enter()?;
        let (minimum, recommended) = ffi::mem_granularity(sh.cu_device)
            .map_err(|c| sh.fail("cuMemGetAllocationGranularity", c))?;
        Ok(Granularity {
            minimum,
            recommended,
        })
    }

    fn raw_reserve(&self, size: usize, align: usize) -> Result<(CudaReservation, u64)> {
        let sh = &self.shared;
        sh.enter()?;
        let address =
            ffi::mem_address_reserve(size, align).map_err(|c| sh.fail("cuMemAddressReserve", c))?;
        Ok((
            CudaReservation {
                dev: self.clone(),
                address,
                size,
            },
            address,
        ))
    }

    fn raw_create(&self, size: usize) -> Result<CudaPhysical> {
        let sh = &self.shared;
        sh.enter()?;
        let shareable = self
            .info()
            .capabilities
            .contains(Capabilities::SHAREABLE_PHYSICAL);
        let handle = ffi::mem_create(sh.cu_device, size, shareable)
            .map_err(|c| sh.fail("cuMemCreate", c))?;
        Ok(CudaPhysical {
            dev: self.clone(),
            handle,
        })
    }

    fn raw_map(
        &self,
        res: &CudaReservation,
        address: u64,
        phys: &CudaPhysical,
        size: usize,
    ) -> Result<CudaMapping> {
        let sh = &self.shared;
        if address < res.address || address + size as u64 > res.address + res.size as u64 {
            return Err(Error::invalid("map: outside the reservation"));
        }
        sh.enter()?;
        ffi::mem_map(address, size, phys.handle).map_err(|c| sh.fail("cuMemMap", c))?;
        Ok(CudaMapping {
            dev: self.clone(),
            address,
            size,
        })
    }

    fn raw_set_access(
        &self,
        _map: &CudaMapping,
        address: u64,
        size: usize,
        peer: &CudaDevice,
    ) -> Result<()> {
        let sh = &self.shared;
        sh.enter()?;
        ffi::mem_set_access(address, size, peer.shared.cu_device)
            .map_err(|c| sh.fail("cuMemSetAccess", c))
    }

    fn raw_export(&self, phys: &CudaPhysical, _size: usize) -> Result<ShareablePayload> {
        let sh = &self.shared;
        sh.enter()?;
        let fd = ffi::mem_export_fd(phys.handle)
            .map_err(|c| sh.fail("cuMemExportToShareableHandle", c))?;
        Ok(ShareablePayload {
            bytes: Vec::new(),
            fd: Some(fd),
        })
    }

    fn raw_import(&self, handle: &ShareableHandle) -> Result<CudaPhysical> {
        let fd = handle.fd().ok_or_else(|| {
            Error::invalid(
                "a CUDA shareable handle needs its file descriptor (receive it with \
                 xstream_cuda::fdpass)",
            )
        })?;
        let sh = &self.shared;
        sh.enter()?;
        let h = ffi::mem_import_fd(fd).map_err(|c| sh.fail("cuMemImportFromShareableHandle", c))?;
        Ok(CudaPhysical {
            dev: self.clone(),
            handle: h,
        })
    }

    fn raw_buffer(
        &self,
        address: u64,
        len: usize,
        keep: Arc<dyn Any + Send + Sync>,
    ) -> Result<CudaBuffer> {
        Ok(CudaBuffer::mapped(self, address, len, keep))
    }
}
