//! Shared memory behind the simulated IPC events and IPC memory (on unless `XSIM_IPC=0`): anonymous
//! `memfd` files that another process of the same user opens through
//! `/proc/<pid>/fd/<fd>` while the owner lives. Nothing is left in `/dev/shm` when a process
//! ends; a dead exporter's objects can no longer be opened (the `/proc` entry is gone), and a
//! nonce in each object guards against a reused pid or descriptor number.

use crate::codes::*;
use crate::error::*;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;

/// The page size the simulator lays shared objects out with.
pub(crate) const PAGE: usize = 4096;

/// Programmatic IPC switch (`xsimSetIpc`): 0 = follow `XSIM_IPC`, 1 = on, 2 = off.
static IPC_OVERRIDE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Whether the simulated product has IPC memory and (on A2/A3) IPC events: on unless
/// `XSIM_IPC=0` (or `off`, `no`, `false`) or `xsimSetIpc(0)`. The runtime source lists
/// `RT_FEATURE_IPC_MEMORY` for the 910, 310P and 910B/910C configurations and
/// `RT_FEATURE_IPC_EVENT` only for the 910B/910C (and 950) ones; switched off, the simulator is a
/// chip with neither.
pub(crate) fn ipc_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    match IPC_OVERRIDE.load(SeqCst) {
        1 => true,
        2 => false,
        _ => *ON.get_or_init(|| {
            std::env::var("XSIM_IPC")
                .map(|v| !matches!(v.trim(), "0" | "off" | "no" | "false"))
                .unwrap_or(true)
        }),
    }
}

/// `aclError xsimSetIpc(int32_t on)`: 1 gives the product IPC memory and (on A2/A3) IPC events,
/// 0 takes them away, -1 goes back to `XSIM_IPC`; anything else → 100000. Device blocks already
/// allocated keep their backing (only blocks allocated while IPC is on can be exported).
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn xsimSetIpc(on: i32) -> i32 {
    ffi("xsimSetIpc", false, || {
        let v = match on {
            -1 => 0,
            1 => 1,
            0 => 2,
            _ => {
                return err(
                    ACL_ERROR_INVALID_PARAM,
                    format!("xsimSetIpc({on}): 1, 0 or -1"),
                )
            }
        };
        IPC_OVERRIDE.store(v, SeqCst);
        Ok(())
    })
}

/// `RT_FEATURE_IPC_MEMORY` on the simulated product.
pub(crate) fn ipc_memory_supported() -> bool {
    ipc_enabled()
}

/// `RT_FEATURE_IPC_EVENT` on the simulated product (A2/A3 only).
pub(crate) fn ipc_events_supported() -> bool {
    ipc_enabled() && crate::config::product() == crate::config::Product::A2
}

/// A fresh nonce (never 0).
pub(crate) fn nonce() -> u64 {
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let x = t ^ ((std::process::id() as u64) << 32) ^ N.fetch_add(0x9E37_79B9, SeqCst);
    x.max(1)
}

/// This process's id as the runtime reports it.
pub(crate) fn my_pid() -> i32 {
    std::process::id() as i32
}

/// Whether process `pid` still exists.
pub(crate) fn alive(pid: i32) -> bool {
    pid > 0 && std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// A shared mapping: its file descriptor (owned) and the mapped bytes.
pub(crate) struct Shm {
    pub(crate) fd: i32,
    pub(crate) base: *mut u8,
    pub(crate) len: usize,
}

// SAFETY: the mapping is plain shared bytes, accessed through atomics or by the user's own
// synchronisation (device memory).
unsafe impl Send for Shm {}
// SAFETY: as above.
unsafe impl Sync for Shm {}

fn map(fd: i32, len: usize) -> R<*mut u8> {
    // SAFETY: a fresh shared mapping of a descriptor we hold; no existing memory is touched.
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
        return err(
            ACL_ERROR_RT_MEMORY_ALLOCATION,
            "mmap of shared memory failed",
        );
    }
    Ok(p as *mut u8)
}

impl Shm {
    /// A new zeroed object of `len` bytes (a multiple of [`PAGE`]).
    pub(crate) fn create(len: usize) -> R<Shm> {
        // SAFETY: a static NUL-terminated name.
        let fd = unsafe { libc::memfd_create(c"xsim-ipc".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return err(ACL_ERROR_RT_MEMORY_ALLOCATION, "memfd_create failed");
        }
        // SAFETY: fd is ours.
        if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
            // SAFETY: fd is ours, closed once.
            unsafe { libc::close(fd) };
            return err(
                ACL_ERROR_RT_MEMORY_ALLOCATION,
                "ftruncate of shared memory failed",
            );
        }
        match map(fd, len) {
            Ok(base) => Ok(Shm { fd, base, len }),
            Err(e) => {
                // SAFETY: fd is ours, closed once.
                unsafe { libc::close(fd) };
                Err(e)
            }
        }
    }

    /// Opens process `pid`'s object `fd`; `None` when it cannot be opened (the process is
    /// gone, the descriptor is closed or is not one of the simulator's `memfd` objects) or is
    /// shorter than `min_len`.
    pub(crate) fn open(pid: i32, fd: i32, min_len: usize) -> Option<Shm> {
        if pid <= 0 || fd < 0 {
            return None;
        }
        let link = format!("/proc/{pid}/fd/{fd}");
        // Only the simulator's own objects: never open another file of that process.
        let target = std::fs::read_link(&link).ok()?;
        if !target.to_string_lossy().starts_with("/memfd:xsim-ipc") {
            return None;
        }
        let path = std::ffi::CString::new(link).ok()?;
        // SAFETY: a valid NUL-terminated path.
        let my = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if my < 0 {
            return None;
        }
        // SAFETY: an all-zero stat is a valid out-buffer.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `my` is ours; `st` is valid for a write.
        let ok = unsafe { libc::fstat(my, &mut st) } == 0
            && (st.st_mode & libc::S_IFMT) == libc::S_IFREG
            && st.st_size as usize >= min_len
            && (st.st_size as usize).is_multiple_of(PAGE);
        if !ok {
            // SAFETY: ours, closed once.
            unsafe { libc::close(my) };
            return None;
        }
        let len = st.st_size as usize;
        match map(my, len) {
            Ok(base) => Some(Shm { fd: my, base, len }),
            Err(_) => {
                // SAFETY: ours, closed once.
                unsafe { libc::close(my) };
                None
            }
        }
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: the mapping and descriptor are ours and released once.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
            libc::close(self.fd);
        }
    }
}
