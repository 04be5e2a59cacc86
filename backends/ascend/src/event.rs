//! [`AscendEvent`]: an `aclrtEvent`.
//!
//! Portable events are created with `aclrtCreateEventExWithFlag(ACL_EVENT_SYNC |
//! ACL_EVENT_TIME_LINE)` when the library has it (CUDA-like: a wait uses the record current at
//! enqueue time; usable across captured streams), else `aclrtCreateEventWithFlag` with the same
//! bits. `DISABLE_TIMING` drops `TIME_LINE`; `INTERPROCESS` is `ExWithFlag(ACL_EVENT_IPC)` alone
//! (on chips without IPC events, which the device probes when it opens, strict refuses it with
//! [`Error::UnsupportedFlag`] and best effort drops it and reports the drop); `EXTERNAL` and
//! `DEVICE_USE_ONLY` are `aclrtCreateEventWithFlag` alone. xstream tracks "recorded" itself
//! (ACL reports never-recorded events as complete, and elapsed time on them fails with 507000).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use xstream_core::completion::poll_until;
use xstream_core::{
    ensure_not_in_callback, BackendKind, Capabilities, Completion, Error, Event, EventDesc,
    EventFlags, FlagReport, Result, Status, Stream, TranslationPolicy,
};

use crate::callback::reap;
use crate::conv::ACL_FLAGS;
use crate::device::AscendDevice;
use crate::error::with_timeout;
use crate::result;
use crate::stream::{AscendStream, StreamState};
use crate::sys::{consts, RawEvent};
use crate::AscendBackend;

mod ipc;

pub(crate) struct EventInner {
    device: AscendDevice,
    raw: RawEvent,
    recorded: AtomicBool,
    /// The stream state of the latest record made during a capture.
    captured_on: Mutex<Option<Arc<StreamState>>>,
    /// Whether `captured_on` may be `Some`: lets record and query skip its lock on the common
    /// (never captured) path, so those hot paths take no lock.
    capture_seen: AtomicBool,
    /// The stream and position (see `StreamState::touch`) of the latest record made through
    /// xstream, counted after the record was enqueued: see [`AscendEvent::query`].
    last_record: Mutex<Option<(Weak<StreamState>, u64)>>,
    /// Set once a record of this event was captured: a graph launch records it again without
    /// xstream seeing it, so `last_record` may be stale from then on and is not consulted.
    ever_captured: AtomicBool,
    /// Created by xstream (destroyed with the last handle); `false` for [`AscendEvent::borrow_raw`].
    owned: bool,
}

impl EventInner {
    /// The state of `device`'s event `raw`: `recorded` (an opened or adopted event may have
    /// a record already), destroyed on drop when `owned`.
    fn new(device: &AscendDevice, raw: RawEvent, recorded: bool, owned: bool) -> Arc<Self> {
        Arc::new(Self {
            device: device.clone(),
            raw,
            recorded: AtomicBool::new(recorded),
            captured_on: Mutex::new(None),
            capture_seen: AtomicBool::new(false),
            last_record: Mutex::new(None),
            ever_captured: AtomicBool::new(false),
            owned,
        })
    }
}

impl Drop for EventInner {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let device = self.device.clone();
        let raw = self.raw;
        let destroy = move || {
            let d = &device.inner;
            // Retry once, binding from scratch: one failed call would leak the event for good
            // (found by the fault sweep, tests/tests/fault_sweep.rs).
            for _ in 0..2 {
                if d.bind().is_ok() && result::event::destroy(d.t, raw).is_ok() {
                    break;
                }
                AscendDevice::invalidate_thread_binding();
            }
        };
        if xstream_core::callback::in_callback() {
            reap(Box::new(destroy));
        } else {
            // aclrtDestroyEvent does not block (resources go when the event completes).
            destroy();
        }
    }
}

/// An ACL event.
pub struct AscendEvent {
    inner: Arc<EventInner>,
    flags: EventFlags,
    native: u32,
    report: FlagReport,
}

impl std::fmt::Debug for AscendEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AscendEvent")
            .field("raw", &self.inner.raw)
            .field("flags", &self.flags)
            .field("native", &format_args!("{:#x}", self.native))
            .finish()
    }
}

impl AscendEvent {
    /// Whether the latest record is known complete from xstream's side: a host callback
    /// enqueued after it on its stream ran, or a host wait or query saw that stream idle after
    /// it. Consulted when the runtime says NOT_READY: for a timing event the runtime answers
    /// from the record's completion report, which it collects from the device's completion
    /// queue inside API calls or on its recycle thread (`Event::QueryEventTask`,
    /// `core/src/event/event.cc`), so it can say NOT_READY for a while after the work
    /// finished, even after a callback behind the record ran.
    fn record_known_done(&self) -> bool {
        !self.inner.ever_captured.load(Ordering::Acquire)
            && self
                .last_record()
                .is_some_and(|(stream, pos)| stream.upgrade().is_some_and(|s| s.known_done(pos)))
    }

    /// The latest record's stream and position, for a stream that waits on it to pass on
    /// completion (`StreamState::note_wait`); `None` once the event was captured (a replay
    /// records it without xstream seeing it).
    pub(crate) fn wait_evidence(&self) -> Option<(Weak<StreamState>, u64)> {
        if self.inner.ever_captured.load(Ordering::Acquire) {
            None
        } else {
            self.last_record()
        }
    }

    /// The latest record's stream and position.
    fn last_record(&self) -> Option<(Weak<StreamState>, u64)> {
        self.inner
            .last_record
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// After a wait for the record `rec` returned: it and its stream's earlier work completed.
    fn note_waited(rec: Option<(Weak<StreamState>, u64)>) {
        if let Some(s) = rec.and_then(|(w, pos)| w.upgrade().map(|s| (s, pos))) {
            s.0.note_done(s.1);
        }
    }

    pub(crate) fn create(device: &AscendDevice, desc: &EventDesc) -> Result<Self> {
        let d = &device.inner;
        // Unknown bits and broken rules are refused first, whatever the device can do.
        let mut tr = ACL_FLAGS.event_to_native(desc.flags, desc.policy)?;
        if tr.effective.contains(EventFlags::INTERPROCESS)
            && !d
                .info
                .capabilities
                .contains(Capabilities::INTERPROCESS_EVENTS)
        {
            // The device probed ACL_EVENT_IPC at open and the chip refused it.
            const WHY: &str = "this chip has no IPC events (aclrtCreateEventExWithFlag with \
                               ACL_EVENT_IPC was refused when the device was opened)";
            if desc.policy == TranslationPolicy::Strict {
                return Err(Error::UnsupportedFlag {
                    backend: BackendKind::Ascend,
                    flag: "INTERPROCESS",
                    reason: WHY,
                });
            }
            let dropped = tr.report.dropped;
            tr = ACL_FLAGS.event_to_native(
                tr.effective.difference(EventFlags::INTERPROCESS),
                desc.policy,
            )?;
            tr.report.dropped = dropped;
            tr.report.dropped.push(("INTERPROCESS", WHY));
        }
        d.bind()?;
        let special = consts::ACL_EVENT_EXTERNAL | consts::ACL_EVENT_DEVICE_USE_ONLY;
        let ipc = tr.native & consts::ACL_EVENT_IPC != 0;
        let plain = tr.native & special == 0 && d.t.aclrtCreateEventExWithFlag.is_some();
        let raw = if ipc || plain {
            result::event::create_ex_with_flag(d.t, tr.native)?
        } else {
            result::event::create_with_flag(d.t, tr.native)?
        };
        Ok(Self {
            inner: EventInner::new(device, raw, false, true),
            flags: tr.effective,
            native: tr.native,
            report: tr.report,
        })
    }

    /// Wraps an `aclrtEvent` that somebody else created and owns (a vendor operator library,
    /// code calling ACL directly) as a borrowed event of `device` (ACL-only extension): xstream
    /// records it, makes streams wait on it, queries and synchronizes it, and **never destroys
    /// it**; the owner destroys it after the borrow ends. `native` is the `ACL_EVENT_*` bits it
    /// was created with (`ACL_EVENT_TIME_LINE` decides whether elapsed time is allowed;
    /// `aclrtCreateEvent` events have it). The wrapper cannot know whether the event was
    /// recorded before: it treats it as recorded, so waits and queries ask the runtime, which
    /// reports a never-recorded event as complete.
    ///
    /// # Safety
    /// `raw` must be a live event of `device`'s context, created with `native`, that stays
    /// alive (not destroyed by its owner) for `'a`, including until the work xstream queued on
    /// it through this wrapper completed.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a NULL handle; [`Error::NotPermitted`] inside a callback.
    #[allow(unsafe_code)]
    pub unsafe fn borrow_raw<'a>(
        device: &AscendDevice,
        raw: RawEvent,
        native: u32,
    ) -> Result<xstream_core::Borrowed<'a, Self>> {
        ensure_not_in_callback()?;
        if raw.0.is_null() {
            return Err(Error::invalid("AscendEvent::borrow_raw: NULL aclrtEvent"));
        }
        let flags = if native & consts::ACL_EVENT_TIME_LINE == 0 {
            EventFlags::DISABLE_TIMING
        } else {
            EventFlags::empty()
        };
        Ok(xstream_core::Borrowed::new(Self {
            inner: EventInner::new(device, raw, true, false),
            flags,
            native,
            report: FlagReport::default(),
        }))
    }

    /// Renamed [`AscendEvent::borrow_raw`].
    ///
    /// # Safety
    /// As [`AscendEvent::borrow_raw`].
    ///
    /// # Errors
    /// As [`AscendEvent::borrow_raw`].
    #[allow(unsafe_code)]
    #[deprecated(since = "0.2.0", note = "renamed `borrow_raw`")]
    pub unsafe fn from_raw<'a>(
        device: &AscendDevice,
        raw: RawEvent,
        native: u32,
    ) -> Result<xstream_core::Borrowed<'a, Self>> {
        // SAFETY: the caller keeps `borrow_raw`'s contract.
        unsafe { Self::borrow_raw(device, raw, native) }
    }

    /// The ACL flag bits the event was created with (ACL-only extension).
    pub fn native_flags(&self) -> u32 {
        self.native
    }

    pub(crate) fn device_ref(&self) -> &AscendDevice {
        &self.inner.device
    }
    pub(crate) fn was_recorded(&self) -> bool {
        self.inner.recorded.load(Ordering::Acquire)
    }
    pub(crate) fn as_raw_event(&self) -> RawEvent {
        self.inner.raw
    }
    pub(crate) fn keep_alive(&self) -> Arc<EventInner> {
        Arc::clone(&self.inner)
    }

    /// Gates query/synchronize of an event recorded during a capture that is still running.
    fn gate(&self, op: &'static str) -> Result<()> {
        if !self.inner.capture_seen.load(Ordering::Acquire) {
            return Ok(());
        }
        let g = self
            .inner
            .captured_on
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match g.as_ref() {
            Some(s) if s.capture.is_capturing() => s.capture.gate(op),
            _ => Ok(()),
        }
    }

    fn timing(&self) -> bool {
        self.native & consts::ACL_EVENT_TIME_LINE != 0
    }
}

fn status(code: i32) -> Status {
    if code == consts::ACL_EVENT_RECORDED_STATUS_COMPLETE {
        Status::Ready
    } else {
        Status::Pending
    }
}

impl AscendEvent {
    /// `Event::synchronize_timeout`'s wait: `aclrtSynchronizeEventWithTimeout` where the
    /// runtime has it, else polls the event until `timeout`.
    fn wait_within(&self, d: &crate::device::DeviceInner, timeout: Duration) -> Result<()> {
        if d.t.aclrtSynchronizeEventWithTimeout.is_some() {
            let ms =
                i32::try_from(timeout.as_nanos().div_ceil(1_000_000).max(1)).unwrap_or(i32::MAX);
            return result::event::synchronize_timeout(d.t, self.inner.raw, ms)
                .map_err(|e| d.observe(with_timeout(e, timeout)));
        }
        // `checked_add`: `now + Duration::MAX` panics; too large a timeout is no deadline.
        let end = Instant::now().checked_add(timeout);
        while status(result::event::query_status(d.t, self.inner.raw)?) != Status::Ready {
            if end.is_some_and(|end| Instant::now() >= end) {
                return Err(Error::Timeout(timeout));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Ok(())
    }
}

impl xstream_core::EventImpl for AscendEvent {
    type B = AscendBackend;
    type Raw = RawEvent;

    fn device_impl(&self) -> &AscendDevice {
        &self.inner.device
    }

    fn flags_impl(&self) -> EventFlags {
        self.flags
    }

    fn report_impl(&self) -> &FlagReport {
        &self.report
    }

    fn record_impl(&self, stream: &AscendStream) -> Result<()> {
        if !stream.device().same(&self.inner.device) {
            return Err(Error::WrongDevice(format!(
                "ACL forbids recording an event of device {} on a stream of device {}",
                self.inner.device.inner.ordinal,
                stream.device().inner.ordinal
            )));
        }
        stream.state.capture.gate_enqueue("record")?;
        stream.state.touch();
        let d = &self.inner.device.inner;
        d.bind()?;
        result::event::record(d.t, self.inner.raw, stream.state.raw)?;
        // Counted after the enqueue, so a callback or host wait counted later comes after it.
        let pos = stream.state.touch();
        let capturing = stream.state.capture.is_capturing();
        if capturing {
            self.inner.ever_captured.store(true, Ordering::Release);
        }
        *self
            .inner
            .last_record
            .lock()
            .unwrap_or_else(|e| e.into_inner()) =
            (!capturing).then(|| (Arc::downgrade(&stream.state), pos));
        self.inner.recorded.store(true, Ordering::Release);
        if capturing || self.inner.capture_seen.load(Ordering::Acquire) {
            let mut g = self
                .inner
                .captured_on
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            *g = capturing.then(|| Arc::clone(&stream.state));
            self.inner.capture_seen.store(capturing, Ordering::Release);
        }
        Ok(())
    }

    fn query_impl(&self) -> Result<Status> {
        if !self.was_recorded() {
            return Ok(Status::Ready);
        }
        self.gate("event query")?;
        let d = &self.inner.device.inner;
        d.bind()?;
        let s = status(result::event::query_status(d.t, self.inner.raw).map_err(|e| d.observe(e))?);
        Ok(if s == Status::Pending && self.record_known_done() {
            Status::Ready
        } else {
            s
        })
    }

    fn synchronize_impl(&self, timeout: Option<Duration>) -> Result<()> {
        if !self.was_recorded() {
            return Ok(());
        }
        self.gate("event synchronize")?;
        let d = &self.inner.device.inner;
        d.bind()?;
        let rec = self.last_record();
        match timeout {
            None => result::event::synchronize(d.t, self.inner.raw).map_err(|e| d.observe(e))?,
            Some(t) => self.wait_within(d, t)?,
        }
        Self::note_waited(rec);
        Ok(())
    }

    fn elapsed_ms_impl(&self, end: &Self) -> Result<f32> {
        if !self.timing() || !end.timing() {
            return Err(Error::TimingDisabled);
        }
        if !self.was_recorded() || !end.was_recorded() {
            return Err(Error::EventNotRecorded);
        }
        if self.query()? != Status::Ready || end.query()? != Status::Ready {
            return Err(Error::NotReady);
        }
        let d = &self.inner.device.inner;
        d.bind()?;
        result::event::elapsed(d.t, self.inner.raw, end.inner.raw)
    }

    fn completed_impl(&self) -> Result<Completion> {
        if !self.was_recorded() {
            return Ok(Completion::ready(Ok(())));
        }
        let inner = Arc::clone(&self.inner);
        Ok(poll_until(Box::new(move || {
            let d = &inner.device.inner;
            if let Err(e) = d.bind() {
                return Some(Err(e));
            }
            match result::event::query_status(d.t, inner.raw) {
                Ok(c) if status(c) == Status::Ready => Some(Ok(())),
                Ok(_) => None,
                Err(e) => Some(Err(d.observe(e))),
            }
        })))
    }

    fn as_raw_impl(&self) -> RawEvent {
        self.inner.raw
    }
}
