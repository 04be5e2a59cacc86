//! Virtual memory management: granularity, reservations, physical handles, mappings and
//! access.

use super::*;

/// The granularity of the virtual memory functions (minimum and recommended).
const VMM_GRANULARITY: usize = 2 << 20;
const ALREADY_MAPPED: u32 = 208;
const NOT_MAPPED: u32 = 211;

/// Reservations (base -> (size, alignment)), physical handles (handle -> [`Phys`])
/// and mappings (address -> (size, handle)). A reservation is zeroed heap memory; a mapping
/// makes its part of that memory device memory (copies and memsets accept it). Mapping one
/// handle twice does not alias the two ranges (no `mmap` here: a counting double).
#[derive(Default)]
struct Vmm {
    reserved: std::collections::BTreeMap<u64, (usize, usize)>,
    handles: std::collections::HashMap<u64, Phys>,
    maps: std::collections::BTreeMap<u64, (usize, u64)>,
    next: u64,
}

/// A physical handle: its size, live mappings, whether released, and whether it was created
/// (or imported) with `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`.
struct Phys {
    size: usize,
    maps: usize,
    released: bool,
    posix: bool,
}

/// `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`.
const POSIX_FD: u32 = 1;
/// The file name prefix of exported handles (in the shared-memory file system).
const SHARE_PREFIX: &str = "xnull-vmm-share-";

impl Vmm {
    /// A new live physical handle of `size` bytes.
    fn insert(&mut self, size: usize, posix: bool) -> u64 {
        self.next += 1;
        let (maps, released) = (0, false);
        let phys = Phys {
            size,
            maps,
            released,
            posix,
        };
        self.handles.insert(self.next, phys);
        self.next
    }
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
        // SAFETY: a `CUmemAllocationProp`: `type` then `requestedHandleTypes`, both 32-bit.
        let requested = unsafe { *(prop as *const u32).add(1) };
        if requested & !POSIX_FD != 0 {
            return Err(INVALID_VALUE);
        }
        let id = vmm().insert(size, requested == POSIX_FD);
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
        if e.released {
            return Err(INVALID_VALUE);
        }
        e.released = true;
        if e.maps == 0 {
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
            Some(e) if e.size == size && !e.released => {}
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
            e.maps += 1;
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
            e.maps -= 1;
            e.maps == 0 && e.released
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

/// `cuMemExportToShareableHandle`: POSIX file descriptors only, of handles created with that
/// type. The descriptor is a new, already unlinked file of the shared-memory file system
/// holding the size (8 bytes, little-endian), so that another process can import it; it does
/// not carry the memory (the null driver's handles have none).
#[no_mangle]
pub extern "C" fn cuMemExportToShareableHandle(
    out: *mut c_void,
    h: u64,
    handle_type: u32,
    flags: u64,
) -> CUresult {
    run(F::cuMemExportToShareableHandle, || {
        if out.is_null() || handle_type != POSIX_FD || flags != 0 {
            return Err(INVALID_VALUE);
        }
        let size = match vmm().handles.get(&h) {
            Some(e) if !e.released && e.posix => e.size,
            _ => return Err(INVALID_VALUE),
        };
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = if std::path::Path::new("/dev/shm").is_dir() {
            std::path::PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let path = dir.join(format!(
            "{SHARE_PREFIX}{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|_| OUT_OF_MEMORY)?;
        let _ = std::fs::remove_file(&path);
        use std::os::unix::fs::FileExt;
        f.write_all_at(&(size as u64).to_le_bytes(), 0)
            .map_err(|_| OUT_OF_MEMORY)?;
        use std::os::fd::IntoRawFd;
        // SAFETY: the caller's out-pointer to an `int` (the POSIX handle type).
        unsafe { put(out as *mut i32, f.into_raw_fd()) }
    })
}

/// `cuMemImportFromShareableHandle`: a descriptor made by `cuMemExportToShareableHandle` (of
/// this process or another; the caller keeps and closes it).
#[no_mangle]
pub extern "C" fn cuMemImportFromShareableHandle(
    out: *mut u64,
    os_handle: *mut c_void,
    handle_type: u32,
) -> CUresult {
    run(F::cuMemImportFromShareableHandle, || {
        if out.is_null() || handle_type != POSIX_FD {
            return Err(INVALID_VALUE);
        }
        let fd = os_handle as usize as i32;
        let target =
            std::fs::read_link(format!("/proc/self/fd/{fd}")).map_err(|_| INVALID_VALUE)?;
        let ours = target
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(SHARE_PREFIX));
        if fd < 0 || !ours {
            return Err(INVALID_VALUE);
        }
        use std::os::fd::FromRawFd;
        use std::os::unix::fs::FileExt;
        // SAFETY: an open descriptor (its /proc entry exists) that stays the caller's: the
        // `ManuallyDrop` never closes it.
        let f = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
        let mut b = [0u8; 8];
        f.read_exact_at(&mut b, 0).map_err(|_| INVALID_VALUE)?;
        let size = u64::from_le_bytes(b) as usize;
        if size == 0 || !size.is_multiple_of(VMM_GRANULARITY) {
            return Err(INVALID_VALUE);
        }
        let id = vmm().insert(size, true);
        // SAFETY: the caller's out-pointer.
        unsafe { put(out, id) }
    })
}
