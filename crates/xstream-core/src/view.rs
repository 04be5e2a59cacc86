//! Views of device buffers: [`BufferView`] (a byte range) and [`DeviceSlice`] (a typed range).
//!
//! A view borrows its buffer: it is a reference, a byte offset and a length, `Copy`, and costs
//! nothing to make, slice or split. Every check happens when the view is made, so an operation
//! that takes a view needs no range check of its own beyond what the backend does anyway:
//! - a range outside the buffer is [`Error::InvalidArgument`] naming the range;
//! - a typed slice's byte offset must be a multiple of `align_of::<T>()` and its byte length a
//!   multiple of `size_of::<T>()`, else [`Error::InvalidArgument`]; zero-sized `T` is refused.
//!
//! Stream operations take `impl Into<BufferView<'_, Buf>>`: a `&Buf` (the whole buffer), a
//! [`BufferView`] or a [`DeviceSlice`]. Kernels take a view through
//! [`KernelArg::View`](crate::KernelArg::View): the kernel sees the buffer's address plus the
//! offset on CUDA and Ascend, and the sub-range on the host backend.
//!
//! Several views of one buffer may exist at once, overlapping or not; what work on them may do
//! concurrently is the aliasing rule of docs/semantics.md ("Views and aliasing").

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

use crate::{Buffer, Error, Result};

/// What a view needs of the memory it borrows: its length and base address. Every
/// [`Buffer`] is one; the facade's type-erased buffer is one too, so [`BufferView`] and
/// [`DeviceSlice`] work over it unchanged.
pub trait Viewable {
    /// Its length in bytes.
    fn byte_len(&self) -> usize;
    /// Its base address (device address; host address on the host backend).
    fn base_address(&self) -> u64;
}

impl<T: Buffer> Viewable for T {
    fn byte_len(&self) -> usize {
        self.len()
    }
    fn base_address(&self) -> u64 {
        self.device_address()
    }
}

/// A byte range of a device buffer, borrowed.
pub struct BufferView<'a, Buf> {
    buf: &'a Buf,
    offset: usize,
    len: usize,
}

impl<Buf> Clone for BufferView<'_, Buf> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Buf> Copy for BufferView<'_, Buf> {}

impl<Buf: fmt::Debug> fmt::Debug for BufferView<'_, Buf> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferView")
            .field("buffer", self.buf)
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

/// `start..end` of `range` within `0..len`, or an error naming `what`.
fn bounds(what: &str, range: impl RangeBounds<usize>, len: usize) -> Result<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => Some(s),
        Bound::Excluded(&s) => s.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => Some(len),
    };
    match (start, end) {
        (Some(s), Some(e)) if s <= e && e <= len => Ok((s, e)),
        _ => Err(Error::invalid(format!(
            "{what}: range {:?}..{:?} is outside 0..{len}",
            range.start_bound(),
            range.end_bound()
        ))),
    }
}

impl<'a, Buf> BufferView<'a, Buf> {
    /// The buffer it views.
    pub const fn buffer(&self) -> &'a Buf {
        self.buf
    }

    /// Its first byte's offset in the buffer.
    pub const fn offset(&self) -> usize {
        self.offset
    }

    /// Its length in bytes.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no byte.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `len` bytes of `buf` from `offset`, a range the caller has checked to be inside the
    /// buffer (the checked stream operations, which hand it to the backend).
    pub(crate) const fn checked(buf: &'a Buf, offset: usize, len: usize) -> Self {
        Self { buf, offset, len }
    }

    /// The same range over `buf`, which must be the viewed buffer seen through another type
    /// (same memory, same length): the range is not checked again.
    pub(crate) const fn rebind<B2>(self, buf: &'a B2) -> BufferView<'a, B2> {
        BufferView {
            buf,
            offset: self.offset,
            len: self.len,
        }
    }
}

impl<'a, Buf: Viewable> BufferView<'a, Buf> {
    /// The whole buffer.
    pub fn new(buf: &'a Buf) -> Self {
        Self {
            buf,
            offset: 0,
            len: buf.byte_len(),
        }
    }

    /// `len` bytes of `buf` from `offset`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the range is not inside the buffer.
    pub fn range(buf: &'a Buf, offset: usize, len: usize) -> Result<Self> {
        crate::check_range("view", buf.byte_len(), offset, len)?;
        Ok(Self { buf, offset, len })
    }

    /// The address of its first byte: the buffer's device address plus the offset.
    pub fn device_address(&self) -> u64 {
        self.buf.base_address().wrapping_add(self.offset as u64)
    }

    /// The sub-range `range` (in bytes, relative to this view).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the range is not inside the view.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<Self> {
        let (s, e) = bounds("BufferView::slice", range, self.len)?;
        Ok(Self {
            buf: self.buf,
            offset: self.offset + s,
            len: e - s,
        })
    }

    /// The bytes before `mid` and from `mid` on.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `mid > len`.
    pub fn split_at(&self, mid: usize) -> Result<(Self, Self)> {
        Ok((self.slice(..mid)?, self.slice(mid..)?))
    }

    /// The same bytes as a slice of `T`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a misaligned offset, a length that is not a whole number
    /// of elements, or a zero-sized `T`.
    pub fn typed<T: bytemuck::Pod>(&self) -> Result<DeviceSlice<'a, T, Buf>> {
        DeviceSlice::from_view(*self)
    }
}

impl<'a, Buf: Viewable> From<&'a Buf> for BufferView<'a, Buf> {
    fn from(buf: &'a Buf) -> Self {
        Self::new(buf)
    }
}

/// A typed range of a device buffer, borrowed: `len()` elements of `T` from a byte offset that
/// is a multiple of `align_of::<T>()`.
pub struct DeviceSlice<'a, T, Buf> {
    view: BufferView<'a, Buf>,
    _t: PhantomData<fn() -> T>,
}

impl<T, Buf> Clone for DeviceSlice<'_, T, Buf> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, Buf> Copy for DeviceSlice<'_, T, Buf> {}

impl<T, Buf: fmt::Debug> fmt::Debug for DeviceSlice<'_, T, Buf> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceSlice")
            .field("type", &std::any::type_name::<T>())
            .field("buffer", self.view.buf)
            .field("offset", &self.view.offset)
            .field("bytes", &self.view.len)
            .finish()
    }
}

impl<'a, T: bytemuck::Pod, Buf: Viewable> DeviceSlice<'a, T, Buf> {
    /// The whole buffer as elements of `T`.
    ///
    /// # Errors
    /// As [`BufferView::typed`].
    pub fn new(buf: &'a Buf) -> Result<Self> {
        Self::from_view(BufferView::new(buf))
    }

    /// `view` as elements of `T`.
    ///
    /// # Errors
    /// As [`BufferView::typed`].
    pub fn from_view(view: BufferView<'a, Buf>) -> Result<Self> {
        let (size, align) = (size_of::<T>(), align_of::<T>());
        let ty = std::any::type_name::<T>();
        if size == 0 {
            return Err(Error::invalid(format!(
                "DeviceSlice<{ty}>: a zero-sized element type has no device layout"
            )));
        }
        if !view.offset.is_multiple_of(align) {
            return Err(Error::invalid(format!(
                "DeviceSlice<{ty}>: byte offset {} is not a multiple of the alignment {align}",
                view.offset
            )));
        }
        if !view.len.is_multiple_of(size) {
            return Err(Error::invalid(format!(
                "DeviceSlice<{ty}>: {} bytes is not a whole number of {size}-byte elements",
                view.len
            )));
        }
        Ok(Self {
            view,
            _t: PhantomData,
        })
    }

    /// Its length in elements.
    pub fn len(&self) -> usize {
        self.view.len / size_of::<T>()
    }

    /// Whether it has no element.
    pub fn is_empty(&self) -> bool {
        self.view.len == 0
    }

    /// Its length in bytes.
    pub fn len_bytes(&self) -> usize {
        self.view.len
    }

    /// The byte view of the same range.
    pub fn as_view(&self) -> BufferView<'a, Buf> {
        self.view
    }

    /// The buffer it views.
    pub fn buffer(&self) -> &'a Buf {
        self.view.buf
    }

    /// Its first element's byte offset in the buffer.
    pub fn offset_bytes(&self) -> usize {
        self.view.offset
    }

    /// The address of its first element.
    pub fn device_address(&self) -> u64 {
        self.view.device_address()
    }

    /// The elements `range` (relative to this slice).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the range is not inside the slice.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<Self> {
        let (s, e) = bounds("DeviceSlice::slice", range, self.len())?;
        let size = size_of::<T>();
        Ok(Self {
            view: BufferView {
                buf: self.view.buf,
                offset: self.view.offset + s * size,
                len: (e - s) * size,
            },
            _t: PhantomData,
        })
    }

    /// The elements before `mid` and from `mid` on.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `mid > len()`.
    pub fn split_at(&self, mid: usize) -> Result<(Self, Self)> {
        Ok((self.slice(..mid)?, self.slice(mid..)?))
    }
}

impl<'a, T, Buf> From<DeviceSlice<'a, T, Buf>> for BufferView<'a, Buf> {
    fn from(s: DeviceSlice<'a, T, Buf>) -> Self {
        s.view
    }
}

/// The value of a [`Stream::memset_pattern`](crate::Stream::memset_pattern): an element of 8,
/// 16, 32 or 64 bits repeated over the range (little-endian in memory, as on every supported
/// device).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemsetPattern {
    /// A byte.
    U8(u8),
    /// A 16-bit element (the range must be 2-byte aligned and a multiple of 2 bytes).
    U16(u16),
    /// A 32-bit element (the range must be 4-byte aligned and a multiple of 4 bytes).
    U32(u32),
    /// A 64-bit element (the range must be 8-byte aligned and a multiple of 8 bytes): the fill
    /// of `i64`, `u64` and `f64` tensors.
    U64(u64),
}

impl MemsetPattern {
    /// The element's width in bytes.
    pub const fn width(self) -> usize {
        match self {
            Self::U8(_) => 1,
            Self::U16(_) => 2,
            Self::U32(_) => 4,
            Self::U64(_) => 8,
        }
    }

    /// The element's bytes in memory order (the first [`width`](Self::width) of the array).
    pub const fn bytes(self) -> [u8; 8] {
        match self {
            Self::U8(v) => [v, 0, 0, 0, 0, 0, 0, 0],
            Self::U16(v) => {
                let b = v.to_le_bytes();
                [b[0], b[1], 0, 0, 0, 0, 0, 0]
            }
            Self::U32(v) => {
                let b = v.to_le_bytes();
                [b[0], b[1], b[2], b[3], 0, 0, 0, 0]
            }
            Self::U64(v) => v.to_le_bytes(),
        }
    }

    /// The byte every byte of the range gets, when all bytes of the element are equal (then a
    /// byte memset does it).
    pub fn as_byte(self) -> Option<u8> {
        let b = self.bytes();
        b[..self.width()].iter().all(|&x| x == b[0]).then_some(b[0])
    }

    /// Checks a range of `len` bytes at device address `addr` for this width.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a misaligned address or a partial element.
    pub fn check(self, addr_offset: usize, len: usize) -> Result<()> {
        let w = self.width();
        if !addr_offset.is_multiple_of(w) || !len.is_multiple_of(w) {
            return Err(Error::invalid(format!(
                "memset of {}-bit elements: offset {addr_offset} and length {len} must be \
                 multiples of {w}",
                w * 8
            )));
        }
        Ok(())
    }

    /// Fills `dst` (whose first byte is element-aligned) with the pattern: the host reference.
    pub fn fill(self, dst: &mut [u8]) {
        let b = self.bytes();
        let w = self.width();
        for (i, x) in dst.iter_mut().enumerate() {
            *x = b[i % w];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_accept_inside_refuse_outside() {
        assert_eq!(bounds("t", 4..12, 16).unwrap(), (4, 12));
        assert_eq!(bounds("t", .., 5).unwrap(), (0, 5));
        assert_eq!(bounds("t", 2..=4, 5).unwrap(), (2, 5));
        assert!(bounds("t", 0..6, 5).is_err());
        assert!(bounds("t", (Bound::Included(4), Bound::Excluded(2)), 5).is_err());
        assert!(bounds("t", 0..=usize::MAX, 5).is_err());
        let e = bounds("BufferView::slice", 3..9, 8)
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside 0..8"), "{e}");
    }

    #[test]
    fn patterns_fill_little_endian_and_check_alignment() {
        let mut b = [0u8; 8];
        MemsetPattern::U16(0x0102).fill(&mut b);
        assert_eq!(b, [2, 1, 2, 1, 2, 1, 2, 1]);
        MemsetPattern::U32(0x0a0b0c0d).fill(&mut b);
        assert_eq!(b, [0xd, 0xc, 0xb, 0xa, 0xd, 0xc, 0xb, 0xa]);
        assert_eq!(MemsetPattern::U32(0x7777_7777).as_byte(), Some(0x77));
        assert_eq!(MemsetPattern::U16(0x0100).as_byte(), None);
        assert!(MemsetPattern::U32(1).check(2, 8).is_err());
        assert!(MemsetPattern::U32(1).check(4, 6).is_err());
        MemsetPattern::U32(1).check(4, 8).unwrap();
        MemsetPattern::U8(1).check(3, 5).unwrap();
    }
}
