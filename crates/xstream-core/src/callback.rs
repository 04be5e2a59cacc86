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
use std::collections::VecDeque;
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
///
/// A slot made by [`PendingCallbacks::slot`] is reused for a later callback once it fired and
/// nothing but its list references it (see [`PendingCallbacks`]).
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
        #[cfg(feature = "testing")]
        SLOTS_ALLOCATED.fetch_add(1, Ordering::Relaxed);
        Arc::new(Self {
            f: Mutex::new(Some(f)),
            fired: AtomicBool::new(false),
            panics,
        })
    }

    /// Makes a slot nobody else references pending again with `f` (a reuse: no allocation).
    fn rearm(&mut self, f: BoxedCallback, panics: &Arc<PanicSlot>) {
        *self.f.get_mut().unwrap_or_else(|e| e.into_inner()) = Some(f);
        // The caller holds the only reference: no other thread can read the flag.
        self.fired.store(false, Ordering::Relaxed);
        if !Arc::ptr_eq(&self.panics, panics) {
            self.panics = Arc::clone(panics);
        }
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

/// Counts [`CallbackSlot::new`] calls (see [`slots_allocated`]).
#[cfg(feature = "testing")]
static SLOTS_ALLOCATED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many callback slots this process allocated ([`CallbackSlot::new`], also called by
/// [`PendingCallbacks::slot`] when it has no fired slot to reuse). Callbacks enqueued one after
/// another, each waited for, keep it bounded on a backend that takes its slots from its
/// pending list and lets them come back: the tests' check of the reuse. With the `testing`
/// feature only.
#[cfg(feature = "testing")]
pub fn slots_allocated() -> usize {
    SLOTS_ALLOCATED.load(Ordering::Relaxed)
}

/// How many fired slots a [`PendingCallbacks`] keeps for reuse.
pub const FREE_SLOTS: usize = 256;

/// The callbacks of one context (or stream) that the vendor has not run yet, so xstream can
/// fail them itself when the vendor never will, and the fired slots it keeps for reuse.
///
/// Slots come from [`slot`](Self::slot): a fired slot that nothing but this list references
/// any more (the vendor dropped its reference after running it) is moved to a free list of at
/// most [`FREE_SLOTS`] and made pending again for a later callback, so a steady stream of
/// callbacks allocates nothing, and no slot is freed on the vendor's callback thread or the
/// fault watcher's (glibc's allocator then moves the block between the threads' caches, under
/// its arena lock). A slot still referenced elsewhere (by the vendor, or by a second list) is
/// never reused.
#[derive(Debug)]
pub struct PendingCallbacks {
    lists: Mutex<Lists>,
}

#[derive(Debug, Default)]
struct Lists {
    /// Tracked slots, oldest first (a stream runs its callbacks in this order).
    slots: VecDeque<Arc<CallbackSlot>>,
    /// Fired slots referenced only from here.
    free: Vec<Arc<CallbackSlot>>,
}

impl Lists {
    /// Forgets the fired slots at the front, keeping those nothing else references for reuse.
    /// Stops at the first slot not fired, or fired but still referenced elsewhere (the vendor
    /// is finishing it: it is reclaimed on a later call rather than freed by the vendor's
    /// thread). Each slot is passed over once: amortized O(1) per tracked slot. The reference
    /// count is only read here (no atomic write per slot); [`PendingCallbacks::slot`] proves
    /// uniqueness with `Arc::get_mut` before it reuses one, which also orders the vendor's last
    /// use of the slot before the reuse.
    fn reclaim_front(&mut self) {
        while let Some(front) = self.slots.front() {
            if !front.is_fired() || Arc::strong_count(front) != 1 {
                break;
            }
            if let Some(s) = self.slots.pop_front() {
                keep(&mut self.free, s);
            }
        }
    }

    /// Forgets every fired slot (in place, keeping the order of the others and the capacity).
    fn prune(&mut self) {
        for _ in 0..self.slots.len() {
            let Some(s) = self.slots.pop_front() else {
                break;
            };
            if s.is_fired() {
                keep(&mut self.free, s);
            } else {
                self.slots.push_back(s);
            }
        }
    }
}

#[cfg(not(loom))]
thread_local! {
    /// One fired slot that this thread's last [`PendingCallbacks::track`] took from the list's
    /// free slots (under the lock it held anyway) for the thread's next callback, so
    /// [`PendingCallbacks::slot`] takes no lock when it is there. Slots are interchangeable
    /// between lists (a reuse sets the callback and the panic slot). Dropped at thread exit.
    static SPARE: Cell<Option<Arc<CallbackSlot>>> = const { Cell::new(None) };
}

/// Takes the calling thread's spare slot (none under loom, whose models run on loom's threads).
fn take_spare() -> Option<Arc<CallbackSlot>> {
    #[cfg(not(loom))]
    {
        SPARE.try_with(Cell::take).ok().flatten()
    }
    #[cfg(loom)]
    {
        None
    }
}

/// Gives the calling thread a spare slot from `lists` when it has none (under the list's lock).
fn refill_spare(lists: &mut Lists) {
    #[cfg(not(loom))]
    {
        // Fails only while the thread is exiting: then no spare.
        let _ = SPARE.try_with(|c| {
            let cur = c.take();
            if cur.is_none() {
                if lists.free.is_empty() {
                    lists.reclaim_front();
                }
                c.set(lists.free.pop());
            } else {
                c.set(cur);
            }
        });
    }
    #[cfg(loom)]
    {
        let _ = lists;
    }
}

/// Keeps a fired slot in `free` for reuse when nothing else references it (the count is 1: the
/// list's own reference, and the list hands out none, so it stays 1) and there is room;
/// otherwise drops the list's reference.
fn keep(free: &mut Vec<Arc<CallbackSlot>>, s: Arc<CallbackSlot>) {
    if free.len() < FREE_SLOTS && Arc::strong_count(&s) == 1 {
        free.push(s);
    }
}

impl Default for PendingCallbacks {
    fn default() -> Self {
        Self {
            lists: Mutex::new(Lists::default()),
        }
    }
}

impl PendingCallbacks {
    fn lock(&self) -> crate::sync::MutexGuard<'_, Lists> {
        self.lists.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A pending slot holding `f`: a reused fired one when this list has one, else a new one.
    /// Not tracked yet: [`track`](Self::track) it once the vendor accepted it (a refused
    /// callback is dropped without being called, never failed by [`fail_all`](Self::fail_all)).
    pub fn slot(&self, f: BoxedCallback, panics: &Arc<PanicSlot>) -> Arc<CallbackSlot> {
        // The spare the calling thread's last `track` took: no lock in the steady state.
        let reused = take_spare().or_else(|| {
            let mut g = self.lock();
            if g.free.is_empty() {
                g.reclaim_front();
            }
            g.free.pop()
        });
        if let Some(mut s) = reused {
            // Always unique: a slot enters the free list (and a thread's spare) only
            // unreferenced elsewhere, and neither hands out references.
            if let Some(m) = Arc::get_mut(&mut s) {
                m.rearm(f, panics);
                return s;
            }
        }
        CallbackSlot::new(f, Arc::clone(panics))
    }

    /// Tracks a slot. Fired slots are also pruned when the list is full (slots that fire out
    /// of order, behind one that waits), leaving at least half of it free, so a track costs
    /// amortized O(1) even with many callbacks pending (pruning on every track made enqueueing
    /// n callbacks O(n²)).
    pub fn track(&self, slot: &Arc<CallbackSlot>) {
        let mut g = self.lock();
        if g.slots.len() >= 64 && g.slots.len() == g.slots.capacity() {
            g.prune();
            let live = g.slots.len();
            if live > g.slots.capacity() / 2 {
                g.slots.reserve(live);
            }
        }
        g.slots.push_back(Arc::clone(slot));
        refill_spare(&mut g);
    }

    /// Fires every pending slot with `err`. Returns how many were failed.
    pub fn fail_all(&self, err: &Error) -> usize {
        let slots = std::mem::take(&mut self.lock().slots);
        slots.iter().filter(|s| s.fire(Err(err.clone()))).count()
    }

    /// Whether a tracked slot has not run yet: the fault watcher's periodic check. Reclaims
    /// the fired slots at the front first, then looks at slots only up to the first pending
    /// one (usually the first), so it holds the lock for a few reads, not a scan of the list.
    pub fn any_pending(&self) -> bool {
        let mut g = self.lock();
        g.reclaim_front();
        g.slots.iter().any(|s| !s.is_fired())
    }

    /// How many tracked slots have not run yet (a scan of the list). Reclaims the fired slots
    /// at the front.
    pub fn pending(&self) -> usize {
        let mut g = self.lock();
        g.reclaim_front();
        g.slots.iter().filter(|s| !s.is_fired()).count()
    }

    /// How many fired slots are kept for reuse (at most [`FREE_SLOTS`]).
    pub fn free_slots(&self) -> usize {
        self.lock().free.len()
    }
}

type Job = Box<dyn FnOnce() + Send + 'static>;

thread_local! {
    /// Whether this thread is the dispatcher's.
    static ON_DISPATCHER: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is xstream's dispatcher thread (a job handed to [`dispatch`] may
/// also run on the calling thread, when the dispatcher has no thread).
pub fn on_dispatcher() -> bool {
    ON_DISPATCHER.with(Cell::get)
}

/// Set by [`refuse_helper_threads`]: the dispatcher's and the reapers' threads are not spawned.
static REFUSE_THREADS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Test facility (`testing` feature): from now on the callback dispatcher's thread and every
/// reaper's thread (`crate::reaper`) are not spawned, as when the system refuses a new thread,
/// so that the fallbacks without a thread can be tested. Call it before the first dispatch or
/// reap of the process (a thread already spawned stays); there is no way back.
#[cfg(feature = "testing")]
pub fn refuse_helper_threads() {
    REFUSE_THREADS.store(true, Ordering::SeqCst);
}

/// Spawns one of xstream's helper threads (the dispatcher, a reaper), unless
/// [`refuse_helper_threads`] was called.
pub(crate) fn spawn_helper<F>(name: &str, f: F) -> std::io::Result<std::thread::JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    if REFUSE_THREADS.load(Ordering::SeqCst) {
        return Err(std::io::Error::other(
            "helper threads refused (test facility)",
        ));
    }
    std::thread::Builder::new().name(name.into()).spawn(f)
}

/// Hands `job` to xstream's dispatcher thread, or gives it back when there is no such thread
/// (it could not be spawned). The caller chooses what to do then: [`dispatch`] runs it on the
/// calling thread; a job that calls a vendor must not run there from inside a host callback.
///
/// # Errors
/// The job itself, not run, when there is no dispatcher thread.
pub fn try_dispatch(job: Job) -> std::result::Result<(), Job> {
    use std::sync::Mutex;
    static TX: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    let tx = TX.get_or_init(|| {
        let (tx, rx) = channel::<Job>();
        let spawned = spawn_helper("xstream-dispatch", move || {
            ON_DISPATCHER.with(|d| d.set(true));
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
    sent.map_err(|e| e.0)
}

/// Runs `job` on xstream's dispatcher thread (the second callback tier). Jobs run one at a
/// time, in submission order, outside any vendor callback, so they may call xstream. A panic
/// is caught and logged. When the dispatcher thread could not be spawned the job runs on the
/// calling thread instead (see [`try_dispatch`] for jobs that must not).
pub fn dispatch(job: Job) {
    if let Err(job) = try_dispatch(job) {
        // No dispatcher thread: run inline rather than lose the job.
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

    /// A callback that counts its runs and errors in `runs` / `errs`.
    fn counted(runs: &Arc<AtomicUsize>, errs: &Arc<AtomicUsize>) -> BoxedCallback {
        let (runs, errs) = (Arc::clone(runs), Arc::clone(errs));
        Box::new(move |r| {
            runs.fetch_add(1, Ordering::SeqCst);
            if r.is_err() {
                errs.fetch_add(1, Ordering::SeqCst);
            }
        })
    }

    /// What a vendor does with its reference: fires the slot, then drops the reference.
    fn vendor_runs(slot: &Arc<CallbackSlot>) -> bool {
        let theirs = Arc::clone(slot);
        theirs.fire(Ok(()))
    }

    #[test]
    fn fired_slots_are_reused_only_when_unreferenced_and_fail_all_reaches_reused_ones() {
        let pending = PendingCallbacks::default();
        let (panics, other_panics) = (Arc::default(), Arc::default());
        let (a, a_err) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (b, b_err) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));

        // A slot that ran and that only the list references is reused for the next callback,
        // which then runs once, its own closure, not the old one.
        let s = pending.slot(counted(&a, &a_err), &panics);
        pending.track(&s);
        assert!(vendor_runs(&s));
        let first = Arc::as_ptr(&s);
        drop(s);
        let s = pending.slot(counted(&b, &b_err), &panics);
        assert_eq!(Arc::as_ptr(&s), first, "the fired slot is reused");
        assert!(!s.is_fired());
        assert_eq!(pending.pending(), 0, "an untracked slot is not pending");
        pending.track(&s);
        assert_eq!(pending.pending(), 1);
        assert!(vendor_runs(&s));
        assert!(!s.fire(Ok(())), "a reused slot runs once");
        assert_eq!((a.load(Ordering::SeqCst), b.load(Ordering::SeqCst)), (1, 1));
        drop(s);

        // Fired but still referenced by the vendor (it is finishing the callback): never
        // reused, neither while the list holds it nor once a later reclaim passes it.
        let s = pending.slot(counted(&a, &a_err), &panics);
        assert_eq!(Arc::as_ptr(&s), first, "reused again");
        pending.track(&s);
        let vendors = Arc::clone(&s);
        assert!(vendors.fire(Ok(())));
        drop(s);
        for _ in 0..3 {
            let n = pending.slot(counted(&b, &b_err), &panics);
            assert_ne!(Arc::as_ptr(&n), Arc::as_ptr(&vendors));
            assert!(vendor_runs(&n));
        }
        assert_eq!(pending.pending(), 0);
        // Once the vendor let go, the slot is free again.
        drop(vendors);
        let mut seen = false;
        for _ in 0..8 {
            let n = pending.slot(counted(&b, &b_err), &panics);
            seen |= Arc::as_ptr(&n) == first;
            pending.track(&n);
            assert!(vendor_runs(&n));
        }
        assert!(seen, "the slot is reused after the vendor dropped it");

        // Never run (a vendor that dropped it after a fault keeps its reference forever):
        // failed by fail_all with every other pending slot, reused ones included (and one of
        // another stream's panic slot), each exactly once; the leaked one is never reused.
        let ran: Vec<_> = (0..3)
            .map(|_| {
                let n = pending.slot(counted(&b, &b_err), &panics);
                pending.track(&n);
                n
            })
            .collect();
        let ran_at: Vec<_> = ran.iter().map(Arc::as_ptr).collect();
        for n in ran {
            assert!(vendor_runs(&n));
        }
        let before = (b.load(Ordering::SeqCst), b_err.load(Ordering::SeqCst));
        let leaked = pending.slot(counted(&b, &b_err), &panics);
        pending.track(&leaked);
        let mut held = Vec::new();
        for i in 0..5 {
            let p = if i % 2 == 0 { &panics } else { &other_panics };
            let n = pending.slot(counted(&b, &b_err), p);
            pending.track(&n);
            held.push(n);
        }
        let reused = held
            .iter()
            .chain([&leaked])
            .filter(|s| ran_at.contains(&Arc::as_ptr(s)))
            .count();
        assert!(reused >= 2, "slots that ran are reused ({reused})");
        assert_eq!(pending.pending(), 6);
        assert!(pending.any_pending());
        assert_eq!(pending.fail_all(&Error::NotReady), 6);
        assert_eq!(pending.fail_all(&Error::NotReady), 0, "failed once");
        assert!(!pending.any_pending());
        assert_eq!(
            (b.load(Ordering::SeqCst), b_err.load(Ordering::SeqCst)),
            (before.0 + 6, before.1 + 6)
        );
        assert!(
            held.iter().all(|s| !vendor_runs(s)),
            "the vendor's late run is a no-op"
        );
        drop(held);
        for _ in 0..(FREE_SLOTS + 2) {
            let n = pending.slot(counted(&b, &b_err), &panics);
            assert_ne!(Arc::as_ptr(&n), Arc::as_ptr(&leaked));
        }

        // A reused slot reports a panic through its new stream's panic slot.
        let n = pending.slot(counted(&a, &a_err), &panics);
        pending.track(&n);
        vendor_runs(&n);
        drop(n);
        let p = pending.slot(Box::new(|_| panic!("reused")), &other_panics);
        pending.track(&p);
        assert!(vendor_runs(&p));
        assert!(panics.take().is_ok());
        assert!(matches!(other_panics.take(), Err(Error::CallbackPanicked(m)) if m == "reused"));
    }

    #[test]
    fn a_threads_spare_slot_serves_another_list_once() {
        let (a_list, b_list) = (PendingCallbacks::default(), PendingCallbacks::default());
        let panics = Arc::default();
        let (n, e) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let ran: Vec<_> = (0..2)
            .map(|_| {
                let s = a_list.slot(counted(&n, &e), &panics);
                a_list.track(&s);
                s
            })
            .collect();
        let ran_at: Vec<_> = ran.iter().map(Arc::as_ptr).collect();
        for s in ran {
            assert!(vendor_runs(&s));
        }
        // Reuses one of the two; the track then keeps the other as the thread's spare.
        let again = a_list.slot(counted(&n, &e), &panics);
        assert!(ran_at.contains(&Arc::as_ptr(&again)));
        a_list.track(&again);
        let from_spare = b_list.slot(counted(&n, &e), &panics);
        assert!(
            ran_at.contains(&Arc::as_ptr(&from_spare)),
            "the spare serves the other list"
        );
        assert!(!Arc::ptr_eq(&again, &from_spare));
        b_list.track(&from_spare);
        assert_eq!(n.load(Ordering::SeqCst), 2);
        assert_eq!(b_list.fail_all(&Error::NotReady), 1);
        assert_eq!(a_list.fail_all(&Error::NotReady), 1);
        assert!(again.is_fired() && from_spare.is_fired());
        assert_eq!((n.load(Ordering::SeqCst), e.load(Ordering::SeqCst)), (4, 2));
    }

    #[test]
    fn the_free_list_is_bounded_and_any_pending_sees_a_slot_behind_fired_ones() {
        let pending = PendingCallbacks::default();
        let panics = Arc::default();
        let (n, e) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let slots: Vec<_> = (0..FREE_SLOTS + 40)
            .map(|_| {
                let s = pending.slot(counted(&n, &e), &panics);
                pending.track(&s);
                s
            })
            .collect();
        // One slot in the middle waits (another stream's); the others ran.
        let waiting = &slots[10];
        for (i, s) in slots.iter().enumerate() {
            if i != 10 {
                assert!(vendor_runs(s));
            }
        }
        let waiting = Arc::clone(waiting);
        drop(slots);
        assert!(pending.any_pending());
        assert_eq!(pending.pending(), 1);
        assert!(waiting.fire(Ok(())));
        assert!(!pending.any_pending());
        assert_eq!(pending.pending(), 0);
        drop(waiting);
        assert_eq!(pending.pending(), 0);
        assert_eq!(
            pending.free_slots(),
            FREE_SLOTS,
            "at most FREE_SLOTS are kept"
        );
        assert_eq!(n.load(Ordering::SeqCst), FREE_SLOTS + 40);
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
