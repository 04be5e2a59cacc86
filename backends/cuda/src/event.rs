//! [`CudaEvent`].

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use xstream_core::completion::{poll_until, Completion};
use xstream_core::{Error, EventDesc, EventFlags, FlagReport, Result, Status};

use xstream_core::sync::wait_with_backoff;

use crate::ffi::{self, CuEvent};
use crate::flag_memo::{self, LazyReport};
use crate::stream::{StreamHandle, StreamState};
use crate::{error, CudaBackend, CudaDevice, CudaStream, TIMED_WAIT_BACKOFF};

mod ipc;

pub(crate) use ipc::{needs_bridge, wait_across};

/// Keeps a native event alive past its [`CudaEvent`]: made only when something else must hold
/// it (a `completed` poller) or when it came from cudarc; it then owns the destroy, which runs
/// when the event and every holder are gone. A plain event has none (no allocation per event).
struct EventHandle {
    raw: CuEvent,
    dev: CudaDevice,
    /// An adopted cudarc event ([`CudaEvent::from_cudarc`]): dropping it destroys the handle.
    foreign: Option<cudarc::driver::CudaEvent>,
}

impl Drop for EventHandle {
    fn drop(&mut self) {
        destroy(&self.dev, Some(self.raw), self.foreign.take(), None);
    }
}

/// Destroys `raw` (through `foreign`'s drop when cudarc owns it) and the bridge stream, in
/// `dev`'s context; from inside a host callback on the dispatcher thread (drops never block),
/// holding `dev` (and so its context) until then.
fn destroy(
    dev: &CudaDevice,
    raw: Option<CuEvent>,
    foreign: Option<cudarc::driver::CudaEvent>,
    bridge: Option<ffi::CuStream>,
) {
    let ctx = dev.shared.raw_ctx;
    let destroy = move || {
        match foreign {
            // cudarc binds its context and destroys its event.
            Some(ev) => drop(ev),
            None => {
                if let Some(raw) = raw {
                    if ffi::bind(ctx).is_ok() {
                        let _ = ffi::event_destroy(raw);
                    }
                }
            }
        }
        // The bridge holds only waits and records; the driver releases it after them.
        if let Some(s) = bridge {
            if ffi::bind(ctx).is_ok() {
                let _ = ffi::stream_destroy(s);
            }
        }
    };
    crate::stream::release_now_or_dispatched(dev, destroy);
}

#[derive(Default)]
struct RecordState {
    /// The stream whose capture recorded the event (queries on it then follow the capture
    /// rules).
    captured_by: Option<Arc<StreamState>>,
}

/// A CUDA event. `Send + Sync` (driver handles are thread-safe). "Recorded" is tracked by
/// xstream, because CUDA reports `CUDA_ERROR_INVALID_HANDLE` both for a never-recorded event
/// and for a timing-disabled one in `cuEventElapsedTime` (driver behaviour in docs/semantics.md).
pub struct CudaEvent {
    raw: CuEvent,
    /// The event's device (keeps its context alive).
    dev: CudaDevice,
    /// Set when the native event must outlive this value (`completed`) or is cudarc's: it
    /// then destroys the event; unset, this value's drop does (no allocation per event).
    keeper: OnceLock<Arc<EventHandle>>,
    /// An interprocess event's bridge stream in its own context, made by the first wait from
    /// a stream of another device (`ipc::wait_across`); destroyed with the event.
    bridge: OnceLock<ffi::CuStream>,
    flags: EventFlags,
    /// Made on first read (`flag_memo`): creation allocates nothing.
    report: LazyReport,
    /// Recorded at least once (record / query never take a lock for this).
    recorded: AtomicBool,
    /// The latest record was made during a capture; only then is `state` consulted.
    captured: AtomicBool,
    state: Mutex<RecordState>,
}

impl Drop for CudaEvent {
    fn drop(&mut self) {
        // With a keeper, the keeper destroys the event when its last holder goes.
        let raw = self.keeper.get().is_none().then_some(self.raw);
        let bridge = self.bridge.take();
        if raw.is_some() || bridge.is_some() {
            destroy(&self.dev, raw, None, bridge);
        }
    }
}

impl fmt::Debug for CudaEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaEvent")
            .field("raw", &self.raw)
            .field("flags", &self.flags)
            .finish()
    }
}

impl CudaEvent {
    /// `Event::record` on the stream of `handle` (of device `dev`, with xstream state
    /// `state`): also what a page-locked buffer's fence anchor calls after the stream's owner
    /// may have been dropped (`stream::fence`).
    pub(crate) fn record_on(
        &self,
        dev: &CudaDevice,
        handle: &StreamHandle,
        state: &Arc<StreamState>,
    ) -> Result<()> {
        // The checked layer (`Event::record`, a pinned buffer's host access) gated callbacks.
        self.dev.shared.bind()?;
        if dev.shared.raw_ctx != self.dev.shared.raw_ctx {
            // Reference row 11: a record must use the stream's own context.
            return Err(Error::WrongDevice(
                "an event can only be recorded on a stream of its own device/context".into(),
            ));
        }
        state.capture.gate_enqueue("event record")?;
        if let Err(c) = ffi::event_record(self.raw(), handle.raw()) {
            let e = self.dev.shared.fail("cuEventRecord", c);
            if matches!(e, Error::Capture { .. }) {
                state.capture.invalidate();
            }
            return Err(e);
        }
        let capturing = state.capture.is_capturing();
        if capturing || self.captured.load(Ordering::Acquire) {
            self.lock().captured_by = capturing.then(|| Arc::clone(state));
            self.captured.store(capturing, Ordering::Release);
        }
        self.recorded.store(true, Ordering::Release);
        Ok(())
    }

    /// Whether the event is of the context `ctx` (a fence anchor is made only for such).
    pub(crate) fn same_context(&self, dev: &CudaDevice) -> bool {
        dev.shared.raw_ctx == self.dev.shared.raw_ctx
    }

    pub(crate) fn create(dev: &CudaDevice, desc: &EventDesc) -> Result<Self> {
        let sh = &dev.shared;
        sh.bind()?;
        // The native bits and the event's flags (native bits read back, plus hints such as
        // EXTERNAL; INTERPROCESS implies DISABLE_TIMING), remembered per request.
        let (native, flags) = flag_memo::event_bits(desc.flags, desc.policy)?;
        let raw = sh.check("cuEventCreate", ffi::event_create(native))?;
        Ok(Self::plain(
            raw,
            dev,
            flags,
            LazyReport::event(desc.flags, desc.policy),
        ))
    }

    pub(crate) fn raw(&self) -> CuEvent {
        self.raw
    }

    /// A plain event of `raw` (the caller made it in `dev`'s context; this value destroys it).
    fn plain(raw: CuEvent, dev: &CudaDevice, flags: EventFlags, report: LazyReport) -> Self {
        Self {
            raw,
            dev: dev.clone(),
            keeper: OnceLock::new(),
            bridge: OnceLock::new(),
            flags,
            report,
            recorded: AtomicBool::new(false),
            captured: AtomicBool::new(false),
            state: Mutex::new(RecordState::default()),
        }
    }

    /// The keeper of the native event, made on first use (see [`EventHandle`]).
    fn keeper(&self) -> &Arc<EventHandle> {
        self.keeper.get_or_init(|| {
            Arc::new(EventHandle {
                raw: self.raw,
                dev: self.dev.clone(),
                foreign: None,
            })
        })
    }

    /// Adopts a cudarc event without copying (see `crate::interop`): xstream owns it from now
    /// on and cudarc's drop destroys the handle when the last xstream user is gone. `flags`
    /// are the flags it was created with (the driver cannot report them; a wrong value only
    /// changes which error `elapsed_ms` reports). It counts as recorded (its past is unknown).
    ///
    /// # Errors
    /// [`Error::WrongDevice`] for an event of another context.
    pub fn from_cudarc(
        dev: &CudaDevice,
        event: cudarc::driver::CudaEvent,
        flags: EventFlags,
    ) -> Result<Self> {
        dev.shared.enter()?;
        if event.context().cu_ctx() != dev.shared.raw_ctx.0 {
            return Err(Error::WrongDevice(
                "the cudarc event belongs to another CUDA context".into(),
            ));
        }
        let raw = CuEvent(event.cu_event());
        let ev = Self::plain(raw, dev, flags, LazyReport::ready(FlagReport::default()));
        // cudarc's drop destroys the handle: the keeper holds it from now on.
        let keeper = Arc::new(EventHandle {
            raw,
            dev: dev.clone(),
            foreign: Some(event),
        });
        let _ = ev.keeper.set(keeper);
        ev.recorded.store(true, Ordering::Release);
        Ok(ev)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RecordState> {
        xstream_core::sync::lock(&self.state)
    }

    /// Gates calls that are illegal on an event recorded by a capture in progress.
    fn gate(&self, op: &'static str) -> Result<bool> {
        if !self.recorded.load(Ordering::Acquire) {
            return Ok(false);
        }
        if !self.captured.load(Ordering::Acquire) {
            return Ok(true);
        }
        if let Some(st) = &self.lock().captured_by {
            if st.capture.is_capturing() {
                st.capture.gate(op)?;
            }
        }
        Ok(true)
    }

    fn fail(&self, api: &'static str, c: ffi::Code) -> Error {
        let e = self.dev.shared.fail(api, c);
        if matches!(e, Error::Capture { .. }) {
            if let Some(st) = &self.lock().captured_by {
                st.capture.invalidate();
            }
        }
        e
    }

    /// Whether the event was ever recorded (tracked by xstream).
    pub fn is_recorded(&self) -> bool {
        self.recorded.load(Ordering::Acquire)
    }
}

impl CudaEvent {
    /// `Event::synchronize`: `cuEventSynchronize`.
    fn synchronize_blocking(&self) -> Result<()> {
        self.dev.shared.bind()?;
        if !self.gate("event synchronize")? {
            return Ok(());
        }
        ffi::event_synchronize(self.raw()).map_err(|c| self.fail("cuEventSynchronize", c))
    }

    /// `Event::synchronize_timeout`: polls `cuEventQuery` with back-off until `timeout`.
    fn synchronize_within(&self, timeout: Duration) -> Result<()> {
        self.dev.shared.bind()?;
        if !self.gate("event synchronize")? {
            return Ok(());
        }
        let ready = wait_with_backoff(timeout, TIMED_WAIT_BACKOFF, || {
            match ffi::event_query(self.raw()) {
                Ok(()) => Ok(true),
                Err(ffi::NOT_READY) => Ok(false),
                Err(c) => Err(self.fail("cuEventQuery", c)),
            }
        })?;
        if ready {
            Ok(())
        } else {
            Err(Error::Timeout(timeout))
        }
    }
}

impl xstream_core::EventImpl for CudaEvent {
    type B = CudaBackend;
    type Raw = CuEvent;

    fn device_impl(&self) -> &CudaDevice {
        &self.dev
    }

    fn flags_impl(&self) -> EventFlags {
        self.flags
    }

    fn report_impl(&self) -> &FlagReport {
        self.report.get()
    }

    fn record_impl(&self, stream: &CudaStream) -> Result<()> {
        self.record_on(stream.cuda_device(), &stream.handle, &stream.state)
    }

    fn query_impl(&self) -> Result<Status> {
        self.dev.shared.bind()?;
        if !self.gate("event query")? {
            return Ok(Status::Ready);
        }
        match ffi::event_query(self.raw()) {
            Ok(()) => Ok(Status::Ready),
            Err(ffi::NOT_READY) => Ok(Status::Pending),
            Err(c) => Err(self.fail("cuEventQuery", c)),
        }
    }

    fn synchronize_impl(&self, timeout: Option<Duration>) -> Result<()> {
        match timeout {
            None => self.synchronize_blocking(),
            Some(t) => self.synchronize_within(t),
        }
    }

    fn elapsed_ms_impl(&self, end: &Self) -> Result<f32> {
        self.dev.shared.bind()?;
        if self.flags.contains(EventFlags::DISABLE_TIMING)
            || end.flags.contains(EventFlags::DISABLE_TIMING)
        {
            return Err(Error::TimingDisabled);
        }
        if !self.is_recorded() || !end.is_recorded() {
            return Err(Error::EventNotRecorded);
        }
        self.gate("elapsed_ms")?;
        end.gate("elapsed_ms")?;
        // CUDA_ERROR_NOT_READY (600) stays native, of kind `NotReady`.
        ffi::event_elapsed_ms(self.raw(), end.raw())
            .map_err(|c| self.fail("cuEventElapsedTime_v2", c))
    }

    fn completed_impl(&self) -> Result<Completion> {
        self.dev.shared.bind()?;
        if !self.gate("event completed")? {
            return Ok(Completion::ready(Ok(())));
        }
        // Dropped with the poller's closure: never during the process exit.
        let handle = crate::stream::BackgroundHeld::new(Arc::clone(self.keeper()));
        Ok(poll_until(Box::new(move || {
            // No driver call once the process exit began (`BackgroundCall`).
            let Some(_call) = crate::stream::BackgroundCall::begin() else {
                return Some(Err(Error::NotPermitted(
                    "event completed: the process is exiting",
                )));
            };
            // The shared poller thread: RELAXED so it never breaks a user's capture (a
            // driver call itself the first time on the thread, so after `begin`).
            ffi::ensure_relaxed_capture_mode();
            match ffi::event_query(handle.raw) {
                Ok(()) => Some(Ok(())),
                Err(ffi::NOT_READY) => None,
                Err(c) => {
                    let e = error::map("cuEventQuery", c);
                    if e.is_sticky() {
                        handle.dev.shared.poison(&e);
                    }
                    Some(Err(e))
                }
            }
        })))
    }

    fn as_raw_impl(&self) -> CuEvent {
        self.raw()
    }
}
