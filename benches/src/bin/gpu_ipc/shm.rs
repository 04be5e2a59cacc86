//! The two processes' meeting point: one shared page of atomics (a file mapped by both), the
//! child's start, and bounded waits on both sides.
//!
//! Protocol (one command at a time): the parent stores `op` and `arg`, then `go = seq`
//! (release); the child sees `go == seq` (acquire), runs the command, stores `result`, then
//! `ack = seq` (release); the parent sees `ack == seq` (acquire) and reads `result`. Every
//! wait spins with a deadline; the parent also notices a child that exited, and the child dies
//! with its parent (`PR_SET_PDEATHSIG`) and gives up when no command comes.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::BenchResult;

/// The shared words.
#[repr(C)]
pub(crate) struct Ctl {
    go: AtomicU64,
    op: AtomicU64,
    arg: AtomicU64,
    ack: AtomicU64,
    result: AtomicU64,
}

const PAGE: usize = 4096;
const _: () = assert!(std::mem::size_of::<Ctl>() <= PAGE);

/// A mapped control page; the creator removes the file on drop.
pub(crate) struct Shm {
    ptr: *mut Ctl,
    path: PathBuf,
    owner: bool,
    _file: File,
}

impl Shm {
    /// Creates a zeroed page in a fresh file under `dir` (the parent).
    pub(crate) fn create(dir: &Path) -> BenchResult<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = dir.join(format!("xstream-gpu-ipc-{}-{nanos}", std::process::id()));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| format!("create {}: {e}", path.display()))?;
        file.set_len(PAGE as u64)
            .map_err(|e| format!("size {}: {e}", path.display()))?;
        Self::map(file, path, true)
    }

    /// Maps the parent's page (the child).
    pub(crate) fn open(path: &Path) -> BenchResult<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| format!("open {}: {e}", path.display()))?;
        Self::map(file, path.to_path_buf(), false)
    }

    fn map(file: File, path: PathBuf, owner: bool) -> BenchResult<Self> {
        // SAFETY: a fresh shared mapping of PAGE bytes of an open, PAGE-long file; the result
        // is checked against MAP_FAILED before use.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            if owner {
                let _ = std::fs::remove_file(&path);
            }
            return Err(format!("mmap {}: {e}", path.display()));
        }
        Ok(Self {
            ptr: p.cast(),
            path,
            owner,
            _file: file,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn ctl(&self) -> &Ctl {
        // SAFETY: the mapping is page-aligned, PAGE >= size_of::<Ctl>() bytes, lives until
        // `self` drops, and holds only AtomicU64s, for which any bytes (zero at creation) are
        // valid; other processes touch it only through atomics too.
        unsafe { &*self.ptr }
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: `ptr` is this object's own PAGE-long mapping; no reference from `ctl()`
        // outlives `self`.
        unsafe { libc::munmap(self.ptr.cast(), PAGE) };
        if self.owner {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Spins until `word == want`, checking the clock every 1024 spins: `Err` after `timeout`, or
/// when `alive()` (asked at most every 50 ms) says the other side is gone.
fn spin_until(
    word: &AtomicU64,
    want: u64,
    timeout: Duration,
    what: &str,
    mut alive: impl FnMut() -> Result<(), String>,
) -> BenchResult<()> {
    let start = Instant::now();
    let mut checked = start;
    let mut n = 0u32;
    loop {
        if word.load(Ordering::Acquire) == want {
            return Ok(());
        }
        n = n.wrapping_add(1);
        if n.is_multiple_of(1024) {
            let now = Instant::now();
            if now - start > timeout {
                return Err(format!("{what}: no answer within {timeout:?}"));
            }
            if now - checked > Duration::from_millis(50) {
                checked = now;
                alive().map_err(|e| format!("{what}: {e}"))?;
            }
        }
        std::hint::spin_loop();
    }
}

/// The parent's end: the child process and the command sequence.
pub(crate) struct Peer {
    child: Child,
    shm: Shm,
    seq: u64,
}

impl Peer {
    /// Starts this executable again as the child, with `env` and the page's path.
    pub(crate) fn spawn(shm: Shm, env: &[(&str, String)]) -> BenchResult<Self> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut cmd = Command::new(exe);
        cmd.env(super::CHILD_ENV, shm.path())
            .env(super::PARENT_ENV, std::process::id().to_string())
            .stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().map_err(|e| format!("start the child: {e}"))?;
        Ok(Self { child, shm, seq: 0 })
    }

    /// Posts a command and waits up to `timeout` for its answer (the child's `result`).
    pub(crate) fn call(&mut self, op: u64, arg: u64, timeout: Duration) -> BenchResult<u64> {
        self.seq += 1;
        let c = self.shm.ctl();
        c.op.store(op, Ordering::Relaxed);
        c.arg.store(arg, Ordering::Relaxed);
        c.go.store(self.seq, Ordering::Release);
        let child = &mut self.child;
        spin_until(&c.ack, self.seq, timeout, "child", || {
            match child.try_wait() {
                Ok(None) => Ok(()),
                Ok(Some(st)) => Err(format!("the child exited ({st})")),
                Err(e) => Err(format!("waitpid: {e}")),
            }
        })?;
        Ok(c.result.load(Ordering::Relaxed))
    }

    /// The child's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The shared page's file.
    pub(crate) fn shm_path(&self) -> &Path {
        self.shm.path()
    }

    /// Waits up to `timeout` for the child to exit on its own (after the exit command).
    pub(crate) fn finish(mut self, timeout: Duration) -> BenchResult<()> {
        let start = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(st)) if st.success() => return Ok(()),
                Ok(Some(st)) => return Err(format!("the child failed ({st})")),
                Ok(None) if start.elapsed() > timeout => {
                    return Err(format!("the child did not exit within {timeout:?}"))
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => return Err(format!("waitpid: {e}")),
            }
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        // A child still running here means the run failed: end it (it is ours, by pid).
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// The child's end.
pub(crate) struct Server {
    shm: Shm,
    seq: u64,
}

impl Server {
    /// Ties the child's life to the parent's and maps the page; `Err` when the parent is
    /// already gone.
    pub(crate) fn attach(path: &Path, parent: u32) -> BenchResult<Self> {
        // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number and has no memory arguments.
        let r = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
        if r != 0 {
            return Err(format!(
                "prctl(PR_SET_PDEATHSIG): {}",
                std::io::Error::last_os_error()
            ));
        }
        if parent_pid() != parent {
            return Err("the parent exited before the child started".into());
        }
        Ok(Self {
            shm: Shm::open(path)?,
            seq: 0,
        })
    }

    /// Waits up to `timeout` for the next command: `(op, arg)`.
    pub(crate) fn next(&mut self, parent: u32, timeout: Duration) -> BenchResult<(u64, u64)> {
        let c = self.shm.ctl();
        spin_until(&c.go, self.seq + 1, timeout, "parent", || {
            if parent_pid() == parent {
                Ok(())
            } else {
                Err("the parent exited".into())
            }
        })?;
        self.seq += 1;
        Ok((c.op.load(Ordering::Relaxed), c.arg.load(Ordering::Relaxed)))
    }

    /// Answers the current command.
    pub(crate) fn reply(&self, result: u64) {
        let c = self.shm.ctl();
        c.result.store(result, Ordering::Relaxed);
        c.ack.store(self.seq, Ordering::Release);
    }
}

fn parent_pid() -> u32 {
    // SAFETY: getppid has no arguments and cannot fail.
    let p = unsafe { libc::getppid() };
    u32::try_from(p).unwrap_or(0)
}
