//! Releasing a [`CudaStream`]: `cuStreamDestroy` of an owned handle and the deferred release,
//! behind the stream's work, of what that work still uses.
//!
//! **Drop never waits for the stream's work, whoever makes the driver wait.** The driver's
//! `cuStreamDestroy` returns at once and releases the stream after its work, and
//! `cuLaunchHostFunc` only enqueues, but a tool that interposes on the driver may make either
//! call wait for the stream's pending work: under compute-sanitizer, dropping a stream held
//! by a host-side gate blocked until the gate gave up (the conformance check
//! `stream_drop_does_not_cancel`, GPU run of 2026-11-24, and `destroy_with_pending_work_completes_it`
//! in GPU run 2, which missed a 20 ms bound behind a 50 ms kernel). So the caller's thread makes
//! no such call: only the end of a capture in progress (which must happen on the capturing
//! thread and does not wait for work) runs there; the hand-off of the keep-alive list and
//! `cuStreamDestroy` run on the backend's reaper thread ([`reap`]), in drop order. A stream
//! whose work never completes can then stall only the reaper (later drops' releases wait
//! behind it), never the thread that dropped it.
//!
//! **A stream that never had work is destroyed inline.** The rule is about waiting for work:
//! a stream whose handle xstream never handed out ([`StreamHandle::raw`] never called: no
//! enqueue, query, capture or interop view) has no work, nothing to hand off and no capture to
//! end, so `cuStreamDestroy` runs on the dropping thread, as before the reaper existed (no
//! boxed job, no cross-thread wake-up, no driver call racing the caller's next one on another
//! thread). Inside a host callback (no driver calls there) the reaper is used still.
//!
//! **What completed work used is released on the dropping thread.** One `cuStreamQuery`
//! (which never waits) tells whether the stream's work completed; if so, its keep-alive list
//! and module uses are dropped before `drop` returns, so the `cuMemFree` of a buffer whose last
//! user was this stream happens in the caller's program order, like the drop of the buffer
//! itself, and never later on the dispatcher thread, where it would wait for the whole device
//! at a moment nobody chose (see `CudaStream::release_completed`). Only work still pending is
//! handed to a host function behind it, so nothing is released before the work that used it
//! completed and the drop waits for none of it. Lists handed over earlier (the `keep`
//! module) are the side stream's: their host functions run once the device passed their
//! events and need nothing from the drop.
//!
//! **The side stream goes with the stream.** A stream that handed its keep-alive list over
//! has a private side stream (`keep` module); the reaper destroys it in the same job as the
//! stream's own teardown, after handing off the list. `cuStreamDestroy` returns at once and
//! the driver still runs the side stream's queued waits and host functions (row 8), so the
//! lists handed over are released after their work, as if the side stream lived on.
//!
//! **Host functions on the stream are the fallback while it lives.** A live stream hands its
//! full keep-alive list over on the side stream; [`release_after`] on the stream itself, which
//! would stall it until a host thread ran the function, serves that hand-over only when the
//! side stream, its event or its calls fail, and the teardown above. [`release_after`] is
//! also the host function the side stream runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use xstream_core::callback::{in_callback, on_dispatcher, try_dispatch, CallbackSlot, PanicSlot};
use xstream_core::reaper::{ReapJob, Reaper};

use super::{lock, CudaStream, StreamHandle};
use crate::device::track_pending;
use crate::ffi::{self, CuStream};
use crate::memory::Keep;
use crate::CudaDevice;

impl Drop for StreamHandle {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        if self.inner.get().is_some_and(|i| Arc::strong_count(i) > 1) {
            // Somebody still holds the cudarc wrapper handed out by `cudarc_stream()`: never
            // destroy a handle that is still reachable. The stream is leaked (documented).
            tracing::warn!(stream = ?self.native, "cudarc wrapper still shared; CUstream not destroyed");
            return;
        }
        let (raw, dev) = (self.native, self.dev.clone());
        if destroy_inline(self.was_used(), in_callback()) {
            // Never used: no work the destroy could wait for (module docs).
            if ffi::bind(dev.shared.raw_ctx).is_ok() {
                if let Err(c) = ffi::stream_destroy(raw) {
                    tracing::debug!(code = c, "cuStreamDestroy failed");
                }
            }
            return;
        }
        // On the reaper (module docs): the driver releases the stream after its work (row 8),
        // and should a tool make `cuStreamDestroy` wait for that work, only the reaper waits.
        reap(Box::new(move || {
            driver_prelude();
            if ffi::bind(dev.shared.raw_ctx).is_ok() {
                if let Err(c) = ffi::stream_destroy(raw) {
                    tracing::debug!(code = c, "cuStreamDestroy failed");
                }
            }
        }));
    }
}

/// Whether a stream handle was ever used (see [`StreamHandle::raw`]); only ever goes from unused
/// to used. Relaxed ordering is enough: the mark is read by the thread that drops the last
/// reference, which the drop of every other reference (and the use before it) happens-before.
#[derive(Debug, Default)]
pub(super) struct UseMark(AtomicBool);

impl UseMark {
    /// A mark already set (a handle that may have been used before xstream got it).
    pub(super) fn used() -> Self {
        Self(AtomicBool::new(true))
    }

    /// Records a use: a load, and a store only the first time (no read-modify-write, so a
    /// used handle's hot paths never write its cache line again).
    #[inline]
    pub(super) fn mark(&self) {
        if !self.0.load(Ordering::Relaxed) {
            self.0.store(true, Ordering::Relaxed);
        }
    }

    /// Whether [`UseMark::mark`] was called (or the mark was made used).
    pub(super) fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Whether an owned stream's teardown may run on the dropping thread: only when its handle was
/// never used (so no work was ever enqueued on it) and the thread may call the driver (not
/// inside a host callback).
fn destroy_inline(used: bool, in_callback: bool) -> bool {
    !used && !in_callback
}

/// The CUDA backend's reaper (`xstream_core::reaper`: order, panics, the exit flush and
/// parking). Its exit handler is registered when its thread starts, after the driver was
/// initialised, so it runs before the driver's own exit teardown. Streams dropped at the end
/// of `main` leave teardown jobs on it; one still calling the driver (`cuStreamDestroy`,
/// `cuLaunchHostFunc`) while the driver tears itself down races with it: `erased_runtime`
/// logged refused deferred releases at exit (GPU runs 15 and 17) and `ipc_memory` ended with
/// signal 11 after its tests passed under compute-sanitizer (issue 21). Jobs that call the
/// driver start with [`driver_prelude`], so the reaper's calls never break a user's capture.
static REAPER: Reaper = Reaper::new(
    "xstream-cuda-reaper",
    || ffi::register_at_exit(reaper_at_exit),
    ffi::ensure_relaxed_capture_mode,
);

/// The process-exit handler of [`REAPER`] (`atexit`): the reaper's exit flush, then a wait
/// (at most [`EXIT_CALL_LIMIT`]) for a background driver call already under way
/// ([`BackgroundCall`]), so that none overlaps the driver's exit teardown.
extern "C" fn reaper_at_exit() {
    REAPER.at_exit();
    let t = std::time::Instant::now();
    while BACKGROUND_CALLS.load(Ordering::SeqCst) != 0 && t.elapsed() < EXIT_CALL_LIMIT {
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
}

/// How long the exit handler waits for a background driver call under way.
const EXIT_CALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Background driver calls under way (the fault watcher's query on the shared poller thread).
static BACKGROUND_CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A driver call made by one of the backend's background threads (the fault watcher), which
/// must not overlap the driver's exit teardown: GPU run 28 saw the conformance suite's process
/// end with signal 11 under compute-sanitizer, in the watcher's `cuStreamQuery` on the poller
/// thread after every test had passed. [`BackgroundCall::begin`] refuses once the exit began;
/// while one is held, the exit handler waits for it ([`reaper_at_exit`]). The counter is raised
/// before the exit flag is read, and the handler sets the flag before it reads the counter
/// (both sequentially consistent), so either the call sees the exit or the exit sees the call.
pub(crate) struct BackgroundCall(());

impl BackgroundCall {
    /// `None` once the process exit began: make no driver call then. Also starts the reaper
    /// (and so registers the exit handler) if nothing did yet.
    pub(crate) fn begin() -> Option<Self> {
        REAPER.start();
        BACKGROUND_CALLS.fetch_add(1, Ordering::SeqCst);
        if REAPER.exiting() {
            BACKGROUND_CALLS.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(Self(()))
    }
}

impl Drop for BackgroundCall {
    fn drop(&mut self) {
        BACKGROUND_CALLS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A value one of the backend's background threads holds (a closure on the shared poller: the
/// fault watcher's device state, a `completed` poller's event) whose drop may call the driver:
/// the last reference to a device's shared state destroys its sentinel stream and pooled
/// events, the last holder of an event destroys it. Dropped as a [`BackgroundCall`], so the
/// exit handler waits for a drop under way; once the process exit began it is leaked instead
/// (the driver releases everything at exit). GPU runs 29 and 30: the fault watcher, which ends
/// once the exit began, dropped the last reference to a device's state on the poller thread,
/// and that teardown's driver calls overlapped the exit handlers after the backend's: the
/// modules test binary died with signal 11 at exit under compute-sanitizer in 3 of 3 runs
/// from the commit that made the watcher end (0 of 3 the commit before it).
pub(crate) struct BackgroundHeld<T>(Option<T>);

impl<T> BackgroundHeld<T> {
    /// Holds `value` for a background thread.
    pub(crate) fn new(value: T) -> Self {
        Self(Some(value))
    }
}

impl<T> std::ops::Deref for BackgroundHeld<T> {
    type Target = T;
    fn deref(&self) -> &T {
        match &self.0 {
            Some(v) => v,
            // Only `drop` takes the value, and nothing derefs after it.
            None => unreachable!("a BackgroundHeld value is present until it is dropped"),
        }
    }
}

impl<T> Drop for BackgroundHeld<T> {
    fn drop(&mut self) {
        if let Some(v) = self.0.take() {
            match BackgroundCall::begin() {
                Some(_call) => drop(v),
                None => std::mem::forget(v),
            }
        }
    }
}

/// Runs `job`, which calls the driver, on the callback dispatcher (from inside a host
/// function, where driver calls are refused), in RELAXED capture mode there, as a
/// [`BackgroundCall`]:
/// once the process exit began the job is neither run nor dropped (dropping what it holds
/// could call the driver during its teardown), as the reaper parks its late jobs.
///
/// **Without a dispatcher thread** (it could not be spawned) the job is never run inline
/// from inside a host callback, where the driver permits no call: it is leaked, neither run
/// nor dropped (dropping what it holds could call the driver there too), with a warning,
/// and counted ([`undispatched_driver_jobs`]). What it would have released (a buffer, an
/// event, a device's state) stays allocated until the process exits; the alternative, a
/// driver call on the driver's callback thread, is undefined. Outside a host callback it runs
/// on the calling thread, as the dispatcher would have run it.
pub(crate) fn dispatch_driver_job(job: impl FnOnce() + Send + 'static) {
    let guarded = move || match BackgroundCall::begin() {
        Some(_call) => {
            // xstream's thread, never a caller's (inline below: the caller's mode stays).
            if on_dispatcher() {
                ffi::ensure_relaxed_capture_mode();
            }
            job();
        }
        None => std::mem::forget(job),
    };
    if let Err(refused) = try_dispatch(Box::new(guarded)) {
        if in_callback() {
            UNDISPATCHED.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                "no dispatcher thread, inside a host callback: a driver release is leaked \
                 (no driver call is permitted here)"
            );
            std::mem::forget(refused);
        } else {
            refused();
        }
    }
}

/// Driver jobs leaked because no dispatcher thread could take them from inside a host
/// callback ([`dispatch_driver_job`]).
static UNDISPATCHED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many driver releases (a buffer's free, an event's or a device state's destroy, ...)
/// were leaked since the process started because they were due inside a host callback, where
/// the driver permits no call, and the callback dispatcher's thread, which runs them
/// otherwise, could not be spawned. 0 unless the system refused that thread.
pub fn undispatched_driver_jobs() -> usize {
    UNDISPATCHED.load(Ordering::Relaxed)
}

/// Runs `release`, which calls the driver, now, or on the dispatcher when the caller is inside
/// a host callback (the driver permits no call there): what a `Drop` that releases a driver
/// object uses.
///
/// `keep` is what keeps the object's context alive (the device, or the module's retained
/// context): the dispatched job holds a clone of it until `release` ran, so the context's
/// teardown (and `cuDevicePrimaryCtxRelease`), which the drop of the last device handle on
/// another thread would otherwise run first, comes after the release. The clone is made only
/// on the dispatched path; the direct path costs no reference count. What the job holds is
/// dropped inside the job, so under [`dispatch_driver_job`]'s background-call guard, and
/// leaked with the job once the process exit began (the [`BackgroundHeld`] rule).
pub(crate) fn release_now_or_dispatched<K: Clone + Send + 'static>(
    keep: &K,
    release: impl FnOnce() + Send + 'static,
) {
    if in_callback() {
        let keep = keep.clone();
        dispatch_driver_job(move || {
            release();
            drop(keep);
        });
    } else {
        release();
    }
}

/// Runs `job` on the CUDA backend's reaper thread ([`REAPER`]).
pub(crate) fn reap(job: ReapJob) {
    REAPER.submit(job);
}

/// First step of a job that calls the driver: on the reaper, switches it to RELAXED capture
/// mode (once); elsewhere (the inline fallback) leaves the caller's mode alone.
fn driver_prelude() {
    if REAPER.on_reaper() {
        ffi::ensure_relaxed_capture_mode();
    }
}

/// The fallback of a stream's teardown when [`release_after`] could not enqueue its host
/// function (`code`): on the reaper, where waiting is allowed (module docs), the stream is
/// synchronized and `v` released after it. Only when that fails too (the driver is shutting
/// down at process exit, or the context is poisoned: nothing can run or be freed) is `v`
/// leaked, never freed while work may still use it.
fn release_after_sync(raw: CuStream, v: Vec<Keep>, code: ffi::Code) {
    match ffi::stream_synchronize(raw) {
        Ok(()) => {
            tracing::debug!(
                code,
                n = v.len(),
                "cuLaunchHostFunc refused the deferred release; released after a synchronize"
            );
            drop(v);
        }
        Err(sync) if sync == ffi::DEINITIALIZED => {
            // Process exit: the driver has released every allocation already.
            tracing::debug!(
                code,
                n = v.len(),
                "driver shut down; deferred release skipped"
            );
            std::mem::forget(v);
        }
        Err(sync) => {
            tracing::warn!(
                launch = code,
                synchronize = sync,
                n = v.len(),
                "could not defer buffer release nor wait for the stream; leaking"
            );
            std::mem::forget(v);
        }
    }
}

/// Hands `v` to a host function behind the stream's current work; the host function moves it
/// to the reaper thread, which drops it (freeing device memory needs a driver call, which is
/// not permitted inside a host function; at process exit the reaper's exit handler waits for
/// the releases queued before it and parks later ones). Returns `v` back, with the driver's
/// code, when enqueueing failed.
pub(super) fn release_after(
    dev: &CudaDevice,
    raw: CuStream,
    v: Vec<Keep>,
) -> std::result::Result<(), (Vec<Keep>, ffi::Code)> {
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
                // The reaper, not the dispatcher: its exit handler waits for the releases
                // queued before the process exits and parks later ones, so a host function
                // that runs during the driver's exit teardown (a side stream's, which no
                // synchronize of the stream waits for) frees nothing then.
                reap(Box::new(move || {
                    driver_prelude();
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
        Err(c) => Err((lock(&holder).take().unwrap_or_default(), c)),
    }
}

impl CudaStream {
    /// At drop, on the dropping thread: when one `cuStreamQuery` (which never waits) says the
    /// stream's work completed, the keep-alive list and the module uses are released here, so
    /// the `cuMemFree` of a buffer whose last user was this stream runs now, in the caller's
    /// program order, as the drop of the buffer itself would. Without this, a stream whose
    /// completion was observed only through an event (its keep list never trimmed) handed its
    /// list to a host function and the dispatcher thread freed it moments later, at a time no
    /// caller controls: `cuMemFree` waits for the whole device, and the driver then holds
    /// other threads' calls, so a stream held by a host callback that waits for the host made
    /// the host stall until the callback gave up (the conformance check `event_pool_bounded`,
    /// right after `record_event_orders`, failed 2 of 3 whole-suite runs on 2 × H100, GPU run
    /// of 2026-11-27; docs/semantics.md, "a blocked wait can stall calls that synchronize the
    /// whole device"). Work still pending keeps the hand-off behind it (the module docs).
    /// Skipped inside host callbacks (no driver calls), during a capture (a query would
    /// invalidate it) and on persistent streams (never idle).
    fn release_completed(&self) {
        if in_callback()
            || self.state.persistent
            || self.state.capture.is_capturing()
            || (!self.state.keep.held() && self.state.modules.seq() == 0)
        {
            return;
        }
        if ffi::bind(self.handle.dev.shared.raw_ctx).is_err() {
            return;
        }
        let marks = self.wait_marks();
        if ffi::stream_query(self.handle.raw()).is_ok() {
            self.release_up_to(marks);
        }
    }
}

impl Drop for CudaStream {
    fn drop(&mut self) {
        tracing::debug!(stream = ?self.handle.native, name = self.name.as_deref(), ownership = ?self.ownership, "cuda stream dropped");
        if destroy_inline(self.handle.was_used(), in_callback())
            && (self.state.untouched()
                || (!self.state.keep.held()
                    && self.state.modules.seq() == 0
                    && !self.state.capture.is_capturing()))
        {
            // Never used (module docs): no capture to end, nothing to hand off; the handle
            // goes with `self`, and `StreamHandle::drop` destroys it inline.
            return;
        }
        self.release_completed();
        let dev = self.handle.dev.clone();
        let handle = Arc::clone(&self.handle);
        let state = Arc::clone(&self.state);
        let end_capture = {
            let (dev, handle, state) = (dev.clone(), Arc::clone(&handle), Arc::clone(&state));
            move || {
                if state.capture.is_capturing() && ffi::bind(dev.shared.raw_ctx).is_ok() {
                    let (_, g) = ffi::stream_end_capture(handle.raw());
                    if !g.is_null() {
                        let _ = ffi::graph_destroy(g);
                    }
                    let _ = state.capture.end();
                    lock(&state.capture_keep).clear();
                }
            }
        };
        // Hands what the queued work uses to a host function behind it, then lets the handle
        // go (`cuStreamDestroy` when it was the last); on the reaper (module docs).
        let release = move || {
            driver_prelude();
            if ffi::bind(dev.shared.raw_ctx).is_err() {
                return;
            }
            let mut v = state.keep.take_all();
            v.extend(state.modules.take(&state.module_list));
            if !v.is_empty() {
                if let Err((v, code)) = release_after(&dev, handle.raw(), v) {
                    release_after_sync(handle.raw(), v, code);
                }
            }
            // The keep-alive list's side stream (module docs): its queued work still runs.
            if let Some(side) = state.keep.take_side() {
                if let Err(c) = ffi::stream_destroy(side) {
                    tracing::debug!(code = c, "cuStreamDestroy (keep-alive side stream) failed");
                }
            }
            drop(handle);
        };
        if in_callback() {
            // No driver calls inside a host function: both on the dispatcher, in order.
            dispatch_driver_job(move || {
                end_capture();
                reap(Box::new(release));
            });
        } else {
            // A capture is ended on the thread that began it (cuStreamEndCapture refuses
            // another thread under GLOBAL or THREAD_LOCAL mode); it waits for no work.
            end_capture();
            reap(Box::new(release));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The inline teardown's condition: a mark starts unused, one use sets it for good (also
    /// across threads, seen by the one that drops), a borrowed-from-elsewhere handle starts
    /// used, and only an unused handle outside a host callback is destroyed inline.
    #[test]
    fn use_mark_and_inline_destroy_rule() {
        let m = UseMark::default();
        assert!(!m.get(), "a new handle counts as used");
        assert!(destroy_inline(m.get(), false));
        let m = Arc::new(m);
        let m2 = Arc::clone(&m);
        std::thread::spawn(move || m2.mark()).join().unwrap();
        assert!(m.get(), "a use on another thread was lost");
        m.mark();
        assert!(m.get(), "a second use cleared the mark");
        assert!(UseMark::used().get());
        assert!(
            !destroy_inline(true, false),
            "a used stream skipped the reaper"
        );
        assert!(
            !destroy_inline(false, true),
            "a driver call inside a host callback"
        );
        assert!(!destroy_inline(true, true));
    }

    /// Set by the child's slow reaper job when it finished.
    static SLOW_DONE: AtomicBool = AtomicBool::new(false);
    /// Set by a job reaped after the exit began (it must be parked, never run).
    static LATE_RAN: AtomicBool = AtomicBool::new(false);
    /// Set by the child's background call just before it ended.
    static CALL_DONE: AtomicBool = AtomicBool::new(false);
    /// Set by a driver job dispatched after the exit began (it must not run) and by the drop
    /// of what it holds (it must not be dropped either).
    static LATE_JOB_RAN: AtomicBool = AtomicBool::new(false);
    static LATE_JOB_DROPPED: AtomicBool = AtomicBool::new(false);
    /// Set by the drop of a value held for a background thread: before the exit (it must be
    /// dropped) and after it began (it must be leaked).
    static HELD_BEFORE_DROPPED: AtomicBool = AtomicBool::new(false);
    static HELD_LATE_DROPPED: AtomicBool = AtomicBool::new(false);

    /// Sets its flag when dropped.
    struct SetOnDrop(&'static AtomicBool);

    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// Sets [`LATE_JOB_DROPPED`] when dropped.
    struct DropFlag;

    impl Drop for DropFlag {
        fn drop(&mut self) {
            LATE_JOB_DROPPED.store(true, Ordering::SeqCst);
        }
    }

    /// Registered before the reaper starts, so it runs after the reaper's exit handler: by
    /// then the slow job must have finished, and a job reaped now must be parked.
    extern "C" fn check_at_exit() {
        // The parent reads the line; nothing unwinds into the C library.
        let _ = std::panic::catch_unwind(|| {
            let slow = SLOW_DONE.load(Ordering::SeqCst);
            reap(Box::new(|| LATE_RAN.store(true, Ordering::SeqCst)));
            std::thread::sleep(Duration::from_millis(50));
            let late = LATE_RAN.load(Ordering::SeqCst);
            let parked = REAPER.parked();
            let call = CALL_DONE.load(Ordering::SeqCst);
            let refused = BackgroundCall::begin().is_none();
            let held = DropFlag;
            dispatch_driver_job(move || {
                let _held = held;
                LATE_JOB_RAN.store(true, Ordering::SeqCst);
            });
            std::thread::sleep(Duration::from_millis(50));
            let job_ran = LATE_JOB_RAN.load(Ordering::SeqCst);
            let job_dropped = LATE_JOB_DROPPED.load(Ordering::SeqCst);
            let held = BackgroundHeld::new(SetOnDrop(&HELD_LATE_DROPPED));
            let _ = std::thread::spawn(move || drop(held)).join();
            let held_before = HELD_BEFORE_DROPPED.load(Ordering::SeqCst);
            let held_late = HELD_LATE_DROPPED.load(Ordering::SeqCst);
            println!("at exit: slow job done {slow}, late job ran {late}, parked {parked}, background call done {call}, refused {refused}, late driver job ran {job_ran}, dropped {job_dropped}, held before exit dropped {held_before}, held after dropped {held_late}");
        });
    }

    /// Set by the jobs of [`without_helper_threads_nothing_runs_inside_a_callback`].
    static NT_DISPATCHED_RAN: AtomicBool = AtomicBool::new(false);
    static NT_DISPATCHED_DROPPED: AtomicBool = AtomicBool::new(false);
    static NT_REAPED_RAN: AtomicBool = AtomicBool::new(false);
    static NT_INLINE_RAN: AtomicBool = AtomicBool::new(false);
    static NT_INLINE_REAPED: AtomicBool = AtomicBool::new(false);

    /// No dispatcher nor reaper thread (the system refused them; forced by the `testing`
    /// facility `refuse_helper_threads`): a driver job due inside a host callback is neither
    /// run there nor dropped (dropping what it holds could call the driver) but leaked and
    /// counted, a teardown job reaped there is parked, and outside a callback both run on the
    /// calling thread. In a child process, whose helper threads are refused before anything
    /// starts them; no GPU (the jobs make no driver call).
    #[test]
    fn without_helper_threads_nothing_runs_inside_a_callback() {
        if std::env::var_os("XSTREAM_CUDA_NO_THREADS_CHILD").is_some() {
            xstream_core::callback::refuse_helper_threads();
            let held = SetOnDrop(&NT_DISPATCHED_DROPPED);
            let r = xstream_core::callback::run_guarded(move || {
                dispatch_driver_job(move || {
                    let _held = held;
                    NT_DISPATCHED_RAN.store(true, Ordering::SeqCst);
                });
                reap(Box::new(|| NT_REAPED_RAN.store(true, Ordering::SeqCst)));
            });
            assert!(r.is_ok());
            let counted = undispatched_driver_jobs();
            let parked = REAPER.parked();
            dispatch_driver_job(|| NT_INLINE_RAN.store(true, Ordering::SeqCst));
            reap(Box::new(|| NT_INLINE_REAPED.store(true, Ordering::SeqCst)));
            println!(
                "no threads: in a callback ran {} dropped {} reaped {} counted {counted} parked {parked}; outside ran {} reaped {}",
                NT_DISPATCHED_RAN.load(Ordering::SeqCst),
                NT_DISPATCHED_DROPPED.load(Ordering::SeqCst),
                NT_REAPED_RAN.load(Ordering::SeqCst),
                NT_INLINE_RAN.load(Ordering::SeqCst),
                NT_INLINE_REAPED.load(Ordering::SeqCst),
            );
            std::process::exit(0);
        }
        run_child(
            "stream::drop::tests::without_helper_threads_nothing_runs_inside_a_callback",
            "XSTREAM_CUDA_NO_THREADS_CHILD",
            "no threads: in a callback ran false dropped false reaped false counted 1 parked 1; outside ran true reaped true",
        );
    }

    /// Runs the test `name` of this binary again in a child process with `env` set, and checks
    /// that it succeeded and printed `want`.
    fn run_child(name: &str, env: &str, want: &str) {
        let out = std::process::Command::new(std::env::current_exe().expect("current_exe"))
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(env, "1")
            .output()
            .expect("start the test binary again");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "the child failed ({}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains(want),
            "the child's check did not print {want:?}:\n{stdout}"
        );
    }

    /// The reaper's exit handler is registered for real (`atexit`): at process exit while the
    /// reaper still runs a teardown job (a stream dropped at the end of `main`) and a background
    /// driver call is under way ([`BackgroundCall`]), the exit waits for both before later exit
    /// handlers (the driver's teardown) run, a background call begun then is refused, and a job reaped once
    /// the exit began is parked, not run (the behaviour itself is tested once, in
    /// `xstream_core::reaper`). In a child process, without a GPU (the jobs make no driver
    /// call).
    #[test]
    fn exit_waits_for_the_reaper_and_parks_late_jobs() {
        if std::env::var_os("XSTREAM_CUDA_EXIT_CHILD").is_some() {
            assert!(ffi::register_at_exit(check_at_exit));
            reap(Box::new(|| {
                std::thread::sleep(Duration::from_millis(300));
                SLOW_DONE.store(true, Ordering::SeqCst);
            }));
            // A background driver call under way when the exit begins (the watcher's query).
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let call = BackgroundCall::begin().expect("no exit yet");
                tx.send(()).expect("send");
                // Longer than the slow job: only the wait for the call covers it.
                std::thread::sleep(Duration::from_millis(500));
                CALL_DONE.store(true, Ordering::SeqCst);
                drop(call);
            });
            rx.recv().expect("the call began");
            let held = BackgroundHeld::new(SetOnDrop(&HELD_BEFORE_DROPPED));
            std::thread::spawn(move || drop(held))
                .join()
                .expect("drop on another thread");
            std::process::exit(0);
        }
        run_child(
            "stream::drop::tests::exit_waits_for_the_reaper_and_parks_late_jobs",
            "XSTREAM_CUDA_EXIT_CHILD",
            "at exit: slow job done true, late job ran false, parked 1, background call done true, refused true, late driver job ran false, dropped false, held before exit dropped true, held after dropped false",
        );
    }
}
