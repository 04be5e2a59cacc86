//! [`CudaStream`]: the portable [`Stream`] over a `CUstream`, plus CUDA-only extensions.

use std::fmt;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use xstream_core::callback::{dispatch, in_callback, CallbackSlot, HostCallback, PanicSlot};
use xstream_core::{
    check_range, check_timeout, Allocator, AllocatorSlot, Borrowed, CaptureCell, CaptureErrorKind,
    CaptureMode, CaptureStatus, CreationReport, Error, FlagReport, Kernel, Ownership, Priority,
    PriorityOutcome, Readback, Result, Status, Stream, StreamAttr, StreamAttrValue, StreamDesc,
    StreamFlags,
};

use cudarc::driver::sys;

use crate::conv::{self, CUDA_FLAGS};
use crate::device::track_pending;
use crate::ffi::{self, CuGraphNode, CuStream};
use crate::memory::Keep;
use crate::{error, CudaBackend, CudaBuffer, CudaDevice, CudaEvent, CudaGraph, TIMED_WAIT_MAX_NAP};

pub(crate) mod memop;

/// Keep-alive entries above which a stream hands its list to a host function.
const KEEP_FLUSH: usize = 256;

/// Owns (or borrows) the native handle; destroys an owned one when the last reference goes.
pub(crate) struct StreamHandle {
    pub raw: CuStream,
    /// The cudarc view, made on first use (`cudarc_stream()`), so creation pays nothing for it.
    pub inner: OnceLock<Arc<cudarc::driver::CudaStream>>,
    owned: bool,
    dev: CudaDevice,
}

impl Drop for StreamHandle {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        if self.inner.get().is_some_and(|i| Arc::strong_count(i) > 1) {
            // Somebody still holds the cudarc wrapper handed out by `cudarc_stream()`: never
            // destroy a handle that is still reachable. The stream is leaked (documented).
            tracing::warn!(stream = ?self.raw, "cudarc wrapper still shared; CUstream not destroyed");
            return;
        }
        let (raw, dev) = (self.raw, self.dev.clone());
        let destroy = move || {
            ffi::ensure_relaxed_capture_mode();
            if ffi::bind(dev.shared.raw_ctx).is_ok() {
                // Non-blocking: the driver releases the stream after its work (row 8).
                if let Err(c) = ffi::stream_destroy(raw) {
                    tracing::debug!(code = c, "cuStreamDestroy failed");
                }
            }
        };
        if in_callback() {
            dispatch(Box::new(destroy));
        } else {
            // On the caller's thread: do not switch its capture mode.
            if ffi::bind(self.dev.shared.raw_ctx).is_ok() {
                if let Err(c) = ffi::stream_destroy(self.raw) {
                    tracing::debug!(code = c, "cuStreamDestroy failed");
                }
            }
        }
    }
}

/// Per-stream xstream state.
#[derive(Default)]
pub(crate) struct StreamState {
    pub capture: CaptureCell,
    pub panics: Arc<PanicSlot>,
    allocator: AllocatorSlot,
    /// Buffers (and bytes) used by work enqueued since the last observed completion.
    keep: Mutex<Vec<Keep>>,
    /// `keep.len()`, readable without the lock (query and synchronize skip the lock when 0).
    keep_len: AtomicUsize,
    /// What the capture in progress references (moves into the graph).
    capture_keep: Mutex<Vec<Keep>>,
    persistent: bool,
    fast_sync: bool,
    priority: AtomicI32,
}

/// A CUDA stream.
///
/// `Send + Sync`: the CUDA driver accepts a stream from any thread; every call binds the
/// device's context first. Identity is [`Stream::id`] (`cuStreamGetId`), never the handle,
/// which the driver recycles after destroy (reference row 3). Dropping an owned stream calls
/// `cuStreamDestroy`, which neither blocks nor cancels (row 8); the buffers its queued work
/// uses are released by a host function behind that work.
pub struct CudaStream {
    dev: CudaDevice,
    pub(crate) handle: Arc<StreamHandle>,
    pub(crate) state: Arc<StreamState>,
    /// `cuStreamGetId`, read on first use (creation makes no extra driver call).
    id: OnceLock<u64>,
    name: Option<String>,
    flags: StreamFlags,
    report: CreationReport,
    ownership: Ownership,
}

impl fmt::Debug for CudaStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaStream")
            .field("id", &self.id.get())
            .field("raw", &self.handle.raw)
            .field("name", &self.name)
            .field("flags", &self.flags)
            .field("priority", &self.priority())
            .field("ownership", &self.ownership)
            .field("capture", &self.state.capture.status())
            .finish()
    }
}

/// What `cuStreamGetCaptureInfo_v3` reports.
#[derive(Debug, Clone)]
pub struct CaptureInfo {
    /// The capture status.
    pub status: CaptureStatus,
    /// The driver's unique capture id (0 when not capturing).
    pub id: u64,
    /// The capture's current dependency set (the nodes the next captured work will follow).
    pub dependencies: Vec<CuGraphNode>,
    /// The graph being captured into (owned by the capture; null when not capturing).
    pub graph: ffi::CuGraph,
}

/// How [`CudaStream::update_capture_dependencies`] changes the dependency set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DependencyUpdate {
    /// `CU_STREAM_ADD_CAPTURE_DEPENDENCIES`.
    Add,
    /// `CU_STREAM_SET_CAPTURE_DEPENDENCIES`.
    Set,
}

/// Where managed memory attached with [`CudaStream::attach_mem_async`] is accessible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemAttach {
    /// `CU_MEM_ATTACH_GLOBAL`: any stream of any device.
    Global,
    /// `CU_MEM_ATTACH_HOST`: the host only.
    Host,
    /// `CU_MEM_ATTACH_SINGLE`: this stream only.
    Single,
}

impl CudaStream {
    #[allow(clippy::too_many_arguments)] // private constructor; every field is distinct
    fn build(
        dev: &CudaDevice,
        handle: StreamHandle,
        name: Option<String>,
        flags: StreamFlags,
        report: CreationReport,
        ownership: Ownership,
        persistent: bool,
        fast_sync: bool,
    ) -> Result<Self> {
        let handle = Arc::new(handle);
        let state = StreamState {
            persistent,
            fast_sync,
            priority: AtomicI32::new(report.priority.native),
            ..StreamState::default()
        };
        Ok(Self {
            dev: dev.clone(),
            handle,
            state: Arc::new(state),
            id: OnceLock::new(),
            name,
            flags,
            report,
            ownership,
        })
    }

    pub(crate) fn create(dev: &CudaDevice, desc: &StreamDesc) -> Result<Self> {
        let sh = &dev.shared;
        sh.enter()?;
        let t = CUDA_FLAGS.stream_to_native(desc.flags, desc.policy)?;
        let mut outcome = sh.info.priority_range.resolve(desc.priority, desc.policy)?;
        let raw = if desc.priority == Priority::Normal {
            sh.check("cuStreamCreate", ffi::stream_create(t.native))?
        } else {
            sh.check(
                "cuStreamCreateWithPriority",
                ffi::stream_create_with_priority(t.native, outcome.native),
            )?
        };
        let handle = StreamHandle {
            raw,
            inner: OnceLock::new(),
            owned: true,
            dev: dev.clone(),
        };
        // No read-back calls on this path: the driver clamps a priority into the range that
        // `resolve` already clamped to (reference row 1), and `cuStreamGetFlags` returns exactly
        // the flags passed (row 2). `native_priority()` / `native_flags()` read them back on
        // demand, and the GPU tests check that both agree with these values.
        if outcome.clamped_from.is_none() && !sh.info.priority_range.contains(outcome.native) {
            outcome.clamped_from = Some(outcome.native);
            outcome.native = sh.info.priority_range.clamp(outcome.native);
        }
        let flags = t.effective;
        let persistent = t.emulated.contains(StreamFlags::PERSISTENT);
        let s = Self::build(
            dev,
            handle,
            desc.name.clone(),
            flags,
            CreationReport {
                flags: t.report,
                priority: outcome,
            },
            Ownership::Owned,
            persistent,
            t.emulated.contains(StreamFlags::FAST_SYNC),
        )?;
        if persistent {
            s.begin_capture_inner(CaptureMode::Relaxed)?;
        }
        tracing::debug!(stream = ?raw, name = s.name.as_deref(), flags = ?s.flags, priority = s.report.priority.native, "cuda stream created");
        Ok(s)
    }

    /// A legacy default (`CU_STREAM_LEGACY`) or per-thread (`CU_STREAM_PER_THREAD`) handle.
    pub(crate) fn special(dev: &CudaDevice, raw: CuStream) -> Result<Self> {
        let (flags, priority) = Self::read_props(dev, raw)?;
        let handle = StreamHandle {
            raw,
            inner: OnceLock::new(),
            owned: false,
            dev: dev.clone(),
        };
        let s = Self::build(
            dev,
            handle,
            Some(
                if raw == CuStream::LEGACY {
                    "legacy-default"
                } else {
                    "per-thread-default"
                }
                .into(),
            ),
            flags,
            Self::plain_report(priority),
            Ownership::Default,
            false,
            false,
        )?;
        // A special handle means "of the current context": read its id now, while the
        // context is bound, rather than lazily from wherever `id()` is first called.
        let _ = xstream_core::Stream::id(&s);
        Ok(s)
    }

    fn plain_report(priority: i32) -> CreationReport {
        CreationReport {
            flags: FlagReport::default(),
            priority: PriorityOutcome {
                requested: Priority::Native(priority),
                native: priority,
                clamped_from: None,
                collapsed_into: None,
            },
        }
    }

    fn read_props(dev: &CudaDevice, raw: CuStream) -> Result<(StreamFlags, i32)> {
        let sh = &dev.shared;
        let nf = sh.check("cuStreamGetFlags", ffi::stream_get_flags(raw))?;
        let p = sh.check("cuStreamGetPriority", ffi::stream_get_priority(raw))?;
        Ok((CUDA_FLAGS.stream_from_native(nf).0, p))
    }

    /// Wraps a cudarc stream without copying: xstream keeps the `Arc` (so the stream lives at
    /// least as long as this value) and never destroys it ([`Ownership::Borrowed`]).
    ///
    /// # Errors
    /// [`Error::WrongDevice`] when the stream belongs to another context; vendor errors.
    pub fn from_cudarc(dev: &CudaDevice, stream: Arc<cudarc::driver::CudaStream>) -> Result<Self> {
        let sh = &dev.shared;
        sh.enter()?;
        if stream.context().cu_ctx() != sh.raw_ctx.0 {
            return Err(Error::WrongDevice(
                "the cudarc stream belongs to another CUDA context".into(),
            ));
        }
        let raw = CuStream(stream.cu_stream());
        let (flags, priority) = Self::read_props(dev, raw)?;
        let handle = StreamHandle {
            raw,
            inner: OnceLock::from(stream),
            owned: false,
            dev: dev.clone(),
        };
        Self::build(
            dev,
            handle,
            None,
            flags,
            Self::plain_report(priority),
            Ownership::Borrowed,
            false,
            false,
        )
    }

    /// The cudarc view of this stream, for cudarc APIs (no copy). Cloning the `Arc` is
    /// allowed; an owned xstream stream whose cudarc wrapper is still shared when it drops is
    /// not destroyed (leaked with a warning) rather than left dangling.
    pub fn cudarc_stream(&self) -> &Arc<cudarc::driver::CudaStream> {
        self.handle
            .inner
            .get_or_init(|| ffi::cudarc_wrap_borrowed(&self.dev.shared.ctx, self.handle.raw))
    }

    /// The device.
    pub fn cuda_device(&self) -> &CudaDevice {
        &self.dev
    }

    // -- internal helpers ---------------------------------------------------------------

    fn raw(&self) -> CuStream {
        self.handle.raw
    }

    fn enter(&self) -> Result<()> {
        self.dev.shared.enter()
    }

    /// Maps a failed enqueue; capture errors invalidate the xstream capture state too.
    fn fail(&self, api: &'static str, code: ffi::Code) -> Error {
        let e = self.dev.shared.fail(api, code);
        if matches!(e, Error::Capture { .. }) {
            self.state.capture.invalidate();
        }
        e
    }

    fn check<T>(&self, api: &'static str, r: ffi::CuResult<T>) -> Result<T> {
        r.map_err(|c| self.fail(api, c))
    }

    pub(crate) fn keep(&self, k: Keep) {
        if self.state.capture.is_capturing() {
            lock(&self.state.capture_keep).push(k);
            return;
        }
        let flush = {
            let mut g = lock(&self.state.keep);
            g.push(k);
            let v = (g.len() >= KEEP_FLUSH).then(|| std::mem::take(&mut *g));
            self.state.keep_len.store(g.len(), Ordering::Release);
            v
        };
        if let Some(v) = flush {
            if let Err(v) = release_after(&self.dev, self.raw(), v) {
                let mut g = lock(&self.state.keep);
                g.extend(v);
                self.state.keep_len.store(g.len(), Ordering::Release);
            }
        }
    }

    /// Keeps a buffer used by work just enqueued (see [`CudaBuffer::keep_for`]).
    pub(crate) fn keep_buf(&self, b: &CudaBuffer) {
        if b.is_stream_ordered() && self.state.capture.is_capturing() {
            // A graph could replay after the stream-ordered free: refuse by invalidating.
            tracing::warn!("stream-ordered buffer used in a capture: capture invalidated");
            self.state.capture.invalidate();
        }
        if let Some(k) = b.keep_for(&self.handle) {
            self.keep(k);
        }
    }

    /// Drops keep-alive entries older than `n` (their work completed).
    fn completed_up_to(&self, n: usize) {
        if n == 0 {
            return;
        }
        let done: Vec<Keep> = {
            let mut g = lock(&self.state.keep);
            let n = n.min(g.len());
            let done = g.drain(..n).collect();
            self.state.keep_len.store(g.len(), Ordering::Release);
            done
        };
        drop(done);
    }

    /// Entries in the keep list now (no lock).
    fn keep_len(&self) -> usize {
        self.state.keep_len.load(Ordering::Acquire)
    }

    /// Enqueues a host function firing `slot` (no capture gate: callers gate).
    pub(crate) fn enqueue_slot(&self, f: HostCallback) -> Result<()> {
        if let Some(e) = self.dev.shared.sticky_error() {
            return Err(e);
        }
        let slot = CallbackSlot::new(f, Arc::clone(&self.state.panics));
        self.check(
            "cuLaunchHostFunc",
            ffi::launch_host_func(self.raw(), Arc::clone(&slot)),
        )?;
        track_pending(&self.dev.shared, &slot);
        Ok(())
    }

    fn begin_capture_inner(&self, mode: CaptureMode) -> Result<()> {
        self.state.capture.begin()?;
        if let Err(c) = ffi::stream_begin_capture(self.raw(), conv::map_capture_mode(mode)) {
            let _ = self.state.capture.end();
            return Err(self.dev.shared.fail("cuStreamBeginCapture", c));
        }
        Ok(())
    }

    fn capture_allowed(&self) -> Result<()> {
        match self.ownership {
            Ownership::Owned => Ok(()),
            Ownership::Default => Err(Error::Capture {
                op: "begin_capture",
                kind: CaptureErrorKind::NotCapturable,
            }),
            Ownership::Borrowed => Err(Error::NotOwned {
                kind: "borrowed",
                op: "begin a capture",
            }),
        }
    }

    fn end_capture_inner(&self) -> Result<CudaGraph> {
        if !self.state.capture.is_capturing() {
            return Err(Error::Capture {
                op: "end_capture",
                kind: CaptureErrorKind::NotCapturing,
            });
        }
        let (r, graph) = ffi::stream_end_capture(self.raw());
        let keep = std::mem::take(&mut *lock(&self.state.capture_keep));
        let cell = self.state.capture.end();
        let destroy = |g: ffi::CuGraph| {
            if !g.is_null() {
                let _ = ffi::graph_destroy(g);
            }
        };
        if let Err(c) = r {
            destroy(graph);
            let e = self.dev.shared.fail("cuStreamEndCapture", c);
            return Err(match (e, cell) {
                // xstream saw the capture invalidated first: report that.
                (_, Err(e2)) => e2,
                (e, Ok(())) => e,
            });
        }
        if let Err(e) = cell {
            destroy(graph);
            return Err(e);
        }
        CudaGraph::instantiate(&self.dev, graph, keep)
    }

    fn gate(&self, op: &'static str) -> Result<()> {
        self.state.capture.gate(op)
    }

    fn gate_enqueue(&self, op: &'static str) -> Result<()> {
        self.state.capture.gate_enqueue(op)
    }

    fn spin_until_idle(&self) -> Result<()> {
        loop {
            match ffi::stream_query(self.raw()) {
                Ok(()) => return Ok(()),
                Err(ffi::NOT_READY) => std::hint::spin_loop(),
                Err(c) => return Err(self.fail("cuStreamQuery", c)),
            }
        }
    }

    // -- CUDA-only extensions ------------------------------------------------------------

    /// `cuStreamGetFlags`: the native flags (0 = `CU_STREAM_DEFAULT`, 1 = `NON_BLOCKING`).
    ///
    /// # Errors
    /// Vendor errors.
    pub fn native_flags(&self) -> Result<u32> {
        self.enter()?;
        self.check("cuStreamGetFlags", ffi::stream_get_flags(self.raw()))
    }

    /// `cuStreamGetPriority`: the effective (clamped) native priority.
    ///
    /// # Errors
    /// Vendor errors.
    pub fn native_priority(&self) -> Result<i32> {
        self.enter()?;
        self.check("cuStreamGetPriority", ffi::stream_get_priority(self.raw()))
    }

    /// `cuStreamGetId`, read now (for the per-thread stream this is the calling thread's).
    ///
    /// # Errors
    /// Vendor errors.
    pub fn native_id(&self) -> Result<u64> {
        self.enter()?;
        self.check("cuStreamGetId", ffi::stream_get_id(self.raw()))
    }

    /// `cuStreamGetDevice`: the device ordinal handle of the stream.
    ///
    /// # Errors
    /// Vendor errors.
    pub fn native_device(&self) -> Result<i32> {
        self.enter()?;
        self.check("cuStreamGetDevice", ffi::stream_get_device(self.raw()))
    }

    /// `cuStreamGetCtx`: the stream's context.
    ///
    /// # Errors
    /// Vendor errors.
    pub fn native_context(&self) -> Result<ffi::CuContext> {
        self.enter()?;
        self.check("cuStreamGetCtx", ffi::stream_get_ctx(self.raw()))
    }

    /// `cuStreamGetCtx_v2`: the stream's context and its green context address (`None` for
    /// a regular context).
    ///
    /// # Errors
    /// Vendor errors.
    pub fn native_context_v2(&self) -> Result<(ffi::CuContext, Option<usize>)> {
        self.enter()?;
        let (c, g) = self.check("cuStreamGetCtx_v2", ffi::stream_get_ctx_v2(self.raw()))?;
        Ok((c, (g != 0).then_some(g)))
    }

    /// `cuStreamIsCapturing`, as the driver sees it.
    ///
    /// # Errors
    /// Vendor errors.
    pub fn native_capture_status(&self) -> Result<CaptureStatus> {
        self.enter()?;
        let s = self.check("cuStreamIsCapturing", ffi::stream_is_capturing(self.raw()))?;
        Ok(conv::capture_status_from_native(s))
    }

    /// `cuStreamGetCaptureInfo_v3` (the CUDA 13 form of `cuStreamGetCaptureInfo`).
    ///
    /// # Errors
    /// Vendor errors.
    pub fn capture_info(&self) -> Result<CaptureInfo> {
        self.enter()?;
        let i = self.check(
            "cuStreamGetCaptureInfo_v3",
            ffi::stream_get_capture_info(self.raw()),
        )?;
        Ok(CaptureInfo {
            status: conv::capture_status_from_native(i.status),
            id: i.id,
            dependencies: i.deps,
            graph: i.graph,
        })
    }

    /// `cuStreamUpdateCaptureDependencies_v2` (the CUDA 13 form; no edge data): adds to or
    /// replaces the capture's dependency set with nodes from [`CudaStream::capture_info`].
    ///
    /// # Errors
    /// [`CaptureErrorKind::NotCapturing`]; vendor errors.
    pub fn update_capture_dependencies(
        &self,
        nodes: &[CuGraphNode],
        how: DependencyUpdate,
    ) -> Result<()> {
        self.enter()?;
        if !self.state.capture.is_capturing() {
            return Err(Error::Capture {
                op: "update_capture_dependencies",
                kind: CaptureErrorKind::NotCapturing,
            });
        }
        let flags = match how {
            DependencyUpdate::Add => 0x0,
            DependencyUpdate::Set => 0x1,
        };
        self.check(
            "cuStreamUpdateCaptureDependencies_v2",
            ffi::stream_update_capture_dependencies(self.raw(), nodes, flags),
        )
    }

    /// `cuStreamBeginCaptureToGraph`: captures into a new, empty graph made with
    /// `cuGraphCreate` (no initial dependencies). End it with [`Stream::end_capture`].
    ///
    /// # Errors
    /// As [`Stream::begin_capture`].
    pub fn begin_capture_to_new_graph(&self, mode: CaptureMode) -> Result<()> {
        self.enter()?;
        self.capture_allowed()?;
        let g = self.check("cuGraphCreate", ffi::graph_create())?;
        self.state.capture.begin()?;
        if let Err(c) =
            ffi::stream_begin_capture_to_graph(self.raw(), g, conv::map_capture_mode(mode))
        {
            let _ = self.state.capture.end();
            let _ = ffi::graph_destroy(g);
            return Err(self.dev.shared.fail("cuStreamBeginCaptureToGraph", c));
        }
        Ok(())
    }

    /// `cuStreamWaitEvent(.., CU_EVENT_WAIT_EXTERNAL)`: during capture, waits on the event's
    /// record as an external dependency (an event-wait node) instead of a graph edge.
    ///
    /// # Errors
    /// Capture and vendor errors.
    pub fn wait_event_external(&self, event: &CudaEvent) -> Result<()> {
        self.enter()?;
        self.gate_enqueue("wait_event_external")?;
        self.check(
            "cuStreamWaitEvent",
            ffi::stream_wait_event(self.raw(), event.raw(), conv::CU_EVENT_WAIT_EXTERNAL),
        )
    }

    /// `cuStreamAddCallback`: a status-carrying callback. Unlike host functions, CUDA runs it
    /// exactly once **even after a device fault**, with the error (reference row 6): `f`
    /// gets `Ok(())` or the mapped error. It blocks later work on the stream while it runs;
    /// xstream calls inside return [`Error::NotPermitted`]; a panic is caught and reported by
    /// the next `synchronize`. Not capturable: refused during capture (capture invalidated).
    ///
    /// # Errors
    /// Capture errors; vendor errors (then `f` is dropped without being called).
    pub fn add_status_callback<F>(&self, f: F) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
    {
        self.enter()?;
        self.gate("add_status_callback")?;
        let slot = CallbackSlot::new(Box::new(f), Arc::clone(&self.state.panics));
        let s2 = Arc::clone(&slot);
        let shared = Arc::clone(&self.dev.shared);
        let r = ffi::stream_add_callback(
            self.raw(),
            Box::new(move |code| {
                let status = if code == 0 {
                    Ok(())
                } else {
                    let e = error::map("cuStreamAddCallback", code);
                    if e.is_sticky() {
                        // No driver calls here: records the error, fails the other pending
                        // callbacks.
                        shared.poison(&e);
                    }
                    Err(e)
                };
                s2.fire(status);
            }),
        );
        self.check("cuStreamAddCallback", r)?;
        track_pending(&self.dev.shared, &slot);
        Ok(())
    }

    /// `cuStreamAttachMemAsync`: attaches managed memory to this stream (capability
    /// [`xstream_core::Capabilities::MANAGED_MEMORY`]).
    ///
    /// # Errors
    /// [`Error::Unsupported`]; bounds; vendor errors.
    pub fn attach_mem_async(&self, mem: &crate::CudaManagedBuffer, how: MemAttach) -> Result<()> {
        self.enter()?;
        if !self.dev.shared.managed_memory {
            return Err(Error::unsupported(
                xstream_core::BackendKind::Cuda,
                "managed memory on this device",
            ));
        }
        self.gate_enqueue("attach_mem_async")?;
        let flags = match how {
            MemAttach::Global => 0x1,
            MemAttach::Host => 0x2,
            MemAttach::Single => 0x4,
        };
        // Length 0 means the whole allocation.
        self.check(
            "cuStreamAttachMemAsync",
            ffi::stream_attach_mem_async(self.raw(), mem.ptr(), 0, flags),
        )
    }

    /// Synchronizes by spin-polling `cuStreamQuery` (what `FAST_SYNC` streams do): ~2 µs
    /// wake-up, one busy core (reference row 10).
    ///
    /// # Errors
    /// As [`Stream::synchronize`].
    pub fn synchronize_spin(&self) -> Result<()> {
        self.enter()?;
        if self.state.persistent {
            return self.state.panics.take();
        }
        self.gate("synchronize")?;
        let n = self.keep_len();
        self.spin_until_idle()?;
        self.completed_up_to(n);
        self.state.panics.take()
    }
}

/// `cuThreadExchangeStreamCaptureMode`: sets the calling thread's capture interaction mode
/// and returns the previous one.
///
/// # Errors
/// Vendor errors; [`Error::NotAvailable`] when CUDA is not usable here.
pub fn exchange_thread_capture_mode(mode: CaptureMode) -> Result<CaptureMode> {
    xstream_core::ensure_not_in_callback()?;
    crate::availability_checked()?;
    let old = ffi::exchange_capture_mode(conv::map_capture_mode(mode))
        .map_err(|c| error::map("cuThreadExchangeStreamCaptureMode", c))?;
    Ok(conv::capture_mode_from_native(old))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Hands `v` to a host function behind the stream's current work; the host function moves it
/// to the dispatcher thread, which drops it (freeing device memory needs a driver call, which
/// is not permitted inside a host function). Returns `v` back when enqueueing failed.
fn release_after(
    dev: &CudaDevice,
    raw: CuStream,
    v: Vec<Keep>,
) -> std::result::Result<(), Vec<Keep>> {
    if dev.shared.sticky_error().is_some() {
        // Nothing runs any more on a poisoned context.
        drop(v);
        return Ok(());
    }
    let holder = Arc::new(Mutex::new(Some(v)));
    let h2 = Arc::clone(&holder);
    let slot = CallbackSlot::new(
        Box::new(move |_r| {
            if let Some(v) = lock(&h2).take() {
                dispatch(Box::new(move || {
                    ffi::ensure_relaxed_capture_mode();
                    drop(v);
                }));
            }
        }),
        Arc::new(PanicSlot::default()),
    );
    match ffi::launch_host_func(raw, Arc::clone(&slot)) {
        Ok(()) => {
            track_pending(&dev.shared, &slot);
            Ok(())
        }
        Err(_) => Err(lock(&holder).take().unwrap_or_default()),
    }
}

impl Drop for CudaStream {
    fn drop(&mut self) {
        tracing::debug!(stream = ?self.handle.raw, name = self.name.as_deref(), ownership = ?self.ownership, "cuda stream dropped");
        let dev = self.dev.clone();
        let handle = Arc::clone(&self.handle);
        let state = Arc::clone(&self.state);
        let release = move || {
            if ffi::bind(dev.shared.raw_ctx).is_err() {
                return;
            }
            if state.capture.is_capturing() {
                let (_, g) = ffi::stream_end_capture(handle.raw);
                if !g.is_null() {
                    let _ = ffi::graph_destroy(g);
                }
                let _ = state.capture.end();
                lock(&state.capture_keep).clear();
            }
            let v = std::mem::take(&mut *lock(&state.keep));
            if !v.is_empty() {
                if let Err(v) = release_after(&dev, handle.raw, v) {
                    // Work may still use these buffers: never free them early.
                    tracing::warn!(n = v.len(), "could not defer buffer release; leaking");
                    std::mem::forget(v);
                }
            }
            drop(handle);
        };
        if in_callback() {
            dispatch(Box::new(move || {
                ffi::ensure_relaxed_capture_mode();
                release();
            }));
        } else {
            release();
        }
    }
}

impl Stream for CudaStream {
    type B = CudaBackend;
    type Raw = CuStream;

    fn device(&self) -> &CudaDevice {
        &self.dev
    }

    fn id(&self) -> u64 {
        *self.id.get_or_init(|| {
            // The driver's id (unique, never reused: reference row 3). Should the call fail
            // (a poisoned context), a process-local id from a disjoint range keeps ids unique.
            static FALLBACK: AtomicU64 = AtomicU64::new(1);
            // A created stream carries its context (reference row 4), so no bind is needed
            // (binding is refused inside host callbacks); special handles are primed at
            // creation, when binding is allowed.
            match ffi::stream_get_id(self.raw()) {
                Ok(id) => id,
                Err(_) => (1 << 63) | FALLBACK.fetch_add(1, Ordering::Relaxed),
            }
        })
    }

    fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    fn flags(&self) -> StreamFlags {
        self.flags
    }

    fn priority(&self) -> i32 {
        self.state.priority.load(Ordering::Relaxed)
    }

    fn report(&self) -> &CreationReport {
        &self.report
    }

    fn ownership(&self) -> Ownership {
        self.ownership
    }

    fn query(&self) -> Result<Status> {
        self.enter()?;
        if self.state.persistent {
            return Ok(Status::Ready);
        }
        self.gate("query")?;
        let n = self.keep_len();
        match ffi::stream_query(self.raw()) {
            Ok(()) => {
                self.completed_up_to(n);
                Ok(Status::Ready)
            }
            Err(ffi::NOT_READY) => Ok(Status::Pending),
            Err(c) => Err(self.fail("cuStreamQuery", c)),
        }
    }

    fn synchronize(&self) -> Result<()> {
        let _span = tracing::trace_span!("stream_synchronize", stream = ?self.handle.raw, name = self.name.as_deref()).entered();
        if self.state.fast_sync {
            return self.synchronize_spin();
        }
        self.enter()?;
        if self.state.persistent {
            return self.state.panics.take();
        }
        self.gate("synchronize")?;
        let n = self.keep_len();
        self.check("cuStreamSynchronize", ffi::stream_synchronize(self.raw()))?;
        self.completed_up_to(n);
        self.state.panics.take()
    }

    fn synchronize_timeout(&self, timeout: Duration) -> Result<()> {
        check_timeout(timeout)?;
        self.enter()?;
        if self.state.persistent {
            return self.state.panics.take();
        }
        self.gate("synchronize_timeout")?;
        let n = self.keep_len();
        let start = Instant::now();
        let mut nap = Duration::from_micros(20);
        loop {
            match ffi::stream_query(self.raw()) {
                Ok(()) => break,
                Err(ffi::NOT_READY) => {}
                Err(c) => return Err(self.fail("cuStreamQuery", c)),
            }
            let elapsed = start.elapsed();
            if elapsed >= timeout {
                return Err(Error::Timeout(timeout));
            }
            if self.state.fast_sync {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(nap.min(timeout - elapsed));
                nap = (nap * 2).min(TIMED_WAIT_MAX_NAP);
            }
        }
        self.completed_up_to(n);
        self.state.panics.take()
    }

    fn wait_event(&self, event: &CudaEvent) -> Result<()> {
        self.enter()?;
        self.gate_enqueue("wait_event")?;
        self.check(
            "cuStreamWaitEvent",
            ffi::stream_wait_event(self.raw(), event.raw(), 0),
        )
    }

    fn enqueue_callback(&self, f: HostCallback) -> Result<()> {
        self.enter()?;
        // Exactly-once callbacks cannot be replayed: refused during capture (invalidates).
        self.gate("host_callback")?;
        self.enqueue_slot(f)
    }

    fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        self.enter()?;
        self.capture_allowed()?;
        if self.state.persistent {
            return Err(Error::Capture {
                op: "begin_capture",
                kind: CaptureErrorKind::AlreadyCapturing,
            });
        }
        self.begin_capture_inner(mode)
    }

    fn end_capture(&self) -> Result<CudaGraph> {
        self.enter()?;
        let g = self.end_capture_inner();
        if self.state.persistent {
            // A persistent stream keeps recording (docs/semantics.md).
            self.begin_capture_inner(CaptureMode::Relaxed)?;
        }
        g
    }

    fn capture_status(&self) -> CaptureStatus {
        self.state.capture.status()
    }

    fn attribute(&self, attr: StreamAttr) -> Result<StreamAttrValue> {
        use sys::CUstreamAttrID as Id;
        self.enter()?;
        let get = |id| {
            self.check(
                "cuStreamGetAttribute",
                ffi::stream_get_attribute(self.raw(), id),
            )
        };
        match attr {
            StreamAttr::Priority => {
                let v = get(Id::CU_LAUNCH_ATTRIBUTE_PRIORITY)?;
                Ok(StreamAttrValue::Priority(ffi::attr_priority(&v)))
            }
            StreamAttr::SyncPolicy => {
                let v = get(Id::CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY)?;
                Ok(StreamAttrValue::SyncPolicy(conv::sync_policy_from_native(
                    ffi::attr_sync_policy(&v),
                )))
            }
            StreamAttr::AccessPolicyWindow => {
                let v = get(Id::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW)?;
                Ok(StreamAttrValue::AccessPolicyWindow(
                    conv::access_policy_window_from_native(&ffi::attr_access_policy_window(&v)),
                ))
            }
            StreamAttr::FailureMode | StreamAttr::UserTag => Err(Error::unsupported(
                xstream_core::BackendKind::Cuda,
                format!("stream attribute {attr:?} (ACL only)"),
            )),
        }
    }

    fn set_attribute(&self, value: StreamAttrValue) -> Result<()> {
        use sys::CUstreamAttrID as Id;
        value.validate()?;
        self.enter()?;
        match self.ownership {
            Ownership::Owned => {}
            Ownership::Borrowed => {
                return Err(Error::NotOwned {
                    kind: "borrowed",
                    op: "set attributes",
                })
            }
            Ownership::Default => {
                return Err(Error::NotOwned {
                    kind: "default",
                    op: "set attributes",
                })
            }
        }
        let (id, v) = match value {
            StreamAttrValue::Priority(p) => {
                (Id::CU_LAUNCH_ATTRIBUTE_PRIORITY, ffi::attr_from_priority(p))
            }
            StreamAttrValue::SyncPolicy(p) => (
                Id::CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY,
                ffi::attr_from_sync_policy(conv::map_sync_policy(p)),
            ),
            StreamAttrValue::AccessPolicyWindow(w) => (
                Id::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                ffi::attr_from_access_policy_window(conv::map_access_policy_window(&w)),
            ),
            StreamAttrValue::FailureMode(_) | StreamAttrValue::UserTag(_) => {
                return Err(Error::unsupported(
                    xstream_core::BackendKind::Cuda,
                    format!("stream attribute {:?} (ACL only)", value.attr()),
                ))
            }
        };
        self.check(
            "cuStreamSetAttribute",
            ffi::stream_set_attribute(self.raw(), id, &v),
        )?;
        if matches!(value, StreamAttrValue::Priority(_)) {
            let p = self.check("cuStreamGetPriority", ffi::stream_get_priority(self.raw()))?;
            self.state.priority.store(p, Ordering::Relaxed);
        }
        Ok(())
    }

    fn copy_attributes_from(&self, src: &Self) -> Result<()> {
        self.enter()?;
        if self.ownership != Ownership::Owned {
            return Err(Error::NotOwned {
                kind: if self.ownership == Ownership::Borrowed {
                    "borrowed"
                } else {
                    "default"
                },
                op: "set attributes",
            });
        }
        self.check(
            "cuStreamCopyAttributes",
            ffi::stream_copy_attributes(self.raw(), src.raw()),
        )?;
        let p = self.check("cuStreamGetPriority", ffi::stream_get_priority(self.raw()))?;
        self.state.priority.store(p, Ordering::Relaxed);
        Ok(())
    }

    fn set_allocator(&self, allocator: Option<Arc<dyn Allocator>>) -> Result<()> {
        xstream_core::ensure_not_in_callback()?;
        if self.ownership == Ownership::Borrowed {
            return Err(Error::NotOwned {
                kind: "borrowed",
                op: "register an allocator",
            });
        }
        self.state.allocator.set(allocator);
        Ok(())
    }

    fn allocator(&self) -> Result<Option<Arc<dyn Allocator>>> {
        xstream_core::ensure_not_in_callback()?;
        Ok(self.state.allocator.get())
    }

    fn memset(&self, buf: &CudaBuffer, offset: usize, len: usize, value: u8) -> Result<()> {
        check_range("memset", buf.len_bytes(), offset, len)?;
        self.enter()?;
        self.gate_enqueue("memset")?;
        self.check(
            "cuMemsetD8Async",
            ffi::memset_d8_async(buf.ptr() + offset as u64, value, len, self.raw()),
        )?;
        self.keep_buf(buf);
        Ok(())
    }

    fn write(&self, dst: &CudaBuffer, offset: usize, data: Vec<u8>) -> Result<()> {
        check_range("write", dst.len_bytes(), offset, data.len())?;
        self.enter()?;
        self.gate_enqueue("write")?;
        // `data` is pageable: CUDA stages it before cuMemcpyHtoDAsync returns, so it may be
        // dropped afterwards; a captured copy reads it at every replay, so the graph keeps it.
        self.check(
            "cuMemcpyHtoDAsync",
            ffi::memcpy_htod_async(dst.ptr() + offset as u64, &data, self.raw()),
        )?;
        self.keep_buf(dst);
        if self.state.capture.is_capturing() {
            self.keep(Keep::Bytes(data));
        }
        Ok(())
    }

    fn read(&self, src: &CudaBuffer, offset: usize, len: usize) -> Result<Readback> {
        check_range("read", src.len_bytes(), offset, len)?;
        self.enter()?;
        // Delivered by a one-shot host function: not replayable, so refused during capture.
        self.gate("read")?;
        let mut host = vec![0u8; len].into_boxed_slice();
        self.check(
            "cuMemcpyDtoHAsync",
            ffi::memcpy_dtoh_async(&mut host, src.ptr() + offset as u64, self.raw()),
        )?;
        self.keep_buf(src);
        let (rb, fill) = Readback::new();
        let holder = Arc::new(Mutex::new(Some(host)));
        let h2 = Arc::clone(&holder);
        let r = self.enqueue_slot(Box::new(move |r| {
            let bytes = lock(&h2).take();
            fill.fill(r.map(|()| bytes.map(|b| b.into_vec()).unwrap_or_default()));
        }));
        if let Err(e) = r {
            // The copy may still be in flight: never free its destination.
            if let Some(b) = lock(&holder).take() {
                std::mem::forget(b);
            }
            return Err(e);
        }
        Ok(rb)
    }

    fn copy(
        &self,
        src: &CudaBuffer,
        src_offset: usize,
        dst: &CudaBuffer,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        check_range("copy source", src.len_bytes(), src_offset, len)?;
        check_range("copy destination", dst.len_bytes(), dst_offset, len)?;
        self.enter()?;
        self.gate_enqueue("copy")?;
        self.check(
            "cuMemcpyDtoDAsync",
            ffi::memcpy_dtod_async(
                dst.ptr() + dst_offset as u64,
                src.ptr() + src_offset as u64,
                len,
                self.raw(),
            ),
        )?;
        self.keep_buf(src);
        self.keep_buf(dst);
        Ok(())
    }

    fn enqueue_copy_to_device(
        &self,
        src: xstream_core::HostSpan,
        dst: &CudaBuffer,
        dst_offset: usize,
    ) -> Result<()> {
        dst.check_device("copy_to_device", &self.dev)?;
        check_range("copy_to_device", dst.len_bytes(), dst_offset, src.len())?;
        self.enter()?;
        self.gate_enqueue("copy_to_device")?;
        self.check(
            "cuMemcpyHtoDAsync",
            ffi::memcpy_htod_async_span(dst.ptr() + dst_offset as u64, &src, self.raw()),
        )?;
        self.keep_buf(dst);
        self.keep(Keep::Host(src));
        Ok(())
    }

    fn enqueue_copy_to_host(
        &self,
        src: &CudaBuffer,
        src_offset: usize,
        dst: xstream_core::HostSpan,
    ) -> Result<()> {
        src.check_device("copy_to_host", &self.dev)?;
        check_range("copy_to_host", src.len_bytes(), src_offset, dst.len())?;
        self.enter()?;
        self.gate_enqueue("copy_to_host")?;
        self.check(
            "cuMemcpyDtoHAsync",
            ffi::memcpy_dtoh_async_span(&dst, src.ptr() + src_offset as u64, self.raw()),
        )?;
        self.keep_buf(src);
        self.keep(Keep::Host(dst));
        Ok(())
    }

    fn alloc_async(&self, len: usize) -> Result<CudaBuffer> {
        // `alloc_ordered` enters the context (which refuses inside callbacks).
        self.gate_enqueue("alloc_async")?;
        crate::memory::alloc_ordered(self, len)
    }

    fn free_async(&self, buf: CudaBuffer) -> Result<()> {
        self.gate_enqueue("free_async")?;
        crate::memory::free_ordered(self, buf)
    }

    fn launch(&self, kernel: Kernel<'_, CudaBuffer>) -> Result<()> {
        self.enter()?;
        self.gate_enqueue("launch")?;
        let k = self.dev.shared.kernels()?;
        match kernel {
            Kernel::Delay(d) => {
                let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
                self.check("cuLaunchKernel", ffi::launch_delay(k.delay, self.raw(), ns))
            }
            Kernel::Lcg { buf, rounds } => {
                if buf.len_bytes() % 4 != 0 {
                    return Err(Error::invalid(format!(
                        "lcg: buffer length {} is not a multiple of 4",
                        buf.len_bytes()
                    )));
                }
                let words = (buf.len_bytes() / 4) as u64;
                const BLOCK: u32 = 256;
                let grid = words.div_ceil(u64::from(BLOCK)).clamp(1, 4096) as u32;
                self.check(
                    "cuLaunchKernel",
                    ffi::launch_lcg(k.lcg, self.raw(), grid, BLOCK, buf.ptr(), words, rounds),
                )?;
                self.keep_buf(buf);
                Ok(())
            }
            Kernel::Fault => self.check("cuLaunchKernel", ffi::launch_fault(k.fault, self.raw())),
        }
    }

    // ---- Stream memory operations (see `stream::memop`) ----

    fn wait_value32(
        &self,
        buf: &CudaBuffer,
        offset: usize,
        value: u32,
        cond: xstream_core::WaitCondition,
    ) -> Result<()> {
        memop::op(self, memop::Op::Wait32(value, cond), buf, offset)
    }

    fn wait_value64(
        &self,
        buf: &CudaBuffer,
        offset: usize,
        value: u64,
        cond: xstream_core::WaitCondition,
    ) -> Result<()> {
        memop::op(self, memop::Op::Wait64(value, cond), buf, offset)
    }

    fn write_value32(&self, buf: &CudaBuffer, offset: usize, value: u32) -> Result<()> {
        memop::op(self, memop::Op::Write32(value), buf, offset)
    }

    fn write_value64(&self, buf: &CudaBuffer, offset: usize, value: u64) -> Result<()> {
        memop::op(self, memop::Op::Write64(value), buf, offset)
    }

    fn as_raw(&self) -> CuStream {
        self.raw()
    }

    #[allow(unsafe_code)] // the trait's contract is unsafe; the body has no unsafe code.
    unsafe fn from_raw<'a>(device: &CudaDevice, raw: CuStream) -> Result<Borrowed<'a, Self>> {
        let sh = &device.shared;
        sh.enter()?;
        if raw != CuStream::LEGACY && raw != CuStream::PER_THREAD && !raw.0.is_null() {
            let ctx = sh.check("cuStreamGetCtx", ffi::stream_get_ctx(raw))?;
            if ctx != sh.raw_ctx {
                return Err(Error::WrongDevice(
                    "the raw stream belongs to another CUDA context".into(),
                ));
            }
        }
        let (flags, priority) = Self::read_props(device, raw)?;
        let handle = StreamHandle {
            raw,
            inner: OnceLock::new(),
            owned: false,
            dev: device.clone(),
        };
        Ok(Borrowed::new(Self::build(
            device,
            handle,
            None,
            flags,
            Self::plain_report(priority),
            Ownership::Borrowed,
            false,
            false,
        )?))
    }
}
