//! Virtual memory on the host ([`VirtualMemory`] for [`HostDevice`]), an emulation that keeps
//! the crate free of `unsafe` (no `mmap`):
//! - a reservation is a heap allocation of the range's size that is never touched (address
//!   space only: the system commits no page of it), so its addresses are unique among the
//!   process's memory;
//! - physical memory is a zeroed heap block shared by its mappings;
//! - a mapping records which physical block backs which addresses;
//! - a buffer of mapped bytes works like every host buffer: its lock loads the bytes from the
//!   physical blocks under it and writes back those that changed when released (as an
//!   interprocess buffer does with its file), so one physical block mapped twice shows the
//!   same bytes at both addresses.
//!
//! Access needs no grant on the host (every device is the process's memory); the portable
//! rule (no buffer before `set_access`) is still checked by `xstream_core::vmm`.
//!
//! Sharing with another process ([`Capabilities::SHAREABLE_PHYSICAL`]): an export moves the
//! physical block's bytes into a file of the shared-memory file system, as an exported
//! interprocess buffer's (`crate::ipc_mem`), and the handle's payload is the file's name; from
//! then on buffers over the memory read and write the file (only the bytes that changed, so
//! processes writing disjoint bytes never undo each other's writes). An import opens the
//! file. The exporter's last handle and mapping gone, the file is removed; an importer keeps
//! the bytes it has open.
//!
//! [`Capabilities::SHAREABLE_PHYSICAL`]: xstream_core::Capabilities::SHAREABLE_PHYSICAL

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use xstream_core::sync::lock;

use xstream_core::{
    BackendKind, Device as _, Error, Granularity, Result, ShareableHandle, ShareablePayload,
    VirtualMemory,
};

use crate::buffer::BufInner;
use crate::ipc_mem::{Backing, SharedMem};
use crate::{HostDevice, HostDeviceBuffer};

/// The host's granularity, minimum and recommended: 2 MiB, the common value of the vendors
/// (so that sizes chosen on the host hold on a GPU or NPU).
pub const HOST_VMM_GRANULARITY: usize = 2 << 20;

/// Where physical bytes live: the heap, or (once shared with another process) a file.
enum Store {
    Heap(Vec<u8>),
    File(SharedMem),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Store::Heap(v) => write!(f, "Heap({} bytes)", v.len()),
            Store::File(m) => write!(f, "File({})", m.name()),
        }
    }
}

impl Store {
    /// Reads `into.len()` bytes from `off`.
    fn read(&self, off: usize, into: &mut [u8]) {
        match self {
            Store::Heap(v) => into.copy_from_slice(&v[off..off + into.len()]),
            Store::File(m) => m.load_at(off, into),
        }
    }

    /// Writes the bytes of `is` that differ from `was` (what a buffer loaded from `off`).
    fn merge(&mut self, off: usize, was: &[u8], is: &[u8]) {
        let g = match self {
            Store::Heap(v) => v,
            Store::File(m) => return m.store_at(off, was, is),
        };
        // Page by page: a changed page whose physical bytes are still what was loaded is
        // copied whole; else only its changed bytes (another buffer mapping the same memory
        // may have written others meanwhile).
        for c in (0..is.len()).step_by(4096) {
            let e = (c + 4096).min(is.len());
            if was[c..e] == is[c..e] {
                continue;
            }
            let dst = &mut g[off + c..off + e];
            if dst == &was[c..e] {
                dst.copy_from_slice(&is[c..e]);
                continue;
            }
            for (i, (x, y)) in was[c..e].iter().zip(&is[c..e]).enumerate() {
                if x != y {
                    dst[i] = *y;
                }
            }
        }
    }
}

type Bytes = Arc<Mutex<Store>>;

/// A reserved range: untouched heap capacity.
pub struct HostReservation {
    _space: Vec<u8>,
}

impl std::fmt::Debug for HostReservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostReservation").finish_non_exhaustive()
    }
}

/// Physical memory: a zeroed heap block, or the file of a shared one.
#[derive(Debug)]
pub struct HostPhysical {
    bytes: Bytes,
}

/// A mapping: registered by address until dropped.
#[derive(Debug)]
pub struct HostMapping {
    address: u64,
}

/// Every live mapping by first address: its size and bytes.
fn table() -> MutexGuard<'static, BTreeMap<u64, (usize, Bytes)>> {
    static T: OnceLock<Mutex<BTreeMap<u64, (usize, Bytes)>>> = OnceLock::new();
    T.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

impl Drop for HostMapping {
    fn drop(&mut self) {
        table().remove(&self.address);
    }
}

/// The physical bytes under a buffer of a virtual range: `(bytes, offset in them, length)` in
/// address order.
pub(crate) struct VmmBacking {
    address: u64,
    segments: Vec<(Bytes, usize, usize)>,
    _keep: Arc<dyn Any + Send + Sync>,
}

impl VmmBacking {
    pub(crate) fn address(&self) -> u64 {
        self.address
    }
}

impl Backing for VmmBacking {
    fn load(&self, into: &mut [u8]) {
        let mut at = 0;
        for (b, off, len) in &self.segments {
            lock(b).read(*off, &mut into[at..at + len]);
            at += len;
        }
    }

    fn store(&self, before: &[u8], now: &[u8]) {
        let mut at = 0;
        for (b, off, len) in &self.segments {
            let (was, is) = (&before[at..at + len], &now[at..at + len]);
            if was != is {
                lock(b).merge(*off, was, is);
            }
            at += len;
        }
    }
}

fn oom(what: String) -> Error {
    Error::OutOfMemory {
        backend: BackendKind::Host,
        detail: what,
    }
}

impl VirtualMemory for HostDevice {
    type Reservation = HostReservation;
    type Physical = HostPhysical;
    type Mapping = HostMapping;

    fn raw_granularity(&self) -> Result<Granularity> {
        Ok(Granularity {
            minimum: HOST_VMM_GRANULARITY,
            recommended: HOST_VMM_GRANULARITY,
        })
    }

    fn raw_reserve(&self, size: usize, align: usize) -> Result<(HostReservation, u64)> {
        let total = size
            .checked_add(align)
            .ok_or_else(|| oom(format!("reserve of {size} bytes: too large")))?;
        let mut space: Vec<u8> = Vec::new();
        space
            .try_reserve_exact(total)
            .map_err(|e| oom(format!("reserve of {size} bytes: {e}")))?;
        let base = space.as_ptr() as usize;
        let address = base.next_multiple_of(align) as u64;
        Ok((HostReservation { _space: space }, address))
    }

    fn raw_create(&self, size: usize) -> Result<HostPhysical> {
        let mut v = Vec::new();
        v.try_reserve_exact(size)
            .map_err(|e| oom(format!("physical memory of {size} bytes: {e}")))?;
        v.resize(size, 0);
        Ok(HostPhysical {
            bytes: Arc::new(Mutex::new(Store::Heap(v))),
        })
    }

    fn raw_export(&self, phys: &HostPhysical, _size: usize) -> Result<ShareablePayload> {
        let mut g = lock(&phys.bytes);
        if let Store::Heap(v) = &*g {
            let file = SharedMem::create(v)?;
            *g = Store::File(file);
        }
        let Store::File(m) = &*g else {
            return Err(Error::invalid("host physical memory: export failed"));
        };
        Ok(ShareablePayload {
            bytes: m.name().as_bytes().to_vec(),
            fd: None,
        })
    }

    fn raw_import(&self, handle: &ShareableHandle) -> Result<HostPhysical> {
        let m = SharedMem::open_named(handle.payload(), 0, handle.size() as u64)?;
        Ok(HostPhysical {
            bytes: Arc::new(Mutex::new(Store::File(m))),
        })
    }

    fn raw_map(
        &self,
        _res: &HostReservation,
        address: u64,
        phys: &HostPhysical,
        size: usize,
    ) -> Result<HostMapping> {
        table().insert(address, (size, Arc::clone(&phys.bytes)));
        Ok(HostMapping { address })
    }

    fn raw_set_access(
        &self,
        _map: &HostMapping,
        _address: u64,
        _size: usize,
        _peer: &HostDevice,
    ) -> Result<()> {
        Ok(())
    }

    fn raw_buffer(
        &self,
        address: u64,
        len: usize,
        keep: Arc<dyn Any + Send + Sync>,
    ) -> Result<HostDeviceBuffer> {
        let mut segments = Vec::new();
        let end = address + len as u64;
        let mut at = address;
        {
            let t = table();
            while at < end {
                let (start, (size, bytes)) = t
                    .range(..=at)
                    .next_back()
                    .filter(|(s, (n, _))| **s + *n as u64 > at)
                    .ok_or_else(|| {
                        Error::invalid(format!("host virtual memory: {at:#x} is not mapped"))
                    })?;
                let off = (at - start) as usize;
                let n = (size - off).min((end - at) as usize);
                segments.push((Arc::clone(bytes), off, n));
                at += n as u64;
            }
        }
        let backing = VmmBacking {
            address,
            segments,
            _keep: keep,
        };
        Ok(HostDeviceBuffer {
            inner: Arc::new(BufInner::mapped(len, self.info().ordinal, backing)?),
        })
    }
}
