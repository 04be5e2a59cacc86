//! Virtual memory management: granularity, reservations, physical handles, mappings and
//! access.

use super::*;

/// The granularity of the virtual memory functions (minimum and recommended).
const VMM_GRANULARITY: usize = 2 << 20;
const ALREADY_MAPPED: u32 = 208;
const NOT_MAPPED: u32 = 211;

/// Reservations (base -> (size, alignment)), physical handles (handle -> (size, live mappings, released))
/// and mappings (address -> (size, handle)). A reservation is zeroed heap memory; a mapping
/// makes its part of that memory device memory (copies and memsets accept it). Mapping one
/// handle twice does not alias the two ranges (no `mmap` here: a counting double).
#[derive(Default)]
struct Vmm {
    reserved: std::collections::BTreeMap<u64, (usize, usize)>,
    handles: std::collections::HashMap<u64, (usize, usize, bool)>,
    maps: std::collections::BTreeMap<u64, (usize, u64)>,
    next: u64,
}

fn vmm() -> std::sync::MutexGuard<'static, Vmm> {
    static V: std::sync::OnceLock<std::sync::Mutex<Vmm>> = std::sync::OnceLock::new();
    V.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// `cuMemGetAllocationGranularity`: 2 MiB for both options.
#[no_mangle]
pub extern "C" fn cuMemGetAllocationGranularity(
    g: *mut usize,
    prop: *const c_void,
    option: u32,
) -> CUresult {
    run(F::cuMemGetAllocationGranularity, || {
        if prop.is_null() || option > 1 {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's out-pointer.
        unsafe { put(g, VMM_GRANULARITY) }
    })
}

/// `cuMemAddressReserve`: zeroed heap memory aligned to the granularity (a fixed address
/// is not honoured, as the driver may do).
#[no_mangle]
pub extern "C" fn cuMemAddressReserve(
    out: *mut CUdeviceptr,
    size: usize,
    align: usize,
    _addr: CUdeviceptr,
    flags: u64,
) -> CUresult {
    run(F::cuMemAddressReserve, || {
        current()?;
        if out.is_null() || size == 0 || !size.is_multiple_of(VMM_GRANULARITY) || flags != 0 {
            return Err(INVALID_VALUE);
        }
        let align = align.max(VMM_GRANULARITY);
        let layout = Layout::from_size_align(size, align).map_err(|_| INVALID_VALUE)?;
        // SAFETY: `layout` has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        if p.is_null() {
            return Err(OUT_OF_MEMORY);
        }
        vmm().reserved.insert(p as u64, (size, align));
        // SAFETY: the caller's out-pointer.
        unsafe { put(out, p as u64) }
    })
}

/// `cuMemAddressFree`: a whole reservation with nothing mapped in it.
#[no_mangle]
pub extern "C" fn cuMemAddressFree(p: CUdeviceptr, size: usize) -> CUresult {
    run(F::cuMemAddressFree, || {
        let mut v = vmm();
        let align = match v.reserved.get(&p) {
            Some(&(n, a)) if n == size => a,
            _ => return Err(INVALID_VALUE),
        };
        let end = p + size as u64;
        if v.maps.range(p..end).next().is_some() {
            return Err(INVALID_VALUE);
        }
        v.reserved.remove(&p);
        drop(v);
        let layout = Layout::from_size_align(size, align).map_err(|_| UNKNOWN)?;
        // SAFETY: reserved by `cuMemAddressReserve` with this size and alignment; removed from
        // the table, so freed once.
        unsafe { std::alloc::dealloc(p as *mut u8, layout) };
        Ok(())
    })
}

/// `cuMemCreate`: a handle of `size` bytes (no memory of its own).
#[no_mangle]
pub extern "C" fn cuMemCreate(
    h: *mut u64,
    size: usize,
    prop: *const c_void,
    flags: u64,
) -> CUresult {
    run(F::cuMemCreate, || {
        current()?;
        if prop.is_null() || size == 0 || !size.is_multiple_of(VMM_GRANULARITY) || flags != 0 {
            return Err(INVALID_VALUE);
        }
        let mut v = vmm();
        v.next += 1;
        let id = v.next;
        v.handles.insert(id, (size, 0, false));
        drop(v);
        // SAFETY: the caller's out-pointer.
        unsafe { put(h, id) }
    })
}

/// `cuMemRelease`: the handle goes after its last mapping.
#[no_mangle]
pub extern "C" fn cuMemRelease(h: u64) -> CUresult {
    run(F::cuMemRelease, || {
        let mut v = vmm();
        let e = v.handles.get_mut(&h).ok_or(INVALID_VALUE)?;
        if e.2 {
            return Err(INVALID_VALUE);
        }
        e.2 = true;
        if e.1 == 0 {
            v.handles.remove(&h);
        }
        Ok(())
    })
}

/// `cuMemMap`: the whole handle (offset 0) inside one reservation, where nothing is mapped.
#[no_mangle]
pub extern "C" fn cuMemMap(
    p: CUdeviceptr,
    size: usize,
    offset: usize,
    h: u64,
    flags: u64,
) -> CUresult {
    run(F::cuMemMap, || {
        let mut v = vmm();
        if offset != 0 || flags != 0 {
            return Err(INVALID_VALUE);
        }
        match v.handles.get(&h) {
            Some(&(n, _, false)) if n == size => {}
            _ => return Err(INVALID_VALUE),
        }
        let end = p.checked_add(size as u64).ok_or(INVALID_VALUE)?;
        let (&base, &(len, _)) = v.reserved.range(..=p).next_back().ok_or(INVALID_VALUE)?;
        if end > base + len as u64 {
            return Err(INVALID_VALUE);
        }
        let before = v.maps.range(..end).next_back();
        if before.is_some_and(|(&a, &(n, _))| a + n as u64 > p) {
            return Err(ALREADY_MAPPED);
        }
        v.maps.insert(p, (size, h));
        if let Some(e) = v.handles.get_mut(&h) {
            e.1 += 1;
        }
        state::device_mem().insert(p, size);
        Ok(())
    })
}

/// `cuMemUnmap`: exactly one mapping.
#[no_mangle]
pub extern "C" fn cuMemUnmap(p: CUdeviceptr, size: usize) -> CUresult {
    run(F::cuMemUnmap, || {
        let mut v = vmm();
        match v.maps.get(&p) {
            Some(&(n, _)) if n == size => {}
            _ => return Err(NOT_MAPPED),
        }
        let (_, h) = v.maps.remove(&p).ok_or(NOT_MAPPED)?;
        state::device_mem().remove(p);
        let gone = v.handles.get_mut(&h).is_some_and(|e| {
            e.1 -= 1;
            e.1 == 0 && e.2
        });
        if gone {
            v.handles.remove(&h);
        }
        Ok(())
    })
}

/// `cuMemSetAccess`: one or more descriptors over mapped bytes (the access is not modelled).
#[no_mangle]
pub extern "C" fn cuMemSetAccess(
    p: CUdeviceptr,
    size: usize,
    desc: *const c_void,
    count: usize,
) -> CUresult {
    run(F::cuMemSetAccess, || {
        if desc.is_null() || count == 0 || size == 0 {
            return Err(INVALID_VALUE);
        }
        let v = vmm();
        let (&a, &(n, _)) = v.maps.range(..=p).next_back().ok_or(NOT_MAPPED)?;
        if p + size as u64 > a + n as u64 {
            return Err(NOT_MAPPED);
        }
        Ok(())
    })
}
