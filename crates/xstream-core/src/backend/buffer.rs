//! The `Buffer` trait: device memory of one backend.

#[allow(unused_imports)]
use super::*;

/// A device buffer.
pub trait Buffer: Send + Sync + fmt::Debug + 'static {
    /// The backend.
    type B: Backend<Buffer = Self>;
    /// Its length in bytes.
    fn len(&self) -> usize;
    /// Whether it is empty (zero-length buffers are allowed).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The device address (or host address on the host backend).
    fn device_address(&self) -> u64;
    /// The ordinal of the device the buffer belongs to (allocated on, or wrapping memory of).
    fn device_ordinal(&self) -> usize;
    /// Whether the buffer belongs to `device`: the same device and, where the vendor has
    /// contexts, the same context. Every stream operation checks it (docs/semantics.md, "One
    /// device per buffer").
    fn belongs_to(&self, device: &DeviceOf<Self::B>) -> bool;

    // --- raw buffers (see `crate::raw`) ---

    /// Gives up ownership of the memory without freeing it, and describes it: address,
    /// requested length ([`Buffer::len`], not the granule-rounded allocation), backend,
    /// device ordinal and allocation kind. Never waits. Work already enqueued that uses the
    /// buffer still runs, and xstream never frees the memory after it: the caller now owns
    /// it and must order its free after that work (synchronize the streams that used it,
    /// or the device, before the vendor's free or the drop of a buffer from
    /// [`Buffer::from_raw`]). Clones of the buffer, where the backend has them, stay
    /// usable but no longer free the memory either. See [`crate::raw`].
    fn into_raw(self) -> RawBuffer
    where
        Self: Sized;

    /// Takes ownership of `raw` (from [`Buffer::into_raw`] or allocated by foreign code
    /// with the vendor's allocator): the buffer frees it at drop with the free matching
    /// [`RawBuffer::alloc`] (`cuMemFree` / `cuMemFreeAsync`, `aclrtFree`, the host
    /// backend's heap), ordered after the work xstream enqueues on it (the buffer lifetime
    /// rule).
    ///
    /// # Safety
    /// `raw` must describe one live allocation of `device`, made by the allocator that
    /// [`RawBuffer::alloc`] names, starting at [`RawBuffer::address`] and at least
    /// [`RawBuffer::len`] bytes long, that nobody else frees or owns from now on. Work that
    /// used it before (through xstream before `into_raw`, or foreign work) is not tracked:
    /// it must be complete, or ordered before any work xstream enqueues on the buffer and
    /// before the buffer's drop. xstream assumes no slack past `len`. What a backend can
    /// check it refuses (below); the rest is the caller's promise.
    ///
    /// # Errors
    /// As [`RawBuffer::check_for`] (another backend, another device, a zero address);
    /// where the backend can tell: [`Error::InvalidArgument`] for memory that is not the
    /// start of a live allocation, a length past it, or an allocation kind the backend does
    /// not have.
    #[allow(unsafe_code)]
    unsafe fn from_raw(device: &DeviceOf<Self::B>, raw: RawBuffer) -> Result<Self>
    where
        Self: Sized;

    /// Wraps memory xstream does not own (a foreign tensor's storage, or memory still owned
    /// through a [`RawBuffer`]) as a buffer that never frees it. [`RawBuffer::alloc`] is
    /// ignored. The buffer works in every stream operation like any other.
    ///
    /// # Safety
    /// `raw` must describe `raw.len` bytes of live device memory of `device` starting at
    /// `raw.address`, and its owner must keep it valid (not free, not reuse) until this
    /// buffer, its clones and all work using it are gone. xstream assumes no slack past
    /// `len`.
    ///
    /// # Errors
    /// As [`Buffer::from_raw`], except that a zero address is taken when the length is zero.
    #[allow(unsafe_code)]
    unsafe fn from_raw_borrowed(device: &DeviceOf<Self::B>, raw: RawBuffer) -> Result<Self>
    where
        Self: Sized;

    // --- end of raw buffers ---

    // --- views and typed copies ---

    /// A view of the whole buffer.
    fn view(&self) -> BufferView<'_, Self>
    where
        Self: Sized,
    {
        BufferView::new(self)
    }

    /// The whole buffer as a typed slice of `T`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the length is not a whole number of elements or `T`
    /// is zero-sized.
    fn typed<T: bytemuck::Pod>(&self) -> Result<DeviceSlice<'_, T, Self>>
    where
        Self: Sized,
    {
        DeviceSlice::new(self)
    }
}

/// The granularity, in bytes, to which every backend rounds the allocation underneath a device
/// buffer (plain, stream-ordered and pooled alike). A buffer's [`Buffer::len`] stays the
/// requested length and every bounds check uses it; only the memory below is larger.
///
/// Why: vendor libraries read user buffers in whole words (NCCL rounds its reads of user data
/// up to a multiple of 16 bytes, so an f16 buffer of odd length is over-read past its end), and
/// PyTorch's caching allocator, which those libraries are exercised with, never hands out a
/// block that is not a multiple of 512 bytes. 512 also keeps every block a multiple of the
/// 256-byte alignment `cuMemAlloc` guarantees. See docs/semantics.md ("Allocation granularity").
pub const ALLOC_GRANULE: usize = 512;

/// The bytes a backend allocates underneath a buffer of `len` bytes: `len` rounded up to
/// [`ALLOC_GRANULE`]; `None` when that overflows `usize`.
pub fn alloc_size(len: usize) -> Option<usize> {
    len.checked_next_multiple_of(ALLOC_GRANULE)
}
