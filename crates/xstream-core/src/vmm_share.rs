//! Physical memory shared with another process: [`PhysicalMemory::export_shareable`](crate::PhysicalMemory::export_shareable) gives a
//! [`ShareableHandle`], another process turns it into physical memory of its own with
//! [`VirtualMemory::import_physical`](crate::VirtualMemory::import_physical) and maps it like memory it created, so both processes
//! see the same bytes.
//!
//! # What a handle is made of
//! - bytes ([`ShareableHandle::as_bytes`], [`SHAREABLE_HANDLE_LEN`] = 128), sent by any means;
//! - on backends whose vendor shares by file descriptor (CUDA: `cuMemExportToShareableHandle`
//!   with `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`), a descriptor
//!   ([`ShareableHandle::fd`]) that must travel beside the bytes as a descriptor: over a Unix
//!   socket with `SCM_RIGHTS` (`xstream_cuda::fdpass`), never as a number. The host backend
//!   and ACL need none: their payload (a file name; the 64-bit `aclrtMemExportToShareableHandle`
//!   value) is in the bytes.
//!
//! Layout of the bytes, little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `XSVP` |
//! | 4..6 | version, `u16` (1) |
//! | 6..8 | backend, `u16` (1 host, 2 CUDA, 3 Ascend) |
//! | 8..12 | device ordinal of the exporter, `u32` |
//! | 12..16 | payload length `n`, `u32` (at most [`SHAREABLE_PAYLOAD_MAX`], 88) |
//! | 16..24 | size in bytes, `u64` |
//! | 24..28 | exporting process id, `u32` |
//! | 28..32 | 1 when a descriptor travels beside the bytes, else 0 |
//! | 32..40 | zero |
//! | 40..40+n | the backend's payload |
//! | 40+n..128 | zero |
//!
//! # Rules, checked once for every backend
//! - Export and import need [`Capabilities::SHAREABLE_PHYSICAL`](crate::Capabilities::SHAREABLE_PHYSICAL) (and
//!   [`Capabilities::VIRTUAL_MEMORY`](crate::Capabilities::VIRTUAL_MEMORY)); without it they are [`Error::Unsupported`] naming the
//!   reason.
//! - An import checks the backend ([`Error::WrongBackend`]), the device ordinal
//!   ([`Error::WrongDevice`]), the size (a non-zero multiple of the importer's granularity) and
//!   the descriptor (present exactly when the bytes say so) before the vendor sees it.
//! - Importing in the exporting process is [`Error::InvalidArgument`]: that process clones
//!   its [`PhysicalMemory`](crate::PhysicalMemory) instead (one rule for every backend; the host refuses it as its
//!   interprocess buffers do).
//! - The memory lives while any process holds a handle or a mapping of it: the exporter
//!   dropping its handle does not take the bytes from an importer, as with the vendors.

use std::fmt;
#[cfg(unix)]
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::ipc::{header_origin, parse_header, put_header, u32_at};
use crate::{BackendKind, Error, Result};

/// The length of [`ShareableHandle::as_bytes`].
pub const SHAREABLE_HANDLE_LEN: usize = 128;
const HEADER: usize = 40;
/// The longest backend payload.
pub const SHAREABLE_PAYLOAD_MAX: usize = SHAREABLE_HANDLE_LEN - HEADER;
/// The first four bytes of a handle.
pub const SHAREABLE_MAGIC: [u8; 4] = *b"XSVP";
const VERSION: u16 = 1;

/// Exported physical memory (see the module documentation). Not `Clone`: it may own a file
/// descriptor, closed when the handle is dropped (after an import, which does not need it
/// any more).
pub struct ShareableHandle {
    bytes: [u8; SHAREABLE_HANDLE_LEN],
    #[cfg(unix)]
    fd: Option<OwnedFd>,
}

/// A backend's part of an export: its payload and, for descriptor-based vendors, the
/// descriptor.
#[derive(Debug)]
pub struct ShareablePayload {
    /// Bytes the importing backend needs (at most [`SHAREABLE_PAYLOAD_MAX`]).
    pub bytes: Vec<u8>,
    /// The descriptor, for vendors that share by descriptor.
    #[cfg(unix)]
    pub fd: Option<OwnedFd>,
}

impl ShareableHandle {
    /// A handle of `size` bytes of `backend`'s device `device`, exported by this process
    /// (backends call this; users get handles from
    /// [`PhysicalMemory::export_shareable`](crate::PhysicalMemory::export_shareable)(crate::PhysicalMemory::export_shareable)).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a payload longer than [`SHAREABLE_PAYLOAD_MAX`] or an
    /// ordinal above `u32::MAX`.
    pub fn new(
        backend: BackendKind,
        device: usize,
        size: usize,
        payload: ShareablePayload,
    ) -> Result<Self> {
        let n = payload.bytes.len();
        if n > SHAREABLE_PAYLOAD_MAX {
            return Err(Error::invalid(format!(
                "a shareable handle payload of {n} bytes (at most {SHAREABLE_PAYLOAD_MAX})"
            )));
        }
        let mut bytes = [0u8; SHAREABLE_HANDLE_LEN];
        put_header(
            &mut bytes,
            SHAREABLE_MAGIC,
            VERSION,
            (backend, device),
            n,
            "a handle",
        )?;
        bytes[16..24].copy_from_slice(&(size as u64).to_le_bytes());
        bytes[24..28].copy_from_slice(&std::process::id().to_le_bytes());
        #[cfg(unix)]
        let has_fd = payload.fd.is_some();
        #[cfg(not(unix))]
        let has_fd = false;
        bytes[28..32].copy_from_slice(&u32::from(has_fd).to_le_bytes());
        bytes[HEADER..HEADER + n].copy_from_slice(&payload.bytes);
        Ok(Self {
            bytes,
            #[cfg(unix)]
            fd: payload.fd,
        })
    }

    /// Rebuilds a handle received from another process: its bytes and, where
    /// [`ShareableHandle::needs_fd`] said so, the descriptor received beside them.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a length other than [`SHAREABLE_HANDLE_LEN`], a wrong
    /// magic or version, an unknown backend, a payload length out of range, non-zero padding,
    /// or a descriptor missing where the bytes announce one (or given where they do not).
    #[cfg(unix)]
    pub fn from_parts(b: &[u8], fd: Option<OwnedFd>) -> Result<Self> {
        let bytes = Self::parse(b)?;
        let want = u32_at(&bytes, 28) != 0;
        if want != fd.is_some() {
            return Err(Error::invalid(format!(
                "shareable handle: the bytes {} a file descriptor, {} was given",
                if want { "announce" } else { "announce no" },
                if fd.is_some() { "one" } else { "none" }
            )));
        }
        Ok(Self { bytes, fd })
    }

    /// Rebuilds a handle without a descriptor (see [`ShareableHandle::from_parts`]).
    ///
    /// # Errors
    /// As [`ShareableHandle::from_parts`].
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        #[cfg(unix)]
        return Self::from_parts(b, None);
        #[cfg(not(unix))]
        {
            let bytes = Self::parse(b)?;
            if u32_at(&bytes, 28) != 0 {
                return Err(Error::invalid(
                    "shareable handle: the bytes announce a file descriptor",
                ));
            }
            Ok(Self { bytes })
        }
    }

    fn parse(b: &[u8]) -> Result<[u8; SHAREABLE_HANDLE_LEN]> {
        let bad = |why: String| Error::invalid(format!("not an xstream shareable handle: {why}"));
        let (bytes, n) = parse_header(b, SHAREABLE_MAGIC, VERSION, bad)?;
        if n > SHAREABLE_PAYLOAD_MAX {
            return Err(bad(format!("payload length {n}")));
        }
        if u32_at(&bytes, 28) > 1
            || bytes[32..HEADER].iter().any(|&x| x != 0)
            || bytes[HEADER + n..].iter().any(|&x| x != 0)
        {
            return Err(bad("non-zero reserved bytes".into()));
        }
        Ok(bytes)
    }

    /// The bytes as lower-case hex (256 digits), for handles sent as text.
    pub fn to_hex(&self) -> String {
        crate::ipc::hex_string(&self.bytes)
    }

    /// Parses [`ShareableHandle::to_hex`]'s form (surrounding white space ignored), for a
    /// handle without a descriptor.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for bad hex, then as [`ShareableHandle::from_bytes`].
    pub fn from_hex(hex: &str) -> Result<Self> {
        Self::from_bytes(&crate::ipc::hex_bytes(hex, "shareable")?)
    }

    /// Its bytes (the descriptor, if any, travels separately).
    pub fn as_bytes(&self) -> &[u8; SHAREABLE_HANDLE_LEN] {
        &self.bytes
    }

    /// The exporting backend.
    pub fn backend(&self) -> BackendKind {
        header_origin(&self.bytes).0
    }

    /// The exporter's device ordinal.
    pub fn device(&self) -> usize {
        header_origin(&self.bytes).1
    }

    /// The size of the memory in bytes.
    pub fn size(&self) -> usize {
        let mut s = [0u8; 8];
        s.copy_from_slice(&self.bytes[16..24]);
        u64::from_le_bytes(s) as usize
    }

    /// The id of the exporting process.
    pub fn exporter_pid(&self) -> u32 {
        u32_at(&self.bytes, 24)
    }

    /// Whether a file descriptor belongs to the handle (it must be sent beside the bytes).
    pub fn needs_fd(&self) -> bool {
        u32_at(&self.bytes, 28) != 0
    }

    /// The backend's payload.
    pub fn payload(&self) -> &[u8] {
        let n = (u32_at(&self.bytes, 12) as usize).min(SHAREABLE_PAYLOAD_MAX);
        &self.bytes[HEADER..HEADER + n]
    }

    /// The descriptor, where the vendor shares by descriptor.
    #[cfg(unix)]
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(|f| f.as_fd())
    }

    /// Checks that `backend`'s device `device`, in this process, may import it.
    ///
    /// # Errors
    /// [`Error::WrongBackend`], [`Error::WrongDevice`]; [`Error::InvalidArgument`] in the
    /// exporting process.
    pub fn check_for(&self, backend: BackendKind, device: usize) -> Result<()> {
        crate::ipc::check_origin(
            "import_physical",
            (self.backend(), self.device()),
            (backend, device),
        )?;
        if self.exporter_pid() == std::process::id() {
            return Err(Error::invalid(
                "import_physical: this process exported the memory (clone its PhysicalMemory \
                 instead)",
            ));
        }
        Ok(())
    }
}

impl fmt::Debug for ShareableHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShareableHandle")
            .field("backend", &self.backend())
            .field("device", &self.device())
            .field("size", &self.size())
            .field("exporter_pid", &self.exporter_pid())
            .field("fd", &self.needs_fd())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(b: &[u8]) -> ShareablePayload {
        ShareablePayload {
            bytes: b.to_vec(),
            #[cfg(unix)]
            fd: None,
        }
    }

    #[test]
    fn handle_round_trips_and_refuses_garbage() {
        let h = ShareableHandle::new(BackendKind::Ascend, 3, 4 << 20, payload(&[9; 8])).unwrap();
        let back = ShareableHandle::from_bytes(h.as_bytes()).unwrap();
        assert_eq!(back.backend(), BackendKind::Ascend);
        assert_eq!((back.device(), back.size()), (3, 4 << 20));
        assert_eq!(back.payload(), &[9; 8]);
        assert_eq!(back.exporter_pid(), std::process::id());
        assert!(!back.needs_fd());
        // This process exported it; another backend; another device.
        let e = back.check_for(BackendKind::Ascend, 3).unwrap_err();
        assert!(e.to_string().contains("exported the memory"), "{e}");
        assert!(matches!(
            back.check_for(BackendKind::Cuda, 3),
            Err(Error::WrongBackend { .. })
        ));
        assert!(matches!(
            back.check_for(BackendKind::Ascend, 0),
            Err(Error::WrongDevice(_))
        ));
        // Garbage: length, magic, version, backend, payload length, padding.
        assert!(ShareableHandle::from_bytes(&h.as_bytes()[..127]).is_err());
        for (i, v) in [
            (0, b'Y'),
            (4, 9),
            (6, 7),
            (12, 200),
            (33, 1),
            (127, 1),
            (28, 2),
        ] {
            let mut b = *h.as_bytes();
            b[i] = v;
            assert!(ShareableHandle::from_bytes(&b).is_err(), "byte {i} = {v}");
        }
        assert!(
            ShareableHandle::new(BackendKind::Host, 0, 1, payload(&[1; 89])).is_err(),
            "payload too long"
        );
    }

    #[cfg(unix)]
    #[test]
    fn the_descriptor_must_match_the_bytes() {
        let f = std::fs::File::open("/dev/null").unwrap();
        let h = ShareableHandle::new(
            BackendKind::Cuda,
            0,
            2 << 20,
            ShareablePayload {
                bytes: Vec::new(),
                fd: Some(f.into()),
            },
        )
        .unwrap();
        assert!(h.needs_fd() && h.fd().is_some());
        let e = ShareableHandle::from_bytes(h.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("announce a file descriptor"), "{e}");
        let g: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        let plain = ShareableHandle::new(BackendKind::Host, 0, 1, payload(b"x")).unwrap();
        assert!(ShareableHandle::from_parts(plain.as_bytes(), Some(g)).is_err());
        let g: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        assert!(ShareableHandle::from_parts(h.as_bytes(), Some(g)).is_ok());
    }
}
