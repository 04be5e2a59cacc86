//! The FFI surface: the exported driver functions (`#[no_mangle] extern "C"`, declared here
//! from the driver API's documented prototypes) and the `xnull_*` controls. Every function
//! counts its call, then runs its body inside `catch_unwind` (a panic returns
//! `CUDA_ERROR_UNKNOWN`, never unwinds into the caller). All of the crate's `unsafe` is in this
//! module, split along the driver's families: `device` (initialisation, device, context),
//! `stream` (streams, events), `module` (modules, functions, kernel and host-function launches),
//! `memory` (allocation, copies, memsets), `vmm` (virtual memory: reservations, physical
//! handles, mappings, access); the shared helpers and the `xnull_*` controls here.
//!
//! Handles (contexts, streams, events, modules, functions) are addresses of objects the null
//! driver leaks on purpose: a destroyed handle stays readable, so a stale one is refused with
//! `CUDA_ERROR_INVALID_HANDLE` instead of being undefined behaviour. A handle the null driver
//! never returned is outside the driver's contract (as with the real driver).
#![allow(unsafe_code, non_snake_case)]

use std::alloc::Layout;
use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::ptx;
use crate::state::{self, hit, F};

/// `CUresult`.
type CUresult = u32;
type CUdevice = i32;
type CUdeviceptr = u64;
type CUcontext = *mut c_void;
type CUstream = *mut c_void;
type CUevent = *mut c_void;
type CUmodule = *mut c_void;
type CUfunction = *mut c_void;
type CUhostFn = Option<unsafe extern "C" fn(*mut c_void)>;

const SUCCESS: u32 = 0;
const INVALID_VALUE: u32 = 1;
const OUT_OF_MEMORY: u32 = 2;
const NOT_INITIALIZED: u32 = 3;
const INVALID_DEVICE: u32 = 101;
const INVALID_IMAGE: u32 = 200;
const INVALID_CONTEXT: u32 = 201;
const INVALID_PTX: u32 = 218;
const INVALID_HANDLE: u32 = 400;
const NOT_FOUND: u32 = 500;
const NOT_READY: u32 = 600;
const UNKNOWN: u32 = 999;

/// The driver version reported (13.0, the bindings xstream-cuda builds with by default).
const DRIVER_VERSION: i32 = 13000;
/// Device memory reported (16 GiB; the null driver has no limit but the host's).
const TOTAL_MEM: usize = 16 << 30;
/// Alignment of device allocations (the driver guarantees at least 256 bytes).
const DEVICE_ALIGN: usize = 256;
const HOST_ALIGN: usize = 4096;
/// `cuCtxGetStreamPriorityRange`: least 0, greatest -5.
const PRIORITY_GREATEST: i32 = -5;

type R = Result<(), u32>;

/// Counts a call of `f`, then runs `body` with panics caught (or fails with an injected
/// code, `xnull_fail_next`).
#[inline]
fn run(f: F, body: impl FnOnce() -> R) -> CUresult {
    hit(f);
    if let Some(code) = state::injected(f) {
        return code;
    }
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => SUCCESS,
        Ok(Err(c)) => c,
        Err(_) => UNKNOWN,
    }
}

/// Writes `v` through an out-pointer of the caller.
///
/// # Safety
/// `p` is null (refused with `CUDA_ERROR_INVALID_VALUE`) or valid for a write of `T`.
unsafe fn put<T>(p: *mut T, v: T) -> R {
    if p.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: not null, and valid for a write of `T` by the caller's contract.
    unsafe { p.write(v) };
    Ok(())
}

/// Copies `s` NUL-terminated and truncated into the caller's `len`-byte buffer.
///
/// # Safety
/// `buf` is null (refused) or valid for writes of `len` bytes.
unsafe fn put_str(buf: *mut c_char, len: i32, s: &str) -> R {
    if buf.is_null() || len <= 0 {
        return Err(INVALID_VALUE);
    }
    let n = s.len().min(len as usize - 1);
    // SAFETY: `buf` holds `len` bytes (the caller's contract) and `n + 1 <= len`; `s` is a
    // distinct Rust string.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), n);
        buf.add(n).write(0);
    }
    Ok(())
}

mod device;
mod memory;
mod module;
mod stream;
mod vmm;

#[allow(unused_imports)]
use device::*;
#[allow(unused_imports)]
use memory::*;
#[allow(unused_imports)]
use module::*;
#[allow(unused_imports)]
use stream::*;

// ---- Controls -----------------------------------------------------------------------------

/// Reads a control's name argument.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
unsafe fn name_arg<'a>(name: *const c_char) -> Option<&'a str> {
    if name.is_null() {
        return None;
    }
    // SAFETY: not null: NUL-terminated (the caller's contract).
    unsafe { CStr::from_ptr(name) }.to_str().ok()
}

/// `uint64_t xnull_calls(const char *name)`: calls of the driver function `name` by every
/// thread since the last `xnull_reset`; `UINT64_MAX` for a name the null driver does not
/// export.
#[no_mangle]
pub extern "C" fn xnull_calls(name: *const c_char) -> u64 {
    catch_unwind(|| {
        // SAFETY: the caller passes a NUL-terminated name.
        unsafe { name_arg(name) }.and_then(state::calls)
    })
    .ok()
    .flatten()
    .unwrap_or(u64::MAX)
}

/// `uint64_t xnull_thread_calls(const char *name)`: as `xnull_calls`, counting only the
/// calling thread's calls (since its own last `xnull_reset`).
#[no_mangle]
pub extern "C" fn xnull_thread_calls(name: *const c_char) -> u64 {
    catch_unwind(|| {
        // SAFETY: the caller passes a NUL-terminated name.
        unsafe { name_arg(name) }.and_then(state::thread_calls)
    })
    .ok()
    .flatten()
    .unwrap_or(u64::MAX)
}

/// `uint64_t xnull_wait_ns(void)`: nanoseconds that callers of the driver functions spent
/// blocked waiting for queued host functions to run (synchronize calls, and copies or memsets
/// ordered behind a pending host function), all threads, since the last `xnull_reset`.
#[no_mangle]
pub extern "C" fn xnull_wait_ns() -> u64 {
    catch_unwind(state::waited_ns).unwrap_or(0)
}

/// `uint64_t xnull_thread_evict_ns(void)`: nanoseconds the calling thread's driver calls
/// spent streaming through the eviction buffer (`XNULL_EVICT_KB`) since its last
/// `xnull_reset`; 0 when that mode is off.
#[no_mangle]
pub extern "C" fn xnull_thread_evict_ns() -> u64 {
    catch_unwind(state::evicted_ns).unwrap_or(0)
}

/// `uint32_t xnull_fail_next(const char *name, uint64_t n, uint32_t code)`: the next `n` calls
/// of the driver function `name` (by any thread) are counted and return `code` without doing
/// anything; `n` = 0 clears. Returns 0, or 1 for a name the null driver does not export.
/// `xnull_reset` clears every injected failure.
#[no_mangle]
pub extern "C" fn xnull_fail_next(name: *const c_char, n: u64, code: u32) -> u32 {
    catch_unwind(|| {
        // SAFETY: the caller passes a NUL-terminated name.
        let name = unsafe { name_arg(name) };
        u32::from(!name.is_some_and(|name| state::fail_next(name, n, code)))
    })
    .unwrap_or(1)
}

/// `uint64_t xnull_host_fn_calls(void)`: driver calls made from inside a host function (on
/// the double's host-function thread) since the last `xnull_reset`; CUDA does not permit any,
/// so a correct caller leaves it at 0.
#[no_mangle]
pub extern "C" fn xnull_host_fn_calls() -> u64 {
    catch_unwind(state::host_fn_calls).unwrap_or(u64::MAX)
}

/// `uint64_t xnull_last_call(const char *name)`: where the latest call of the driver function
/// `name` stands in the order of every driver call since the process started (1 for the first
/// call; never reset); 0 when it was never called; `UINT64_MAX` for a name the null driver
/// does not export. Two functions' values tell which was called last.
#[no_mangle]
pub extern "C" fn xnull_last_call(name: *const c_char) -> u64 {
    catch_unwind(|| {
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        unsafe { name_arg(name) }
            .and_then(state::last_call)
            .unwrap_or(u64::MAX)
    })
    .unwrap_or(u64::MAX)
}

/// `uint64_t xnull_stream_host_fns(CUstream h)`: host functions launched on the stream `h`
/// (live or destroyed; the special handles share one count) since it was created;
/// `UINT64_MAX` for a handle that is not a stream of the null driver.
#[no_mangle]
pub extern "C" fn xnull_stream_host_fns(h: CUstream) -> u64 {
    catch_unwind(|| any_stream(h).map_or(u64::MAX, |s| s.host_fns.load(Ordering::Relaxed)))
        .unwrap_or(u64::MAX)
}

/// `void xnull_reset(void)`: zeroes the totals of every thread (and `xnull_wait_ns`) and the
/// calling thread's own counts, and clears injected failures.
#[no_mangle]
pub extern "C" fn xnull_reset() {
    let _ = catch_unwind(state::reset);
}

/// `size_t xnull_functions(const char **names, size_t cap)`: the number of exported driver
/// functions, writing up to `cap` of their (static, NUL-terminated) names to `names`.
#[no_mangle]
pub extern "C" fn xnull_functions(names: *mut *const c_char, cap: usize) -> usize {
    catch_unwind(|| {
        let all = crate::c_names();
        if !names.is_null() {
            for (i, n) in all.iter().take(cap).enumerate() {
                // SAFETY: `names` holds `cap` writable entries (the caller's contract).
                unsafe { names.add(i).write(n.as_ptr()) };
            }
        }
        all.len()
    })
    .unwrap_or(0)
}
