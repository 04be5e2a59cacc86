//! Bootstrap: a rank's place in a job and the job's [`UniqueId`], from the environment the way
//! launchers pass them (torchrun, Slurm, Open MPI, MPICH/Hydra, PMI: see
//! [`launcher`] for the variables, their order and rank 0's endpoint).
//!
//! | variable | meaning |
//! |---|---|
//! | `RANK`, `WORLD_SIZE`, `LOCAL_RANK` or a launcher's equivalents | this process's rank, the job's size, the index on its host (picks the device) |
//! | `XSTREAM_UNIQUE_ID` | the job's id as hex ([`UniqueId::to_hex`]), made beforehand |
//! | `XSTREAM_UNIQUE_ID_FILE` | a path on a file system every rank sees: rank 0 makes the id and writes it there, the others wait for it (up to the rendezvous timeout) |
//! | `MASTER_ADDR`, `MASTER_PORT` (or the launcher's endpoint) | rank 0's host and port: rank 0 makes the id and serves it over TCP, the others fetch it ([`rendezvous`](super::rendezvous)) |
//! | `XSTREAM_JOB_ID` or the launcher's job id | the job token the TCP hello carries, so rank 0 ignores processes of other jobs |
//! | `XSTREAM_RENDEZVOUS_TIMEOUT_MS` | how long the id exchange may take (file or TCP); default: the collective timeout (300 s) |
//!
//! Precedence: `XSTREAM_UNIQUE_ID`, then `XSTREAM_UNIQUE_ID_FILE` (setting both is an error),
//! then the launcher's TCP endpoint: an explicit xstream variable wins over the launcher's
//! endpoint, which torchrun always sets. A job of one rank uses none of them.
//!
//! With `XSTREAM_UNIQUE_ID_FILE`, the path must be fresh for each job: rank 0 refuses a file
//! that already exists (it would be a stale id of an earlier job that other ranks could read
//! first). Rank 0 writes the id atomically (a temporary file renamed into place), so a reader
//! never sees half an id. A job of one rank needs no id source.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::launcher::{self, Launcher};
use super::rendezvous::{fetch_id_for_job, rendezvous_timeout, Endpoint, RendezvousServer};
use super::{CollectiveBackend, CollectiveErrorKind, UniqueId};
use crate::{DeviceOf, Error, Result};

/// The variable holding the rank.
pub const RANK_ENV: &str = "RANK";
/// The variable holding the world size.
pub const WORLD_SIZE_ENV: &str = "WORLD_SIZE";
/// The variable holding the local rank.
pub const LOCAL_RANK_ENV: &str = "LOCAL_RANK";
/// The variable holding the unique id as hex.
pub const UNIQUE_ID_ENV: &str = "XSTREAM_UNIQUE_ID";
/// The variable holding the path of the unique-id file.
pub const UNIQUE_ID_FILE_ENV: &str = "XSTREAM_UNIQUE_ID_FILE";

/// Where a rank gets the job's unique id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdSource {
    /// Given (from `XSTREAM_UNIQUE_ID`).
    Given(UniqueId),
    /// Through a file: rank 0 writes it, the others wait for it.
    File(PathBuf),
    /// Made here (a job of one rank).
    Local,
    /// Over TCP (the launcher's endpoint): rank 0 serves it, the others fetch it.
    Tcp(Endpoint),
}

/// A rank's place in a job, read from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bootstrap {
    /// This rank.
    pub rank: usize,
    /// How many ranks.
    pub world_size: usize,
    /// The index on this host (which device to open).
    pub local_rank: usize,
    /// Where the unique id comes from.
    pub id_source: IdSource,
    /// The launcher whose variables gave the rank.
    pub launcher: Launcher,
    /// The job token of the TCP hello (empty: none).
    pub job: String,
    /// What was found and from where, one line each (what `xstream bootstrap` prints).
    pub found: Vec<String>,
}

impl Bootstrap {
    /// A placement given by the caller (no launcher read): torchrun-like, no job token.
    pub fn new(rank: usize, world_size: usize, local_rank: usize, id_source: IdSource) -> Self {
        Self {
            rank,
            world_size,
            local_rank,
            id_source,
            launcher: Launcher::Torchrun,
            job: String::new(),
            found: Vec::new(),
        }
    }

    /// Reads the process environment; `Ok(None)` when no launcher's variables are set (not
    /// launched as a job).
    ///
    /// # Errors
    /// As [`Bootstrap::from_lookup`].
    pub fn from_env() -> Result<Option<Self>> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// As [`Bootstrap::from_env`], reading variables through `get`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`]: as [`launcher::detect`] (values that are not numbers, a
    /// rank not below the world size, launchers that disagree), a malformed hex id, both id
    /// variables, none of the id sources for more than one rank, a malformed or missing TCP
    /// endpoint ([`launcher::endpoint`]), a job token too long ([`launcher::job_token`]).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Option<Self>> {
        let Some(p) = launcher::detect(&get)? else {
            return Ok(None);
        };
        let (rv, wv, lv) = p.launcher.variables();
        let mut found = vec![format!(
            "rank {} of {} (local rank {}) from {}: {rv}, {wv}, {}{}",
            p.rank,
            p.world_size,
            p.local_rank,
            p.launcher,
            if p.local_rank_defaulted {
                format!("{lv} unset (the rank)")
            } else {
                lv.to_string()
            },
            if p.also.is_empty() {
                String::new()
            } else {
                let names: Vec<&str> = p.also.iter().map(|l| l.name()).collect();
                format!("; also set: {}", names.join(", "))
            }
        )];
        let job = match launcher::job_token(p.launcher, &get)? {
            Some((token, from)) => {
                found.push(format!("job token {token:?} from {from}"));
                token
            }
            None => {
                found.push(format!(
                    "no job token ({} unset): hellos without a token are taken as this job's",
                    launcher::JOB_ID_ENV
                ));
                String::new()
            }
        };
        let id_source = match (get(UNIQUE_ID_ENV), get(UNIQUE_ID_FILE_ENV)) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid(format!(
                    "both {UNIQUE_ID_ENV} and {UNIQUE_ID_FILE_ENV} are set: set one"
                )))
            }
            (Some(hex), None) => {
                found.push(format!("unique id from {UNIQUE_ID_ENV}"));
                IdSource::Given(
                    UniqueId::from_hex(&hex)
                        .map_err(|e| Error::invalid(format!("{UNIQUE_ID_ENV}: {e}")))?,
                )
            }
            (None, Some(path)) if !path.trim().is_empty() => {
                found.push(format!("unique id through the file {path} ({UNIQUE_ID_FILE_ENV})"));
                IdSource::File(PathBuf::from(path))
            }
            _ if p.world_size == 1 => {
                found.push("unique id made here (one rank)".into());
                IdSource::Local
            }
            _ => match launcher::endpoint(p.launcher, &get)? {
                Some((ep, from)) => {
                    found.push(format!("rank 0's rendezvous at {ep}: {from}"));
                    IdSource::Tcp(ep)
                }
                None => {
                    return Err(Error::invalid(format!(
                        "a job of {} ranks needs {UNIQUE_ID_ENV} (hex), {UNIQUE_ID_FILE_ENV} (a path every rank sees) or MASTER_ADDR and MASTER_PORT (TCP rendezvous with rank 0)",
                        p.world_size
                    )))
                }
            },
        };
        Ok(Some(Self {
            rank: p.rank,
            world_size: p.world_size,
            local_rank: p.local_rank,
            id_source,
            launcher: p.launcher,
            job,
            found,
        }))
    }

    /// The job's unique id: given, read from the file (waiting up to `timeout` for rank 0 to
    /// write it), fetched from rank 0 over TCP (up to `timeout`), or made with `make` (rank 0
    /// of a file source, which then writes it; rank 0 of a TCP source, which then serves it to
    /// every other rank before returning, up to `timeout`; a job of one rank).
    ///
    /// # Errors
    /// `make`'s errors; [`write_id_file`]'s and [`read_id_file`]'s errors;
    /// [`RendezvousServer::serve`]'s and [`fetch_id`](super::rendezvous::fetch_id)'s errors.
    pub fn unique_id(
        &self,
        make: impl FnOnce() -> Result<UniqueId>,
        timeout: Duration,
    ) -> Result<UniqueId> {
        match &self.id_source {
            IdSource::Given(id) => Ok(id.clone()),
            IdSource::Local => make(),
            IdSource::File(path) if self.rank == 0 => {
                let id = make()?;
                write_id_file(path, &id)?;
                Ok(id)
            }
            IdSource::File(path) => read_id_file(path, timeout),
            IdSource::Tcp(ep) if self.rank == 0 => {
                let id = make()?;
                RendezvousServer::bind_endpoint(ep)?
                    .with_job(&self.job)
                    .serve(&id, self.world_size, timeout)?;
                Ok(id)
            }
            IdSource::Tcp(ep) => {
                fetch_id_for_job(ep, self.rank, self.world_size, &self.job, timeout)
            }
        }
    }

    /// Joins the job on `device` with backend `B`: the unique id (per
    /// [`Bootstrap::unique_id`], timeout from [`rendezvous_timeout`]), then
    /// [`CollectiveBackend::init_rank`].
    ///
    /// # Errors
    /// As [`Bootstrap::unique_id`] and [`CollectiveBackend::init_rank`].
    pub fn init<B: CollectiveBackend>(&self, device: &DeviceOf<B>) -> Result<B::Comm> {
        let id = self.unique_id(B::new_unique_id, rendezvous_timeout()?)?;
        B::init_rank(device, &id, self.rank, self.world_size)
    }
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::Collective {
        op: "bootstrap",
        kind: CollectiveErrorKind::Init,
        detail: format!("{what} {}: {e}", path.display()),
    }
}

/// Writes `id` as hex to `path` atomically (a temporary file in the same directory, renamed
/// into place).
///
/// # Errors
/// [`Error::Collective`] ([`CollectiveErrorKind::Init`]) when `path` already exists (a stale
/// id of an earlier job) or cannot be written.
pub fn write_id_file(path: &Path, id: &UniqueId) -> Result<()> {
    if path.exists() {
        return Err(Error::Collective {
            op: "bootstrap",
            kind: CollectiveErrorKind::Init,
            detail: format!(
                "{} already exists (a stale id of an earlier job?): use a fresh path per job",
                path.display()
            ),
        });
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp.{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, format!("{}\n", id.to_hex()))
        .map_err(|e| io_error("cannot write", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_error("cannot rename into", path, e)
    })
}

/// Waits up to `timeout` for `path` to hold a hex id, polling it.
///
/// # Errors
/// [`Error::Collective`] ([`CollectiveErrorKind::Timeout`]) when no id appears in time;
/// [`Error::InvalidArgument`] when the file holds something that is not a hex id.
pub fn read_id_file(path: &Path, timeout: Duration) -> Result<UniqueId> {
    let start = Instant::now();
    loop {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                return UniqueId::from_hex(&text).map_err(|e| {
                    Error::invalid(format!("{} does not hold a unique id: {e}", path.display()))
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error("cannot read", path, e)),
        }
        if start.elapsed() >= timeout {
            return Err(Error::Collective {
                op: "bootstrap",
                kind: CollectiveErrorKind::Timeout,
                detail: format!(
                    "rank 0 did not write the unique id to {} within {timeout:?}",
                    path.display()
                ),
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
