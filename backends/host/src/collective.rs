//! Host collectives: the reference semantics of `xstream_core::collective`, in process.
//!
//! - **Ranks** are [`HostComm`]s of one job: [`init_all`](CollectiveBackend::init_all) makes
//!   them all at once; [`init_rank`](CollectiveBackend::init_rank) joins one rank per call
//!   (from one thread per rank) through a unique id made in this process. Jobs do not cross
//!   processes: an id of another process is refused with [`Error::Unsupported`].
//! - **Devices**: there is one host device unless `XSTREAM_HOST_DEVICES` says otherwise, so
//!   `init_all` accepts the same device several times (vendors refuse that); each rank then
//!   uses its own streams of the shared device.
//! - **Enqueued in stream order.** Each operation is one work item of the stream. When the
//!   stream reaches it, the rank snapshots what it sends and enters the rendezvous of its
//!   next sequence number (per communicator, counted in execution order); the item completes
//!   once every rank entered that collective and this rank wrote its result. Event records
//!   and waits order it like any other work; a capture records it and every replay is a new
//!   operation (with the next sequence number).
//! - **Send/recv** match in order per (sender, receiver) pair. A send completes when its
//!   receive took the data (no buffering), so a send and a receive that depend on each other
//!   must be in one group: [`group_start`](Communicator::group_start) collects the
//!   operations and [`group_end`](Communicator::group_end) enqueues them as one work item per
//!   stream, which first posts every operation of the group and then completes them.
//! - **Checks**: the arguments are checked at enqueue (`check_args`); at the rendezvous the
//!   ranks' kinds, counts, dtypes, ops and roots must agree, and send/recv sizes must match,
//!   else every rank fails with [`Error::InvalidArgument`].
//! - **Failures** are per job and sticky: a peer missing for [`Communicator::timeout`]
//!   (default `XSTREAM_COLLECTIVE_TIMEOUT_MS`), an [`abort`](Communicator::abort), a
//!   mismatch, or a faulted device of a rank. The failing work item completes without writing
//!   its result; [`async_error`](Communicator::async_error) reports the failure on every rank
//!   and every later operation is refused with it.

use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use xstream_core::callback::ensure_not_in_callback;
use xstream_core::collective::{collective_timeout, ArgSizes, OpArgs};
use xstream_core::{
    Backend, CollectiveBackend, CollectiveErrorKind, CollectiveKind, CollectiveSupport,
    Communicator, DataType, Device, Error, ReduceOp, Result, Stream, UniqueId,
};

use crate::buffer::BufInner;
use crate::{HostBackend, HostDevice, HostDeviceBuffer, HostStream};

mod job;
mod reduce;

use job::{Entry, Failure, Job};

use xstream_core::sync::lock;

/// The first bytes of a host unique id.
const ID_MAGIC: &[u8; 4] = b"xsth";
/// Its length: magic, process id (u32), counter (u64).
const ID_LEN: usize = 16;

/// One operation of a work item.
#[derive(Debug, Clone)]
struct Item {
    args: OpArgs,
    send: Arc<BufInner>,
    recv: Arc<BufInner>,
    sizes: ArgSizes,
}

/// The work item of one or more collective operations (a group) on one stream.
#[derive(Clone)]
pub(crate) struct CollTask {
    comm: Arc<CommInner>,
    items: Arc<[Item]>,
}

impl fmt::Debug for CollTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CollTask")
            .field("rank", &self.comm.rank)
            .field(
                "ops",
                &self.items.iter().map(|i| i.args.kind).collect::<Vec<_>>(),
            )
            .finish()
    }
}

enum Posted {
    Coll(u64),
    Send(u64),
    Recv(u64),
}

impl CollTask {
    /// Runs on the stream's worker.
    pub(crate) fn run(&self) {
        if let Err(e) = self.run_items() {
            tracing::debug!(rank = self.comm.rank, error = %e, "host collective work item failed");
        }
    }

    /// The stream's device faulted: the peers must not wait for this rank.
    pub(crate) fn device_fault(&self, error: Error) {
        self.comm.job.fail(Failure::DeviceFault {
            rank: self.comm.rank,
            error,
        });
    }

    fn run_items(&self) -> Result<()> {
        let c = &self.comm;
        let (job, rank) = (&c.job, c.rank);
        let first = self.items.first().map_or("group", |i| i.args.kind.name());
        job.check(rank, first)?;
        let timeout = c.timeout();
        let deadline = Instant::now() + timeout;
        // Phase 1: post every operation (snapshots of what is sent, in stream order).
        let mut posted = Vec::with_capacity(self.items.len());
        for it in self.items.iter() {
            let a = &it.args;
            let snapshot = || it.send.lock()[..it.sizes.send_bytes].to_vec();
            posted.push(match a.kind {
                CollectiveKind::Send => {
                    Posted::Send(job.post_send(rank, a.root, a.count, a.dtype, snapshot())?)
                }
                CollectiveKind::Recv => Posted::Recv(job.post_recv(a.root, rank)?),
                _ => {
                    let seq = c.seq.fetch_add(1, Ordering::AcqRel);
                    let data = Arc::new(snapshot());
                    job.post_collective(rank, seq, Entry { args: *a, data })?;
                    Posted::Coll(seq)
                }
            });
        }
        // Phase 2: complete them; receives first, then collectives, then sends (which wait
        // for their peers' receives), so a ring of grouped sends and receives cannot wait on
        // itself.
        let mut posted: Vec<(&Item, Posted)> = self.items.iter().zip(posted).collect();
        posted.sort_by_key(|(_, p)| match p {
            Posted::Recv(_) => 0,
            Posted::Coll(_) => 1,
            Posted::Send(_) => 2,
        });
        for (it, p) in posted {
            let a = &it.args;
            match p {
                Posted::Send(idx) => job.wait_consumed(rank, a.root, idx, deadline, timeout)?,
                Posted::Recv(idx) => {
                    let m =
                        job.wait_message(a.root, rank, idx, a.count, a.dtype, deadline, timeout)?;
                    it.recv.lock()[..m.data.len()].copy_from_slice(&m.data);
                }
                Posted::Coll(seq) => {
                    let entries = job.wait_collective(rank, seq, a, deadline, timeout)?;
                    complete(it, rank, &entries);
                }
            }
        }
        Ok(())
    }
}

/// Writes this rank's result of a collective from every rank's entry.
fn complete(it: &Item, rank: usize, entries: &[Entry]) {
    let a = &it.args;
    let one = a.count * a.dtype.size_of();
    if one == 0 {
        return;
    }
    let mut recv = it.recv.lock();
    let out = &mut recv[..it.sizes.recv_bytes];
    let op = a.op.unwrap_or(ReduceOp::Sum);
    match a.kind {
        CollectiveKind::AllReduce => {
            let inputs: Vec<&[u8]> = entries.iter().map(|e| &e.data[..one]).collect();
            reduce::reduce(a.dtype, op, &inputs, out);
        }
        CollectiveKind::Reduce if rank == a.root => {
            let inputs: Vec<&[u8]> = entries.iter().map(|e| &e.data[..one]).collect();
            reduce::reduce(a.dtype, op, &inputs, out);
        }
        CollectiveKind::ReduceScatter => {
            let at = rank * one;
            let inputs: Vec<&[u8]> = entries.iter().map(|e| &e.data[at..at + one]).collect();
            reduce::reduce(a.dtype, op, &inputs, out);
        }
        CollectiveKind::AllGather => {
            for (chunk, e) in out.chunks_exact_mut(one).zip(entries) {
                chunk.copy_from_slice(&e.data[..one]);
            }
        }
        CollectiveKind::Broadcast => out.copy_from_slice(&entries[a.root].data[..one]),
        CollectiveKind::Reduce | CollectiveKind::Send | CollectiveKind::Recv => {}
    }
}

#[derive(Debug, Default)]
struct Group {
    depth: usize,
    pending: Vec<(HostStream, Item)>,
}

/// What one rank's handles and work items share.
struct CommInner {
    job: Arc<Job>,
    rank: usize,
    device: HostDevice,
    /// The next collective sequence number (in execution order).
    seq: AtomicU64,
    timeout_ms: AtomicU64,
    group: Mutex<Group>,
}

impl CommInner {
    fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(Ordering::Relaxed))
    }
}

/// One rank of a host job (see the module docs).
pub struct HostComm {
    inner: Arc<CommInner>,
}

impl fmt::Debug for HostComm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostComm")
            .field("rank", &self.inner.rank)
            .field("world", &self.inner.job.world)
            .field("device", &self.inner.device.info().ordinal)
            .finish()
    }
}

fn default_timeout_ms() -> Result<u64> {
    let t = collective_timeout()?;
    Ok(u64::try_from(t.as_millis()).unwrap_or(u64::MAX))
}

impl HostComm {
    fn new(job: Arc<Job>, rank: usize, device: HostDevice, timeout_ms: u64) -> Self {
        Self {
            inner: Arc::new(CommInner {
                job,
                rank,
                device,
                seq: AtomicU64::new(0),
                timeout_ms: AtomicU64::new(timeout_ms),
                group: Mutex::new(Group::default()),
            }),
        }
    }

    fn check_device(&self, op: &str, what: &str, ordinal: usize) -> Result<()> {
        let mine = self.inner.device.info().ordinal;
        if ordinal != mine {
            return Err(Error::WrongDevice(format!(
                "{op}: the {what} belongs to host device {ordinal}, the communicator (rank {}) to device {mine}",
                self.inner.rank
            )));
        }
        Ok(())
    }
}

impl Communicator for HostComm {
    type B = HostBackend;

    fn rank(&self) -> usize {
        self.inner.rank
    }

    fn world_size(&self) -> usize {
        self.inner.job.world
    }

    fn device(&self) -> &HostDevice {
        &self.inner.device
    }

    fn issue_impl(
        &self,
        args: OpArgs,
        sizes: ArgSizes,
        send: &HostDeviceBuffer,
        recv: &HostDeviceBuffer,
        stream: &HostStream,
    ) -> Result<()> {
        let c = &self.inner;
        let op = args.kind.name();
        c.job.check(c.rank, op)?;
        if !stream.device().same_context(&c.device) {
            return Err(Error::WrongDevice(format!(
                "{op}: the stream belongs to another host context than the communicator (rank {})",
                c.rank
            )));
        }
        self.check_device(op, "send buffer", send.inner.ordinal())?;
        self.check_device(op, "receive buffer", recv.inner.ordinal())?;
        let item = Item {
            args,
            send: Arc::clone(&send.inner),
            recv: Arc::clone(&recv.inner),
            sizes,
        };
        let mut g = lock(&c.group);
        if g.depth > 0 {
            g.pending.push((stream.alias(), item));
            return Ok(());
        }
        drop(g);
        stream.submit_collective(CollTask {
            comm: Arc::clone(&self.inner),
            items: Arc::from(vec![item]),
        })
    }

    fn group_start(&self) -> Result<()> {
        ensure_not_in_callback()?;
        lock(&self.inner.group).depth += 1;
        Ok(())
    }

    fn group_end(&self) -> Result<()> {
        ensure_not_in_callback()?;
        let pending = {
            let mut g = lock(&self.inner.group);
            if g.depth == 0 {
                return Err(Error::invalid("group_end without a matching group_start"));
            }
            g.depth -= 1;
            if g.depth > 0 {
                return Ok(());
            }
            std::mem::take(&mut g.pending)
        };
        // One work item per stream, in the order the streams first appear.
        let mut per_stream: Vec<(HostStream, Vec<Item>)> = Vec::new();
        for (s, it) in pending {
            match per_stream.iter_mut().find(|(t, _)| t.id() == s.id()) {
                Some((_, items)) => items.push(it),
                None => per_stream.push((s, vec![it])),
            }
        }
        let mut first_err = None;
        for (s, items) in per_stream {
            let r = s.submit_collective(CollTask {
                comm: Arc::clone(&self.inner),
                items: Arc::from(items),
            });
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    fn async_error(&self) -> Result<()> {
        self.inner.job.check(self.inner.rank, "async_error")
    }

    fn abort(&self) -> Result<()> {
        self.inner.job.fail(Failure::Aborted {
            by: self.inner.rank,
        });
        Ok(())
    }

    fn timeout(&self) -> Duration {
        self.inner.timeout()
    }

    fn set_timeout(&self, timeout: Duration) -> Result<()> {
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        if ms == 0 {
            return Err(Error::invalid(
                "a communicator timeout must be at least 1 ms",
            ));
        }
        self.inner.timeout_ms.store(ms, Ordering::Relaxed);
        Ok(())
    }
}

/// Jobs being joined through [`CollectiveBackend::init_rank`], by unique id.
#[derive(Default)]
struct Registry {
    pending: std::collections::HashMap<Vec<u8>, Joining>,
}

struct Joining {
    job: Arc<Job>,
    joined: Vec<bool>,
    taken: usize,
}

fn registry() -> &'static (Mutex<Registry>, Condvar) {
    static REG: OnceLock<(Mutex<Registry>, Condvar)> = OnceLock::new();
    REG.get_or_init(Default::default)
}

fn check_host_id(id: &UniqueId) -> Result<()> {
    let b = id.as_bytes();
    if b.len() != ID_LEN || &b[..4] != ID_MAGIC {
        return Err(Error::invalid(format!(
            "{id:?} is not a host backend unique id (make it with HostBackend::new_unique_id)"
        )));
    }
    let pid = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    if pid != std::process::id() {
        return Err(Error::unsupported(
            HostBackend::KIND,
            format!(
                "a job across processes: host collectives run in one process, and this id was made by process {pid}"
            ),
        ));
    }
    Ok(())
}

impl CollectiveBackend for HostBackend {
    type Comm = HostComm;

    const CHECKS_PEER_ARGS: bool = true;

    /// 16 bytes: a magic, this process's id and a counter. Valid in this process only.
    fn new_unique_id() -> Result<UniqueId> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let mut b = Vec::with_capacity(ID_LEN);
        b.extend_from_slice(ID_MAGIC);
        b.extend_from_slice(&std::process::id().to_le_bytes());
        let n = u64::from(NEXT.fetch_add(1, Ordering::Relaxed));
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        b.extend_from_slice(&(n ^ (t << 20)).to_le_bytes());
        UniqueId::from_bytes(b)
    }

    /// Joins rank `rank`; blocks until all `world` ranks of this process joined with the
    /// same id (each from its own thread), up to `XSTREAM_COLLECTIVE_TIMEOUT_MS`.
    fn init_rank(
        device: &HostDevice,
        id: &UniqueId,
        rank: usize,
        world: usize,
    ) -> Result<HostComm> {
        ensure_not_in_callback()?;
        if world == 0 || rank >= world {
            return Err(Error::invalid(format!(
                "init_rank: rank {rank} is not in a job of {world} ranks"
            )));
        }
        check_host_id(id)?;
        let timeout_ms = default_timeout_ms()?;
        let key = id.as_bytes().to_vec();
        let (m, cv) = registry();
        let mut reg = lock(m);
        let j = reg.pending.entry(key.clone()).or_insert_with(|| Joining {
            job: Job::new(world),
            joined: vec![false; world],
            taken: 0,
        });
        if j.job.world != world {
            return Err(Error::invalid(format!(
                "init_rank: rank {rank} says the job has {world} ranks, an earlier rank said {}",
                j.job.world
            )));
        }
        if j.joined[rank] {
            return Err(Error::invalid(format!(
                "init_rank: rank {rank} joined this job twice"
            )));
        }
        j.joined[rank] = true;
        let job = Arc::clone(&j.job);
        cv.notify_all();
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        while let Some(j) = reg.pending.get_mut(&key) {
            if !Arc::ptr_eq(&j.job, &job) {
                break;
            }
            if j.joined.iter().all(|&x| x) {
                j.taken += 1;
                if j.taken == world {
                    reg.pending.remove(&key);
                }
                cv.notify_all();
                return Ok(HostComm::new(job, rank, device.clone(), timeout_ms));
            }
            let now = Instant::now();
            if now >= deadline {
                let missing: Vec<usize> = (0..world).filter(|&r| !j.joined[r]).collect();
                j.joined[rank] = false;
                if j.joined.iter().all(|&x| !x) {
                    reg.pending.remove(&key);
                }
                return Err(Error::Collective {
                    op: "init_rank",
                    kind: CollectiveErrorKind::Timeout,
                    detail: format!(
                        "rank {rank}: rank(s) {missing:?} of {world} did not join within {:?}",
                        Duration::from_millis(timeout_ms)
                    ),
                });
            }
            reg = cv
                .wait_timeout(reg, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        // The entry went away before every rank joined (cannot happen while this rank is
        // counted in it); report instead of waiting forever.
        Err(Error::Collective {
            op: "init_rank",
            kind: CollectiveErrorKind::Init,
            detail: format!("rank {rank}: the job being joined disappeared"),
        })
    }

    /// One communicator per entry; the same device may be listed several times (there is
    /// one host device unless `XSTREAM_HOST_DEVICES` says otherwise).
    fn init_all(devices: &[HostDevice]) -> Result<Vec<HostComm>> {
        ensure_not_in_callback()?;
        if devices.is_empty() {
            return Err(Error::invalid("init_all: no devices"));
        }
        let timeout_ms = default_timeout_ms()?;
        let job = Job::new(devices.len());
        Ok(devices
            .iter()
            .enumerate()
            .map(|(r, d)| HostComm::new(Arc::clone(&job), r, d.clone(), timeout_ms))
            .collect())
    }

    /// Every cell is native: the host computes every op on every dtype.
    fn support(_op: Option<ReduceOp>, _dtype: DataType) -> CollectiveSupport {
        CollectiveSupport::Native
    }
}
