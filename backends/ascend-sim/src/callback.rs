//! Host callbacks: report-style callbacks (`aclrtLaunchCallback` with `aclrtSubscribeReport`,
//! `aclrtUnSubscribeReport`, `aclrtProcessReport`) and `aclrtLaunchHostFunc` on each context's
//! internal host-func thread. Host-func subscriptions are in `hostfunc`.

use crate::codes::*;
use crate::device::*;
use crate::error::*;
use crate::registry::*;
use crate::stream::*;
use crate::task::*;
use std::collections::HashMap;
use std::collections::HashSet;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::panic::catch_unwind;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::sync::Condvar;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::time::Duration;
use std::time::Instant;

/// C `aclrtCallback` / `aclrtHostFunc`: `void (*)(void*)`, nullable.
pub type AclrtCallback = Option<unsafe extern "C" fn(*mut c_void)>;

/// A report delivered to a host thread.
pub(crate) struct Report {
    pub(crate) f: unsafe extern "C" fn(*mut c_void),
    pub(crate) data: usize,
    pub(crate) done: Option<Arc<Done>>,
}

/// Completion flag of a blocking callback.
#[derive(Default)]
pub(crate) struct Done {
    pub(crate) m: Mutex<bool>,
    pub(crate) cv: Condvar,
}

impl Report {
    /// Runs the callback (catching panics) and signals completion.
    pub(crate) fn run(self) {
        let (f, data) = (self.f, self.data);
        // SAFETY: the user registered `f` as an aclrtCallback/aclrtHostFunc taking `data`.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe { f(data as *mut c_void) }));
        if let Some(d) = self.done {
            *lock(&d.m) = true;
            d.cv.notify_all();
        }
    }
}

#[derive(Default)]
pub(crate) struct HfState {
    queue: VecDeque<Report>,
    thread: bool,
    stop: bool,
}

impl Context {
    /// Makes sure the per-context host-func thread runs.
    pub(crate) fn ensure_hf_thread(self: &Arc<Self>) -> R {
        let mut g = lock(&self.hf);
        if g.thread {
            return Ok(());
        }
        let me = self.clone();
        LIVE_THREADS.fetch_add(1, SeqCst);
        g.thread = true;
        g.stop = false;
        let r = std::thread::Builder::new()
            .name("xsim-hostfunc".into())
            .spawn(move || me.hf_loop());
        if r.is_err() {
            g.thread = false;
            LIVE_THREADS.fetch_sub(1, SeqCst);
            return err(ACL_ERROR_RT_INTERNAL_ERROR, "cannot spawn host-func thread");
        }
        Ok(())
    }

    fn hf_loop(self: Arc<Self>) {
        loop {
            let mut g = lock(&self.hf);
            while g.queue.is_empty() && !g.stop {
                g = wait_for(&self.hf_cv, g, Duration::from_millis(100));
            }
            let Some(rep) = g.queue.pop_front() else {
                g.thread = false;
                LIVE_THREADS.fetch_sub(1, SeqCst);
                self.hf_cv.notify_all();
                return;
            };
            drop(g);
            rep.run();
        }
    }

    pub(crate) fn hf_submit(&self, rep: Report) {
        let mut g = lock(&self.hf);
        if !g.thread {
            drop(g);
            rep.run();
            return;
        }
        g.queue.push_back(rep);
        self.hf_cv.notify_all();
    }

    pub(crate) fn stop_hf(&self) {
        let mut g = lock(&self.hf);
        g.stop = true;
        self.hf_cv.notify_all();
        let deadline = Instant::now() + Duration::from_secs(5);
        while g.thread && Instant::now() < deadline {
            g = wait_for(&self.hf_cv, g, SLICE);
        }
    }
}

/// Delivers a report to a subscribed thread; runs it inline when the thread is gone.
/// Returns false when it ran inline.
pub(crate) fn deliver_report(tid: u64, rep: Report) -> bool {
    let mut subs = lock(subs());
    if let Some(e) = subs.get_mut(&tid) {
        e.pending.push_back(rep);
        SUBS_CV.notify_all();
        true
    } else {
        drop(subs);
        rep.run();
        false
    }
}

/// A thread subscribed with `aclrtSubscribeReport`.
pub(crate) struct Sub {
    pub(crate) device: i32,
    pub(crate) streams: HashSet<usize>,
    pub(crate) pending: VecDeque<Report>,
}

/// Subscriptions by thread id.
pub(crate) fn subs() -> &'static Mutex<HashMap<u64, Sub>> {
    static S: OnceLock<Mutex<HashMap<u64, Sub>>> = OnceLock::new();
    S.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Signalled when a report is queued.
pub(crate) static SUBS_CV: Condvar = Condvar::new();

/// Removes `stream` from `tid`'s subscription; drops the entry when it has nothing left.
pub(crate) fn unsubscribe(tid: u64, stream: usize) {
    let mut map = lock(subs());
    if let Some(e) = map.get_mut(&tid) {
        e.streams.remove(&stream);
        if e.streams.is_empty() && e.pending.is_empty() {
            map.remove(&tid);
        }
    }
}

/// `aclError aclrtLaunchCallback(aclrtCallback fn, void* userData, aclrtCallbackBlockType
/// blockType, aclrtStream stream)`: report-style callback; needs a subscribed thread (107015).
///
/// # Safety
/// `func` must be a valid callback for `user_data`; handles are lookup keys.
#[no_mangle]
pub unsafe extern "C" fn aclrtLaunchCallback(
    func: AclrtCallback,
    user_data: *mut c_void,
    block_type: i32,
    stream: *mut c_void,
) -> i32 {
    ffi("aclrtLaunchCallback", true, || {
        let Some(f) = func else {
            return err(ACL_ERROR_INVALID_PARAM, "callback is NULL");
        };
        if block_type != ACL_CALLBACK_BLOCK && block_type != ACL_CALLBACK_NO_BLOCK {
            return err(
                ACL_ERROR_INVALID_PARAM,
                format!("bad blockType {block_type}"),
            );
        }
        let s = enqueue_stream(stream)?;
        let Some(tid) = lock(&s.st).sub_tid else {
            return err(
                ACL_ERROR_RT_STREAM_NO_CB_REG,
                "no thread subscribed to this stream",
            );
        };
        s.push(Task::Callback {
            f,
            data: user_data as usize,
            block: block_type == ACL_CALLBACK_BLOCK,
            tid,
        })
    })
}

/// `aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream)`: `threadId` is the
/// processing thread's `pthread_self()`.
///
/// # Safety
/// `stream` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtSubscribeReport(thread_id: u64, stream: *mut c_void) -> i32 {
    ffi("aclrtSubscribeReport", true, || {
        let s = stream_of(stream)?;
        let key = Arc::as_ptr(&s) as usize;
        let mut g = lock(&s.st);
        if g.sub_tid.is_some() {
            return err(ACL_ERROR_RT_STREAM_SUBSCRIBE, "stream already subscribed");
        }
        if g.hostfunc {
            return err(
                ACL_ERROR_RT_STREAM_SUBSCRIBE,
                "stream uses aclrtLaunchHostFunc",
            );
        }
        let mut subs = lock(subs());
        let e = subs.entry(thread_id).or_insert_with(|| Sub {
            device: s.ctx.device,
            streams: HashSet::new(),
            pending: Default::default(),
        });
        if e.device != s.ctx.device {
            return err(
                ACL_ERROR_RT_THREAD_SUBSCRIBE,
                "thread subscribed on another device",
            );
        }
        e.streams.insert(key);
        g.sub_tid = Some(thread_id);
        Ok(())
    })
}

/// `aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream)`.
///
/// # Safety
/// `stream` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtUnSubscribeReport(thread_id: u64, stream: *mut c_void) -> i32 {
    ffi("aclrtUnSubscribeReport", true, || {
        let s = stream_of(stream)?;
        let mut g = lock(&s.st);
        match g.sub_tid {
            None => err(ACL_ERROR_RT_STREAM_SUBSCRIBE, "stream not subscribed"),
            Some(t) if t != thread_id => err(
                ACL_ERROR_RT_THREAD_SUBSCRIBE,
                "stream subscribed by another thread",
            ),
            Some(_) => {
                g.sub_tid = None;
                drop(g);
                unsubscribe(thread_id, Arc::as_ptr(&s) as usize);
                Ok(())
            }
        }
    })
}

/// `aclError aclrtProcessReport(int32_t timeout)`: waits up to `timeout` ms (-1 forever; 0 or
/// < -1 → 100000) and runs every pending callback inline; none → 507012; thread without
/// subscription → 107012.
///
/// # Safety
/// Runs user callbacks.
#[no_mangle]
pub unsafe extern "C" fn aclrtProcessReport(timeout: i32) -> i32 {
    ffi("aclrtProcessReport", true, || {
        let dl = deadline(timeout, ACL_ERROR_INVALID_PARAM)?;
        let tid = self_tid();
        let mut g = lock(subs());
        let batch = loop {
            let Some(e) = g.get_mut(&tid) else {
                return err(ACL_ERROR_RT_THREAD_SUBSCRIBE, "thread has no subscription");
            };
            if !e.pending.is_empty() {
                break std::mem::take(&mut e.pending);
            }
            let mut slice = Duration::from_millis(100);
            if let Some(d) = dl {
                let now = Instant::now();
                if now >= d {
                    return err(ACL_ERROR_RT_REPORT_TIMEOUT, "no callback within timeout");
                }
                slice = slice.min(d - now);
            }
            g = SUBS_CV
                .wait_timeout(g, slice)
                .map_or_else(|p| p.into_inner().0, |r| r.0);
        };
        if g.get(&tid).is_some_and(|e| e.streams.is_empty()) {
            g.remove(&tid);
        }
        drop(g);
        for rep in batch {
            rep.run();
        }
        Ok(())
    })
}

/// `aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void* args)`: runs on
/// the context's internal callback thread; always blocks the stream. Mixing with report-style
/// subscription → 107011.
///
/// # Safety
/// `func` must be a valid host function for `args`; `stream` is a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtLaunchHostFunc(
    stream: *mut c_void,
    func: AclrtCallback,
    args: *mut c_void,
) -> i32 {
    ffi("aclrtLaunchHostFunc", true, || {
        let Some(f) = func else {
            return err(ACL_ERROR_INVALID_PARAM, "host func is NULL");
        };
        let s = enqueue_stream(stream)?;
        {
            let mut g = lock(&s.st);
            if g.sub_tid.is_some() {
                return err(
                    ACL_ERROR_RT_STREAM_SUBSCRIBE,
                    "stream uses report-style callbacks",
                );
            }
            g.hostfunc = true;
        }
        s.ctx.ensure_hf_thread()?;
        s.push(Task::HostFunc {
            f,
            data: args as usize,
        })
    })
}
