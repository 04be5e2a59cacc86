//! Errors and the call wrapper: every export runs its body through `ffi` (call counting,
//! injected faults, the `aclInit` check, errors and panics turned into ACL codes), which records
//! the thread's last error and message; `aclGetRecentErrMsg`, `aclrtPeekAtLastError` and
//! `aclrtGetLastError` read them. Also the small helpers every area uses: locking, out-pointers,
//! NULL checks, C strings and timeouts.

use crate::codes::*;
use crate::device::*;
use crate::faults::*;
use std::cell::Cell;
use std::cell::RefCell;
use std::ffi::c_char;
use std::ffi::CStr;
use std::ffi::CString;
use std::panic::catch_unwind;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Condvar;
use std::sync::MutexGuard;
use std::time::Duration;
use std::time::Instant;

/// A failed call: ACL code plus message for `aclGetRecentErrMsg`.
pub(crate) struct AclErr {
    pub(crate) code: i32,
    pub(crate) msg: String,
}

/// Result type of every call body.
pub(crate) type R<T = ()> = Result<T, AclErr>;

/// Builds an error result.
pub(crate) fn err<T>(code: i32, msg: impl Into<String>) -> R<T> {
    Err(AclErr {
        code,
        msg: msg.into(),
    })
}

pub(crate) use xstream_core::sync::lock;

pub(crate) fn wait_for<'a, T>(
    cv: &Condvar,
    g: MutexGuard<'a, T>,
    d: Duration,
) -> MutexGuard<'a, T> {
    match cv.wait_timeout(g, d) {
        Ok((g, _)) => g,
        Err(e) => e.into_inner().0,
    }
}

/// Polling slice used by interruptible waits.
pub(crate) const SLICE: Duration = Duration::from_millis(5);

thread_local! {
    static LAST_ERR: Cell<i32> = const { Cell::new(0) };
    static ERR_MSG: RefCell<Option<String>> = const { RefCell::new(None) };
    static MSG_OUT: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// `pthread_self()` of the calling thread as the `u64` ACL uses for thread ids.
pub(crate) fn self_tid() -> u64 {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as u64 }
}

fn set_error(name: &str, e: &AclErr) {
    let _ = LAST_ERR.try_with(|c| c.set(e.code));
    let _ = ERR_MSG.try_with(|m| {
        *m.borrow_mut() = Some(format!("EE{}: {name}: {} (xsim)", e.code, e.msg));
    });
}

/// Runs an exported call body: counts it, applies injected faults, optionally checks `aclInit`,
/// converts errors and panics into ACL codes and records the thread's last error/message.
pub(crate) fn ffi(name: &'static str, need_init: bool, f: impl FnOnce() -> R) -> i32 {
    let r = catch_unwind(AssertUnwindSafe(|| {
        if let Some(code) = fault_hit(name) {
            return err(code, "injected fault (XSIM_FAULTS)");
        }
        if need_init && !INITED.load(SeqCst) {
            return err(ACL_ERROR_UNINITIALIZE, "aclInit has not been called");
        }
        f()
    }));
    match r {
        Ok(Ok(())) => ACL_SUCCESS,
        Ok(Err(e)) => {
            set_error(name, &e);
            e.code
        }
        Err(_) => {
            set_error(
                name,
                &AclErr {
                    code: ACL_ERROR_RT_INTERNAL_ERROR,
                    msg: "internal panic caught at the FFI boundary".into(),
                },
            );
            ACL_ERROR_RT_INTERNAL_ERROR
        }
    }
}

/// Drains the thread's recent error message; the returned pointer stays valid until the next call.
pub(crate) fn take_err_msg() -> *const libc::c_char {
    let msg = ERR_MSG.try_with(|m| m.borrow_mut().take()).ok().flatten();
    match msg {
        None => std::ptr::null(),
        Some(s) => {
            let c = CString::new(s.replace('\0', " ")).unwrap_or_default();
            let p = c.as_ptr();
            let _ = MSG_OUT.try_with(|o| *o.borrow_mut() = Some(c));
            p
        }
    }
}

/// Returns (and optionally clears) the thread's last error code.
pub(crate) fn last_error(clear: bool) -> i32 {
    LAST_ERR
        .try_with(|c| {
            let v = c.get();
            if clear {
                c.set(0);
            }
            v
        })
        .unwrap_or(0)
}

/// Converts an ACL timeout (ms, -1 forever) into a deadline; 0 or < -1 → `bad`.
pub(crate) fn deadline(timeout: i32, bad: i32) -> R<Option<Instant>> {
    match timeout {
        -1 => Ok(None),
        t if t > 0 => Ok(Some(Instant::now() + Duration::from_millis(t as u64))),
        _ => err(bad, format!("invalid timeout {timeout}")),
    }
}

/// Writes `v` through an out-pointer, rejecting NULL with `ACL_ERROR_INVALID_PARAM`.
///
/// # Safety
/// `p` must be NULL or valid for a write of `T`.
pub(crate) unsafe fn put<T>(p: *mut T, v: T) -> R {
    if p.is_null() {
        return err(ACL_ERROR_INVALID_PARAM, "NULL output pointer");
    }
    // SAFETY: non-NULL, and the caller guarantees validity for writes.
    unsafe { p.write(v) };
    Ok(())
}

/// Rejects a NULL pointer argument with `ACL_ERROR_INVALID_PARAM`.
pub(crate) fn non_null<T>(p: *const T, what: &str) -> R {
    if p.is_null() {
        return err(ACL_ERROR_INVALID_PARAM, format!("{what} is NULL"));
    }
    Ok(())
}

/// Reads an optional C string argument.
///
/// # Safety
/// `p` must be NULL or a valid NUL-terminated string.
pub(crate) unsafe fn opt_str(p: *const c_char) -> R<Option<String>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL, caller guarantees a valid C string.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map(|s| Some(s.to_owned()))
        .or_else(|_| err(ACL_ERROR_INVALID_PARAM, "string is not UTF-8"))
}

/// `const char* aclGetRecentErrMsg()`: the calling thread's last error message, drained by the
/// call; NULL when none. Valid until the next call on the same thread.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclGetRecentErrMsg() -> *const c_char {
    count_call("aclGetRecentErrMsg");
    catch_unwind(take_err_msg).unwrap_or(std::ptr::null())
}

/// `aclError aclrtPeekAtLastError(aclrtLastErrLevel level)`: the thread's last error code,
/// not cleared. Level other than `ACL_RT_THREAD_LEVEL` (0) → 100000.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclrtPeekAtLastError(level: i32) -> i32 {
    count_call("aclrtPeekAtLastError");
    catch_unwind(AssertUnwindSafe(|| {
        if level != 0 {
            ACL_ERROR_INVALID_PARAM
        } else {
            last_error(false)
        }
    }))
    .unwrap_or(ACL_ERROR_RT_INTERNAL_ERROR)
}

/// `aclError aclrtGetLastError(aclrtLastErrLevel level)`: the thread's last error code, then
/// clears it.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetLastError(level: i32) -> i32 {
    count_call("aclrtGetLastError");
    catch_unwind(AssertUnwindSafe(|| {
        if level != 0 {
            ACL_ERROR_INVALID_PARAM
        } else {
            last_error(true)
        }
    }))
    .unwrap_or(ACL_ERROR_RT_INTERNAL_ERROR)
}
