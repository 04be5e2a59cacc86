//! Simulator-only extensions (`xsim*`). These are NOT part of ACL; a real `libascendcl.so` does
//! not export them. Backends must resolve them optionally.

use crate::codes::*;
use crate::stream::*;
use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::SeqCst;

/// Reads an optional C string argument.
///
/// # Safety
/// `p` must be NULL or a valid NUL-terminated string.
unsafe fn opt_str(p: *const c_char) -> R<Option<String>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL, caller guarantees a valid C string.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map(|s| Some(s.to_owned()))
        .or_else(|_| err(ACL_ERROR_INVALID_PARAM, "string is not UTF-8"))
}

/// `aclError xsimLaunchDelay(aclrtStream stream, uint64_t micros)`: a simulated kernel that
/// occupies the stream for `micros` microseconds (interrupted by abort / force destroy).
///
/// # Safety
/// `stream` is a lookup key.
#[no_mangle]
pub unsafe extern "C" fn xsimLaunchDelay(stream: *mut c_void, micros: u64) -> i32 {
    ffi("xsimLaunchDelay", true, || {
        enqueue_stream(stream)?.push(Task::Delay(micros))
    })
}

/// `aclError xsimLaunchLcg(aclrtStream stream, void* devPtr, size_t words, uint32_t rounds)`:
/// a simulated kernel; for each u32 word `x`, `rounds` times `x = x*1664525 + 1013904223`
/// (wrapping).
///
/// # Safety
/// `dev_ptr` must point to `words` u32 values that stay valid until the kernel has run.
#[no_mangle]
pub unsafe extern "C" fn xsimLaunchLcg(
    stream: *mut c_void,
    dev_ptr: *mut c_void,
    words: usize,
    rounds: u32,
) -> i32 {
    ffi("xsimLaunchLcg", true, || {
        if dev_ptr.is_null() && words > 0 {
            return err(ACL_ERROR_INVALID_PARAM, "devPtr is NULL");
        }
        if (dev_ptr as usize) % 4 != 0 {
            return err(ACL_ERROR_INVALID_PARAM, "devPtr is not 4-byte aligned");
        }
        enqueue_stream(stream)?.push(Task::Lcg {
            ptr: dev_ptr as usize,
            words,
            rounds,
        })
    })
}

/// `aclError xsimLaunchFault(aclrtStream stream, aclError code)`: when executed, poisons the
/// stream's context with `code` (non-zero): later queued work is skipped (records still
/// complete, callbacks still run) and every later sync/query/enqueue in that context returns
/// `code` until the context is destroyed or `xsimReset()` is called.
///
/// # Safety
/// `stream` is a lookup key.
#[no_mangle]
pub unsafe extern "C" fn xsimLaunchFault(stream: *mut c_void, code: i32) -> i32 {
    ffi("xsimLaunchFault", true, || {
        if code == 0 {
            return err(ACL_ERROR_INVALID_PARAM, "fault code must be non-zero");
        }
        let s = enqueue_stream(stream)?;
        crate::exception::note_launcher(s.id);
        s.push(Task::Fault(code))
    })
}

/// `aclError xsimSetFaults(const char* spec)`: replaces the fault rules (NULL or "" clears
/// them). Grammar: `;`-separated `SYMBOL:N:CODE`, `SYMBOL:*:CODE`, `hang:STREAM_ID`,
/// `poison:CODE`. Malformed spec → 100000 (rules unchanged).
///
/// # Safety
/// `spec` must be NULL or a valid C string.
#[no_mangle]
pub unsafe extern "C" fn xsimSetFaults(spec: *const c_char) -> i32 {
    ffi("xsimSetFaults", false, || {
        // SAFETY: caller contract.
        let s = unsafe { opt_str(spec) }?.unwrap_or_default();
        set_faults(&s)
    })
}

/// `aclError xsimReleaseHang(void)`: releases every `hang:` stream.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn xsimReleaseHang() -> i32 {
    ffi("xsimReleaseHang", false, || {
        release_hangs();
        Ok(())
    })
}

/// `aclError xsimReset(void)`: clears fault rules, call counters, hangs and poison (global and
/// per context).
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn xsimReset() -> i32 {
    ffi("xsimReset", false, || {
        reset_faults();
        Ok(())
    })
}

/// `aclError xsimSetLimits(uint32_t maxStreams, uint32_t maxEvents)`: per-device limits
/// overriding `XSIM_MAX_STREAMS` / `XSIM_MAX_EVENTS` / the product; 0 restores the default.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn xsimSetLimits(max_streams: u32, max_events: u32) -> i32 {
    ffi("xsimSetLimits", false, || {
        set_limits(max_streams, max_events);
        Ok(())
    })
}

/// `aclError xsimSetProduct(const char* product)`: `"a2"`, `"310p"` or `"910"` overrides
/// `XSIM_PRODUCT`; NULL restores it. Unknown name → 100000.
///
/// # Safety
/// `product` must be NULL or a valid C string.
#[no_mangle]
pub unsafe extern "C" fn xsimSetProduct(product: *const c_char) -> i32 {
    ffi("xsimSetProduct", false, || {
        // SAFETY: caller contract.
        match unsafe { opt_str(product) }? {
            None => set_product(None),
            Some(s) => match parse_product(&s) {
                Some(p) => set_product(Some(p)),
                None => return err(ACL_ERROR_INVALID_PARAM, format!("unknown product '{s}'")),
            },
        }
        Ok(())
    })
}

/// `uint64_t xsimLiveStreams(void)`: live explicit streams (default streams excluded).
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn xsimLiveStreams() -> u64 {
    count_call("xsimLiveStreams");
    catch_unwind(|| live_counts().0).unwrap_or(u64::MAX)
}

/// `uint64_t xsimLiveEvents(void)`: live events.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn xsimLiveEvents() -> u64 {
    count_call("xsimLiveEvents");
    catch_unwind(|| live_counts().1).unwrap_or(u64::MAX)
}

/// `uint64_t xsimLiveThreads(void)`: threads the simulator runs right now (stream workers,
/// which exit when their stream is idle, and per-context host-func threads).
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn xsimLiveThreads() -> u64 {
    count_call("xsimLiveThreads");
    LIVE_THREADS.load(SeqCst)
}

/// `uint64_t xsimCallCount(const char* symbol)`: calls of `symbol` since load or `xsimReset()`
/// (failed and fault-injected calls included). NULL or unknown → 0.
///
/// # Safety
/// `symbol` must be NULL or a valid C string.
#[no_mangle]
pub unsafe extern "C" fn xsimCallCount(symbol: *const c_char) -> u64 {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: caller contract.
        match unsafe { opt_str(symbol) } {
            Ok(Some(s)) => call_count(&s),
            _ => 0,
        }
    }))
    .unwrap_or(0)
}

/// `const char* xsimVersion(void)`: static version string naming the simulator.
///
/// # Safety
/// No pointer arguments; the result is a static string.
#[no_mangle]
pub unsafe extern "C" fn xsimVersion() -> *const c_char {
    concat!(
        "xstream-ascend-sim ",
        env!("CARGO_PKG_VERSION"),
        " (ACL 1.17.0 CPU test double)\0"
    )
    .as_ptr()
    .cast()
}

static VERSION: std::sync::Mutex<Option<(i32, i32, i32)>> = std::sync::Mutex::new(None);

/// The version `aclrtGetVersion` reports (default 1.17.0).
pub(crate) fn acl_version() -> (i32, i32, i32) {
    lock(&VERSION).unwrap_or((1, 17, 0))
}

/// `aclError xsimSetVersion(int32_t major, int32_t minor, int32_t patch)`: the version
/// `aclrtGetVersion` reports from now on (so loaders can be tested against other releases);
/// `0, 0, 0` restores 1.17.0. Negative parts → 100000.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn xsimSetVersion(major: i32, minor: i32, patch: i32) -> i32 {
    ffi("xsimSetVersion", false, || {
        if major < 0 || minor < 0 || patch < 0 {
            return err(ACL_ERROR_INVALID_PARAM, "negative version part");
        }
        *lock(&VERSION) = (major, minor, patch)
            .ne(&(0, 0, 0))
            .then_some((major, minor, patch));
        Ok(())
    })
}
