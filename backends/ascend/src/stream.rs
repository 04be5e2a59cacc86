//! [`AscendStream`]: an `aclrtStream` with xstream's capture state, callbacks and allocator.
//!
//! **Destroy policy.** Dropping an owned stream never blocks: the handle goes to the reaper
//! thread, which makes the context current, `aclrtSynchronizeStream`s it (queued work and
//! callbacks run to completion), unsubscribes it from the report thread, unregisters its
//! allocator, and only then `aclrtDestroyStream`s it. A graph built from a PERSISTENT stream
//! keeps the stream alive until the graph drops. [`AscendStream::destroy_force`] is the ACL-only
//! way to drop queued work (`aclrtDestroyStreamForce`).
//!
//! This file holds the type, its shared state, host waits and the [`Stream`] impl; each other
//! concern has its own file:
//! - `create`: owned streams, the default stream, unowned views, stream ids;
//! - `capture`: `aclmdlRICaptureBegin` / `aclmdlRICaptureEnd`, `aclmdlRICaptureGetInfo`;
//! - `callback`: report-style callbacks and `aclrtLaunchHostFunc`;
//! - `memory`: memset, write, read, copies, host memory in flight;
//! - `kernel`: kernel launches (`aclrtLaunchKernelWithConfig`) and their checks;
//! - `memop`: `aclrtValueWait` / `aclrtValueWrite` (64-bit);
//! - `attribute`: stream attributes, priority, the allocator;
//! - `native`: ACL-only extras (native flags, failure mode, forced destroy);
//! - `drop`: the hand-off to the reaper.

use std::any::Any;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use xstream_core::sync::lock;

use xstream_core::callback::{BoxedCallback, PanicSlot};
use xstream_core::module::{KernelArg, LaunchConfig, BUILTIN_DELAY, BUILTIN_LCG};
use xstream_core::{
    Allocator, BackendKind, Borrowed, BufferView, CaptureCell, CaptureMode, CreationReport, Error,
    Kernel, Ownership, Readback, Result, Status, Stream, StreamAttr, StreamAttrValue, StreamFlags,
    StreamImpl,
};

use self::callback::STYLE_NONE;
use crate::device::{AscendBuffer, AscendDevice};
use crate::error::with_timeout;
use crate::event::AscendEvent;
use crate::graph::AscendGraph;
use crate::module::AscendFunction;
use crate::result;
use crate::sys::{consts, RawStream};
use crate::AscendBackend;

/// A checked byte range of an Ascend buffer (what the checked layer hands the backend).
pub(crate) type Span<'a> = BufferView<'a, AscendBuffer>;

mod attribute;
mod callback;
mod capture;
mod create;
mod drop;
mod kernel;
mod memop;
mod memory;
mod native;
mod random;
mod reduce;

type Keep = Box<dyn Any + Send + Sync>;

/// State shared by every handle of one native stream (and, for PERSISTENT streams, the
/// graphs built from it).
pub(crate) struct StreamState {
    pub(crate) raw: RawStream,
    /// Process-unique key (stream-ordered blocks remember the stream that freed them).
    pub(crate) key: u64,
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
    /// Counts enqueues (any work, callback, record or graph launch).
    work: AtomicU64,
    /// The value of `work` when a host wait last saw the stream idle: a query with nothing
    /// enqueued since then is Ready without asking the runtime.
    idle_at: AtomicU64,
    /// Enqueues `1..=done_upto` (counted by `work`) are known complete: a host callback
    /// enqueued after them ran, or a host wait or query saw the stream idle after them.
    done_upto: AtomicU64,
    /// Event waits enqueued on this stream, as (this stream's position of the wait, the
    /// waited record's stream, its position there): once this stream is known complete past
    /// the wait, so is the record (see [`StreamState::note_done`]). At most
    /// [`MAX_WAIT_EVIDENCE`] entries; the oldest are dropped (only evidence is lost).
    waits: Mutex<Vec<(u64, std::sync::Weak<StreamState>, u64)>>,
    /// `waits.len()`, read without the lock on the hot path.
    waits_len: AtomicUsize,
    /// The stream's native flags among [`MARKER_SYNC_FLAGS`] (host waits go through an
    /// internal event when non-zero).
    marker_flags: u32,
    /// For an owned stream with a runtime id: (device ordinal, runtime id, xstream id), the
    /// entry of the id table to drop with the stream.
    forget_id: Option<(usize, i32, u64)>,
    /// The 16-byte counter block of the built-in random fill on an owned or borrowed stream
    /// (made at the first fill, rewritten in stream order before each; freed by the reaper
    /// once the stream is synchronized).
    random_counter: Mutex<Option<AscendBuffer>>,
}

/// How many event waits a stream remembers as evidence for [`StreamState::note_done`].
const MAX_WAIT_EVIDENCE: usize = 64;

impl StreamState {
    pub(crate) fn new_default() -> Arc<Self> {
        Arc::new(Self::new(RawStream(std::ptr::null_mut()), None, false, 0))
    }

    fn new(raw: RawStream, device: Option<AscendDevice>, owned: bool, native: u32) -> Self {
        Self {
            raw,
            key: crate::blocks::next_key(),
            capture: CaptureCell::new(),
            panics: Arc::new(PanicSlot::default()),
            subscribed: Mutex::new(None),
            style: AtomicU8::new(STYLE_NONE),
            keep: Mutex::new(Vec::new()),
            nodes: AtomicUsize::new(0),
            alloc: Mutex::new(None),
            orphans: Mutex::new(Vec::new()),
            work: AtomicU64::new(0),
            idle_at: AtomicU64::new(0),
            done_upto: AtomicU64::new(0),
            waits: Mutex::new(Vec::new()),
            waits_len: AtomicUsize::new(0),
            marker_flags: native & MARKER_SYNC_FLAGS,
            device,
            owned,
            gone: std::sync::atomic::AtomicBool::new(false),
            forget_id: None,
            random_counter: Mutex::new(None),
        }
    }

    pub(crate) fn take_subscription(&self) -> Option<u64> {
        lock(&self.subscribed).take()
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

    /// Notes that something was enqueued on the stream; returns its position (1-based).
    pub(crate) fn touch(&self) -> u64 {
        self.work.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The current enqueue count.
    pub(crate) fn enqueues(&self) -> u64 {
        self.work.load(Ordering::Acquire)
    }

    /// Notes that enqueues `1..=pos` have completed; the records that event waits among them
    /// waited for have completed too, on their own streams.
    pub(crate) fn note_done(&self, pos: u64) {
        self.done_upto.fetch_max(pos, Ordering::AcqRel);
        if self.waits_len.load(Ordering::Acquire) == 0 {
            return;
        }
        let passed: Vec<_> = {
            let mut w = lock(&self.waits);
            let (done, left): (Vec<_>, Vec<_>) = w.drain(..).partition(|e| e.0 <= pos);
            *w = left;
            self.waits_len.store(w.len(), Ordering::Release);
            done
        };
        // Outside the lock: the other stream may propagate further.
        for (_, stream, at) in passed {
            if let Some(s) = stream.upgrade() {
                s.note_done(at);
            }
        }
    }

    /// Notes an event wait enqueued at `pos` on this stream for the record `rec`.
    pub(crate) fn note_wait(&self, pos: u64, rec: (std::sync::Weak<StreamState>, u64)) {
        let mut w = lock(&self.waits);
        w.retain(|e| e.1.strong_count() > 0);
        if w.len() >= MAX_WAIT_EVIDENCE {
            w.remove(0);
        }
        w.push((pos, rec.0, rec.1));
        self.waits_len.store(w.len(), Ordering::Release);
    }

    /// Whether enqueue `pos` is known complete (see `done_upto`).
    pub(crate) fn known_done(&self, pos: u64) -> bool {
        self.done_upto.load(Ordering::Acquire) >= pos
    }

    /// Whether the handle was force-destroyed.
    pub(crate) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// Keeps `k` alive for the graph being captured, without counting a node.
    fn kept(&self, k: Keep) {
        lock(&self.keep).push(k);
    }

    pub(crate) fn take_capture(&self) -> (usize, Vec<Keep>) {
        (
            self.nodes.swap(0, Ordering::Relaxed),
            std::mem::take(&mut *lock(&self.keep)),
        )
    }
}

/// An ACL stream.
pub struct AscendStream {
    device: AscendDevice,
    pub(crate) state: Arc<StreamState>,
    ownership: Ownership,
    id: u64,
    native_id: Option<i32>,
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
            .field("native_id", &self.native_id)
            .field("ownership", &self.ownership)
            .field("flags", &self.flags)
            .finish()
    }
}

impl AscendStream {
    fn kind_name(&self) -> xstream_core::NotOwnedKind {
        match self.ownership {
            Ownership::Default => xstream_core::NotOwnedKind::Default,
            _ => xstream_core::NotOwnedKind::Borrowed,
        }
    }

    /// Notes that `b` (of this stream's device: checked by xstream-core) is used on this
    /// stream: stream-ordered buffers track the streams that used them, refuse a use after
    /// `free_async` and a use inside a capture.
    fn note_use(&self, b: &AscendBuffer) -> Result<()> {
        let Some(o) = &b.inner.ordered else {
            return Ok(());
        };
        if o.freed.load(Ordering::Acquire) {
            return Err(Error::invalid(
                "the buffer was freed with free_async (a clone of it was used after)",
            ));
        }
        if self.state.capture.is_capturing() {
            // A graph could replay after the free (the portable rule, as CUDA).
            return self
                .state
                .capture
                .gate("a stream-ordered buffer in a capture");
        }
        o.note_use(&self.state);
        Ok(())
    }

    fn enter(&self, op: &'static str) -> Result<()> {
        self.state.capture.gate_enqueue(op)?;
        self.state.touch();
        self.device.inner.bind()
    }

    /// Waits for every task enqueued so far (no capture check, no callback-panic report).
    pub(super) fn wait_all(&self) -> Result<()> {
        let d = &self.device.inner;
        d.bind()?;
        let seen = self.state.enqueues();
        if self.state.marker_flags != 0 {
            marker_wait(d, &self.state, MarkerWait::Forever)?;
        } else {
            result::stream::synchronize(d.t, self.state.raw).map_err(|e| d.observe(e))?;
        }
        self.state.note_done(seen);
        Ok(())
    }

    fn timeout_ms(d: Duration) -> i32 {
        let ms = d.as_nanos().div_ceil(1_000_000).max(1);
        i32::try_from(ms).unwrap_or(i32::MAX)
    }
}

impl AscendStream {
    /// `Stream::synchronize`: waits for every task, then reports a callback panic.
    fn synchronize_blocking(&self) -> Result<()> {
        let _span = tracing::trace_span!("stream_synchronize", stream = ?self.state.raw, name = self.name.as_deref()).entered();
        if !self.persistent {
            self.state.capture.gate("synchronize")?;
            self.wait_all()?;
        }
        self.state.panics.take()
    }

    /// `Stream::synchronize_timeout`: `aclrtSynchronizeStreamWithTimeout` where the runtime
    /// has it, else polls `aclrtStreamQuery` until `timeout`.
    fn synchronize_within(&self, timeout: Duration) -> Result<()> {
        if !self.persistent {
            self.state.capture.gate("synchronize_timeout")?;
            let d = &self.device.inner;
            d.bind()?;
            let seen = self.state.enqueues();
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
            self.state.note_done(seen);
        }
        self.state.panics.take()
    }
}

impl StreamImpl for AscendStream {
    type B = AscendBackend;
    type Raw = RawStream;

    fn device_impl(&self) -> &AscendDevice {
        &self.device
    }
    fn id_impl(&self) -> u64 {
        self.id
    }
    fn name_impl(&self) -> Option<&str> {
        self.name.as_deref()
    }
    fn flags_impl(&self) -> StreamFlags {
        self.flags
    }
    fn priority_impl(&self) -> i32 {
        self.priority.load(Ordering::Relaxed)
    }
    fn report_impl(&self) -> &CreationReport {
        &self.report
    }
    fn ownership_impl(&self) -> Ownership {
        self.ownership
    }

    fn query_impl(&self) -> Result<Status> {
        if self.persistent {
            return Ok(Status::Ready);
        }
        self.state.capture.gate("query")?;
        let d = &self.device.inner;
        d.bind()?;
        let seen = self.state.enqueues();
        let r = if self.state.marker_flags != 0 {
            marker_wait(d, &self.state, MarkerWait::Query)?
        } else {
            match result::stream::query(d.t, self.state.raw).map_err(|e| d.observe(e))? {
                consts::ACL_STREAM_STATUS_COMPLETE => Status::Ready,
                _ => Status::Pending,
            }
        };
        if r == Status::Ready {
            self.state.note_done(seen);
        }
        Ok(r)
    }

    fn synchronize_impl(&self, timeout: Option<Duration>) -> Result<()> {
        match timeout {
            None => self.synchronize_blocking(),
            Some(t) => self.synchronize_within(t),
        }
    }

    fn wait_event_impl(&self, event: &AscendEvent) -> Result<()> {
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
        if !self.state.capture.is_capturing() {
            if let Some(rec) = event.wait_evidence() {
                let pos = self.state.touch();
                self.state.note_wait(pos, rec);
            }
        }
        // Outside capture nothing needs the event alive (aclrtDestroyEvent is safe before the
        // wait completes), so no keep-alive is boxed: the wait does not allocate. A captured
        // graph keeps the event for its replays.
        if self.state.capture.is_capturing() {
            self.state.enqueued(Some(Box::new(event.keep_alive())));
        }
        Ok(())
    }

    fn enqueue_callback_impl(&self, f: BoxedCallback) -> Result<()> {
        self.device.inner.bind()?;
        self.launch_cb(f)
    }

    fn begin_capture_impl(&self, mode: CaptureMode) -> Result<()> {
        capture::begin_capture(self, mode)
    }

    fn end_capture_impl(&self) -> Result<AscendGraph> {
        capture::end_capture(self)
    }

    fn capture_cell_impl(&self) -> &CaptureCell {
        &self.state.capture
    }

    fn attribute_impl(&self, attr: StreamAttr) -> Result<StreamAttrValue> {
        attribute::attribute(self, attr)
    }

    fn set_attribute_impl(&self, value: StreamAttrValue) -> Result<()> {
        attribute::set_attribute(self, value)
    }

    fn copy_attributes_from_impl(&self, src: &Self) -> Result<()> {
        attribute::copy_attributes_from(self, src)
    }

    fn set_allocator_impl(&self, allocator: Option<Arc<dyn Allocator>>) -> Result<()> {
        attribute::set_allocator(self, allocator)
    }

    fn allocator_impl(&self) -> Result<Option<Arc<dyn Allocator>>> {
        attribute::allocator(self)
    }

    fn alloc_async_impl(&self, len: usize) -> Result<AscendBuffer> {
        memory::alloc_async(self, len)
    }

    fn copy_peer_impl(&self, src: Span<'_>, dst: Span<'_>) -> Result<()> {
        memory::copy_peer(
            self,
            src.buffer(),
            src.offset(),
            dst.buffer(),
            dst.offset(),
            src.len(),
        )
    }

    // --- launch builder ---

    fn launch_kernel_with_impl(
        &self,
        f: &AscendFunction,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, AscendBuffer>],
        attrs: &xstream_core::LaunchAttrs,
    ) -> Result<()> {
        kernel::launch_ex(self, f, cfg, args, attrs, kernel::Layout::Required)
    }

    #[allow(unsafe_code)]
    unsafe fn launch_kernel_unchecked_impl(
        &self,
        f: &AscendFunction,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, AscendBuffer>],
        attrs: &xstream_core::LaunchAttrs,
    ) -> Result<()> {
        kernel::launch_ex(self, f, cfg, args, attrs, kernel::Layout::Lenient)
    }

    // --- end of launch builder ---

    fn as_raw_impl(&self) -> RawStream {
        self.state.raw
    }

    fn fence_anchor_impl(
        &self,
        _event: &crate::AscendEvent,
    ) -> Option<std::sync::Arc<dyn xstream_core::FenceAnchor<Self::B>>> {
        // No anchor: a page-locked buffer records its fence behind each copy.
        None
    }

    #[allow(unsafe_code)]
    unsafe fn borrow_raw_impl<'a>(
        device: &AscendDevice,
        raw: RawStream,
    ) -> Result<Borrowed<'a, Self>> {
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

    fn wait_stream_impl(&self, other: &Self) -> Result<()> {
        let e = other.record_event()?;
        self.wait_event_impl(&e)
    }

    fn copy_to_device_impl(&self, src: xstream_core::PinnedSpan, dst: Span<'_>) -> Result<()> {
        memory::copy_pinned(self, src, dst.buffer(), dst.offset(), true)
    }

    fn copy_to_host_impl(&self, src: Span<'_>, dst: xstream_core::PinnedSpan) -> Result<()> {
        memory::copy_pinned(self, dst, src.buffer(), src.offset(), false)
    }

    fn memset_impl(&self, dst: Span<'_>, value: xstream_core::MemsetPattern) -> Result<()> {
        memory::memset(self, dst.buffer(), dst.offset(), dst.len(), value)
    }

    fn write_from_blocking_impl(&self, dst: Span<'_>, src: &[u8]) -> Result<()> {
        memory::write_from_blocking(self, dst.buffer(), dst.offset(), src)
    }

    fn read_into_blocking_impl(&self, src: Span<'_>, dst: &mut [u8]) -> Result<()> {
        memory::read_into_blocking(self, src.buffer(), src.offset(), dst)
    }

    fn write_impl(&self, dst: Span<'_>, data: Vec<u8>) -> Result<()> {
        memory::write(self, dst.buffer(), dst.offset(), data)
    }

    fn free_async_impl(&self, buf: AscendBuffer) -> Result<()> {
        memory::free_async(self, buf)
    }

    fn read_impl(&self, src: Span<'_>) -> Result<Readback> {
        memory::read(self, src.buffer(), src.offset(), src.len())
    }

    fn copy_impl(&self, src: Span<'_>, dst: Span<'_>) -> Result<()> {
        memory::copy(
            self,
            src.buffer(),
            src.offset(),
            dst.buffer(),
            dst.offset(),
            src.len(),
        )
    }

    fn launch_builtin_impl(&self, kernel: Kernel<'_, AscendBuffer>) -> Result<()> {
        match kernel {
            Kernel::Delay(t) => {
                let f = AscendFunction::builtin(&self.device, BUILTIN_DELAY)?;
                let ns = xstream_core::module::delay_nanoseconds(t);
                kernel::launch(self, &f, &LaunchConfig::single(), &[KernelArg::U64(ns)])
            }
            Kernel::Lcg { buf, rounds } => {
                let f = AscendFunction::builtin(&self.device, BUILTIN_LCG)?;
                let (words, cfg) = xstream_core::module::lcg_launch(buf.inner.len)?;
                let args = [
                    KernelArg::Buffer(buf),
                    KernelArg::U32(words),
                    KernelArg::U32(rounds),
                ];
                kernel::launch(self, &f, &cfg, &args)
            }
            Kernel::Random {
                buf,
                offset,
                len,
                fill,
            } => random::fill(self, buf, offset, len, fill),
            #[cfg(feature = "testing")]
            Kernel::Fault => {
                self.enter("launch")?;
                let d = &self.device.inner;
                if d.t.xsimLaunchFault.is_none() {
                    return Err(Error::unsupported(
                        BackendKind::Ascend,
                        "Kernel::Fault (simulator-only)",
                    ));
                }
                result::xsim::fault(d.t, self.state.raw, crate::FAULT_CODE)?;
                self.state.enqueued(None);
                Ok(())
            }
            // xstream-core's test kernels, turned on by another crate of the build.
            #[cfg(not(feature = "testing"))]
            #[allow(unreachable_patterns)]
            _ => Err(Error::unsupported(
                BackendKind::Ascend,
                "test-only kernels (xstream-ascend's `testing` feature is off)",
            )),
        }
    }

    fn launch_kernel_impl(
        &self,
        f: &AscendFunction,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, AscendBuffer>],
    ) -> Result<()> {
        kernel::launch(self, f, cfg, args)
    }

    fn value_op_impl(&self, word: Span<'_>, op: xstream_core::memop::ValueOp) -> Result<()> {
        let (value, cond) = op.parts();
        if op.width() == 4 {
            return Err(memop::no_32bit(op.name()));
        }
        memop::value64(self, op.name(), word, value, cond)
    }

    fn reduce_impl(&self, dst: Span<'_>, src: Span<'_>, r: xstream_core::Reduction) -> Result<()> {
        reduce::reduce(self, dst, src, r)
    }

    /// A stream-ordered buffer adds this stream to its users, so its `free_async` records a
    /// release event here and no allocation reuses the block before that event completed
    /// (`crate::blocks`). A plain buffer needs nothing: its `aclrtFree` runs after a device
    /// synchronize, which waits for this stream's work too.
    fn record_use_impl(&self, buf: &AscendBuffer) -> Result<()> {
        self.note_use(buf)
    }
}
