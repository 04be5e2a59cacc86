//! The state the ranks of one host job share: the rendezvous of collectives (by sequence
//! number), the mailboxes of send/recv, and the job's first failure.
//!
//! Every wait is bounded by a deadline; whatever happens first (the peers arrive, a failure
//! is recorded, the deadline passes) ends it. The first failure is kept for the whole job:
//! every rank sees it through `async_error`, and every later operation is refused or skipped
//! (like a vendor communicator after an asynchronous error: abort it and make a new one).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use xstream_core::collective::OpArgs;
use xstream_core::{CollectiveErrorKind, DataType, Error, Result};

use xstream_core::sync::lock;

/// Why a job failed (the first failure wins).
#[derive(Debug, Clone)]
pub(crate) enum Failure {
    /// Rank `by` called `abort`.
    Aborted { by: usize },
    /// A rank gave up waiting for its peers.
    Timeout { detail: String },
    /// The ranks disagree on an operation.
    Mismatch { detail: String },
    /// Rank `rank`'s device faulted while it had collective work queued.
    DeviceFault { rank: usize, error: Error },
}

impl Failure {
    /// The error `rank` reports for this failure.
    pub(crate) fn error_for(&self, rank: usize, op: &'static str) -> Error {
        let collective = |kind, detail: String| Error::Collective { op, kind, detail };
        match self {
            Failure::Aborted { by } if *by == rank => collective(
                CollectiveErrorKind::Aborted,
                format!("rank {rank} aborted the communicator"),
            ),
            Failure::Aborted { by } => collective(
                CollectiveErrorKind::PeerFailed,
                format!("rank {by} aborted the communicator"),
            ),
            Failure::Timeout { detail } => collective(CollectiveErrorKind::Timeout, detail.clone()),
            Failure::Mismatch { detail } => Error::invalid(detail.clone()),
            Failure::DeviceFault { rank: r, error } if *r == rank => error.clone(),
            Failure::DeviceFault { rank: r, error } => collective(
                CollectiveErrorKind::PeerFailed,
                format!("rank {r}'s device faulted: {error}"),
            ),
        }
    }
}

/// One rank's part of a collective: what it asked for and the bytes it sends.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub args: OpArgs,
    pub data: Arc<Vec<u8>>,
}

/// A message of a send, waiting for its receive.
#[derive(Debug)]
pub(crate) struct Message {
    idx: u64,
    pub count: usize,
    pub dtype: DataType,
    pub data: Vec<u8>,
}

#[derive(Debug)]
struct Slot {
    entries: Vec<Option<Entry>>,
    done: usize,
}

#[derive(Debug, Default)]
struct State {
    slots: HashMap<u64, Slot>,
    /// Messages posted by src to dst, keyed (src, dst).
    sent: HashMap<(usize, usize), u64>,
    /// Messages dst took from src.
    consumed: HashMap<(usize, usize), u64>,
    /// Receives dst posted from src.
    recv_next: HashMap<(usize, usize), u64>,
    mailbox: HashMap<(usize, usize), VecDeque<Message>>,
    failed: Option<Failure>,
}

/// What the ranks of one job share.
#[derive(Debug)]
pub(crate) struct Job {
    pub world: usize,
    state: Mutex<State>,
    cv: Condvar,
}

fn describe(a: &OpArgs) -> String {
    let mut s = format!("{} x {}", a.count, a.dtype);
    if let Some(op) = a.op {
        s.push_str(&format!(" {op}"));
    }
    if matches!(
        a.kind,
        xstream_core::CollectiveKind::Broadcast | xstream_core::CollectiveKind::Reduce
    ) {
        s.push_str(&format!(" root {}", a.root));
    }
    format!("{} ({s})", a.kind)
}

impl Job {
    pub(crate) fn new(world: usize) -> Arc<Self> {
        Arc::new(Self {
            world,
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        })
    }

    /// The job's failure as `rank` sees it, if any.
    pub(crate) fn check(&self, rank: usize, op: &'static str) -> Result<()> {
        match &lock(&self.state).failed {
            Some(f) => Err(f.error_for(rank, op)),
            None => Ok(()),
        }
    }

    /// Records `f` unless the job already failed; wakes every waiter.
    pub(crate) fn fail(&self, f: Failure) {
        let mut st = lock(&self.state);
        if st.failed.is_none() {
            tracing::warn!(failure = ?f, "host collective job failed");
            st.failed = Some(f);
        }
        drop(st);
        self.cv.notify_all();
    }

    /// Waits until `poll` gives a value, the job fails, or `deadline` passes (then the job
    /// fails with a timeout described by `missing`).
    fn wait<T>(
        &self,
        rank: usize,
        op: &'static str,
        deadline: Instant,
        timeout: Duration,
        mut poll: impl FnMut(&mut State) -> Result<Option<T>>,
        missing: impl Fn(&State) -> String,
    ) -> Result<T> {
        let mut st = lock(&self.state);
        loop {
            if let Some(f) = &st.failed {
                return Err(f.error_for(rank, op));
            }
            match poll(&mut st) {
                Ok(Some(v)) => {
                    drop(st);
                    self.cv.notify_all();
                    return Ok(v);
                }
                Ok(None) => {}
                Err(e) => return Err(e),
            }
            let now = Instant::now();
            if now >= deadline {
                let f = Failure::Timeout {
                    detail: format!("rank {rank}: {} within {timeout:?}", missing(&st)),
                };
                let e = f.error_for(rank, op);
                tracing::warn!(failure = ?f, "host collective job failed");
                st.failed = Some(f);
                drop(st);
                self.cv.notify_all();
                return Err(e);
            }
            st = self
                .cv
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Enters collective number `seq` with `entry`.
    pub(crate) fn post_collective(&self, rank: usize, seq: u64, entry: Entry) -> Result<()> {
        let op = entry.args.kind.name();
        let mut st = lock(&self.state);
        if let Some(f) = &st.failed {
            return Err(f.error_for(rank, op));
        }
        let world = self.world;
        let slot = st.slots.entry(seq).or_insert_with(|| Slot {
            entries: vec![None; world],
            done: 0,
        });
        slot.entries[rank] = Some(entry);
        drop(st);
        self.cv.notify_all();
        Ok(())
    }

    /// Waits until every rank entered collective `seq`, checks that they agree, and returns
    /// the entries in rank order.
    pub(crate) fn wait_collective(
        &self,
        rank: usize,
        seq: u64,
        args: &OpArgs,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Vec<Entry>> {
        let op = args.kind.name();
        let got = self.wait(
            rank,
            op,
            deadline,
            timeout,
            |st| {
                let Some(slot) = st.slots.get_mut(&seq) else {
                    return Ok(None);
                };
                if slot.entries.iter().any(Option::is_none) {
                    return Ok(None);
                }
                let entries: Vec<Entry> = slot.entries.iter().flatten().cloned().collect();
                slot.done += 1;
                if slot.done == slot.entries.len() {
                    st.slots.remove(&seq);
                }
                Ok(Some(entries))
            },
            |st| {
                let missing: Vec<usize> = st.slots.get(&seq).map_or_else(
                    || (0..self.world).collect(),
                    |s| {
                        (0..self.world)
                            .filter(|&r| s.entries[r].is_none())
                            .collect()
                    },
                );
                format!(
                    "collective #{seq} ({}) not entered by rank(s) {missing:?} of {}",
                    describe(args),
                    self.world
                )
            },
        )?;
        if let Some((r, e)) = got.iter().enumerate().find(|(_, e)| e.args != *args) {
            let f = Failure::Mismatch {
                detail: format!(
                    "ranks disagree on collective #{seq}: rank {rank} called {}, rank {r} called {}",
                    describe(args),
                    describe(&e.args)
                ),
            };
            let err = f.error_for(rank, op);
            self.fail(f);
            return Err(err);
        }
        Ok(got)
    }

    /// Posts a message from `src` to `dst`; returns its index on that channel.
    pub(crate) fn post_send(
        &self,
        src: usize,
        dst: usize,
        count: usize,
        dtype: DataType,
        data: Vec<u8>,
    ) -> Result<u64> {
        let mut st = lock(&self.state);
        if let Some(f) = &st.failed {
            return Err(f.error_for(src, "send"));
        }
        let idx = {
            let n = st.sent.entry((src, dst)).or_insert(0);
            *n += 1;
            *n - 1
        };
        st.mailbox
            .entry((src, dst))
            .or_default()
            .push_back(Message {
                idx,
                count,
                dtype,
                data,
            });
        drop(st);
        self.cv.notify_all();
        Ok(idx)
    }

    /// Posts a receive by `dst` from `src`; returns its index on that channel.
    pub(crate) fn post_recv(&self, src: usize, dst: usize) -> Result<u64> {
        let mut st = lock(&self.state);
        if let Some(f) = &st.failed {
            return Err(f.error_for(dst, "recv"));
        }
        let n = st.recv_next.entry((src, dst)).or_insert(0);
        *n += 1;
        Ok(*n - 1)
    }

    /// Waits until `dst` took message `idx` from `src`.
    pub(crate) fn wait_consumed(
        &self,
        src: usize,
        dst: usize,
        idx: u64,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<()> {
        self.wait(
            src,
            "send",
            deadline,
            timeout,
            |st| Ok((st.consumed.get(&(src, dst)).copied().unwrap_or(0) > idx).then_some(())),
            |_| format!("send #{idx} to rank {dst} not received by rank {dst}"),
        )
    }

    /// Waits for message `idx` from `src` to `dst` and takes it; the sizes must agree.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn wait_message(
        &self,
        src: usize,
        dst: usize,
        idx: u64,
        count: usize,
        dtype: DataType,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Message> {
        let msg = self.wait(
            dst,
            "recv",
            deadline,
            timeout,
            |st| {
                let q = st.mailbox.entry((src, dst)).or_default();
                if q.front().is_none_or(|m| m.idx != idx) {
                    return Ok(None);
                }
                let m = q.pop_front();
                *st.consumed.entry((src, dst)).or_insert(0) += 1;
                Ok(m)
            },
            |_| format!("recv #{idx} from rank {src}: rank {src} sent nothing"),
        )?;
        if msg.count != count || msg.dtype != dtype {
            let f = Failure::Mismatch {
                detail: format!(
                    "send/recv #{idx} from rank {src} to rank {dst}: sent {} x {}, received as {count} x {dtype}",
                    msg.count, msg.dtype
                ),
            };
            let err = f.error_for(dst, "recv");
            self.fail(f);
            return Err(err);
        }
        Ok(msg)
    }
}
