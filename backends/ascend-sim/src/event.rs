//! Events: the `Event` object (records, completion, timestamps), creation with each flag rule,
//! record / reset / query / synchronize, elapsed time and timestamps, and
//! `aclrtStreamWaitEvent` (including a stream joining a capture through an event).

use crate::capture::*;
use crate::codes::*;
use crate::config::*;
use crate::device::*;
use crate::error::*;
use crate::registry::*;
use crate::stream::*;
use crate::task::*;
use std::ffi::c_void;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::sync::Condvar;
use std::sync::Mutex;
use std::time::Instant;

static NEXT_EVENT_ID: AtomicU32 = AtomicU32::new(1);

/// Event kind (which creator made it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum EvKind {
    Default,
    Legacy,
    Ex,
}

#[derive(Default)]
pub(crate) struct EvState {
    pub(crate) record_gen: u64,
    /// Records enqueued and not yet complete. Records on different streams may complete out
    /// of order, so a wait targets one record, not "the highest completed".
    pub(crate) pending: std::collections::BTreeSet<u64>,
    /// The record whose completion time `ts_ns` holds.
    pub(crate) ts_gen: u64,
    pub(crate) recorded: bool,
    pub(crate) ts_ns: Option<u64>,
    pub(crate) capture: Option<Arc<Capture>>,
    /// The latest record whose completion the runtime has collected (see
    /// [`Event::query_complete`]).
    pub(crate) collected: u64,
    /// The stream (its process-unique key) of the latest record.
    pub(crate) record_stream: i32,
}

impl EvState {
    /// Whether the most recent record has completed (true before any record).
    pub(crate) fn latest_done(&self) -> bool {
        !self.pending.contains(&self.record_gen)
    }
}

/// An event.
pub(crate) struct Event {
    pub(crate) id: u32,
    pub(crate) flags: u32,
    pub(crate) kind: EvKind,
    pub(crate) ctx: Arc<Context>,
    pub(crate) st: Mutex<EvState>,
    pub(crate) cv: Condvar,
}

impl Event {
    pub(crate) fn complete(&self, gen: u64) {
        crate::ipc_event::on_complete(self, gen);
        let mut g = lock(&self.st);
        g.pending.remove(&gen);
        if gen >= g.ts_gen {
            g.ts_gen = gen;
            g.ts_ns = Some(now_ns());
        }
        self.cv.notify_all();
    }
    pub(crate) fn is_complete(&self) -> bool {
        if let Some(done) = crate::ipc_event::shared_complete(self) {
            return done;
        }
        lock(&self.st).latest_done()
    }
    /// The runtime's answer to a status query. On the STARS chips (product A2: 910B / 910C /
    /// 950), for a timing event whose latest record ran on the device but whose completion the
    /// runtime has not collected from the completion queue yet, the runtime answers NOT_READY
    /// and starts a collection (`Event::QueryEventTask`, `core/src/event/event.cc`: the time
    /// stamp is still unset); it collects inside the call or on its recycle thread, so the
    /// NOT_READY answers can go on for a while. The simulator answers NOT_READY once and
    /// collects. Stream, event and device synchronize collect the stream's completed records
    /// (the runtime also collects on other paths, which the simulator does not model). Other
    /// products answer from the device state.
    pub(crate) fn query_complete(&self) -> bool {
        let mut g = lock(&self.st);
        if !g.latest_done() {
            return false;
        }
        if g.record_gen == 0
            || g.collected >= g.record_gen
            || !self.has_timeline()
            || crate::config::product() != crate::config::Product::A2
        {
            return true;
        }
        g.collected = g.record_gen;
        false
    }
    /// Marks the latest record's completion collected, if it has completed.
    pub(crate) fn collect(&self) {
        let mut g = lock(&self.st);
        if g.latest_done() {
            g.collected = g.record_gen;
        }
    }
    pub(crate) fn has_timeline(&self) -> bool {
        self.kind == EvKind::Default || self.flags & ACL_EVENT_TIME_LINE != 0
    }
    /// The active capture this event was recorded in, if any.
    pub(crate) fn active_capture(&self) -> Option<Arc<Capture>> {
        let g = lock(&self.st);
        g.capture.clone().filter(|c| lock(&c.st).active)
    }
}

/// Registers a new event (checks the per-device limit).
pub(crate) fn new_event(ctx: &Arc<Context>, flags: u32, kind: EvKind) -> R<Arc<Event>> {
    let mut r = lock(reg());
    let n = r.event_count.entry(ctx.device).or_insert(0);
    if *n >= max_events() {
        return err(ACL_ERROR_RT_NO_EVENT_RESOURCE, "event limit reached");
    }
    *n += 1;
    let e = Arc::new(Event {
        id: NEXT_EVENT_ID.fetch_add(1, SeqCst),
        flags,
        kind,
        ctx: ctx.clone(),
        st: Mutex::new(EvState::default()),
        cv: Condvar::new(),
    });
    r.events.insert(Arc::as_ptr(&e) as usize, e.clone());
    Ok(e)
}

fn create_event(out: *mut *mut c_void, flags: u32, kind: EvKind) -> R {
    non_null(out, "event")?;
    let ctx = cur_ctx()?;
    let e = new_event(&ctx, flags, kind)?;
    // SAFETY: checked non-NULL; caller contract.
    unsafe { put(out, Arc::as_ptr(&e) as *mut c_void) }
}

/// `aclError aclrtCreateEvent(aclrtEvent* event)`: flags `0x4|0x8|0x2` (timeline on).
///
/// # Safety
/// `event` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateEvent(event: *mut *mut c_void) -> i32 {
    ffi("aclrtCreateEvent", true, || {
        create_event(
            event,
            ACL_EVENT_DDSYNC | ACL_EVENT_TIME_LINE | ACL_EVENT_CAPTURE_STREAM_PROGRESS,
            EvKind::Default,
        )
    })
}

/// `aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag)`: mask 0x3F,
/// DEVICE_USE_ONLY/EXTERNAL alone, 0 → 107000.
///
/// # Safety
/// `event` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateEventWithFlag(event: *mut *mut c_void, flag: u32) -> i32 {
    ffi("aclrtCreateEventWithFlag", true, || {
        non_null(event, "event")?;
        let alone = ACL_EVENT_DEVICE_USE_ONLY | ACL_EVENT_EXTERNAL;
        if flag == 0 || flag & !0x3F != 0 || (flag & alone != 0 && flag.count_ones() != 1) {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("invalid event flag {flag:#x}"),
            );
        }
        create_event(event, flag, EvKind::Legacy)
    })
}

/// `aclError aclrtCreateEventExWithFlag(aclrtEvent* event, uint32_t flag)`: mask 0x4F, IPC
/// alone (and then 207000: the simulated chip has no IPC events), 0 → 107000.
///
/// # Safety
/// `event` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateEventExWithFlag(event: *mut *mut c_void, flag: u32) -> i32 {
    ffi("aclrtCreateEventExWithFlag", true, || {
        non_null(event, "event")?;
        if flag == 0 || flag & !0x4F != 0 || (flag & ACL_EVENT_IPC != 0 && flag != ACL_EVENT_IPC) {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("invalid event flag {flag:#x}"),
            );
        }
        if flag == ACL_EVENT_IPC && !crate::ipc_shm::ipc_events_supported() {
            return err(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                "IPC events unsupported on the simulated chip",
            );
        }
        create_event(event, flag, EvKind::Ex)
    })
}

/// `aclError aclrtDestroyEvent(aclrtEvent event)`: does not block.
///
/// # Safety
/// `event` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyEvent(event: *mut c_void) -> i32 {
    ffi("aclrtDestroyEvent", true, || {
        let e = event_of(event)?;
        crate::ipc_event::forget(event as usize);
        let mut r = lock(reg());
        if r.events.remove(&(event as usize)).is_some() {
            if let Some(n) = r.event_count.get_mut(&e.ctx.device) {
                *n = n.saturating_sub(1);
            }
        }
        Ok(())
    })
}

/// `aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)`.
///
/// # Safety
/// Handles are only used as lookup keys.
#[no_mangle]
pub unsafe extern "C" fn aclrtRecordEvent(event: *mut c_void, stream: *mut c_void) -> i32 {
    ffi("aclrtRecordEvent", true, || {
        let e = event_of(event)?;
        let s = enqueue_stream(stream)?;
        if e.ctx.device != s.ctx.device {
            return err(
                ACL_ERROR_RT_STREAM_CONTEXT,
                "event and stream on different devices",
            );
        }
        s.push(Task::Record { ev: e, gen: 0 })
    })
}

/// `aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream)`: legacy events only
/// (Ex events → 207000).
///
/// # Safety
/// Handles are only used as lookup keys.
#[no_mangle]
pub unsafe extern "C" fn aclrtResetEvent(event: *mut c_void, stream: *mut c_void) -> i32 {
    ffi("aclrtResetEvent", true, || {
        let e = event_of(event)?;
        let s = enqueue_stream(stream)?;
        if e.kind == EvKind::Ex {
            return err(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "reset of an Ex event");
        }
        if e.ctx.device != s.ctx.device {
            return err(
                ACL_ERROR_RT_STREAM_CONTEXT,
                "event and stream on different devices",
            );
        }
        s.push(Task::Reset(e))
    })
}

/// `aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event)`: the wait uses the
/// record current at enqueue time; never-recorded events do not block.
///
/// # Safety
/// Handles are only used as lookup keys.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamWaitEvent(stream: *mut c_void, event: *mut c_void) -> i32 {
    ffi("aclrtStreamWaitEvent", true, || {
        let e = event_of(event)?;
        let s = enqueue_stream(stream)?;
        if e.ctx.device != s.ctx.device {
            return err(
                ACL_ERROR_RT_STREAM_CONTEXT,
                "event and stream on different devices",
            );
        }
        let waitable = e.kind == EvKind::Default
            || e.flags & ACL_EVENT_SYNC != 0
            || e.flags == ACL_EVENT_EXTERNAL
            || e.flags == ACL_EVENT_IPC;
        if !waitable {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                "event without ACL_EVENT_SYNC cannot be waited on",
            );
        }
        let capture_ok = e.kind == EvKind::Ex || e.flags == ACL_EVENT_EXTERNAL;
        let s_cap = s.capture();
        let e_cap = e.active_capture();
        if (s_cap.is_some() || e_cap.is_some()) && !capture_ok {
            if let Some(c) = s_cap.as_ref().or(e_cap.as_ref()) {
                c.invalidate();
            }
            return err(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                "cross-stream capture needs aclrtCreateEventExWithFlag events",
            );
        }
        match (s_cap, e_cap) {
            (_, Some(ec)) => {
                // Dependency inside the capture: joins `s` to the capture if needed.
                let mut g = lock(&s.st);
                let joined = g.capture.as_ref().is_some_and(|c| Arc::ptr_eq(c, &ec));
                if !joined {
                    if g.capture.as_ref().is_some_and(|c| lock(&c.st).active) {
                        ec.invalidate();
                        return err(ACL_ERROR_RT_STREAM_CAPTURED, "stream is in another capture");
                    }
                    g.capture = Some(ec.clone());
                    lock(&ec.st).joined.push(s.clone());
                }
                Ok(())
            }
            _ => s.push(Task::Wait { ev: e, target: 0 }),
        }
    })
}

fn query_checks(e: &Event) -> R {
    if let Some(c) = e.active_capture() {
        c.invalidate();
        return err(
            ACL_ERROR_RT_EVENT_CAPTURED,
            "event recorded in an active capture",
        );
    }
    e.ctx.check_poison()
}

/// `aclError aclrtQueryEventStatus(aclrtEvent, aclrtEventRecordedStatus*)`: INVERTED enum,
/// NOT_READY=0 / COMPLETE=1; COMPLETE before any record.
///
/// # Safety
/// `status` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtQueryEventStatus(event: *mut c_void, status: *mut i32) -> i32 {
    ffi("aclrtQueryEventStatus", true, || {
        non_null(status, "status")?;
        let e = event_of(event)?;
        query_checks(&e)?;
        let v = if e.query_complete() {
            ACL_EVENT_RECORDED_STATUS_COMPLETE
        } else {
            ACL_EVENT_RECORDED_STATUS_NOT_READY
        };
        // SAFETY: caller contract.
        unsafe { put(status, v) }
    })
}

/// `aclError aclrtQueryEvent(aclrtEvent, aclrtEventStatus*)` (deprecated): COMPLETE=0 /
/// NOT_READY=1; Ex events → 207000.
///
/// # Safety
/// `status` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtQueryEvent(event: *mut c_void, status: *mut i32) -> i32 {
    ffi("aclrtQueryEvent", true, || {
        non_null(status, "status")?;
        let e = event_of(event)?;
        if e.kind == EvKind::Ex {
            return err(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                "aclrtQueryEvent on an Ex event",
            );
        }
        query_checks(&e)?;
        let v = if e.query_complete() {
            ACL_EVENT_STATUS_COMPLETE
        } else {
            ACL_EVENT_STATUS_NOT_READY
        };
        // SAFETY: caller contract.
        unsafe { put(status, v) }
    })
}

/// `aclError aclrtQueryEventWaitStatus(aclrtEvent, aclrtEventWaitStatus*)`: Ex → 207000;
/// WithFlag events without SYNC → 107000.
///
/// # Safety
/// `status` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtQueryEventWaitStatus(event: *mut c_void, status: *mut i32) -> i32 {
    ffi("aclrtQueryEventWaitStatus", true, || {
        non_null(status, "status")?;
        let e = event_of(event)?;
        if e.kind == EvKind::Ex {
            return err(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                "wait status of an Ex event",
            );
        }
        if e.kind == EvKind::Legacy && e.flags & ACL_EVENT_SYNC == 0 {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                "wait status needs ACL_EVENT_SYNC",
            );
        }
        query_checks(&e)?;
        let v = if e.is_complete() {
            ACL_EVENT_WAIT_STATUS_COMPLETE
        } else {
            ACL_EVENT_WAIT_STATUS_NOT_READY
        };
        // SAFETY: caller contract.
        unsafe { put(status, v) }
    })
}

fn sync_event(h: *mut c_void, dl: Option<Instant>) -> R {
    let e = event_of(h)?;
    query_checks(&e)?;
    if let Some(r) = crate::ipc_event::sync_shared(&e, dl) {
        return r;
    }
    let mut g = lock(&e.st);
    while !g.latest_done() {
        drop(g);
        e.ctx.check_poison()?;
        let mut slice = std::time::Duration::from_millis(20);
        if let Some(d) = dl {
            let now = Instant::now();
            if now >= d {
                return err(
                    ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
                    "event synchronize timed out",
                );
            }
            slice = slice.min(d - now);
        }
        g = lock(&e.st);
        if g.latest_done() {
            break;
        }
        g =
            e.cv.wait_timeout(g, slice)
                .map_or_else(|p| p.into_inner().0, |r| r.0);
    }
    g.collected = g.record_gen;
    let stream = g.record_stream;
    drop(g);
    // The runtime collects the stream's completions while it waits.
    if stream != 0 {
        crate::stream::collect_records(stream);
    }
    e.ctx.check_poison()
}

/// `aclError aclrtSynchronizeEvent(aclrtEvent event)`: needs no context.
///
/// # Safety
/// `event` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtSynchronizeEvent(event: *mut c_void) -> i32 {
    ffi("aclrtSynchronizeEvent", true, || sync_event(event, None))
}

/// `aclError aclrtSynchronizeEventWithTimeout(aclrtEvent, int32_t timeout)`: ms, -1 forever,
/// 0 or < -1 → 107000, expiry → 507047.
///
/// # Safety
/// `event` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtSynchronizeEventWithTimeout(event: *mut c_void, timeout: i32) -> i32 {
    ffi("aclrtSynchronizeEventWithTimeout", true, || {
        sync_event(event, deadline(timeout, ACL_ERROR_RT_PARAM_INVALID)?)
    })
}

fn timestamp_of(e: &Event) -> R<u64> {
    let g = lock(&e.st);
    if !g.recorded {
        return err(ACL_ERROR_RT_INTERNAL_ERROR, "event was never recorded");
    }
    if !e.has_timeline() {
        return err(
            ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
            "event has no ACL_EVENT_TIME_LINE",
        );
    }
    if !g.latest_done() {
        return err(ACL_ERROR_RT_INTERNAL_ERROR, "event not complete yet");
    }
    g.ts_ns.map_or_else(
        || err(ACL_ERROR_RT_INTERNAL_ERROR, "event has no timestamp"),
        Ok,
    )
}

/// `aclError aclrtEventElapsedTime(float* ms, aclrtEvent start, aclrtEvent end)`: end − start
/// in ms (may be negative). Not recorded / not complete → 507000; no timeline → 107006.
///
/// # Safety
/// `ms` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtEventElapsedTime(
    ms: *mut f32,
    start: *mut c_void,
    end: *mut c_void,
) -> i32 {
    ffi("aclrtEventElapsedTime", true, || {
        non_null(ms, "ms")?;
        let (a, b) = (event_of(start)?, event_of(end)?);
        query_checks(&a)?;
        query_checks(&b)?;
        let (ta, tb) = (timestamp_of(&a)?, timestamp_of(&b)?);
        let v = (tb as f64 - ta as f64) / 1e6;
        // SAFETY: caller contract.
        unsafe { put(ms, v as f32) }
    })
}

/// `aclError aclrtEventGetTimestamp(aclrtEvent event, uint64_t* timestamp)`: µs since the
/// simulated device booted (library load).
///
/// # Safety
/// `timestamp` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtEventGetTimestamp(event: *mut c_void, timestamp: *mut u64) -> i32 {
    ffi("aclrtEventGetTimestamp", true, || {
        non_null(timestamp, "timestamp")?;
        let e = event_of(event)?;
        query_checks(&e)?;
        let t = timestamp_of(&e)?;
        // SAFETY: caller contract.
        unsafe { put(timestamp, t / 1000) }
    })
}

/// `aclError aclrtGetEventId(aclrtEvent event, uint32_t* eventId)`: unique, increasing.
///
/// # Safety
/// `event_id` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetEventId(event: *mut c_void, event_id: *mut u32) -> i32 {
    ffi("aclrtGetEventId", true, || {
        non_null(event_id, "eventId")?;
        let e = event_of(event)?;
        // SAFETY: caller contract.
        unsafe { put(event_id, e.id) }
    })
}

/// `aclError aclrtGetEventAvailNum(uint32_t* eventCount)`: limit minus live events of the
/// current device.
///
/// # Safety
/// `event_count` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetEventAvailNum(event_count: *mut u32) -> i32 {
    ffi("aclrtGetEventAvailNum", true, || {
        non_null(event_count, "eventCount")?;
        let c = cur_ctx()?;
        let left = max_events().saturating_sub(counts(c.device).1);
        // SAFETY: caller contract.
        unsafe { put(event_count, left) }
    })
}
