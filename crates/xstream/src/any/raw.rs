//! The erased path's `unsafe` entry points: each forwards its caller's contract, unchanged,
//! to the backend method of the same name. The only `unsafe` of this crate lives here.
#![allow(unsafe_code)]

use super::{AnyBuffer, AnyDevice, Erasable};
use crate::{Backend, Buffer, Device, RawBuffer, Result};

/// The typed buffer of `_d`'s backend from `raw`, erased.
///
/// # Safety
/// As [`Buffer::from_raw`] (or [`Buffer::from_raw_borrowed`] when `borrowed`).
unsafe fn typed_from_raw<D: Device>(d: &D, raw: RawBuffer, borrowed: bool) -> Result<AnyBuffer>
where
    D::B: Erasable + Backend<Device = D>,
{
    let b = if borrowed {
        // SAFETY: forwarded from the caller.
        unsafe { <<D::B as Backend>::Buffer as Buffer>::from_raw_borrowed(d, raw) }
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { <<D::B as Backend>::Buffer as Buffer>::from_raw(d, raw) }
    };
    b.map(Into::into)
}

impl AnyBuffer {
    /// [`Buffer::from_raw`]: takes ownership of `raw`, memory of `device`'s backend.
    ///
    /// # Safety
    /// As [`Buffer::from_raw`].
    ///
    /// # Errors
    /// As [`Buffer::from_raw`] (a descriptor of another backend than `device`'s is refused by
    /// [`RawBuffer::check_for`](crate::RawBuffer::check_for)).
    pub unsafe fn from_raw(device: &AnyDevice, raw: RawBuffer) -> Result<AnyBuffer> {
        // SAFETY: the caller keeps `Buffer::from_raw`'s contract for `raw` and `device`.
        each!(AnyDevice, device, d => unsafe { typed_from_raw(d, raw, false) })
    }

    /// [`Buffer::from_raw_borrowed`]: wraps memory xstream does not own, never freed by it.
    ///
    /// # Safety
    /// As [`Buffer::from_raw_borrowed`].
    ///
    /// # Errors
    /// As [`Buffer::from_raw_borrowed`].
    pub unsafe fn from_raw_borrowed(device: &AnyDevice, raw: RawBuffer) -> Result<AnyBuffer> {
        // SAFETY: the caller keeps `Buffer::from_raw_borrowed`'s contract.
        each!(AnyDevice, device, d => unsafe { typed_from_raw(d, raw, true) })
    }
}

impl AnyDevice {
    /// [`Device::alloc_uninit`]: a buffer whose bytes are unspecified.
    ///
    /// # Safety
    /// As [`Device::alloc_uninit`].
    ///
    /// # Errors
    /// As [`Device::alloc`].
    pub unsafe fn alloc_uninit(&self, len: usize) -> Result<AnyBuffer> {
        // SAFETY: the caller keeps `Device::alloc_uninit`'s contract.
        each!(AnyDevice, self, d => unsafe { d.alloc_uninit(len) }.map(AnyBuffer::from))
    }
}
