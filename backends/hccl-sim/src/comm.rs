//! Communicators: the `Comm` object, its registry of live handles, initialisation from root
//! info or for several devices of one process, destruction, and the bounded waits every
//! operation is made of.

use crate::config::*;
use crate::shm::*;
use crate::types::*;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicI32;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::time::Duration;
use std::time::Instant;

/// Magic bytes that start a root info of this simulator.
const ROOT_MAGIC: &[u8; 8] = b"XSHCCLR1";

/// A communicator: one rank of a world.
pub(crate) struct Comm {
    pub(crate) world: World,
    pub(crate) rank: u32,
    /// Set by `HcclCommDestroy`: running and queued operations stop.
    pub(crate) destroyed: AtomicBool,
    /// The first asynchronous error (0: none); sticky.
    pub(crate) async_err: AtomicI32,
    /// Operations this rank has started (the fault rules count them).
    pub(crate) ops_started: AtomicU64,
}

impl Comm {
    /// Records `code` as the communicator's asynchronous error (the first one stays) and as
    /// the world's abort code, so that peers stop waiting.
    pub(crate) fn fail(&self, code: HcclResult) {
        let _ = self.async_err.compare_exchange(0, code, SeqCst, SeqCst);
        let _ = self
            .world
            .abort_code()
            .compare_exchange(0, code, SeqCst, SeqCst);
    }

    /// Polls `ready` until it holds; fails as [`Waiter::idle`] does.
    pub(crate) fn wait(
        &self,
        token: *const c_void,
        timeout: Duration,
        mut ready: impl FnMut() -> bool,
    ) -> Result<(), HcclResult> {
        let mut w = Waiter::new(self, token, timeout);
        loop {
            if ready() {
                return Ok(());
            }
            w.idle()?;
        }
    }

    /// A barrier of all ranks: this rank's phase goes up by one, then it waits until every
    /// peer's phase has reached it; a peer that has not and departed fails it with
    /// `HCCL_E_REMOTE`.
    pub(crate) fn barrier(&self, token: *const c_void) -> Result<(), HcclResult> {
        let w = &self.world;
        let p = w.phase(self.rank).fetch_add(1, SeqCst) + 1;
        let mut waiter = Waiter::new(self, token, config().exec_timeout);
        loop {
            let mut any = false;
            for r in 0..w.nranks {
                // Departure first, then the phase: a peer that passed the barrier and then
                // departed between two such loads must not look departed while behind.
                let gone = w.departed(r).load(SeqCst) != 0;
                if w.phase(r).load(SeqCst) < p {
                    any = true;
                    if gone {
                        return Err(HCCL_E_REMOTE);
                    }
                }
            }
            if !any {
                return Ok(());
            }
            waiter.idle()?;
        }
    }
}

fn registry() -> MutexGuard<'static, HashMap<usize, Arc<Comm>>> {
    static R: LazyLock<Mutex<HashMap<usize, Arc<Comm>>>> = LazyLock::new(Default::default);
    R.lock().unwrap_or_else(|e| e.into_inner())
}

/// The live communicator behind `h` (`HCCL_E_PTR` for NULL or an unknown handle).
pub(crate) fn comm_of(h: *mut c_void) -> Result<Arc<Comm>, HcclResult> {
    registry().get(&(h as usize)).cloned().ok_or(HCCL_E_PTR)
}

/// Registers `c`, returning its handle.
fn register(c: Comm) -> *mut c_void {
    let a = Arc::new(c);
    let h = Arc::as_ptr(&a) as *mut c_void;
    registry().insert(h as usize, a);
    h
}

/// Removes `h` from the registry and stops its operations; the rank is marked departed, so
/// peers that wait for it (and only those) stop with `HCCL_E_REMOTE` instead of timing out.
pub(crate) fn destroy(h: *mut c_void) -> Result<(), HcclResult> {
    let c = registry().remove(&(h as usize)).ok_or(HCCL_E_PTR)?;
    c.destroyed.store(true, SeqCst);
    c.world.departed(c.rank).store(1, SeqCst);
    Ok(())
}

/// Live communicators of this process (for tests of leaks).
pub(crate) fn live() -> usize {
    registry().len()
}

/// Writes a fresh root info naming a new world file.
pub(crate) fn new_root_info(out: &mut [u8; HCCL_ROOT_INFO_BYTES]) {
    out.fill(0);
    out[..8].copy_from_slice(ROOT_MAGIC);
    let p = new_path();
    out[8..8 + p.len()].copy_from_slice(p.as_bytes());
}

/// The world path a root info names (`HCCL_E_PARA` when it is not one of this simulator's).
pub(crate) fn parse_root_info(ri: &[u8; HCCL_ROOT_INFO_BYTES]) -> Result<String, HcclResult> {
    if &ri[..8] != ROOT_MAGIC {
        return Err(HCCL_E_PARA);
    }
    let body = &ri[8..];
    let end = body.iter().position(|&b| b == 0).ok_or(HCCL_E_PARA)?;
    let s = std::str::from_utf8(&body[..end]).map_err(|_| HCCL_E_PARA)?;
    if !s.starts_with("/dev/shm/xstream-hccl-") || s.contains("..") {
        return Err(HCCL_E_PARA);
    }
    Ok(s.to_owned())
}

fn check_ranks(nranks: u32, rank: u32) -> Result<(), HcclResult> {
    if nranks == 0 || nranks > MAX_RANKS || rank >= nranks {
        return Err(HCCL_E_PARA);
    }
    Ok(())
}

/// Joins rank `rank` of the world at `path` without waiting for the others.
fn join(path: &str, nranks: u32, rank: u32) -> Result<Comm, HcclResult> {
    check_ranks(nranks, rank)?;
    let world = World::open(path, nranks, rank, config().slot_bytes)?;
    Ok(Comm {
        world,
        rank,
        destroyed: AtomicBool::new(false),
        async_err: AtomicI32::new(0),
        ops_started: AtomicU64::new(0),
    })
}

/// Waits (connect timeout) until every rank of `c`'s world has joined; rank 0 (or a rank that
/// gives up) then removes the file name.
fn wait_all_joined(c: &Comm) -> Result<(), HcclResult> {
    let n = c.world.nranks;
    let r = c.wait(std::ptr::null(), config().connect_timeout, || {
        c.world.joined() >= n
    });
    if r.is_err() || c.rank == 0 {
        c.world.unlink();
    }
    r
}

/// `HcclCommInitRootInfo`: joins and waits for every rank.
pub(crate) fn init_root_info(
    path: &str,
    nranks: u32,
    rank: u32,
) -> Result<*mut c_void, HcclResult> {
    let c = join(path, nranks, rank)?;
    wait_all_joined(&c)?;
    Ok(register(c))
}

/// `HcclCommInitAll`: one world, one rank per device, all in this process.
pub(crate) fn init_all(ndev: u32) -> Result<Vec<*mut c_void>, HcclResult> {
    let path = new_path();
    let comms = (0..ndev)
        .map(|r| join(&path, ndev, r))
        .collect::<Result<Vec<_>, _>>();
    let comms = match comms {
        Ok(c) => c,
        Err(e) => {
            if let Ok(c) = std::ffi::CString::new(path) {
                // SAFETY: a valid path string; removing a file this call created.
                unsafe { libc::unlink(c.as_ptr()) };
            }
            return Err(e);
        }
    };
    comms[0].world.unlink();
    Ok(comms.into_iter().map(register).collect())
}

/// A bounded wait with back-off: spins briefly, then sleeps 1 µs doubling to 1 ms.
pub(crate) struct Waiter<'a> {
    comm: &'a Comm,
    token: *const c_void,
    timeout: Duration,
    end: Instant,
    pause: Duration,
    spins: u32,
}

impl<'a> Waiter<'a> {
    /// A wait of `comm` in the stream task `token` (NULL outside one) of at most `timeout`
    /// without progress.
    pub(crate) fn new(comm: &'a Comm, token: *const c_void, timeout: Duration) -> Self {
        Waiter {
            comm,
            token,
            timeout,
            end: Instant::now() + timeout,
            pause: Duration::from_micros(1),
            spins: 0,
        }
    }

    /// Progress was made: the timeout starts again, the back-off too.
    pub(crate) fn progressed(&mut self) {
        self.end = Instant::now() + self.timeout;
        self.pause = Duration::from_micros(1);
        self.spins = 0;
    }

    /// Nothing to do yet: fails with `HCCL_E_REMOTE` once a peer failed, `HCCL_E_INTERNAL`
    /// once the communicator is destroyed or the stream task cancelled, `HCCL_E_TIMEOUT` after
    /// the timeout; else backs off.
    pub(crate) fn idle(&mut self) -> Result<(), HcclResult> {
        let c = self.comm;
        if c.world.abort_code().load(SeqCst) != 0 {
            return Err(HCCL_E_REMOTE);
        }
        if c.destroyed.load(SeqCst) || (!self.token.is_null() && crate::acl::cancelled(self.token))
        {
            return Err(HCCL_E_INTERNAL);
        }
        if Instant::now() >= self.end {
            return Err(HCCL_E_TIMEOUT);
        }
        if self.spins < 64 {
            self.spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::sleep(self.pause);
            self.pause = (self.pause * 2).min(Duration::from_millis(1));
        }
        Ok(())
    }
}
