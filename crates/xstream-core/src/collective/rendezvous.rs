//! TCP rendezvous: rank 0 hands the job's [`UniqueId`] to the other ranks over TCP, the way
//! torchrun-style launchers expect (`MASTER_ADDR` / `MASTER_PORT`), so that a job across hosts
//! needs no shared file system.
//!
//! Rank 0 makes the id, listens on the rendezvous endpoint and, once every rank
//! `1..WORLD_SIZE` has sent its *hello*, answers all of them with the id; it returns once
//! every rank got it. The other ranks connect (retrying while rank 0 is not listening yet),
//! send their hello and wait for the id. Everything is bounded by the rendezvous timeout
//! ([`rendezvous_timeout`]).
//!
//! # Endpoint
//! Under torchrun as below; under Slurm and the MPI launchers see
//! [`launcher::endpoint`](super::launcher::endpoint). The host is `MASTER_ADDR`. The port is `XSTREAM_RENDEZVOUS_PORT` when set, else
//! `MASTER_PORT`, except under a torchrun whose agent serves its own store on `MASTER_PORT`
//! (`TORCHELASTIC_USE_AGENT_STORE=True`, newer torchrun versions): that port is taken by the
//! launcher, so xstream uses `MASTER_PORT + 1` (set `XSTREAM_RENDEZVOUS_PORT` when that port
//! is taken too). Rank 0 binds the addresses `MASTER_ADDR` resolves to; when none of them is
//! an address of this host (a name resolving to an outside address, as behind NAT), it binds
//! every interface on that port.
//!
//! # Wire format (version 2)
//! All integers little-endian. A rank sends a *hello*: a fixed part of [`HELLO_LEN`] (16)
//! bytes, then its job token:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `XSRZ` ([`MAGIC`]) |
//! | 4..6 | version, `u16` ([`VERSION`] = 2) |
//! | 6..8 | job token length `n`, `u16` (at most [`MAX_JOB_TOKEN_LEN`]; version 1 had a reserved 0 here) |
//! | 8..12 | the rank's `WORLD_SIZE`, `u32` |
//! | 12..16 | the rank's `RANK`, `u32` |
//! | 16..16+n | the job token, UTF-8 ([`launcher::job_token`](super::launcher::job_token); empty when the job has none) |
//!
//! Rank 0 answers with a header of [`REPLY_HEADER_LEN`] (16) bytes, then a body:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `XSRZ` |
//! | 4..6 | version, `u16` (the server's) |
//! | 6..8 | status, `u16` ([`Status`]: 0 ok, 1 wrong world size, 2 rank out of range, 3 duplicate rank, 4 unsupported version, 5 another job, 6 the job failed, 7 the job timed out) |
//! | 8..12 | rank 0's `WORLD_SIZE`, `u32` |
//! | 12..16 | body length `n`, `u32` (ok: the id, at most [`MAX_ID_LEN`]; else the reason, UTF-8, at most [`MAX_REASON_LEN`]) |
//! | 16..16+n | the id, or the reason rank 0 gives |
//!
//! and closes the connection. Rank 0 holds each rank's connection and answers every rank
//! once all ranks `1..WORLD_SIZE` have sent their hello (so a job that cannot form never hands
//! out its id): the id to every rank, or one failure to every rank.
//!
//! # Who counts as a rank of this job
//! A hello whose job token equals rank 0's (both empty counts as equal) is a rank of this job.
//! Everything else is *ignored* with a `tracing` warning and never fails the job: wrong magic,
//! garbage, a connection closed or silent before a whole hello within the hello timeout
//! ([`DEFAULT_HELLO_TIMEOUT`], each connection on its own clock), a hello of another version
//! (answered [`Status::UnsupportedVersion`]) or of another job token (answered
//! [`Status::WrongJob`]). The work strays can cause is bounded: rank 0 reads every
//! connection without blocking, keeps at most [`MAX_HALF_OPEN`] connections that have not
//! sent a whole hello (beyond that it drops the oldest; a real rank dropped that way
//! reconnects) and logs the first [`MAX_REPORTED`] strays one by one.
//!
//! # Errors
//! - A rank of this job that cannot be placed (another world size, a rank outside
//!   `1..WORLD_SIZE`, a second live process with a rank already held or served): rank 0 fails
//!   with [`CollectiveErrorKind::Init`] and one reason naming the rank. It answers that rank
//!   with the specific status, the ranks it holds with [`Status::JobFailed`], and keeps
//!   answering every rank of the job that arrives with [`Status::JobFailed`] and the same reason
//!   until every rank `1..WORLD_SIZE` (and of the largest world size announced) has been told,
//!   or the rendezvous window ends; then it returns. Every rank's error carries the reason.
//! - Ranks that never connected within the window: rank 0 answers the ranks it holds with
//!   [`Status::TimedOut`] and the reason (the missing ranks), and fails with
//!   [`CollectiveErrorKind::Timeout`]; those ranks fail with `Timeout` and the same reason.
//! - A rank that cannot reach rank 0 in time, or gets no answer in time:
//!   [`CollectiveErrorKind::Timeout`]. A connection that rank 0 closes before answering is
//!   retried within the window. A peer that answers without the magic, or with a refusal:
//!   [`CollectiveErrorKind::Init`].

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::{collective_timeout, CollectiveErrorKind, UniqueId};
use crate::{Error, Result};

/// The variable holding rank 0's host name or address.
pub const MASTER_ADDR_ENV: &str = "MASTER_ADDR";
/// The variable holding the launcher's port.
pub const MASTER_PORT_ENV: &str = "MASTER_PORT";
/// The variable overriding the rendezvous port.
pub const RENDEZVOUS_PORT_ENV: &str = "XSTREAM_RENDEZVOUS_PORT";
/// The variable holding the rendezvous timeout in milliseconds.
pub const RENDEZVOUS_TIMEOUT_ENV: &str = "XSTREAM_RENDEZVOUS_TIMEOUT_MS";
/// The variable torchrun sets (`True`) when its agent serves a store on `MASTER_PORT`.
pub const AGENT_STORE_ENV: &str = "TORCHELASTIC_USE_AGENT_STORE";

/// The first four bytes of every message.
pub const MAGIC: [u8; 4] = *b"XSRZ";
/// The wire format's version.
pub const VERSION: u16 = 2;
/// The length of a hello's fixed part (the job token follows).
pub const HELLO_LEN: usize = 16;
/// The length of a reply's header.
pub const REPLY_HEADER_LEN: usize = 16;
/// The longest id a reply may carry (NCCL's id is 128 bytes, HCCL's 4108).
pub const MAX_ID_LEN: usize = 1 << 16;
/// The longest reason a refusal carries.
pub const MAX_REASON_LEN: usize = 4096;
/// The longest job token a hello carries.
pub const MAX_JOB_TOKEN_LEN: usize = super::launcher::MAX_JOB_TOKEN_LEN;
/// How many connections without a whole hello rank 0 keeps at once (it drops the oldest).
pub const MAX_HALF_OPEN: usize = 64;
/// How many ignored connections [`ServeReport::ignored`] lists and the log names one by one.
pub const MAX_REPORTED: usize = 64;
/// How long rank 0 waits for a connection's hello before it counts it as stray.
pub const DEFAULT_HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long rank 0 may take to write one answer.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// A reply's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Status {
    /// The id follows.
    Ok = 0,
    /// The rank announced another world size than rank 0's (the job fails).
    WrongWorldSize = 1,
    /// The rank is not in `1..WORLD_SIZE` (the job fails).
    RankOutOfRange = 2,
    /// Another live connection holds this rank, or already got the id (the job fails).
    DuplicateRank = 3,
    /// The hello's version is not rank 0's (the connection is ignored).
    UnsupportedVersion = 4,
    /// The hello's job token is not rank 0's (the connection is ignored).
    WrongJob = 5,
    /// Rank 0 cannot form the job; the reason follows.
    JobFailed = 6,
    /// Ranks never connected within the window; the reason follows.
    TimedOut = 7,
}

impl Status {
    fn from_u16(v: u16) -> Option<Self> {
        Some(match v {
            0 => Self::Ok,
            1 => Self::WrongWorldSize,
            2 => Self::RankOutOfRange,
            3 => Self::DuplicateRank,
            4 => Self::UnsupportedVersion,
            5 => Self::WrongJob,
            6 => Self::JobFailed,
            7 => Self::TimedOut,
            _ => return None,
        })
    }
}

/// Where the ranks meet: rank 0's host and the rendezvous port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Rank 0's host name or address (`MASTER_ADDR`).
    pub host: String,
    /// The rendezvous port (see the module documentation).
    pub port: u16,
}

impl Endpoint {
    /// Reads the endpoint through `get`; `Ok(None)` when neither `MASTER_ADDR` nor
    /// `MASTER_PORT` is set.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`]: one of the two without the other, an empty address, a port
    /// that is not a number in `1..=65535`.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Option<Self>> {
        let port = |name: &str, v: &str| -> Result<u16> {
            match v.trim().parse::<u16>() {
                Ok(p) if p > 0 => Ok(p),
                _ => Err(Error::invalid(format!(
                    "{name}={v:?} is not a TCP port (1..=65535)"
                ))),
            }
        };
        let (host, master_port) = match (get(MASTER_ADDR_ENV), get(MASTER_PORT_ENV)) {
            (None, None) => return Ok(None),
            (Some(h), Some(p)) => (h, p),
            (h, _) => {
                let (set, unset) = if h.is_some() {
                    (MASTER_ADDR_ENV, MASTER_PORT_ENV)
                } else {
                    (MASTER_PORT_ENV, MASTER_ADDR_ENV)
                };
                return Err(Error::invalid(format!(
                    "{set} is set but {unset} is not: set both for a TCP rendezvous"
                )));
            }
        };
        let host = host.trim().to_string();
        if host.is_empty() {
            return Err(Error::invalid(format!("{MASTER_ADDR_ENV} is empty")));
        }
        let master_port = port(MASTER_PORT_ENV, &master_port)?;
        let agent_store = get(AGENT_STORE_ENV)
            .is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1"));
        let port = match get(RENDEZVOUS_PORT_ENV) {
            Some(v) => port(RENDEZVOUS_PORT_ENV, &v)?,
            None if agent_store => master_port.checked_add(1).ok_or_else(|| {
                Error::invalid(format!(
                    "{MASTER_PORT_ENV}=65535 is the launcher's store and 65536 is no port: set {RENDEZVOUS_PORT_ENV}"
                ))
            })?,
            None => master_port,
        };
        Ok(Some(Self { host, port }))
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') && !self.host.starts_with('[') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// The rendezvous timeout: `XSTREAM_RENDEZVOUS_TIMEOUT_MS` (milliseconds, > 0), else the
/// collective timeout ([`collective_timeout`], 300 s by default).
///
/// # Errors
/// [`Error::InvalidArgument`] for a value that is not a positive number.
pub fn rendezvous_timeout() -> Result<Duration> {
    match std::env::var(RENDEZVOUS_TIMEOUT_ENV).ok() {
        None => collective_timeout(),
        Some(v) => match v.trim().parse::<u64>() {
            Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
            _ => Err(Error::invalid(format!(
                "{RENDEZVOUS_TIMEOUT_ENV}={v:?}: expected a positive number of milliseconds"
            ))),
        },
    }
}

fn init_error(detail: String) -> Error {
    Error::Collective {
        op: "rendezvous",
        kind: CollectiveErrorKind::Init,
        detail,
    }
}

fn timeout_error(detail: String) -> Error {
    Error::Collective {
        op: "rendezvous",
        kind: CollectiveErrorKind::Timeout,
        detail,
    }
}

/// Encodes a hello without a job token.
pub fn encode_hello(world_size: u32, rank: u32) -> [u8; HELLO_LEN] {
    let mut b = [0u8; HELLO_LEN];
    b.copy_from_slice(&encode_hello_for_job(world_size, rank, b"")[..HELLO_LEN]);
    b
}

/// Encodes a hello carrying `job` (cut to [`MAX_JOB_TOKEN_LEN`] bytes).
pub fn encode_hello_for_job(world_size: u32, rank: u32, job: &[u8]) -> Vec<u8> {
    let job = &job[..job.len().min(MAX_JOB_TOKEN_LEN)];
    let mut b = Vec::with_capacity(HELLO_LEN + job.len());
    b.extend_from_slice(&MAGIC);
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.extend_from_slice(&(job.len() as u16).to_le_bytes());
    b.extend_from_slice(&world_size.to_le_bytes());
    b.extend_from_slice(&rank.to_le_bytes());
    b.extend_from_slice(job);
    b
}

fn reply_header(status: Status, world_size: u32, body_len: u32) -> [u8; REPLY_HEADER_LEN] {
    let mut b = [0u8; REPLY_HEADER_LEN];
    b[..4].copy_from_slice(&MAGIC);
    b[4..6].copy_from_slice(&VERSION.to_le_bytes());
    b[6..8].copy_from_slice(&(status as u16).to_le_bytes());
    b[8..12].copy_from_slice(&world_size.to_le_bytes());
    b[12..16].copy_from_slice(&body_len.to_le_bytes());
    b
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

mod server;
pub use server::{RendezvousServer, ServeReport};

/// A rank's side without a job token: [`fetch_id_for_job`] with an empty token.
///
/// # Errors
/// As [`fetch_id_for_job`].
pub fn fetch_id(
    endpoint: &Endpoint,
    rank: usize,
    world_size: usize,
    timeout: Duration,
) -> Result<UniqueId> {
    fetch_id_for_job(endpoint, rank, world_size, "", timeout)
}

/// How one connection to rank 0 ended without the id.
enum Attempt {
    /// Rank 0 closed before answering (it dropped the connection): connect again.
    Again(String),
    /// A final answer.
    Fail(Error),
}

/// A rank's side: connects to `endpoint` (retrying while nobody listens, or while rank 0
/// closes the connection before answering, until `timeout`), announces `rank` of
/// `world_size` in job `job` and returns rank 0's id.
///
/// # Errors
/// [`CollectiveErrorKind::Timeout`] when rank 0 could not be reached or did not answer in
/// time, or answered that ranks never connected; [`CollectiveErrorKind::Init`] when rank 0
/// refused this rank or the job (the status in words and rank 0's reason) or the peer is not
/// an xstream rendezvous; [`Error::InvalidArgument`] for a rank outside `1..world_size` or
/// a job token longer than [`MAX_JOB_TOKEN_LEN`].
pub fn fetch_id_for_job(
    endpoint: &Endpoint,
    rank: usize,
    world_size: usize,
    job: &str,
    timeout: Duration,
) -> Result<UniqueId> {
    let (w, r) = match (u32::try_from(world_size), u32::try_from(rank)) {
        (Ok(w), Ok(r)) if r >= 1 && r < w => (w, r),
        _ => {
            return Err(Error::invalid(format!(
                "rendezvous: rank {rank} of {world_size} does not fetch the id (ranks 1.. do)"
            )))
        }
    };
    if job.len() > MAX_JOB_TOKEN_LEN {
        return Err(Error::invalid(format!(
            "rendezvous: a job token of {} bytes (at most {MAX_JOB_TOKEN_LEN})",
            job.len()
        )));
    }
    let hello = encode_hello_for_job(w, r, job.as_bytes());
    let start = Instant::now();
    let mut backoff = Duration::from_millis(10);
    loop {
        let remaining = timeout.saturating_sub(start.elapsed());
        let attempt = (endpoint.host.as_str(), endpoint.port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve: {e}"))
            .and_then(|addrs| {
                let mut last = String::from("resolves to no address");
                for a in addrs {
                    match TcpStream::connect_timeout(
                        &a,
                        remaining.clamp(Duration::from_millis(1), Duration::from_secs(5)),
                    ) {
                        Ok(c) => return Ok(c),
                        Err(e) => last = format!("{a}: {e}"),
                    }
                }
                Err(last)
            });
        let last = match attempt {
            Ok(mut conn) => match exchange(
                &mut conn, endpoint, rank, world_size, &hello, start, timeout,
            ) {
                Ok(id) => return Ok(id),
                Err(Attempt::Fail(e)) => return Err(e),
                Err(Attempt::Again(why)) => why,
            },
            Err(last) => last,
        };
        let remaining = timeout.saturating_sub(start.elapsed());
        if remaining.is_zero() {
            return Err(timeout_error(format!(
                "rank {rank} could not reach rank 0's rendezvous at {endpoint} within {timeout:?} (last error: {last})"
            )));
        }
        std::thread::sleep(backoff.min(remaining));
        backoff = (backoff * 2).min(Duration::from_millis(500));
    }
}

/// One hello and its answer on a connected socket.
fn exchange(
    conn: &mut TcpStream,
    endpoint: &Endpoint,
    rank: usize,
    world_size: usize,
    hello: &[u8],
    start: Instant,
    timeout: Duration,
) -> std::result::Result<UniqueId, Attempt> {
    let io = |what: &str, e: std::io::Error| -> Attempt {
        match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Attempt::Fail(timeout_error(format!(
                "rank {rank}: rank 0's rendezvous at {endpoint} did not answer within {timeout:?} ({what})"
            ))),
            std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe => {
                Attempt::Again(format!("rank 0 closed the connection while {what}: {e}"))
            }
            _ => Attempt::Fail(init_error(format!(
                "rank {rank}: rendezvous with {endpoint} failed while {what}: {e}"
            ))),
        }
    };
    let remaining = timeout
        .saturating_sub(start.elapsed())
        .max(Duration::from_millis(1));
    conn.set_read_timeout(Some(remaining))
        .and_then(|()| conn.set_write_timeout(Some(remaining)))
        .map_err(|e| io("setting up the socket", e))?;
    conn.write_all(hello)
        .map_err(|e| io("sending the hello", e))?;
    let mut h = [0u8; REPLY_HEADER_LEN];
    conn.read_exact(&mut h)
        .map_err(|e| io("reading the reply", e))?;
    if h[..4] != MAGIC {
        return Err(Attempt::Fail(init_error(format!(
            "rank {rank}: {endpoint} is not an xstream rendezvous (reply magic {:02x?})",
            &h[..4]
        ))));
    }
    let (version, status, their_world, len) = (
        u16_at(&h, 4),
        u16_at(&h, 6),
        u32_at(&h, 8),
        u32_at(&h, 12) as usize,
    );
    let status = Status::from_u16(status).ok_or_else(|| {
        Attempt::Fail(init_error(format!(
            "rank {rank}: rank 0 answered with unknown status {status}"
        )))
    })?;
    let why = match status {
        Status::Ok => {
            if version != VERSION {
                return Err(Attempt::Fail(init_error(format!(
                    "rank {rank}: rank 0 refused: rank 0 speaks rendezvous version {version}, this rank {VERSION}"
                ))));
            }
            if len == 0 || len > MAX_ID_LEN {
                return Err(Attempt::Fail(init_error(format!(
                    "rank {rank}: rank 0 announced an id of {len} bytes (1..={MAX_ID_LEN})"
                ))));
            }
            let mut id = vec![0u8; len];
            conn.read_exact(&mut id)
                .map_err(|e| io("reading the id", e))?;
            return UniqueId::from_bytes(id).map_err(Attempt::Fail);
        }
        Status::WrongWorldSize => {
            format!("this rank has WORLD_SIZE={world_size}, rank 0 has WORLD_SIZE={their_world}")
        }
        Status::RankOutOfRange => {
            format!("RANK={rank} is not a rank of rank 0's job of {their_world}")
        }
        Status::DuplicateRank => {
            format!("rank 0 already holds or gave the id to another process with RANK={rank}")
        }
        Status::UnsupportedVersion => {
            format!("rank 0 speaks rendezvous version {version}, this rank {VERSION}")
        }
        Status::WrongJob => {
            "the rendezvous belongs to another job (two jobs on one port?)".to_string()
        }
        Status::JobFailed => "the job cannot form".to_string(),
        Status::TimedOut => "rank 0 gave up waiting for the other ranks".to_string(),
    };
    let mut reason = vec![0u8; len.min(MAX_REASON_LEN)];
    let reason = match conn.read_exact(&mut reason) {
        Ok(()) if !reason.is_empty() => format!(": {}", String::from_utf8_lossy(&reason)),
        _ => String::new(),
    };
    if status == Status::TimedOut {
        return Err(Attempt::Fail(timeout_error(format!(
            "rank {rank}: {why}{reason}"
        ))));
    }
    Err(Attempt::Fail(init_error(format!(
        "rank {rank}: rank 0 refused: {why}{reason}"
    ))))
}

#[cfg(test)]
mod tests;
