//! Interprocess events on the host: the state an event shares with other processes lives in a
//! small file of the shared-memory file system (`/dev/shm`, else the temporary directory),
//! read and written under an advisory file lock (`flock`), so the crate stays free of
//! `unsafe` (no `mmap`).
//!
//! State file, [`STATE_LEN`] (64) bytes, little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `XSHIPCEV` |
//! | 8..12 | version, `u32` (1) |
//! | 12..16 | exporter process id, `u32` |
//! | 16..24 | records made (by any process), `u64`: record `n` is the n-th |
//! | 24..32 | highest record completed, `u64` |
//! | 32..40 | highest record that completed with an error, `u64` |
//! | 40..44 | closed, `u32` (1 once the exporting event was dropped) |
//! | 44..48 | process id of the latest record's process, `u32` |
//!
//! A record increments the count and remembers its number; when its stream reaches it, the
//! highest completed number moves up to it. A query, synchronize or stream wait takes the
//! count at call time as its target and is satisfied once the highest completed number reaches
//! it. A process-wide poller thread turns targets into the host backend's record slots, so
//! the rest of the backend waits on them as on local records. The exporter removes the file
//! when its event is dropped; events opened before keep working on the open file.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;
use xstream_core::sync::lock;

use xstream_core::{BackendKind, Error, Result};

use crate::event::RecordSlot;

/// The length of the state file.
pub const STATE_LEN: usize = 64;
const MAGIC: &[u8; 8] = b"XSHIPCEV";
const VERSION: u32 = 1;
/// The prefix of state file names.
pub const NAME_PREFIX: &str = "xstream-host-ipc-event-";

/// Where the shared files live: `/dev/shm`, else the temporary directory.
pub(crate) fn shm_dir() -> PathBuf {
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir() {
        shm
    } else {
        std::env::temp_dir()
    }
}

/// Creates a new file in [`shm_dir`] named `{prefix}{pid}-{tag}{n}-{nanos}` (`n` counts this
/// process's files, `nanos` tells processes that reused a pid apart); the name and the path
/// come with it. `io_err` words a failure.
pub(crate) fn create_shared_file(
    prefix: &str,
    tag: &str,
    io_err: fn(&str, io::Error) -> Error,
) -> Result<(File, PathBuf, String)> {
    static NONCE: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = format!(
        "{prefix}{}-{tag}{}-{nanos:08x}",
        std::process::id(),
        NONCE.fetch_add(1, Ordering::Relaxed)
    );
    let path = shm_dir().join(&name);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| io_err(&format!("create {}", path.display()), e))?;
    Ok((file, path, name))
}

#[derive(Debug, Clone, Copy, Default)]
struct Words {
    exporter: u32,
    records: u64,
    done: u64,
    failed: u64,
    closed: bool,
    recorder: u32,
}

impl Words {
    fn decode(b: &[u8; STATE_LEN]) -> Option<Self> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(x)
        };
        (&b[..8] == MAGIC && u32_at(8) == VERSION).then(|| Self {
            exporter: u32_at(12),
            records: u64_at(16),
            done: u64_at(24),
            failed: u64_at(32),
            closed: u32_at(40) != 0,
            recorder: u32_at(44),
        })
    }

    fn encode(&self) -> [u8; STATE_LEN] {
        let mut b = [0u8; STATE_LEN];
        b[..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.exporter.to_le_bytes());
        b[16..24].copy_from_slice(&self.records.to_le_bytes());
        b[24..32].copy_from_slice(&self.done.to_le_bytes());
        b[32..40].copy_from_slice(&self.failed.to_le_bytes());
        b[40..44].copy_from_slice(&u32::from(self.closed).to_le_bytes());
        b[44..48].copy_from_slice(&self.recorder.to_le_bytes());
        b
    }
}

/// Whether process `pid` still runs (Linux `/proc`; elsewhere assumed alive).
/// Whether process `pid` runs (not a zombie); `true` where `/proc` cannot tell.
pub(crate) fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() || !std::path::Path::new("/proc/self").exists() {
        return true;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name's closing parenthesis; Z and X are gone.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_none_or(|state| !matches!(state, 'Z' | 'X')),
        Err(_) => false,
    }
}

/// Where one target stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Poll {
    /// Reached (or nothing to wait for).
    Done,
    /// The target record completed with an error.
    Failed,
    /// Not yet.
    Pending,
    /// Not yet, and the process that made the latest record is gone.
    RecorderGone(u32),
}

/// The shared state of one interprocess event, as seen from this process.
pub(crate) struct IpcState {
    file: File,
    /// Threads of this process share one open file (whose `flock` does not exclude them).
    local: Mutex<()>,
    name: String,
    path: PathBuf,
    owner: bool,
}

impl std::fmt::Debug for IpcState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpcState")
            .field("name", &self.name)
            .field("owner", &self.owner)
            .finish()
    }
}

fn io_err(what: &str, e: io::Error) -> Error {
    Error::unsupported(
        BackendKind::Host,
        format!("interprocess event state ({what}): {e}"),
    )
}

impl IpcState {
    /// Creates the state of a new interprocess event (this process exports it).
    pub(crate) fn create(event_id: u64) -> Result<Arc<Self>> {
        let (file, path, name) = create_shared_file(NAME_PREFIX, &format!("{event_id}-"), io_err)?;
        let w = Words {
            exporter: std::process::id(),
            ..Words::default()
        };
        file.write_all_at(&w.encode(), 0)
            .map_err(|e| io_err("initialise", e))?;
        Ok(Arc::new(Self {
            file,
            local: Mutex::new(()),
            name,
            path,
            owner: true,
        }))
    }

    /// Opens the state named in a handle's payload.
    pub(crate) fn open(payload: &[u8]) -> Result<Arc<Self>> {
        let name = std::str::from_utf8(payload)
            .ok()
            .filter(|n| {
                n.starts_with(NAME_PREFIX)
                    && n.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
            })
            .ok_or_else(|| {
                Error::invalid(format!(
                    "not a host IPC event handle payload ({} bytes that are not a state name)",
                    payload.len()
                ))
            })?
            .to_string();
        let path = shm_dir().join(&name);
        let shown = name.clone();
        let gone = |why: &str| {
            Error::invalid(format!(
                "the host IPC event {shown} cannot be opened: {why} (the exporting event was dropped or its process exited)"
            ))
        };
        let file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(gone("its state no longer exists"))
            }
            Err(e) => return Err(io_err(&format!("open {}", path.display()), e)),
        };
        let s = Self {
            file,
            local: Mutex::new(()),
            name,
            path,
            owner: false,
        };
        let w = s.read()?;
        if w.closed {
            return Err(gone("the exporter closed it"));
        }
        if !process_alive(w.exporter) {
            return Err(gone(&format!("exporter process {} is gone", w.exporter)));
        }
        Ok(Arc::new(s))
    }

    /// The name a handle carries.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    fn guard(&self) -> MutexGuard<'_, ()> {
        lock(&self.local)
    }

    fn read_locked(&self) -> Result<Words> {
        let mut b = [0u8; STATE_LEN];
        self.file
            .read_exact_at(&mut b, 0)
            .map_err(|e| io_err("read", e))?;
        Words::decode(&b).ok_or_else(|| {
            Error::invalid(format!(
                "{} does not hold a host IPC event state (wrong magic or version)",
                self.path.display()
            ))
        })
    }

    fn read(&self) -> Result<Words> {
        let _g = self.guard();
        self.file.lock_shared().map_err(|e| io_err("lock", e))?;
        let r = self.read_locked();
        let _ = self.file.unlock();
        r
    }

    fn update(&self, f: impl FnOnce(&mut Words)) -> Result<Words> {
        let _g = self.guard();
        self.file.lock().map_err(|e| io_err("lock", e))?;
        let r = self.read_locked().and_then(|mut w| {
            f(&mut w);
            self.file
                .write_all_at(&w.encode(), 0)
                .map_err(|e| io_err("write", e))?;
            Ok(w)
        });
        let _ = self.file.unlock();
        r
    }

    /// Starts a record: its number.
    pub(crate) fn begin_record(&self) -> Result<u64> {
        self.update(|w| {
            w.records += 1;
            w.recorder = std::process::id();
        })
        .map(|w| w.records)
    }

    /// Record `seq` completed.
    pub(crate) fn complete(&self, seq: u64, ok: bool) {
        let r = self.update(|w| {
            w.done = w.done.max(seq);
            if !ok {
                w.failed = w.failed.max(seq);
            }
        });
        if let Err(e) = r {
            tracing::error!("host IPC event {}: {e}", self.name);
        }
    }

    /// The number of records made so far (the target of a wait starting now).
    pub(crate) fn target(&self) -> Result<u64> {
        self.read().map(|w| w.records)
    }

    /// Where `target` stands.
    pub(crate) fn poll(&self, target: u64, check_recorder: bool) -> Result<Poll> {
        let w = self.read()?;
        Ok(if w.done >= target {
            if w.failed >= target && target > 0 {
                Poll::Failed
            } else {
                Poll::Done
            }
        } else if check_recorder && !process_alive(w.recorder) {
            Poll::RecorderGone(w.recorder)
        } else {
            Poll::Pending
        })
    }
}

impl Drop for IpcState {
    fn drop(&mut self) {
        if self.owner {
            let _ = self.update(|w| w.closed = true);
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The error a wait ends with when its record failed or its recorder is gone.
pub(crate) fn poll_error(name: &str, p: &Poll) -> Option<Error> {
    match p {
        Poll::Failed => Some(Error::invalid(format!(
            "host IPC event {name}: the awaited record completed with an error in its process"
        ))),
        Poll::RecorderGone(pid) => Some(Error::invalid(format!(
            "host IPC event {name}: process {pid}, which made the awaited record, exited before it completed"
        ))),
        Poll::Done | Poll::Pending => None,
    }
}

struct Pending {
    state: Arc<IpcState>,
    target: u64,
    slot: Arc<RecordSlot>,
}

struct Poller {
    list: Mutex<Vec<Pending>>,
    cv: Condvar,
}

fn poller() -> &'static Poller {
    static P: OnceLock<Poller> = OnceLock::new();
    static STARTED: OnceLock<()> = OnceLock::new();
    let p = P.get_or_init(|| Poller {
        list: Mutex::new(Vec::new()),
        cv: Condvar::new(),
    });
    STARTED.get_or_init(|| {
        let spawned = std::thread::Builder::new()
            .name("xstream-host-ipc-poller".into())
            .spawn(move || run_poller(p));
        if let Err(e) = spawned {
            tracing::error!("cannot start the host IPC event poller: {e}");
        }
    });
    p
}

fn run_poller(p: &'static Poller) {
    let mut round: u64 = 0;
    loop {
        let mut list = lock(&p.list);
        while list.is_empty() {
            list = p.cv.wait(list).unwrap_or_else(|e| e.into_inner());
        }
        round = round.wrapping_add(1);
        // Whether recorders still run: every 50th round (about every 10 ms).
        let check = round.is_multiple_of(50);
        list.retain(|w| {
            let r = w.state.poll(w.target, check);
            match r {
                Ok(Poll::Pending) => true,
                Ok(Poll::Done) => {
                    w.slot.complete(Ok(()));
                    false
                }
                Ok(other) => {
                    let e = poll_error(w.state.name(), &other)
                        .unwrap_or_else(|| Error::invalid("host IPC event: unknown state"));
                    w.slot.complete(Err(e));
                    false
                }
                Err(e) => {
                    w.slot.complete(Err(e));
                    false
                }
            }
        });
        drop(list);
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// A slot completed when `state` reaches the record count at call time; `None` when there is
/// nothing to wait for.
pub(crate) fn wait_slot(state: &Arc<IpcState>) -> Result<Option<Arc<RecordSlot>>> {
    let target = state.target()?;
    if target == 0 {
        return Ok(None);
    }
    match state.poll(target, true)? {
        Poll::Done => Ok(None),
        Poll::Pending => {
            let slot = RecordSlot::new(false);
            let p = poller();
            lock(&p.list).push(Pending {
                state: Arc::clone(state),
                target,
                slot: Arc::clone(&slot),
            });
            p.cv.notify_one();
            Ok(Some(slot))
        }
        other => {
            let slot = RecordSlot::new(false);
            slot.complete(Err(poll_error(state.name(), &other)
                .unwrap_or_else(|| Error::invalid("host IPC event: unknown state"))));
            Ok(Some(slot))
        }
    }
}
