//! The `Buffer` trait: what users call on device memory, with every check of its operations
//! (the callback gate and the rules of a [`RawBuffer`] taken in), implemented for every
//! backend's [`BufferImpl`] by the blanket impl below and by nothing else.

use crate::backend::{BufferImpl, Capabilities, DeviceOf};
use crate::callback::ensure_not_in_callback;
use crate::raw::{RawAlloc, RawBuffer};
use crate::view::{BufferView, DeviceSlice};
#[allow(unused_imports)]
use crate::Error;
use crate::{Backend, Device, Result};

/// A device buffer.
pub trait Buffer: BufferImpl {
    /// Its length in bytes.
    fn len(&self) -> usize {
        self.len_impl()
    }
    /// Whether it is empty (zero-length buffers are allowed).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The device address (or host address on the host backend).
    fn device_address(&self) -> u64 {
        self.device_address_impl()
    }
    /// The ordinal of the device the buffer belongs to (allocated on, or wrapping memory of).
    fn device_ordinal(&self) -> usize {
        self.device_ordinal_impl()
    }
    /// Whether the buffer belongs to `device`: the same device and, where the vendor has
    /// contexts, the same context. Every stream operation checks it (docs/semantics.md, "One
    /// device per buffer").
    fn belongs_to(&self, device: &DeviceOf<Self::B>) -> bool {
        self.belongs_to_impl(device)
    }

    // --- raw buffers (see `crate::raw`) ---

    /// Gives up ownership of the memory without freeing it, and describes it: address,
    /// requested length ([`Buffer::len`], not the granule-rounded allocation), backend,
    /// device ordinal and allocation kind. Never waits. Work already enqueued that uses the
    /// buffer still runs, and xstream never frees the memory after it: the caller now owns
    /// it and must order its free after that work (synchronize the streams that used it,
    /// or the device, before the vendor's free or the drop of a buffer from
    /// [`Buffer::from_raw`]). Clones of the buffer, where the backend has them, stay
    /// usable but no longer free the memory either. See [`crate::raw`].
    fn into_raw(self) -> RawBuffer {
        self.into_raw_impl()
    }

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
    /// [`Error::InvalidArgument`] for [`RawAlloc::StreamOrdered`] on a device without
    /// [`Capabilities::STREAM_ORDERED_ALLOC`]; [`Error::NotPermitted`] inside a
    /// stream-blocking host callback; where the backend can tell:
    /// [`Error::InvalidArgument`] for memory that is not the start of a live allocation or a
    /// length past it.
    #[allow(unsafe_code)]
    unsafe fn from_raw(device: &DeviceOf<Self::B>, raw: RawBuffer) -> Result<Self> {
        check_raw::<Self>(device, &raw, true)?;
        // SAFETY: the caller keeps this function's contract, which is the backend's.
        unsafe { Self::from_raw_impl(device, raw) }
    }

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
    /// As [`Buffer::from_raw`], except that a zero address is taken when the length is zero
    /// and the allocation kind is not looked at.
    #[allow(unsafe_code)]
    unsafe fn from_raw_borrowed(device: &DeviceOf<Self::B>, raw: RawBuffer) -> Result<Self> {
        check_raw::<Self>(device, &raw, false)?;
        // SAFETY: the caller keeps this function's contract, which is the backend's.
        unsafe { Self::from_raw_borrowed_impl(device, raw) }
    }

    // --- end of raw buffers ---

    // --- views and typed copies ---

    /// A view of the whole buffer.
    fn view(&self) -> BufferView<'_, Self> {
        BufferView::new(self)
    }

    /// The whole buffer as a typed slice of `T`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the length is not a whole number of elements or `T`
    /// is zero-sized.
    fn typed<T: bytemuck::Pod>(&self) -> Result<DeviceSlice<'_, T, Self>> {
        DeviceSlice::new(self)
    }
}

impl<T: BufferImpl> Buffer for T {}

/// The checks of [`Buffer::from_raw`] (`owned`) and [`Buffer::from_raw_borrowed`]: the
/// callback gate, the descriptor's fields ([`RawBuffer::check_for`]), and for an owned buffer
/// an allocation kind the device has.
fn check_raw<Buf: BufferImpl>(
    device: &DeviceOf<Buf::B>,
    raw: &RawBuffer,
    owned: bool,
) -> Result<()> {
    ensure_not_in_callback()?;
    let info = device.info();
    raw.check_for(<Buf::B as Backend>::KIND, info.ordinal, owned)?;
    if owned
        && raw.alloc == RawAlloc::StreamOrdered
        && !info
            .capabilities
            .contains(Capabilities::STREAM_ORDERED_ALLOC)
    {
        return Err(Error::invalid(format!(
            "from_raw: {} device {} has no stream-ordered allocation, so no memory of it is \
             RawAlloc::StreamOrdered",
            <Buf::B as Backend>::KIND,
            info.ordinal
        )));
    }
    Ok(())
}
