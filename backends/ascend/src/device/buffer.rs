//! Device buffers of the Ascend backend: what a buffer owns (its block, or its place in a
//! stream-ordered pool or a virtual range) and how it is freed without blocking.

#[allow(unused_imports)]
use super::*;

pub(crate) struct BufInner {
    pub(crate) device: AscendDevice,
    pub(crate) ptr: DevPtr,
    pub(crate) len: usize,
    /// Set for buffers from `alloc_async`.
    pub(crate) ordered: Option<crate::blocks::Ordered>,
    /// Not xstream's to free: handed out by `into_raw`, or borrowed (`from_raw_borrowed`).
    pub(crate) leaked: std::sync::atomic::AtomicBool,
    /// For a buffer of a virtual range (`crate::vmm`): the mappings under it, dropped (not
    /// freed) once the device's queued work is done.
    pub(crate) mapped: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl Drop for BufInner {
    fn drop(&mut self) {
        if self.leaked.load(std::sync::atomic::Ordering::Acquire) {
            // The caller owns the memory (or, for an imported buffer, its close).
            return;
        }
        if let Some(keep) = self.mapped.take() {
            let device = self.device.clone();
            reap(Box::new(move || {
                let d = &device.inner;
                if d.bind().is_ok() {
                    let _ = result::device::synchronize(d.t);
                }
                drop(keep);
            }));
            return;
        }
        if crate::ipc_mem::close_if_import(&self.device, self.ptr) {
            return;
        }
        let cache = &self.device.inner.blocks;
        let device = self.device.clone();
        let ptr = self.ptr;
        if let Some(o) = self.ordered.take() {
            let rel = lock(&o.release).take();
            if let Some(rel) = rel {
                // Freed with free_async: the events order every reuse (no runtime call here).
                cache.put(ptr, o.size, rel);
                return;
            }
            if o.freed.load(std::sync::atomic::Ordering::Acquire) {
                // free_async could not order the release by events: the conservative way.
                reap(Box::new(move || {
                    let d = &device.inner;
                    if d.bind().is_ok() {
                        let _ = result::device::synchronize(d.t);
                        let _ = result::memory::free(d.t, ptr);
                    }
                }));
                return;
            }
            // Dropped without free_async: released in its allocating stream's order, as a
            // free_async there would (release events, then the cache), on the reaper thread
            // (the dropping thread may be inside a callback, where no runtime call is made);
            // the conservative way only when that stream cannot take a record.
            reap(Box::new(move || {
                let d = &device.inner;
                if d.bind().is_err() {
                    return;
                }
                match o.record_release_on_owner(d.t, &d.blocks) {
                    Ok(rel) => {
                        d.blocks.put(ptr, o.size, rel);
                        d.blocks.enforce_threshold(d.t);
                    }
                    Err(crate::blocks::Conservative) => {
                        let _ = result::device::synchronize(d.t);
                        let _ = result::memory::free(d.t, ptr);
                    }
                }
            }));
            return;
        }
        // aclrtFree is not stream-ordered: defer it until the device's pending work is done,
        // on the reaper thread (never blocks the dropping thread).
        reap(Box::new(move || {
            let d = &device.inner;
            if d.bind().is_ok() {
                let _ = result::device::synchronize(d.t);
                let _ = result::memory::free(d.t, ptr);
            }
        }));
    }
}

/// `aclrtMallocHost` has no flags: its memory is usable by every device of the process
/// (PORTABLE is inherent); mapping into the device address space and write-combining are not
/// offered.
pub const ACL_PINNED_FLAGS: &[xstream_core::PinnedFlagRow] = &[
    xstream_core::PinnedFlagRow::native(xstream_core::PinnedFlags::PORTABLE, 0),
    xstream_core::PinnedFlagRow::unsupported(
        xstream_core::PinnedFlags::DEVICE_MAPPED,
        "aclrtMallocHost has no mapping flag",
    ),
    xstream_core::PinnedFlagRow::unsupported(
        xstream_core::PinnedFlags::WRITE_COMBINED,
        "aclrtMallocHost has no write-combining flag",
    ),
];

/// The former name of [`ACL_PINNED_FLAGS`].
#[deprecated(since = "0.2.0", note = "renamed `ACL_PINNED_FLAGS`")]
pub const ACL_HOST_MEM_FLAGS: &[xstream_core::PinnedFlagRow] = ACL_PINNED_FLAGS;

/// Device memory from `aclrtMalloc` (`ACL_MEM_MALLOC_HUGE_FIRST`), asked for its length rounded
/// up to [`xstream_core::ALLOC_GRANULE`] (stream-ordered buffers: to their size class, also a
/// multiple of it); [`Buffer::len`] is the requested length. Dropping it frees it with
/// `aclrtFree` on the reaper thread once the device's queued work has completed. A buffer from
/// `alloc_async` given back with `free_async` goes to the device's block cache instead
/// (stream-ordered reuse, see [`crate::blocks`]).
#[derive(Clone)]
pub struct AscendBuffer {
    pub(crate) inner: Arc<BufInner>,
}

impl std::fmt::Debug for AscendBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AscendBuffer")
            .field("ptr", &self.inner.ptr)
            .field("len", &self.inner.len)
            .finish()
    }
}

impl AscendBuffer {
    /// The raw device pointer (ACL-only extension).
    pub fn as_raw(&self) -> DevPtr {
        self.inner.ptr
    }
    /// The device it lives on.
    pub fn device(&self) -> &AscendDevice {
        &self.inner.device
    }
}

impl BufferImpl for AscendBuffer {
    type B = AscendBackend;
    fn len_impl(&self) -> usize {
        self.inner.len
    }
    fn device_address_impl(&self) -> u64 {
        self.inner.ptr.0 as u64
    }
    fn device_ordinal_impl(&self) -> usize {
        self.inner.device.inner.info.ordinal
    }
    /// The same opened device (one ACL context per device handle).
    fn belongs_to_impl(&self, device: &AscendDevice) -> bool {
        self.inner.device.same(device)
    }

    /// Marks the memory as not xstream's: no drop (of this buffer, a clone or the work
    /// queued on it) frees it, returns it to the block cache or closes its import. Always
    /// [`RawAlloc::Plain`]: a buffer from `alloc_async` is a whole `aclrtMalloc` block of
    /// the cache (ACL has no stream-ordered allocation), freed with `aclrtFree`; the streams
    /// tracked as its users are forgotten. An imported interprocess buffer is handed over as
    /// an import: its release is `aclrtIpcMemClose`, not `aclrtFree`.
    fn into_raw_impl(self) -> RawBuffer {
        let i = &self.inner;
        i.leaked.store(true, std::sync::atomic::Ordering::Release);
        RawBuffer::new(
            BackendKind::Ascend,
            i.device.inner.info.ordinal,
            i.ptr.0 as u64,
            i.len,
        )
    }

    /// Freed at drop with `aclrtFree` on the reaper thread once the device's queued work
    /// completed (as a buffer from [`Device::alloc`](xstream_core::Device::alloc)). ACL has
    /// no query for an allocation's extent: beyond the descriptor's fields, nothing is
    /// checked (the address and length are the caller's promise).
    ///
    /// # Errors
    /// As [`Buffer::from_raw`] (which refuses [`RawAlloc::StreamOrdered`]: ACL has no
    /// stream-ordered allocation).
    #[allow(unsafe_code)]
    unsafe fn from_raw_impl(device: &AscendDevice, raw: RawBuffer) -> Result<Self> {
        Ok(raw_buffer(device, &raw, false))
    }

    /// Never freed. ACL has no query for an allocation's extent: beyond the descriptor's
    /// fields, nothing is checked.
    ///
    /// # Errors
    /// As [`Buffer::from_raw_borrowed`].
    #[allow(unsafe_code)]
    unsafe fn from_raw_borrowed_impl(device: &AscendDevice, raw: RawBuffer) -> Result<Self> {
        Ok(raw_buffer(device, &raw, true))
    }
}

/// A buffer over `raw`'s memory; `leaked`: never freed.
pub(crate) fn raw_buffer(device: &AscendDevice, raw: &RawBuffer, leaked: bool) -> AscendBuffer {
    AscendBuffer {
        inner: Arc::new(BufInner {
            device: device.clone(),
            ptr: DevPtr(raw.address as usize as *mut std::ffi::c_void),
            len: raw.len,
            ordered: None,
            leaked: std::sync::atomic::AtomicBool::new(leaked),
            mapped: None,
        }),
    }
}
