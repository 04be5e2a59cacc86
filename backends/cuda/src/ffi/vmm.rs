//! Virtual memory management: granularity, address reservation, physical allocations,
//! mapping and access (`cuMemGetAllocationGranularity`, `cuMemAddressReserve` /
//! `cuMemAddressFree`, `cuMemCreate` / `cuMemRelease`, `cuMemMap` / `cuMemUnmap`,
//! `cuMemSetAccess`), and sharing physical memory through POSIX file descriptors
//! (`cuMemExportToShareableHandle` / `cuMemImportFromShareableHandle`).

use cudarc::driver::sys;

use super::{ok, CuResult};

/// Pinned device memory on device `dev` (`CUmemAllocationProp`), exportable as a POSIX file
/// descriptor when `shareable`.
fn device_prop(dev: sys::CUdevice, shareable: bool) -> sys::CUmemAllocationProp {
    // SAFETY: a plain C struct of integers and a null-able pointer: all zeros is valid (the
    // driver reads zero as "no handle type, no flags").
    let mut p: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    p.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev;
    if shareable {
        p.requestedHandleTypes =
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    }
    p
}

/// `cuMemGetAllocationGranularity`: (minimum, recommended).
pub(crate) fn mem_granularity(dev: sys::CUdevice) -> CuResult<(usize, usize)> {
    let prop = device_prop(dev, false);
    let (mut min, mut rec) = (0usize, 0usize);
    // SAFETY: valid out-pointer and property struct.
    ok(unsafe {
        sys::cuMemGetAllocationGranularity(
            &mut min,
            &prop,
            sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
        )
    })?;
    // SAFETY: as above.
    ok(unsafe {
        sys::cuMemGetAllocationGranularity(
            &mut rec,
            &prop,
            sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
        )
    })?;
    Ok((min, rec))
}

/// `cuMemAddressReserve` anywhere.
pub(crate) fn mem_address_reserve(size: usize, align: usize) -> CuResult<u64> {
    let mut p = 0;
    // SAFETY: valid out-pointer; context bound.
    ok(unsafe { sys::cuMemAddressReserve(&mut p, size, align, 0, 0) })?;
    Ok(p)
}

/// `cuMemAddressFree`.
pub(crate) fn mem_address_free(p: u64, size: usize) -> CuResult<()> {
    // SAFETY: a range this crate reserved, with nothing mapped in it any more.
    ok(unsafe { sys::cuMemAddressFree(p, size) })
}

/// `cuMemCreate` of pinned memory on `dev` (exportable as a file descriptor when
/// `shareable`).
pub(crate) fn mem_create(dev: sys::CUdevice, size: usize, shareable: bool) -> CuResult<u64> {
    let prop = device_prop(dev, shareable);
    let mut h = 0;
    // SAFETY: valid out-pointer and property struct.
    ok(unsafe { sys::cuMemCreate(&mut h, size, &prop, 0) })?;
    Ok(h)
}

/// `cuMemRelease`.
pub(crate) fn mem_release(h: u64) -> CuResult<()> {
    // SAFETY: a handle this crate created and releases once.
    ok(unsafe { sys::cuMemRelease(h) })
}

/// `cuMemMap` of the whole handle at `p`.
pub(crate) fn mem_map(p: u64, size: usize, h: u64) -> CuResult<()> {
    // SAFETY: `p..p + size` lies in a reservation of this crate where nothing is mapped.
    ok(unsafe { sys::cuMemMap(p, size, 0, h, 0) })
}

/// `cuMemUnmap`.
pub(crate) fn mem_unmap(p: u64, size: usize) -> CuResult<()> {
    // SAFETY: a mapping this crate made, unmapped once, that no work uses any more.
    ok(unsafe { sys::cuMemUnmap(p, size) })
}

/// `cuMemSetAccess`: read and write for device `dev`.
pub(crate) fn mem_set_access(p: u64, size: usize, dev: sys::CUdevice) -> CuResult<()> {
    let desc = sys::CUmemAccessDesc {
        location: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: dev,
        },
        flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: one valid descriptor; `p..p + size` is mapped.
    ok(unsafe { sys::cuMemSetAccess(p, size, &desc, 1) })
}

/// `cuMemExportToShareableHandle` as a POSIX file descriptor (owned by the caller).
pub(crate) fn mem_export_fd(h: u64) -> CuResult<std::os::fd::OwnedFd> {
    let mut fd: std::ffi::c_int = -1;
    // SAFETY: for the POSIX handle type the driver writes an `int` through the pointer; `h`
    // is a live handle created with that type.
    ok(unsafe {
        sys::cuMemExportToShareableHandle(
            (&mut fd as *mut std::ffi::c_int).cast(),
            h,
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            0,
        )
    })?;
    if fd < 0 {
        return Err(sys::CUresult::CUDA_ERROR_INVALID_VALUE as u32);
    }
    use std::os::fd::FromRawFd;
    // SAFETY: a descriptor the driver just opened for this process and gave to the caller.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// `cuMemImportFromShareableHandle` of a POSIX file descriptor (which stays the caller's).
pub(crate) fn mem_import_fd(fd: std::os::fd::BorrowedFd<'_>) -> CuResult<u64> {
    use std::os::fd::AsRawFd;
    let mut h = 0;
    // SAFETY: valid out-pointer; for the POSIX handle type the descriptor is passed as the
    // pointer's value, and it is open while the call runs (borrowed).
    ok(unsafe {
        sys::cuMemImportFromShareableHandle(
            &mut h,
            fd.as_raw_fd() as isize as *mut std::ffi::c_void,
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
        )
    })?;
    Ok(h)
}
