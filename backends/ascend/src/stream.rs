//! [`AscendStream`]: an `aclrtStream` with xstream's capture state, callbacks and allocator.
//!
//! **Destroy policy.** Dropping an owned stream never blocks: the handle goes to the reaper
//! thread, which makes the context current, `aclrtSynchronizeStream`s it (queued work and
//! callbacks run to completion), unsubscribes it from the report thread, unregisters its
//! allocator, and only then `aclrtDestroyStream`s it. A graph built from a PERSISTENT stream
//! keeps the stream alive until the graph drops. [`AscendStream::destroy_force`] is the ACL-only
//! way to drop queued work (`aclrtDestroyStreamForce`).

use std::any::Any;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use xstream_core::callback::{CallbackSlot, HostCallback, PanicSlot, PendingCallbacks};
use xstream_core::{
    check_range, check_timeout, ensure_not_in_callback, Allocator, BackendKind, Borrowed,
    CaptureCell, CaptureErrorKind, CaptureMode, CaptureStatus, CreationReport, Error, FailureMode,
    FlagReport, Kernel, Ownership, Priority, PriorityOutcome, Readback, Result, Status, Stream,
    StreamAttr, StreamAttrValue, StreamDesc, StreamFlags,
};

use crate::callback::{self, reap, CbData};
use crate::conv::ACL_FLAGS;
use crate::device::{AscendBuffer, AscendDevice};
use crate::error::with_timeout;
use crate::event::AscendEvent;
use crate::graph::AscendGraph;
use crate::result;
use crate::sys::{aclrtStreamAttrValue, consts, RawStream};
use crate::AscendBackend;

mod memop;

type Keep = Box<dyn Any + Send + Sync>;

/// How long stream creation at the device limit waits for queued destroys to finish.
const REAP_FLUSH_LIMIT: Duration = Duration::from_secs(10);

const STYLE_NONE: u8 = 0;
const STYLE_REPORT: u8 = 1;
const STYLE_HOSTFUNC: u8 = 2;

/// State shared by every handle of one native stream (and, for PERSISTENT streams, the
/// graphs built from it).
pub(crate) struct StreamState {
    pub(crate) raw: RawStream,
    pub(crate) capture: CaptureCell,
    pub(crate) panics: Arc<PanicSlot>,
    subscribed: Mutex<Option<u64>>,
    style: AtomicU8,
    keep: Mutex<Vec<Keep>>,
    nodes: AtomicUsize,
    alloc: Mutex<Option<(usize, Arc<dyn Allocator>)>>,
    /// Set for owned and borrowed streams; the reaper releases through it.
    device: Option<AscendDevice>,
    owned: bool,
    /// Set once the handle was force-destroyed.
    gone: std::sync::atomic::AtomicBool,
    /// Host memory of copies whose release callback could not be launched: nobody can tell
    /// when the copy is done, so it is released only after the stream is destroyed.
    orphans: Mutex<Vec<Keep>>,
    /// This stream's callbacks that have not run yet (also tracked by the device, which fails
    /// them on a sticky error); [`AscendStream::destroy_force`] fails only these.
    pub(crate) pending: PendingCallbacks,
    /// Counts enqueues (any work, callback, record or graph launch).
    work: AtomicU64,
    /// The value of `work` when a host wait last saw the stream idle: a query with nothing
    /// enqueued since then is Ready without asking the runtime.
    idle_at: AtomicU64,
    /// The stream's native flags among [`MARKER_SYNC_FLAGS`] (host waits go through an
    /// internal event when non-zero).
    marker_flags: u32,
}

impl StreamState {
    pub(crate) fn new_default() -> Arc<Self> {
        Arc::new(Self::new(RawStream(std::ptr::null_mut()), None, false, 0))
    }

    fn new(raw: RawStream, device: Option<AscendDevice>, owned: bool, native: u32) -> Self {
        Self {
            raw,
            capture: CaptureCell::new(),
            panics: Arc::new(PanicSlot::default()),
            subscribed: Mutex::new(None),
            style: AtomicU8::new(STYLE_NONE),
            keep: Mutex::new(Vec::new()),
            nodes: AtomicUsize::new(0),
            alloc: Mutex::new(None),
            orphans: Mutex::new(Vec::new()),
            pending: PendingCallbacks::default(),
            work: AtomicU64::new(0),
            idle_at: AtomicU64::new(0),
            marker_flags: native & MARKER_SYNC_FLAGS,
            device,
            owned,
            gone: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub(crate) fn take_subscription(&self) -> Option<u64> {
        self.subscribed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Counts an enqueue; during capture keeps `k` alive for the graph.
    fn enqueued(&self, k: Option<Keep>) {
        if self.capture.is_capturing() {
            self.nodes.fetch_add(1, Ordering::Relaxed);
            if let Some(k) = k {
                self.kept(k);
            }
        }
    }

    /// Notes that something was enqueued on the stream.
    pub(crate) fn touch(&self) {
        self.work.fetch_add(1, Ordering::AcqRel);
    }

    /// Keeps `k` alive for the graph being captured, without counting a node.
    fn kept(&self, k: Keep) {
        self.keep.lock().unwrap_or_else(|e| e.into_inner()).push(k);
    }

    pub(crate) fn take_capture(&self) -> (usize, Vec<Keep>) {
        (
            self.nodes.swap(0, Ordering::Relaxed),
            std::mem::take(&mut *self.keep.lock().unwrap_or_else(|e| e.into_inner())),
        )
    }
}

impl Drop for StreamState {
    fn drop(&mut self) {
        let Some(device) = self.device.take() else {
            return;
        };
        tracing::debug!(stream = ?self.raw, owned = self.owned, "acl stream released to the reaper");
        if self.gone.load(Ordering::Acquire) {
            return;
        }
        let raw = self.raw;
        let owned = self.owned;
        let sub = self.take_subscription();
        let alloc = self
            .alloc
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let capturing = self.capture.is_capturing();
        let orphans = std::mem::take(self.orphans.get_mut().unwrap_or_else(|e| e.into_inner()));
        reap(Box::new(move || {
            let d = &device.inner;
            // One failed call here would leak the stream for good (found by the fault sweep,
            // tests/tests/fault_sweep.rs): bind again from scratch before giving up.
            if d.bind().is_err() {
                AscendDevice::invalidate_thread_binding();
                if d.bind().is_err() {
                    // The stream may still run copies into the orphaned memory: never free it.
                    std::mem::forget(orphans);
                    return;
                }
            }
            if capturing && owned {
                let (_, m) = result::model::capture_end(d.t, raw);
                if !m.0.is_null() {
                    let _ = result::model::destroy(d.t, m);
                }
            }
            let _ = result::stream::synchronize(d.t, raw);
            if let Some(tid) = sub {
                let _ = result::callback::unsubscribe(d.t, tid, raw);
            }
            if let Some((obj, _a)) = alloc {
                let _ = result::allocator::unregister(d.t, raw);
                callback::alloc_obj_free(obj);
            }
            if owned && result::stream::destroy(d.t, raw).is_err() {
                // Retry once (transient failure), then force (leaks nothing either way).
                if result::stream::destroy(d.t, raw).is_err() {
                    let _ = result::stream::destroy_force(d.t, raw);
                }
            }
            // The stream is synchronized and destroyed: no copy can touch these any more.
            drop(orphans);
        }));
    }
}

/// Host memory a queued copy may still read or write. Only the callback the runtime runs after
/// the copy frees it; dropped any other way (that callback's launch failed, so nobody can say
/// when the copy is done) it moves to the stream's orphans, released after the stream is
/// synchronized and destroyed, never under the runtime's feet.
struct InFlight<T: Send + Sync + 'static>(Option<(T, Arc<StreamState>)>);

impl<T: Send + Sync + 'static> InFlight<T> {
    fn new(v: T, state: &Arc<StreamState>) -> Self {
        Self(Some((v, Arc::clone(state))))
    }

    fn take(mut self) -> T {
        match self.0.take() {
            Some((v, _)) => v,
            None => unreachable!("an InFlight value is taken once"),
        }
    }
}

impl<T: Send + Sync + 'static> Drop for InFlight<T> {
    fn drop(&mut self) {
        if let Some((v, state)) = self.0.take() {
            state
                .orphans
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Box::new(v));
        }
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// An ACL stream.
pub struct AscendStream {
    device: AscendDevice,
    pub(crate) state: Arc<StreamState>,
    ownership: Ownership,
    id: u64,
    name: Option<String>,
    flags: StreamFlags,
    native_flags: u32,
    /// The priority xstream last set (read back from the runtime when it can say).
    priority: AtomicI32,
    report: CreationReport,
    persistent: bool,
}

/// The stream flags on which ACL's host synchronize returns at once and its query is
/// meaningless (PERSISTENT streams run nothing themselves, so they need no wait): host waits on
/// such a stream go through an internal event recorded on it.
const MARKER_SYNC_FLAGS: u32 = consts::ACL_STREAM_CPU_SCHEDULE | consts::ACL_STREAM_DEVICE_USE_ONLY;

/// How a host wait through an internal event ends.
enum MarkerWait {
    Query,
    Forever,
    Within(Duration),
}

/// Records an internal event on the stream and waits on it (or queries it): the host-side wait for
/// streams whose own synchronize/query the runtime does not honour.
fn marker_wait(
    d: &crate::device::DeviceInner,
    state: &StreamState,
    how: MarkerWait,
) -> Result<Status> {
    let seen = state.work.load(Ordering::Acquire);
    if matches!(how, MarkerWait::Query) && state.idle_at.load(Ordering::Acquire) == seen {
        // Nothing was enqueued since a host wait saw the stream idle.
        return Ok(Status::Ready);
    }
    let ev = result::event::create_with_flag(d.t, consts::ACL_EVENT_SYNC)?;
    let r = (|| {
        result::event::record(d.t, ev, state.raw).map_err(|e| {
            if e.is_sticky() {
                return e;
            }
            // Never fall back to ACL's own synchronize, which would return before the work.
            let flag = if state.marker_flags & consts::ACL_STREAM_DEVICE_USE_ONLY != 0 {
                "DEVICE_USE_ONLY"
            } else {
                "CPU_SCHEDULE"
            };
            Error::unsupported(
                BackendKind::Ascend,
                format!(
                    "a host wait on a stream created with {flag}: ACL's own synchronize and \
                     query say nothing about its work, and the runtime refused the event record \
                     xstream waits on instead ({e})"
                ),
            )
        })?;
        match how {
            MarkerWait::Query => Ok(match result::event::query_status(d.t, ev)? {
                consts::ACL_EVENT_RECORDED_STATUS_COMPLETE => Status::Ready,
                _ => Status::Pending,
            }),
            MarkerWait::Forever => result::event::synchronize(d.t, ev).map(|_| Status::Ready),
            MarkerWait::Within(timeout) => {
                let end = Instant::now().checked_add(timeout);
                while result::event::query_status(d.t, ev)?
                    != consts::ACL_EVENT_RECORDED_STATUS_COMPLETE
                {
                    if end.is_some_and(|end| Instant::now() >= end) {
                        return Err(Error::Timeout(timeout));
                    }
                    std::thread::sleep(Duration::from_micros(100));
                }
                Ok(Status::Ready)
            }
        }
    })();
    // aclrtDestroyEvent does not block; the event goes once its record completed.
    let _ = result::event::destroy(d.t, ev);
    if let Ok(Status::Ready) = r {
        state.idle_at.store(seen, Ordering::Release);
    }
    r.map_err(|e| d.observe(e))
}

impl std::fmt::Debug for AscendStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AscendStream")
            .field("raw", &self.state.raw)
            .field("id", &self.id)
            .field("ownership", &self.ownership)
            .field("flags", &self.flags)
            .finish()
    }
}

fn vendor_id(d: &AscendDevice, raw: RawStream) -> u64 {
    let t = d.inner.t;
    match t.aclrtStreamGetId.map(|_| result::stream::get_id(t, raw)) {
        Some(Ok(id)) if id >= 0 => ((d.inner.ordinal as u64 + 1) << 40) | id as u64,
        _ => NEXT_ID.fetch_add(1, Ordering::Relaxed),
    }
}

impl AscendStream {
    pub(crate) fn create(device: &AscendDevice, desc: &StreamDesc) -> Result<Self> {
        ensure_not_in_callback()?;
        let mut tr = ACL_FLAGS.stream_to_native(desc.flags, desc.policy)?;
        if !desc.flags.contains(StreamFlags::NON_BLOCKING) {
            // Ordering changes: report it, so `is_exact()` is false.
            tr.report.hints.push((
                "blocking (NON_BLOCKING not requested)",
                "ACL streams never synchronize implicitly with the default stream: the stream \
                 is non-blocking; order it against the default stream with events",
            ));
        }
        let d = &device.inner;
        let prio = d.info.priority_range.resolve(desc.priority, desc.policy)?;
        d.bind()?;
        let create = || {
            if tr.native == 0 && prio.native == d.info.priority_range.default {
                result::stream::create(d.t)
            } else {
                let p = u32::try_from(prio.native).map_err(|_| {
                    Error::invalid(format!("ACL priority {} is negative", prio.native))
                })?;
                result::stream_config::create(d.t, p, tr.native)
            }
        };
        let raw = match create() {
            // Dropped streams wait on the reaper to be destroyed: let those destroys finish
            // before reporting that the device is out of streams.
            Err(Error::ResourceExhausted { .. }) if callback::reap_flush(REAP_FLUSH_LIMIT) => {
                d.bind()?;
                create()?
            }
            r => r?,
        };
        let persistent = tr.native & consts::ACL_STREAM_PERSISTENT != 0;
        let state = Arc::new(StreamState::new(raw, Some(device.clone()), true, tr.native));
        if persistent {
            let _ = state.capture.begin();
        }
        let priority = match d.t.aclrtStreamGetPriority {
            Some(_) => result::stream::get_priority(d.t, raw)
                .map(|p| p as i32)
                .unwrap_or(prio.native),
            None => prio.native,
        };
        tracing::debug!(stream = ?raw, name = desc.name.as_deref(), flags = ?tr.effective, priority, "acl stream created");
        Ok(Self {
            id: vendor_id(device, raw),
            device: device.clone(),
            state,
            ownership: Ownership::Owned,
            name: desc.name.clone(),
            flags: tr.effective,
            native_flags: tr.native,
            priority: AtomicI32::new(priority),
            report: CreationReport {
                flags: tr.report,
                priority: prio,
            },
            persistent,
        })
    }

    fn unowned(
        device: &AscendDevice,
        state: Arc<StreamState>,
        ownership: Ownership,
        native: u32,
        priority: i32,
    ) -> Self {
        let (flags, _) = ACL_FLAGS.stream_from_native(native);
        Self {
            id: vendor_id(device, state.raw),
            device: device.clone(),
            persistent: native & consts::ACL_STREAM_PERSISTENT != 0,
            state,
            ownership,
            name: None,
            flags,
            native_flags: native,
            priority: AtomicI32::new(priority),
            report: CreationReport {
                flags: FlagReport::default(),
                priority: PriorityOutcome {
                    requested: Priority::Native(priority),
                    native: priority,
                    clamped_from: None,
                    collapsed_into: None,
                },
            },
        }
    }

    pub(crate) fn default_of(device: &AscendDevice) -> Self {
        let state = Arc::clone(&device.inner.default_state);
        let p = device.inner.info.priority_range.greatest;
        Self::unowned(device, state, Ownership::Default, 0, p)
    }

    /// The stream's native ACL flags (`aclrtStreamGetFlags` when present, else what xstream
    /// passed to `aclrtCreateStreamWithConfig`). ACL-only extension.
    ///
    /// # Errors
    /// Vendor errors.
    pub fn native_flags(&self) -> Result<u32> {
        ensure_not_in_callback()?;
        let d = &self.device.inner;
        match d.t.aclrtStreamGetFlags {
            Some(_) => {
                d.bind()?;
                result::stream::get_flags(d.t, self.state.raw)
            }
            None => Ok(self.native_flags),
        }
    }

    /// Sets the failure mode with `aclrtSetStreamFailureMode` (once per stream; applies to the
    /// whole context). ACL-only extension.
    ///
    /// # Errors
    /// Vendor errors.
    pub fn set_failure_mode(&self, mode: FailureMode) -> Result<()> {
        ensure_not_in_callback()?;
        let d = &self.device.inner;
        d.bind()?;
        let m = match mode {
            FailureMode::Continue => consts::ACL_CONTINUE_ON_FAILURE,
            FailureMode::Stop => consts::ACL_STOP_ON_FAILURE,
        };
        result::stream::set_failure_mode(d.t, self.state.raw, m)
    }

    /// Destroys the stream now with `aclrtDestroyStreamForce`, dropping queued work: this
    /// stream's callbacks not yet run are failed with [`Error::CallbackCancelled`]; other
    /// streams of the device are not touched. ACL-only extension.
    ///
    /// # Errors
    /// [`Error::NotOwned`] for default/borrowed streams; vendor errors.
    pub fn destroy_force(self) -> Result<()> {
        ensure_not_in_callback()?;
        if self.ownership != Ownership::Owned {
            return Err(Error::NotOwned {
                kind: self.kind_name(),
                op: "be force-destroyed",
            });
        }
        let device = self.device.clone();
        let d = &device.inner;
        d.bind()?;
        if let Some(tid) = self.state.take_subscription() {
            let _ = result::callback::unsubscribe(d.t, tid, self.state.raw);
        }
        result::stream::destroy_force(d.t, self.state.raw)?;
        // The handle is gone: keep the state from destroying it again.
        self.state.gone.store(true, Ordering::Release);
        self.state
            .pending
            .fail_all(&Error::CallbackCancelled("stream force-destroyed"));
        Ok(())
    }

    /// The runtime's own view of the capture (`aclmdlRICaptureGetInfo`): status and the model
    /// being built. ACL-only extension.
    ///
    /// # Errors
    /// Vendor errors; [`Error::Unsupported`] without the symbol.
    pub fn native_capture_info(&self) -> Result<(CaptureStatus, crate::sys::RawModel)> {
        ensure_not_in_callback()?;
        let d = &self.device.inner;
        d.bind()?;
        let (st, m) = result::model::capture_info(d.t, self.state.raw)?;
        let st = match st {
            consts::ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE => CaptureStatus::Active,
            consts::ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED => CaptureStatus::Invalidated,
            _ => CaptureStatus::None,
        };
        Ok((st, m))
    }

    /// Enqueues a callback through `aclrtLaunchHostFunc` (the runtime's own thread) instead
    /// of the report thread. ACL forbids mixing both styles on one stream; xstream refuses it
    /// with [`Error::InvalidArgument`]. ACL-only extension.
    ///
    /// # Errors
    /// As [`Stream::enqueue_callback`]; [`Error::Unsupported`] without the symbol.
    pub fn launch_host_func<F>(&self, f: F) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
    {
        ensure_not_in_callback()?;
        self.state.capture.gate("launch_host_func")?;
        self.claim_style(STYLE_HOSTFUNC)?;
        let d = &self.device.inner;
        d.bind()?;
        let slot = CallbackSlot::new(Box::new(f), Arc::clone(&self.state.panics));
        let data = CbData {
            slot: Arc::clone(&slot),
            state: Arc::clone(&self.state),
            t: d.t,
        };
        self.state.touch();
        callback::launch_host_func(d.t, self.state.raw, data)?;
        d.pending.track(&slot);
        self.state.pending.track(&slot);
        Ok(())
    }

    /// Sets the priority with `aclrtSetStreamAttribute(ACL_STREAM_ATTR_PRIORITY)` (CANN 9.1 and
    /// later): refused as [`Error::Unsupported`] without the symbol or when the runtime does
    /// not know the attribute; out of the device range is [`Error::InvalidArgument`].
    fn set_priority(&self, p: i32) -> Result<()> {
        let d = &self.device.inner;
        let range = d.info.priority_range;
        if !range.contains(p) {
            return Err(Error::invalid(format!(
                "native priority {p} is outside the device range [least {}, greatest {}]",
                range.least, range.greatest
            )));
        }
        if p == self.priority() {
            return Ok(());
        }
        let unsupported = || {
            Error::unsupported(
                BackendKind::Ascend,
                "changing a stream's priority after creation (needs aclrtSetStreamAttribute with ACL_STREAM_ATTR_PRIORITY, CANN 9.1 or later)",
            )
        };
        if d.t.aclrtSetStreamAttribute.is_none() || self.state.raw.0.is_null() {
            return Err(unsupported());
        }
        let v = aclrtStreamAttrValue {
            streamPriority: p as u32,
        };
        match result::stream::set_attribute(
            d.t,
            self.state.raw,
            consts::ACL_STREAM_ATTR_PRIORITY,
            v,
        ) {
            Ok(()) => {}
            // A runtime older than the attribute refuses the unknown attribute value.
            Err(e)
                if matches!(e, Error::Unsupported { .. })
                    || matches!(e.native().map(|n| n.code), Some(100_000 | 107_000)) =>
            {
                return Err(unsupported())
            }
            Err(e) => return Err(e),
        }
        let now = match d.t.aclrtStreamGetPriority {
            Some(_) => result::stream::get_priority(d.t, self.state.raw)? as i32,
            None => p,
        };
        self.priority.store(now, Ordering::Relaxed);
        Ok(())
    }

    fn claim_style(&self, want: u8) -> Result<()> {
        match self.state.style.compare_exchange(STYLE_NONE, want, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Ok(()),
            Err(s) if s == want => Ok(()),
            Err(_) => Err(Error::invalid(
                "ACL forbids mixing aclrtLaunchHostFunc and aclrtLaunchCallback callbacks on one stream",
            )),
        }
    }

    fn kind_name(&self) -> &'static str {
        match self.ownership {
            Ownership::Default => "default",
            _ => "borrowed",
        }
    }

    fn check_buf(&self, b: &AscendBuffer) -> Result<()> {
        if b.inner.device.same(&self.device) {
            Ok(())
        } else {
            Err(Error::WrongDevice(format!(
                "buffer of Ascend device {} used on a stream of device {}",
                b.inner.device.inner.ordinal, self.device.inner.ordinal
            )))
        }
    }

    /// Entry of every enqueue: not in a callback, capture not invalidated, context bound.
    fn enter(&self, op: &'static str) -> Result<()> {
        ensure_not_in_callback()?;
        self.state.capture.gate_enqueue(op)?;
        self.state.touch();
        self.device.inner.bind()
    }

    /// Launches an exactly-once callback (report style), subscribing the stream first.
    fn launch_cb(&self, f: HostCallback) -> Result<()> {
        self.launch_report(f, true)
    }

    /// As [`Self::launch_cb`]; `track: false` keeps the callback away from xstream's failure
    /// path, so only the runtime runs it: for callbacks that free memory a queued copy may
    /// still use (failing them early was a use-after-free found by the fault sweep).
    fn launch_report(&self, f: HostCallback, track: bool) -> Result<()> {
        self.claim_style(STYLE_REPORT)?;
        let d = &self.device.inner;
        {
            let mut sub = self
                .state
                .subscribed
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if sub.is_none() {
                let tid = d.reporter_tid()?;
                result::callback::subscribe(d.t, tid, self.state.raw)?;
                *sub = Some(tid);
            }
        }
        let slot = CallbackSlot::new(f, Arc::clone(&self.state.panics));
        let data = CbData {
            slot: Arc::clone(&slot),
            state: Arc::clone(&self.state),
            t: d.t,
        };
        self.state.touch();
        callback::launch(d.t, self.state.raw, data).map_err(|e| d.observe(e))?;
        if track {
            d.pending.track(&slot);
            self.state.pending.track(&slot);
        }
        Ok(())
    }

    /// Keeps `k` alive until the stream got past this point (graph keep-alive in capture).
    fn keep_until_done(&self, k: Keep) -> Result<()> {
        if self.state.capture.is_capturing() {
            // The write itself was counted as the node; this only keeps its memory alive.
            self.state.kept(k);
            Ok(())
        } else {
            let k = InFlight::new(k, &self.state);
            self.launch_report(Box::new(move |_| drop(k.take())), false)
        }
    }

    fn timeout_ms(d: Duration) -> i32 {
        let ms = d.as_nanos().div_ceil(1_000_000).max(1);
        i32::try_from(ms).unwrap_or(i32::MAX)
    }
}

impl Stream for AscendStream {
    type B = AscendBackend;
    type Raw = RawStream;

    fn device(&self) -> &AscendDevice {
        &self.device
    }
    fn id(&self) -> u64 {
        self.id
    }
    fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
    fn flags(&self) -> StreamFlags {
        self.flags
    }
    fn priority(&self) -> i32 {
        self.priority.load(Ordering::Relaxed)
    }
    fn report(&self) -> &CreationReport {
        &self.report
    }
    fn ownership(&self) -> Ownership {
        self.ownership
    }

    fn query(&self) -> Result<Status> {
        ensure_not_in_callback()?;
        if self.persistent {
            return Ok(Status::Ready);
        }
        self.state.capture.gate("query")?;
        let d = &self.device.inner;
        d.bind()?;
        if self.state.marker_flags != 0 {
            return marker_wait(d, &self.state, MarkerWait::Query);
        }
        match result::stream::query(d.t, self.state.raw).map_err(|e| d.observe(e))? {
            consts::ACL_STREAM_STATUS_COMPLETE => Ok(Status::Ready),
            _ => Ok(Status::Pending),
        }
    }

    fn synchronize(&self) -> Result<()> {
        ensure_not_in_callback()?;
        let _span = tracing::trace_span!("stream_synchronize", stream = ?self.state.raw, name = self.name.as_deref()).entered();
        if !self.persistent {
            self.state.capture.gate("synchronize")?;
            let d = &self.device.inner;
            d.bind()?;
            if self.state.marker_flags != 0 {
                marker_wait(d, &self.state, MarkerWait::Forever)?;
            } else {
                result::stream::synchronize(d.t, self.state.raw).map_err(|e| d.observe(e))?;
            }
        }
        self.state.panics.take()
    }

    fn synchronize_timeout(&self, timeout: Duration) -> Result<()> {
        ensure_not_in_callback()?;
        check_timeout(timeout)?;
        if !self.persistent {
            self.state.capture.gate("synchronize_timeout")?;
            let d = &self.device.inner;
            d.bind()?;
            if self.state.marker_flags != 0 {
                marker_wait(d, &self.state, MarkerWait::Within(timeout))?;
            } else if d.t.aclrtSynchronizeStreamWithTimeout.is_some() {
                result::stream::synchronize_timeout(d.t, self.state.raw, Self::timeout_ms(timeout))
                    .map_err(|e| d.observe(with_timeout(e, timeout)))?;
            } else {
                // `checked_add`: `now + Duration::MAX` panics; too large is no deadline.
                let end = Instant::now().checked_add(timeout);
                while result::stream::query(d.t, self.state.raw).map_err(|e| d.observe(e))?
                    != consts::ACL_STREAM_STATUS_COMPLETE
                {
                    if end.is_some_and(|end| Instant::now() >= end) {
                        return Err(Error::Timeout(timeout));
                    }
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
        }
        self.state.panics.take()
    }

    fn wait_event(&self, event: &AscendEvent) -> Result<()> {
        self.enter("wait_event")?;
        if !event.device_ref().same(&self.device) {
            return Err(Error::WrongDevice(format!(
                "ACL forbids cross-device waits: event of device {} on a stream of device {}",
                event.device_ref().inner.ordinal,
                self.device.inner.ordinal
            )));
        }
        if !event.was_recorded() {
            return Ok(());
        }
        let d = &self.device.inner;
        result::stream::wait_event(d.t, self.state.raw, event.as_raw_event())?;
        // Outside capture nothing needs the event alive (aclrtDestroyEvent is safe before the
        // wait completes), so no keep-alive is boxed: the wait does not allocate. A captured
        // graph keeps the event for its replays.
        if self.state.capture.is_capturing() {
            self.state.enqueued(Some(Box::new(event.keep_alive())));
        }
        Ok(())
    }

    fn enqueue_callback(&self, f: HostCallback) -> Result<()> {
        ensure_not_in_callback()?;
        self.state.capture.gate("host_callback")?;
        self.device.inner.bind()?;
        self.launch_cb(f)
    }

    fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        ensure_not_in_callback()?;
        match self.ownership {
            Ownership::Owned => {}
            _ => {
                return Err(Error::Capture {
                    op: "begin_capture",
                    kind: CaptureErrorKind::NotCapturable,
                })
            }
        }
        let d = &self.device.inner;
        result::opt(d.t.aclmdlRICaptureBegin, "aclmdlRICaptureBegin")?;
        self.state.capture.begin()?;
        let m = match mode {
            CaptureMode::Global => consts::ACL_MODEL_RI_CAPTURE_MODE_GLOBAL,
            CaptureMode::ThreadLocal => consts::ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL,
            CaptureMode::Relaxed => consts::ACL_MODEL_RI_CAPTURE_MODE_RELAXED,
        };
        let r = d
            .bind()
            .and_then(|_| result::model::capture_begin(d.t, self.state.raw, m));
        if let Err(e) = r {
            let _ = self.state.capture.end();
            return Err(e);
        }
        self.state.take_capture();
        Ok(())
    }

    fn end_capture(&self) -> Result<AscendGraph> {
        ensure_not_in_callback()?;
        let d = &self.device.inner;
        d.bind()?;
        if self.persistent {
            self.state.capture.end()?;
            let (nodes, keep) = self.state.take_capture();
            let r = AscendGraph::build_persistent(&self.device, &self.state, nodes, keep);
            // The stream keeps recording (it stays PERSISTENT).
            let _ = self.state.capture.begin();
            return r;
        }
        let cell = self.state.capture.end();
        if matches!(
            cell,
            Err(Error::Capture {
                kind: CaptureErrorKind::NotCapturing,
                ..
            })
        ) {
            return Err(cell.unwrap_err());
        }
        let (nodes, keep) = self.state.take_capture();
        let (r, model) = result::model::capture_end(d.t, self.state.raw);
        let destroy = |m: crate::sys::RawModel| {
            if !m.0.is_null() {
                let _ = result::model::destroy(d.t, m);
            }
        };
        if let Err(e) = cell {
            destroy(model);
            return Err(e);
        }
        if let Err(e) = r {
            destroy(model);
            // The call itself may have failed with the runtime still capturing: end once more
            // so the stream is usable at once and can be destroyed (a leak found by the fault
            // sweep). Outside a capture this is a harmless `STREAM_NOT_CAPTURED`.
            let (_, again) = result::model::capture_end(d.t, self.state.raw);
            destroy(again);
            return Err(match e {
                Error::Capture { .. } => Error::Capture {
                    op: "end_capture",
                    kind: CaptureErrorKind::Invalidated,
                },
                other => other,
            });
        }
        Ok(AscendGraph::new(&self.device, model, nodes, keep, None))
    }

    fn capture_status(&self) -> CaptureStatus {
        self.state.capture.status()
    }

    fn attribute(&self, attr: StreamAttr) -> Result<StreamAttrValue> {
        ensure_not_in_callback()?;
        let d = &self.device.inner;
        match attr {
            StreamAttr::Priority => {
                if d.t.aclrtStreamGetPriority.is_some() && !self.state.raw.0.is_null() {
                    d.bind()?;
                    let p = result::stream::get_priority(d.t, self.state.raw)? as i32;
                    self.priority.store(p, Ordering::Relaxed);
                }
                Ok(StreamAttrValue::Priority(self.priority()))
            }
            StreamAttr::FailureMode => {
                d.bind()?;
                let v = result::stream::get_attribute(
                    d.t,
                    self.state.raw,
                    consts::ACL_STREAM_ATTR_FAILURE_MODE,
                )?;
                let m = attr_u64(v);
                Ok(StreamAttrValue::FailureMode(
                    if m == consts::ACL_STOP_ON_FAILURE {
                        FailureMode::Stop
                    } else {
                        FailureMode::Continue
                    },
                ))
            }
            StreamAttr::UserTag => {
                d.bind()?;
                let v = result::stream::get_attribute(
                    d.t,
                    self.state.raw,
                    consts::ACL_STREAM_ATTR_USER_CUSTOM_TAG,
                )?;
                Ok(StreamAttrValue::UserTag(attr_u32(v)))
            }
            StreamAttr::SyncPolicy | StreamAttr::AccessPolicyWindow => Err(Error::unsupported(
                BackendKind::Ascend,
                format!("stream attribute {attr:?} (CUDA-only)"),
            )),
        }
    }

    fn set_attribute(&self, value: StreamAttrValue) -> Result<()> {
        ensure_not_in_callback()?;
        value.validate()?;
        if self.ownership == Ownership::Borrowed {
            return Err(Error::NotOwned {
                kind: "borrowed",
                op: "set attributes",
            });
        }
        let d = &self.device.inner;
        d.bind()?;
        match value {
            StreamAttrValue::FailureMode(m) => {
                let mode = match m {
                    FailureMode::Continue => consts::ACL_CONTINUE_ON_FAILURE,
                    FailureMode::Stop => consts::ACL_STOP_ON_FAILURE,
                };
                if d.t.aclrtSetStreamAttribute.is_some() {
                    result::stream::set_attribute(
                        d.t,
                        self.state.raw,
                        consts::ACL_STREAM_ATTR_FAILURE_MODE,
                        aclrtStreamAttrValue { failureMode: mode },
                    )
                } else {
                    result::stream::set_failure_mode(d.t, self.state.raw, mode)
                }
            }
            StreamAttrValue::UserTag(tag) => result::stream::set_attribute(
                d.t,
                self.state.raw,
                consts::ACL_STREAM_ATTR_USER_CUSTOM_TAG,
                u32_attr(tag),
            ),
            StreamAttrValue::Priority(p) => self.set_priority(p),
            StreamAttrValue::SyncPolicy(_) | StreamAttrValue::AccessPolicyWindow(_) => {
                Err(Error::unsupported(
                    BackendKind::Ascend,
                    format!("stream attribute {:?} (CUDA-only)", value.attr()),
                ))
            }
        }
    }

    fn copy_attributes_from(&self, src: &Self) -> Result<()> {
        ensure_not_in_callback()?;
        for a in [StreamAttr::FailureMode, StreamAttr::UserTag] {
            match src.attribute(a) {
                Ok(StreamAttrValue::FailureMode(FailureMode::Continue)) => {}
                Ok(v) => self.set_attribute(v)?,
                Err(Error::Unsupported { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn set_allocator(&self, allocator: Option<Arc<dyn Allocator>>) -> Result<()> {
        ensure_not_in_callback()?;
        if self.ownership != Ownership::Owned {
            return Err(Error::NotOwned {
                kind: self.kind_name(),
                op: "register an allocator",
            });
        }
        let d = &self.device.inner;
        d.bind()?;
        let mut g = self.state.alloc.lock().unwrap_or_else(|e| e.into_inner());
        match allocator {
            Some(a) => {
                let obj = callback::alloc_obj_into_raw(Arc::clone(&a));
                if let Err(e) =
                    result::allocator::register(d.t, self.state.raw, obj, &callback::alloc_funcs())
                {
                    callback::alloc_obj_free(obj as usize);
                    return Err(e);
                }
                if let Some((old, _)) = g.replace((obj as usize, a)) {
                    callback::alloc_obj_free(old);
                }
            }
            None => {
                result::allocator::unregister(d.t, self.state.raw)?;
                if let Some((old, _)) = g.take() {
                    callback::alloc_obj_free(old);
                }
            }
        }
        Ok(())
    }

    fn allocator(&self) -> Result<Option<Arc<dyn Allocator>>> {
        ensure_not_in_callback()?;
        let d = &self.device.inner;
        let g = self.state.alloc.lock().unwrap_or_else(|e| e.into_inner());
        if self.state.raw.0.is_null() || d.t.aclrtAllocatorGetByStream.is_none() {
            return Ok(g.as_ref().map(|(_, a)| Arc::clone(a)));
        }
        d.bind()?;
        let obj = match result::allocator::get_by_stream(d.t, self.state.raw) {
            Ok(o) => o,
            Err(_) if g.is_none() => return Ok(None),
            Err(e) => return Err(e),
        };
        match g.as_ref() {
            None if obj.is_null() => Ok(None),
            Some((mine, _)) if *mine == obj as usize => Ok(callback::alloc_obj_get(obj)),
            _ => Err(Error::invalid(
                "aclrtAllocatorGetByStream returned an allocator xstream did not register on this stream",
            )),
        }
    }

    fn memset(&self, buf: &AscendBuffer, offset: usize, len: usize, value: u8) -> Result<()> {
        self.enter("memset")?;
        self.check_buf(buf)?;
        check_range("memset", buf.inner.len, offset, len)?;
        let d = &self.device.inner;
        result::memory::memset_async(d.t, buf.inner.ptr, offset, len, value, self.state.raw)?;
        self.state.enqueued(Some(Box::new(Arc::clone(&buf.inner))));
        Ok(())
    }

    fn write(&self, dst: &AscendBuffer, offset: usize, data: Vec<u8>) -> Result<()> {
        self.enter("write")?;
        self.check_buf(dst)?;
        check_range("write", dst.inner.len, offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        let d = &self.device.inner;
        if self.state.capture.is_capturing() {
            // ACL: host memory in a captured asynchronous copy must be page-locked. Stage the
            // bytes in `aclrtMallocHost` memory, which the graph keeps for its replays.
            let stage = result::memory::HostAlloc::new(d.t, d.ordinal, data.len())?;
            stage.fill(&data);
            result::memory::memcpy(
                d.t,
                result::memory::at(dst.inner.ptr, offset),
                xstream_core::HostAllocation::as_ptr(&stage)
                    .cast_const()
                    .cast(),
                data.len(),
                consts::ACL_MEMCPY_HOST_TO_DEVICE,
                self.state.raw,
            )?;
            self.state.enqueued(Some(Box::new(Arc::clone(&dst.inner))));
            return self.keep_until_done(Box::new((stage, Arc::clone(&dst.inner))));
        }
        // `data` (moved into the keep-alive below) and the buffer stay alive until the copy ran.
        result::memory::memcpy(
            d.t,
            result::memory::at(dst.inner.ptr, offset),
            data.as_ptr().cast(),
            data.len(),
            consts::ACL_MEMCPY_HOST_TO_DEVICE,
            self.state.raw,
        )?;
        self.state.enqueued(Some(Box::new(Arc::clone(&dst.inner))));
        self.keep_until_done(Box::new((data, Arc::clone(&dst.inner))))
    }

    fn enqueue_copy_to_device(
        &self,
        src: xstream_core::HostSpan,
        dst: &AscendBuffer,
        dst_offset: usize,
    ) -> Result<()> {
        self.enter("copy_to_device")?;
        self.check_buf(dst)?;
        check_range("copy_to_device", dst.inner.len, dst_offset, src.len())?;
        result::memory::memcpy(
            self.device.inner.t,
            result::memory::at(dst.inner.ptr, dst_offset),
            src.as_ptr().cast_const().cast(),
            src.len(),
            consts::ACL_MEMCPY_HOST_TO_DEVICE,
            self.state.raw,
        )?;
        self.state.enqueued(Some(Box::new(Arc::clone(&dst.inner))));
        self.keep_until_done(Box::new((src, Arc::clone(&dst.inner))))
    }

    fn enqueue_copy_to_host(
        &self,
        src: &AscendBuffer,
        src_offset: usize,
        dst: xstream_core::HostSpan,
    ) -> Result<()> {
        self.enter("copy_to_host")?;
        self.check_buf(src)?;
        check_range("copy_to_host", src.inner.len, src_offset, dst.len())?;
        result::memory::memcpy(
            self.device.inner.t,
            dst.as_ptr().cast(),
            result::memory::at(src.inner.ptr, src_offset).cast_const(),
            dst.len(),
            consts::ACL_MEMCPY_DEVICE_TO_HOST,
            self.state.raw,
        )?;
        self.state.enqueued(Some(Box::new(Arc::clone(&src.inner))));
        self.keep_until_done(Box::new((dst, Arc::clone(&src.inner))))
    }

    fn free_async(&self, buf: AscendBuffer) -> Result<()> {
        ensure_not_in_callback()?;
        self.check_buf(&buf)?;
        drop(buf);
        Ok(())
    }

    fn read(&self, src: &AscendBuffer, offset: usize, len: usize) -> Result<Readback> {
        ensure_not_in_callback()?;
        self.state.capture.gate("read")?;
        self.device.inner.bind()?;
        self.check_buf(src)?;
        check_range("read", src.inner.len, offset, len)?;
        let (rb, fill) = Readback::new();
        let mut host = vec![0u8; len];
        let d = &self.device.inner;
        if len > 0 {
            result::memory::memcpy(
                d.t,
                host.as_mut_ptr().cast(),
                result::memory::at(src.inner.ptr, offset),
                len,
                consts::ACL_MEMCPY_DEVICE_TO_HOST,
                self.state.raw,
            )?;
        }
        let keep = Arc::clone(&src.inner);
        let host = InFlight::new(host, &self.state);
        self.launch_report(
            Box::new(move |r| {
                drop(keep);
                fill.fill(r.map(|_| host.take()));
            }),
            false,
        )?;
        Ok(rb)
    }

    fn copy(
        &self,
        src: &AscendBuffer,
        src_offset: usize,
        dst: &AscendBuffer,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        self.enter("copy")?;
        self.check_buf(src)?;
        self.check_buf(dst)?;
        check_range("copy source", src.inner.len, src_offset, len)?;
        check_range("copy destination", dst.inner.len, dst_offset, len)?;
        if len == 0 {
            return Ok(());
        }
        let d = &self.device.inner;
        result::memory::memcpy(
            d.t,
            result::memory::at(dst.inner.ptr, dst_offset),
            result::memory::at(src.inner.ptr, src_offset),
            len,
            consts::ACL_MEMCPY_DEVICE_TO_DEVICE,
            self.state.raw,
        )?;
        self.state.enqueued(Some(Box::new((
            Arc::clone(&src.inner),
            Arc::clone(&dst.inner),
        ))));
        Ok(())
    }

    fn launch(&self, kernel: Kernel<'_, AscendBuffer>) -> Result<()> {
        self.enter("launch")?;
        let d = &self.device.inner;
        let no_kernels = || {
            Error::unsupported(
                BackendKind::Ascend,
                "built-in kernels (no NPU kernel binaries are shipped yet; only the simulator's xsim* symbols provide them)",
            )
        };
        match kernel {
            Kernel::Delay(t) => {
                if d.t.xsimLaunchDelay.is_none() {
                    return Err(no_kernels());
                }
                result::xsim::delay(
                    d.t,
                    self.state.raw,
                    u64::try_from(t.as_micros()).unwrap_or(u64::MAX),
                )?;
                self.state.enqueued(None);
            }
            Kernel::Lcg { buf, rounds } => {
                if d.t.xsimLaunchLcg.is_none() {
                    return Err(no_kernels());
                }
                self.check_buf(buf)?;
                if buf.inner.len % 4 != 0 {
                    return Err(Error::invalid("Lcg buffer length must be a multiple of 4"));
                }
                result::xsim::lcg(
                    d.t,
                    self.state.raw,
                    buf.inner.ptr,
                    buf.inner.len / 4,
                    rounds,
                )?;
                self.state.enqueued(Some(Box::new(Arc::clone(&buf.inner))));
            }
            Kernel::Fault => {
                if d.t.xsimLaunchFault.is_none() {
                    return Err(Error::unsupported(
                        BackendKind::Ascend,
                        "Kernel::Fault (simulator-only)",
                    ));
                }
                result::xsim::fault(d.t, self.state.raw, crate::FAULT_CODE)?;
                self.state.enqueued(None);
            }
        }
        Ok(())
    }

    // ---- Stream memory operations (see `stream::memop`) ----

    fn wait_value32(
        &self,
        _buf: &AscendBuffer,
        _offset: usize,
        _value: u32,
        _cond: xstream_core::WaitCondition,
    ) -> Result<()> {
        Err(memop::no_32bit("wait_value32"))
    }

    fn wait_value64(
        &self,
        buf: &AscendBuffer,
        offset: usize,
        value: u64,
        cond: xstream_core::WaitCondition,
    ) -> Result<()> {
        memop::value64(self, "wait_value64", buf, offset, value, Some(cond))
    }

    fn write_value32(&self, _buf: &AscendBuffer, _offset: usize, _value: u32) -> Result<()> {
        Err(memop::no_32bit("write_value32"))
    }

    fn write_value64(&self, buf: &AscendBuffer, offset: usize, value: u64) -> Result<()> {
        memop::value64(self, "write_value64", buf, offset, value, None)
    }

    fn as_raw(&self) -> RawStream {
        self.state.raw
    }

    #[allow(unsafe_code)]
    unsafe fn from_raw<'a>(device: &AscendDevice, raw: RawStream) -> Result<Borrowed<'a, Self>> {
        ensure_not_in_callback()?;
        let d = &device.inner;
        d.bind()?;
        if raw.0.is_null() {
            return Ok(Borrowed::new(Self::default_of(device)));
        }
        let native = match d.t.aclrtStreamGetFlags {
            Some(_) => result::stream::get_flags(d.t, raw)?,
            None => 0,
        };
        let prio = match d.t.aclrtStreamGetPriority {
            Some(_) => result::stream::get_priority(d.t, raw)? as i32,
            None => d.info.priority_range.default,
        };
        let state = Arc::new(StreamState::new(raw, Some(device.clone()), false, native));
        if native & consts::ACL_STREAM_PERSISTENT != 0 {
            let _ = state.capture.begin();
        }
        Ok(Borrowed::new(Self::unowned(
            device,
            state,
            Ownership::Borrowed,
            native,
            prio,
        )))
    }
}

fn attr_u64(v: aclrtStreamAttrValue) -> u64 {
    result::attr_u64(v)
}
fn attr_u32(v: aclrtStreamAttrValue) -> u32 {
    result::attr_u32(v)
}
fn u32_attr(x: u32) -> aclrtStreamAttrValue {
    aclrtStreamAttrValue {
        reserve: [x, 0, 0, 0],
    }
}
