//! Handing device memory to foreign code and taking it back: [`RawBuffer`],
//! [`Buffer::into_raw`](crate::Buffer::into_raw),
//! [`Buffer::from_raw`](crate::Buffer::from_raw) and
//! [`Buffer::from_raw_borrowed`](crate::Buffer::from_raw_borrowed).
//!
//! The rules (docs/semantics.md, "Raw buffers"):
//! - **`into_raw` never waits and never frees.** The caller owns the memory from then on.
//!   Work already enqueued that uses the buffer still runs; xstream never frees the memory
//!   after it, so the caller must order its own free (the vendor's free, or the drop of a
//!   buffer from [`Buffer::from_raw`](crate::Buffer::from_raw)) after that work: synchronize
//!   the streams that used it (or the device) first.
//! - **`from_raw` takes ownership back**: the buffer frees the memory at drop with the free
//!   that matches [`RawBuffer::alloc`], ordered after the work xstream enqueues on it from
//!   then on (the buffer lifetime rule). Work that used the memory before (through xstream
//!   before `into_raw`, or foreign work) is not tracked: it must be complete or ordered
//!   before the drop by the caller.
//! - **`from_raw_borrowed` never frees**: the foreign owner keeps the memory valid until the
//!   buffer and the work using it are gone.
//! - **Lengths**: [`RawBuffer::len`] is the buffer's requested length
//!   ([`Buffer::len`](crate::Buffer::len)), not the allocation granule underneath
//!   ([`crate::ALLOC_GRANULE`]); memory from foreign code may have no slack past `len`, and
//!   xstream never relies on slack for a buffer from `from_raw` or `from_raw_borrowed`.
//! - **Checks**: every backend refuses a descriptor of another backend or another device
//!   ordinal, a zero address with a nonzero length, and a zero address for `from_raw`; a
//!   backend that can ask the vendor (CUDA: `cuMemGetAddressRange`) or its own registry (the
//!   host backend) also refuses memory that is not a live allocation or a length past it.

use crate::{BackendKind, Error, Result};

/// How the memory of a [`RawBuffer`] was allocated: it decides the free that
/// [`Buffer::from_raw`](crate::Buffer::from_raw)'s drop uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RawAlloc {
    /// An ordinary allocation: `cuMemAlloc` (freed with `cuMemFree`), `aclrtMalloc` (freed
    /// with `aclrtFree`), or the host backend's heap block.
    Plain,
    /// A stream-ordered allocation (`cuMemAllocAsync`; freed with `cuMemFreeAsync`). CUDA
    /// only: the other backends refuse it in `from_raw`.
    StreamOrdered,
}

/// A device buffer handed out by [`Buffer::into_raw`](crate::Buffer::into_raw), or described
/// by foreign code for [`Buffer::from_raw`](crate::Buffer::from_raw) /
/// [`Buffer::from_raw_borrowed`](crate::Buffer::from_raw_borrowed). A plain description: it
/// owns nothing, and copying it copies no memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RawBuffer {
    /// The device address of the first byte (on the host backend, the host address of its
    /// heap block).
    pub address: u64,
    /// The length in bytes: the buffer's requested length, not the granule-rounded
    /// allocation underneath.
    pub len: usize,
    /// The backend whose memory it is.
    pub backend: BackendKind,
    /// The ordinal of the device it lives on.
    pub ordinal: usize,
    /// How it was allocated (which free releases it).
    pub alloc: RawAlloc,
}

impl RawBuffer {
    /// A plain allocation of `len` bytes at `address` on device `ordinal` of `backend`.
    pub fn new(backend: BackendKind, ordinal: usize, address: u64, len: usize) -> Self {
        Self {
            address,
            len,
            backend,
            ordinal,
            alloc: RawAlloc::Plain,
        }
    }

    /// The same description with allocation kind `alloc`.
    pub fn with_alloc(self, alloc: RawAlloc) -> Self {
        Self { alloc, ..self }
    }

    /// The checks of a descriptor that core makes before a backend sees it (`owned`: for
    /// [`Buffer::from_raw`](crate::Buffer::from_raw), which also refuses a zero address; else
    /// for [`Buffer::from_raw_borrowed`](crate::Buffer::from_raw_borrowed)).
    ///
    /// # Errors
    /// [`Error::WrongBackend`] for another backend's descriptor; [`Error::WrongDevice`] for
    /// another device ordinal; [`Error::InvalidArgument`] for a zero address with a nonzero
    /// length (or, owned, at all), and for an end past the address space.
    pub fn check_for(&self, backend: BackendKind, ordinal: usize, owned: bool) -> Result<()> {
        let op = if owned {
            "from_raw"
        } else {
            "from_raw_borrowed"
        };
        if self.backend != backend {
            return Err(Error::WrongBackend {
                op,
                expected: backend,
                found: self.backend,
            });
        }
        if self.ordinal != ordinal {
            return Err(Error::WrongDevice(format!(
                "{op}: the raw buffer lives on device {}, not on device {ordinal}",
                self.ordinal
            )));
        }
        if self.address == 0 && (owned || self.len != 0) {
            return Err(Error::invalid(format!(
                "{op}: a zero address{}",
                if owned {
                    " (nothing to own)".to_string()
                } else {
                    format!(" with length {}", self.len)
                }
            )));
        }
        if self.address.checked_add(self.len as u64).is_none() {
            return Err(Error::invalid(format!(
                "{op}: {} bytes at {:#x} run past the address space",
                self.len, self.address
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_refuse_each_bad_field() {
        let ok = RawBuffer::new(BackendKind::Cuda, 1, 0x1000, 64);
        ok.check_for(BackendKind::Cuda, 1, true).unwrap();
        assert!(matches!(
            ok.check_for(BackendKind::Host, 1, true),
            Err(Error::WrongBackend {
                op: "from_raw",
                expected: BackendKind::Host,
                found: BackendKind::Cuda
            })
        ));
        assert!(matches!(
            ok.check_for(BackendKind::Cuda, 0, false),
            Err(Error::WrongDevice(_))
        ));
        let null = RawBuffer::new(BackendKind::Cuda, 1, 0, 64);
        assert!(matches!(
            null.check_for(BackendKind::Cuda, 1, false),
            Err(Error::InvalidArgument(_))
        ));
        let empty_null = RawBuffer::new(BackendKind::Cuda, 1, 0, 0);
        empty_null.check_for(BackendKind::Cuda, 1, false).unwrap();
        assert!(empty_null.check_for(BackendKind::Cuda, 1, true).is_err());
        let wrap = RawBuffer::new(BackendKind::Cuda, 1, u64::MAX - 4, 64);
        assert!(wrap.check_for(BackendKind::Cuda, 1, false).is_err());
        assert_eq!(
            ok.with_alloc(RawAlloc::StreamOrdered).alloc,
            RawAlloc::StreamOrdered
        );
    }
}
