//! Virtual memory: `aclrtMemGetAllocationGranularity`, `aclrtReserveMemAddress` /
//! `aclrtReleaseMemAddress`, `aclrtMallocPhysical` / `aclrtFreePhysical`, `aclrtMapMem` /
//! `aclrtUnmapMem` and `aclrtMemSetAccess`, with the prototypes of the public `acl_rt.h`
//! (`hicann/runtime`, `include/external/acl/acl_rt.h`).
//!
//! A reservation is an inaccessible anonymous mapping (`PROT_NONE`); physical memory is a
//! `memfd` of its size; `aclrtMapMem` maps the `memfd` over the reservation (`MAP_FIXED`,
//! shared), so one handle mapped twice shows the same bytes at both addresses; `aclrtUnmapMem`
//! puts the inaccessible mapping back. A mapped range counts as device memory of the current
//! context's device (copies, memsets and kernels accept it; `aclrtFree` refuses it).
//!
//! Checks: the ACL layer's (`src/acl/aclrt_impl/memory.cpp`: NULL pointers, a zero size,
//! `flags` other than 0 (reserve: 0 or 1), a property other than a device pinned allocation
//! without handle type) are 100000; the simulated driver's (a size or offset not a multiple of
//! the granularity, a mapping outside a reservation or over another mapping, an unknown
//! pointer or handle, a release with live mappings) are 107000. Freeing physical memory that
//! is still mapped is allowed: it goes with its last mapping.

use crate::codes::*;
use crate::device::cur_ctx;
use crate::error::*;
use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};

/// The granularity, minimum and recommended (2 MiB, the huge page).
pub const GRANULARITY: usize = 2 << 20;

/// `aclrtPhysicalMemProp`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PhysicalMemProp {
    /// `aclrtMemHandleType`.
    pub handle_type: u32,
    /// `aclrtMemAllocationType`.
    pub allocation_type: u32,
    /// `aclrtMemAttr`.
    pub mem_attr: u32,
    /// `aclrtMemLocation.id`.
    pub location_id: u32,
    /// `aclrtMemLocation.type`.
    pub location_type: u32,
    /// `reserve`.
    pub reserve: u64,
}

/// `aclrtMemAccessDesc`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemAccessDesc {
    /// `aclrtMemAccessFlags`.
    pub flags: u32,
    /// `aclrtMemLocation.id`.
    pub location_id: u32,
    /// `aclrtMemLocation.type`.
    pub location_type: u32,
    /// `rsv`.
    pub rsv: [u8; 12],
}

struct Phys {
    fd: i32,
    size: usize,
    maps: usize,
    freed: bool,
}

#[derive(Default)]
struct Vmm {
    /// Reservations: start -> size.
    reserved: BTreeMap<usize, usize>,
    /// Mappings: start -> (size, handle).
    maps: BTreeMap<usize, (usize, usize)>,
    handles: HashMap<usize, Phys>,
    next: usize,
}

fn vmm() -> &'static Mutex<Vmm> {
    static V: OnceLock<Mutex<Vmm>> = OnceLock::new();
    V.get_or_init(Default::default)
}

/// Whether `p` is the start of a virtual memory mapping (so `aclrtFree` refuses it).
pub(crate) fn is_mapping(p: usize) -> bool {
    lock(vmm()).maps.contains_key(&p)
}

fn inaccessible(at: *mut c_void, size: usize, fixed: bool) -> R<usize> {
    let flags = libc::MAP_PRIVATE
        | libc::MAP_ANONYMOUS
        | libc::MAP_NORESERVE
        | if fixed { libc::MAP_FIXED } else { 0 };
    // SAFETY: an anonymous mapping; with MAP_FIXED only over a range of a reservation of ours.
    let p = unsafe { libc::mmap(at, size, libc::PROT_NONE, flags, -1, 0) };
    if p == libc::MAP_FAILED {
        return err(
            ACL_ERROR_RT_MEMORY_ALLOCATION,
            "mmap of address space failed",
        );
    }
    Ok(p as usize)
}

fn close_phys(p: &Phys) {
    // SAFETY: our descriptor, closed once (the handle is removed with it).
    unsafe { libc::close(p.fd) };
}

fn check_prop(prop: *const PhysicalMemProp) -> R {
    non_null(prop, "prop")?;
    // SAFETY: checked non-NULL; the caller's struct.
    let p = unsafe { *prop };
    if p.handle_type != 0 || p.allocation_type != 0 {
        return err(
            ACL_ERROR_INVALID_PARAM,
            "prop: handle type NONE and allocation type PINNED only",
        );
    }
    if matches!(p.location_type, 2 | 3) {
        return err(ACL_ERROR_INVALID_PARAM, "prop: location type not supported");
    }
    Ok(())
}

/// `aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp* prop,
/// aclrtMemGranularityOptions option, size_t* granularity)`: 2 MiB for both options.
///
/// # Safety
/// `prop` and `granularity` must be NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemGetAllocationGranularity(
    prop: *mut PhysicalMemProp,
    option: u32,
    granularity: *mut usize,
) -> i32 {
    ffi("aclrtMemGetAllocationGranularity", true, || {
        non_null(prop, "prop")?;
        non_null(granularity, "granularity")?;
        if option > 1 {
            return err(ACL_ERROR_INVALID_PARAM, "option");
        }
        // SAFETY: checked non-NULL; caller contract.
        unsafe { put(granularity, GRANULARITY) }
    })
}

/// `aclError aclrtReserveMemAddress(void** virPtr, size_t size, size_t alignment,
/// void* expectPtr, uint64_t flags)`.
///
/// # Safety
/// `vir_ptr` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtReserveMemAddress(
    vir_ptr: *mut *mut c_void,
    size: usize,
    alignment: usize,
    expect_ptr: *mut c_void,
    flags: u64,
) -> i32 {
    ffi("aclrtReserveMemAddress", true, || {
        non_null(vir_ptr, "virPtr")?;
        if size == 0 {
            return err(ACL_ERROR_INVALID_PARAM, "size is 0");
        }
        if flags > 1 {
            return err(ACL_ERROR_INVALID_PARAM, "flags must be 0");
        }
        if !expect_ptr.is_null() || !size.is_multiple_of(GRANULARITY) {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                "size not a multiple of the granularity, or a fixed address asked for",
            );
        }
        let align = alignment.max(GRANULARITY);
        if !align.is_power_of_two() {
            return err(ACL_ERROR_RT_PARAM_INVALID, "alignment not a power of two");
        }
        cur_ctx()?;
        // Over-reserve, then give back the unaligned head and the tail.
        let total = size + align;
        let raw = inaccessible(std::ptr::null_mut(), total, false)?;
        let start = raw.next_multiple_of(align);
        // SAFETY: both ranges lie in the mapping just made and nobody else uses them.
        unsafe {
            if start > raw {
                libc::munmap(raw as *mut c_void, start - raw);
            }
            let end = start + size;
            if raw + total > end {
                libc::munmap(end as *mut c_void, raw + total - end);
            }
        }
        lock(vmm()).reserved.insert(start, size);
        // SAFETY: checked non-NULL; caller contract.
        unsafe { put(vir_ptr, start as *mut c_void) }
    })
}

/// `aclError aclrtReleaseMemAddress(void* virPtr)`: a whole reservation with nothing mapped.
///
/// # Safety
/// No memory is read through `vir_ptr`.
#[no_mangle]
pub unsafe extern "C" fn aclrtReleaseMemAddress(vir_ptr: *mut c_void) -> i32 {
    ffi("aclrtReleaseMemAddress", true, || {
        non_null(vir_ptr, "virPtr")?;
        let p = vir_ptr as usize;
        let mut v = lock(vmm());
        let Some(&size) = v.reserved.get(&p) else {
            return err(ACL_ERROR_RT_PARAM_INVALID, "not a reserved address");
        };
        if v.maps.range(p..p + size).next().is_some() {
            return err(ACL_ERROR_RT_PARAM_INVALID, "the range still has mappings");
        }
        v.reserved.remove(&p);
        // SAFETY: the whole reservation, unmapped once (removed from the table).
        unsafe { libc::munmap(vir_ptr, size) };
        Ok(())
    })
}

/// `aclError aclrtMallocPhysical(aclrtDrvMemHandle* handle, size_t size,
/// const aclrtPhysicalMemProp* prop, uint64_t flags)`.
///
/// # Safety
/// `handle` and `prop` must be NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn aclrtMallocPhysical(
    handle: *mut *mut c_void,
    size: usize,
    prop: *const PhysicalMemProp,
    flags: u64,
) -> i32 {
    ffi("aclrtMallocPhysical", true, || {
        non_null(handle, "handle")?;
        check_prop(prop)?;
        if size == 0 {
            return err(ACL_ERROR_INVALID_PARAM, "size is 0");
        }
        if flags != 0 {
            return err(ACL_ERROR_INVALID_PARAM, "flags must be 0");
        }
        if !size.is_multiple_of(GRANULARITY) {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                "size not a multiple of the granularity",
            );
        }
        cur_ctx()?;
        // SAFETY: a static NUL-terminated name.
        let fd = unsafe { libc::memfd_create(c"xsim-vmm".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return err(ACL_ERROR_RT_MEMORY_ALLOCATION, "memfd_create failed");
        }
        // SAFETY: fd is ours.
        if unsafe { libc::ftruncate(fd, size as libc::off_t) } != 0 {
            // SAFETY: fd is ours, closed once.
            unsafe { libc::close(fd) };
            return err(ACL_ERROR_RT_MEMORY_ALLOCATION, "ftruncate failed");
        }
        let mut v = lock(vmm());
        v.next += 1;
        let id = v.next;
        v.handles.insert(
            id,
            Phys {
                fd,
                size,
                maps: 0,
                freed: false,
            },
        );
        // SAFETY: checked non-NULL; caller contract.
        unsafe { put(handle, id as *mut c_void) }
    })
}

/// `aclError aclrtFreePhysical(aclrtDrvMemHandle handle)`: the memory goes after its last
/// mapping.
///
/// # Safety
/// `handle` is only compared.
#[no_mangle]
pub unsafe extern "C" fn aclrtFreePhysical(handle: *mut c_void) -> i32 {
    ffi("aclrtFreePhysical", true, || {
        non_null(handle, "handle")?;
        let mut v = lock(vmm());
        let id = handle as usize;
        let Some(p) = v.handles.get_mut(&id).filter(|p| !p.freed) else {
            return err(ACL_ERROR_RT_PARAM_INVALID, "unknown physical memory handle");
        };
        p.freed = true;
        if p.maps == 0 {
            if let Some(p) = v.handles.remove(&id) {
                close_phys(&p);
            }
        }
        Ok(())
    })
}

/// `aclError aclrtMapMem(void* virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
/// uint64_t flags)`.
///
/// # Safety
/// `vir_ptr` must lie in a reservation of this simulator (checked).
#[no_mangle]
pub unsafe extern "C" fn aclrtMapMem(
    vir_ptr: *mut c_void,
    size: usize,
    offset: usize,
    handle: *mut c_void,
    flags: u64,
) -> i32 {
    ffi("aclrtMapMem", true, || {
        non_null(vir_ptr, "virPtr")?;
        non_null(handle, "handle")?;
        if size == 0 {
            return err(ACL_ERROR_INVALID_PARAM, "size is 0");
        }
        if flags != 0 {
            return err(ACL_ERROR_INVALID_PARAM, "flags must be 0");
        }
        let ctx = cur_ctx()?;
        let at = vir_ptr as usize;
        let mut v = lock(vmm());
        let id = handle as usize;
        let Some(fd) = v
            .handles
            .get(&id)
            .filter(|p| !p.freed && offset.checked_add(size).is_some_and(|e| e <= p.size))
            .map(|p| p.fd)
        else {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                "unknown handle, or offset + size past it",
            );
        };
        let inside = v
            .reserved
            .range(..=at)
            .next_back()
            .is_some_and(|(&s, &n)| at + size <= s + n);
        let aligned = at.is_multiple_of(GRANULARITY)
            && size.is_multiple_of(GRANULARITY)
            && offset.is_multiple_of(GRANULARITY);
        let overlaps = v
            .maps
            .range(..at + size)
            .next_back()
            .is_some_and(|(&s, &(n, _))| s + n > at);
        if !inside || !aligned || overlaps {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                "outside a reservation, unaligned, or over a mapping",
            );
        }
        // SAFETY: `at..at + size` lies in a reservation of ours where nothing is mapped; the
        // descriptor is live.
        let p = unsafe {
            libc::mmap(
                vir_ptr,
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                fd,
                offset as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return err(
                ACL_ERROR_RT_MEMORY_ALLOCATION,
                "mmap of physical memory failed",
            );
        }
        v.maps.insert(at, (size, id));
        if let Some(p) = v.handles.get_mut(&id) {
            p.maps += 1;
        }
        crate::memory::register_import(at, size, ctx.device);
        Ok(())
    })
}

/// `aclError aclrtUnmapMem(void* virPtr)`: the mapping starting at `virPtr`.
///
/// # Safety
/// No work may use the mapping any more.
#[no_mangle]
pub unsafe extern "C" fn aclrtUnmapMem(vir_ptr: *mut c_void) -> i32 {
    ffi("aclrtUnmapMem", true, || {
        non_null(vir_ptr, "virPtr")?;
        let at = vir_ptr as usize;
        let mut v = lock(vmm());
        let Some((size, id)) = v.maps.remove(&at) else {
            return err(ACL_ERROR_RT_PARAM_INVALID, "no mapping starts there");
        };
        crate::memory::unregister_import(at);
        inaccessible(vir_ptr, size, true)?;
        let gone = v.handles.get_mut(&id).is_some_and(|p| {
            p.maps -= 1;
            p.maps == 0 && p.freed
        });
        if gone {
            if let Some(p) = v.handles.remove(&id) {
                close_phys(&p);
            }
        }
        Ok(())
    })
}

/// `aclError aclrtMemSetAccess(void* virPtr, size_t size, aclrtMemAccessDesc* desc,
/// size_t count)`: checked over mapped bytes; the access itself is not modelled.
///
/// # Safety
/// `desc` must be NULL or valid for `count` descriptors.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemSetAccess(
    vir_ptr: *mut c_void,
    size: usize,
    desc: *mut MemAccessDesc,
    count: usize,
) -> i32 {
    ffi("aclrtMemSetAccess", true, || {
        non_null(vir_ptr, "virPtr")?;
        non_null(desc, "desc")?;
        if size == 0 || count == 0 {
            return err(ACL_ERROR_RT_PARAM_INVALID, "size or count is 0");
        }
        let at = vir_ptr as usize;
        let v = lock(vmm());
        // Every byte mapped (adjacent mappings may be covered together).
        let mut next = at;
        for (&s, &(n, _)) in v.maps.range(..at + size) {
            if s + n <= next {
                continue;
            }
            if s > next {
                break;
            }
            next = s + n;
        }
        if next < at + size {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                "a byte of the range is not mapped",
            );
        }
        Ok(())
    })
}
