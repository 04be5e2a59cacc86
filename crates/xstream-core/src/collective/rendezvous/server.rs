//! The rank-0 side of the rendezvous: the server that hands the communicator id to every rank
//! of the job, and what it reports.

#[allow(unused_imports)]
use super::*;

/// What [`RendezvousServer::serve`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeReport {
    /// Ranks that got the id (every rank `1..world_size`).
    pub served: usize,
    /// The first [`MAX_REPORTED`] connections ignored, one line each (peer and reason).
    pub ignored: Vec<String>,
    /// How many connections were ignored in all.
    pub ignored_total: usize,
}

impl ServeReport {
    fn ignore(&mut self, peer: SocketAddr, why: &str) {
        self.ignored_total += 1;
        if self.ignored.len() < MAX_REPORTED {
            let line = format!("{peer}: {why}");
            tracing::warn!("xstream rendezvous: ignored a connection from {line}");
            self.ignored.push(line);
        } else if self.ignored_total == MAX_REPORTED + 1 {
            tracing::warn!(
                "xstream rendezvous: more than {MAX_REPORTED} ignored connections; counting the rest without naming them"
            );
        }
    }
}

/// A connection that has not sent a whole hello yet.
struct Pending {
    conn: TcpStream,
    peer: SocketAddr,
    buf: Vec<u8>,
    since: Instant,
}

/// What reading a pending connection gave.
enum Progress {
    More,
    Hello,
    Stray(String),
}

impl Pending {
    /// Bytes still missing from the hello.
    fn missing(&self) -> usize {
        if self.buf.len() < HELLO_LEN {
            return HELLO_LEN - self.buf.len();
        }
        let n = if u16_at(&self.buf, 4) == VERSION {
            u16_at(&self.buf, 6) as usize
        } else {
            0
        };
        (HELLO_LEN + n).saturating_sub(self.buf.len())
    }

    /// Reads what has arrived, without blocking.
    fn poll(&mut self) -> Progress {
        let mut tmp = [0u8; HELLO_LEN + MAX_JOB_TOKEN_LEN];
        loop {
            let want = self.missing();
            if want == 0 {
                return Progress::Hello;
            }
            match self.conn.read(&mut tmp[..want]) {
                Ok(0) => {
                    return Progress::Stray(format!(
                        "closed after {} bytes of a hello",
                        self.buf.len()
                    ))
                }
                Ok(k) => {
                    self.buf.extend_from_slice(&tmp[..k]);
                    let n = self.buf.len();
                    if n >= 4 && self.buf[..4] != MAGIC {
                        return Progress::Stray(format!(
                            "wrong magic {:02x?} (not an xstream rank)",
                            &self.buf[..4]
                        ));
                    }
                    if n >= 8
                        && u16_at(&self.buf, 4) == VERSION
                        && u16_at(&self.buf, 6) as usize > MAX_JOB_TOKEN_LEN
                    {
                        return Progress::Stray(format!(
                            "a job token of {} bytes (at most {MAX_JOB_TOKEN_LEN})",
                            u16_at(&self.buf, 6)
                        ));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Progress::More,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Progress::Stray(format!("{e} after {} bytes", self.buf.len())),
            }
        }
    }
}

/// Writes one whole message, blocking up to [`WRITE_TIMEOUT`].
fn send(conn: &mut TcpStream, msg: &[u8]) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_write_timeout(Some(WRITE_TIMEOUT))?;
    conn.write_all(msg)?;
    conn.flush()
}

/// Answers a refusal: the header and the reason.
fn refuse(conn: &mut TcpStream, status: Status, world: u32, reason: &str) {
    let reason = &reason.as_bytes()[..reason.len().min(MAX_REASON_LEN)];
    let mut msg = reply_header(status, world, reason.len() as u32).to_vec();
    msg.extend_from_slice(reason);
    let _ = send(conn, &msg);
}

/// Whether a held connection's peer has gone (it sends nothing after its hello).
fn gone(conn: &TcpStream) -> bool {
    let mut b = [0u8; 1];
    match conn.set_nonblocking(true).and_then(|()| conn.peek(&mut b)) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
        ),
    }
}

/// A job that cannot form: the reason, and which ranks have been told.
struct Failure {
    reason: String,
    told: std::collections::HashSet<usize>,
    world_seen: usize,
}

impl Failure {
    fn everyone_told(&self) -> bool {
        self.world_seen <= 1 << 16 && (1..self.world_seen).all(|r| self.told.contains(&r))
    }
}

/// Rank 0's side: a listening socket that hands out one id.
#[derive(Debug)]
pub struct RendezvousServer {
    pub(super) listener: TcpListener,
    pub(super) hello_timeout: Duration,
    pub(super) job: String,
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
            job: String::new(),
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

    /// Sets the job token a hello must carry to count as a rank of this job (default: none,
    /// which matches hellos without a token); cut to [`MAX_JOB_TOKEN_LEN`] bytes as the
    /// clients cut theirs.
    pub fn with_job(mut self, job: &str) -> Self {
        let mut end = job.len().min(MAX_JOB_TOKEN_LEN);
        while !job.is_char_boundary(end) {
            end -= 1;
        }
        self.job = job[..end].to_string();
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

    /// Hands `id` to every rank `1..world_size` once all of them have said hello, or fails
    /// every rank with one reason (see the module documentation), within `timeout`.
    ///
    /// # Errors
    /// [`CollectiveErrorKind::Timeout`] naming the ranks that never connected;
    /// [`CollectiveErrorKind::Init`] for a rank of this job with another world size, out of
    /// range or duplicate (after telling every rank, or at the end of `timeout`);
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
        let here = self
            .local_addr()
            .map_or_else(|_| "?".into(), |a| a.to_string());
        let mut served = vec![false; world_size];
        served[0] = true;
        let mut held: Vec<Option<(TcpStream, SocketAddr)>> =
            (0..world_size).map(|_| None).collect();
        let mut pending: std::collections::VecDeque<Pending> = Default::default();
        let mut failure: Option<Failure> = None;
        let mut report = ServeReport {
            served: 0,
            ignored: Vec::new(),
            ignored_total: 0,
        };
        self.listener
            .set_nonblocking(true)
            .map_err(|e| init_error(format!("rendezvous socket: {e}")))?;
        loop {
            if let Some(f) = &failure {
                if f.everyone_told() || start.elapsed() >= timeout {
                    return Err(init_error(f.reason.clone()));
                }
            } else if (1..world_size).all(|r| served[r] || held[r].is_some()) {
                let mut msg = reply_header(Status::Ok, world, id.as_bytes().len() as u32).to_vec();
                msg.extend_from_slice(id.as_bytes());
                for (r, slot) in held.iter_mut().enumerate() {
                    if let Some((mut conn, peer)) = slot.take() {
                        match send(&mut conn, &msg) {
                            Ok(()) => {
                                served[r] = true;
                                report.served += 1;
                            }
                            Err(e) => tracing::warn!(
                                "xstream rendezvous: rank {r} ({peer}) left before it got the id: {e}"
                            ),
                        }
                    }
                }
                if report.served + 1 == world_size {
                    return Ok(report);
                }
                continue;
            } else if start.elapsed() >= timeout {
                let missing: Vec<usize> = (1..world_size)
                    .filter(|r| !served[*r] && held[*r].is_none())
                    .collect();
                let shown: Vec<String> = missing.iter().take(32).map(|r| r.to_string()).collect();
                let reason = format!(
                    "rank 0 waited {timeout:?} on {here}: {} of {} ranks never connected: ranks {}{} (not started, crashed, or pointed at another MASTER_ADDR/MASTER_PORT)",
                    missing.len(),
                    world_size - 1,
                    shown.join(", "),
                    if missing.len() > shown.len() { ", ..." } else { "" }
                );
                for (mut conn, _) in held.iter_mut().filter_map(Option::take) {
                    refuse(&mut conn, Status::TimedOut, world, &reason);
                }
                return Err(timeout_error(reason));
            }
            let mut progress = false;
            for _ in 0..32 {
                match self.listener.accept() {
                    Ok((conn, peer)) => {
                        progress = true;
                        if conn.set_nonblocking(true).is_err() {
                            report.ignore(peer, "socket setup failed");
                            continue;
                        }
                        if pending.len() >= MAX_HALF_OPEN {
                            if let Some(old) = pending.pop_front() {
                                report.ignore(
                                    old.peer,
                                    &format!(
                                        "dropped after {} bytes: more than {MAX_HALF_OPEN} connections without a whole hello",
                                        old.buf.len()
                                    ),
                                );
                            }
                        }
                        pending.push_back(Pending {
                            conn,
                            peer,
                            buf: Vec::new(),
                            since: Instant::now(),
                        });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        // Out of descriptors and the like: a pause, not the job's end.
                        tracing::warn!("xstream rendezvous: accept: {e}");
                        break;
                    }
                }
            }
            let mut i = 0;
            while i < pending.len() {
                let p = &mut pending[i];
                match p.poll() {
                    Progress::More if p.since.elapsed() < self.hello_timeout => i += 1,
                    Progress::More => {
                        let p = pending.remove(i).expect("index in range");
                        report.ignore(
                            p.peer,
                            &format!(
                                "no full hello within {:?} ({} bytes)",
                                self.hello_timeout,
                                p.buf.len()
                            ),
                        );
                    }
                    Progress::Stray(why) => {
                        progress = true;
                        let p = pending.remove(i).expect("index in range");
                        report.ignore(p.peer, &why);
                    }
                    Progress::Hello => {
                        progress = true;
                        let p = pending.remove(i).expect("index in range");
                        self.take_hello(p, world, &mut held, &served, &mut failure, &mut report);
                    }
                }
            }
            if !progress {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }

    /// Places a whole hello: holds a rank of this job, ignores others, or fails the job.
    fn take_hello(
        &self,
        p: Pending,
        world: u32,
        held: &mut [Option<(TcpStream, SocketAddr)>],
        served: &[bool],
        failure: &mut Option<Failure>,
        report: &mut ServeReport,
    ) {
        let Pending {
            mut conn,
            peer,
            buf,
            ..
        } = p;
        let world_size = world as usize;
        let (version, w, r) = (u16_at(&buf, 4), u32_at(&buf, 8), u32_at(&buf, 12) as usize);
        if version != VERSION {
            let why = format!(
                "rendezvous version {version}; rank 0 at {} speaks {VERSION}",
                self.local_addr()
                    .map_or_else(|_| "?".into(), |a| a.to_string())
            );
            refuse(&mut conn, Status::UnsupportedVersion, world, &why);
            report.ignore(peer, &why);
            return;
        }
        let job = String::from_utf8_lossy(&buf[HELLO_LEN..]);
        if job != self.job {
            let why = format!(
                "a process of another job (job token {job:?}; this job's is {:?})",
                self.job
            );
            refuse(&mut conn, Status::WrongJob, world, &why);
            report.ignore(peer, &why);
            return;
        }
        if let Some(f) = failure {
            refuse(&mut conn, Status::JobFailed, world, &f.reason);
            f.told.insert(r);
            f.world_seen = f.world_seen.max(w as usize);
            return;
        }
        let problem = if w != world {
            Some((
                Status::WrongWorldSize,
                format!("rank {r} (from {peer}) has WORLD_SIZE={w}, rank 0 has WORLD_SIZE={world}"),
            ))
        } else if r == 0 || r >= world_size {
            Some((
                Status::RankOutOfRange,
                format!("a process from {peer} announced RANK={r}: not a rank 1..{world_size} of this job (rank 0 serves)"),
            ))
        } else if served[r] || held[r].as_ref().is_some_and(|(c, _)| !gone(c)) {
            Some((
                Status::DuplicateRank,
                format!(
                    "rank {r} connected twice (again from {peer}): two processes have RANK={r}"
                ),
            ))
        } else {
            None
        };
        let Some((status, reason)) = problem else {
            if let Some((_, old)) = held[r].replace((conn, peer)) {
                tracing::warn!(
                    "xstream rendezvous: rank {r} reconnected from {peer} (its connection from {old} closed)"
                );
            }
            return;
        };
        tracing::warn!("xstream rendezvous: the job cannot form: {reason}");
        refuse(&mut conn, status, world, &reason);
        let mut told = std::collections::HashSet::from([r]);
        for (rank, slot) in held.iter_mut().enumerate() {
            if let Some((mut c, _)) = slot.take() {
                refuse(&mut c, Status::JobFailed, world, &reason);
                told.insert(rank);
            }
        }
        told.extend((1..world_size).filter(|r| served[*r]));
        *failure = Some(Failure {
            reason,
            told,
            world_seen: world_size.max(w as usize),
        });
    }
}
