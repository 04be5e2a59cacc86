//! Virtual memory: reserve a range of device address space, create physical memory, map it
//! into the range, grant access, and use the mapped bytes as an ordinary buffer.
//!
//! The model is the one CUDA (`cuMemAddressReserve` / `cuMemCreate` / `cuMemMap` /
//! `cuMemSetAccess`) and ACL (`aclrtReserveMemAddress` / `aclrtMallocPhysical` / `aclrtMapMem` /
//! `aclrtMemSetAccess`) share; the host backend emulates it. A runtime grows one segment of
//! address space by mapping chunks into it instead of allocating many buffers (an expandable
//! caching allocator, see `examples/src/bin/expandable.rs`).
//!
//! # The objects
//! - [`Granularity`]: [`VirtualMemory::granularity`]. Every size and offset below is a
//!   multiple of [`Granularity::minimum`].
//! - [`VirtualRange`]: [`VirtualMemory::reserve`] reserves address space and owns it.
//! - [`PhysicalMemory`]: [`VirtualMemory::create_physical`] creates memory with no address. It
//!   is a shared handle (`Clone`): a mapping holds a clone, so dropping the caller's handle of
//!   mapped memory frees nothing until the last mapping of it is gone (the vendors' rule for
//!   `cuMemRelease` / `aclrtFreePhysical`, kept on every backend). One handle may be mapped at
//!   several offsets, of one range or several: the mappings show the same bytes.
//! - A mapping: [`VirtualRange::map`] maps a whole physical handle at an offset;
//!   [`VirtualRange::unmap`] removes the mapping that starts there.
//! - Access: a fresh mapping is not accessible; [`VirtualRange::set_access`] grants read and
//!   write access to a device (the range's own, or a peer of the same backend).
//! - Buffers: [`VirtualRange::buffer`] gives a buffer of the backend over mapped, accessible
//!   bytes (possibly spanning several adjacent mappings). It works in every stream operation
//!   (views, copies, memsets, kernels, collectives) with the usual use tracking: the mappings
//!   under it stay mapped until the buffer and the work enqueued on it are gone.
//!
//! # Rules, checked here once for every backend
//! Each is an [`Error::InvalidArgument`] (or [`Error::WrongDevice`]) before anything reaches
//! the backend:
//! - a zero or unaligned size (reserve, create) or offset (map, set access, buffer);
//! - a mapping past the range's end, or over any byte of an existing mapping;
//! - an unmap at an offset where no mapping starts;
//! - an unmap of a mapping a live buffer still uses (drop the buffers and let their work
//!   finish: unmapping memory that queued work reads is undefined on a device);
//! - a [`VirtualRange::release`] of a range with live mappings (nothing is unmapped
//!   silently: the range comes back with the error);
//! - access or a buffer over bytes that are not all mapped (a hole), access not granted to the
//!   range's device (buffer), access ranges that cut a mapping;
//! - a physical handle of another device ([`Error::WrongDevice`]).
//!
//! # Drops
//! Never block and never leak. Dropping a [`VirtualRange`] unmaps its mappings that no buffer
//! uses at once, and the others when their last buffer (and its work) is gone; the address
//! space is released after its last mapping. Dropping the last handle of physical memory
//! frees it after its last mapping. Errors in these deferred releases are logged
//! (`tracing`), never raised.
//!
//! Backends without virtual memory lack [`Capabilities::VIRTUAL_MEMORY`] and answer every
//! call with [`Error::Unsupported`].
//!
//! # Sharing with another process
//! [`PhysicalMemory::export_shareable`] and [`VirtualMemory::import_physical`], on devices
//! with [`Capabilities::SHAREABLE_PHYSICAL`]: see [`crate::vmm_share`].

use std::any::Any;
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::vmm_share::{ShareableHandle, ShareablePayload};
use crate::{Backend, BufferOf, Capabilities, Device, Error, Result};

/// The allocation granularity of a device's virtual memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Granularity {
    /// Every size and offset is a multiple of it (CUDA: `CU_MEM_ALLOC_GRANULARITY_MINIMUM`;
    /// ACL: `ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM`).
    pub minimum: usize,
    /// The size the vendor recommends for performance (a multiple of `minimum`).
    pub recommended: usize,
}

/// What a backend's device implements for virtual memory. Users call the provided methods
/// ([`VirtualMemory::granularity`], [`VirtualMemory::reserve`],
/// [`VirtualMemory::create_physical`]) and the methods of [`VirtualRange`]; the `raw_*` hooks
/// are the backends' part, called only after the checks of the module documentation.
pub trait VirtualMemory: Device {
    /// A reservation of address space; its drop releases it.
    type Reservation: Send + Sync + 'static;
    /// Physical memory; its drop releases it.
    type Physical: Send + Sync + 'static;
    /// A live mapping; its drop unmaps it.
    type Mapping: Send + Sync + 'static;

    /// Hook: the granularity. [`Error::Unsupported`] where the device has no virtual memory.
    ///
    /// # Errors
    /// [`Error::Unsupported`]; vendor errors.
    fn raw_granularity(&self) -> Result<Granularity>;

    /// Hook: reserves `size` bytes aligned to `align` (both multiples of the minimum
    /// granularity, non-zero); returns the reservation and its first address.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] (no address space left); vendor errors.
    fn raw_reserve(&self, size: usize, align: usize) -> Result<(Self::Reservation, u64)>;

    /// Hook: creates `size` bytes of physical memory (a non-zero multiple of the minimum
    /// granularity).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`]; vendor errors.
    fn raw_create(&self, size: usize) -> Result<Self::Physical>;

    /// Hook: maps the whole of `phys` (`size` bytes) at `address`, inside `res`, where nothing
    /// is mapped.
    ///
    /// # Errors
    /// Vendor errors.
    fn raw_map(
        &self,
        res: &Self::Reservation,
        address: u64,
        phys: &Self::Physical,
        size: usize,
    ) -> Result<Self::Mapping>;

    /// Hook: grants `peer` (this device or another of the backend) read and write access to
    /// the `size` bytes of `map` at `address`.
    ///
    /// # Errors
    /// Vendor errors.
    fn raw_set_access(
        &self,
        map: &Self::Mapping,
        address: u64,
        size: usize,
        peer: &Self,
    ) -> Result<()>;

    /// Hook: a buffer of `len` mapped, accessible bytes at `address` that holds `keep` until
    /// the buffer (and its clones) and all work using it are gone, where an owned buffer's
    /// memory would be freed. The buffer frees no memory itself.
    ///
    /// # Errors
    /// Vendor errors.
    fn raw_buffer(
        &self,
        address: u64,
        len: usize,
        keep: Arc<dyn Any + Send + Sync>,
    ) -> Result<BufferOf<Self::B>>;

    /// Hook: exports `phys` (`size` bytes) for another process. Called only on devices with
    /// [`Capabilities::SHAREABLE_PHYSICAL`]; the default refuses.
    ///
    /// # Errors
    /// [`Error::Unsupported`]; vendor errors.
    fn raw_export(&self, phys: &Self::Physical, size: usize) -> Result<ShareablePayload> {
        let _ = (phys, size);
        Err(Error::unsupported(
            <Self::B as Backend>::KIND,
            "sharing physical memory with another process",
        ))
    }

    /// Hook: imports `handle` (already checked: backend, device, size, another process) as
    /// physical memory of this device. The default refuses.
    ///
    /// # Errors
    /// [`Error::Unsupported`]; vendor errors (an export withdrawn, a process not allowed).
    fn raw_import(&self, handle: &ShareableHandle) -> Result<Self::Physical> {
        let _ = handle;
        Err(Error::unsupported(
            <Self::B as Backend>::KIND,
            "sharing physical memory with another process",
        ))
    }

    // --- the user-facing API ---

    /// The device's granularity.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::VIRTUAL_MEMORY`]; vendor errors.
    fn granularity(&self) -> Result<Granularity> {
        check_capable(self)?;
        let g = self.raw_granularity()?;
        if g.minimum == 0 || !g.recommended.is_multiple_of(g.minimum) {
            return Err(Error::invalid(format!(
                "the backend reported granularity {g:?} (recommended not a multiple of minimum)"
            )));
        }
        Ok(g)
    }

    /// Reserves `size` bytes of address space (a non-zero multiple of the minimum
    /// granularity), aligned to it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero or unaligned size; as
    /// [`VirtualMemory::granularity`]; [`Error::OutOfMemory`]; vendor errors.
    fn reserve(&self, size: usize) -> Result<VirtualRange<Self>>
    where
        Self: Sized,
    {
        let g = self.granularity()?;
        check_size("reserve", size, g.minimum)?;
        let (res, address) = self.raw_reserve(size, g.minimum)?;
        Ok(VirtualRange {
            core: Arc::new(RangeCore {
                dev: self.clone(),
                res: Arc::new(res),
                address,
                size,
                gran: g.minimum,
                maps: Mutex::new(BTreeMap::new()),
            }),
        })
    }

    /// Creates `size` bytes of physical memory (a non-zero multiple of the minimum
    /// granularity). Its content is undefined until written.
    ///
    /// # Errors
    /// As [`VirtualMemory::reserve`].
    fn create_physical(&self, size: usize) -> Result<PhysicalMemory<Self>>
    where
        Self: Sized,
    {
        let g = self.granularity()?;
        check_size("create_physical", size, g.minimum)?;
        let raw = self.raw_create(size)?;
        Ok(PhysicalMemory {
            core: Arc::new(PhysCore {
                raw,
                size,
                ordinal: self.info().ordinal,
                dev: self.clone(),
            }),
        })
    }

    /// Imports physical memory another process exported
    /// ([`PhysicalMemory::export_shareable`]); map it like memory created here. The handle
    /// (and its descriptor, if any) may be dropped after the import.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::SHAREABLE_PHYSICAL`];
    /// [`Error::WrongBackend`], [`Error::WrongDevice`] for a handle of another backend or
    /// device; [`Error::InvalidArgument`] in the exporting process, or for a size that is not
    /// a non-zero multiple of the granularity; vendor errors (an export withdrawn or freed, a
    /// process the exporter did not allow).
    fn import_physical(&self, handle: &ShareableHandle) -> Result<PhysicalMemory<Self>>
    where
        Self: Sized,
    {
        check_shareable(self)?;
        handle.check_for(<Self::B as Backend>::KIND, self.info().ordinal)?;
        let g = self.granularity()?;
        let size = handle.size();
        check_size("import_physical", size, g.minimum)?;
        let raw = self.raw_import(handle)?;
        Ok(PhysicalMemory {
            core: Arc::new(PhysCore {
                raw,
                size,
                ordinal: self.info().ordinal,
                dev: self.clone(),
            }),
        })
    }
}

fn check_shareable<D: Device>(d: &D) -> Result<()> {
    check_capable(d)?;
    if d.info()
        .capabilities
        .contains(Capabilities::SHAREABLE_PHYSICAL)
    {
        Ok(())
    } else {
        Err(Error::unsupported(
            <D::B as Backend>::KIND,
            format!(
                "sharing physical memory with another process (device {} lacks \
                 SHAREABLE_PHYSICAL)",
                d.info().ordinal
            ),
        ))
    }
}

fn check_capable<D: Device>(d: &D) -> Result<()> {
    if d.info().capabilities.contains(Capabilities::VIRTUAL_MEMORY) {
        Ok(())
    } else {
        Err(Error::unsupported(
            <D::B as Backend>::KIND,
            format!(
                "virtual memory (device {} lacks VIRTUAL_MEMORY)",
                d.info().ordinal
            ),
        ))
    }
}

fn check_size(op: &str, size: usize, gran: usize) -> Result<()> {
    if size == 0 || !size.is_multiple_of(gran) {
        return Err(Error::invalid(format!(
            "{op}: size {size} is not a non-zero multiple of the granularity {gran}"
        )));
    }
    Ok(())
}

struct PhysCore<D: VirtualMemory> {
    raw: D::Physical,
    size: usize,
    ordinal: usize,
    dev: D,
}

/// Physical memory of a device, not yet (or several times) mapped. A shared handle: clones
/// name the same memory, which is freed when the last handle and the last mapping of it are
/// gone.
pub struct PhysicalMemory<D: VirtualMemory> {
    core: Arc<PhysCore<D>>,
}

impl<D: VirtualMemory> Clone for PhysicalMemory<D> {
    fn clone(&self) -> Self {
        Self {
            core: Arc::clone(&self.core),
        }
    }
}

impl<D: VirtualMemory> PhysicalMemory<D> {
    /// Its size in bytes.
    pub fn size(&self) -> usize {
        self.core.size
    }

    /// The ordinal of the device it was created on.
    pub fn device_ordinal(&self) -> usize {
        self.core.ordinal
    }

    /// The backend's handle.
    pub fn raw(&self) -> &D::Physical {
        &self.core.raw
    }

    /// Drops this handle: the memory is freed now if nothing maps it, else after its last
    /// mapping (never an error: this is the vendors' rule).
    pub fn release(self) {}

    /// Exports the memory for another process, which imports it with
    /// [`VirtualMemory::import_physical`] (see [`crate::vmm_share`] for how the handle
    /// travels). The memory stays this process's: dropping it here does not take it from an
    /// importer.
    ///
    /// # Errors
    /// [`Error::Unsupported`] on a device without [`Capabilities::SHAREABLE_PHYSICAL`];
    /// vendor errors.
    pub fn export_shareable(&self) -> Result<ShareableHandle> {
        let dev = &self.core.dev;
        check_shareable(dev)?;
        let payload = dev.raw_export(&self.core.raw, self.core.size)?;
        ShareableHandle::new(
            <D::B as Backend>::KIND,
            self.core.ordinal,
            self.core.size,
            payload,
        )
    }
}

impl<D: VirtualMemory> fmt::Debug for PhysicalMemory<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PhysicalMemory")
            .field("size", &self.core.size)
            .field("device", &self.core.ordinal)
            .finish()
    }
}

/// One mapping. Field order is drop order: unmap, then release the physical handle, then
/// (after the last mapping) the reservation.
struct MapCore<D: VirtualMemory> {
    mapping: D::Mapping,
    _phys: PhysicalMemory<D>,
    _res: Arc<D::Reservation>,
    size: usize,
    /// Device ordinals granted access.
    access: Access,
}

/// The device ordinals granted access to one mapping: a bit per ordinal below 64 (no lock, no
/// allocation on the map / set-access path), a list for the others.
#[derive(Default)]
struct Access {
    low: AtomicU64,
    high: Mutex<Vec<usize>>,
}

impl Access {
    fn grant(&self, ordinal: usize) {
        if ordinal < 64 {
            self.low.fetch_or(1 << ordinal, Ordering::Relaxed);
        } else {
            let mut h = crate::sync::lock(&self.high);
            if !h.contains(&ordinal) {
                h.push(ordinal);
            }
        }
    }

    fn has(&self, ordinal: usize) -> bool {
        if ordinal < 64 {
            self.low.load(Ordering::Relaxed) & (1 << ordinal) != 0
        } else {
            crate::sync::lock(&self.high).contains(&ordinal)
        }
    }
}

struct RangeCore<D: VirtualMemory> {
    dev: D,
    res: Arc<D::Reservation>,
    address: u64,
    size: usize,
    gran: usize,
    /// Mappings by offset.
    maps: Mutex<BTreeMap<usize, Arc<MapCore<D>>>>,
}

/// A reserved range of device address space (see the module documentation). Dropping it
/// unmaps and releases without blocking; [`VirtualRange::release`] is the checked release.
pub struct VirtualRange<D: VirtualMemory> {
    core: Arc<RangeCore<D>>,
}

impl<D: VirtualMemory> fmt::Debug for VirtualRange<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VirtualRange")
            .field("address", &format_args!("{:#x}", self.core.address))
            .field("size", &self.core.size)
            .field("mappings", &self.lock().len())
            .finish()
    }
}

impl<D: VirtualMemory> VirtualRange<D> {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<usize, Arc<MapCore<D>>>> {
        crate::sync::lock(&self.core.maps)
    }

    /// Its first address.
    pub fn address(&self) -> u64 {
        self.core.address
    }

    /// Its size in bytes.
    pub fn size(&self) -> usize {
        self.core.size
    }

    /// The device it was reserved on.
    pub fn device(&self) -> &D {
        &self.core.dev
    }

    /// The backend's reservation.
    pub fn raw(&self) -> &D::Reservation {
        &self.core.res
    }

    /// The live mappings, as `(offset, size)` in address order.
    pub fn mappings(&self) -> Vec<(usize, usize)> {
        self.lock().iter().map(|(o, m)| (*o, m.size)).collect()
    }

    /// Bytes mapped in total.
    pub fn mapped_bytes(&self) -> usize {
        self.lock().values().map(|m| m.size).sum()
    }

    fn check_offset(&self, op: &str, offset: usize, len: usize) -> Result<()> {
        let g = self.core.gran;
        if !offset.is_multiple_of(g) {
            return Err(Error::invalid(format!(
                "{op}: offset {offset} is not a multiple of the granularity {g}"
            )));
        }
        crate::check_range(op, self.core.size, offset, len)
    }

    /// Maps the whole of `phys` at `offset` (a multiple of the granularity). The mapping is
    /// not accessible until [`VirtualRange::set_access`].
    ///
    /// # Errors
    /// [`Error::WrongDevice`] for memory of another device; [`Error::InvalidArgument`] for an
    /// unaligned offset, a mapping past the end or over an existing mapping; vendor errors.
    pub fn map(&self, offset: usize, phys: &PhysicalMemory<D>) -> Result<()> {
        let ordinal = self.core.dev.info().ordinal;
        if phys.core.ordinal != ordinal {
            return Err(Error::WrongDevice(format!(
                "map: the physical memory belongs to device {}, the range to device {ordinal}",
                phys.core.ordinal
            )));
        }
        let size = phys.size();
        self.check_offset("map", offset, size)?;
        let mut maps = self.lock();
        // The last mapping starting before the end, if it reaches past `offset`, overlaps.
        if let Some((o, m)) = maps.range(..offset + size).next_back() {
            if o + m.size > offset {
                return Err(Error::invalid(format!(
                    "map: bytes {offset}..+{size} overlap the mapping at {o}..+{} (unmap it \
                     first)",
                    m.size
                )));
            }
        }
        let mapping = self.core.dev.raw_map(
            &self.core.res,
            self.core.address + offset as u64,
            &phys.core.raw,
            size,
        )?;
        maps.insert(
            offset,
            Arc::new(MapCore {
                mapping,
                _phys: phys.clone(),
                _res: Arc::clone(&self.core.res),
                size,
                access: Access::default(),
            }),
        );
        Ok(())
    }

    /// Unmaps the mapping that starts at `offset`. The physical memory stays while other
    /// handles or mappings of it live.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] where no mapping starts at `offset`, or while a buffer of
    /// the mapping (or work using one) is alive.
    pub fn unmap(&self, offset: usize) -> Result<()> {
        let mut maps = self.lock();
        let Entry::Occupied(m) = maps.entry(offset) else {
            return Err(Error::invalid(format!(
                "unmap: no mapping starts at offset {offset} (mappings: {:?})",
                maps.iter().map(|(o, m)| (*o, m.size)).collect::<Vec<_>>()
            )));
        };
        let users = Arc::strong_count(m.get()) - 1;
        if users > 0 {
            return Err(Error::invalid(format!(
                "unmap: the mapping at {offset} is used by {users} buffer(s) or their queued \
                 work (drop them and synchronize first)"
            )));
        }
        // Dropped under the lock: the backend's unmap is done before another map can start
        // here.
        m.remove();
        Ok(())
    }

    /// Checks that the mappings cover `offset..offset + len` (`len` > 0) without holes (and,
    /// with `whole`, without cutting one) and returns the offset of the first: the cover is
    /// then `maps.range(first..offset + len)`, with no list built.
    fn covering(
        maps: &BTreeMap<usize, Arc<MapCore<D>>>,
        op: &str,
        offset: usize,
        len: usize,
        whole: bool,
    ) -> Result<usize> {
        let end = offset + len;
        let mut at = offset;
        // The mapping containing `offset` may start before it.
        let first = maps
            .range(..=offset)
            .next_back()
            .filter(|(o, m)| *o + m.size > offset)
            .map(|(o, _)| *o);
        let Some(first) = first else {
            return Err(Error::invalid(format!("{op}: byte {offset} is not mapped")));
        };
        if whole && first != offset {
            return Err(Error::invalid(format!(
                "{op}: offset {offset} cuts the mapping at {first} (whole mappings only)"
            )));
        }
        for (o, m) in maps.range(first..) {
            if at >= end {
                break;
            }
            if *o > at {
                return Err(Error::invalid(format!(
                    "{op}: bytes {at}..{o} are not mapped"
                )));
            }
            at = o + m.size;
        }
        if at < end {
            return Err(Error::invalid(format!(
                "{op}: bytes {at}..{end} are not mapped"
            )));
        }
        if whole && at != end {
            return Err(Error::invalid(format!(
                "{op}: end {end} cuts a mapping ending at {at} (whole mappings only)"
            )));
        }
        Ok(first)
    }

    /// Grants `device` (the range's own, or another device of the backend) read and write
    /// access to the whole mappings in `offset..offset + len`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an unaligned or empty range, a byte not mapped, or a
    /// range that cuts a mapping; vendor errors.
    pub fn set_access(&self, offset: usize, len: usize, device: &D) -> Result<()> {
        self.check_offset("set_access", offset, len)?;
        if len == 0 {
            return Err(Error::invalid("set_access: an empty range"));
        }
        let maps = self.lock();
        let first = Self::covering(&maps, "set_access", offset, len, true)?;
        let peer = device.info().ordinal;
        for (o, m) in maps.range(first..offset + len) {
            self.core.dev.raw_set_access(
                &m.mapping,
                self.core.address + *o as u64,
                m.size,
                device,
            )?;
            m.access.grant(peer);
        }
        Ok(())
    }

    /// A buffer of the backend over `len` bytes from `offset` (any offset: views need no
    /// alignment), all mapped and accessible to the range's device. The mappings under it
    /// stay until the buffer and its work are gone.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a range past the end, a byte not mapped, or access not
    /// granted to the range's device; vendor errors.
    pub fn buffer(&self, offset: usize, len: usize) -> Result<BufferOf<D::B>> {
        crate::check_range("buffer", self.core.size, offset, len)?;
        let maps = self.lock();
        let cover = if len == 0 {
            maps.range(0..0)
        } else {
            let first = Self::covering(&maps, "buffer", offset, len, false)?;
            maps.range(first..offset + len)
        };
        let own = self.core.dev.info().ordinal;
        for (o, m) in cover.clone() {
            if !m.access.has(own) {
                return Err(Error::invalid(format!(
                    "buffer: the mapping at {o} is not accessible to device {own} (set_access \
                     first)"
                )));
            }
        }
        let keep: Vec<Arc<MapCore<D>>> = cover.map(|(_, m)| Arc::clone(m)).collect();
        self.core
            .dev
            .raw_buffer(self.core.address + offset as u64, len, Arc::new(keep))
    }

    /// Releases the range. Refused while mappings are live: nothing is unmapped silently,
    /// and the range comes back with the error. (Dropping the range instead unmaps and
    /// releases, see the module documentation.)
    ///
    /// # Errors
    /// The range and [`Error::InvalidArgument`] while mappings are live.
    pub fn release(self) -> std::result::Result<(), (Self, Error)> {
        let n = self.lock().len();
        if n > 0 {
            let e = Error::invalid(format!(
                "release: the range still has {n} mapping(s) (unmap them first)"
            ));
            return Err((self, e));
        }
        Ok(())
    }
}

// The mapping keep-alive must be shareable across threads (it rides in buffers).
fn _assert_send_sync<D: VirtualMemory>() {
    fn is<T: Send + Sync>() {}
    is::<MapCore<D>>();
    is::<VirtualRange<D>>();
    is::<PhysicalMemory<D>>();
}

#[cfg(test)]
mod tests {
    use super::Access;

    #[test]
    fn access_records_each_ordinal_once_below_and_above_64() {
        let a = Access::default();
        assert!(!a.has(0) && !a.has(63) && !a.has(64));
        for o in [0, 63, 64, 200, 200, 63] {
            a.grant(o);
        }
        assert!(a.has(0) && a.has(63) && a.has(64) && a.has(200));
        assert!(!a.has(1) && !a.has(62) && !a.has(65));
        assert_eq!(*crate::sync::lock(&a.high), vec![64, 200]);
    }
}
