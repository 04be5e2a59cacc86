//! Host-function subscriptions: `aclrtSubscribeHostFunc`, `aclrtProcessHostFunc`,
//! `aclrtUnSubscribeHostFunc`.
//!
//! Third host-callback mechanism beside report-style callbacks (`aclrtLaunchCallback` +
//! `aclrtSubscribeReport`) and `aclrtLaunchHostFunc`'s internal thread. Vendor documentation
//! lists these calls for model CPU operators on IPV350 and marks them unsupported on A2/A3; the
//! simulator implements them on every product with these rules:
//!
//! * A stream has at most one host-func thread (a second subscription of the same stream →
//!   107011); one thread may serve several streams of the **same device** (another device →
//!   107012).
//! * A stream with a report subscription cannot take a host-func subscription (107011), and
//!   vice versa through the existing `aclrtLaunchHostFunc` rule.
//! * `aclrtLaunchHostFunc` on a subscribed stream hands the function to the subscribed thread
//!   instead of the context's internal thread; the stream still blocks until it ran. The thread
//!   runs it inside `aclrtProcessHostFunc(timeout)` (ms, -1 forever; 0 or < -1 → 100000;
//!   nothing within the timeout → 507012; a thread with no subscription → 107012).
//! * Unsubscribing (or destroying the stream) runs the stream's pending host funcs on the
//!   calling thread, and later ones go to the internal thread again, so no stream waits forever
//!   on a thread that left.

use crate::callback::*;
use crate::codes::*;
use crate::device::*;
use crate::error::*;
use crate::registry::*;
use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::c_void;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Thread {
    device: i32,
    streams: HashSet<i32>,
    pending: VecDeque<(i32, Report)>,
}

#[derive(Default)]
struct Subs {
    /// Stream id → subscribed thread id.
    by_stream: HashMap<i32, u64>,
    /// Thread id → what it serves.
    threads: HashMap<u64, Thread>,
}

static SUBS: Mutex<Option<Subs>> = Mutex::new(None);
static CV: Condvar = Condvar::new();

fn with<T>(f: impl FnOnce(&mut Subs) -> T) -> T {
    let mut g = lock(&SUBS);
    f(g.get_or_insert_with(Subs::default))
}

/// Hands a host func of stream `stream_id` to its subscribed thread; gives it back when the
/// stream has none.
pub(crate) fn deliver(stream_id: i32, rep: Report) -> Result<(), Report> {
    with(|s| {
        let Some(tid) = s.by_stream.get(&stream_id).copied() else {
            return Err(rep);
        };
        match s.threads.get_mut(&tid) {
            Some(t) => {
                t.pending.push_back((stream_id, rep));
                CV.notify_all();
                Ok(())
            }
            None => Err(rep),
        }
    })
}

/// Removes `stream_id`'s subscription and returns its pending host funcs.
fn unsubscribe(tid: u64, stream_id: i32) -> R<Vec<Report>> {
    with(|s| {
        if s.by_stream.get(&stream_id) != Some(&tid) {
            return err(
                ACL_ERROR_RT_THREAD_SUBSCRIBE,
                "stream is not subscribed by this thread",
            );
        }
        s.by_stream.remove(&stream_id);
        let mut back = Vec::new();
        if let Some(t) = s.threads.get_mut(&tid) {
            t.streams.remove(&stream_id);
            let (mine, rest): (VecDeque<_>, VecDeque<_>) =
                t.pending.drain(..).partition(|(sid, _)| *sid == stream_id);
            t.pending = rest;
            back.extend(mine.into_iter().map(|(_, r)| r));
            if t.streams.is_empty() && t.pending.is_empty() {
                s.threads.remove(&tid);
            }
        }
        Ok(back)
    })
}

/// `aclError aclrtSubscribeHostFunc(uint64_t hostFuncThreadId, aclrtStream exeStream)`.
///
/// # Safety
/// `exe_stream` is a lookup key (NULL = the current context's default stream).
#[no_mangle]
pub unsafe extern "C" fn aclrtSubscribeHostFunc(thread_id: u64, exe_stream: *mut c_void) -> i32 {
    ffi("aclrtSubscribeHostFunc", true, || {
        let s = if exe_stream.is_null() {
            cur_ctx()?.default_stream()?
        } else {
            stream_of(exe_stream)?
        };
        if lock(&s.st).sub_tid.is_some() {
            return err(
                ACL_ERROR_RT_STREAM_SUBSCRIBE,
                "stream uses report-style callbacks",
            );
        }
        with(|m| {
            if m.by_stream.contains_key(&s.id) {
                return err(
                    ACL_ERROR_RT_STREAM_SUBSCRIBE,
                    "stream already has a host-func thread",
                );
            }
            let t = m.threads.entry(thread_id).or_insert_with(|| Thread {
                device: s.ctx.device,
                ..Thread::default()
            });
            if t.device != s.ctx.device {
                return err(
                    ACL_ERROR_RT_THREAD_SUBSCRIBE,
                    "thread serves streams of another device",
                );
            }
            t.streams.insert(s.id);
            m.by_stream.insert(s.id, thread_id);
            Ok(())
        })
    })
}

/// `aclError aclrtUnSubscribeHostFunc(uint64_t hostFuncThreadId, aclrtStream exeStream)`:
/// pending host funcs of the stream run on the calling thread; a stream this thread did not
/// subscribe → 107012.
///
/// # Safety
/// `exe_stream` is a lookup key (NULL = the current context's default stream).
#[no_mangle]
pub unsafe extern "C" fn aclrtUnSubscribeHostFunc(thread_id: u64, exe_stream: *mut c_void) -> i32 {
    ffi("aclrtUnSubscribeHostFunc", true, || {
        let s = if exe_stream.is_null() {
            cur_ctx()?.default_stream()?
        } else {
            stream_of(exe_stream)?
        };
        // The stream still waits on these: run them here.
        for rep in unsubscribe(thread_id, s.id)? {
            rep.run();
        }
        Ok(())
    })
}

/// Called when a stream is gone: its subscription ends and pending host funcs run here.
pub(crate) fn forget_stream(stream_id: i32) {
    let tid = with(|s| s.by_stream.get(&stream_id).copied());
    if let Some(tid) = tid {
        if let Ok(back) = unsubscribe(tid, stream_id) {
            for rep in back {
                rep.run();
            }
        }
    }
}

/// `aclError aclrtProcessHostFunc(int32_t timeout)`: runs, on the calling thread, the host
/// funcs queued for the streams it subscribed.
///
/// # Safety
/// No pointer arguments; the host funcs run are the callers' own.
#[no_mangle]
pub unsafe extern "C" fn aclrtProcessHostFunc(timeout: i32) -> i32 {
    ffi("aclrtProcessHostFunc", true, || {
        let dl = deadline(timeout, ACL_ERROR_INVALID_PARAM)?;
        let tid = self_tid();
        let mut g = lock(&SUBS);
        let batch = loop {
            let Some(t) = g.get_or_insert_with(Subs::default).threads.get_mut(&tid) else {
                return err(ACL_ERROR_RT_THREAD_SUBSCRIBE, "thread has no subscription");
            };
            if !t.pending.is_empty() {
                break std::mem::take(&mut t.pending);
            }
            let mut slice = Duration::from_millis(100);
            if let Some(d) = dl {
                let now = Instant::now();
                if now >= d {
                    return err(ACL_ERROR_RT_REPORT_TIMEOUT, "no host func within timeout");
                }
                slice = slice.min(d - now);
            }
            g = CV
                .wait_timeout(g, slice)
                .map_or_else(|p| p.into_inner().0, |r| r.0);
        };
        drop(g);
        for (_, rep) in batch {
            rep.run();
        }
        Ok(())
    })
}
