//! Host callbacks: one contract on every backend.
//!
//! A stream-blocking callback ([`Stream::host_callback`](crate::Stream::host_callback)) is a
//! `FnOnce(Result<()>) + Send + 'static`. It is invoked **exactly once**: with `Ok(())` after
//! all earlier work on its stream succeeded, or with the error that prevented that. Later work
//! on the stream waits for it. A panic inside is caught here, never unwinds into vendor code,
//! and is reported by the stream's next `synchronize` as [`Error::CallbackPanicked`]. While it
//! runs, every xstream call on that thread returns [`Error::NotPermitted`] (vendors either
//! refuse or deadlock on such calls).
//!
//! [`CallbackSlot`] is what makes "exactly once" hold when the vendor may drop callbacks (CUDA
//! skips host functions after a context fault): the vendor trampoline and xstream's own failure
//! path both try to [`fire`](CallbackSlot::fire) the slot; only the first one runs it.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, Sender};
use std::sync::OnceLock;

use crate::sync::{Arc, AtomicBool, Mutex};
use crate::{Error, Result};

/// A boxed stream-blocking host callback.
pub type BoxedCallback = Box<dyn FnOnce(Result<()>) + Send + 'static>;

/// The former name of [`BoxedCallback`] (issue 33: `Host` names the host backend).
#[deprecated(
    since = "0.2.0",
    note = "renamed `BoxedCallback` (`Host` names the host backend)"
)]
pub type HostCallback = BoxedCallback;

thread_local! {
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is inside a stream-blocking host callback.
#[inline]
pub fn in_callback() -> bool {
    IN_CALLBACK.with(|c| c.get())
}

/// Returns [`Error::NotPermitted`] when called from inside a stream-blocking host callback.
/// Every backend entry point calls this first (a thread-local read).
///
/// # Errors
/// As described.
#[inline]
pub fn ensure_not_in_callback() -> Result<()> {
    if in_callback() {
        Err(Error::NotPermitted(
            "xstream calls are not allowed inside a stream-blocking host callback; use Stream::notify",
        ))
    } else {
        Ok(())
    }
}

struct InCallback(bool);

impl InCallback {
    fn enter() -> Self {
        InCallback(IN_CALLBACK.with(|c| c.replace(true)))
    }
}

impl Drop for InCallback {
    fn drop(&mut self) {
        let prev = self.0;
        IN_CALLBACK.with(|c| c.set(prev));
    }
}

/// Runs `f` while marking the thread as inside a callback; a panic is caught and its message
/// returned.
pub fn run_guarded<R>(f: impl FnOnce() -> R) -> std::result::Result<R, String> {
    let _g = InCallback::enter();
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| panic_message(&*p))
}

/// The text of a panic payload.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// Holds the first panic of a stream's callbacks until the next synchronize reports it.
#[derive(Debug)]
pub struct PanicSlot {
    flag: AtomicBool,
    msg: Mutex<Option<String>>,
}

impl Default for PanicSlot {
    fn default() -> Self {
        Self {
            flag: AtomicBool::new(false),
            msg: Mutex::new(None),
        }
    }
}

impl PanicSlot {
    /// Records a panic message (the first one wins).
    pub fn record(&self, msg: String) {
        tracing::error!(panic = %msg, "host callback panicked");
        let mut g = self.msg.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            *g = Some(msg);
        }
        self.flag.store(true, Ordering::Release);
    }

    /// Reports (and clears) a recorded panic.
    ///
    /// # Errors
    /// [`Error::CallbackPanicked`] when a callback panicked since the last call.
    #[inline]
    pub fn take(&self) -> Result<()> {
        if !self.flag.load(Ordering::Acquire) {
            return Ok(());
        }
        self.flag.store(false, Ordering::Release);
        let msg = self.msg.lock().unwrap_or_else(|e| e.into_inner()).take();
        match msg {
            Some(m) => Err(Error::CallbackPanicked(m)),
            None => Ok(()),
        }
    }
}

/// One pending callback, shared by the vendor trampoline and xstream's failure path.
pub struct CallbackSlot {
    f: Mutex<Option<BoxedCallback>>,
    /// Set under `f`'s lock when the callback is taken: [`is_fired`](Self::is_fired) and the
    /// pending list's scans read it without the lock (no contention with the vendor's
    /// callback thread).
    fired: AtomicBool,
    panics: Arc<PanicSlot>,
}

impl std::fmt::Debug for CallbackSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallbackSlot")
            .field("pending", &!self.is_fired())
            .finish()
    }
}

impl CallbackSlot {
    /// A pending callback whose panic is reported through `panics`.
    pub fn new(f: BoxedCallback, panics: Arc<PanicSlot>) -> Arc<Self> {
        Arc::new(Self {
            f: Mutex::new(Some(f)),
            fired: AtomicBool::new(false),
            panics,
        })
    }

    /// Runs the callback with `status` unless it already ran. Returns whether it ran now.
    /// Never unwinds.
    pub fn fire(&self, status: Result<()>) -> bool {
        let f = {
            let mut g = self.f.lock().unwrap_or_else(|e| e.into_inner());
            let f = g.take();
            if f.is_some() {
                self.fired.store(true, Ordering::Release);
            }
            f
        };
        match f {
            Some(f) => {
                if let Err(msg) = run_guarded(move || f(status)) {
                    self.panics.record(msg);
                }
                true
            }
            None => false,
        }
    }

    /// Whether the callback already ran.
    pub fn is_fired(&self) -> bool {
        self.fired.load(Ordering::Acquire)
    }
}

/// The callbacks of one context (or stream) that the vendor has not run yet, so xstream can
/// fail them itself when the vendor never will.
#[derive(Debug)]
pub struct PendingCallbacks {
    slots: Mutex<Vec<Arc<CallbackSlot>>>,
}

impl Default for PendingCallbacks {
    fn default() -> Self {
        Self {
            slots: Mutex::new(Vec::new()),
        }
    }
}

impl PendingCallbacks {
    /// Tracks a slot. Fired slots are pruned as new ones arrive: only when the list is full,
    /// leaving at least half of it free, so a track costs amortized O(1) even with many
    /// callbacks pending (pruning on every track made enqueueing n callbacks O(n²)).
    pub fn track(&self, slot: &Arc<CallbackSlot>) {
        let mut g = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if g.len() >= 64 && g.len() == g.capacity() {
            g.retain(|s| !s.is_fired());
            let live = g.len();
            if live > g.capacity() / 2 {
                g.reserve(live);
            }
        }
        g.push(Arc::clone(slot));
    }

    /// Fires every pending slot with `err`. Returns how many were failed.
    pub fn fail_all(&self, err: &Error) -> usize {
        let slots = std::mem::take(&mut *self.slots.lock().unwrap_or_else(|e| e.into_inner()));
        slots.iter().filter(|s| s.fire(Err(err.clone()))).count()
    }

    /// How many tracked slots have not run yet. Forgets the ones that ran, so a watcher that
    /// asks often scans each slot past its run once, not on every call.
    pub fn pending(&self) -> usize {
        let mut g = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        g.retain(|s| !s.is_fired());
        g.len()
    }
}

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Runs `job` on xstream's dispatcher thread (the second callback tier). Jobs run one at a
/// time, in submission order, outside any vendor callback, so they may call xstream. A panic
/// is caught and logged.
pub fn dispatch(job: Job) {
    use std::sync::Mutex;
    static TX: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    let tx = TX.get_or_init(|| {
        let (tx, rx) = channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("xstream-dispatch".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    if let Err(p) = catch_unwind(AssertUnwindSafe(job)) {
                        tracing::error!(panic = %panic_message(&*p), "notify callback panicked");
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot spawn the dispatcher thread");
        }
        Mutex::new(tx)
    });
    let sent = tx.lock().unwrap_or_else(|e| e.into_inner()).send(job);
    if let Err(e) = sent {
        // No dispatcher thread: run inline rather than lose the job.
        let job = e.0;
        if let Err(p) = catch_unwind(AssertUnwindSafe(job)) {
            tracing::error!(panic = %panic_message(&*p), "notify callback panicked");
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn slot_fires_once_and_catches_panics() {
        let panics = Arc::new(PanicSlot::default());
        let n = Arc::new(AtomicUsize::new(0));
        let n2 = n.clone();
        let s = CallbackSlot::new(
            Box::new(move |r| {
                assert!(r.is_err());
                assert!(in_callback());
                assert!(ensure_not_in_callback().is_err());
                n2.fetch_add(1, Ordering::SeqCst);
            }),
            panics.clone(),
        );
        let pending = PendingCallbacks::default();
        pending.track(&s);
        assert_eq!(pending.pending(), 1);
        assert_eq!(pending.fail_all(&Error::NotReady), 1);
        assert!(!s.fire(Ok(())));
        assert_eq!(n.load(Ordering::SeqCst), 1);
        assert!(!in_callback());

        let p = CallbackSlot::new(Box::new(|_| panic!("boom")), panics.clone());
        assert!(p.fire(Ok(())));
        assert!(matches!(panics.take(), Err(Error::CallbackPanicked(m)) if m == "boom"));
        assert!(panics.take().is_ok());
    }

    #[test]
    fn dispatcher_runs_jobs_in_order() {
        let (tx, rx) = channel();
        for i in 0..10 {
            let tx = tx.clone();
            dispatch(Box::new(move || tx.send(i).unwrap()));
        }
        dispatch(Box::new(|| panic!("ignored")));
        let got: Vec<i32> = (0..10).map(|_| rx.recv().unwrap()).collect();
        assert_eq!(got, (0..10).collect::<Vec<_>>());
    }
}
