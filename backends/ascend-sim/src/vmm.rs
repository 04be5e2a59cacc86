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
//!
//! Sharing with another process: `aclrtMemExportToShareableHandle`,
//! `aclrtMemSetPidToShareableHandle` and `aclrtMemImportFromShareableHandle`. The `memfd` of
//! physical memory starts with a header page (export state, whether PIDs are checked, the
//! size, the PID whitelist) before its bytes. A shareable handle is the exporter's process id
//! (high 32 bits) and its descriptor of the `memfd` (low 32 bits); an import opens that
//! descriptor through `/proc/<pid>/fd/<fd>` (only the simulator's own `memfd` objects) and
//! maps the same bytes. Checks: the ACL layer's (a NULL handle or out-pointer, a handle type
//! other than `ACL_MEM_HANDLE_TYPE_NONE`, a NULL or empty PID list) are 100000; the simulated
//! driver's (export flags above `ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION`, a handle it
//! does not know or that was imported, an export of another process or not exported, an
//! importing process not on the whitelist, an exporter that is gone) are 107000; with
//! `XSIM_IPC=0` the product has no sharing (207000), as for IPC memory. The exporter's memory
//! freed, its descriptor is closed: later imports fail, imports made keep their bytes.

use crate::codes::*;
use crate::device::cur_ctx;
use crate::error::*;
use crate::ipc_shm::my_pid;
use crate::physmem::{self, header_u32, pwrite_at, Kind, Refused, Space, SpaceError};
use crate::physmem::{H_EXPORTED, H_NO_WLIST, MAX_PIDS};
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

/// This simulator's physical memory objects.
const KIND: Kind = Kind {
    magic: b"XSIMVMMP",
    name: c"xsim-vmm-phys",
};

/// The reservations, mappings and physical memory (handles 1, 2, ...).
fn vmm() -> &'static Mutex<Space> {
    static V: OnceLock<Mutex<Space>> = OnceLock::new();
    V.get_or_init(|| Mutex::new(Space::new(1, 1)))
}

/// The simulated driver's refusal of `e` (107000, or 207001 when the system refuses).
fn space_err(e: SpaceError) -> R {
    let msg = match e {
        SpaceError::NotReserved => "not a reserved address",
        SpaceError::StillMapped => "the range still has mappings",
        SpaceError::UnknownHandle => "unknown physical memory handle",
        SpaceError::OutsideHandle => "unknown handle, or offset + size past it",
        SpaceError::BadMapping => "outside a reservation, unaligned, or over a mapping",
        SpaceError::NotMapped => "no mapping starts there",
        SpaceError::MapFailed => "mmap of physical memory failed",
        SpaceError::UnmapFailed => "mmap of address space failed",
    };
    let code = match e {
        SpaceError::MapFailed | SpaceError::UnmapFailed => ACL_ERROR_RT_MEMORY_ALLOCATION,
        _ => ACL_ERROR_RT_PARAM_INVALID,
    };
    err(code, msg)
}

/// Whether `p` is the start of a virtual memory mapping (so `aclrtFree` refuses it).
pub(crate) fn is_mapping(p: usize) -> bool {
    lock(vmm()).maps.contains_key(&p)
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
        let Some(start) = physmem::reserve_aligned(size, align) else {
            return err(
                ACL_ERROR_RT_MEMORY_ALLOCATION,
                "mmap of address space failed",
            );
        };
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
        let r = lock(vmm()).release_reservation(vir_ptr as usize);
        r.or_else(space_err)
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
        let Some(fd) = physmem::create(&KIND, size, 0) else {
            return err(
                ACL_ERROR_RT_MEMORY_ALLOCATION,
                "memfd_create or ftruncate failed",
            );
        };
        let id = lock(vmm()).insert(fd, size, false);
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
        let r = lock(vmm()).release(handle as usize);
        r.or_else(space_err)
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
        let r = lock(vmm()).map((at, size, offset), handle as usize, GRANULARITY);
        r.or_else(space_err)?;
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
        if let Err(e) = lock(vmm()).unmap(at) {
            return space_err(e);
        }
        crate::memory::unregister_import(at);
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

fn feature() -> R {
    if crate::ipc_shm::ipc_enabled() {
        Ok(())
    } else {
        err(
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
            "the simulated product has no memory sharing (XSIM_IPC=0)",
        )
    }
}

/// This process's export `shareable`: its descriptor, exported.
fn own_export(v: &Space, shareable: u64) -> R<i32> {
    let (pid, fd) = ((shareable >> 32) as i32, shareable as u32 as i32);
    let known = pid == my_pid()
        && v.handles
            .values()
            .any(|p| p.fd == fd && !p.released && !p.imported)
        && header_u32(fd, H_EXPORTED) == Some(1);
    if !known {
        return err(
            ACL_ERROR_RT_PARAM_INVALID,
            "not a shareable handle this process exported",
        );
    }
    Ok(fd)
}

/// `aclError aclrtMemExportToShareableHandle(aclrtDrvMemHandle handle, aclrtMemHandleType
/// handleType, uint64_t flags, uint64_t* shareableHandle)`.
///
/// # Safety
/// `shareable` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemExportToShareableHandle(
    handle: *mut c_void,
    handle_type: u32,
    flags: u64,
    shareable: *mut u64,
) -> i32 {
    ffi("aclrtMemExportToShareableHandle", true, || {
        non_null(handle, "handle")?;
        if handle_type != 0 {
            return err(
                ACL_ERROR_INVALID_PARAM,
                "handleType must be ACL_MEM_HANDLE_TYPE_NONE",
            );
        }
        non_null(shareable, "shareableHandle")?;
        if flags > 1 {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("export flags {flags:#x} out of [0, 1]"),
            );
        }
        feature()?;
        let v = lock(vmm());
        let Some(p) = v.handles.get(&(handle as usize)).filter(|p| !p.released) else {
            return err(ACL_ERROR_RT_PARAM_INVALID, "unknown physical memory handle");
        };
        if p.imported {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                "an imported handle cannot be exported again",
            );
        }
        let no_check = u32::from(flags == 1).to_le_bytes();
        if !pwrite_at(p.fd, H_NO_WLIST, &no_check)
            || !pwrite_at(p.fd, H_EXPORTED, &1u32.to_le_bytes())
        {
            return err(ACL_ERROR_RT_MEMORY_ALLOCATION, "header write failed");
        }
        let h = ((my_pid() as u32 as u64) << 32) | p.fd as u32 as u64;
        // SAFETY: checked non-NULL; caller contract.
        unsafe { put(shareable, h) }
    })
}

/// `aclError aclrtMemSetPidToShareableHandle(uint64_t shareableHandle, int32_t* pid, size_t
/// pidNum)`: adds to the whitelist of this process's export.
///
/// # Safety
/// `pid` must be NULL or valid for `pid_num` reads.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemSetPidToShareableHandle(
    shareable: u64,
    pid: *mut i32,
    pid_num: usize,
) -> i32 {
    ffi("aclrtMemSetPidToShareableHandle", true, || {
        non_null(pid, "pid")?;
        if pid_num == 0 {
            return err(ACL_ERROR_INVALID_PARAM, "pidNum is 0");
        }
        feature()?;
        let v = lock(vmm());
        let fd = own_export(&v, shareable)?;
        // SAFETY: caller contract: `pid_num` readable PIDs.
        let list = unsafe { std::slice::from_raw_parts(pid, pid_num) };
        match physmem::add_pids(fd, list) {
            Ok(()) => Ok(()),
            Err(Refused::TooManyPids) => err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("more than {MAX_PIDS} PIDs on one whitelist"),
            ),
            Err(_) => err(ACL_ERROR_RT_MEMORY_ALLOCATION, "header write failed"),
        }
    })
}

/// `aclError aclrtMemImportFromShareableHandle(uint64_t shareableHandle, int32_t deviceId,
/// aclrtDrvMemHandle* handle)`.
///
/// # Safety
/// `handle` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemImportFromShareableHandle(
    shareable: u64,
    device_id: i32,
    handle: *mut *mut c_void,
) -> i32 {
    ffi("aclrtMemImportFromShareableHandle", true, || {
        non_null(handle, "handle")?;
        crate::device::check_device(device_id)?;
        feature()?;
        cur_ctx()?;
        if (shareable >> 32) as i32 == my_pid() {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                "the shareable handle was exported by this process",
            );
        }
        let (my, hdr) = match physmem::open_export(&KIND, shareable) {
            Ok(opened) => opened,
            Err(Refused::NotExported) => {
                return err(
                    ACL_ERROR_RT_PARAM_INVALID,
                    format!("shareable handle {shareable:#x} is not exported"),
                )
            }
            Err(_) => {
                return err(
                    ACL_ERROR_RT_PARAM_INVALID,
                    format!("shareable handle {shareable:#x}: the exporter or its memory is gone"),
                )
            }
        };
        let me = my_pid();
        let size = physmem::size_of(&hdr).filter(|_| physmem::admits(my, &hdr, me));
        let Some(size) = size else {
            physmem::close_fd(my);
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!(
                    "process {me} is not on the whitelist of shareable handle {shareable:#x} \
                     (aclrtMemSetPidToShareableHandle)"
                ),
            );
        };
        let id = lock(vmm()).insert(my, size, true);
        // SAFETY: checked non-NULL; caller contract.
        unsafe { put(handle, id as *mut c_void) }
    })
}
