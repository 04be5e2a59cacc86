//! Device memory backed by host memory.
//!
//! Every device allocation is a host allocation recorded in a table (start → length), so the
//! driver can answer "is this a device address?" the way the runtime asks it, and copies between
//! any two recorded or host addresses are plain `memmove`s.
//!
//! Ranges of virtual memory mapped by `halMemMap` ([`crate::vmm`]) are recorded in a second
//! table: they count as device memory for every lookup here, a copy or memset may run across
//! mappings that touch one another (as over one reserved range on the device), and [`free`]
//! never takes them.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use xstream_core::sync::lock;

/// Alignment of device allocations (the driver hands out at least page-aligned blocks).
pub const DEVICE_ALIGN: usize = 4096;

/// Total device memory reported (32 GiB, the `memory_size` of the 910B4 platform file).
pub const DEVICE_MEMORY_BYTES: u64 = 32 << 30;

static TABLE: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());

fn table() -> MutexGuard<'static, BTreeMap<usize, usize>> {
    lock(&TABLE)
}

/// Allocates `size` bytes of emulated device memory (zeroed); `None` when the host refuses.
pub fn alloc(size: u64) -> Option<usize> {
    let size = usize::try_from(size).ok()?.max(1);
    let rounded = size.checked_add(DEVICE_ALIGN - 1)? / DEVICE_ALIGN * DEVICE_ALIGN;
    let layout = std::alloc::Layout::from_size_align(rounded, DEVICE_ALIGN).ok()?;
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        return None;
    }
    table().insert(p as usize, rounded);
    Some(p as usize)
}

/// Frees an allocation made by [`alloc`]; `false` when `addr` is not the start of one.
pub fn free(addr: usize) -> bool {
    let Some(len) = table().remove(&addr) else {
        return false;
    };
    let layout =
        std::alloc::Layout::from_size_align(len, DEVICE_ALIGN).expect("layout was valid at alloc");
    // SAFETY: `addr` came from `alloc_zeroed` with this same layout and is removed from the table.
    unsafe { std::alloc::dealloc(addr as *mut u8, layout) };
    true
}

/// Virtual memory mappings (start → length), entered by `halMemMap`, removed by `halMemUnmap`.
static MAPPED: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());

fn mapped() -> MutexGuard<'static, BTreeMap<usize, usize>> {
    lock(&MAPPED)
}

fn containing(t: &BTreeMap<usize, usize>, addr: usize) -> Option<(usize, usize)> {
    let (&start, &len) = t.range(..=addr).next_back()?;
    (addr < start + len).then_some((start, len))
}

/// Records `[addr, addr+len)` as mapped device memory (the caller checked that it overlaps no
/// other mapping).
pub fn map_insert(addr: usize, len: usize) {
    mapped().insert(addr, len);
}

/// Forgets the mapping starting at `addr`; `false` when none starts there.
pub fn map_remove(addr: usize) -> bool {
    mapped().remove(&addr).is_some()
}

/// The allocation or mapping containing `addr`, as (start, length).
pub fn find(addr: usize) -> Option<(usize, usize)> {
    containing(&table(), addr).or_else(|| containing(&mapped(), addr))
}

/// Whether `[addr, addr+len)` lies inside one device allocation, or inside mappings that follow
/// one another without a gap.
pub fn is_device_range(addr: usize, len: usize) -> bool {
    let Some(end) = addr.checked_add(len) else {
        return false;
    };
    if let Some((s, l)) = containing(&table(), addr) {
        return end <= s + l;
    }
    let m = mapped();
    let mut at = addr;
    while let Some((s, l)) = containing(&m, at) {
        if end <= s + l {
            return true;
        }
        at = s + l;
    }
    false
}

/// Copies `len` bytes from `src` to `dst` (either may be host or emulated device memory).
///
/// Refuses (returns `false`) when a side that lies in a device allocation overruns it, or when a
/// pointer is null; host-side ranges are the caller's promise, as with the real driver.
pub fn copy(dst: usize, src: usize, len: usize) -> bool {
    if len == 0 {
        return true;
    }
    if dst == 0 || src == 0 {
        return false;
    }
    for a in [dst, src] {
        if find(a).is_some() && !is_device_range(a, len) {
            return false;
        }
    }
    // SAFETY: both ranges are valid for `len` bytes: device ranges were checked above, host ranges
    // are the runtime's buffers of that size; `copy` (memmove) allows overlap.
    unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, len) };
    true
}

/// Fills `len` bytes at `dst` with `value` (same checks as [`copy`]).
pub fn fill(dst: usize, value: u8, len: usize) -> bool {
    if len == 0 {
        return true;
    }
    if dst == 0 || (find(dst).is_some() && !is_device_range(dst, len)) {
        return false;
    }
    // SAFETY: as in `copy`.
    unsafe { std::ptr::write_bytes(dst as *mut u8, value, len) };
    true
}

/// DMA descriptors made by `drvMemConvertAddr` (handle → (src, dst, len)). The runtime puts the
/// handle into a converted PCIe-DMA entry (`sq_addr`); executing the entry looks it up here.
static DMA: Mutex<BTreeMap<u64, (usize, usize, usize)>> = Mutex::new(BTreeMap::new());

/// Base of the (fake, never dereferenced) descriptor handles.
const DMA_HANDLE_BASE: u64 = 0xD3A0_0000_0000;

/// Records a DMA descriptor; returns its handle.
pub fn dma_create(src: usize, dst: usize, len: usize) -> u64 {
    let mut t = lock(&DMA);
    let h = t.keys().next_back().map_or(DMA_HANDLE_BASE, |k| k + 64);
    t.insert(h, (src, dst, len));
    h
}

/// The descriptor behind a handle.
pub fn dma_get(handle: u64) -> Option<(usize, usize, usize)> {
    DMA.lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&handle)
        .copied()
}

/// Forgets a descriptor; `false` when unknown.
pub fn dma_destroy(handle: u64) -> bool {
    DMA.lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&handle)
        .is_some()
}

/// Host ranges registered with `halHostRegister` (start → length). On this emulation the device
/// reaches host memory at the same address, so registering hands back the host pointer itself;
/// the table only keeps a range from being registered twice (the driver answers
/// `DRV_ERROR_BUSY`, which the runtime reports as memory already registered) and lets
/// `halHostUnregister` refuse a pointer that was never registered.
static REGISTERED: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());

/// Why a host registration was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum RegisterError {
    /// Null pointer, zero size, or a range that wraps or lies in emulated device memory.
    Invalid,
    /// The range overlaps one registered before.
    Busy,
}

/// Registers `[addr, addr+len)` of host memory for device access; returns the device address.
pub fn host_register(addr: usize, len: usize) -> Result<usize, RegisterError> {
    let end = addr.checked_add(len).ok_or(RegisterError::Invalid)?;
    if addr == 0 || len == 0 || find(addr).is_some() || find(end - 1).is_some() {
        return Err(RegisterError::Invalid);
    }
    let mut t = lock(&REGISTERED);
    let before = t.range(..end).next_back();
    if before.is_some_and(|(&s, &l)| s + l > addr) {
        return Err(RegisterError::Busy);
    }
    t.insert(addr, len);
    Ok(addr)
}

/// Takes back a registration made at `addr`; `false` when none starts there.
pub fn host_unregister(addr: usize) -> bool {
    lock(&REGISTERED).remove(&addr).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_copy_free_round_trip() {
        let d = alloc(100).expect("alloc");
        assert_eq!(d % DEVICE_ALIGN, 0);
        assert!(is_device_range(d, 100));
        assert!(!is_device_range(d, DEVICE_ALIGN + 1));
        let src: Vec<u8> = (0..100u8).collect();
        assert!(copy(d, src.as_ptr() as usize, 100));
        let mut back = vec![0u8; 100];
        assert!(copy(back.as_mut_ptr() as usize, d, 100));
        assert_eq!(src, back);
        assert!(fill(d, 7, 10));
        assert!(copy(back.as_mut_ptr() as usize, d, 100));
        assert_eq!(&back[..10], &[7; 10]);
        assert_eq!(back[10], 10);
        assert!(!copy(d + 10, src.as_ptr() as usize, DEVICE_ALIGN));
        assert!(free(d));
        assert!(!free(d));
    }

    #[test]
    fn mappings_count_as_device_memory_and_join_when_adjacent() {
        let mut host = vec![0u8; 4 * DEVICE_ALIGN];
        let a = host.as_mut_ptr() as usize;
        map_insert(a, DEVICE_ALIGN);
        map_insert(a + DEVICE_ALIGN, DEVICE_ALIGN);
        map_insert(a + 3 * DEVICE_ALIGN, DEVICE_ALIGN);
        assert_eq!(find(a + 5), Some((a, DEVICE_ALIGN)));
        assert!(
            is_device_range(a + 10, 2 * DEVICE_ALIGN - 10),
            "two adjacent mappings"
        );
        assert!(
            !is_device_range(a, 3 * DEVICE_ALIGN + 1),
            "across the unmapped third page"
        );
        assert!(!free(a), "free takes no mapping");
        assert!(
            fill(a + DEVICE_ALIGN - 2, 9, 4),
            "a memset across two mappings"
        );
        assert!(
            !fill(a + 2 * DEVICE_ALIGN - 2, 9, 4),
            "a memset into a hole"
        );
        assert!(map_remove(a + DEVICE_ALIGN));
        assert!(!map_remove(a + DEVICE_ALIGN));
        assert!(
            !is_device_range(a, 2 * DEVICE_ALIGN),
            "the hole left by the unmap"
        );
        assert!(map_remove(a));
        assert!(map_remove(a + 3 * DEVICE_ALIGN));
        assert_eq!(find(a), None);
        assert_eq!(&host[DEVICE_ALIGN - 2..DEVICE_ALIGN + 2], &[9; 4]);
    }

    #[test]
    fn host_registration_is_once_per_range() {
        let host = vec![0u8; 3 * DEVICE_ALIGN];
        let a = host.as_ptr() as usize;
        assert_eq!(host_register(a, DEVICE_ALIGN), Ok(a));
        assert_eq!(host_register(a, DEVICE_ALIGN), Err(RegisterError::Busy));
        assert_eq!(
            host_register(a + 100, 10),
            Err(RegisterError::Busy),
            "inside a registered range"
        );
        assert_eq!(host_register(a + DEVICE_ALIGN, 10), Ok(a + DEVICE_ALIGN));
        assert_eq!(host_register(0, 10), Err(RegisterError::Invalid));
        assert_eq!(host_register(a, 0), Err(RegisterError::Invalid));
        let d = alloc(64).unwrap();
        assert_eq!(host_register(d, 64), Err(RegisterError::Invalid));
        assert!(free(d));
        assert!(host_unregister(a));
        assert!(!host_unregister(a), "unregistered twice");
        assert!(host_unregister(a + DEVICE_ALIGN));
    }
}
