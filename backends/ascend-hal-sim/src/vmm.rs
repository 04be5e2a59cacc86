//! Virtual memory: the driver calls behind the ACL functions `aclrtMemGetAllocationGranularity`,
//! `aclrtReserveMemAddress` / `aclrtReleaseMemAddress`, `aclrtMallocPhysical` /
//! `aclrtFreePhysical`, `aclrtMapMem` / `aclrtUnmapMem` and `aclrtMemSetAccess`
//! (`halMemGetAllocationGranularity`, `halMemAddressReserve` / `halMemAddressFree`,
//! `halMemCreate` / `halMemRelease`, `halMemMap` / `halMemUnmap`, `halMemSetAccess`), with the
//! prototypes of `pkg_inc/driver/ascend_hal_base.h`.
//!
//! A reservation is an inaccessible anonymous mapping (`PROT_NONE`) of the process; physical
//! memory is a `memfd` of its size, and the `drv_mem_handle_t *` handed out is an opaque token
//! (never dereferenced by the runtime) naming it; `halMemMap` maps the `memfd` over the
//! reservation (`MAP_FIXED`, shared), so one handle mapped twice shows the same bytes at both
//! addresses, and enters the range in [`memory`]'s table, so that the copies, memsets and
//! queue entries that look device addresses up accept it; `halMemUnmap` takes it out and puts
//! the inaccessible mapping back. Physical memory released while mapped goes with its last
//! mapping.
//!
//! Rules (the header's, and those of the runtime's ACL simulator twin, `ascend-sim`'s `vmm`):
//! sizes, addresses and the reservation alignment are multiples of the 2 MiB granularity; a
//! mapping lies inside one reservation, over no other mapping, at offset 0 of its handle
//! ("currently unused, must be zero") and no longer than it; `halMemCreate` and `halMemMap`
//! take flag 0; `halMemSetAccess` names exactly one mapping (the header: "ptr and size must be
//! same with halMemMap") and at least one valid location; a reservation is freed whole and
//! without mappings. Any breach answers `DRV_ERROR_INVALID_VALUE`. Host NUMA physical memory
//! (`side` 2) is not emulated (`DRV_ERROR_NOT_SUPPORT`). Access rights are checked for shape,
//! not modelled: every mapping is readable and writable.
//!
//! Sharing with another process (`aclrtMemExportToShareableHandle`,
//! `aclrtMemSetPidToShareableHandle`, `aclrtMemImportFromShareableHandle`:
//! `halMemExportToShareableHandle`, `halMemSetPidToShareableHandle`,
//! `halMemShareHandleSetAttribute` for the runtime's "no PID validation" export,
//! `halMemImportFromShareableHandle`), as the ACL simulator does it: each `memfd` starts with a
//! header page ([`HEADER`]: exported, whitelist off, size, whitelisted process ids) before its
//! bytes; the shareable value is the exporter's process id and its descriptor of the `memfd`;
//! an import opens that descriptor through `/proc/<pid>/fd/<fd>` and maps the same bytes.
//! `halMemShareHandleInfoGet` answers the physical device of exported device memory (from the
//! header page); for host memory it answers `DRV_ERROR_NOT_SUPPORT`, and the runtime then
//! imports without asking.
//!
//! IPC events (`aclrtIpcGetEventHandle` / `aclrtIpcOpenEventHandle`, the runtime's
//! `core/src/event/ipc_event.cc`) are built from these same calls. What they ask beyond
//! xstream's own sharing is admitted here: `halSupportFeature(FEATURE_SVM_VMM_NORMAL_GRANULARITY)`
//! (the feature the runtime checks first) is claimed for every emulated device; an export may
//! carry flag bit 0 (the runtime's `IPC_EVENT_P2P_NO_CHECK_FLAG`); an import may name device 65
//! (the runtime's `IMPORT_DEVICE_ID`, the host side of the opening process).

#![allow(non_snake_case)]

use std::ffi::c_void;
use std::sync::{Mutex, MutexGuard};
use xstream_core::sync::lock;

use crate::codes::*;
use crate::exports::{guard, rd32};
use crate::{devinfo, memory};

#[path = "../../ascend-sim/src/physmem.rs"]
mod physmem;
use physmem::{
    close_fd, hdr_word, header_u32, inaccessible, pwrite_at, unmap_raw, Kind, Space, SpaceError,
};
pub use physmem::{HEADER, MAX_PIDS};
use physmem::{H_DEVICE, H_EXPORTED, H_NO_WLIST};

/// The allocation granularity, minimum and recommended (2 MiB, the huge page).
pub const GRANULARITY: usize = 2 << 20;

/// `MEM_GIANT_PAGE_TYPE` reservations are aligned to 1 GiB.
const GIANT: usize = 1 << 30;

/// `enum drv_mem_side`: `MEM_HOST_SIDE`, `MEM_DEV_SIDE`, `MEM_HOST_NUMA_SIDE`.
const MEM_HOST_SIDE: u32 = 0;
const MEM_DEV_SIDE: u32 = 1;
const MEM_HOST_NUMA_SIDE: u32 = 2;

/// `enum drv_mem_pg_type`: `MEM_GIANT_PAGE_TYPE` (2); `MEM_MAX_PAGE_TYPE` (3).
const MEM_GIANT_PAGE_TYPE: u32 = 2;
const MEM_MAX_PAGE_TYPE: u32 = 3;
/// `enum drv_mem_type`: `MEM_MAX_TYPE`.
const MEM_MAX_TYPE: u32 = 5;

/// Bits of `halMemAddressReserve`'s `flag`: the page type (bits 0-1); `MEM_RSV_TYPE_DEVICE_SHARE`
/// (bit 8) and `MEM_RSV_TYPE_REMOTE_MAP` (bit 9) need a specified address.
const RSV_PG_TYPE_MASK: u64 = 0x3;
const RSV_SPECIFIED_ONLY: u64 = (1 << 8) | (1 << 9);

/// `FEATURE_SVM_VMM_NORMAL_GRANULARITY` (`enum drvFeature`, `ascend_hal_define.h`).
pub const FEATURE_SVM_VMM_NORMAL_GRANULARITY: u32 = 6;

/// Export flag bit 0: the runtime's `IPC_EVENT_P2P_NO_CHECK_FLAG` (`core/inc/event/ipc_event.hpp`),
/// passed by IPC events; the only flag an export takes.
pub const EXPORT_P2P_NO_CHECK: u64 = 1;

/// The device id the runtime's IPC events import their host-side mappings with
/// (`IMPORT_DEVICE_ID`, `core/inc/event/ipc_event.hpp`).
pub const IMPORT_HOST_DEVID: u32 = 65;

/// Base of the handle tokens (`drv_mem_handle_t *`); each handle is 64 bytes further on.
const HANDLE_BASE: usize = 0x4A11_0000_0000;

/// The fields of `struct drv_mem_prop` (`side` 0, `devid` 4, `module_id` 8, `pg_type` 12,
/// `mem_type` 16, `reserve` 24; 32 bytes) that the emulation checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemProp {
    /// `side` (`enum drv_mem_side`).
    pub side: u32,
    /// `devid`.
    pub devid: u32,
    /// `pg_type` (`enum drv_mem_pg_type`).
    pub pg_type: u32,
    /// `mem_type` (`enum drv_mem_type`, after the runtime's per-chip rewrite).
    pub mem_type: u32,
}

impl MemProp {
    /// Reads a `struct drv_mem_prop`.
    ///
    /// # Safety
    /// `p` must point to a readable `struct drv_mem_prop` (32 bytes).
    unsafe fn load(p: *const c_void) -> Self {
        // SAFETY: the caller's promise; the offsets are the header's.
        unsafe {
            MemProp {
                side: rd32(p, 0),
                devid: rd32(p, 4),
                pg_type: rd32(p, 12),
                mem_type: rd32(p, 16),
            }
        }
    }

    /// `DRV_ERROR_NONE` for a property the emulation can create: device memory of an emulated
    /// device, or host memory; host NUMA memory is not emulated.
    fn check(&self) -> i32 {
        let known = self.pg_type < MEM_MAX_PAGE_TYPE && self.mem_type < MEM_MAX_TYPE;
        match self.side {
            MEM_HOST_NUMA_SIDE => DRV_ERROR_NOT_SUPPORT,
            MEM_DEV_SIDE if known && self.devid < devinfo::device_count() => DRV_ERROR_NONE,
            MEM_HOST_SIDE if known => DRV_ERROR_NONE,
            _ => DRV_ERROR_INVALID_VALUE,
        }
    }
}

/// One `struct drv_mem_access_desc` (`type` 0, `location.id` 4, `location.side` 8, `rsv` 12;
/// 20 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessDesc {
    /// `type` (`drv_mem_access_type`: 0 none, 1 read, 3 read-write).
    pub access: u32,
    /// `location.id`: the device id (0 for the host).
    pub id: u32,
    /// `location.side` (`enum drv_mem_side`).
    pub side: u32,
}

/// Size of `struct drv_mem_access_desc`.
pub const ACCESS_DESC_BYTES: usize = 20;

impl AccessDesc {
    fn valid(&self) -> bool {
        let access = matches!(self.access, 0 | 1 | 3);
        let location = match self.side {
            MEM_DEV_SIDE => self.id < devinfo::device_count(),
            MEM_HOST_SIDE => self.id == 0,
            _ => false,
        };
        access && location
    }
}

/// The emulation's physical memory objects.
const KIND: Kind = Kind {
    magic: b"XHALVMMP",
    name: c"xstream-hal-sim-phys",
};

/// The emulation's reservations, mappings and physical memory (handle tokens from
/// [`HANDLE_BASE`], 64 apart).
static VMM: Mutex<Option<Space>> = Mutex::new(None);

fn with<T>(f: impl FnOnce(&mut Space) -> T) -> T {
    let mut g: MutexGuard<'_, Option<Space>> = lock(&VMM);
    f(g.get_or_insert_with(|| Space::new(HANDLE_BASE, 64)))
}

/// The driver's answer to a refusal of the [`Space`].
fn refusal(e: SpaceError) -> i32 {
    match e {
        SpaceError::MapFailed | SpaceError::UnmapFailed => DRV_ERROR_OUT_OF_MEMORY,
        _ => DRV_ERROR_INVALID_VALUE,
    }
}

/// `halMemGetAllocationGranularity`: 2 MiB for `MEM_ALLOC_GRANULARITY_MINIMUM` (0) and
/// `MEM_ALLOC_GRANULARITY_RECOMMENDED` (1).
pub fn granularity(prop: &MemProp, option: u32) -> Result<usize, i32> {
    match prop.check() {
        DRV_ERROR_NONE if option <= 1 => Ok(GRANULARITY),
        DRV_ERROR_NONE => Err(DRV_ERROR_INVALID_VALUE),
        e => Err(e),
    }
}

/// `halMemAddressReserve`: `size` bytes of address space, aligned to `alignment` (0: the
/// granularity; 1 GiB for giant pages), at `addr` when non-zero (`DRV_ERROR_BUSY` when taken).
pub fn reserve(size: usize, alignment: usize, addr: usize, flag: u64) -> Result<usize, i32> {
    let pg_type = (flag & RSV_PG_TYPE_MASK) as u32;
    let specified_only = flag & RSV_SPECIFIED_ONLY != 0;
    let other_bits = flag & !(RSV_PG_TYPE_MASK | RSV_SPECIFIED_ONLY) != 0;
    let page = if pg_type == MEM_GIANT_PAGE_TYPE {
        GIANT
    } else {
        GRANULARITY
    };
    let align = alignment.max(page);
    if size == 0
        || !size.is_multiple_of(GRANULARITY)
        || pg_type >= MEM_MAX_PAGE_TYPE
        || other_bits
        || (specified_only && addr == 0)
        || !align.is_power_of_two()
        || !addr.is_multiple_of(align)
    {
        return Err(DRV_ERROR_INVALID_VALUE);
    }
    let start = if addr != 0 {
        match inaccessible(addr, size, false) {
            Some(p) if p == addr => p,
            Some(p) => {
                unmap_raw(p, size);
                return Err(DRV_ERROR_BUSY);
            }
            None => return Err(DRV_ERROR_BUSY),
        }
    } else {
        physmem::reserve_aligned(size, align).ok_or(DRV_ERROR_OUT_OF_MEMORY)?
    };
    with(|v| v.reserved.insert(start, size));
    Ok(start)
}

/// `halMemAddressFree`: a whole reservation with nothing mapped in it.
pub fn address_free(ptr: usize) -> Result<(), i32> {
    with(|v| v.release_reservation(ptr)).map_err(refusal)
}

/// `halMemCreate`: `size` bytes of physical memory; returns the handle token.
pub fn create(size: usize, prop: &MemProp, flag: u64) -> Result<usize, i32> {
    match prop.check() {
        DRV_ERROR_NONE => {}
        e => return Err(e),
    }
    if size == 0 || !size.is_multiple_of(GRANULARITY) || flag != 0 {
        return Err(DRV_ERROR_INVALID_VALUE);
    }
    let device = if prop.side == MEM_DEV_SIDE {
        prop.devid + 1
    } else {
        0
    };
    let fd = physmem::create(&KIND, size, device).ok_or(DRV_ERROR_OUT_OF_MEMORY)?;
    Ok(with(|v| v.insert(fd, size, false)))
}

/// `halMemRelease`: the memory goes with its last mapping.
pub fn release(handle: usize) -> Result<(), i32> {
    with(|v| v.release(handle)).map_err(refusal)
}

/// `halMemMap`: `size` bytes of `handle` (from its start) at `ptr`, inside a reservation and
/// over no other mapping.
pub fn map(ptr: usize, size: usize, offset: usize, handle: usize, flag: u64) -> Result<(), i32> {
    if offset != 0 || flag != 0 {
        return Err(DRV_ERROR_INVALID_VALUE);
    }
    with(|v| {
        v.map((ptr, size, 0), handle, GRANULARITY)
            .map_err(refusal)?;
        memory::map_insert(ptr, size);
        Ok(())
    })
}

/// `halMemUnmap`: the mapping starting at `ptr`; its range becomes inaccessible again.
pub fn unmap(ptr: usize) -> Result<(), i32> {
    with(|v| {
        v.unmap(ptr).map_err(refusal)?;
        memory::map_remove(ptr);
        Ok(())
    })
}

/// `halMemSetAccess`: `ptr` and `size` name one mapping exactly; every location is valid.
pub fn set_access(ptr: usize, size: usize, descs: &[AccessDesc]) -> Result<(), i32> {
    let one_mapping = with(|v| v.maps.get(&ptr).is_some_and(|&(n, _)| n == size));
    if !one_mapping || descs.is_empty() || !descs.iter().all(AccessDesc::valid) {
        return Err(DRV_ERROR_INVALID_VALUE);
    }
    Ok(())
}

/// `halMemExportToShareableHandle`: the shareable value is this process's id (high 32 bits)
/// and its descriptor of the `memfd` (low 32 bits); only handle type `MEM_HANDLE_TYPE_NONE` (0)
/// and flags 0 (what the runtime passes for `aclrtMemExportToShareableHandle`) or
/// [`EXPORT_P2P_NO_CHECK`] (what it passes for IPC events), of memory created here (not
/// imported) and not released.
pub fn export(handle: usize, handle_type: u32, flags: u64) -> Result<u64, i32> {
    with(|v| {
        let p = v
            .handles
            .get(&handle)
            .filter(|p| !p.released && !p.imported)
            .ok_or(DRV_ERROR_INVALID_VALUE)?;
        if handle_type != 0 || flags & !EXPORT_P2P_NO_CHECK != 0 {
            return Err(DRV_ERROR_INVALID_VALUE);
        }
        if !pwrite_at(p.fd, H_EXPORTED, &1u32.to_le_bytes()) {
            return Err(DRV_ERROR_INVALID_VALUE);
        }
        Ok((u64::from(std::process::id()) << 32) | p.fd as u32 as u64)
    })
}

/// The descriptor of an export of this process, not released.
fn own_export(shareable: u64) -> Result<i32, i32> {
    let (pid, fd) = ((shareable >> 32) as u32, shareable as u32 as i32);
    if pid != std::process::id() {
        return Err(DRV_ERROR_INVALID_VALUE);
    }
    with(|v| {
        v.handles
            .values()
            .find(|p| p.fd == fd && !p.released && !p.imported)
            .map(|p| p.fd)
    })
    .filter(|&fd| header_u32(fd, H_EXPORTED) == Some(1))
    .ok_or(DRV_ERROR_INVALID_VALUE)
}

/// `halMemSetPidToShareableHandle`: adds `pids` to the export's whitelist.
pub fn set_pids(shareable: u64, pids: &[i32]) -> Result<(), i32> {
    let fd = own_export(shareable)?;
    if pids.is_empty() || pids.iter().any(|&p| p <= 0) {
        return Err(DRV_ERROR_INVALID_VALUE);
    }
    physmem::add_pids(fd, pids).map_err(|_| DRV_ERROR_INVALID_VALUE)
}

/// `halMemShareHandleSetAttribute` with `SHR_HANDLE_ATTR_NO_WLIST_IN_SERVER` (0): `enable_flag`
/// 1 (`SHRID_NO_WLIST_ENABLE`) lets any process import, 0 checks the whitelist again.
pub fn set_no_whitelist(shareable: u64, attr_type: u32, enable_flag: u32) -> Result<(), i32> {
    let fd = own_export(shareable)?;
    if attr_type != 0 || enable_flag > 1 || !pwrite_at(fd, H_NO_WLIST, &enable_flag.to_le_bytes()) {
        return Err(DRV_ERROR_INVALID_VALUE);
    }
    Ok(())
}

/// The exporter's `memfd` behind `shareable` and its header ([`physmem::open_export`]).
fn open_export(shareable: u64) -> Result<(i32, [u8; physmem::H_PIDS]), i32> {
    physmem::open_export(&KIND, shareable).map_err(|_| DRV_ERROR_INVALID_VALUE)
}

/// `halMemImportFromShareableHandle`: opens the exporter's `memfd` (see `open_export`; with
/// this process on the whitelist or the whitelist off) and returns a new handle over the same
/// bytes. `devid` is an emulated device or [`IMPORT_HOST_DEVID`]. Refused once the exporter
/// released its memory or is gone (its descriptor is closed).
pub fn import(shareable: u64, devid: u32) -> Result<usize, i32> {
    if devid >= devinfo::device_count() && devid != IMPORT_HOST_DEVID {
        return Err(DRV_ERROR_INVALID_VALUE);
    }
    let (fd, hdr) = open_export(shareable)?;
    let me = std::process::id() as i32;
    match physmem::size_of(&hdr).filter(|_| physmem::admits(fd, &hdr, me)) {
        Some(size) => Ok(with(|v| v.insert(fd, size, true))),
        None => {
            close_fd(fd);
            Err(DRV_ERROR_INVALID_VALUE)
        }
    }
}

/// `halMemShareHandleInfoGet`: the physical device (the emulation's physical ids are its
/// indices) of the exported device memory behind `shareable`; `DRV_ERROR_NOT_SUPPORT` for host
/// memory (no device to name: the runtime then imports without asking).
pub fn share_info(shareable: u64) -> Result<u32, i32> {
    let (fd, hdr) = open_export(shareable)?;
    close_fd(fd);
    match hdr_word(&hdr, H_DEVICE) {
        0 => Err(DRV_ERROR_NOT_SUPPORT),
        d => Ok(d - 1),
    }
}

/// `halSupportFeature`: [`FEATURE_SVM_VMM_NORMAL_GRANULARITY`] on an emulated device, which the
/// runtime asks before IPC events and host NUMA physical memory (the latter still refused by
/// `halMemCreate`); no other feature.
pub fn supports_feature(dev: u32, feature: u32) -> bool {
    feature == FEATURE_SVM_VMM_NORMAL_GRANULARITY && dev < devinfo::device_count()
}

/// Writes `v` through a non-null out-pointer; `DRV_ERROR_INVALID_VALUE` for null.
fn put<T>(out: *mut T, r: Result<T, i32>) -> i32 {
    if out.is_null() {
        return DRV_ERROR_INVALID_VALUE;
    }
    match r {
        Ok(v) => {
            // SAFETY: a non-null output of the caller.
            unsafe { out.write(v) };
            DRV_ERROR_NONE
        }
        Err(e) => e,
    }
}

fn code(r: Result<(), i32>) -> i32 {
    r.err().unwrap_or(DRV_ERROR_NONE)
}

/// The exported C entry points (a private module: they check their pointers before reading
/// through them).
mod ffi {
    use super::*;

    /// `drvError_t halMemGetAllocationGranularity(const struct drv_mem_prop *prop,
    /// drv_mem_granularity_options option, size_t *granularity)`.
    #[no_mangle]
    pub extern "C" fn halMemGetAllocationGranularity(
        prop: *const c_void,
        option: u32,
        granularity_out: *mut usize,
    ) -> i32 {
        guard("halMemGetAllocationGranularity", || {
            if prop.is_null() {
                return DRV_ERROR_INVALID_VALUE;
            }
            // SAFETY: a non-null `struct drv_mem_prop` of the caller.
            let p = unsafe { MemProp::load(prop) };
            put(granularity_out, granularity(&p, option))
        })
    }

    /// `drvError_t halMemAddressReserve(void **ptr, size_t size, size_t alignment, void *addr,
    /// uint64_t flag)`.
    #[no_mangle]
    pub extern "C" fn halMemAddressReserve(
        ptr: *mut *mut c_void,
        size: usize,
        alignment: usize,
        addr: *mut c_void,
        flag: u64,
    ) -> i32 {
        guard("halMemAddressReserve", || {
            crate::trace!(
                "halMemAddressReserve(size {size:#x}, align {alignment:#x}, flag {flag:#x})"
            );
            if ptr.is_null() {
                return DRV_ERROR_INVALID_VALUE;
            }
            let r = reserve(size, alignment, addr as usize, flag);
            put(ptr, r.map(|p| p as *mut c_void))
        })
    }

    /// `drvError_t halMemAddressFree(void *ptr)`.
    #[no_mangle]
    pub extern "C" fn halMemAddressFree(ptr: *mut c_void) -> i32 {
        guard("halMemAddressFree", || code(address_free(ptr as usize)))
    }

    /// `drvError_t halMemCreate(drv_mem_handle_t **handle, size_t size, const struct drv_mem_prop
    /// *prop, uint64_t flag)`.
    #[no_mangle]
    pub extern "C" fn halMemCreate(
        handle: *mut *mut c_void,
        size: usize,
        prop: *const c_void,
        flag: u64,
    ) -> i32 {
        guard("halMemCreate", || {
            if handle.is_null() || prop.is_null() {
                return DRV_ERROR_INVALID_VALUE;
            }
            // SAFETY: a non-null `struct drv_mem_prop` of the caller.
            let p = unsafe { MemProp::load(prop) };
            crate::trace!("halMemCreate(size {size:#x}, {p:?}, flag {flag:#x})");
            put(handle, create(size, &p, flag).map(|h| h as *mut c_void))
        })
    }

    /// `drvError_t halMemRelease(drv_mem_handle_t *handle)`.
    #[no_mangle]
    pub extern "C" fn halMemRelease(handle: *mut c_void) -> i32 {
        guard("halMemRelease", || code(release(handle as usize)))
    }

    /// `drvError_t halMemMap(void *ptr, size_t size, size_t offset, drv_mem_handle_t *handle,
    /// uint64_t flag)`.
    #[no_mangle]
    pub extern "C" fn halMemMap(
        ptr: *mut c_void,
        size: usize,
        offset: usize,
        handle: *mut c_void,
        flag: u64,
    ) -> i32 {
        guard("halMemMap", || {
            crate::trace!("halMemMap({ptr:?}, size {size:#x}, offset {offset:#x}, flag {flag:#x})");
            code(map(ptr as usize, size, offset, handle as usize, flag))
        })
    }

    /// `drvError_t halMemUnmap(void *ptr)`.
    #[no_mangle]
    pub extern "C" fn halMemUnmap(ptr: *mut c_void) -> i32 {
        guard("halMemUnmap", || code(unmap(ptr as usize)))
    }

    /// `drvError_t halMemSetAccess(void *ptr, size_t size, struct drv_mem_access_desc *desc,
    /// size_t count)`.
    #[no_mangle]
    pub extern "C" fn halMemSetAccess(
        ptr: *mut c_void,
        size: usize,
        desc: *mut c_void,
        count: usize,
    ) -> i32 {
        guard("halMemSetAccess", || {
            // More locations than devices and the host is a caller's mistake, not a list to read.
            let max = devinfo::device_count() as usize + 1;
            if desc.is_null() || count == 0 || count > max {
                return DRV_ERROR_INVALID_VALUE;
            }
            let descs: Vec<AccessDesc> = (0..count)
                .map(|i| {
                    let d =
                        (desc as *const u8).wrapping_add(i * ACCESS_DESC_BYTES) as *const c_void;
                    // SAFETY: the caller's array holds `count` descriptors of 20 bytes.
                    unsafe {
                        AccessDesc {
                            access: rd32(d, 0),
                            id: rd32(d, 4),
                            side: rd32(d, 8),
                        }
                    }
                })
                .collect();
            crate::trace!("halMemSetAccess({ptr:?}, size {size:#x}, {descs:?})");
            code(set_access(ptr as usize, size, &descs))
        })
    }
    /// `struct ShareHandleAttr` (`common_pkg.h`): `enableFlag` and eight reserved words, passed
    /// by value.
    #[repr(C)]
    #[derive(Debug, Clone, Copy)]
    pub struct ShareHandleAttr {
        /// `enableFlag`: 1 = no whitelist (`SHRID_NO_WLIST_ENABLE`).
        pub enable_flag: u32,
        /// `rsv`.
        pub rsv: [u32; 8],
    }

    /// `drvError_t halMemExportToShareableHandle(drv_mem_handle_t *handle,
    /// drv_mem_handle_type handle_type, uint64_t flags, uint64_t *shareable_handle)`.
    #[no_mangle]
    pub extern "C" fn halMemExportToShareableHandle(
        handle: *mut c_void,
        handle_type: u32,
        flags: u64,
        shareable: *mut u64,
    ) -> i32 {
        guard("halMemExportToShareableHandle", || {
            if shareable.is_null() {
                return DRV_ERROR_INVALID_VALUE;
            }
            put(shareable, export(handle as usize, handle_type, flags))
        })
    }

    /// `struct ShareHandleGetInfo` (`common_pkg.h`): `phyDevid` and eight reserved words.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub struct ShareHandleGetInfo {
        /// `phyDevid`: the physical device of the shared memory.
        pub phy_devid: u32,
        /// `reserve`.
        pub reserve: [u32; 8],
    }

    /// `drvError_t halMemShareHandleInfoGet(uint64_t shareable_handle, struct
    /// ShareHandleGetInfo *info)`.
    #[no_mangle]
    pub extern "C" fn halMemShareHandleInfoGet(
        shareable: u64,
        info: *mut ShareHandleGetInfo,
    ) -> i32 {
        guard("halMemShareHandleInfoGet", || {
            let r = share_info(shareable);
            crate::trace!("halMemShareHandleInfoGet({shareable:#x}) -> {r:?}");
            put(
                info,
                r.map(|d| ShareHandleGetInfo {
                    phy_devid: d,
                    ..Default::default()
                }),
            )
        })
    }

    /// `bool halSupportFeature(uint32_t devId, drvFeature_t type)`.
    #[no_mangle]
    pub extern "C" fn halSupportFeature(dev: u32, feature: u32) -> bool {
        let r = std::panic::catch_unwind(|| supports_feature(dev, feature)).unwrap_or(false);
        crate::trace!("halSupportFeature(dev {dev}, feature {feature}) -> {r}");
        r
    }

    /// `drvError_t halMemImportFromShareableHandle(uint64_t shareable_handle, uint32_t devid,
    /// drv_mem_handle_t **handle)`.
    #[no_mangle]
    pub extern "C" fn halMemImportFromShareableHandle(
        shareable: u64,
        devid: u32,
        handle: *mut *mut c_void,
    ) -> i32 {
        guard("halMemImportFromShareableHandle", || {
            if handle.is_null() {
                return DRV_ERROR_INVALID_VALUE;
            }
            put(handle, import(shareable, devid).map(|h| h as *mut c_void))
        })
    }

    /// `drvError_t halMemSetPidToShareableHandle(uint64_t shareable_handle, int pid[],
    /// uint32_t pid_num)`.
    #[no_mangle]
    pub extern "C" fn halMemSetPidToShareableHandle(
        shareable: u64,
        pid: *const i32,
        pid_num: u32,
    ) -> i32 {
        guard("halMemSetPidToShareableHandle", || {
            if pid.is_null() || pid_num == 0 || pid_num as usize > MAX_PIDS {
                return DRV_ERROR_INVALID_VALUE;
            }
            // SAFETY: the caller's array of `pid_num` ids (bounded above).
            let pids = unsafe { std::slice::from_raw_parts(pid, pid_num as usize) };
            code(set_pids(shareable, pids))
        })
    }

    /// `drvError_t halMemShareHandleSetAttribute(uint64_t shareable_handle, enum
    /// ShareHandleAttrType type, struct ShareHandleAttr attr)`.
    #[no_mangle]
    pub extern "C" fn halMemShareHandleSetAttribute(
        shareable: u64,
        attr_type: u32,
        attr: ShareHandleAttr,
    ) -> i32 {
        guard("halMemShareHandleSetAttribute", || {
            code(set_no_whitelist(shareable, attr_type, attr.enable_flag))
        })
    }
}

#[cfg(test)]
mod tests;
