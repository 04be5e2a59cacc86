//! Physical memory of the virtual memory emulations, written once for both Ascend test
//! doubles: the ACL simulator (this crate's `vmm`) and the driver emulation
//! (`xstream-ascend-hal-sim`, which includes this file by path). Address space is an
//! inaccessible anonymous mapping (`PROT_NONE`); physical memory is a `memfd` whose first page
//! ([`HEADER`]) is a header before its bytes; an export is named by the exporter's process id
//! and its descriptor, which another process opens through `/proc/<pid>/fd/<fd>`.
//!
//! Header (byte offsets, little-endian): the double's magic (8 bytes) at 0, exported (`u32`)
//! at [`H_EXPORTED`], whitelist off (`u32`) at [`H_NO_WLIST`], size (`u64`) at [`H_SIZE`],
//! whitelist length (`u32`) at [`H_NPIDS`], device + 1 (`u32`, 0: not recorded) at
//! [`H_DEVICE`], the whitelisted process ids (`i32`) from [`H_PIDS`].
//!
//! [`Space`] keeps a process's reservations, mappings and physical memory, with the rules both
//! doubles follow: a reservation is freed whole and without mappings; a mapping is aligned to
//! the granularity, lies inside one reservation, over no other mapping and within its memory;
//! released memory goes with its last mapping.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_void, CStr};

/// The header page before a `memfd`'s bytes.
pub const HEADER: usize = 4096;
pub(crate) const H_EXPORTED: usize = 8;
pub(crate) const H_NO_WLIST: usize = 12;
pub(crate) const H_SIZE: usize = 16;
pub(crate) const H_NPIDS: usize = 24;
pub(crate) const H_DEVICE: usize = 28;
pub(crate) const H_PIDS: usize = 32;
/// Whitelisted process ids one header holds.
pub const MAX_PIDS: usize = (HEADER - H_PIDS) / 4;

/// Which double's `memfd` objects: the magic of their header and their name (checked, as
/// `/memfd:<name>`, before an import opens a descriptor).
pub(crate) struct Kind {
    pub(crate) magic: &'static [u8; 8],
    pub(crate) name: &'static CStr,
}

pub(crate) fn pread_at(fd: i32, at: usize, buf: &mut [u8]) -> bool {
    // SAFETY: `buf` is valid for its length; `fd` is a descriptor we hold.
    let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), at as libc::off_t) };
    n == buf.len() as isize
}

pub(crate) fn pwrite_at(fd: i32, at: usize, buf: &[u8]) -> bool {
    // SAFETY: `buf` is valid for its length; `fd` is a descriptor we hold.
    let n = unsafe { libc::pwrite(fd, buf.as_ptr().cast(), buf.len(), at as libc::off_t) };
    n == buf.len() as isize
}

pub(crate) fn header_u32(fd: i32, at: usize) -> Option<u32> {
    let mut b = [0u8; 4];
    pread_at(fd, at, &mut b).then(|| u32::from_le_bytes(b))
}

/// The `u32` at `at` of a header read whole.
pub(crate) fn hdr_word(hdr: &[u8; H_PIDS], at: usize) -> u32 {
    u32::from_le_bytes([hdr[at], hdr[at + 1], hdr[at + 2], hdr[at + 3]])
}

/// An anonymous inaccessible mapping of `size` bytes: anywhere (`at` 0), at `at` if free
/// (`fixed` false, a hint checked afterwards), or over `at` (`fixed` true: only over a range of
/// one of our reservations).
pub(crate) fn inaccessible(at: usize, size: usize, fixed: bool) -> Option<usize> {
    let flags = libc::MAP_PRIVATE
        | libc::MAP_ANONYMOUS
        | libc::MAP_NORESERVE
        | if fixed {
            libc::MAP_FIXED
        } else if at != 0 {
            libc::MAP_FIXED_NOREPLACE
        } else {
            0
        };
    // SAFETY: an anonymous mapping; MAP_FIXED only over a range of a reservation of ours,
    // MAP_FIXED_NOREPLACE never replaces anything.
    let p = unsafe { libc::mmap(at as *mut c_void, size, libc::PROT_NONE, flags, -1, 0) };
    (p != libc::MAP_FAILED).then_some(p as usize)
}

pub(crate) fn unmap_raw(at: usize, size: usize) {
    // SAFETY: only ranges of our own anonymous mappings, handed back once.
    unsafe { libc::munmap(at as *mut c_void, size) };
}

pub(crate) fn close_fd(fd: i32) {
    // SAFETY: our descriptor, closed once (its handle is removed with it).
    unsafe { libc::close(fd) };
}

/// `size` bytes of inaccessible address space aligned to `align` (a power of two): an
/// over-reservation whose unaligned head and tail are handed back.
pub(crate) fn reserve_aligned(size: usize, align: usize) -> Option<usize> {
    let total = size.checked_add(align)?;
    let raw = inaccessible(0, total, false)?;
    let start = raw.next_multiple_of(align);
    if start > raw {
        unmap_raw(raw, start - raw);
    }
    if raw + total > start + size {
        unmap_raw(start + size, raw + total - (start + size));
    }
    Some(start)
}

/// A new `memfd` of `kind` holding `size` bytes after its header (`device`: the device + 1,
/// 0 for none); `None` when the system refuses.
pub(crate) fn create(kind: &Kind, size: usize, device: u32) -> Option<i32> {
    // SAFETY: a static NUL-terminated name.
    let fd = unsafe { libc::memfd_create(kind.name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut hdr = [0u8; H_PIDS];
    hdr[..8].copy_from_slice(kind.magic);
    hdr[H_SIZE..H_SIZE + 8].copy_from_slice(&(size as u64).to_le_bytes());
    hdr[H_DEVICE..H_DEVICE + 4].copy_from_slice(&device.to_le_bytes());
    let len = size
        .checked_add(HEADER)
        .and_then(|n| libc::off_t::try_from(n).ok());
    // SAFETY: `fd` is ours.
    let sized = len.is_some_and(|n| unsafe { libc::ftruncate(fd, n) } == 0);
    if !sized || !pwrite_at(fd, 0, &hdr) {
        close_fd(fd);
        return None;
    }
    Some(fd)
}

/// Maps `size` bytes of `fd` from byte `offset` after its header over `at`, shared.
///
/// # Safety
/// `at..at + size` lies in a reservation of ours where nothing is mapped; `fd` is live and
/// holds `offset + size` bytes after its header.
pub(crate) unsafe fn map_shared(at: usize, size: usize, fd: i32, offset: usize) -> bool {
    let (prot, flags) = (
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_SHARED | libc::MAP_FIXED,
    );
    // SAFETY: the caller's contract.
    let p = unsafe {
        libc::mmap(
            at as *mut c_void,
            size,
            prot,
            flags,
            fd,
            (HEADER + offset) as libc::off_t,
        )
    };
    p != libc::MAP_FAILED
}

/// Why an export cannot be added to or opened.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The exporter or its memory is gone (or the value names no `memfd` of this kind).
    Gone,
    /// The `memfd` is not (or no longer) exported.
    NotExported,
    /// The whitelist would exceed [`MAX_PIDS`].
    TooManyPids,
    /// The header could not be written.
    Io,
}

/// Adds `pids` to the whitelist of the exported `fd`.
pub(crate) fn add_pids(fd: i32, pids: &[i32]) -> Result<(), Refused> {
    let n = header_u32(fd, H_NPIDS).ok_or(Refused::Io)? as usize;
    if n + pids.len() > MAX_PIDS {
        return Err(Refused::TooManyPids);
    }
    let bytes: Vec<u8> = pids.iter().flat_map(|p| p.to_le_bytes()).collect();
    let count = ((n + pids.len()) as u32).to_le_bytes();
    if !pwrite_at(fd, H_PIDS + 4 * n, &bytes) || !pwrite_at(fd, H_NPIDS, &count) {
        return Err(Refused::Io);
    }
    Ok(())
}

/// Opens the `memfd` behind `shareable` (exporter's process id in the high 32 bits, its
/// descriptor in the low 32) through `/proc/<pid>/fd/<fd>`: only `memfd` objects of `kind`
/// whose header says exported. Returns the descriptor (the caller closes it or keeps it) and
/// the header.
pub(crate) fn open_export(kind: &Kind, shareable: u64) -> Result<(i32, [u8; H_PIDS]), Refused> {
    let path = format!("/proc/{}/fd/{}", shareable >> 32, shareable as u32);
    let name = format!("/memfd:{}", kind.name.to_string_lossy());
    let ours = std::fs::read_link(&path).is_ok_and(|t| t.to_string_lossy().starts_with(&name));
    let cpath = std::ffi::CString::new(path).map_err(|_| Refused::Gone)?;
    let fd = if ours {
        // SAFETY: a NUL-terminated path; the descriptor is closed below or handed to the
        // caller.
        unsafe { libc::open(cpath.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) }
    } else {
        -1
    };
    if fd < 0 {
        return Err(Refused::Gone);
    }
    let mut hdr = [0u8; H_PIDS];
    if !pread_at(fd, 0, &mut hdr) || &hdr[..8] != kind.magic || hdr_word(&hdr, H_EXPORTED) != 1 {
        close_fd(fd);
        return Err(Refused::NotExported);
    }
    Ok((fd, hdr))
}

/// Whether process `me` may import the export `fd` whose header is `hdr`: the whitelist is off
/// or lists it.
pub(crate) fn admits(fd: i32, hdr: &[u8; H_PIDS], me: i32) -> bool {
    let n = (hdr_word(hdr, H_NPIDS) as usize).min(MAX_PIDS);
    let mut pids = vec![0u8; 4 * n];
    hdr_word(hdr, H_NO_WLIST) == 1
        || pread_at(fd, H_PIDS, &mut pids)
            && pids
                .chunks_exact(4)
                .any(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) == me)
}

/// The size recorded in a header.
pub(crate) fn size_of(hdr: &[u8; H_PIDS]) -> Option<usize> {
    let b: [u8; 8] = hdr[H_SIZE..H_SIZE + 8].try_into().ok()?;
    usize::try_from(u64::from_le_bytes(b)).ok()
}

/// One physical memory object of a [`Space`].
pub(crate) struct Phys {
    /// The `memfd`: a header page ([`HEADER`]), then the bytes.
    pub(crate) fd: i32,
    pub(crate) size: usize,
    /// Live mappings of it; released memory is closed when this reaches 0.
    pub(crate) maps: usize,
    pub(crate) released: bool,
    /// Opened from another process's export (never exported again).
    pub(crate) imported: bool,
}

/// Why a [`Space`] refuses.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SpaceError {
    /// No reservation starts there.
    NotReserved,
    /// The reservation still has mappings.
    StillMapped,
    /// No live physical memory has that handle.
    UnknownHandle,
    /// Unknown handle, or the mapped range runs past the memory.
    OutsideHandle,
    /// Outside a reservation, unaligned, empty, or over another mapping.
    BadMapping,
    /// No mapping starts there.
    NotMapped,
    /// The system refused the shared mapping.
    MapFailed,
    /// The system refused to make an unmapped range inaccessible again.
    UnmapFailed,
}

/// A process's emulated virtual memory: reservations (start → size), mappings (start →
/// (size, handle)) and physical memory by handle (`base + n * step` for the n-th).
pub(crate) struct Space {
    pub(crate) reserved: BTreeMap<usize, usize>,
    pub(crate) maps: BTreeMap<usize, (usize, usize)>,
    pub(crate) handles: HashMap<usize, Phys>,
    issued: usize,
    base: usize,
    step: usize,
}

impl Space {
    pub(crate) fn new(base: usize, step: usize) -> Self {
        let (reserved, maps, handles) = Default::default();
        Self {
            reserved,
            maps,
            handles,
            issued: 0,
            base,
            step,
        }
    }

    /// Frees the whole reservation starting at `start`.
    pub(crate) fn release_reservation(&mut self, start: usize) -> Result<(), SpaceError> {
        let &size = self.reserved.get(&start).ok_or(SpaceError::NotReserved)?;
        if self.maps.range(start..start + size).next().is_some() {
            return Err(SpaceError::StillMapped);
        }
        self.reserved.remove(&start);
        unmap_raw(start, size);
        Ok(())
    }

    /// Adds the physical memory `fd` of `size` bytes; returns its handle.
    pub(crate) fn insert(&mut self, fd: i32, size: usize, imported: bool) -> usize {
        let h = self.base + self.issued * self.step;
        self.issued += 1;
        let (maps, released) = (0, false);
        let phys = Phys {
            fd,
            size,
            maps,
            released,
            imported,
        };
        self.handles.insert(h, phys);
        h
    }

    /// Releases the memory of handle `h`: closed now, or with its last mapping.
    pub(crate) fn release(&mut self, h: usize) -> Result<(), SpaceError> {
        let p = self.handles.get_mut(&h).filter(|p| !p.released);
        let p = p.ok_or(SpaceError::UnknownHandle)?;
        p.released = true;
        if p.maps == 0 {
            self.close(h);
        }
        Ok(())
    }

    /// Maps `size` bytes of handle `h` from `offset` over `at` (module docs' rules, with
    /// `granularity`).
    pub(crate) fn map(
        &mut self,
        (at, size, offset): (usize, usize, usize),
        h: usize,
        granularity: usize,
    ) -> Result<(), SpaceError> {
        let fd = self
            .handles
            .get(&h)
            .filter(|p| !p.released && offset.checked_add(size).is_some_and(|e| e <= p.size))
            .map(|p| p.fd)
            .ok_or(SpaceError::OutsideHandle)?;
        let end = at.checked_add(size).ok_or(SpaceError::BadMapping)?;
        let inside = self
            .reserved
            .range(..=at)
            .next_back()
            .is_some_and(|(&s, &n)| end <= s + n);
        let overlaps = self
            .maps
            .range(..end)
            .next_back()
            .is_some_and(|(&s, &(n, _))| s + n > at);
        let aligned = [at, size, offset]
            .iter()
            .all(|x| x.is_multiple_of(granularity));
        if size == 0 || !aligned || !inside || overlaps {
            return Err(SpaceError::BadMapping);
        }
        // SAFETY: `at..end` lies in a reservation of ours where nothing is mapped; the
        // descriptor is live and holds `offset + size` bytes after its header.
        if !unsafe { map_shared(at, size, fd, offset) } {
            return Err(SpaceError::MapFailed);
        }
        self.maps.insert(at, (size, h));
        if let Some(p) = self.handles.get_mut(&h) {
            p.maps += 1;
        }
        Ok(())
    }

    /// Unmaps the mapping starting at `at` (its range becomes inaccessible again); returns its
    /// size.
    pub(crate) fn unmap(&mut self, at: usize) -> Result<usize, SpaceError> {
        let &(size, h) = self.maps.get(&at).ok_or(SpaceError::NotMapped)?;
        inaccessible(at, size, true).ok_or(SpaceError::UnmapFailed)?;
        self.maps.remove(&at);
        let gone = self.handles.get_mut(&h).is_some_and(|p| {
            p.maps -= 1;
            p.maps == 0 && p.released
        });
        if gone {
            self.close(h);
        }
        Ok(size)
    }

    fn close(&mut self, h: usize) {
        if let Some(p) = self.handles.remove(&h) {
            close_fd(p.fd);
        }
    }
}
