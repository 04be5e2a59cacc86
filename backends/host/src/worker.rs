//! Stream queues and the worker threads that execute them.
//!
//! A [`Queue`] is the state one stream shares between its handles (owned, borrowed, default)
//! and its worker thread. Work is data: a captured [`Node`] can be cloned into a graph and
//! replayed; an executable [`Op`] adds the one-shot items (callbacks, readbacks, event records
//! bound to one record slot, waits bound to one snapshot).
//!
//! Bookkeeping is two counters: `enqueued` (tickets handed out) and `completed` (ops the worker
//! finished). `query` compares them; `synchronize` waits until `completed` reaches the ticket
//! current at call time. Both are atomics written under the queue lock, so condvar waiters
//! never miss a wake-up and spinners need no lock.
//!
//! The worker is spawned by the first enqueue that finds none running. It exits when the
//! queue is empty and either its owning handle was dropped (`closed`) or it idled for
//! [`LINGER`]; the next enqueue spawns a new one. So idle streams hold no thread, and a
//! dropped stream's thread lives exactly as long as its remaining work.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use xstream_core::callback::{panic_message, CallbackSlot, PanicSlot};
use xstream_core::{
    AllocatorSlot, BackendKind, CaptureCell, CaptureMode, CreationReport, Error, FailureMode,
    ReadbackFill, Result, StreamFlags, SyncPolicy,
};

use crate::buffer::BufInner;
use crate::conv::WaitMode;
use crate::device::DeviceShared;
use crate::event::{EventInner, RecordSlot};
use xstream_core::PinnedSpan;

/// How long an idle worker waits for more work before its thread exits.
pub(crate) const LINGER: Duration = Duration::from_millis(20);

/// How long [`WaitMode::SpinThenBlock`] spins before blocking.
const BRIEF_SPIN: Duration = Duration::from_micros(20);

/// Capturable work: what a graph holds and replays.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Memset {
        buf: Arc<BufInner>,
        offset: usize,
        len: usize,
        value: xstream_core::MemsetPattern,
    },
    Write {
        dst: Arc<BufInner>,
        offset: usize,
        data: Arc<Vec<u8>>,
    },
    Copy {
        src: Arc<BufInner>,
        src_offset: usize,
        dst: Arc<BufInner>,
        dst_offset: usize,
        len: usize,
    },
    /// A kernel launch of a module (the builtin kernels included).
    Kernel(Arc<crate::module::KernelLaunch>),
    /// `Kernel::Fault`: poisons the device.
    #[cfg_attr(not(feature = "testing"), allow(dead_code))] // used by `Kernel::Fault` only
    Fault,
    /// A copy from page-locked host memory into a buffer.
    FromPinned {
        src: PinnedSpan,
        dst: Arc<BufInner>,
        offset: usize,
    },
    /// A copy from a buffer into page-locked host memory.
    ToPinned {
        src: Arc<BufInner>,
        offset: usize,
        dst: PinnedSpan,
    },
    /// An event record: bound to a fresh record slot each time the graph is launched.
    Record(Arc<EventInner>),
    /// A wait on a record made earlier in the same capture of the same stream: satisfied by
    /// stream order, kept as a node so the graph shows it.
    WaitLocal,
    /// A stream memory operation (wait on / write a word).
    Value(crate::stream::memop::ValueOp),
    /// The built-in reduce.
    Reduce(crate::stream::reduce::ReduceOp),
    /// The built-in random fill.
    Random(crate::stream::random::RandomOp),
    /// Collective operations of one rank (one, or a group's on this stream).
    Collective(crate::collective::CollTask),
}

/// Executable work.
pub(crate) enum Op {
    /// Capturable work (never `Node::Record`: records are bound to a slot first).
    Node(Node),
    /// Completes one record of an event.
    Record(Arc<RecordSlot>),
    /// Waits for one record (the snapshot taken by `wait_event`).
    Wait(Arc<RecordSlot>),
    /// The legacy default-stream rule: waits until `queue` completed `ticket` ops.
    WaitQueue { queue: Arc<Queue>, ticket: u64 },
    /// A device-to-host copy.
    Read {
        src: Arc<BufInner>,
        offset: usize,
        len: usize,
        fill: ReadbackFill,
    },
    /// A stream-blocking host callback.
    Callback(Arc<CallbackSlot>),
    /// One replay of a graph (one ticket).
    Graph(Vec<Op>),
}

/// Where a queue stands with respect to the legacy default-stream rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueKind {
    /// The device's default stream.
    Default,
    /// A blocking stream: synchronizes with the default stream.
    Blocking,
    /// A `NON_BLOCKING` stream.
    NonBlocking,
}

/// Settable stream attributes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attrs {
    pub priority: i32,
    pub sync: SyncPolicy,
    pub failure: FailureMode,
    pub tag: u32,
}

/// The capture list and how the capture was begun. Its lock also orders enqueues against
/// `begin_capture` / `end_capture`.
#[derive(Debug, Default)]
pub(crate) struct CaptureRec {
    pub nodes: Vec<Node>,
    pub mode: CaptureMode,
    pub thread: Option<ThreadId>,
    /// Incremented at every begin, so events can tell one capture from the next.
    pub epoch: u64,
}

#[derive(Default)]
struct QueueState {
    ops: VecDeque<Op>,
    worker: bool,
    closed: bool,
}

/// Everything one stream's handles and its worker share.
pub(crate) struct Queue {
    pub id: u64,
    pub name: Option<String>,
    pub shared: Arc<DeviceShared>,
    pub flags: StreamFlags,
    pub native_flags: u32,
    pub kind: QueueKind,
    pub report: CreationReport,
    pub panics: Arc<PanicSlot>,
    pub capture: CaptureCell,
    pub capture_rec: Mutex<CaptureRec>,
    pub attrs: Mutex<Attrs>,
    pub allocator: AllocatorSlot,
    enqueued: AtomicU64,
    completed: AtomicU64,
    last_default_wait: AtomicU64,
    state: Mutex<QueueState>,
    done_cv: Condvar,
    work_cv: Condvar,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("enqueued", &self.enqueued())
            .field("completed", &self.completed())
            .finish()
    }
}

pub(crate) use xstream_core::sync::lock;

impl Queue {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: u64,
        name: Option<String>,
        shared: Arc<DeviceShared>,
        flags: StreamFlags,
        native_flags: u32,
        kind: QueueKind,
        report: CreationReport,
        priority: i32,
    ) -> Arc<Self> {
        Arc::new(Self {
            id,
            name,
            shared,
            flags,
            native_flags,
            kind,
            report,
            panics: Arc::new(PanicSlot::default()),
            capture: CaptureCell::new(),
            capture_rec: Mutex::new(CaptureRec::default()),
            attrs: Mutex::new(Attrs {
                priority,
                sync: SyncPolicy::Auto,
                failure: FailureMode::Continue,
                tag: 0,
            }),
            allocator: AllocatorSlot::default(),
            enqueued: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            last_default_wait: AtomicU64::new(0),
            state: Mutex::new(QueueState::default()),
            done_cv: Condvar::new(),
            work_cv: Condvar::new(),
        })
    }

    /// Tickets handed out so far.
    pub(crate) fn enqueued(&self) -> u64 {
        self.enqueued.load(Ordering::Acquire)
    }

    /// Ops completed so far.
    pub(crate) fn completed(&self) -> u64 {
        self.completed.load(Ordering::Acquire)
    }

    pub(crate) fn attrs(&self) -> MutexGuard<'_, Attrs> {
        lock(&self.attrs)
    }

    pub(crate) fn capture_rec(&self) -> MutexGuard<'_, CaptureRec> {
        lock(&self.capture_rec)
    }

    /// The implicit waits the legacy default-stream rule puts before new work.
    fn implicit_waits(&self) -> Vec<Op> {
        match self.kind {
            QueueKind::NonBlocking => Vec::new(),
            QueueKind::Blocking => {
                let Some(d) = self.shared.default_queue() else {
                    return Vec::new();
                };
                let t = d.enqueued();
                if d.completed() < t && self.last_default_wait.fetch_max(t, Ordering::AcqRel) < t {
                    vec![Op::WaitQueue {
                        queue: d,
                        ticket: t,
                    }]
                } else {
                    Vec::new()
                }
            }
            QueueKind::Default => self
                .shared
                .live_queues()
                .into_iter()
                .filter(|q| q.kind == QueueKind::Blocking)
                .filter_map(|q| {
                    let t = q.enqueued();
                    (q.completed() < t).then_some(Op::WaitQueue {
                        queue: q,
                        ticket: t,
                    })
                })
                .collect(),
        }
    }

    /// Enqueues `op` for execution (after the implicit default-stream waits), spawning the
    /// worker if none runs.
    ///
    /// # Errors
    /// [`Error::ResourceExhausted`] when no worker thread can be spawned (nothing enqueued).
    pub(crate) fn push(self: &Arc<Self>, op: Op) -> Result<()> {
        let pre = self.implicit_waits();
        let n = pre.len() + 1;
        let mut st = lock(&self.state);
        st.ops.extend(pre);
        st.ops.push_back(op);
        self.enqueued.fetch_add(n as u64, Ordering::AcqRel);
        if st.worker {
            self.work_cv.notify_one();
            return Ok(());
        }
        let q = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name(format!("xstream-host-{}", self.id))
            .spawn(move || worker_loop(q));
        match spawned {
            Ok(_) => {
                st.worker = true;
                Ok(())
            }
            Err(e) => {
                let keep = st.ops.len() - n;
                st.ops.truncate(keep);
                self.enqueued.fetch_sub(n as u64, Ordering::AcqRel);
                Err(Error::ResourceExhausted {
                    backend: BackendKind::Host,
                    detail: format!("cannot spawn a stream worker thread: {e}"),
                })
            }
        }
    }

    /// Marks the queue as having lost its owner: the worker exits once the queue is drained.
    pub(crate) fn close(&self) {
        let mut st = lock(&self.state);
        st.closed = true;
        self.work_cv.notify_all();
    }

    /// Waits until `completed >= target`. Returns `false` when `deadline` passed first.
    pub(crate) fn wait_for(&self, target: u64, deadline: Option<Instant>, mode: WaitMode) -> bool {
        wait_until(
            &self.state,
            &self.done_cv,
            || self.completed() >= target,
            mode,
            deadline,
        )
    }
}

/// Waits until `ready()` holds, spinning, yielding or blocking on `cv` (whose notifier changes
/// what `ready` reads while holding `m`). Returns `false` when `deadline` passed first.
pub(crate) fn wait_until<T>(
    m: &Mutex<T>,
    cv: &Condvar,
    ready: impl Fn() -> bool,
    mode: WaitMode,
    deadline: Option<Instant>,
) -> bool {
    let expired = |now: Instant| deadline.is_some_and(|d| now >= d);
    match mode {
        WaitMode::Spin | WaitMode::Yield => loop {
            if ready() {
                return true;
            }
            if expired(Instant::now()) {
                return false;
            }
            if mode == WaitMode::Spin {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        },
        WaitMode::SpinThenBlock | WaitMode::Block => {
            if mode == WaitMode::SpinThenBlock {
                let until = Instant::now() + BRIEF_SPIN;
                while Instant::now() < until {
                    if ready() {
                        return true;
                    }
                    std::hint::spin_loop();
                }
            }
            let mut g = lock(m);
            loop {
                if ready() {
                    return true;
                }
                match deadline {
                    None => g = cv.wait(g).unwrap_or_else(|e| e.into_inner()),
                    Some(d) => {
                        let now = Instant::now();
                        if now >= d {
                            return false;
                        }
                        g = cv
                            .wait_timeout(g, d - now)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                }
            }
        }
    }
}

fn worker_loop(q: Arc<Queue>) {
    tracing::trace!(stream = q.id, name = ?q.name, "worker started");
    let mut st = lock(&q.state);
    loop {
        if let Some(op) = st.ops.pop_front() {
            drop(st);
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| execute(&q, op))) {
                // Callbacks are guarded by their slot; this is a bug in the backend itself.
                tracing::error!(stream = q.id, panic = %panic_message(&*p), "host worker op panicked");
            }
            st = lock(&q.state);
            q.completed.fetch_add(1, Ordering::AcqRel);
            q.done_cv.notify_all();
            continue;
        }
        if st.closed {
            break;
        }
        let (g, t) = q
            .work_cv
            .wait_timeout(st, LINGER)
            .unwrap_or_else(|e| e.into_inner());
        st = g;
        if t.timed_out() && st.ops.is_empty() {
            break;
        }
    }
    st.worker = false;
    drop(st);
    tracing::trace!(stream = q.id, "worker exits");
}

fn execute(q: &Queue, op: Op) {
    let fault = q.shared.fault();
    let status = || fault.clone().map_or(Ok(()), Err);
    match op {
        Op::Node(n) => match (fault, n) {
            (None, n) => run_node(q, n),
            // The peers must not wait for a rank whose device faulted.
            (Some(f), Node::Collective(t)) => t.device_fault(f),
            (Some(_), _) => {}
        },
        Op::Record(slot) => slot.complete(status()),
        Op::Wait(slot) => {
            if fault.is_none() {
                slot.wait(None, WaitMode::Block);
            }
        }
        Op::WaitQueue { queue, ticket } => {
            if fault.is_none() {
                queue.wait_for(ticket, None, WaitMode::Block);
            }
        }
        Op::Read {
            src,
            offset,
            len,
            fill,
        } => {
            let r = status().and_then(|()| {
                src.lock()
                    .get(offset..offset + len)
                    .map(<[u8]>::to_vec)
                    .ok_or_else(|| Error::invalid("read outside the buffer"))
            });
            fill.fill(r);
        }
        Op::Callback(slot) => {
            let _span =
                tracing::debug_span!("host_callback", stream = q.id, name = ?q.name).entered();
            slot.fire(status());
        }
        Op::Graph(ops) => {
            for op in ops {
                execute(q, op);
            }
        }
    }
}

fn run_node(q: &Queue, n: Node) {
    match n {
        Node::Memset {
            buf,
            offset,
            len,
            value,
        } => {
            if let Some(s) = buf.lock().get_mut(offset..offset + len) {
                value.fill(s);
            }
        }
        Node::Write { dst, offset, data } => {
            if let Some(s) = dst.lock().get_mut(offset..offset + data.len()) {
                s.copy_from_slice(&data);
            }
        }
        Node::Copy {
            src,
            src_offset,
            dst,
            dst_offset,
            len,
        } => copy(&src, src_offset, &dst, dst_offset, len),
        Node::FromPinned { src, dst, offset } => {
            if let Some(d) = dst.lock().get_mut(offset..offset + src.len()) {
                let _ = src.read_into_blocking(d);
            }
        }
        Node::ToPinned { src, offset, dst } => {
            if let Some(s) = src.lock().get(offset..offset + dst.len()) {
                let _ = dst.write_from_blocking(s);
            }
        }
        Node::Kernel(k) => run_kernel(q, &k),
        Node::Fault => {
            let _ = q.shared.poison("kernel");
        }
        Node::Value(op) => op.run(q),
        Node::Reduce(op) => op.run(),
        Node::Random(op) => op.run(),
        Node::Collective(t) => t.run(),
        // Bound to `Op::Record` before execution; a wait on a local record is satisfied by
        // stream order.
        Node::Record(_) | Node::WaitLocal => {}
    }
}

fn copy(src: &Arc<BufInner>, so: usize, dst: &Arc<BufInner>, d_o: usize, len: usize) {
    if Arc::ptr_eq(src, dst) {
        let mut g = src.lock();
        if so + len <= g.len() && d_o + len <= g.len() {
            g.copy_within(so..so + len, d_o);
        }
        return;
    }
    // Two locks, always taken in address order, so opposite copies on two workers cannot
    // deadlock.
    let (s, mut d);
    if src.addr() < dst.addr() {
        s = src.lock();
        d = dst.lock();
    } else {
        d = dst.lock();
        s = src.lock();
    }
    if let (Some(from), Some(to)) = (s.get(so..so + len), d.get_mut(d_o..d_o + len)) {
        to.copy_from_slice(from);
    }
}

/// Runs one kernel launch; an error or a panic of the kernel is a device fault (the context
/// is poisoned with a sticky error naming the kernel, see `crate::module`).
fn run_kernel(q: &Queue, k: &crate::module::KernelLaunch) {
    // Like a stream-blocking callback: xstream calls inside the kernel are refused
    // (`NotPermitted`), and a panic is caught.
    let failure = match xstream_core::callback::run_guarded(|| k.run()) {
        Ok(Ok(())) => return,
        Ok(Err(e)) => e.to_string(),
        Err(p) => format!("panicked: {p}"),
    };
    tracing::error!(stream = q.id, kernel = %xstream_core::Function::name(&k.function), %failure, "host kernel failed");
    let _ = q.shared.poison_with(
        "host kernel",
        Some(format!(
            "`{}`: {failure}",
            xstream_core::Function::name(&k.function)
        )),
    );
}
