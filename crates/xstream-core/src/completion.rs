//! Executor-agnostic completion futures.
//!
//! [`Stream::completed`](crate::Stream::completed) enqueues one host callback that fires a
//! [`CompletionSignal`]; [`Event::completed`](crate::Event::completed) registers the event with
//! one shared poller thread (no thread per future, no spinning per future). A dropped
//! [`Completion`] is harmless: the signal side owns nothing the device uses. A dropped signal
//! resolves its future with [`Error::CallbackCancelled`], so a future never hangs because its
//! waker path vanished.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Condvar, OnceLock};

use crate::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use crate::{Error, Result};

struct State {
    result: Option<Result<()>>,
    waker: Option<Waker>,
}

/// A future that resolves when device work completes.
#[must_use = "a Completion does nothing unless awaited or waited on"]
pub struct Completion {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Completion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completion")
            .field("done", &self.is_done())
            .finish()
    }
}

/// The sending half of a [`Completion`].
pub struct CompletionSignal {
    state: Option<Arc<Mutex<State>>>,
}

impl std::fmt::Debug for CompletionSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CompletionSignal")
    }
}

/// A connected future / signal pair.
pub fn completion() -> (Completion, CompletionSignal) {
    let state = Arc::new(Mutex::new(State {
        result: None,
        waker: None,
    }));
    (
        Completion {
            state: Arc::clone(&state),
        },
        CompletionSignal { state: Some(state) },
    )
}

impl CompletionSignal {
    /// Resolves the future with `r` and wakes its task.
    pub fn complete(mut self, r: Result<()>) {
        self.finish(r);
    }

    fn finish(&mut self, r: Result<()>) {
        if let Some(s) = self.state.take() {
            let waker = {
                let mut g = s.lock().unwrap_or_else(|e| e.into_inner());
                g.result = Some(r);
                g.waker.take()
            };
            if let Some(w) = waker {
                w.wake();
            }
        }
    }
}

impl Drop for CompletionSignal {
    fn drop(&mut self) {
        self.finish(Err(Error::CallbackCancelled(
            "the completion signal was dropped before the work completed",
        )));
    }
}

impl Completion {
    /// Whether the result is available.
    pub fn is_done(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .result
            .is_some()
    }

    /// A future that is already resolved.
    pub fn ready(r: Result<()>) -> Self {
        let (c, s) = completion();
        s.complete(r);
        c
    }

    /// Blocks the calling thread until the future resolves (no executor needed).
    ///
    /// It polls for up to [`Completion::SPIN`] before parking the thread: a park/unpark pair
    /// costs about 10 µs of wake-up latency on the GPU machine (docs/performance.md), more
    /// than most completions take once the work is nearly done. Like CUDA's default `AUTO`
    /// scheduling, this trades a short burst of CPU for latency; longer waits sleep.
    ///
    /// # Errors
    /// The work's error.
    pub fn wait(self) -> Result<()> {
        let start = std::time::Instant::now();
        while start.elapsed() < Self::SPIN {
            if let Some(r) = self
                .state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .result
                .take()
            {
                return r;
            }
            std::hint::spin_loop();
        }
        block_on(self)
    }

    /// How long [`Completion::wait`] polls before it parks the thread.
    pub const SPIN: Duration = Duration::from_micros(50);
}

impl Future for Completion {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match g.result.take() {
            Some(r) => Poll::Ready(r),
            None => {
                match &g.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => g.waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }
}

struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

/// Drives a future to completion on the calling thread by parking it between polls.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let waker = Waker::from(std::sync::Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// A check the shared poller calls until it returns `Some`.
pub type PollFn = Box<dyn FnMut() -> Option<Result<()>> + Send + 'static>;

struct Poller {
    queue: std::sync::Mutex<Vec<(PollFn, CompletionSignal)>>,
    cv: Condvar,
}

fn poller() -> &'static Poller {
    static P: OnceLock<Poller> = OnceLock::new();
    static STARTED: OnceLock<()> = OnceLock::new();
    let p = P.get_or_init(|| Poller {
        queue: std::sync::Mutex::new(Vec::new()),
        cv: Condvar::new(),
    });
    STARTED.get_or_init(|| {
        let spawned = std::thread::Builder::new()
            .name("xstream-poller".into())
            .spawn(|| poller_loop(poller()));
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot spawn the completion poller");
        }
    });
    p
}

fn poller_loop(p: &'static Poller) {
    let mut active: Vec<(PollFn, CompletionSignal)> = Vec::new();
    let mut backoff = Duration::from_micros(10);
    loop {
        {
            let mut q = p.queue.lock().unwrap_or_else(|e| e.into_inner());
            while q.is_empty() && active.is_empty() {
                q = p.cv.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            if !q.is_empty() {
                backoff = Duration::from_micros(10);
            }
            active.append(&mut q);
        }
        let mut i = 0;
        while i < active.len() {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (active[i].0)()))
                .unwrap_or_else(|_| {
                    Some(Err(Error::CallbackCancelled("completion check panicked")))
                });
            match r {
                Some(r) => {
                    let (_, sig) = active.swap_remove(i);
                    sig.complete(r);
                }
                None => i += 1,
            }
        }
        if !active.is_empty() {
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(Duration::from_micros(200));
        }
    }
}

/// Resolves a [`Completion`] once `check` returns `Some`, polling it from one shared thread
/// (10 µs, doubling to 200 µs between rounds while anything is pending; parked otherwise).
pub fn poll_until(check: PollFn) -> Completion {
    let (c, s) = completion();
    let p = poller();
    p.queue
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((check, s));
    p.cv.notify_one();
    c
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn signal_resolves_and_drop_cancels() {
        let (c, s) = completion();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            s.complete(Ok(()));
        });
        assert!(c.wait().is_ok());
        t.join().unwrap();
        let (c, s) = completion();
        drop(s);
        assert!(matches!(c.wait(), Err(Error::CallbackCancelled(_))));
        let (c, s) = completion();
        drop(c);
        s.complete(Ok(()));
    }

    #[test]
    fn poller_resolves() {
        let n = Arc::new(AtomicUsize::new(0));
        let n2 = n.clone();
        let c = poll_until(Box::new(move || {
            (n2.fetch_add(1, Ordering::SeqCst) >= 3).then_some(Ok(()))
        }));
        assert!(c.wait().is_ok());
        assert!(n.load(Ordering::SeqCst) >= 4);
        assert!(Completion::ready(Err(Error::NotReady)).wait().is_err());
    }
}
