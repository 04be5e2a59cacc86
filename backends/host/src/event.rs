//! Host events.
//!
//! Each `record` creates a [`RecordSlot`]: a one-shot completion (status, timestamp, waiters)
//! that the stream's worker completes when it reaches the record. The event points at its
//! latest slot. `wait_event` snapshots the slot current at call time, so re-recording later
//! (or dropping the event) does not change a wait already enqueued — CUDA's observed rule —
//! and records completing out of order on different streams cannot satisfy the wrong wait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};
use xstream_core::sync::lock;

use xstream_core::completion::{completion, CompletionSignal};
use xstream_core::{
    BackendKind, CaptureErrorKind, Completion, Device, Error, EventDesc, EventFlags, FlagReport,
    IpcEventHandle, IpcEventImpl, Result, Status, TranslationPolicy,
};

use crate::conv::{map_event_wait, WaitMode, HOST_FLAGS};
use crate::device::next_id;
use crate::ipc::{self, IpcState};
use crate::worker::{wait_until, Queue};
use crate::{HostBackend, HostDevice, HostStream};

struct Done {
    at: Option<Instant>,
    status: Result<()>,
}

#[derive(Default)]
struct SlotState {
    done: Option<Done>,
    waiters: Vec<CompletionSignal>,
}

/// One record of an event.
pub(crate) struct RecordSlot {
    state: Mutex<SlotState>,
    cv: Condvar,
    done: AtomicBool,
    timing: bool,
    /// The interprocess state this record moves when it completes, and its number.
    ipc: OnceLock<(Arc<IpcState>, u64)>,
}

impl RecordSlot {
    pub(crate) fn new(timing: bool) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(SlotState::default()),
            cv: Condvar::new(),
            done: AtomicBool::new(false),
            timing,
            ipc: OnceLock::new(),
        })
    }

    /// Makes this record number `seq` of an interprocess event (set before it is enqueued).
    pub(crate) fn notify_ipc(&self, state: Arc<IpcState>, seq: u64) {
        let _ = self.ipc.set((state, seq));
    }

    fn lock(&self) -> MutexGuard<'_, SlotState> {
        xstream_core::sync::lock(&self.state)
    }

    /// Completes the record (worker side): timestamp, wake waiters, resolve futures.
    pub(crate) fn complete(&self, status: Result<()>) {
        let at = self.timing.then(Instant::now);
        let waiters = {
            let mut g = self.lock();
            let waiters = std::mem::take(&mut g.waiters);
            g.done = Some(Done {
                at,
                status: status.clone(),
            });
            self.done.store(true, Ordering::Release);
            waiters
        };
        self.cv.notify_all();
        if let Some((state, seq)) = self.ipc.get() {
            state.complete(*seq, status.is_ok());
        }
        for w in waiters {
            w.complete(status.clone());
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Waits for completion; `false` when `deadline` passed first.
    pub(crate) fn wait(&self, deadline: Option<Instant>, mode: WaitMode) -> bool {
        wait_until(&self.state, &self.cv, || self.is_done(), mode, deadline)
    }

    fn status(&self) -> Option<Result<()>> {
        self.lock().done.as_ref().map(|d| d.status.clone())
    }

    fn timestamp(&self) -> Option<Option<Instant>> {
        self.lock().done.as_ref().map(|d| d.at)
    }

    /// A future resolved by the worker when the record completes (no polling).
    fn completion(&self) -> Completion {
        let mut g = self.lock();
        match &g.done {
            Some(d) => Completion::ready(d.status.clone()),
            None => {
                let (c, s) = completion();
                g.waiters.push(s);
                c
            }
        }
    }
}

/// What an event's latest record is.
#[derive(Clone)]
pub(crate) enum Latest {
    /// Never recorded: complete, waits are no-ops.
    Never,
    /// An executing record.
    Real(Arc<RecordSlot>),
    /// Recorded into a capture (a graph node, not an execution).
    Captured { queue: Weak<Queue>, epoch: u64 },
}

impl Latest {
    /// The capturing queue when this is a record inside a capture that is still under way.
    pub(crate) fn active_capture(&self) -> Option<Arc<Queue>> {
        match self {
            Latest::Captured { queue, epoch } => queue
                .upgrade()
                .filter(|q| q.capture.is_capturing() && q.capture_rec().epoch == *epoch),
            _ => None,
        }
    }
}

/// The state one event's handles and its graph nodes share.
pub(crate) struct EventInner {
    pub id: u64,
    pub device: HostDevice,
    pub flags: EventFlags,
    pub native: u32,
    pub report: FlagReport,
    latest: Mutex<Latest>,
    /// The shared state of an interprocess event (created with `INTERPROCESS`, or opened).
    pub(crate) ipc: Option<Arc<IpcState>>,
}

impl std::fmt::Debug for EventInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventInner")
            .field("id", &self.id)
            .field("flags", &self.flags)
            .finish()
    }
}

impl EventInner {
    pub(crate) fn latest(&self) -> Latest {
        lock(&self.latest).clone()
    }

    pub(crate) fn set_latest(&self, l: Latest) {
        *lock(&self.latest) = l;
    }

    pub(crate) fn timing(&self) -> bool {
        !self.flags.contains(EventFlags::DISABLE_TIMING)
    }
}

/// A host event.
#[derive(Debug)]
pub struct HostEvent {
    pub(crate) inner: Arc<EventInner>,
}

impl HostEvent {
    pub(crate) fn create(device: &HostDevice, desc: &EventDesc) -> Result<Self> {
        let t = HOST_FLAGS.event_to_native(desc.flags, desc.policy)?;
        let id = next_id();
        tracing::debug!(event = id, flags = ?t.effective, "create host event");
        let ipc = if t.effective.contains(EventFlags::INTERPROCESS) {
            Some(IpcState::create(id)?)
        } else {
            None
        };
        Ok(Self {
            inner: Arc::new(EventInner {
                id,
                device: device.clone(),
                // Native bits may imply more flags (INTERPROCESS sets DISABLE_TIMING, as CUDA).
                flags: t.effective | HOST_FLAGS.event_from_native(t.native).0,
                native: t.native,
                report: t.report,
                latest: Mutex::new(Latest::Never),
                ipc,
            }),
        })
    }

    /// The event's native bits (see [`crate::conv`]).
    pub fn native_flags(&self) -> u32 {
        self.inner.native
    }

    /// The process-unique event id (also [`Event::as_raw`](xstream_core::Event::as_raw)).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The latest record's slot for a query/sync; `None` when there is nothing to wait for.
    ///
    /// # Errors
    /// A capture error (invalidating that capture) when the latest record is inside a capture
    /// under way (CUDA: `CUDA_ERROR_CAPTURED_EVENT`).
    fn executing_slot(&self, op: &'static str) -> Result<Option<Arc<RecordSlot>>> {
        if let Some(state) = &self.inner.ipc {
            // Records of every process count: the shared state decides.
            return ipc::wait_slot(state);
        }
        let latest = self.inner.latest();
        if let Some(q) = latest.active_capture() {
            q.capture.invalidate();
            return Err(Error::Capture {
                op,
                kind: CaptureErrorKind::Unsupported,
            });
        }
        Ok(match latest {
            Latest::Real(s) => Some(s),
            // A capture that ended left a graph node, not an execution: nothing to wait for.
            Latest::Never | Latest::Captured { .. } => None,
        })
    }

    fn sync(&self, op: &'static str, timeout: Option<Duration>) -> Result<()> {
        let _span = tracing::debug_span!("event_synchronize", event = self.inner.id).entered();
        self.inner.device.shared().check()?;
        let Some(slot) = self.executing_slot(op)? else {
            return Ok(());
        };
        // A timeout too large for `Instant` (e.g. `Duration::MAX`) means no deadline: `now + t`
        // panicked on overflow (found by tests/tests/bad_input.rs).
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        if !slot.wait(deadline, map_event_wait(self.inner.native)) {
            return Err(Error::Timeout(timeout.unwrap_or_default()));
        }
        self.inner.device.shared().check()?;
        slot.status().unwrap_or(Ok(()))
    }
}

impl xstream_core::EventImpl for HostEvent {
    type B = HostBackend;
    type Raw = u64;

    fn device_impl(&self) -> &HostDevice {
        &self.inner.device
    }

    fn flags_impl(&self) -> EventFlags {
        self.inner.flags
    }

    fn report_impl(&self) -> &FlagReport {
        &self.inner.report
    }

    fn record_impl(&self, stream: &HostStream) -> Result<()> {
        stream.record_host_event(self)
    }

    fn query_impl(&self) -> Result<Status> {
        self.inner.device.shared().check()?;
        match self.executing_slot("event_query")? {
            None => Ok(Status::Ready),
            Some(s) => match s.status() {
                None => Ok(Status::Pending),
                Some(r) => r.map(|()| Status::Ready),
            },
        }
    }

    fn synchronize_impl(&self, timeout: Option<Duration>) -> Result<()> {
        self.sync("event_synchronize", timeout)
    }

    fn elapsed_ms_impl(&self, end: &Self) -> Result<f32> {
        if !self.inner.timing() || !end.inner.timing() {
            return Err(Error::TimingDisabled);
        }
        let slot = |e: &HostEvent| match e.inner.latest() {
            Latest::Real(s) => Ok(s),
            Latest::Never | Latest::Captured { .. } => Err(Error::EventNotRecorded),
        };
        let (a, b) = (slot(self)?, slot(end)?);
        match (a.timestamp(), b.timestamp()) {
            (Some(Some(a)), Some(Some(b))) => {
                let ms = if b >= a {
                    (b - a).as_secs_f64() * 1e3
                } else {
                    -((a - b).as_secs_f64() * 1e3)
                };
                Ok(ms as f32)
            }
            (Some(None), _) | (_, Some(None)) => Err(Error::TimingDisabled),
            _ => Err(Error::NotReady),
        }
    }

    fn completed_impl(&self) -> Result<Completion> {
        if let Some(e) = self.inner.device.shared().fault() {
            return Ok(Completion::ready(Err(e)));
        }
        Ok(match self.executing_slot("event_completed")? {
            None => Completion::ready(Ok(())),
            Some(s) => s.completion(),
        })
    }

    fn as_raw_impl(&self) -> u64 {
        self.inner.id
    }
}

/// Host interprocess events: the shared state lives in a file of `/dev/shm` (see
/// [`crate::ipc`]); the handle's payload is that file's name.
impl IpcEventImpl for HostEvent {
    fn export_ipc_impl(&self) -> Result<IpcEventHandle> {
        let Some(state) = &self.inner.ipc else {
            return Err(Error::invalid(format!(
                "host event {} was not created with EventFlags::INTERPROCESS: it cannot be exported",
                self.inner.id
            )));
        };
        IpcEventHandle::new(
            BackendKind::Host,
            self.inner.device.info().ordinal,
            state.name().as_bytes(),
        )
    }

    fn open_ipc_impl(device: &HostDevice, handle: &IpcEventHandle) -> Result<Self> {
        device.shared().check()?;
        let state = IpcState::open(handle.payload())?;
        let t = HOST_FLAGS.event_to_native(EventFlags::INTERPROCESS, TranslationPolicy::Strict)?;
        let id = next_id();
        tracing::debug!(event = id, state = state.name(), "open host IPC event");
        Ok(Self {
            inner: Arc::new(EventInner {
                id,
                device: device.clone(),
                flags: t.effective | HOST_FLAGS.event_from_native(t.native).0,
                native: t.native,
                report: t.report,
                latest: Mutex::new(Latest::Never),
                ipc: Some(state),
            }),
        })
    }
}
