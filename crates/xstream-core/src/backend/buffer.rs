//! The `BufferImpl` trait: what a backend implements for its device memory.

#[allow(unused_imports)]
use super::*;

/// The backend's device buffer. Every method is required and does no checks of its own: users
/// call [`Buffer`] (`crate::api::buffer`), implemented for every `BufferImpl` by core, which has
/// refused calls from inside a stream-blocking host callback and checked a [`RawBuffer`]'s
/// backend, device, address and allocation kind before it calls a method here. `x_impl` is the
/// backend's side of `Buffer::x`, whose docs say what it does and which errors it gives.
pub trait BufferImpl: Sized + Send + Sync + fmt::Debug + 'static {
    /// The backend.
    type B: Backend<Buffer = Self>;

    /// [`Buffer::len`].
    fn len_impl(&self) -> usize;
    /// [`Buffer::device_address`].
    fn device_address_impl(&self) -> u64;
    /// [`Buffer::device_ordinal`].
    fn device_ordinal_impl(&self) -> usize;
    /// [`Buffer::belongs_to`].
    fn belongs_to_impl(&self, device: &DeviceOf<Self::B>) -> bool;

    /// [`Buffer::into_raw`].
    fn into_raw_impl(self) -> RawBuffer;

    /// [`Buffer::from_raw`]: `raw` is of this backend and `device`'s ordinal, its address is
    /// not zero, and a [`RawAlloc::StreamOrdered`](crate::RawAlloc::StreamOrdered) kind only
    /// comes where the device has [`Capabilities::STREAM_ORDERED_ALLOC`]. The backend checks
    /// what only it can (the allocation's extent).
    ///
    /// # Safety
    /// As [`Buffer::from_raw`].
    #[allow(unsafe_code)]
    unsafe fn from_raw_impl(device: &DeviceOf<Self::B>, raw: RawBuffer) -> Result<Self>;

    /// [`Buffer::from_raw_borrowed`]: `raw` is of this backend and `device`'s ordinal, and
    /// its address is zero only for a zero length.
    ///
    /// # Safety
    /// As [`Buffer::from_raw_borrowed`].
    #[allow(unsafe_code)]
    unsafe fn from_raw_borrowed_impl(device: &DeviceOf<Self::B>, raw: RawBuffer) -> Result<Self>;
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
