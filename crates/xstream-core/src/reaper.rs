//! The reaper: one background thread per backend that runs deferred teardown (a stream's
//! destroy, a buffer's free after a synchronize, ...) so that `Drop` never blocks its caller
//! and never calls the vendor from inside a host callback. The CUDA and Ascend backends each
//! declare one [`Reaper`] as a `static`, with their thread name, exit-handler registration and
//! dispatch prelude; the behaviour below is theirs alike.
//!
//! - **Order.** Jobs run one at a time, in submission order, on the reaper's thread. A job
//!   submitted from the reaper itself runs at once (it is already in order; queueing it would
//!   only wait behind itself).
//! - **Panics** are caught and logged; later jobs still run.
//! - **No thread.** When the thread cannot be spawned, a job runs on the caller's thread, or,
//!   inside a host callback (no vendor calls there), on the callback dispatcher after the
//!   backend's dispatch prelude. When the dispatcher has no thread either, a job submitted
//!   inside a host callback is parked (neither run nor dropped: dropping it could call the
//!   vendor too) with a warning, and counted by [`Reaper::parked`]; it is never run inline
//!   there.
//! - **Process exit.** The vendor runtimes tear themselves down in exit handlers; a reaper job
//!   still calling them then races that teardown (on the Ascend runtime it crashed processes
//!   after `main` returned; on CUDA, deferred releases were refused and one test binary ended
//!   with signal 11 under compute-sanitizer: docs/simulators.md, issue 21). So the backend
//!   registers an exit handler (`atexit`) when the thread starts, before the vendor's own
//!   (handlers run in reverse order of registration), which calls [`Reaper::at_exit`]: jobs
//!   queued before exit are waited for, at most [`EXIT_FLUSH_LIMIT`], and jobs submitted later
//!   are *parked*: neither run nor dropped (dropping one can call the vendor too, through what
//!   it holds), but kept reachable so that leak checkers do not count them as lost.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::callback::{in_callback, spawn_helper, try_dispatch};
use crate::sync::lock;

/// A teardown job.
pub type ReapJob = Box<dyn FnOnce() + Send + 'static>;

/// How long [`Reaper::at_exit`] waits for the jobs queued before the exit began.
pub const EXIT_FLUSH_LIMIT: Duration = Duration::from_secs(2);

thread_local! {
    /// The address of the reaper whose thread this is (0 elsewhere).
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

/// A backend's reaper (see the module docs). Declare it as a `static`.
pub struct Reaper {
    name: &'static str,
    register_exit: fn() -> bool,
    dispatch_prelude: fn(),
    queue: OnceLock<Option<Mutex<Sender<ReapJob>>>>,
    exiting: AtomicBool,
    parked: Mutex<Vec<ReapJob>>,
}

impl Reaper {
    /// A reaper whose thread is named `name`. `register_exit` runs once, when the thread has
    /// started: it registers the backend's exit handler (an `extern "C" fn` calling
    /// [`Reaper::at_exit`] on this reaper) and returns whether that worked. `dispatch_prelude`
    /// runs before a job handed to the callback dispatcher (no reaper thread, caller inside a
    /// host callback), e.g. to relax that thread's capture mode.
    pub const fn new(
        name: &'static str,
        register_exit: fn() -> bool,
        dispatch_prelude: fn(),
    ) -> Self {
        Reaper {
            name,
            register_exit,
            dispatch_prelude,
            queue: OnceLock::new(),
            exiting: AtomicBool::new(false),
            parked: Mutex::new(Vec::new()),
        }
    }

    /// Whether the calling thread is this reaper's.
    pub fn on_reaper(&'static self) -> bool {
        CURRENT.with(Cell::get) == self.id()
    }

    fn id(&'static self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// Runs `job` on the reaper (see the module docs for order, panics, the fallback without a
    /// thread, and parking once the process is exiting).
    pub fn submit(&'static self, job: ReapJob) {
        if self.on_reaper() {
            self.run(job);
            return;
        }
        if self.exiting.load(Ordering::SeqCst) {
            lock(&self.parked).push(job);
            return;
        }
        let job = match self.queue.get_or_init(|| self.spawn()) {
            Some(tx) => match lock(tx).send(job) {
                Ok(()) => return,
                Err(e) => e.0,
            },
            None => job,
        };
        if in_callback() {
            let prelude = self.dispatch_prelude;
            let handed = try_dispatch(Box::new(move || {
                prelude();
                self.run(job);
            }));
            if let Err(refused) = handed {
                tracing::warn!(
                    reaper = self.name,
                    "no reaper nor dispatcher thread, inside a host callback: teardown job parked (leaked)"
                );
                lock(&self.parked).push(refused);
            }
        } else {
            self.run(job);
        }
    }

    /// Waits, at most `limit`, until every job submitted before this call has run. Returns
    /// whether the reaper got there in time.
    pub fn flush(&'static self, limit: Duration) -> bool {
        let (tx, rx) = channel::<()>();
        self.submit(Box::new(move || {
            let _ = tx.send(());
        }));
        rx.recv_timeout(limit).is_ok()
    }

    /// The body of the backend's exit handler: from now on jobs are parked, and the jobs
    /// queued before are waited for (at most [`EXIT_FLUSH_LIMIT`]). Never unwinds.
    pub fn at_exit(&'static self) {
        let _ = catch_unwind(|| {
            self.exiting.store(true, Ordering::SeqCst);
            let Some(Some(q)) = self.queue.get() else {
                return;
            };
            let (tx, rx) = channel::<()>();
            let queued = lock(q)
                .send(Box::new(move || {
                    let _ = tx.send(());
                }))
                .is_ok();
            if queued {
                let _ = rx.recv_timeout(EXIT_FLUSH_LIMIT);
            }
        });
    }

    /// Whether the process exit began (the backend's exit handler ran [`Reaper::at_exit`]).
    /// A backend's background threads make no vendor call from then on: the vendor's own exit
    /// handlers run next and tear the runtime down.
    pub fn exiting(&'static self) -> bool {
        self.exiting.load(Ordering::SeqCst)
    }

    /// Starts the reaper's thread, and with it registers the backend's exit handler, if neither
    /// happened yet (a thread that must stop calling the vendor at exit needs the handler to
    /// run, whether or not a teardown job was ever submitted).
    pub fn start(&'static self) {
        let _ = self.queue.get_or_init(|| self.spawn());
    }

    /// How many jobs were parked: since the exit began, or inside a host callback with neither
    /// a reaper nor a dispatcher thread (module docs).
    pub fn parked(&'static self) -> usize {
        lock(&self.parked).len()
    }

    fn spawn(&'static self) -> Option<Mutex<Sender<ReapJob>>> {
        let (tx, rx) = channel::<ReapJob>();
        let id = self.id();
        let spawned = spawn_helper(self.name, move || {
            CURRENT.with(|c| c.set(id));
            while let Ok(job) = rx.recv() {
                self.run(job);
            }
        })
        .map_err(
            |e| tracing::error!(error = %e, reaper = self.name, "cannot spawn the reaper thread"),
        )
        .ok();
        if spawned.is_some() && !(self.register_exit)() {
            tracing::debug!(
                reaper = self.name,
                "the reaper's exit handler was not registered"
            );
        }
        spawned.map(|_| Mutex::new(tx))
    }

    fn run(&self, job: ReapJob) {
        if catch_unwind(AssertUnwindSafe(job)).is_err() {
            tracing::error!(reaper = self.name, "a teardown job panicked");
        }
    }
}

impl std::fmt::Debug for Reaper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reaper")
            .field("name", &self.name)
            .field("started", &self.queue.get().is_some())
            .field("exiting", &self.exiting.load(Ordering::Relaxed))
            .field("parked", &lock(&self.parked).len())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;
    use std::sync::Arc;

    static REGISTERED: AtomicUsize = AtomicUsize::new(0);

    fn count_registration() -> bool {
        REGISTERED.fetch_add(1, Ordering::SeqCst);
        true
    }

    /// Jobs run off the caller's thread, on the named thread, in order; `submit` returns while
    /// an earlier job is still blocked; a panic does not stop later jobs; a job submitted from
    /// the reaper runs at once; the exit handler is registered once.
    #[test]
    fn jobs_run_in_order_on_the_reaper_and_survive_panics() {
        static R: Reaper = Reaper::new("xstream-test-reaper", count_registration, || {});
        let (open_tx, open_rx) = mpsc::channel::<()>();
        let (seen_tx, seen_rx) = mpsc::channel::<(u32, Option<String>)>();
        let name = || std::thread::current().name().map(str::to_owned);
        let s1 = seen_tx.clone();
        R.submit(Box::new(move || {
            // Held until the test opens it (a guard, not a timing bound).
            let opened = open_rx.recv_timeout(Duration::from_secs(30)).is_ok();
            assert!(opened, "job 1 was not released");
            s1.send((1, name())).unwrap();
        }));
        R.submit(Box::new(|| panic!("a teardown job panics")));
        let s3 = seen_tx.clone();
        R.submit(Box::new(move || s3.send((3, name())).unwrap()));
        assert!(
            seen_rx.try_recv().is_err(),
            "a job ran before it was released"
        );
        assert!(!R.on_reaper());
        open_tx.send(()).unwrap();
        let reaper = Some("xstream-test-reaper".to_owned());
        assert_eq!(
            seen_rx.recv_timeout(Duration::from_secs(30)).unwrap(),
            (1, reaper.clone())
        );
        assert_eq!(
            seen_rx.recv_timeout(Duration::from_secs(30)).unwrap(),
            (3, reaper)
        );
        // A job that submits from the reaper: the inner job runs at once, not behind itself.
        let (tx, rx) = mpsc::channel::<u32>();
        R.submit(Box::new(move || {
            assert!(R.on_reaper());
            let t2 = tx.clone();
            R.submit(Box::new(move || t2.send(1).unwrap()));
            tx.send(2).unwrap();
        }));
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)).unwrap(), 1);
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)).unwrap(), 2);
        assert!(R.flush(Duration::from_secs(30)));
        assert_eq!(
            REGISTERED.load(Ordering::SeqCst),
            1,
            "exit handler registrations"
        );
        assert_eq!(R.parked(), 0);
    }

    /// The exit handler waits for a job still running, and a job submitted once the exit began
    /// is parked: neither run nor dropped.
    #[test]
    fn exit_waits_for_queued_jobs_and_parks_later_ones() {
        static R: Reaper = Reaper::new("xstream-test-exit-reaper", || true, || {});
        struct Flag(Arc<AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let slow_done = Arc::new(AtomicBool::new(false));
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let s = Arc::clone(&slow_done);
        R.submit(Box::new(move || {
            started_tx.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            s.store(true, Ordering::SeqCst);
        }));
        started_rx.recv_timeout(Duration::from_secs(30)).unwrap();
        R.at_exit();
        assert!(
            slow_done.load(Ordering::SeqCst),
            "the exit did not wait for the queued job"
        );
        let (ran, dropped) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let (r2, guard) = (Arc::clone(&ran), Flag(Arc::clone(&dropped)));
        R.submit(Box::new(move || {
            let _g = guard;
            r2.store(true, Ordering::SeqCst);
        }));
        assert_eq!(R.parked(), 1);
        assert!(
            !R.flush(Duration::from_millis(1)),
            "a flush after the exit ran"
        );
        assert!(
            !ran.load(Ordering::SeqCst),
            "a job submitted after the exit ran"
        );
        assert!(!dropped.load(Ordering::SeqCst), "a parked job was dropped");
    }
}
