//! Virtual memory management: granularity, address reservation, physical allocations,
//! mapping and access (`cuMemGetAllocationGranularity`, `cuMemAddressReserve` /
//! `cuMemAddressFree`, `cuMemCreate` / `cuMemRelease`, `cuMemMap` / `cuMemUnmap`,
//! `cuMemSetAccess`).

use cudarc::driver::sys;

use super::{ok, CuResult};

/// Pinned device memory on device `dev` (`CUmemAllocationProp`).
fn device_prop(dev: sys::CUdevice) -> sys::CUmemAllocationProp {
    // SAFETY: a plain C struct of integers and a null-able pointer: all zeros is valid (the
    // driver reads zero as "no handle type, no flags").
    let mut p: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    p.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev;
    p
}

/// `cuMemGetAllocationGranularity`: (minimum, recommended).
pub(crate) fn mem_granularity(dev: sys::CUdevice) -> CuResult<(usize, usize)> {
    let prop = device_prop(dev);
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

/// `cuMemCreate` of pinned memory on `dev`.
pub(crate) fn mem_create(dev: sys::CUdevice, size: usize) -> CuResult<u64> {
    let prop = device_prop(dev);
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
