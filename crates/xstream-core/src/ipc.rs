//! Interprocess events: an event created with [`EventFlags::INTERPROCESS`](crate::EventFlags::INTERPROCESS) exports an
//! [`IpcEventHandle`] (plain bytes) that another process opens as an event of its own
//! ([`IpcEvent::open_ipc`]) to record, wait on, query and synchronize.
//!
//! # The handle
//! [`IPC_EVENT_HANDLE_LEN`] (128) bytes, `Copy`, `Send`, `Sync`, sent between processes by any
//! means (a pipe, a socket, a file; [`IpcEventHandle::to_hex`] for text). Little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `XSIE` |
//! | 4..6 | version, `u16` (1) |
//! | 6..8 | backend, `u16` (1 host, 2 CUDA, 3 Ascend) |
//! | 8..12 | device ordinal of the exporting event, `u32` |
//! | 12..16 | payload length `n`, `u32` (at most [`IPC_EVENT_PAYLOAD_MAX`], 112) |
//! | 16..16+n | the backend's payload (CUDA: the 64-byte `CUipcEventHandle`; ACL: the `aclrtIpcEventHandle` bytes; host: the name of the shared state) |
//! | 16+n..128 | zero |
//!
//! [`IpcEventHandle::from_bytes`] refuses a wrong length, magic, version, backend code or
//! payload length (garbage) with [`Error::InvalidArgument`]; opening a handle of another
//! backend is [`Error::InvalidArgument`] naming both backends, of another device ordinal
//! [`Error::WrongDevice`]. The ordinal is the exporter's: processes that see devices in
//! another order (`CUDA_VISIBLE_DEVICES`) must open with the same physical device.
//!
//! # Rules common to every backend
//! - Only an event whose effective flags hold `INTERPROCESS` exports; others give
//!   [`Error::InvalidArgument`]. `INTERPROCESS` implies `DISABLE_TIMING` (CUDA's rule, kept on
//!   every backend), so `elapsed_ms` on such events is [`Error::TimingDisabled`].
//! - An opened event is a new handle of the same event: a record in either process moves it;
//!   a query, synchronize or stream wait refers to the latest record made by any process at
//!   the time of the call.
//! - Backends without interprocess events refuse with [`Error::Unsupported`].
//!
//! # Buffers
//! [`IpcBuffer`] exports a buffer or a range of one as an [`IpcMemHandle`] (128 bytes: the
//! same header with magic `XSIM`, then the range's offset and length, then the backend's
//! payload); another process opens it as a buffer of the range's length, usable in every
//! stream operation. The exporter owns the memory (its drop frees it); an import is closed
//! when dropped; opening an export in the exporting process itself is refused.

use std::fmt;

use crate::backend::check_range;
use crate::callback::ensure_not_in_callback;
use crate::{Backend, BackendKind, Buffer, Device, DeviceOf, Error, Event, EventFlags, Result};

/// The length of an [`IpcEventHandle`].
pub const IPC_EVENT_HANDLE_LEN: usize = 128;
/// The length of its header.
pub const IPC_HANDLE_HEADER_LEN: usize = 16;
/// The longest backend payload.
pub const IPC_EVENT_PAYLOAD_MAX: usize = IPC_EVENT_HANDLE_LEN - IPC_HANDLE_HEADER_LEN;
/// The first four bytes of a handle.
pub const IPC_EVENT_MAGIC: [u8; 4] = *b"XSIE";
/// The handle format's version.
pub const IPC_HANDLE_VERSION: u16 = 1;

pub(crate) fn backend_code(b: BackendKind) -> u16 {
    match b {
        BackendKind::Host => 1,
        BackendKind::Cuda => 2,
        BackendKind::Ascend => 3,
    }
}

pub(crate) fn backend_of(code: u16) -> Option<BackendKind> {
    Some(match code {
        1 => BackendKind::Host,
        2 => BackendKind::Cuda,
        3 => BackendKind::Ascend,
        _ => return None,
    })
}

/// Writes the 16-byte header every handle starts with (magic, version, backend code, device
/// ordinal, payload length) into `b`.
///
/// # Errors
/// [`Error::InvalidArgument`] for an ordinal above `u32::MAX` (`what` names the handle).
pub(crate) fn put_header(
    b: &mut [u8],
    magic: [u8; 4],
    version: u16,
    (backend, device): (BackendKind, usize),
    payload_len: usize,
    what: &str,
) -> Result<()> {
    let dev = u32::try_from(device)
        .map_err(|_| Error::invalid(format!("device ordinal {device} in {what}")))?;
    b[..4].copy_from_slice(&magic);
    b[4..6].copy_from_slice(&version.to_le_bytes());
    b[6..8].copy_from_slice(&backend_code(backend).to_le_bytes());
    b[8..12].copy_from_slice(&dev.to_le_bytes());
    b[12..16].copy_from_slice(&(payload_len as u32).to_le_bytes());
    Ok(())
}

/// Checks received bytes against the header every handle starts with: `N` bytes, `magic`,
/// `version`, a known backend code; returns them with the payload length (not yet checked).
///
/// # Errors
/// `bad`'s error naming what is wrong.
pub(crate) fn parse_header<const N: usize>(
    b: &[u8],
    magic: [u8; 4],
    version: u16,
    bad: impl Fn(String) -> Error,
) -> Result<([u8; N], usize)> {
    let bytes: [u8; N] = b
        .try_into()
        .map_err(|_| bad(format!("{} bytes, expected {N}", b.len())))?;
    if bytes[..4] != magic {
        return Err(bad(format!("magic {:02x?}", &bytes[..4])));
    }
    let found = u16::from_le_bytes([bytes[4], bytes[5]]);
    if found != version {
        return Err(bad(format!("version {found}, this build reads {version}")));
    }
    let code = u16::from_le_bytes([bytes[6], bytes[7]]);
    if backend_of(code).is_none() {
        return Err(bad(format!("unknown backend code {code}")));
    }
    Ok((bytes, u32_at(&bytes, 12) as usize))
}

/// The little-endian `u32` at byte `i` of `b`.
pub(crate) fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// The exporting backend and device ordinal of a handle's checked header.
pub(crate) fn header_origin(b: &[u8]) -> (BackendKind, usize) {
    let backend = backend_of(u16::from_le_bytes([b[6], b[7]])).unwrap_or(BackendKind::Host);
    (backend, u32_at(b, 8) as usize)
}

/// An exported interprocess event (see the module documentation for the layout).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpcEventHandle {
    bytes: [u8; IPC_EVENT_HANDLE_LEN],
}

/// The accessors every interprocess handle has: `$what` names it in hex parse errors, `$op`
/// in the origin check's.
macro_rules! handle_accessors {
    ($T:ident, $len:expr, $what:literal, $op:literal) => {
        impl $T {
            /// Its bytes.
            pub fn as_bytes(&self) -> &[u8; $len] {
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

            /// The bytes as lower-case hex (256 digits).
            pub fn to_hex(&self) -> String {
                hex_string(&self.bytes)
            }

            #[doc = concat!(
                "Parses [`", stringify!($T), "::to_hex`]'s form (surrounding white space ignored)."
            )]
            ///
            /// # Errors
            #[doc = concat!(
                "[`Error::InvalidArgument`] for bad hex, then as [`",
                stringify!($T),
                "::from_bytes`]."
            )]
            pub fn from_hex(hex: &str) -> Result<Self> {
                Self::from_bytes(&hex_bytes(hex, $what)?)
            }

            /// Checks that `backend`'s device `device` may open it.
            ///
            /// # Errors
            /// [`Error::WrongBackend`] for another backend; [`Error::WrongDevice`] for another
            /// device ordinal.
            pub fn check_for(&self, backend: BackendKind, device: usize) -> Result<()> {
                let origin = (self.backend(), self.device());
                check_origin($op, origin, (backend, device))
            }
        }
    };
}

handle_accessors!(
    IpcEventHandle,
    IPC_EVENT_HANDLE_LEN,
    "event",
    "open an IPC event handle"
);
handle_accessors!(
    IpcMemHandle,
    IPC_MEM_HANDLE_LEN,
    "memory",
    "open an IPC memory handle"
);

impl IpcEventHandle {
    /// A handle of `backend`'s event on device `device` carrying `payload`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty payload, one longer than
    /// [`IPC_EVENT_PAYLOAD_MAX`], or an ordinal above `u32::MAX`.
    pub fn new(backend: BackendKind, device: usize, payload: &[u8]) -> Result<Self> {
        if payload.is_empty() || payload.len() > IPC_EVENT_PAYLOAD_MAX {
            return Err(Error::invalid(format!(
                "an IPC event payload of {} bytes (1..={IPC_EVENT_PAYLOAD_MAX})",
                payload.len()
            )));
        }
        let mut bytes = [0u8; IPC_EVENT_HANDLE_LEN];
        let origin = (backend, device);
        put_header(
            &mut bytes,
            IPC_EVENT_MAGIC,
            IPC_HANDLE_VERSION,
            origin,
            payload.len(),
            "an IPC handle",
        )?;
        bytes[IPC_HANDLE_HEADER_LEN..IPC_HANDLE_HEADER_LEN + payload.len()]
            .copy_from_slice(payload);
        Ok(Self { bytes })
    }

    /// Parses bytes received from another process.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a length other than [`IPC_EVENT_HANDLE_LEN`], a wrong
    /// magic, another version, an unknown backend code, a payload length out of range or
    /// non-zero padding.
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        let bad = |why: String| Error::invalid(format!("not an xstream IPC event handle: {why}"));
        let (bytes, n) = parse_header(b, IPC_EVENT_MAGIC, IPC_HANDLE_VERSION, bad)?;
        if n == 0 || n > IPC_EVENT_PAYLOAD_MAX {
            return Err(bad(format!("payload length {n}")));
        }
        if bytes[IPC_HANDLE_HEADER_LEN + n..].iter().any(|&x| x != 0) {
            return Err(bad("non-zero bytes after the payload".into()));
        }
        Ok(Self { bytes })
    }

    /// The backend's payload.
    pub fn payload(&self) -> &[u8] {
        let n = (u32_at(&self.bytes, 12) as usize).min(IPC_EVENT_PAYLOAD_MAX);
        &self.bytes[IPC_HANDLE_HEADER_LEN..IPC_HANDLE_HEADER_LEN + n]
    }
}

impl fmt::Debug for IpcEventHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IpcEventHandle({} device {}, {} payload bytes)",
            self.backend(),
            self.device(),
            self.payload().len()
        )
    }
}

/// What a backend implements for interprocess events, with no checks: users call
/// [`IpcEvent`], which core implements over it and which holds every check of the operations
/// (the callback gate, the `INTERPROCESS` flag, the handle's backend and device ordinal).
pub trait IpcEventImpl: Event + Sized {
    /// The backend's side of [`IpcEvent::export_ipc`]: the event's flags hold
    /// [`EventFlags::INTERPROCESS`](crate::EventFlags::INTERPROCESS).
    ///
    /// # Errors
    /// As [`IpcEvent::export_ipc`].
    fn export_ipc_impl(&self) -> Result<IpcEventHandle>;

    /// The backend's side of [`IpcEvent::open_ipc`]: the handle is of this backend and of
    /// `device`'s ordinal.
    ///
    /// # Errors
    /// As [`IpcEvent::open_ipc`].
    fn open_ipc_impl(device: &DeviceOf<Self::B>, handle: &IpcEventHandle) -> Result<Self>;
}

/// Events that cross processes (see the module documentation), implemented for every
/// backend's [`IpcEventImpl`] by the blanket impl below and by nothing else.
pub trait IpcEvent: IpcEventImpl {
    /// The handle another process opens with [`IpcEvent::open_ipc`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the event was not created with
    /// [`EventFlags::INTERPROCESS`](crate::EventFlags::INTERPROCESS); [`Error::Unsupported`]
    /// where the backend or device has no interprocess events; [`Error::NotPermitted`] inside
    /// a stream-blocking host callback; vendor errors.
    fn export_ipc(&self) -> Result<IpcEventHandle> {
        ensure_not_in_callback()?;
        if !self.flags().contains(EventFlags::INTERPROCESS) {
            return Err(Error::invalid(format!(
                "export_ipc: a {} event created without EventFlags::INTERPROCESS cannot be \
                 exported",
                <Self::B as Backend>::KIND
            )));
        }
        self.export_ipc_impl()
    }

    /// Opens an event exported by another process (or this one) on `device`.
    ///
    /// # Errors
    /// As [`IpcEventHandle::check_for`]; [`Error::InvalidArgument`] for a payload this backend
    /// does not recognise or whose exporter is gone (where the backend can tell);
    /// [`Error::NotPermitted`] inside a stream-blocking host callback; vendor errors.
    fn open_ipc(device: &DeviceOf<Self::B>, handle: &IpcEventHandle) -> Result<Self> {
        ensure_not_in_callback()?;
        handle.check_for(<Self::B as Backend>::KIND, device.info().ordinal)?;
        Self::open_ipc_impl(device, handle)
    }
}

impl<E: IpcEventImpl> IpcEvent for E {}

/// The first four bytes of an [`IpcMemHandle`].
pub const IPC_MEM_MAGIC: [u8; 4] = *b"XSIM";
/// The length of an [`IpcMemHandle`].
pub const IPC_MEM_HANDLE_LEN: usize = 128;
/// The length of an [`IpcMemHandle`]'s header (the event header, then offset and length).
pub const IPC_MEM_HEADER_LEN: usize = 32;
/// The longest backend payload of an [`IpcMemHandle`].
pub const IPC_MEM_PAYLOAD_MAX: usize = IPC_MEM_HANDLE_LEN - IPC_MEM_HEADER_LEN;

/// An exported device buffer or range of one: [`IPC_MEM_HANDLE_LEN`] (128) plain bytes,
/// little-endian:
///
/// | bytes | field |
/// |---|---|
/// | 0..4 | magic `XSIM` |
/// | 4..6 | version, `u16` (1) |
/// | 6..8 | backend, `u16` (1 host, 2 CUDA, 3 Ascend) |
/// | 8..12 | device ordinal of the exported buffer, `u32` |
/// | 12..16 | payload length `n`, `u32` (at most [`IPC_MEM_PAYLOAD_MAX`], 96) |
/// | 16..24 | offset of the range in the exported buffer, `u64` |
/// | 24..32 | length of the range, `u64` (> 0) |
/// | 32..32+n | the backend's payload (host: the shared file's name; CUDA: the 64-byte `CUipcMemHandle`) |
/// | 32+n..128 | zero |
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpcMemHandle {
    bytes: [u8; IPC_MEM_HANDLE_LEN],
}

impl IpcMemHandle {
    /// A handle of `len` bytes from `offset` of a `backend` buffer on `device`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty or too long payload, a zero length, or an
    /// ordinal above `u32::MAX`.
    pub fn new(
        backend: BackendKind,
        device: usize,
        offset: usize,
        len: usize,
        payload: &[u8],
    ) -> Result<Self> {
        if payload.is_empty() || payload.len() > IPC_MEM_PAYLOAD_MAX || len == 0 {
            return Err(Error::invalid(format!(
                "an IPC memory handle of {len} bytes with a payload of {} bytes (1..={IPC_MEM_PAYLOAD_MAX})",
                payload.len()
            )));
        }
        let mut bytes = [0u8; IPC_MEM_HANDLE_LEN];
        let origin = (backend, device);
        put_header(
            &mut bytes,
            IPC_MEM_MAGIC,
            IPC_HANDLE_VERSION,
            origin,
            payload.len(),
            "an IPC handle",
        )?;
        bytes[16..24].copy_from_slice(&(offset as u64).to_le_bytes());
        bytes[24..32].copy_from_slice(&(len as u64).to_le_bytes());
        bytes[IPC_MEM_HEADER_LEN..IPC_MEM_HEADER_LEN + payload.len()].copy_from_slice(payload);
        Ok(Self { bytes })
    }

    /// Parses bytes received from another process.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a wrong length, magic, version, backend code, payload
    /// length, a zero range length, an offset + length that overflows, or non-zero padding.
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        let bad = |why: String| Error::invalid(format!("not an xstream IPC memory handle: {why}"));
        let (bytes, n) = parse_header(b, IPC_MEM_MAGIC, IPC_HANDLE_VERSION, bad)?;
        let h = Self { bytes };
        if n == 0 || n > IPC_MEM_PAYLOAD_MAX {
            return Err(bad(format!("payload length {n}")));
        }
        if h.len() == 0 || (h.offset() as u64).checked_add(h.len() as u64).is_none() {
            return Err(bad(format!("range {} + {}", h.offset(), h.len())));
        }
        if bytes[IPC_MEM_HEADER_LEN + n..].iter().any(|&x| x != 0) {
            return Err(bad("non-zero bytes after the payload".into()));
        }
        Ok(h)
    }

    fn u64_at(&self, at: usize) -> u64 {
        let mut x = [0u8; 8];
        x.copy_from_slice(&self.bytes[at..at + 8]);
        u64::from_le_bytes(x)
    }

    /// Where the range starts in the exported buffer.
    pub fn offset(&self) -> usize {
        usize::try_from(self.u64_at(16)).unwrap_or(usize::MAX)
    }

    /// The range's length (the imported buffer's length).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        usize::try_from(self.u64_at(24)).unwrap_or(usize::MAX)
    }

    /// The backend's payload.
    pub fn payload(&self) -> &[u8] {
        let n = (u32_at(&self.bytes, 12) as usize).min(IPC_MEM_PAYLOAD_MAX);
        &self.bytes[IPC_MEM_HEADER_LEN..IPC_MEM_HEADER_LEN + n]
    }
}

impl fmt::Debug for IpcMemHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IpcMemHandle({} device {}, bytes {}..+{})",
            self.backend(),
            self.device(),
            self.offset(),
            self.len()
        )
    }
}

/// What a backend implements for interprocess buffers, with no checks: users call
/// [`IpcBuffer`], which core implements over it and which holds every check of the operations
/// (the callback gate, the exported range, the handle's backend and device ordinal).
pub trait IpcBufferImpl: Buffer + Sized {
    /// The backend's side of [`IpcBuffer::export_ipc_range`] (`pids` `None`) and
    /// [`IpcBuffer::export_ipc_range_for`] (`Some`): `len` bytes from `offset`, a range that
    /// is not empty and lies in the buffer. Backends whose vendor does not check who imports
    /// ignore `pids`.
    ///
    /// # Errors
    /// As [`IpcBuffer::export_ipc_range_for`].
    fn export_ipc_range_impl(
        &self,
        offset: usize,
        len: usize,
        pids: Option<&[u32]>,
    ) -> Result<IpcMemHandle>;

    /// The backend's side of [`IpcBuffer::open_ipc`]: the handle is of this backend and of
    /// `device`'s ordinal.
    ///
    /// # Errors
    /// As [`IpcBuffer::open_ipc`].
    fn open_ipc_impl(device: &DeviceOf<Self::B>, handle: &IpcMemHandle) -> Result<Self>;
}

/// Buffers that cross processes: the exporter keeps ownership (its drop frees the memory),
/// an import is a buffer of the range's length usable in every stream operation, closed when
/// dropped. Opening in the exporting process itself is refused (CUDA's rule, kept on every
/// backend). Implemented for every backend's [`IpcBufferImpl`] by the blanket impl below and
/// by nothing else.
pub trait IpcBuffer: IpcBufferImpl {
    /// Exports `len` bytes from `offset`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty or out-of-range range, or a buffer the backend
    /// cannot export (an import, a buffer of a pool); [`Error::Unsupported`];
    /// [`Error::NotPermitted`] inside a stream-blocking host callback; vendor errors.
    fn export_ipc_range(&self, offset: usize, len: usize) -> Result<IpcMemHandle> {
        check_export(self, offset, len)?;
        self.export_ipc_range_impl(offset, len, None)
    }

    /// Exports `len` bytes from `offset` for the processes `pids` only, where the vendor
    /// checks who imports (Ascend: `aclrtIpcMemSetImportPid`'s whitelist, and
    /// [`IpcBuffer::export_ipc_range`] there lifts the check). Backends without such a rule
    /// (host, CUDA) export as [`IpcBuffer::export_ipc_range`] does and ignore `pids`; an
    /// empty list then names no process (on Ascend nobody may import yet).
    ///
    /// # Errors
    /// As [`IpcBuffer::export_ipc_range`]; [`Error::InvalidArgument`] for a process id the
    /// vendor cannot take.
    fn export_ipc_range_for(
        &self,
        offset: usize,
        len: usize,
        pids: &[u32],
    ) -> Result<IpcMemHandle> {
        check_export(self, offset, len)?;
        self.export_ipc_range_impl(offset, len, Some(pids))
    }

    /// Exports the whole buffer.
    ///
    /// # Errors
    /// As [`IpcBuffer::export_ipc_range`].
    fn export_ipc(&self) -> Result<IpcMemHandle> {
        self.export_ipc_range(0, self.len())
    }

    /// Opens a range exported by another process on `device`.
    ///
    /// # Errors
    /// As [`IpcMemHandle::check_for`]; [`Error::InvalidArgument`] for a payload the backend
    /// does not recognise, an export that is gone (freed, its process exited) where the
    /// backend can tell, or an export of this very process; [`Error::NotPermitted`] inside a
    /// stream-blocking host callback; vendor errors.
    fn open_ipc(device: &DeviceOf<Self::B>, handle: &IpcMemHandle) -> Result<Self> {
        ensure_not_in_callback()?;
        handle.check_for(<Self::B as Backend>::KIND, device.info().ordinal)?;
        Self::open_ipc_impl(device, handle)
    }
}

impl<T: IpcBufferImpl> IpcBuffer for T {}

/// The checks of an export: the callback gate, then a range that is not empty and lies in the
/// buffer.
fn check_export<T: IpcBufferImpl>(buf: &T, offset: usize, len: usize) -> Result<()> {
    ensure_not_in_callback()?;
    if len == 0 {
        return Err(Error::invalid(format!(
            "export_ipc_range: an empty range (from {offset}) of a {}-byte buffer",
            buf.len()
        )));
    }
    check_range("export_ipc_range", buf.len(), offset, len)
}

/// The bytes of a handle as lower-case hex (shared by both handle kinds).
pub(crate) fn hex_string(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of a handle's hex form (surrounding white space ignored); `what` names the handle
/// kind ("event", "memory") in the error.
pub(crate) fn hex_bytes(hex: &str, what: &str) -> Result<Vec<u8>> {
    let hex = hex.trim();
    if !hex.is_ascii() || !hex.len().is_multiple_of(2) {
        return Err(Error::invalid(format!(
            "an IPC {what} handle in hex has an even number of hex digits"
        )));
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&hex[i..i + 2], 16)
                .map_err(|_| Error::invalid(format!("{:?} is not a hex byte", &hex[i..i + 2])))
        })
        .collect()
}

/// Checks that a handle exported by `have` (backend, device ordinal) is opened by `want`;
/// `what` names the handle kind ("event", "memory") in the error.
pub(crate) fn check_origin(
    what: &'static str,
    have: (BackendKind, usize),
    want: (BackendKind, usize),
) -> Result<()> {
    let (backend, device) = want;
    if have.0 != backend {
        return Err(Error::WrongBackend {
            op: what,
            expected: backend,
            found: have.0,
        });
    }
    if have.1 != device {
        return Err(Error::WrongDevice(format!(
            "{what}: the handle is of {backend} device {}, opened on device {device}",
            have.1
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_round_trips_and_refuses_garbage() {
        let h = IpcEventHandle::new(BackendKind::Cuda, 3, &[7u8; 64]).unwrap();
        assert_eq!(h.as_bytes().len(), IPC_EVENT_HANDLE_LEN);
        assert_eq!(&h.as_bytes()[..4], b"XSIE");
        assert_eq!(h.as_bytes()[6..8], 2u16.to_le_bytes());
        assert_eq!(h.as_bytes()[8..12], 3u32.to_le_bytes());
        assert_eq!(h.as_bytes()[12..16], 64u32.to_le_bytes());
        assert_eq!(
            (h.backend(), h.device(), h.payload()),
            (BackendKind::Cuda, 3, &[7u8; 64][..])
        );
        assert_eq!(IpcEventHandle::from_bytes(h.as_bytes()).unwrap(), h);
        assert_eq!(IpcEventHandle::from_hex(&h.to_hex()).unwrap(), h);
        fn assert_send_sync<T: Send + Sync + Copy>() {}
        assert_send_sync::<IpcEventHandle>();

        let err = |b: &[u8]| IpcEventHandle::from_bytes(b).unwrap_err().to_string();
        assert!(err(&h.as_bytes()[..100]).contains("100 bytes"));
        assert!(err(&[0u8; IPC_EVENT_HANDLE_LEN]).contains("magic"));
        let mut b = *h.as_bytes();
        b[4] = 2;
        assert!(err(&b).contains("version 2"));
        let mut b = *h.as_bytes();
        b[6] = 9;
        assert!(err(&b).contains("backend code 9"));
        let mut b = *h.as_bytes();
        b[12] = 200;
        assert!(err(&b).contains("payload length 200"));
        let mut b = *h.as_bytes();
        b[127] = 1;
        assert!(err(&b).contains("after the payload"));
        assert!(IpcEventHandle::from_hex("zz").is_err());
        assert!(IpcEventHandle::new(BackendKind::Host, 0, &[]).is_err());
        assert!(IpcEventHandle::new(BackendKind::Host, 0, &[1; 113]).is_err());
    }

    #[test]
    fn mem_handle_round_trips_and_refuses_garbage() {
        let h = IpcMemHandle::new(BackendKind::Host, 1, 4096, 100, b"name").unwrap();
        assert_eq!(&h.as_bytes()[..4], b"XSIM");
        assert_eq!(h.as_bytes()[16..24], 4096u64.to_le_bytes());
        assert_eq!(h.as_bytes()[24..32], 100u64.to_le_bytes());
        assert_eq!(
            (h.offset(), h.len(), h.device(), h.payload()),
            (4096, 100, 1, &b"name"[..])
        );
        assert_eq!(IpcMemHandle::from_bytes(h.as_bytes()).unwrap(), h);
        assert_eq!(IpcMemHandle::from_hex(&h.to_hex()).unwrap(), h);
        let err = |b: &[u8]| IpcMemHandle::from_bytes(b).unwrap_err().to_string();
        assert!(err(&[0u8; 128]).contains("magic"));
        assert!(err(&[1u8; 7]).contains("7 bytes"));
        let mut b = *h.as_bytes();
        b[24..32].copy_from_slice(&0u64.to_le_bytes());
        assert!(err(&b).contains("range"));
        let mut b = *h.as_bytes();
        b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(err(&b).contains("range"));
        let e = IpcEventHandle::new(BackendKind::Host, 0, b"x").unwrap();
        assert!(
            err(e.as_bytes()).contains("magic"),
            "an event handle is no memory handle"
        );
        assert!(IpcMemHandle::new(BackendKind::Host, 0, 0, 0, b"x").is_err());
        assert!(h.check_for(BackendKind::Cuda, 1).is_err());
        assert!(matches!(
            h.check_for(BackendKind::Host, 0),
            Err(Error::WrongDevice(_))
        ));
    }

    #[test]
    fn handle_of_another_backend_or_device_is_refused() {
        let h = IpcEventHandle::new(BackendKind::Cuda, 1, b"x").unwrap();
        assert!(h.check_for(BackendKind::Cuda, 1).is_ok());
        let e = h.check_for(BackendKind::Host, 1).unwrap_err();
        assert!(
            matches!(
                e,
                Error::WrongBackend {
                    expected: BackendKind::Host,
                    found: BackendKind::Cuda,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("open an IPC event handle"), "{e}");
        let e = h.check_for(BackendKind::Cuda, 0).unwrap_err();
        assert!(matches!(e, Error::WrongDevice(_)), "{e}");
    }
}
