//! Virtual memory (issue 28): mapping a 2 MiB chunk of physical memory into a reserved range
//! and granting access, then unmapping it (`VirtualRange::map` + `set_access` + `unmap`),
//! against `cuMemMap` + `cuMemSetAccess` + `cuMemUnmap` on the raw driver in the same run. The
//! issue's target is map + set access within 2% of raw; the unmap is in both cycles so that
//! the batch can repeat. Skipped (no row) on a device without `VIRTUAL_MEMORY`.

use super::*;
use xstream_core::{Capabilities, VirtualMemory};

/// Cycles per batch.
const CYCLES: u64 = 400;
/// Interleaved repeats of this row: the target (2% of ~43 µs, under 1 µs) is closer than the
/// p10–p90 spread of [`REPS`] repeats of 200 cycles on an H100 (runs 23 and 24), so this row
/// takes three times the repeats of twice the cycles, keeping the interleaving.
const VMM_REPS: usize = 21;

/// The row, or `None` (with a note on stderr) where the device has no virtual memory.
pub(crate) fn map_row(dev: &CudaDevice) -> BenchResult<Option<Row>> {
    let info = xstream_core::Device::info(dev);
    if !info.capabilities.contains(Capabilities::VIRTUAL_MEMORY) {
        eprintln!("gpu_ops: no virtual-memory row (the device lacks VIRTUAL_MEMORY)");
        return Ok(None);
    }
    let g = dev.granularity().map_err(|e| e.to_string())?.minimum;
    let chunk = (2usize << 20).next_multiple_of(g);
    let range = dev.reserve(chunk).map_err(|e| e.to_string())?;
    let phys = dev.create_physical(chunk).map_err(|e| e.to_string())?;
    let ordinal = i32::try_from(info.ordinal).map_err(|e| e.to_string())?;
    // The raw side: its own reservation and handle, the same properties as xstream's.
    // SAFETY: a plain C struct: all zeros is a valid value, the fields below are set.
    let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal;
    let (mut h, mut va) = (0u64, 0u64);
    // SAFETY: valid out-pointers and property; the context is current.
    ck(
        unsafe { sys::cuMemCreate(&mut h, chunk, &prop, 0) },
        "cuMemCreate",
    );
    // SAFETY: as above.
    ck(
        unsafe { sys::cuMemAddressReserve(&mut va, chunk, g, 0, 0) },
        "cuMemAddressReserve",
    );
    let desc = sys::CUmemAccessDesc {
        location: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: ordinal,
        },
        flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    let row = compare_reps(
        "vmm: map + set_access + unmap of a 2 MiB chunk",
        CYCLES,
        VMM_REPS,
        Target::OverheadPct(2.0),
        Some(Box::new(|n| {
            timed(n, || {
                range.map(0, &phys).expect("map");
                range.set_access(0, chunk, dev).expect("set_access");
                range.unmap(0).expect("unmap");
            })
        })),
        Some(Box::new(|n| {
            timed(n, || {
                // SAFETY: `va..va + chunk` is this bench's reservation, unmapped between
                // iterations; `h` is a live handle of `chunk` bytes; one valid descriptor.
                unsafe {
                    ck(sys::cuMemMap(va, chunk, 0, h, 0), "cuMemMap");
                    ck(sys::cuMemSetAccess(va, chunk, &desc, 1), "cuMemSetAccess");
                    ck(sys::cuMemUnmap(va, chunk), "cuMemUnmap");
                }
            })
        })),
        None,
    );
    // SAFETY: nothing is mapped in the reservation; the handle is released once.
    unsafe {
        ck(sys::cuMemAddressFree(va, chunk), "cuMemAddressFree");
        ck(sys::cuMemRelease(h), "cuMemRelease");
    }
    Ok(Some(row))
}
