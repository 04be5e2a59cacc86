//! The runtime's exception information (`aclrtSetExceptionInfoCallback` and the
//! `aclrtGet*FromExceptionInfo` getters), used to say **where** a device fault happened.
//!
//! When the runtime exports the callback and the task, stream and thread getters, the loader
//! installs one process-wide callback after `aclInit`. It records the last few exceptions
//! (task id, stream id, thread id, device id and error code). Every sticky error mapped by
//! [`check`](super::check) (a synchronize, a query, the status a callback receives) is then
//! annotated with the latest exception whose error code matches, in its message:
//! `device exception: stream 5, task 3 (device 0, thread 0x…)`. Without those symbols, or when
//! no exception matches, errors are unchanged.
//!
//! The callback is process-wide in ACL: a program that installs its own with
//! `aclrtSetExceptionInfoCallback` after xstream loaded replaces xstream's (errors then carry no
//! location); one installed before is replaced by xstream's.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, OnceLock};

use xstream_core::{Error, Result};

use super::{check, opt};
use crate::sys::AclFns;

/// One exception as the runtime reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exception {
    pub(crate) task: u32,
    pub(crate) stream: u32,
    pub(crate) thread: u32,
    /// `u32::MAX` when the runtime lacks the getter.
    pub(crate) device: u32,
    /// `None` when the runtime lacks the getter (then any sticky code matches).
    pub(crate) code: Option<u32>,
}

/// How many exceptions are remembered.
const KEEP: usize = 16;

static TABLE: OnceLock<&'static AclFns> = OnceLock::new();
static SEEN: Mutex<VecDeque<Exception>> = Mutex::new(VecDeque::new());

/// Installs xstream's exception callback (once per process) when the runtime has the API.
///
/// # Errors
/// The runtime's error from `aclrtSetExceptionInfoCallback`.
pub(crate) fn install(t: &'static AclFns) -> Result<()> {
    if !crate::loader::has_group(t, &crate::loader::EXCEPTION_INFO) || TABLE.set(t).is_err() {
        return Ok(());
    }
    let set = opt(
        t.aclrtSetExceptionInfoCallback,
        "aclrtSetExceptionInfoCallback",
    )?;
    // SAFETY: `on_exception` matches `aclrtExceptionInfoCallback` and never unwinds.
    let code = unsafe { set(Some(on_exception)) };
    check(t, "aclrtSetExceptionInfoCallback", code)
}

/// Reads one getter, `u32::MAX` without it.
fn get(f: Option<unsafe extern "C" fn(*const c_void) -> u32>, info: *const c_void) -> u32 {
    match f {
        // SAFETY: `info` is the pointer the runtime passed to the callback, valid during it.
        Some(f) => unsafe { f(info) },
        None => u32::MAX,
    }
}

/// The `aclrtExceptionInfoCallback`. Never unwinds.
unsafe extern "C" fn on_exception(info: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let Some(t) = TABLE.get() else { return };
        if info.is_null() {
            return;
        }
        let e = Exception {
            task: get(t.aclrtGetTaskIdFromExceptionInfo, info),
            stream: get(t.aclrtGetStreamIdFromExceptionInfo, info),
            thread: get(t.aclrtGetThreadIdFromExceptionInfo, info),
            device: get(t.aclrtGetDeviceIdFromExceptionInfo, info),
            code: t
                .aclrtGetErrorCodeFromExceptionInfo
                .map(|f| get(Some(f), info)),
        };
        tracing::warn!(?e, "ACL device exception");
        let mut g = SEEN.lock().unwrap_or_else(|p| p.into_inner());
        if g.len() == KEEP {
            g.pop_front();
        }
        g.push_back(e);
    }));
}

/// The latest exception whose code matches `code`.
pub(crate) fn latest(code: i64) -> Option<Exception> {
    let g = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    g.iter()
        .rev()
        .find(|e| match e.code {
            Some(c) => i64::from(c) == code,
            None => true,
        })
        .copied()
}

/// Adds the location of the matching device exception to a sticky error's message.
pub(crate) fn annotate(mut e: Error) -> Error {
    if !e.is_sticky() {
        return e;
    }
    let Error::Native(n) = &mut e else {
        return e;
    };
    let Some(x) = latest(n.code) else { return e };
    let mut place = format!("device exception: stream {}, task {}", x.stream, x.task);
    if x.device != u32::MAX {
        place.push_str(&format!(" (device {}, thread {:#x})", x.device, x.thread));
    } else {
        place.push_str(&format!(" (thread {:#x})", x.thread));
    }
    n.message = Some(match n.message.take() {
        Some(m) => format!("{m}; {place}"),
        None => place,
    });
    e
}
