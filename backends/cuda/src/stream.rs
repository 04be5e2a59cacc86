//! [`CudaStream`]: the portable [`Stream`] over a `CUstream`, plus CUDA-only extensions.
//!
//! This file holds the type, its state and the [`Stream`] impl (status, waits, callbacks,
//! capture entry points, kernels); each other concern has its own file:
//! - `create`: owned, special default and shared construction;
//! - `capture`: begin/end under the capture cell, CUDA-only capture extensions;
//! - `callback`: `cuLaunchHostFunc` slots, `cuStreamAddCallback`;
//! - `memory`: memset, write, read, copies;
//! - `keep`: the keep-alive list and its hand-over on a side stream;
//! - `module_use`: the modules of launches not yet known complete;
//! - `memop`: `cuStreamWaitValue*` / `cuStreamWriteValue*`;
//! - `attribute`: stream attributes and the allocator slot;
//! - `native`: CUDA-only extras (cudarc interop, getters, external waits, managed attach);
//! - `drop`: `cuStreamDestroy` on the reaper thread and deferred release behind queued work;
//! - `fence`: the anchor a page-locked buffer records its fence through.

use std::fmt;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use xstream_core::callback::{BoxedCallback, PanicSlot};
use xstream_core::sync::{lock, wait_with_backoff};
use xstream_core::{
    Allocator, AllocatorSlot, Borrowed, BufferView, CaptureCell, CaptureErrorKind, CaptureMode,
    CreationReport, Error, Kernel, Ownership, Readback, Result, Status, Stream, StreamAttr,
    StreamAttrValue, StreamFlags, StreamImpl,
};

use crate::ffi::{self, CuStream};
use crate::memory::Keep;
use crate::{
    CudaBackend, CudaBuffer, CudaDevice, CudaEvent, CudaFunction, CudaGraph, TIMED_WAIT_BACKOFF,
};
use xstream_core::module::{delay_nanoseconds, lcg_launch, KernelArg, LaunchConfig};

/// A checked byte range of a CUDA buffer (what the checked layer hands the backend).
pub(crate) type Span<'a> = BufferView<'a, CudaBuffer>;

mod attribute;
mod callback;
mod capture;
mod create;
mod drop;
mod fence;
mod keep;
pub(crate) mod memop;
mod memory;
mod module_use;
mod native;

pub use capture::{exchange_thread_capture_mode, CaptureInfo, DependencyUpdate};
pub use native::MemAttach;

pub use drop::undispatched_driver_jobs;
use drop::UseMark;
pub(crate) use drop::{
    dispatch_driver_job, release_now_or_dispatched, BackgroundCall, BackgroundHeld,
};

/// Owns (or borrows) the native handle; destroys an owned one when the last reference goes.
pub(crate) struct StreamHandle {
    /// The native handle; read through [`StreamHandle::raw`], which records the use.
    native: CuStream,
    /// Set once the handle was handed out for anything but its teardown ([`StreamHandle::raw`]):
    /// until then no work can have been enqueued on the stream, so dropping it needs no hand-off
    /// to the reaper (`drop` module).
    used: UseMark,
    /// The cudarc view, made on first use (`cudarc_stream()`), so creation pays nothing for it.
    pub inner: OnceLock<Arc<cudarc::driver::CudaStream>>,
    owned: bool,
    dev: CudaDevice,
}

impl StreamHandle {
    /// A handle for a stream no one has used yet.
    pub(crate) fn new(raw: CuStream, owned: bool, dev: CudaDevice) -> Self {
        Self {
            native: raw,
            used: UseMark::default(),
            inner: OnceLock::new(),
            owned,
            dev,
        }
    }

    /// The native handle, for any use: enqueueing, querying, handing it out. Records the use
    /// (once: a relaxed load of a field beside the handle, a store only the first time).
    #[inline]
    pub(crate) fn raw(&self) -> CuStream {
        self.used.mark();
        self.native
    }

    /// The stream's device.
    pub(crate) fn device(&self) -> &CudaDevice {
        &self.dev
    }

    /// Whether [`StreamHandle::raw`] was ever called: `false` means no work was ever enqueued
    /// on the stream through xstream, nor could be through a handle it gave out.
    pub(crate) fn was_used(&self) -> bool {
        self.used.get()
    }
}

/// Per-stream xstream state.
///
/// Laid out for cold caches (a real driver's call evicts the caller's lines, docs/hot-paths.md):
/// what every enqueue and wait reads comes first and shares the struct's first cache line
/// (the capture cell, the panic slot's presence, the module-use marks `seq` / `scanned` /
/// `len`, the keep list's `end` / `first`; `Keeps` starts with those).
#[derive(Default)]
#[repr(C, align(64))]
pub(crate) struct StreamState {
    pub capture: CaptureCell,
    pub panics: LazyPanics,
    /// Modules of launches enqueued since the last observed completion (see `crate::module`):
    /// the marks here, the list in `module_list`.
    modules: module_use::ModuleUses,
    /// Buffers (and bytes) used by work not yet known complete (`keep` module).
    keep: keep::Keeps,
    module_list: module_use::ModuleList,
    allocator: AllocatorSlot,
    /// What the capture in progress references (moves into the graph).
    capture_keep: Mutex<Vec<Keep>>,
    /// The mark before a capture, for page-locked buffers' fence anchors (`fence` module).
    fence_mark: fence::FenceMark,
    priority: AtomicI32,
}

/// A stream's [`StreamState`], allocated by the first operation that reads it: a stream
/// created and dropped unused allocates none (one allocation per create, the handle's), and
/// its drop, which checks [`LazyState::untouched`] first, does not make one either. It derefs
/// to the state's `Arc`, so users read `s.state.keep` and clone `&s.state` as before.
pub(crate) struct LazyState {
    cell: OnceLock<Arc<StreamState>>,
    /// A persistent stream (`StreamFlags::PERSISTENT`): read as `s.state.persistent`, without
    /// making the state.
    persistent: bool,
    /// A fast-sync stream (`StreamFlags::FAST_SYNC`), read the same way.
    fast_sync: bool,
    /// The priority the state starts with (`StreamState::priority` once made, which
    /// `set_attribute` changes).
    initial_priority: i32,
}

impl LazyState {
    fn new(persistent: bool, fast_sync: bool, priority: i32) -> Self {
        Self {
            cell: OnceLock::new(),
            persistent,
            fast_sync,
            initial_priority: priority,
        }
    }

    /// The state, made now if no operation made it yet.
    #[inline]
    fn get(&self) -> &Arc<StreamState> {
        self.cell.get_or_init(|| {
            Arc::new(StreamState {
                priority: AtomicI32::new(self.initial_priority),
                ..StreamState::default()
            })
        })
    }

    /// Whether no operation has read the state yet (then it holds nothing: no kept buffer,
    /// module use, capture, callback or allocator).
    pub(crate) fn untouched(&self) -> bool {
        self.cell.get().is_none()
    }

    /// The stream's priority, without making the state.
    fn priority(&self) -> i32 {
        match self.cell.get() {
            Some(st) => st.priority.load(Ordering::Relaxed),
            None => self.initial_priority,
        }
    }
}

impl std::ops::Deref for LazyState {
    type Target = Arc<StreamState>;

    #[inline]
    fn deref(&self) -> &Arc<StreamState> {
        self.get()
    }
}

/// A stream's panic slot, made by its first host callback (creating a stream allocates none).
#[derive(Default)]
pub(crate) struct LazyPanics(OnceLock<Arc<PanicSlot>>);

impl LazyPanics {
    /// The slot for a new callback.
    pub(crate) fn slot(&self) -> Arc<PanicSlot> {
        Arc::clone(self.get())
    }

    /// The slot, made on first use (no reference count taken).
    pub(crate) fn get(&self) -> &Arc<PanicSlot> {
        self.0.get_or_init(Default::default)
    }

    /// Reports (and clears) a recorded panic ([`PanicSlot::take`]); none without a slot.
    pub(crate) fn take(&self) -> Result<()> {
        match self.0.get() {
            Some(p) => p.take(),
            None => Ok(()),
        }
    }
}

/// A CUDA stream.
///
/// `Send + Sync`: the CUDA driver accepts a stream from any thread; every call binds the
/// device's context first. Identity is [`Stream::id`] (`cuStreamGetId`), never the handle,
/// which the driver recycles after destroy (driver behaviour in docs/semantics.md). Dropping an owned stream
/// neither blocks nor cancels: `cuStreamDestroy` (row 8) runs on xstream's CUDA reaper thread
/// (inline for a stream never used, which has no work), and the buffers its queued work uses
/// are released by a host function behind that work. Work already complete at the drop (one
/// `cuStreamQuery`) releases what it used on the dropping thread instead, as dropping those
/// buffers directly would (`cuMemFree` waits for the device's work, see docs/semantics.md).
///
/// Laid out for cold caches (docs/hot-paths.md): the fields every call reads (the state's
/// pointer, the native handle and the context, copied from the handle and the device so that
/// the hot paths read neither) are first, in one cache line.
#[repr(C, align(64))]
pub struct CudaStream {
    /// Made by the first operation that needs it ([`LazyState`]).
    pub(crate) state: LazyState,
    /// `handle.native`, read here ([`CudaStream::raw`]).
    native: CuStream,
    /// The device's context (`Shared::raw_ctx`), bound by [`CudaStream::bind`].
    ctx: ffi::CuContext,
    /// Whether [`CudaStream::raw`] recorded the use in the handle already.
    marked: std::sync::atomic::AtomicBool,
    /// The native handle and the device (the stream's one device reference).
    pub(crate) handle: Arc<StreamHandle>,
    /// `cuStreamGetId`, read on first use (creation makes no extra driver call).
    id: OnceLock<u64>,
    name: Option<String>,
    flags: StreamFlags,
    /// The flag part is made on first read (`flag_memo`).
    report: crate::flag_memo::LazyCreationReport,
    ownership: Ownership,
}

impl fmt::Debug for CudaStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaStream")
            .field("id", &self.id.get())
            .field("raw", &self.handle.native)
            .field("name", &self.name)
            .field("flags", &self.flags)
            .field("priority", &self.priority())
            .field("ownership", &self.ownership)
            .field("capture", &self.state.capture.status())
            .finish()
    }
}

impl CudaStream {
    // -- internal helpers ---------------------------------------------------------------

    /// `handle.raw()` from this stream's own line: the handle's use mark is written once.
    #[inline]
    fn raw(&self) -> CuStream {
        if !self.marked.load(Ordering::Relaxed) {
            self.handle.raw();
            self.marked.store(true, Ordering::Relaxed);
        }
        self.native
    }

    /// `Shared::enter` (with the callback gate): for a CUDA-only entry point.
    fn enter(&self) -> Result<()> {
        self.handle.dev.shared.enter()
    }

    /// `Shared::bind` (no gate): for an operation of the checked `Stream`, with the context
    /// copied into the stream (the device's shared state is read only on failure).
    #[inline]
    fn bind(&self) -> Result<()> {
        ffi::bind(self.ctx).map_err(|c| self.handle.dev.shared.fail("cuCtxSetCurrent", c))
    }

    /// The device's context (`Shared::raw_ctx`), from the stream's own line.
    pub(crate) fn raw_ctx(&self) -> ffi::CuContext {
        self.ctx
    }

    /// Maps a failed enqueue; capture errors invalidate the xstream capture state too.
    fn fail(&self, api: &'static str, code: ffi::Code) -> Error {
        let e = self.handle.dev.shared.fail(api, code);
        if matches!(e, Error::Capture { .. }) {
            self.state.capture.invalidate();
        }
        e
    }

    fn check<T>(&self, api: &'static str, r: ffi::CuResult<T>) -> Result<T> {
        r.map_err(|c| self.fail(api, c))
    }

    /// Maps the result of a `cuLaunchKernel` (the success path inline: it is every launch's).
    #[inline]
    pub(crate) fn check_launch(&self, r: ffi::CuResult<()>) -> Result<()> {
        match r {
            Ok(()) => Ok(()),
            Err(c) => Err(self.fail_launch(c)),
        }
    }

    /// The error path of [`CudaStream::check_launch`], out of line.
    #[cold]
    #[inline(never)]
    fn fail_launch(&self, code: ffi::Code) -> Error {
        self.fail("cuLaunchKernel", code)
    }

    /// The raw handle, for the launch path.
    pub(crate) fn raw_stream(&self) -> CuStream {
        self.raw()
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
}

impl CudaStream {
    /// The marks a wait takes before it waits: the keep-alive list's and the module uses'.
    #[inline]
    pub(super) fn wait_marks(&self) -> (u64, u64) {
        (self.keep_mark(), self.state.modules.seq())
    }

    /// Releases what the work before `marks` held, once a wait saw that work complete.
    #[inline]
    pub(super) fn release_up_to(&self, (keep, modules): (u64, u64)) {
        self.completed_up_to(keep);
        let list = &self.state.module_list;
        self.state.modules.completed_up_to(list, modules);
    }

    /// `Stream::synchronize`: `cuStreamSynchronize` (or the spinning wait of a fast-sync
    /// stream).
    fn synchronize_blocking(&self) -> Result<()> {
        let _span = tracing::trace_span!("stream_synchronize", stream = ?self.handle.native, name = self.name.as_deref()).entered();
        if self.state.fast_sync {
            return self.synchronize_spin();
        }
        self.bind()?;
        if self.state.persistent {
            return self.state.panics.take();
        }
        self.gate("synchronize")?;
        let marks = self.wait_marks();
        self.check("cuStreamSynchronize", ffi::stream_synchronize(self.raw()))?;
        self.release_up_to(marks);
        self.state.panics.take()
    }

    /// `Stream::synchronize_timeout`: polls `cuStreamQuery` with back-off until `timeout`.
    fn synchronize_within(&self, timeout: Duration) -> Result<()> {
        self.bind()?;
        if self.state.persistent {
            return self.state.panics.take();
        }
        self.gate("synchronize_timeout")?;
        let marks = self.wait_marks();
        let backoff = TIMED_WAIT_BACKOFF.spinning(self.state.fast_sync);
        let ready = wait_with_backoff(timeout, backoff, || match ffi::stream_query(self.raw()) {
            Ok(()) => Ok(true),
            Err(ffi::NOT_READY) => Ok(false),
            Err(c) => Err(self.fail("cuStreamQuery", c)),
        })?;
        if !ready {
            return Err(Error::Timeout(timeout));
        }
        self.release_up_to(marks);
        self.state.panics.take()
    }
}

impl StreamImpl for CudaStream {
    type B = CudaBackend;
    type Raw = CuStream;

    fn device_impl(&self) -> &CudaDevice {
        &self.handle.dev
    }

    fn id_impl(&self) -> u64 {
        *self.id.get_or_init(|| {
            // The driver's id (unique, never reused: driver behaviour in docs/semantics.md). Should the call fail
            // (a poisoned context), a process-local id from a disjoint range keeps ids unique.
            static FALLBACK: AtomicU64 = AtomicU64::new(1);
            // A created stream carries its context (driver behaviour in docs/semantics.md), so no bind is needed
            // (binding is refused inside host callbacks); special handles are primed at
            // creation, when binding is allowed.
            match ffi::stream_get_id(self.raw()) {
                Ok(id) => id,
                Err(_) => (1 << 63) | FALLBACK.fetch_add(1, Ordering::Relaxed),
            }
        })
    }

    fn name_impl(&self) -> Option<&str> {
        self.name.as_deref()
    }

    fn flags_impl(&self) -> StreamFlags {
        self.flags
    }

    fn priority_impl(&self) -> i32 {
        self.state.priority()
    }

    fn report_impl(&self) -> &CreationReport {
        self.report.get()
    }

    fn ownership_impl(&self) -> Ownership {
        self.ownership
    }

    fn query_impl(&self) -> Result<Status> {
        self.bind()?;
        if self.state.persistent {
            return Ok(Status::Ready);
        }
        self.gate("query")?;
        let marks = self.wait_marks();
        match ffi::stream_query(self.raw()) {
            Ok(()) => {
                self.release_up_to(marks);
                Ok(Status::Ready)
            }
            Err(ffi::NOT_READY) => Ok(Status::Pending),
            Err(c) => Err(self.fail("cuStreamQuery", c)),
        }
    }

    fn synchronize_impl(&self, timeout: Option<Duration>) -> Result<()> {
        match timeout {
            None => self.synchronize_blocking(),
            Some(t) => self.synchronize_within(t),
        }
    }

    fn wait_event_impl(&self, event: &CudaEvent) -> Result<()> {
        self.bind()?;
        self.gate_enqueue("wait_event")?;
        if crate::event::needs_bridge(event, self.handle.dev.shared.raw_ctx) {
            // The driver crashes on this wait made directly (`crate::event` ipc module docs).
            return crate::event::wait_across(self, event);
        }
        self.check(
            "cuStreamWaitEvent",
            ffi::stream_wait_event(self.raw(), event.raw(), 0),
        )
    }

    fn enqueue_callback_impl(&self, f: BoxedCallback) -> Result<()> {
        self.bind()?;
        self.enqueue_slot(f)
    }

    fn begin_capture_impl(&self, mode: CaptureMode) -> Result<()> {
        self.bind()?;
        self.capture_allowed()?;
        if self.state.persistent {
            return Err(Error::Capture {
                op: "begin_capture",
                kind: CaptureErrorKind::AlreadyCapturing,
            });
        }
        self.begin_capture_inner(mode)
    }

    fn end_capture_impl(&self) -> Result<CudaGraph> {
        self.bind()?;
        let g = self.end_capture_inner();
        if self.state.persistent {
            // A persistent stream keeps recording (docs/semantics.md).
            self.begin_capture_inner(CaptureMode::Relaxed)?;
        }
        g
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

    fn copy_peer_impl(&self, src: Span<'_>, dst: Span<'_>) -> Result<()> {
        memory::copy_peer(self, src, dst)
    }

    fn alloc_async_impl(&self, len: usize) -> Result<CudaBuffer> {
        self.gate_enqueue("alloc_async")?;
        crate::memory::alloc_ordered(self, len)
    }

    // --- launch builder ---

    fn launch_kernel_with_impl(
        &self,
        f: &CudaFunction,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, CudaBuffer>],
        attrs: &xstream_core::LaunchAttrs,
    ) -> Result<()> {
        self.bind()?;
        self.gate_enqueue("launch_kernel")?;
        crate::module::launch_ex(self, f, cfg, args, attrs, crate::module::Layout::Required)
    }

    #[allow(unsafe_code)]
    unsafe fn launch_kernel_unchecked_impl(
        &self,
        f: &CudaFunction,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, CudaBuffer>],
        attrs: &xstream_core::LaunchAttrs,
    ) -> Result<()> {
        self.bind()?;
        self.gate_enqueue("launch_kernel")?;
        // SAFETY: this function's caller promised that the arguments match the kernel's
        // parameters (the contract of `enqueue_launch_unchecked`).
        let promise = unsafe { ffi::Trusted::new() };
        crate::module::launch_ex(
            self,
            f,
            cfg,
            args,
            attrs,
            crate::module::Layout::Trusted(promise),
        )
    }

    // --- end of launch builder ---

    fn as_raw_impl(&self) -> CuStream {
        self.raw()
    }

    fn fence_anchor_impl(
        &self,
        event: &CudaEvent,
    ) -> Option<Arc<dyn xstream_core::FenceAnchor<CudaBackend>>> {
        fence::CudaFenceAnchor::new(self, event)
            .map(|a| Arc::new(a) as Arc<dyn xstream_core::FenceAnchor<CudaBackend>>)
    }

    #[allow(unsafe_code)] // the trait's contract is unsafe; the body has no unsafe code.
    unsafe fn borrow_raw_impl<'a>(
        device: &CudaDevice,
        raw: CuStream,
    ) -> Result<Borrowed<'a, Self>> {
        let sh = &device.shared;
        sh.bind()?;
        if raw != CuStream::LEGACY && raw != CuStream::PER_THREAD && !raw.0.is_null() {
            let ctx = sh.check("cuStreamGetCtx", ffi::stream_get_ctx(raw))?;
            if ctx != sh.raw_ctx {
                return Err(Error::WrongDevice(
                    "the raw stream belongs to another CUDA context".into(),
                ));
            }
        }
        let (flags, priority) = Self::read_props(device, raw)?;
        let handle = StreamHandle::new(raw, false, device.clone());
        Ok(Borrowed::new(Self::build(
            handle,
            None,
            flags,
            crate::flag_memo::LazyCreationReport::ready(Self::plain_report(priority)),
            Ownership::Borrowed,
            false,
            false,
        )?))
    }

    /// One pooled event (the context's pool, `crate::event_pool`): `cuEventRecord` on `other`,
    /// `cuStreamWaitEvent` here; no event is created once the pool is warm.
    fn wait_stream_impl(&self, other: &Self) -> Result<()> {
        self.bind()?;
        if other.handle.dev.shared.raw_ctx != self.handle.dev.shared.raw_ctx {
            return Err(Error::WrongDevice(
                "wait_stream: the streams belong to different CUDA contexts".into(),
            ));
        }
        if Arc::ptr_eq(&self.handle, &other.handle) || self.raw() == other.raw() {
            return Ok(());
        }
        self.gate_enqueue("join")?;
        other.gate_enqueue("join")?;
        let sh = &self.handle.dev.shared;
        sh.events
            .order_after(sh, self.raw(), [other.raw()])
            .inspect_err(|e| {
                if matches!(e, Error::Capture { .. }) {
                    self.state.capture.invalidate();
                }
            })
    }

    fn copy_to_device_impl(&self, src: xstream_core::PinnedSpan, dst: Span<'_>) -> Result<()> {
        memory::copy_to_device(self, src, dst)
    }

    fn copy_to_host_impl(&self, src: Span<'_>, dst: xstream_core::PinnedSpan) -> Result<()> {
        memory::copy_to_host(self, src, dst)
    }

    fn memset_impl(&self, dst: Span<'_>, value: xstream_core::MemsetPattern) -> Result<()> {
        memory::memset(self, dst, value)
    }

    fn write_from_blocking_impl(&self, dst: Span<'_>, src: &[u8]) -> Result<()> {
        memory::write_from_blocking(self, dst, src)
    }

    fn read_into_blocking_impl(&self, src: Span<'_>, dst: &mut [u8]) -> Result<()> {
        memory::read_into_blocking(self, src, dst)
    }

    fn write_impl(&self, dst: Span<'_>, data: Vec<u8>) -> Result<()> {
        memory::write(self, dst, data)
    }

    fn read_impl(&self, src: Span<'_>) -> Result<Readback> {
        memory::read(self, src)
    }

    fn copy_impl(&self, src: Span<'_>, dst: Span<'_>) -> Result<()> {
        memory::copy(self, src, dst)
    }

    fn free_async_impl(&self, buf: CudaBuffer) -> Result<()> {
        self.gate_enqueue("free_async")?;
        crate::memory::free_ordered(self, buf)
    }

    fn launch_builtin_impl(&self, kernel: Kernel<'_, CudaBuffer>) -> Result<()> {
        self.bind()?;
        self.gate_enqueue("launch")?;
        if matches!(kernel, Kernel::Random { .. }) {
            // Answered before the builtin module is needed.
            return Err(no_random());
        }
        let k = self.handle.dev.shared.kernels()?;
        match kernel {
            Kernel::Delay(d) => crate::module::launch(
                self,
                &k.delay,
                &LaunchConfig::single(),
                &[KernelArg::U64(delay_nanoseconds(d))],
            ),
            Kernel::Lcg { buf, rounds } => {
                let (words, cfg) = lcg_launch(buf.len_bytes())?;
                crate::module::launch(
                    self,
                    &k.lcg,
                    &cfg,
                    &[
                        KernelArg::Buffer(buf),
                        KernelArg::U32(words),
                        KernelArg::U32(rounds),
                    ],
                )
            }
            Kernel::Random { .. } => Err(no_random()),
            #[cfg(feature = "testing")]
            Kernel::Fault => self.check("cuLaunchKernel", ffi::launch_fault(k.fault, self.raw())),
            // xstream-core's test kernels, turned on by another crate of the build.
            #[cfg(not(feature = "testing"))]
            #[allow(unreachable_patterns)]
            _ => Err(Error::unsupported(
                xstream_core::BackendKind::Cuda,
                "test-only kernels (xstream-cuda's `testing` feature is off)",
            )),
        }
    }

    fn reduce_impl(&self, dst: Span<'_>, src: Span<'_>, r: xstream_core::Reduction) -> Result<()> {
        self.bind()?;
        self.gate_enqueue("reduce")?;
        let k = self.handle.dev.shared.kernels().map_err(|e| {
            xstream_core::reduce::unsupported(
                xstream_core::BackendKind::Cuda,
                &format!("the builtin module did not load: {e}"),
            )
        })?;
        let which = match r.ty {
            xstream_core::ReduceType::F32 => 0,
            xstream_core::ReduceType::I32 => 1,
            xstream_core::ReduceType::I16 => 2,
            xstream_core::ReduceType::I8 => 3,
            xstream_core::ReduceType::F16 => 4,
            xstream_core::ReduceType::BF16 => 5,
            xstream_core::ReduceType::I64 => 6,
        };
        let n = (dst.len() / r.ty.size()) as u64;
        let grid = u32::try_from(n.div_ceil(256))
            .unwrap_or(u32::MAX)
            .clamp(1, 4096);
        crate::module::launch(
            self,
            &k.reduce[which],
            &LaunchConfig::linear(grid, 256),
            &[
                KernelArg::Buffer(dst.buffer()),
                KernelArg::U64(dst.offset() as u64),
                KernelArg::Buffer(src.buffer()),
                KernelArg::U64(src.offset() as u64),
                KernelArg::U64(n),
                KernelArg::U32(r.kind as u32),
            ],
        )
    }

    fn launch_kernel_impl(
        &self,
        f: &CudaFunction,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, CudaBuffer>],
    ) -> Result<()> {
        self.bind()?;
        self.gate_enqueue("launch_kernel")?;
        crate::module::launch(self, f, cfg, args)
    }

    fn value_op_impl(&self, word: Span<'_>, op: xstream_core::memop::ValueOp) -> Result<()> {
        memop::op(self, op, word)
    }

    /// Stream-ordered buffers add this stream to their users; plain ones are kept by this
    /// stream's keep-alive list and remembered for `free_async` (see `crate::memory`).
    fn record_use_impl(&self, buf: &CudaBuffer) -> Result<()> {
        self.bind()?;
        crate::memory::record_use(self, buf)
    }
}

/// The answer to [`Kernel::Random`]: the builtin module has no random-number kernel, so the
/// device lacks `Capabilities::RANDOM`.
fn no_random() -> Error {
    xstream_core::random::unsupported(
        xstream_core::BackendKind::Cuda,
        "the CUDA backend has no random-number kernel",
    )
}
