//! Host "device" memory: zero-initialised heap bytes shared by the buffer and the work that
//! uses it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use xstream_core::sync::lock;

use xstream_core::{alloc_size, BackendKind, BufferImpl, Device, Error, RawBuffer, Result};
#[allow(unused_imports)] // doc links
use xstream_core::{Buffer, RawAlloc};

use crate::ipc_mem::{Backing, BufGuard, SharedMem};
use crate::HostBackend;

/// The bytes of one buffer. Work items hold an `Arc` to it, so a buffer dropped while work
/// on it is queued stays alive until that work ran (the stream-drop rule).
pub(crate) struct BufInner {
    /// The heap block: `off` bytes of padding that align the buffer's first byte to
    /// [`BASE_ALIGN`], then its `len` bytes.
    data: Mutex<Vec<u8>>,
    off: usize,
    /// The bytes reserved for the buffer from `off` on (its length rounded up to the granule).
    block: usize,
    addr: u64,
    len: usize,
    /// The device ordinal it was allocated on.
    ordinal: usize,
    /// The file holding its bytes once exported to other processes, or opened from one.
    shared: OnceLock<SharedMem>,
    /// The mapped physical memory holding its bytes, for a buffer of a virtual range.
    vmm: Option<crate::vmm::VmmBacking>,
}

impl std::fmt::Debug for BufInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufInner")
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("len", &self.len)
            .finish()
    }
}

/// The registries behind raw buffers (`xstream_core::raw`), keyed by the address of a heap
/// block: every live block (`LIVE`, for `from_raw_borrowed` and to refuse what is not one),
/// and the blocks handed out by `into_raw` and not taken back (`RAW`, which keeps them
/// alive: the caller owns them).
#[derive(Default)]
struct Registries {
    live: HashMap<u64, Weak<BufInner>>,
    raw: HashMap<u64, Arc<BufInner>>,
}

fn registries() -> MutexGuard<'static, Registries> {
    static R: OnceLock<Mutex<Registries>> = OnceLock::new();
    R.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Registers a new block as live.
pub(crate) fn register(inner: BufInner) -> Arc<BufInner> {
    let a = Arc::new(inner);
    registries().live.insert(a.addr, Arc::downgrade(&a));
    a
}

impl Drop for BufInner {
    fn drop(&mut self) {
        // Runs before the heap block is released, so no new block can have its address yet;
        // the check keeps an entry that is not this block's.
        let mut r = registries();
        if r.live
            .get(&self.addr)
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), self))
        {
            r.live.remove(&self.addr);
        }
    }
}

/// The alignment of the first byte of every host device buffer (`DeviceInfo::base_alignment`):
/// CUDA's guarantee for `cuMemAlloc`, so that code tested on the host meets the strictest
/// vendor's.
pub const BASE_ALIGN: usize = 256;

/// A zeroed heap block holding `size` bytes (`size >= len`) from an offset aligned to
/// [`BASE_ALIGN`], its length set to that offset plus `len`; and the offset.
fn aligned_block(size: usize, len: usize) -> std::result::Result<(Vec<u8>, usize), String> {
    let total = size
        .checked_add(BASE_ALIGN - 1)
        .ok_or_else(|| "too large".to_string())?;
    let mut v = Vec::new();
    v.try_reserve_exact(total).map_err(|e| e.to_string())?;
    v.resize(total, 0);
    let off = (v.as_ptr() as usize).next_multiple_of(BASE_ALIGN) - v.as_ptr() as usize;
    v.truncate(off + len);
    Ok((v, off))
}

impl BufInner {
    pub(crate) fn lock(&self) -> BufGuard<'_> {
        BufGuard::new(
            xstream_core::sync::lock(&self.data),
            self.off,
            match (&self.vmm, self.shared.get()) {
                (Some(v), _) => Some(v as &dyn Backing),
                (None, s) => s.map(|s| s as &dyn Backing),
            },
        )
    }

    /// Its shared file, made with `make` from its current bytes on first use.
    pub(crate) fn share_with(
        &self,
        make: impl FnOnce(&[u8]) -> Result<SharedMem>,
    ) -> Result<&SharedMem> {
        let g = lock(&self.data);
        if let Some(s) = self.shared.get() {
            return Ok(s);
        }
        let s = make(&g[self.off..])?;
        // The data lock is held: nobody else can be setting it.
        Ok(self.shared.get_or_init(|| s))
    }

    /// A buffer of `len` bytes living in another process's shared file.
    pub(crate) fn imported(len: usize, ordinal: usize, shared: SharedMem) -> Result<Self> {
        Self::staged("imported", len, ordinal, OnceLock::from(shared), None)
    }

    /// A buffer of `len` bytes of mapped physical memory (`crate::vmm`): its heap block is
    /// only the staging copy its lock works on (its address, unique, orders the locks);
    /// `vmm` holds the bytes and the virtual address.
    pub(crate) fn mapped(len: usize, ordinal: usize, vmm: crate::vmm::VmmBacking) -> Result<Self> {
        Self::staged("mapped", len, ordinal, OnceLock::new(), Some(vmm))
    }

    /// A buffer whose bytes live elsewhere (`shared` or `vmm`), staged in a heap block.
    fn staged(
        what: &str,
        len: usize,
        ordinal: usize,
        shared: OnceLock<SharedMem>,
        vmm: Option<crate::vmm::VmmBacking>,
    ) -> Result<Self> {
        let (v, off) = aligned_block(len.max(1), len).map_err(|e| Error::OutOfMemory {
            backend: BackendKind::Host,
            detail: format!("{len}-byte {what} buffer: {e}"),
        })?;
        let addr = (v.as_ptr() as usize + off) as u64;
        Ok(Self {
            data: Mutex::new(v),
            off,
            block: len,
            addr,
            len,
            ordinal,
            shared,
            vmm,
        })
    }

    /// The address users see: the virtual address for a mapped buffer, else the heap
    /// block's.
    pub(crate) fn device_address(&self) -> u64 {
        self.vmm.as_ref().map_or(self.addr, |v| v.address())
    }

    /// The lock-order key: the heap block's address (unique among live buffers).
    pub(crate) fn addr(&self) -> u64 {
        self.addr
    }

    pub(crate) fn ordinal(&self) -> usize {
        self.ordinal
    }
}

/// The host backend's device buffer ([`Backend::Buffer`](xstream_core::Backend::Buffer) of
/// [`HostBackend`]): `len` zero-initialised bytes on the heap (in a block rounded up to
/// [`xstream_core::ALLOC_GRANULE`], see [`HostDeviceBuffer::allocated_len`]).
///
/// Not to be confused with [`xstream_core::PinnedBuffer`], page-locked host memory of any
/// backend ([`Device::alloc_pinned`](xstream_core::Device::alloc_pinned)).
///
/// Its [`device_address`](Buffer::device_address) is the address of its heap block: stable
/// for the buffer's life (the block never moves) and unique among live buffers.
#[derive(Debug, Clone)]
pub struct HostDeviceBuffer {
    pub(crate) inner: Arc<BufInner>,
}

impl HostDeviceBuffer {
    pub(crate) fn alloc(len: usize, ordinal: usize) -> Result<Self> {
        // The heap block is rounded up to the allocation granule (docs/semantics.md) and
        // zeroed whole; the vector's length, the buffer's `len`, stays the requested size. A
        // zero-length buffer holds one granule too, so its address is unique (the lock order
        // of multi-buffer work is by address).
        let oom = |detail: String| Error::OutOfMemory {
            backend: BackendKind::Host,
            detail,
        };
        let size =
            alloc_size(len.max(1)).ok_or_else(|| oom(format!("{len}-byte buffer: too large")))?;
        let (v, off) =
            aligned_block(size, len).map_err(|e| oom(format!("{len}-byte buffer: {e}")))?;
        let addr = (v.as_ptr() as usize + off) as u64;
        Ok(Self {
            inner: register(BufInner {
                data: Mutex::new(v),
                off,
                block: size,
                addr,
                len,
                ordinal,
                shared: OnceLock::new(),
                vmm: None,
            }),
        })
    }

    /// The live block a raw descriptor names, checked (ordinal, whole length).
    fn raw_block(
        op: &str,
        found: Option<Arc<BufInner>>,
        device: &crate::HostDevice,
        raw: &RawBuffer,
    ) -> Result<Arc<BufInner>> {
        let inner = found.ok_or_else(|| {
            Error::invalid(format!(
                "{op}: no {} host allocation at {:#x}",
                if op == "from_raw" {
                    "handed-out (into_raw)"
                } else {
                    "live"
                },
                raw.address
            ))
        })?;
        if inner.ordinal != device.info().ordinal {
            return Err(Error::WrongDevice(format!(
                "{op}: the host allocation at {:#x} belongs to device {}",
                raw.address, inner.ordinal
            )));
        }
        if raw.len != inner.len {
            return Err(Error::invalid(format!(
                "{op}: length {} for the {}-byte host allocation at {:#x} (the host backend \
                 takes an allocation only whole: use a view for a part)",
                raw.len, inner.len, raw.address
            )));
        }
        Ok(inner)
    }

    /// The bytes of the heap block underneath: [`len`](Buffer::len) rounded up to
    /// [`xstream_core::ALLOC_GRANULE`] (the slack is zeroed and never written by xstream).
    pub fn allocated_len(&self) -> usize {
        self.inner.block
    }

    pub(crate) fn inner_len(&self) -> usize {
        self.inner.len
    }

    /// A synchronous copy of the whole buffer, for tests and debugging. It does not wait for
    /// queued work: synchronize the streams that write the buffer first.
    pub fn snapshot(&self) -> Vec<u8> {
        self.inner.lock().to_vec()
    }
}

impl BufferImpl for HostDeviceBuffer {
    type B = HostBackend;

    fn len_impl(&self) -> usize {
        self.inner.len
    }

    /// The heap block's address; for a buffer of a virtual range
    /// ([`xstream_core::VirtualRange::buffer`]), the virtual address.
    fn device_address_impl(&self) -> u64 {
        self.inner.device_address()
    }

    fn device_ordinal_impl(&self) -> usize {
        self.inner.ordinal()
    }

    /// Host memory of one ordinal is one device, whichever handle of it opened the buffer.
    fn belongs_to_impl(&self, device: &crate::HostDevice) -> bool {
        self.inner.ordinal() == xstream_core::Device::info(device).ordinal
    }

    /// Keeps the heap block in the backend's registry of handed-out blocks (never freed until
    /// [`Buffer::from_raw`] takes it back); queued work keeps using it. Always
    /// [`RawAlloc::Plain`].
    fn into_raw_impl(self) -> RawBuffer {
        let (addr, len, ordinal) = (self.inner.addr, self.inner.len, self.inner.ordinal);
        let old = registries().raw.insert(addr, self.inner);
        // Dropped outside the lock (a last reference would lock it again); the block is live,
        // so an entry at its address can only be its own.
        drop(old);
        RawBuffer::new(BackendKind::Host, ordinal, addr, len)
    }

    /// Takes back a block handed out by [`Buffer::into_raw`], whole. Anything else is
    /// refused (the host backend's device memory only comes from itself), so on this backend
    /// the call is safe whatever `raw` holds. The block is freed when this buffer and the
    /// work using it (queued before `into_raw` too) are gone.
    ///
    /// # Errors
    /// As [`Buffer::from_raw`] ([`RawAlloc::StreamOrdered`] is refused there: the host
    /// backend has no stream-ordered allocations); [`Error::InvalidArgument`] for an address
    /// that no handed-out block starts at, and for a length other than the block's.
    #[allow(unsafe_code)]
    unsafe fn from_raw_impl(device: &crate::HostDevice, raw: RawBuffer) -> Result<Self> {
        let mut r = registries();
        let inner = Self::raw_block("from_raw", r.raw.get(&raw.address).cloned(), device, &raw)?;
        r.raw.remove(&raw.address);
        Ok(Self { inner })
    }

    /// Wraps a live block of this backend (of a live buffer, or handed out by
    /// [`Buffer::into_raw`]), whole. The buffer holds the block too, so on this backend it
    /// stays valid even should its owner free first; anything that is not a live block is
    /// refused, and the call is safe whatever `raw` holds.
    ///
    /// # Errors
    /// As [`Buffer::from_raw_borrowed`]; [`Error::InvalidArgument`] for an address that no
    /// live block starts at (a zero address included) and a length other than the block's.
    #[allow(unsafe_code)]
    unsafe fn from_raw_borrowed_impl(device: &crate::HostDevice, raw: RawBuffer) -> Result<Self> {
        let found = registries().live.get(&raw.address).and_then(Weak::upgrade);
        let inner = Self::raw_block("from_raw_borrowed", found, device, &raw)?;
        Ok(Self { inner })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    use xstream_core::{Backend, Device, Stream, StreamDesc};

    use crate::HostBackend;

    /// `record_use`: a buffer freed while the marked stream is held keeps its bytes until the
    /// stream passed the mark; unmarked, they go at the free.
    #[test]
    fn record_use_keeps_the_bytes_until_the_marked_stream_passed() {
        for mark in [true, false] {
            let d = HostBackend::open(0).unwrap();
            let s = d.create_stream(&StreamDesc::new()).unwrap();
            let t = d.create_stream(&StreamDesc::new()).unwrap();
            let buf = d.alloc(64).unwrap();
            let weak = Arc::downgrade(&buf.inner);
            let (tx, rx) = mpsc::channel::<()>();
            t.host_callback(move |_| {
                let _ = rx.recv_timeout(Duration::from_secs(10));
            })
            .unwrap();
            if mark {
                t.record_use(&buf).unwrap();
            }
            s.free_async(buf).unwrap();
            assert_eq!(
                weak.upgrade().is_some(),
                mark,
                "mark = {mark}: bytes alive after the free while the marked stream is held"
            );
            tx.send(()).unwrap();
            t.synchronize().unwrap();
            assert!(
                weak.upgrade().is_none(),
                "the bytes outlived the marked work"
            );
        }
    }
}
