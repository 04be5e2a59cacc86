//! Shared by the Ascend-simulator bench, the memory bench and the allocation-count test:
//! locating (or building) the simulator, the raw ACL function pointers taken from the same
//! library with libloading, a raw report thread, and the process RSS.
#![allow(dead_code)]
#![allow(unsafe_code)]

use std::ffi::{c_void, CStr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::thread::JoinHandle;

/// `ACL_EVENT_SYNC`: what xstream creates for `EventFlags::DISABLE_TIMING`.
pub const ACL_EVENT_SYNC: u32 = 0x1;
/// `ACL_CALLBACK_BLOCK`.
pub const ACL_CALLBACK_BLOCK: i32 = 1;

/// The simulator's path, in a process started with its environment for one device (a bench's
/// `main` calls `xstream_conformance::simulator::reexec_configured(1)` first; a test calls
/// `run_in_child(1)`).
pub fn setup() -> PathBuf {
    xstream_conformance::simulator::setup(1)
}

type P = *mut c_void;

/// Raw ACL entry points of the simulator, straight from `dlsym` (no xstream in between).
pub struct RawAcl {
    _lib: libloading::Library,
    /// `aclrtSetCurrentContext`.
    pub set_current_context: unsafe extern "C" fn(P) -> i32,
    /// `aclrtCreateStream`.
    pub create_stream: unsafe extern "C" fn(*mut P) -> i32,
    /// `aclrtDestroyStream`.
    pub destroy_stream: unsafe extern "C" fn(P) -> i32,
    /// `aclrtSynchronizeStream`.
    pub synchronize_stream: unsafe extern "C" fn(P) -> i32,
    /// `aclrtStreamQuery`.
    pub stream_query: unsafe extern "C" fn(P, *mut i32) -> i32,
    /// `aclrtStreamWaitEvent`.
    pub stream_wait_event: unsafe extern "C" fn(P, P) -> i32,
    /// `aclrtCreateEventExWithFlag`.
    pub create_event_ex_with_flag: unsafe extern "C" fn(*mut P, u32) -> i32,
    /// `aclrtDestroyEvent`.
    pub destroy_event: unsafe extern "C" fn(P) -> i32,
    /// `aclrtRecordEvent`.
    pub record_event: unsafe extern "C" fn(P, P) -> i32,
    /// `aclrtQueryEventStatus`.
    pub query_event_status: unsafe extern "C" fn(P, *mut i32) -> i32,
    /// `aclrtLaunchCallback`.
    pub launch_callback: unsafe extern "C" fn(unsafe extern "C" fn(P), P, i32, P) -> i32,
    /// `aclrtSubscribeReport`.
    pub subscribe_report: unsafe extern "C" fn(u64, P) -> i32,
    /// `aclrtUnSubscribeReport`.
    pub unsubscribe_report: unsafe extern "C" fn(u64, P) -> i32,
    /// `aclrtProcessReport`.
    pub process_report: unsafe extern "C" fn(i32) -> i32,
    /// `xsimLiveStreams` (simulator extension).
    pub live_streams: unsafe extern "C" fn() -> u64,
    /// `xsimLiveEvents` (simulator extension).
    pub live_events: unsafe extern "C" fn() -> u64,
    /// `xsimSetFaults` (simulator extension).
    pub set_faults: unsafe extern "C" fn(*const std::ffi::c_char) -> i32,
    /// `xsimReleaseHang` (simulator extension).
    pub release_hang: unsafe extern "C" fn() -> i32,
}

// SAFETY: plain function pointers into a library that stays loaded for the process.
unsafe impl Send for RawAcl {}
// SAFETY: as above.
unsafe impl Sync for RawAcl {}

macro_rules! sym {
    ($lib:expr, $name:literal) => {{
        let name: &CStr = $name;
        // SAFETY: the field's type is the C prototype of the symbol (CANN AscendCL API
        // reference; the simulator README lists them); the pointer is copied out while the library stays loaded in `RawAcl`.
        unsafe { *$lib.get(name.to_bytes_with_nul()).expect("symbol") }
    }};
}

impl RawAcl {
    /// The table, opened from the same library the backend loads (same `dlopen` handle, so
    /// the same simulator state).
    pub fn get() -> &'static RawAcl {
        static T: OnceLock<RawAcl> = OnceLock::new();
        T.get_or_init(|| {
            let p = setup();
            // SAFETY: the simulator has no initialisers with preconditions.
            let lib = unsafe { libloading::Library::new(&p) }.expect("dlopen simulator");
            RawAcl {
                set_current_context: sym!(lib, c"aclrtSetCurrentContext"),
                create_stream: sym!(lib, c"aclrtCreateStream"),
                destroy_stream: sym!(lib, c"aclrtDestroyStream"),
                synchronize_stream: sym!(lib, c"aclrtSynchronizeStream"),
                stream_query: sym!(lib, c"aclrtStreamQuery"),
                stream_wait_event: sym!(lib, c"aclrtStreamWaitEvent"),
                create_event_ex_with_flag: sym!(lib, c"aclrtCreateEventExWithFlag"),
                destroy_event: sym!(lib, c"aclrtDestroyEvent"),
                record_event: sym!(lib, c"aclrtRecordEvent"),
                query_event_status: sym!(lib, c"aclrtQueryEventStatus"),
                launch_callback: sym!(lib, c"aclrtLaunchCallback"),
                subscribe_report: sym!(lib, c"aclrtSubscribeReport"),
                unsubscribe_report: sym!(lib, c"aclrtUnSubscribeReport"),
                process_report: sym!(lib, c"aclrtProcessReport"),
                live_streams: sym!(lib, c"xsimLiveStreams"),
                live_events: sym!(lib, c"xsimLiveEvents"),
                set_faults: sym!(lib, c"xsimSetFaults"),
                release_hang: sym!(lib, c"xsimReleaseHang"),
                _lib: lib,
            }
        })
    }

    /// `aclrtCreateStream`, panicking on error.
    pub fn stream(&self) -> P {
        let mut s = std::ptr::null_mut();
        // SAFETY: out-pointer to a live local; the caller made a context current.
        let rc = unsafe { (self.create_stream)(&mut s) };
        assert_eq!(rc, 0, "aclrtCreateStream");
        s
    }

    /// `aclrtCreateEventExWithFlag(ACL_EVENT_SYNC)`, panicking on error.
    pub fn event(&self) -> P {
        let mut e = std::ptr::null_mut();
        // SAFETY: as in `stream`.
        let rc = unsafe { (self.create_event_ex_with_flag)(&mut e, ACL_EVENT_SYNC) };
        assert_eq!(rc, 0, "aclrtCreateEventExWithFlag");
        e
    }
}

/// A raw ACL report thread: current on `ctx`, looping `aclrtProcessReport(100)`; the
/// equivalent of the one xstream runs per device.
pub struct RawReporter {
    /// Its `pthread_self()`, for `aclrtSubscribeReport`.
    pub tid: u64,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl RawReporter {
    /// Spawns it on context `ctx` (an `aclrtContext`, passed as an address).
    pub fn spawn(ctx: usize) -> RawReporter {
        let t = RawAcl::get();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let (tx, rx) = mpsc::channel();
        let handle = std::thread::spawn(move || {
            // SAFETY: a live context handle.
            assert_eq!(unsafe { (t.set_current_context)(ctx as P) }, 0);
            // SAFETY: no preconditions.
            tx.send(unsafe { libc::pthread_self() } as u64).unwrap();
            while !stop2.load(Ordering::Acquire) {
                // SAFETY: no pointer arguments.
                match unsafe { (t.process_report)(100) } {
                    0 | 507_012 => {}
                    _ => std::thread::sleep(std::time::Duration::from_millis(1)),
                }
            }
        });
        RawReporter {
            tid: rx.recv().unwrap(),
            stop,
            handle: Some(handle),
        }
    }
}

impl Drop for RawReporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Resident set size of this process in bytes (`/proc/self/statm`, second field × page size).
pub fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("statm resident field");
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}
