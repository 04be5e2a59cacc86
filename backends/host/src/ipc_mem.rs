//! Interprocess buffers on the host ([`IpcBuffer`] for [`HostDeviceBuffer`]): an exported buffer's
//! bytes move to a file of the shared-memory file system (`/dev/shm`, else the temporary
//! directory) that every process using it reads and writes with positioned I/O, so the crate
//! stays free of `unsafe` (no `mmap`).
//!
//! File: a [`HEADER_LEN`] (64) byte header (magic `XSHIPCMB`, version `u32` 1, exporter
//! process id `u32`, buffer length `u64`, closed `u32`), then the buffer's bytes.
//!
//! Every operation on a shared buffer (copies, kernels, memory operations, collectives) takes
//! the buffer's lock as on any host buffer; for a shared buffer taking the lock reads the
//! range's bytes from the file, and releasing it writes back only the bytes that changed, so
//! processes writing disjoint bytes of one buffer never undo each other's writes. Ordering
//! between processes is the program's business (interprocess events), as on a GPU: bytes
//! written by stream work are in the file before the work's later records complete. Cost: two
//! passes over the range per operation (an emulation, not a speed claim).
//!
//! Ownership: the exporter frees. Its buffer's drop marks the file closed and removes it; an
//! open after that fails. An import opened before keeps the bytes it sees (the file stays
//! until its last user closes it); the host does not report an import outliving its export.
//!
//! [`IpcBuffer`]: xstream_core::IpcBuffer

use std::fs::{File, OpenOptions};
use std::io;
use std::ops::{Deref, DerefMut};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::MutexGuard;

use xstream_core::{
    BackendKind, Device as _, DeviceOf, Error, IpcBufferImpl, IpcMemHandle, Result,
};

use crate::buffer::BufInner;
use crate::ipc::{create_shared_file, process_alive, shm_dir};
use crate::{HostBackend, HostDeviceBuffer};

/// The length of the file header.
pub const HEADER_LEN: u64 = 64;
const MAGIC: &[u8; 8] = b"XSHIPCMB";
const VERSION: u32 = 1;
/// The prefix of shared buffer file names.
pub const NAME_PREFIX: &str = "xstream-host-ipc-mem-";

fn io_err(what: &str, e: io::Error) -> Error {
    Error::unsupported(
        BackendKind::Host,
        format!("interprocess buffer ({what}): {e}"),
    )
}

/// The file behind a shared buffer (or a range of it), as this process uses it.
pub(crate) struct SharedMem {
    file: File,
    path: PathBuf,
    name: String,
    /// The file offset of this buffer's byte 0.
    base: u64,
    owner: bool,
}

impl std::fmt::Debug for SharedMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedMem")
            .field("name", &self.name)
            .field("base", &self.base)
            .finish()
    }
}

struct Header {
    exporter: u32,
    len: u64,
    closed: bool,
}

fn encode_header(exporter: u32, len: u64, closed: bool) -> [u8; HEADER_LEN as usize] {
    let mut b = [0u8; HEADER_LEN as usize];
    b[..8].copy_from_slice(MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&exporter.to_le_bytes());
    b[16..24].copy_from_slice(&len.to_le_bytes());
    b[24..28].copy_from_slice(&u32::from(closed).to_le_bytes());
    b
}

fn decode_header(b: &[u8; HEADER_LEN as usize]) -> Option<Header> {
    let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let mut l = [0u8; 8];
    l.copy_from_slice(&b[16..24]);
    (&b[..8] == MAGIC && u32_at(8) == VERSION).then(|| Header {
        exporter: u32_at(12),
        len: u64::from_le_bytes(l),
        closed: u32_at(24) != 0,
    })
}

impl SharedMem {
    /// Moves `bytes` (a buffer or physical memory being exported) into a new file.
    pub(crate) fn create(bytes: &[u8]) -> Result<Self> {
        let (file, path, name) = create_shared_file(NAME_PREFIX, "", io_err)?;
        let init = file
            .write_all_at(
                &encode_header(std::process::id(), bytes.len() as u64, false),
                0,
            )
            .and_then(|()| file.write_all_at(bytes, HEADER_LEN));
        if let Err(e) = init {
            let _ = std::fs::remove_file(&path);
            return Err(io_err("initialise", e));
        }
        Ok(Self {
            file,
            path,
            name,
            base: HEADER_LEN,
            owner: true,
        })
    }

    /// Opens the range of `handle`.
    fn open(handle: &IpcMemHandle) -> Result<Self> {
        Self::open_named(
            handle.payload(),
            handle.offset() as u64,
            handle.len() as u64,
        )
    }

    /// The file's name (the payload of handles).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Opens bytes `off..off + len` of the file named `payload` (another process's export).
    pub(crate) fn open_named(payload: &[u8], off: u64, len: u64) -> Result<Self> {
        let name = std::str::from_utf8(payload)
            .ok()
            .filter(|n| {
                n.starts_with(NAME_PREFIX)
                    && n.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
            })
            .ok_or_else(|| {
                Error::invalid(format!(
                    "not a host IPC memory handle payload ({} bytes that are not a file name)",
                    payload.len()
                ))
            })?
            .to_string();
        let path = shm_dir().join(&name);
        let gone = |why: String| {
            Error::invalid(format!(
                "the host IPC buffer {name} cannot be opened: {why} (the exporter freed it or its process exited)"
            ))
        };
        let file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(gone("its file no longer exists".into()))
            }
            Err(e) => return Err(io_err(&format!("open {}", path.display()), e)),
        };
        let mut h = [0u8; HEADER_LEN as usize];
        file.read_exact_at(&mut h, 0)
            .map_err(|e| io_err("read the header", e))?;
        let h = decode_header(&h).ok_or_else(|| {
            Error::invalid(format!("{} is not a host IPC buffer", path.display()))
        })?;
        if h.closed {
            return Err(gone("the exporter closed it".into()));
        }
        if h.exporter == std::process::id() {
            return Err(Error::invalid(format!(
                "the host IPC buffer {name} was exported by this process: use the buffer itself (CUDA refuses this too)"
            )));
        }
        if !process_alive(h.exporter) {
            return Err(gone(format!("exporter process {} is gone", h.exporter)));
        }
        if off.checked_add(len).is_none_or(|end| end > h.len) {
            return Err(Error::invalid(format!(
                "the handle's range {off}..+{len} is outside the exported buffer of {} bytes",
                h.len
            )));
        }
        Ok(Self {
            file,
            path,
            name,
            base: HEADER_LEN + off,
            owner: false,
        })
    }

    fn load(&self, into: &mut [u8]) {
        self.load_at(0, into);
    }

    /// Reads `into.len()` bytes from byte `off` of this buffer's range.
    pub(crate) fn load_at(&self, off: usize, into: &mut [u8]) {
        if let Err(e) = self.file.read_exact_at(into, self.base + off as u64) {
            tracing::error!("host IPC buffer {}: read: {e}", self.name);
        }
    }

    /// Writes back the bytes of `now` that differ from `before`.
    fn store(&self, before: &[u8], now: &[u8]) {
        self.store_at(0, before, now);
    }

    /// Writes back the bytes of `now` that differ from `before`, `now` starting at byte `off`
    /// of this buffer's range.
    pub(crate) fn store_at(&self, off: usize, before: &[u8], now: &[u8]) {
        let base = self.base + off as u64;
        let mut i = 0;
        while i < now.len() {
            if before.get(i) == Some(&now[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < now.len() && before.get(i) != Some(&now[i]) {
                i += 1;
            }
            if let Err(e) = self.file.write_all_at(&now[start..i], base + start as u64) {
                tracing::error!("host IPC buffer {}: write: {e}", self.name);
            }
        }
    }
}

impl Drop for SharedMem {
    fn drop(&mut self) {
        if self.owner {
            let _ = self
                .file
                .write_all_at(&encode_header(std::process::id(), 0, true), 0);
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A held buffer lock; for a shared buffer it loaded the file's bytes and writes back the
/// changed ones when released.
pub(crate) struct BufGuard<'a> {
    g: MutexGuard<'a, Vec<u8>>,
    /// Where the buffer's bytes start in the block (the alignment padding before).
    off: usize,
    shared: Option<(&'a dyn Backing, Vec<u8>)>,
}

/// Where a buffer's bytes really live when not in its heap block: a shared file (an
/// interprocess buffer) or mapped physical memory (`crate::vmm`). Taking the buffer's lock
/// loads them; releasing it stores the bytes that changed.
pub(crate) trait Backing {
    /// Reads the buffer's bytes into `into`.
    fn load(&self, into: &mut [u8]);
    /// Writes back the bytes of `now` that differ from `before`.
    fn store(&self, before: &[u8], now: &[u8]);
}

impl Backing for SharedMem {
    fn load(&self, into: &mut [u8]) {
        SharedMem::load(self, into);
    }
    fn store(&self, before: &[u8], now: &[u8]) {
        SharedMem::store(self, before, now);
    }
}

impl<'a> BufGuard<'a> {
    pub(crate) fn new(
        mut g: MutexGuard<'a, Vec<u8>>,
        off: usize,
        shared: Option<&'a dyn Backing>,
    ) -> Self {
        let shared = shared.map(|s| {
            s.load(&mut g[off..]);
            (s, g[off..].to_vec())
        });
        Self { g, off, shared }
    }
}

impl Deref for BufGuard<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.g[self.off..]
    }
}

impl DerefMut for BufGuard<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        let off = self.off;
        &mut self.g[off..]
    }
}

impl Drop for BufGuard<'_> {
    fn drop(&mut self) {
        if let Some((s, before)) = &self.shared {
            s.store(before, &self.g[self.off..]);
        }
    }
}

impl IpcBufferImpl for HostDeviceBuffer {
    fn export_ipc_range_impl(
        &self,
        offset: usize,
        len: usize,
        _pids: Option<&[u32]>,
    ) -> Result<IpcMemHandle> {
        let shared = self.inner.share_with(SharedMem::create)?;
        if !shared.owner {
            return Err(Error::invalid(
                "an imported host buffer cannot be exported again: export the original",
            ));
        }
        IpcMemHandle::new(
            BackendKind::Host,
            self.inner.ordinal(),
            offset,
            len,
            shared.name.as_bytes(),
        )
    }

    fn open_ipc_impl(device: &DeviceOf<HostBackend>, handle: &IpcMemHandle) -> Result<Self> {
        let shared = SharedMem::open(handle)?;
        Ok(Self {
            inner: crate::buffer::register(BufInner::imported(
                handle.len(),
                device.info().ordinal,
                shared,
            )?),
        })
    }
}
