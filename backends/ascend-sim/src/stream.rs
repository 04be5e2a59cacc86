//! Streams: the `Stream` object and its worker thread (queue, abort, idle wait), creation,
//! destruction, synchronize, query and abort. Stream properties are in `stream_attr`, the tasks a
//! worker runs in `task`.

use crate::callback::*;
use crate::capture::*;
use crate::codes::*;
use crate::config::*;
use crate::device::*;
use crate::error::*;
use crate::faults::*;
use crate::registry::*;
use crate::task::*;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::panic::catch_unwind;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::AtomicI32;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::sync::Condvar;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

static NEXT_STREAM_ID: AtomicI32 = AtomicI32::new(1);

static NEXT_SEQ: AtomicU64 = AtomicU64::new(1);

#[derive(Default)]
pub(crate) struct SState {
    pub(crate) queue: VecDeque<Task>,
    pub(crate) worker: bool,
    pub(crate) epoch: u64,
    pub(crate) destroyed: bool,
    pub(crate) capture: Option<Arc<Capture>>,
    pub(crate) sub_tid: Option<u64>,
    pub(crate) hostfunc: bool,
    pub(crate) failure_mode: Option<u64>,
    pub(crate) attrs: [u32; 5],
    pub(crate) persistent: Vec<(u64, Task)>,
    pub(crate) bound_ri: Option<usize>,
}

/// A stream.
pub(crate) struct Stream {
    /// Process-unique key, never reused (host-func subscriptions, exception launchers).
    pub(crate) id: i32,
    /// The runtime's stream id (`aclrtStreamGetId`, exception info, `hang:ID`): the lowest free
    /// one, so it is reused after a destroy; -1 for hidden streams, which the API never sees.
    pub(crate) rt_id: i32,
    pub(crate) ctx: Arc<Context>,
    pub(crate) flags: u32,
    pub(crate) is_default: bool,
    pub(crate) priority: AtomicU32,
    pub(crate) st: Mutex<SState>,
    pub(crate) cv: Condvar,
    /// Tasks this stream's worker has started (the simulator's task id of the last one).
    pub(crate) tasks_run: AtomicU32,
}

impl Stream {
    pub(crate) fn handle(self: &Arc<Self>) -> *mut c_void {
        Arc::as_ptr(self) as *mut c_void
    }

    /// Streams whose synchronize returns at once and whose query is meaningless.
    pub(crate) fn sync_noop(&self) -> bool {
        self.flags & (ACL_STREAM_PERSISTENT | ACL_STREAM_DEVICE_USE_ONLY | ACL_STREAM_CPU_SCHEDULE)
            != 0
    }

    /// The capture this stream takes part in, if active.
    pub(crate) fn capture(&self) -> Option<Arc<Capture>> {
        lock(&self.st)
            .capture
            .clone()
            .filter(|c| lock(&c.st).active)
    }

    /// Enqueues (or records) a task template.
    pub(crate) fn push(self: &Arc<Self>, t: Task) -> R {
        let mut g = lock(&self.st);
        if let Some(cap) = g.capture.clone() {
            drop(g);
            let mut ri = lock(&cap.ri.st);
            if let Task::Record { ev, .. } = &t {
                let mut e = lock(&ev.st);
                e.capture = Some(cap.clone());
                e.recorded = true;
            }
            ri.tasks.push(t);
            return Ok(());
        }
        if g.destroyed {
            return err(ACL_ERROR_INVALID_PARAM, "stream destroyed");
        }
        if self.flags & ACL_STREAM_PERSISTENT != 0 {
            g.persistent.push((NEXT_SEQ.fetch_add(1, SeqCst), t));
            return Ok(());
        }
        let t = t.instantiate();
        if let Task::Record { ev, .. } = &t {
            let mut e = lock(&ev.st);
            e.capture = None;
            e.record_stream = self.id;
        }
        g.queue.push_back(t);
        self.ensure_worker(&mut g)
    }

    /// Enqueues several already-instantiable templates atomically (model execution).
    pub(crate) fn push_all(self: &Arc<Self>, ts: &[Task]) -> R {
        for t in ts {
            self.push(t.clone())?;
        }
        Ok(())
    }

    fn ensure_worker(self: &Arc<Self>, g: &mut SState) -> R {
        if g.worker {
            return Ok(());
        }
        g.worker = true;
        LIVE_THREADS.fetch_add(1, SeqCst);
        let me = self.clone();
        let r = std::thread::Builder::new()
            .name(format!("xsim-stream-{}", self.id))
            .stack_size(256 * 1024)
            .spawn(move || me.worker_loop());
        if r.is_err() {
            g.worker = false;
            LIVE_THREADS.fetch_sub(1, SeqCst);
            for t in g.queue.drain(..) {
                t.discard();
            }
            return err(ACL_ERROR_RT_INTERNAL_ERROR, "cannot spawn stream worker");
        }
        Ok(())
    }

    fn worker_loop(self: Arc<Self>) {
        loop {
            let (task, epoch) = {
                let mut g = lock(&self.st);
                match g.queue.pop_front() {
                    Some(t) => (t, g.epoch),
                    None => {
                        g.worker = false;
                        LIVE_THREADS.fetch_sub(1, SeqCst);
                        self.cv.notify_all();
                        return;
                    }
                }
            };
            // A panic inside a task must not kill the worker silently: treat as a fault.
            let r = catch_unwind(AssertUnwindSafe(|| self.run(task, epoch)));
            if r.is_err() {
                self.ctx.poison.store(ACL_ERROR_RT_INTERNAL_ERROR, SeqCst);
            }
            self.hang_point(epoch);
            self.cv.notify_all();
        }
    }

    pub(crate) fn cancelled(&self, epoch: u64) -> bool {
        let g = lock(&self.st);
        g.epoch != epoch
    }

    fn hang_point(&self, epoch: u64) {
        let mut h = lock(&HANGS);
        while h.contains(&self.rt_id) {
            if self.cancelled(epoch) {
                return;
            }
            h = wait_for(&HANG_CV, h, SLICE);
        }
    }

    /// Waits until the stream has no queued or running work.
    pub(crate) fn wait_idle(&self, deadline: Option<Instant>, timeout_code: i32) -> R {
        let mut g = lock(&self.st);
        let epoch = g.epoch;
        while g.worker {
            if g.epoch != epoch {
                return err(
                    ACL_ERROR_RT_STREAM_ABORT,
                    "stream aborted during synchronize",
                );
            }
            self.ctx.check_poison()?;
            let mut slice = Duration::from_millis(50);
            if let Some(d) = deadline {
                let now = Instant::now();
                if now >= d {
                    return err(timeout_code, "synchronize timed out");
                }
                slice = slice.min(d - now);
            }
            g = wait_for(&self.cv, g, slice);
        }
        if g.epoch != epoch {
            return err(
                ACL_ERROR_RT_STREAM_ABORT,
                "stream aborted during synchronize",
            );
        }
        drop(g);
        self.ctx.check_poison()
    }

    /// Drops queued work and cancels waits of the running task.
    pub(crate) fn abort(&self) {
        let dropped: Vec<Task> = {
            let mut g = lock(&self.st);
            g.epoch += 1;
            g.queue.drain(..).collect()
        };
        for t in dropped {
            t.discard();
        }
        self.cv.notify_all();
        HANG_CV.notify_all();
    }

    /// Waits (bounded) until the worker has exited.
    pub(crate) fn wait_worker_exit(&self, limit: Duration) {
        let end = Instant::now() + limit;
        let mut g = lock(&self.st);
        while g.worker && Instant::now() < end {
            g = wait_for(&self.cv, g, SLICE);
        }
    }
}

/// Creates a stream on `ctx` (checks the per-device limit unless hidden).
pub(crate) fn new_stream(
    ctx: &Arc<Context>,
    flags: u32,
    priority: u32,
    is_default: bool,
    hidden: bool,
) -> R<Arc<Stream>> {
    let mut r = lock(reg());
    let mut rt_id = -1;
    if !hidden {
        let n = r.stream_count.entry(ctx.device).or_insert(0);
        if *n >= max_streams() {
            return err(ACL_ERROR_RT_NO_STREAM_RESOURCE, "stream limit reached");
        }
        *n += 1;
        rt_id = r.alloc_stream_id();
    }
    let s = Arc::new(Stream {
        id: NEXT_STREAM_ID.fetch_add(1, SeqCst),
        rt_id,
        ctx: ctx.clone(),
        flags,
        is_default,
        priority: AtomicU32::new(priority),
        st: Mutex::new(SState::default()),
        cv: Condvar::new(),
        tasks_run: AtomicU32::new(0),
    });
    if !hidden {
        r.streams.insert(Arc::as_ptr(&s) as usize, s.clone());
    }
    Ok(s)
}

/// Removes a stream from the registry and marks it destroyed (work must already be handled).
pub(crate) fn retire_stream(s: &Arc<Stream>) {
    crate::hostfunc::forget_stream(s.id);
    let key = Arc::as_ptr(s) as usize;
    let tid = {
        let mut g = lock(&s.st);
        g.destroyed = true;
        g.sub_tid.take()
    };
    if let Some(tid) = tid {
        unsubscribe(tid, key);
    }
    let mut r = lock(reg());
    if r.streams.remove(&key).is_some() {
        if let Some(n) = r.stream_count.get_mut(&s.ctx.device) {
            *n = n.saturating_sub(1);
        }
        r.stream_ids.remove(&s.rt_id);
    }
}

/// Force-destroys a stream: drops its work and retires it.
pub(crate) fn force_destroy_stream(s: &Arc<Stream>) {
    s.abort();
    retire_stream(s);
    s.wait_worker_exit(Duration::from_secs(2));
}

/// Resolves a stream for an enqueue-type call: needs the stream's context to be current,
/// a healthy context and no default-stream use inside capture.
pub(crate) fn enqueue_stream(h: *mut c_void) -> R<Arc<Stream>> {
    let ctx = cur_ctx()?;
    let s = stream_of(h)?;
    if !Arc::ptr_eq(&s.ctx, &ctx) {
        return err(
            ACL_ERROR_RT_STREAM_CONTEXT,
            "stream does not belong to the current context",
        );
    }
    check_default_in_capture(&s)?;
    s.ctx.check_poison()?;
    Ok(s)
}

pub(crate) fn effective_priority(p: u32) -> R<u32> {
    if p <= 7 {
        Ok(p)
    } else if product() == Product::P310 {
        err(
            ACL_ERROR_RT_PARAM_INVALID,
            format!("priority {p} out of range [0,7]"),
        )
    } else {
        Ok(7)
    }
}

pub(crate) fn create_stream(out: *mut *mut c_void, priority: u32, flag: u32) -> R {
    non_null(out, "stream")?;
    let ctx = cur_ctx()?;
    let flags = flag & 0x3F;
    // The runtime's order (`ApiErrorDecorator::CheckStreamFlags`, then `Context::StreamCreate`):
    // HUGE needs the chip's huge-depth feature, which the 310P's feature set lacks; the
    // coprocessor flag DEVICE_USE_ONLY must be alone; then it needs the chip's MC2 feature,
    // which the Ascend 910 has not (`mc2FeatureFlag` 0; 910B / 910C and 310P gate it on the
    // task scheduler firmware, which the simulator takes to have it).
    if flags & ACL_STREAM_HUGE != 0 && product() == Product::P310 {
        return err(
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
            "the 310P does not support huge streams",
        );
    }
    if flags & ACL_STREAM_DEVICE_USE_ONLY != 0 && flags != ACL_STREAM_DEVICE_USE_ONLY {
        return err(
            ACL_ERROR_RT_PARAM_INVALID,
            "DEVICE_USE_ONLY must be the only flag",
        );
    }
    if flags & ACL_STREAM_DEVICE_USE_ONLY != 0 && product() == Product::T910 {
        return err(
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
            "the Ascend 910 does not support DEVICE_USE_ONLY streams",
        );
    }
    let prio = effective_priority(priority)?;
    let s = new_stream(&ctx, flags, prio, false, false)?;
    // SAFETY: checked non-NULL; caller contract.
    unsafe { put(out, s.handle()) }
}

/// `aclError aclrtCreateStream(aclrtStream* stream)`.
///
/// # Safety
/// `stream` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateStream(stream: *mut *mut c_void) -> i32 {
    ffi("aclrtCreateStream", true, || create_stream(stream, 0, 0))
}

/// `aclError aclrtCreateStreamWithConfig(aclrtStream* stream, uint32_t priority, uint32_t flag)`.
///
/// # Safety
/// `stream` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateStreamWithConfig(
    stream: *mut *mut c_void,
    priority: u32,
    flag: u32,
) -> i32 {
    ffi("aclrtCreateStreamWithConfig", true, || {
        create_stream(stream, priority, flag)
    })
}

fn destroy_stream(h: *mut c_void, force: bool) -> R {
    non_null(h, "stream")?;
    let ctx = cur_ctx()?;
    let s = stream_of(h)?;
    if !Arc::ptr_eq(&s.ctx, &ctx) {
        return err(
            ACL_ERROR_RT_STREAM_CONTEXT,
            "stream does not belong to the current context",
        );
    }
    if s.is_default {
        return err(
            ACL_ERROR_INVALID_PARAM,
            "the default stream cannot be destroyed",
        );
    }
    if s.capture().is_some() {
        return err(ACL_ERROR_RT_STREAM_CAPTURED, "stream is capturing");
    }
    let bound = lock(&s.st).bound_ri.take();
    if let Some(ri) = bound {
        if let Ok(ri) = ri_of(ri as *mut c_void) {
            lock(&ri.st).bound.retain(|b| !Arc::ptr_eq(b, &s));
        }
    }
    if force {
        force_destroy_stream(&s);
    } else {
        // Errors (poison, abort) do not prevent destruction.
        let _ = s.wait_idle(None, ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
        retire_stream(&s);
        s.wait_worker_exit(std::time::Duration::from_secs(2));
    }
    Ok(())
}

/// `aclError aclrtDestroyStream(aclrtStream stream)`: waits for queued work, then destroys.
///
/// # Safety
/// `stream` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyStream(stream: *mut c_void) -> i32 {
    ffi("aclrtDestroyStream", true, || destroy_stream(stream, false))
}

/// `aclError aclrtDestroyStreamForce(aclrtStream stream)`: drops pending work and destroys.
///
/// # Safety
/// `stream` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyStreamForce(stream: *mut c_void) -> i32 {
    ffi("aclrtDestroyStreamForce", true, || {
        destroy_stream(stream, true)
    })
}

fn sync_stream(h: *mut c_void, dl: Option<Instant>) -> R {
    cur_ctx()?;
    let s = stream_of(h)?;
    if s.capture().is_some() {
        // Refused, but the capture stays valid (the runtime does not invalidate it).
        return err(
            ACL_ERROR_RT_STREAM_CAPTURED,
            "synchronize of a capturing stream",
        );
    }
    check_default_in_capture(&s)?;
    if s.sync_noop() {
        return Ok(());
    }
    s.wait_idle(dl, ACL_ERROR_RT_STREAM_SYNC_TIMEOUT)?;
    collect_records(s.id);
    Ok(())
}

/// A synchronize collects the completions of the event records of the stream (its
/// process-unique key) that have run (see `Event::query_complete`).
pub(crate) fn collect_records(stream: i32) {
    let events: Vec<Arc<crate::event::Event>> = lock(reg()).events.values().cloned().collect();
    for e in events {
        if lock(&e.st).record_stream == stream {
            e.collect();
        }
    }
}

/// `aclError aclrtSynchronizeStream(aclrtStream stream)`: needs some current context.
///
/// # Safety
/// `stream` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtSynchronizeStream(stream: *mut c_void) -> i32 {
    ffi("aclrtSynchronizeStream", true, || sync_stream(stream, None))
}

/// `aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout)`: ms, -1
/// forever, 0 or < -1 → 107000, expiry → 507046.
///
/// # Safety
/// `stream` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtSynchronizeStreamWithTimeout(
    stream: *mut c_void,
    timeout: i32,
) -> i32 {
    ffi("aclrtSynchronizeStreamWithTimeout", true, || {
        sync_stream(stream, deadline(timeout, ACL_ERROR_RT_PARAM_INVALID)?)
    })
}

/// `aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus* status)`:
/// COMPLETE=0 / NOT_READY=1.
///
/// # Safety
/// `status` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamQuery(stream: *mut c_void, status: *mut i32) -> i32 {
    ffi("aclrtStreamQuery", true, || {
        non_null(status, "status")?;
        cur_ctx()?;
        let s = stream_of(stream)?;
        if s.capture().is_some() {
            // Refused, but the capture stays valid (the runtime does not invalidate it).
            return err(ACL_ERROR_RT_STREAM_CAPTURED, "query of a capturing stream");
        }
        check_default_in_capture(&s)?;
        s.ctx.check_poison()?;
        let busy = !s.sync_noop() && lock(&s.st).worker;
        let v = if busy {
            ACL_STREAM_STATUS_NOT_READY
        } else {
            ACL_STREAM_STATUS_COMPLETE
        };
        // SAFETY: caller contract.
        unsafe { put(status, v) }
    })
}

/// `aclError aclrtStreamAbort(aclrtStream stream)`: discards queued work; concurrent
/// synchronize calls on the stream return 107023.
///
/// # Safety
/// `stream` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamAbort(stream: *mut c_void) -> i32 {
    ffi("aclrtStreamAbort", true, || {
        let s = stream_of(stream)?;
        s.abort();
        Ok(())
    })
}
