//! Collective communication: one portable communicator over NCCL, HCCL and the host backend.
//!
//! A [`Communicator`] is one rank of a group of devices (a *job*). It sits beside streams and
//! events: every operation is **enqueued** on an xstream stream of the communicator's device,
//! runs in that stream's order, and is ordered against other streams with events like any
//! other work. A rank's operation completes once every rank of the job entered the matching
//! operation (same position in each rank's sequence of operations).
//!
//! Communicators are created in one of two ways:
//! - [`CollectiveBackend::init_rank`]: one rank per process (any number of hosts), from a
//!   [`UniqueId`] made by rank 0 with [`CollectiveBackend::new_unique_id`] and passed out of
//!   band ([`bootstrap`] reads it, with the rank and world size, from the environment the way
//!   torchrun-style launchers set it);
//! - [`CollectiveBackend::init_all`]: one communicator per device, all in this process.
//!
//! # Arguments
//! `count` is in elements of `dtype`; buffers are whole xstream buffers used from byte offset
//! 0 and may be longer than needed. [`check_args`] is the one argument check, made by the
//! [`Communicator`]'s operations before the backend's enqueue: bad counts, roots and peers give
//! [`Error::InvalidArgument`].
//! Arguments that must agree *between ranks* (count, dtype, op, root) cannot be checked by
//! every vendor; the host backend checks them at the rendezvous and fails every rank with
//! [`Error::InvalidArgument`] (see [`CollectiveBackend::CHECKS_PEER_ARGS`]).
//!
//! # Failures
//! A missing or dead peer never hangs silently: waits are bounded by
//! [`collective_timeout`] (`XSTREAM_COLLECTIVE_TIMEOUT_MS`), after which the operation fails
//! with [`Error::Collective`] of kind [`CollectiveErrorKind::Timeout`]; [`Communicator::abort`]
//! makes pending and later operations fail with [`CollectiveErrorKind::Aborted`]. Vendor codes
//! (`ncclResult_t`, `HcclResult`) are kept in [`Error::Native`].
//!
//! # Tables
//! Which (op, dtype) cells a backend serves is data: [`CollectiveBackend::support`] and
//! [`support_table`], like the flag tables.

use std::fmt;
use std::time::Duration;

use crate::{Backend, BufferOf, DeviceOf, Error, Result, StreamOf};

pub mod bootstrap;
pub mod launcher;
pub mod rendezvous;
mod types;

pub use types::{CollectiveKind, DataType, ReduceOp, UniqueId};

/// How a cell of a backend's op × dtype table is served (like the flag tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollectiveSupport {
    /// The vendor library does it.
    Native,
    /// xstream does it on top of the vendor (the text says how).
    Emulated(&'static str),
    /// Refused with [`Error::Unsupported`] (the text says why).
    Unsupported(&'static str),
}

impl CollectiveSupport {
    /// Whether the cell can be used (natively or emulated).
    pub fn is_supported(&self) -> bool {
        !matches!(self, CollectiveSupport::Unsupported(_))
    }

    /// A short word for tables: `native`, `emulated` or `unsupported`.
    pub fn word(&self) -> &'static str {
        match self {
            CollectiveSupport::Native => "native",
            CollectiveSupport::Emulated(_) => "emulated",
            CollectiveSupport::Unsupported(_) => "unsupported",
        }
    }
}

impl fmt::Display for CollectiveSupport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CollectiveSupport::Native => f.write_str("native"),
            CollectiveSupport::Emulated(how) => write!(f, "emulated ({how})"),
            CollectiveSupport::Unsupported(why) => write!(f, "unsupported ({why})"),
        }
    }
}

/// Why a collective operation failed (besides bad arguments and vendor codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CollectiveErrorKind {
    /// The communicator was aborted ([`Communicator::abort`]); every pending and later
    /// operation fails.
    Aborted,
    /// A peer did not reach the operation within [`collective_timeout`] (dead, missing or
    /// stuck peer).
    Timeout,
    /// A peer failed or aborted its communicator; the job cannot go on.
    PeerFailed,
    /// Creating or joining the communicator failed (bootstrap, unique id, rank layout).
    Init,
}

impl fmt::Display for CollectiveErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Aborted => "communicator aborted",
            Self::Timeout => "peer timeout",
            Self::PeerFailed => "a peer failed or aborted",
            Self::Init => "communicator initialisation failed",
        })
    }
}

/// The default of [`collective_timeout`]: 300 seconds.
pub const DEFAULT_COLLECTIVE_TIMEOUT: Duration = Duration::from_secs(300);

/// The environment variable holding the collective timeout in milliseconds.
pub const TIMEOUT_ENV: &str = "XSTREAM_COLLECTIVE_TIMEOUT_MS";

/// How long a rank waits for its peers before failing with
/// [`CollectiveErrorKind::Timeout`]: `XSTREAM_COLLECTIVE_TIMEOUT_MS` (milliseconds, > 0), or
/// [`DEFAULT_COLLECTIVE_TIMEOUT`] (300 s) when unset.
///
/// # Errors
/// [`Error::InvalidArgument`] when the variable is set but is not a positive integer.
pub fn collective_timeout() -> Result<Duration> {
    parse_timeout(std::env::var(TIMEOUT_ENV).ok().as_deref())
}

/// [`collective_timeout`] on a given value of the variable (`None`: unset).
///
/// # Errors
/// As [`collective_timeout`].
pub fn parse_timeout(value: Option<&str>) -> Result<Duration> {
    match value {
        None => Ok(DEFAULT_COLLECTIVE_TIMEOUT),
        Some(v) => match v.trim().parse::<u64>() {
            Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
            _ => Err(Error::invalid(format!(
                "{TIMEOUT_ENV}={v:?}: expected a positive number of milliseconds"
            ))),
        },
    }
}

/// A backend with collective communication.
pub trait CollectiveBackend: Backend {
    /// Its communicator.
    type Comm: Communicator<B = Self>;

    /// Whether the backend detects ranks that disagree on an operation's kind, count, dtype,
    /// op or root (every rank of the operation then fails with [`Error::InvalidArgument`]).
    /// Vendors do not (such a job hangs or computes garbage); the host backend does.
    const CHECKS_PEER_ARGS: bool = false;

    /// A new unique id for a job, made by rank 0 and passed to every rank out of band.
    ///
    /// # Errors
    /// [`Error::NotAvailable`] without the vendor library; vendor errors.
    fn new_unique_id() -> Result<UniqueId>;

    /// One rank of a job (one process per device, any number of hosts). Blocks until every
    /// rank joined, up to [`collective_timeout`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `rank >= world` or a malformed id;
    /// [`Error::Collective`] ([`CollectiveErrorKind::Timeout`]) when peers do not join;
    /// [`Error::NotAvailable`]; vendor errors.
    fn init_rank(
        device: &DeviceOf<Self>,
        id: &UniqueId,
        rank: usize,
        world: usize,
    ) -> Result<Self::Comm>;

    /// One communicator per device, all in this process (rank `i` is `devices[i]`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty list (and, where the vendor forbids it, a
    /// device listed twice); [`Error::NotAvailable`]; vendor errors.
    fn init_all(devices: &[DeviceOf<Self>]) -> Result<Vec<Self::Comm>>;

    /// The op/dtype table: how `op` (`None`: the data-movement operations, which have no
    /// reduction) on `dtype` is served.
    fn support(op: Option<ReduceOp>, dtype: DataType) -> CollectiveSupport;
}

/// The communicator type of backend `B`.
pub type CommOf<B> = <B as CollectiveBackend>::Comm;

/// One rank of a job. Operations are enqueued on `stream` (any stream of the communicator's
/// device); they are ordered with events like any other work.
pub trait Communicator: Send + Sync + fmt::Debug {
    /// The backend.
    type B: CollectiveBackend<Comm = Self>;

    /// This rank (`0..world_size`).
    fn rank(&self) -> usize;
    /// How many ranks the job has.
    fn world_size(&self) -> usize;
    /// The device of this rank.
    fn device(&self) -> &DeviceOf<Self::B>;

    /// The backend's enqueue of one operation, called by the operations below (which a
    /// backend does not override) after the checks they hold once: the callback gate,
    /// [`check_support`] and [`check_args`], whose sizes come as `sizes`. For send and recv,
    /// `send` and `recv` are the one buffer. Checks nothing of the above again.
    ///
    /// # Errors
    /// [`Error::WrongDevice`]; [`Error::Collective`]; vendor errors.
    fn issue_impl(
        &self,
        args: OpArgs,
        sizes: ArgSizes,
        send: &BufferOf<Self::B>,
        recv: &BufferOf<Self::B>,
        stream: &StreamOf<Self::B>,
    ) -> Result<()>;

    /// Enqueues: `recv[i] = op over ranks of send[i]` for `i < count`, on every rank.
    ///
    /// # Errors
    /// [`check_args`]'s errors; [`Error::Unsupported`] for an unsupported (op, dtype) cell;
    /// [`Error::WrongDevice`]; [`Error::Collective`]; vendor errors.
    #[allow(clippy::too_many_arguments)]
    fn all_reduce(
        &self,
        send: &BufferOf<Self::B>,
        recv: &BufferOf<Self::B>,
        count: usize,
        dtype: DataType,
        op: ReduceOp,
        stream: &StreamOf<Self::B>,
    ) -> Result<()> {
        let args = OpArgs::new(CollectiveKind::AllReduce, count, dtype, Some(op), 0);
        issue(self, args, send, recv, stream)
    }

    /// Enqueues: `recv[r * send_count + i] = send_of_rank_r[i]`, on every rank.
    ///
    /// # Errors
    /// As [`Communicator::all_reduce`].
    fn all_gather(
        &self,
        send: &BufferOf<Self::B>,
        recv: &BufferOf<Self::B>,
        send_count: usize,
        dtype: DataType,
        stream: &StreamOf<Self::B>,
    ) -> Result<()> {
        let args = OpArgs::new(CollectiveKind::AllGather, send_count, dtype, None, 0);
        issue(self, args, send, recv, stream)
    }

    /// Enqueues: rank `r` gets `recv[i] = op over ranks of send[r * recv_count + i]`.
    ///
    /// # Errors
    /// As [`Communicator::all_reduce`].
    #[allow(clippy::too_many_arguments)]
    fn reduce_scatter(
        &self,
        send: &BufferOf<Self::B>,
        recv: &BufferOf<Self::B>,
        recv_count: usize,
        dtype: DataType,
        op: ReduceOp,
        stream: &StreamOf<Self::B>,
    ) -> Result<()> {
        let args = OpArgs::new(
            CollectiveKind::ReduceScatter,
            recv_count,
            dtype,
            Some(op),
            0,
        );
        issue(self, args, send, recv, stream)
    }

    /// Enqueues: every rank's `recv` gets `count` elements of the root's `send` (`send` is
    /// only read on the root).
    ///
    /// # Errors
    /// As [`Communicator::all_reduce`]; [`Error::InvalidArgument`] for `root >= world_size`.
    #[allow(clippy::too_many_arguments)]
    fn broadcast(
        &self,
        send: &BufferOf<Self::B>,
        recv: &BufferOf<Self::B>,
        count: usize,
        dtype: DataType,
        root: usize,
        stream: &StreamOf<Self::B>,
    ) -> Result<()> {
        let args = OpArgs::new(CollectiveKind::Broadcast, count, dtype, None, root);
        issue(self, args, send, recv, stream)
    }

    /// Enqueues: the root's `recv[i] = op over ranks of send[i]` (`recv` is only written on
    /// the root).
    ///
    /// # Errors
    /// As [`Communicator::broadcast`].
    #[allow(clippy::too_many_arguments)]
    fn reduce(
        &self,
        send: &BufferOf<Self::B>,
        recv: &BufferOf<Self::B>,
        count: usize,
        dtype: DataType,
        op: ReduceOp,
        root: usize,
        stream: &StreamOf<Self::B>,
    ) -> Result<()> {
        let args = OpArgs::new(CollectiveKind::Reduce, count, dtype, Some(op), root);
        issue(self, args, send, recv, stream)
    }

    /// Enqueues a send of `count` elements of `buf` to `peer`, matched by the peer's
    /// [`Communicator::recv`] from this rank. Sends and receives between two ranks match in
    /// order; a send and a receive that depend on each other must be in one group.
    ///
    /// # Errors
    /// As [`Communicator::all_reduce`]; [`Error::InvalidArgument`] for `peer >= world_size`.
    fn send(
        &self,
        buf: &BufferOf<Self::B>,
        count: usize,
        dtype: DataType,
        peer: usize,
        stream: &StreamOf<Self::B>,
    ) -> Result<()> {
        let args = OpArgs::new(CollectiveKind::Send, count, dtype, None, peer);
        issue(self, args, buf, buf, stream)
    }

    /// Enqueues a receive of `count` elements from `peer` into `buf`.
    ///
    /// # Errors
    /// As [`Communicator::send`].
    fn recv(
        &self,
        buf: &BufferOf<Self::B>,
        count: usize,
        dtype: DataType,
        peer: usize,
        stream: &StreamOf<Self::B>,
    ) -> Result<()> {
        let args = OpArgs::new(CollectiveKind::Recv, count, dtype, None, peer);
        issue(self, args, buf, buf, stream)
    }

    /// Opens a group: operations until the matching [`Communicator::group_end`] are issued
    /// together (send/recv pairs that depend on each other, one-process multi-device
    /// launches). Groups nest. Prefer [`group`], which always closes the group.
    ///
    /// # Errors
    /// Vendor errors.
    fn group_start(&self) -> Result<()>;

    /// Closes a group and issues its operations.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] without an open group; errors of the grouped operations.
    fn group_end(&self) -> Result<()>;

    /// The communicator's asynchronous error (a dead peer, a timeout), without blocking.
    ///
    /// # Errors
    /// The error, when there is one.
    fn async_error(&self) -> Result<()>;

    /// Aborts: pending and future operations fail with a clear error instead of hanging.
    ///
    /// # Errors
    /// Vendor errors.
    fn abort(&self) -> Result<()>;

    /// How long this rank waits for its peers before failing (and what [`synchronize`] waits
    /// at most). Starts at [`collective_timeout`].
    fn timeout(&self) -> Duration {
        collective_timeout().unwrap_or(DEFAULT_COLLECTIVE_TIMEOUT)
    }

    /// Sets [`Communicator::timeout`] for this rank.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for zero; [`Error::Unsupported`] where the backend cannot
    /// change it.
    fn set_timeout(&self, timeout: Duration) -> Result<()> {
        let _ = timeout;
        Err(Error::unsupported(
            <Self::B as Backend>::KIND,
            "changing a communicator's timeout",
        ))
    }
}

/// The checks every operation of a [`Communicator`] makes once, then its
/// [`Communicator::issue_impl`].
fn issue<C: Communicator + ?Sized>(
    comm: &C,
    args: OpArgs,
    send: &BufferOf<C::B>,
    recv: &BufferOf<C::B>,
    stream: &StreamOf<C::B>,
) -> Result<()> {
    use crate::Buffer;
    crate::callback::ensure_not_in_callback()?;
    check_support::<C::B>(args.op, args.dtype)?;
    let sizes = check_args(
        &args,
        comm.rank(),
        comm.world_size(),
        send.len(),
        recv.len(),
    )?;
    comm.issue_impl(args, sizes, send, recv, stream)
}

/// How often [`synchronize`] polls the communicator's asynchronous error while it waits.
pub const POLL_INTERVAL: Duration = Duration::from_millis(1);

/// The timeout path: waits for `stream` (which carries `comm`'s operations) while polling
/// [`Communicator::async_error`]; on an asynchronous error or after
/// [`Communicator::timeout`], aborts the communicator (so the vendor's kernels stop instead of
/// spinning forever) and returns the error. A dead or missing peer gives an error, never a
/// hang.
///
/// # Errors
/// The communicator's asynchronous error; [`Error::Collective`] of kind
/// [`CollectiveErrorKind::Timeout`] after the timeout; the stream's errors.
pub fn synchronize<C: Communicator>(comm: &C, stream: &StreamOf<C::B>) -> Result<()> {
    use crate::Stream;
    let timeout = comm.timeout();
    let start = std::time::Instant::now();
    loop {
        match stream.synchronize_timeout(POLL_INTERVAL) {
            Ok(()) => return comm.async_error(),
            Err(Error::Timeout(_)) => {}
            Err(e) => return Err(e),
        }
        if let Err(e) = comm.async_error() {
            let _ = comm.abort();
            return Err(e);
        }
        if start.elapsed() >= timeout {
            let _ = comm.abort();
            return Err(Error::Collective {
                op: "synchronize",
                kind: CollectiveErrorKind::Timeout,
                detail: format!(
                    "rank {} of {}: the stream's collective work did not complete within {timeout:?}; the communicator was aborted",
                    comm.rank(),
                    comm.world_size()
                ),
            });
        }
    }
}

/// Runs `f` between [`Communicator::group_start`] and [`Communicator::group_end`] of every
/// communicator of `comms` (one group for the ranks of one process). The groups are closed
/// even when `f` fails; `f`'s error comes first.
///
/// # Errors
/// `f`'s error, else the first `group_start` or `group_end` error.
pub fn group<C: Communicator, T>(comms: &[&C], f: impl FnOnce() -> Result<T>) -> Result<T> {
    let mut opened = 0;
    let mut start_err = None;
    for c in comms {
        match c.group_start() {
            Ok(()) => opened += 1,
            Err(e) => {
                start_err = Some(e);
                break;
            }
        }
    }
    let out = match start_err {
        None => f(),
        Some(e) => Err(e),
    };
    let mut end_err = None;
    for c in comms.iter().take(opened).rev() {
        if let Err(e) = c.group_end() {
            end_err.get_or_insert(e);
        }
    }
    match (out, end_err) {
        (Err(e), _) => Err(e),
        (Ok(_), Some(e)) => Err(e),
        (Ok(v), None) => Ok(v),
    }
}

/// The byte lengths one rank's operation needs, from [`check_args`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgSizes {
    /// Bytes read from the send buffer on this rank (0 where it is not read).
    pub send_bytes: usize,
    /// Bytes written to the receive buffer on this rank (0 where it is not written).
    pub recv_bytes: usize,
}

/// The arguments of one rank's operation, as [`check_args`] sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpArgs {
    /// Which operation.
    pub kind: CollectiveKind,
    /// The element count as passed (`send_count` for all_gather, `recv_count` for
    /// reduce_scatter).
    pub count: usize,
    /// The element type.
    pub dtype: DataType,
    /// The reduction, for reducing operations.
    pub op: Option<ReduceOp>,
    /// The root (broadcast, reduce) or peer (send, recv); 0 otherwise.
    pub root: usize,
}

impl OpArgs {
    /// The arguments of one operation, in the order the fields are declared.
    pub const fn new(
        kind: CollectiveKind,
        count: usize,
        dtype: DataType,
        op: Option<ReduceOp>,
        root: usize,
    ) -> Self {
        Self {
            kind,
            count,
            dtype,
            op,
            root,
        }
    }
}

/// The one argument check of every backend: the root or peer is a rank, the sizes do not
/// overflow, and the buffers (`send_len`, `recv_len` bytes; for send/recv pass the one
/// buffer's length as both) hold what the operation reads and writes on `rank`.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the operation and the faulty argument.
pub fn check_args(
    args: &OpArgs,
    rank: usize,
    world: usize,
    send_len: usize,
    recv_len: usize,
) -> Result<ArgSizes> {
    let name = args.kind.name();
    if world == 0 || rank >= world {
        return Err(Error::invalid(format!(
            "{name}: rank {rank} is not in a job of {world} ranks"
        )));
    }
    if args.kind.has_reduction() != args.op.is_some() {
        return Err(Error::invalid(format!(
            "{name}: a reduction op is {} for this operation",
            if args.op.is_some() {
                "not expected"
            } else {
                "required"
            }
        )));
    }
    match args.kind {
        CollectiveKind::Broadcast | CollectiveKind::Reduce if args.root >= world => {
            return Err(Error::invalid(format!(
                "{name}: root {} out of range (world size {world})",
                args.root
            )))
        }
        CollectiveKind::Send | CollectiveKind::Recv if args.root >= world => {
            return Err(Error::invalid(format!(
                "{name}: peer {} out of range (world size {world})",
                args.root
            )))
        }
        _ => {}
    }
    let bytes = |elems: usize| -> Result<usize> {
        elems
            .checked_mul(args.dtype.size_of())
            .ok_or_else(|| Error::invalid(format!("{name}: count {elems} overflows")))
    };
    let one = bytes(args.count)?;
    let all = bytes(
        args.count
            .checked_mul(world)
            .ok_or_else(|| Error::invalid(format!("{name}: count {} overflows", args.count)))?,
    )?;
    let is_root = rank == args.root;
    let sizes = match args.kind {
        CollectiveKind::AllReduce => (one, one),
        CollectiveKind::AllGather => (one, all),
        CollectiveKind::ReduceScatter => (all, one),
        CollectiveKind::Broadcast => (if is_root { one } else { 0 }, one),
        CollectiveKind::Reduce => (one, if is_root { one } else { 0 }),
        CollectiveKind::Send => (one, 0),
        CollectiveKind::Recv => (0, one),
    };
    if sizes.0 > send_len {
        return Err(Error::invalid(format!(
            "{name}: the send buffer holds {send_len} bytes, the operation reads {} ({} x {})",
            sizes.0,
            sizes.0 / args.dtype.size_of(),
            args.dtype
        )));
    }
    if sizes.1 > recv_len {
        return Err(Error::invalid(format!(
            "{name}: the receive buffer holds {recv_len} bytes, the operation writes {} ({} x {})",
            sizes.1,
            sizes.1 / args.dtype.size_of(),
            args.dtype
        )));
    }
    Ok(ArgSizes {
        send_bytes: sizes.0,
        recv_bytes: sizes.1,
    })
}

/// A backend's whole op × dtype table: one row per reduction (`None` first: the
/// data-movement operations), one cell per [`DataType::ALL`] entry.
pub fn support_table<B: CollectiveBackend>() -> Vec<(Option<ReduceOp>, Vec<CollectiveSupport>)> {
    std::iter::once(None)
        .chain(ReduceOp::ALL.iter().copied().map(Some))
        .map(|op| {
            let row = DataType::ALL.iter().map(|&d| B::support(op, d)).collect();
            (op, row)
        })
        .collect()
}

/// [`Error::Unsupported`] for an unsupported cell of `B`'s table, `Ok` otherwise.
///
/// # Errors
/// [`Error::Unsupported`] naming the op, the dtype and the reason.
pub fn check_support<B: CollectiveBackend>(op: Option<ReduceOp>, dtype: DataType) -> Result<()> {
    match B::support(op, dtype) {
        CollectiveSupport::Unsupported(why) => Err(Error::unsupported(
            B::KIND,
            format!(
                "collective {} on {dtype}: {why}",
                op.map_or("data movement", |o| o.name())
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
