//! The shared-memory "world" of a communicator: one file in `/dev/shm`, named by the root
//! info, mapped by every rank (threads of one process or separate processes on one machine).
//!
//! Layout (all counters are atomics, little-endian, at fixed offsets):
//!
//! | Offset | Holds |
//! | --- | --- |
//! | 0 | magic `u64`, rank count `u32`, joined count `u32`, slot bytes `u64`, ring bytes `u64`, abort code `i32` |
//! | 256 + 64·r | rank `r`: barrier phase `u64`, present `u32`, pid `u32`, operation descriptor `[u64; 3]`, departed `u32` (at +56) |
//! | 4096 | one staging slot per rank (`slot bytes` each) |
//! | 4096 + n·slot | one byte ring per ordered pair (src, dst): `sent u64`, `consumed u64` (own cache lines), then `ring bytes` of data |
//!
//! The file is created (its pages reserved with `posix_fallocate`, so a full `/dev/shm` is
//! `HCCL_E_MEMORY`, never a SIGBUS) by the first rank that joins (under `flock`), and unlinked by rank 0
//! once every rank has mapped it (or by a rank that gives up waiting), so it never outlives
//! the job's start.

use crate::types::*;
use std::ffi::CString;
use std::sync::atomic::AtomicI32;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;

/// Most ranks of one communicator.
pub const MAX_RANKS: u32 = 32;
const MAGIC: u64 = 0x5853_4843_434c_0001; // "XSHCCL" v1
const HEADER: usize = 4096;
const RANK_REC: usize = 256;
const RING_HEAD: usize = 128;
/// Bytes of the ring of each ordered pair of ranks (point-to-point traffic).
pub(crate) const RING_BYTES: usize = 256 * 1024;

/// A mapped world.
pub(crate) struct World {
    base: *mut u8,
    len: usize,
    pub(crate) nranks: u32,
    pub(crate) slot: usize,
    path: CString,
}

// SAFETY: the mapping is shared memory accessed through atomics (headers) and through
// disjoint, barrier-ordered byte ranges (slots, rings); the pointer itself is immutable.
unsafe impl Send for World {}
// SAFETY: as above.
unsafe impl Sync for World {}

impl Drop for World {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are the mapping made in `open`, unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

fn size_for(nranks: usize, slot: usize) -> usize {
    HEADER + nranks * slot + nranks * nranks * (RING_HEAD + RING_BYTES)
}

impl World {
    /// Maps (creating if needed) the world file `path` as rank `rank` of `nranks`, with
    /// staging slots of `slot` bytes; marks the rank present and counts it as joined.
    pub(crate) fn open(
        path: &str,
        nranks: u32,
        rank: u32,
        slot: usize,
    ) -> Result<World, HcclResult> {
        let c = CString::new(path).map_err(|_| HCCL_E_PARA)?;
        // SAFETY: `c` is a valid C string.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd < 0 {
            return Err(HCCL_E_OPEN_FILE_FAILURE);
        }
        let r = Self::setup(fd, c, nranks, rank, slot);
        // SAFETY: `fd` is ours. The lock is dropped explicitly: the mapping keeps the open
        // file description (and so a `flock`) alive after close. The mapping stays valid.
        unsafe {
            libc::flock(fd, libc::LOCK_UN);
            libc::close(fd);
        }
        r
    }

    fn setup(
        fd: i32,
        path: CString,
        nranks: u32,
        rank: u32,
        slot: usize,
    ) -> Result<World, HcclResult> {
        let len = size_for(nranks as usize, slot);
        // SAFETY: `fd` is open; flock serialises the creation among joining ranks.
        if unsafe { libc::flock(fd, libc::LOCK_EX) } != 0 {
            return Err(HCCL_E_SYSCALL);
        }
        // SAFETY: a zeroed stat buffer for fstat on an open fd.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `st` is a live local.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Err(HCCL_E_SYSCALL);
        }
        let cur = st.st_size as usize;
        if cur != 0 && cur != len {
            return Err(HCCL_E_PARA);
        }
        // Reserve the pages now (not just a sparse size): a full `/dev/shm` then fails here
        // with HCCL_E_MEMORY instead of a SIGBUS at first touch.
        // SAFETY: growing a file we hold open and locked.
        if cur == 0 && unsafe { libc::posix_fallocate(fd, 0, len as libc::off_t) } != 0 {
            // SAFETY: as above; leave an empty file (the next rank retries or fails alike).
            unsafe { libc::ftruncate(fd, 0) };
            return Err(HCCL_E_MEMORY);
        }
        // SAFETY: mapping `len` bytes of the file just sized; checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(HCCL_E_MEMORY);
        }
        let w = World {
            base: p.cast(),
            len,
            nranks,
            slot,
            path,
        };
        if w.u64_at(0).load(SeqCst) == 0 {
            w.u32_at(8).store(nranks, SeqCst);
            w.u64_at(16).store(slot as u64, SeqCst);
            w.u64_at(24).store(RING_BYTES as u64, SeqCst);
            w.u64_at(0).store(MAGIC, SeqCst);
        } else if w.u64_at(0).load(SeqCst) != MAGIC
            || w.u32_at(8).load(SeqCst) != nranks
            || w.u64_at(16).load(SeqCst) != slot as u64
        {
            return Err(HCCL_E_PARA);
        }
        if w.present(rank)
            .compare_exchange(0, 1, SeqCst, SeqCst)
            .is_err()
        {
            // The same rank joined twice.
            return Err(HCCL_E_PARA);
        }
        // SAFETY: getpid has no preconditions.
        w.u32_at(w.rec(rank) + 12)
            .store(unsafe { libc::getpid() } as u32, SeqCst);
        w.u32_at(12).fetch_add(1, SeqCst);
        Ok(w)
    }

    /// Removes the file name (mappings stay valid).
    pub(crate) fn unlink(&self) {
        // SAFETY: `path` is a valid C string; a second unlink fails harmlessly.
        unsafe { libc::unlink(self.path.as_ptr()) };
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off.is_multiple_of(8) && off + 8 <= self.len);
        // SAFETY: in bounds, 8-byte aligned (the mapping is page aligned), shared memory that
        // every user accesses atomically at this offset.
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off.is_multiple_of(4) && off + 4 <= self.len);
        // SAFETY: as for `u64_at`.
        unsafe { &*(self.base.add(off) as *const AtomicU32) }
    }

    fn rec(&self, rank: u32) -> usize {
        RANK_REC + 64 * rank as usize
    }

    /// Ranks that have joined.
    pub(crate) fn joined(&self) -> u32 {
        self.u32_at(12).load(SeqCst)
    }

    /// The world's abort code (0: none).
    pub(crate) fn abort_code(&self) -> &AtomicI32 {
        // SAFETY: offset 32 is 4-byte aligned, in the header, accessed atomically by all.
        unsafe { &*(self.base.add(32) as *const AtomicI32) }
    }

    /// Barrier phase counter of `rank`.
    pub(crate) fn phase(&self, rank: u32) -> &AtomicU64 {
        self.u64_at(self.rec(rank))
    }

    fn present(&self, rank: u32) -> &AtomicU32 {
        self.u32_at(self.rec(rank) + 8)
    }

    /// Whether `rank` destroyed its communicator (it will never arrive again).
    pub(crate) fn departed(&self, rank: u32) -> &AtomicU32 {
        self.u32_at(self.rec(rank) + 56)
    }

    /// Word `i` (0..3) of the operation descriptor of `rank`.
    pub(crate) fn desc(&self, rank: u32, i: usize) -> &AtomicU64 {
        self.u64_at(self.rec(rank) + 16 + 8 * i)
    }

    /// Start of the staging slot of `rank`.
    pub(crate) fn slot_ptr(&self, rank: u32) -> *mut u8 {
        // SAFETY: in bounds by the layout.
        unsafe { self.base.add(HEADER + rank as usize * self.slot) }
    }

    fn ring_off(&self, src: u32, dst: u32) -> usize {
        let n = self.nranks as usize;
        HEADER + n * self.slot + (src as usize * n + dst as usize) * (RING_HEAD + RING_BYTES)
    }

    /// `(sent, consumed, data)` of the ring from `src` to `dst`.
    pub(crate) fn ring(&self, src: u32, dst: u32) -> (&AtomicU64, &AtomicU64, *mut u8) {
        let o = self.ring_off(src, dst);
        // SAFETY: in bounds by the layout.
        (self.u64_at(o), self.u64_at(o + 64), unsafe {
            self.base.add(o + RING_HEAD)
        })
    }
}

/// A fresh world path: `/dev/shm/xstream-hccl-<pid>-<counter>-<nanos>`.
pub(crate) fn new_path() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    format!(
        "/dev/shm/xstream-hccl-{pid}-{}-{nanos}",
        N.fetch_add(1, SeqCst)
    )
}
