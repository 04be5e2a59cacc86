//! TCP rendezvous: rank 0 hands the job's [`UniqueId`] to the other ranks over TCP, the way
//! torchrun-style launchers expect (`MASTER_ADDR` / `MASTER_PORT`), so that a job across hosts
//! needs no shared file system.
//!
//! Rank 0 makes the id, listens on the rendezvous endpoint and answers each rank's *hello*
//! with the id; it returns once every rank `1..WORLD_SIZE` got it. The other ranks connect
//! (retrying while rank 0 is not listening yet), send their hello and read the id. Everything
//! is bounded by the rendezvous timeout ([`rendezvous_timeout`]).
//!
//! # Endpoint
//! The host is `MASTER_ADDR`. The port is `XSTREAM_RENDEZVOUS_PORT` when set, else
//! `MASTER_PORT`, except under a torchrun whose agent serves its own store on `MASTER_PORT`
//! (`TORCHELASTIC_USE_AGENT_STORE=True`, newer torchrun versions): that port is taken by the
//! launcher, so xstream uses `MASTER_PORT + 1` (set `XSTREAM_RENDEZVOUS_PORT` when that port
//! is taken too). Rank 0 binds the addresses `MASTER_ADDR` resolves to; when none of them is
//! an address of this host (a name resolving to an outside address, as behind NAT), it binds
//! every interface on that port.
//!
//! # Wire format (version 1)
//! All integers little-endian. A rank sends a *hello* of [`HELLO_LEN`] (16) bytes:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `XSRZ` ([`MAGIC`]) |
//! | 4..6 | version, `u16` ([`VERSION`] = 1) |
//! | 6..8 | reserved, `u16`, 0 |
//! | 8..12 | the rank's `WORLD_SIZE`, `u32` |
//! | 12..16 | the rank's `RANK`, `u32` |
//!
//! Rank 0 answers with a header of [`REPLY_HEADER_LEN`] (16) bytes, then the id:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `XSRZ` |
//! | 4..6 | version, `u16` (the server's) |
//! | 6..8 | status, `u16` ([`Status`]: 0 ok, 1 wrong world size, 2 rank out of range, 3 duplicate rank, 4 unsupported version) |
//! | 8..12 | rank 0's `WORLD_SIZE`, `u32` |
//! | 12..16 | id length `n`, `u32` (0 unless ok; at most [`MAX_ID_LEN`]) |
//! | 16..16+n | the id bytes |
//!
//! and closes the connection.
//!
//! # Errors
//! - A hello with the magic but a different world size, a rank out of range, a rank that
//!   already got the id, or another version: the rank gets the status (its error names it)
//!   and rank 0 fails too, naming the rank, since the job cannot form. All
//!   [`Error::Collective`] of kind [`CollectiveErrorKind::Init`].
//! - A connection that is not a rank (wrong magic, garbage, closed or silent before a full
//!   hello within [`DEFAULT_HELLO_TIMEOUT`]): ignored with a warning (`tracing`) and counted;
//!   more than [`MAX_STRAY_CONNECTIONS`] of them fail rank 0 ([`CollectiveErrorKind::Init`]).
//! - Rank 0 not reached in time (a client), or ranks that never connected (rank 0):
//!   [`CollectiveErrorKind::Timeout`]; rank 0's error lists the missing ranks.

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
pub const VERSION: u16 = 1;
/// The length of a hello.
pub const HELLO_LEN: usize = 16;
/// The length of a reply's header.
pub const REPLY_HEADER_LEN: usize = 16;
/// The longest id a reply may carry (NCCL's id is 128 bytes, HCCL's 4108).
pub const MAX_ID_LEN: usize = 1 << 16;
/// How many stray connections rank 0 ignores before it fails.
pub const MAX_STRAY_CONNECTIONS: usize = 64;
/// How long rank 0 waits for a connection's hello before it counts it as stray.
pub const DEFAULT_HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// A reply's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Status {
    /// The id follows.
    Ok = 0,
    /// The rank announced another world size than rank 0's.
    WrongWorldSize = 1,
    /// The rank is not in `1..WORLD_SIZE`.
    RankOutOfRange = 2,
    /// Another connection already got the id for this rank.
    DuplicateRank = 3,
    /// The hello's version is not rank 0's.
    UnsupportedVersion = 4,
}

impl Status {
    fn from_u16(v: u16) -> Option<Self> {
        Some(match v {
            0 => Self::Ok,
            1 => Self::WrongWorldSize,
            2 => Self::RankOutOfRange,
            3 => Self::DuplicateRank,
            4 => Self::UnsupportedVersion,
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

/// Encodes a hello.
pub fn encode_hello(world_size: u32, rank: u32) -> [u8; HELLO_LEN] {
    let mut b = [0u8; HELLO_LEN];
    b[..4].copy_from_slice(&MAGIC);
    b[4..6].copy_from_slice(&VERSION.to_le_bytes());
    b[8..12].copy_from_slice(&world_size.to_le_bytes());
    b[12..16].copy_from_slice(&rank.to_le_bytes());
    b
}

fn reply_header(status: Status, world_size: u32, id_len: u32) -> [u8; REPLY_HEADER_LEN] {
    let mut b = [0u8; REPLY_HEADER_LEN];
    b[..4].copy_from_slice(&MAGIC);
    b[4..6].copy_from_slice(&VERSION.to_le_bytes());
    b[6..8].copy_from_slice(&(status as u16).to_le_bytes());
    b[8..12].copy_from_slice(&world_size.to_le_bytes());
    b[12..16].copy_from_slice(&id_len.to_le_bytes());
    b
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// What [`RendezvousServer::serve`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeReport {
    /// Ranks that got the id (every rank `1..world_size`).
    pub served: usize,
    /// The stray connections ignored, one line each (peer and reason).
    pub ignored: Vec<String>,
}

/// Rank 0's side: a listening socket that hands out one id.
#[derive(Debug)]
pub struct RendezvousServer {
    listener: TcpListener,
    hello_timeout: Duration,
}

impl RendezvousServer {
    /// Listens on `addr` (port 0 picks a free port; see [`RendezvousServer::local_addr`]).
    ///
    /// # Errors
    /// [`Error::Collective`] ([`CollectiveErrorKind::Init`]) when the address cannot be bound
    /// (in use, not an address of this host).
    pub fn bind(addr: SocketAddr) -> Result<Self> {
        let listener = TcpListener::bind(addr).map_err(|e| {
            init_error(format!(
                "rank 0 cannot listen on {addr}: {e}{}",
                if e.kind() == std::io::ErrorKind::AddrInUse {
                    format!(" (pick a free port with {RENDEZVOUS_PORT_ENV})")
                } else {
                    String::new()
                }
            ))
        })?;
        Ok(Self {
            listener,
            hello_timeout: DEFAULT_HELLO_TIMEOUT,
        })
    }

    /// Listens on `endpoint`: every address its host resolves to that this host has, else
    /// every interface (see the module documentation).
    ///
    /// # Errors
    /// As [`RendezvousServer::bind`]; an unresolvable host.
    pub fn bind_endpoint(endpoint: &Endpoint) -> Result<Self> {
        let addrs: Vec<SocketAddr> = (endpoint.host.as_str(), endpoint.port)
            .to_socket_addrs()
            .map_err(|e| init_error(format!("cannot resolve {endpoint}: {e}")))?
            .collect();
        let mut last = None;
        for a in &addrs {
            match Self::bind(*a) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        // None of them is ours (or none resolved): every interface of the first family.
        let any = match addrs.first().map(SocketAddr::ip) {
            Some(IpAddr::V6(_)) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            _ => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        };
        match Self::bind(SocketAddr::new(any, endpoint.port)) {
            Ok(s) => Ok(s),
            Err(e) => Err(last.unwrap_or(e)),
        }
    }

    /// Sets how long a connection may take to send its hello before it counts as stray
    /// (default [`DEFAULT_HELLO_TIMEOUT`]).
    pub fn with_hello_timeout(mut self, timeout: Duration) -> Self {
        self.hello_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// The address it listens on.
    ///
    /// # Errors
    /// [`Error::Collective`] ([`CollectiveErrorKind::Init`]) when the socket cannot say.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| init_error(format!("rendezvous socket address: {e}")))
    }

    /// Hands `id` to every rank `1..world_size`, one connection at a time, until all got it or
    /// `timeout` passed.
    ///
    /// # Errors
    /// As the module documentation says: [`CollectiveErrorKind::Timeout`] naming the ranks
    /// that never connected; [`CollectiveErrorKind::Init`] for a rank with another world size,
    /// out of range, duplicate or of another version, and for too many stray connections;
    /// [`Error::InvalidArgument`] for `world_size` 0 or above `u32::MAX`, or an id longer
    /// than [`MAX_ID_LEN`].
    pub fn serve(
        &self,
        id: &UniqueId,
        world_size: usize,
        timeout: Duration,
    ) -> Result<ServeReport> {
        let world = u32::try_from(world_size)
            .ok()
            .filter(|w| *w > 0)
            .ok_or_else(|| Error::invalid(format!("rendezvous: world size {world_size}")))?;
        if id.as_bytes().len() > MAX_ID_LEN {
            return Err(Error::invalid(format!(
                "rendezvous: a unique id of {} bytes is longer than {MAX_ID_LEN}",
                id.as_bytes().len()
            )));
        }
        let start = Instant::now();
        let mut got = vec![false; world_size];
        got[0] = true;
        let mut report = ServeReport {
            served: 0,
            ignored: Vec::new(),
        };
        self.listener
            .set_nonblocking(true)
            .map_err(|e| init_error(format!("rendezvous socket: {e}")))?;
        while report.served + 1 < world_size {
            let remaining = timeout.saturating_sub(start.elapsed());
            if remaining.is_zero() {
                let missing: Vec<usize> = (0..world_size).filter(|r| !got[*r]).collect();
                let shown: Vec<String> = missing.iter().take(32).map(|r| r.to_string()).collect();
                return Err(timeout_error(format!(
                    "rank 0 waited {timeout:?} on {}: {} of {} ranks never connected: ranks {}{} (not started, crashed, or pointed at another MASTER_ADDR/MASTER_PORT)",
                    self.local_addr().map_or_else(|_| "?".into(), |a| a.to_string()),
                    missing.len(),
                    world_size - 1,
                    shown.join(", "),
                    if missing.len() > shown.len() { ", ..." } else { "" }
                )));
            }
            let (mut conn, peer) = match self.listener.accept() {
                Ok(c) => c,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    std::thread::sleep(remaining.min(Duration::from_millis(5)));
                    continue;
                }
                Err(e) => return Err(init_error(format!("rendezvous accept: {e}"))),
            };
            let limit = remaining.min(self.hello_timeout);
            match Self::read_hello(&mut conn, limit) {
                Err(why) => {
                    let line = format!("{peer}: {why}");
                    tracing::warn!("xstream rendezvous: ignored a connection from {line}");
                    report.ignored.push(line);
                    if report.ignored.len() > MAX_STRAY_CONNECTIONS {
                        return Err(init_error(format!(
                            "rank 0 got more than {MAX_STRAY_CONNECTIONS} connections that are not xstream ranks (last: {}); is another service using the rendezvous port?",
                            report.ignored.last().map_or("", String::as_str)
                        )));
                    }
                }
                Ok(hello) => {
                    let (version, w, r) = (
                        u16_at(&hello, 4),
                        u32_at(&hello, 8),
                        u32_at(&hello, 12) as usize,
                    );
                    let refused = if version != VERSION {
                        Some((
                            Status::UnsupportedVersion,
                            format!("a rank from {peer} speaks rendezvous version {version}, rank 0 speaks {VERSION}"),
                        ))
                    } else if w != world {
                        Some((
                            Status::WrongWorldSize,
                            format!("rank {r} (from {peer}) has WORLD_SIZE={w}, rank 0 has WORLD_SIZE={world}"),
                        ))
                    } else if r == 0 || r >= world_size {
                        Some((
                            Status::RankOutOfRange,
                            format!("a process from {peer} announced RANK={r}: not a rank 1..{world_size} of this job (rank 0 serves)"),
                        ))
                    } else if got[r] {
                        Some((
                            Status::DuplicateRank,
                            format!("rank {r} connected twice (again from {peer}): two processes have RANK={r}"),
                        ))
                    } else {
                        None
                    };
                    let _ = conn.set_write_timeout(Some(remaining.max(Duration::from_millis(1))));
                    if let Some((status, why)) = refused {
                        let _ = conn.write_all(&reply_header(status, world, 0));
                        return Err(init_error(why));
                    }
                    let mut msg =
                        reply_header(Status::Ok, world, id.as_bytes().len() as u32).to_vec();
                    msg.extend_from_slice(id.as_bytes());
                    match conn.write_all(&msg).and_then(|()| conn.flush()) {
                        Ok(()) => {
                            got[r] = true;
                            report.served += 1;
                        }
                        Err(e) => {
                            tracing::warn!(
                                "xstream rendezvous: rank {r} ({peer}) left before it got the id: {e}"
                            );
                        }
                    }
                }
            }
        }
        Ok(report)
    }

    fn read_hello(
        conn: &mut TcpStream,
        limit: Duration,
    ) -> std::result::Result<[u8; HELLO_LEN], String> {
        conn.set_nonblocking(false)
            .and_then(|()| conn.set_read_timeout(Some(limit.max(Duration::from_millis(1)))))
            .map_err(|e| format!("socket setup: {e}"))?;
        let mut b = [0u8; HELLO_LEN];
        let mut n = 0;
        while n < HELLO_LEN {
            match conn.read(&mut b[n..]) {
                Ok(0) => {
                    return Err(format!(
                        "closed after {n} of the {HELLO_LEN} bytes of a hello"
                    ))
                }
                Ok(k) => {
                    n += k;
                    if n >= 4 && b[..4] != MAGIC {
                        return Err(format!(
                            "wrong magic {:02x?} (not an xstream rank)",
                            &b[..4]
                        ));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("no full hello within {limit:?} ({n} bytes): {e}")),
            }
        }
        Ok(b)
    }
}

/// A rank's side: connects to `endpoint` (retrying while nobody listens, until `timeout`),
/// announces `rank` of `world_size` and returns rank 0's id.
///
/// # Errors
/// [`CollectiveErrorKind::Timeout`] when rank 0 could not be reached or did not answer in
/// time; [`CollectiveErrorKind::Init`] when rank 0 refused this rank (the status in words) or
/// the peer is not an xstream rendezvous; [`Error::InvalidArgument`] for a rank outside
/// `1..world_size`.
pub fn fetch_id(
    endpoint: &Endpoint,
    rank: usize,
    world_size: usize,
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
    let start = Instant::now();
    let mut backoff = Duration::from_millis(10);
    let mut conn = loop {
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
        match attempt {
            Ok(c) => break c,
            Err(last) => {
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
    };
    let io = |what: &str, e: std::io::Error| -> Error {
        if matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            timeout_error(format!(
                "rank {rank}: rank 0's rendezvous at {endpoint} did not answer within {timeout:?} ({what})"
            ))
        } else {
            init_error(format!(
                "rank {rank}: rendezvous with {endpoint} failed while {what}: {e}"
            ))
        }
    };
    let remaining = timeout
        .saturating_sub(start.elapsed())
        .max(Duration::from_millis(1));
    conn.set_read_timeout(Some(remaining))
        .and_then(|()| conn.set_write_timeout(Some(remaining)))
        .map_err(|e| io("setting up the socket", e))?;
    conn.write_all(&encode_hello(w, r))
        .map_err(|e| io("sending the hello", e))?;
    let mut h = [0u8; REPLY_HEADER_LEN];
    conn.read_exact(&mut h)
        .map_err(|e| io("reading the reply", e))?;
    if h[..4] != MAGIC {
        return Err(init_error(format!(
            "rank {rank}: {endpoint} is not an xstream rendezvous (reply magic {:02x?})",
            &h[..4]
        )));
    }
    let (version, status, their_world, len) = (
        u16_at(&h, 4),
        u16_at(&h, 6),
        u32_at(&h, 8),
        u32_at(&h, 12) as usize,
    );
    let why = match Status::from_u16(status) {
        Some(Status::Ok) if version == VERSION => None,
        Some(Status::Ok) => Some(format!(
            "rank 0 speaks rendezvous version {version}, this rank {VERSION}"
        )),
        Some(Status::WrongWorldSize) => Some(format!(
            "this rank has WORLD_SIZE={world_size}, rank 0 has WORLD_SIZE={their_world}"
        )),
        Some(Status::RankOutOfRange) => Some(format!(
            "RANK={rank} is not a rank of rank 0's job of {their_world}"
        )),
        Some(Status::DuplicateRank) => Some(format!(
            "rank 0 already gave the id to another process with RANK={rank}"
        )),
        Some(Status::UnsupportedVersion) => Some(format!(
            "rank 0 speaks rendezvous version {version}, this rank {VERSION}"
        )),
        None => Some(format!("rank 0 answered with unknown status {status}")),
    };
    if let Some(why) = why {
        return Err(init_error(format!("rank {rank}: rank 0 refused: {why}")));
    }
    if len == 0 || len > MAX_ID_LEN {
        return Err(init_error(format!(
            "rank {rank}: rank 0 announced an id of {len} bytes (1..={MAX_ID_LEN})"
        )));
    }
    let mut id = vec![0u8; len];
    conn.read_exact(&mut id)
        .map_err(|e| io("reading the id", e))?;
    UniqueId::from_bytes(id)
}

#[cfg(test)]
mod tests;
