//! The raw-driver side (`cudarc::driver::sys`): streams, events, kernels, host functions, and
//! process / device memory readings.

use std::ffi::{c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::Thread;

use cudarc::driver::sys;

use super::CU_STREAM_NON_BLOCKING;

pub(crate) fn ck(r: sys::CUresult, what: &str) {
    assert!(r == sys::CUresult::CUDA_SUCCESS, "{what} failed with {r:?}");
}

pub(crate) fn raw_stream() -> sys::CUstream {
    let mut s = ptr::null_mut();
    // SAFETY: valid out-pointer; the device's primary context is current on this thread.
    ck(
        unsafe { sys::cuStreamCreate(&mut s, CU_STREAM_NON_BLOCKING) },
        "cuStreamCreate",
    );
    s
}

pub(crate) fn raw_event(flags: u32) -> sys::CUevent {
    let mut e = ptr::null_mut();
    // SAFETY: valid out-pointer; context current.
    ck(
        unsafe { sys::cuEventCreate(&mut e, flags) },
        "cuEventCreate",
    );
    e
}

pub(crate) fn raw_sync(s: sys::CUstream) {
    // SAFETY: `s` is a live stream created by this program.
    ck(
        unsafe { sys::cuStreamSynchronize(s) },
        "cuStreamSynchronize",
    );
}

/// Loads a NUL-terminated PTX text and returns the named function (the module stays loaded
/// for the life of the process).
pub(crate) fn raw_function(ptx_nul: &str, name: &CStr) -> sys::CUfunction {
    let mut m = ptr::null_mut();
    // SAFETY: `ptx_nul` is NUL-terminated PTX text; valid out-pointer; context current.
    ck(
        unsafe { sys::cuModuleLoadData(&mut m, ptx_nul.as_ptr() as *const c_void) },
        "cuModuleLoadData",
    );
    let mut f = ptr::null_mut();
    // SAFETY: `m` is a loaded module; `name` is NUL-terminated; valid out-pointer.
    ck(
        unsafe { sys::cuModuleGetFunction(&mut f, m, name.as_ptr()) },
        "cuModuleGetFunction",
    );
    f
}

/// Launches `xstream_delay(ns)` (the kernel xstream's `Kernel::Delay` uses) on one thread.
pub(crate) fn raw_launch_delay(f: sys::CUfunction, s: sys::CUstream, ns: u64) {
    let mut ns = ns;
    let mut params = [&mut ns as *mut u64 as *mut c_void];
    // SAFETY: `f` takes one .u64 parameter, `params` points to it and lives across the call
    // (the driver copies it); `s` is live.
    ck(
        unsafe {
            sys::cuLaunchKernel(
                f,
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                s,
                params.as_mut_ptr(),
                ptr::null_mut(),
            )
        },
        "cuLaunchKernel",
    );
}

/// Launches a parameterless kernel on one thread.
pub(crate) fn raw_launch_empty(f: sys::CUfunction, s: sys::CUstream) {
    // SAFETY: `f` takes no parameters; `s` is live.
    ck(
        unsafe { sys::cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, ptr::null_mut(), ptr::null_mut()) },
        "cuLaunchKernel",
    );
}

pub(crate) unsafe extern "C" fn empty_host_fn(_user: *mut c_void) {}

/// Round-trip counter of the raw host function.
pub(crate) static RAW_RT: AtomicU64 = AtomicU64::new(0);
/// Round-trip counter of the xstream host callback.
pub(crate) static XS_RT: AtomicU64 = AtomicU64::new(0);

pub(crate) unsafe extern "C" fn bump_host_fn(user: *mut c_void) {
    // SAFETY: `user` is `&RAW_RT`, a static.
    let c = unsafe { &*(user as *const AtomicU64) };
    c.fetch_add(1, Ordering::Release);
}

/// A raw blocking "future": the host function sets `done` and unparks the waiter.
pub(crate) struct Parker {
    pub(crate) done: AtomicBool,
    pub(crate) thread: Thread,
}

pub(crate) unsafe extern "C" fn unpark_host_fn(user: *mut c_void) {
    // SAFETY: `user` points to a `Parker` that outlives every host function enqueued with it
    // (it is dropped only after the stream was synchronized).
    let p = unsafe { &*(user as *const Parker) };
    p.done.store(true, Ordering::Release);
    p.thread.unpark();
}

pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer; CLOCK_THREAD_CPUTIME_ID is always supported on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub(crate) fn rss_bytes() -> u64 {
    let pages: u64 = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(0) as u64
}

pub(crate) fn device_free_bytes() -> u64 {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: valid out-pointers; context current.
    ck(
        unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) },
        "cuMemGetInfo",
    );
    free as u64
}

pub(crate) fn xs(r: xstream_core::Result<()>) {
    if let Err(e) = r {
        panic!("xstream call failed: {e}");
    }
}
