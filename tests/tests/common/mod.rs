//! Shared helpers of the reliability tests (`stress.rs`, `fault_sweep.rs`, `bad_input.rs`):
//! locating the ACL simulator (`xstream_conformance::simulator`), its `xsim*` controls, a lock
//! for simulator globals, a small deterministic RNG and a watchdog against hangs.
#![allow(dead_code)]

use std::ffi::{c_char, CString};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// Serializes tests that change simulator globals (faults, limits, poison) or count its live
/// objects.
pub fn global_lock() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

/// Points `XSTREAM_ACL_LIBRARY` at the simulator (before the backend's first load) and asks
/// it for two devices. Returns the library path.
pub fn setup() -> PathBuf {
    xstream_conformance::simulator::setup(2)
}

/// The simulator's `xsim*` controls, opened from the same path as the backend (so the same
/// loaded library instance).
pub struct Sim {
    lib: libloading::Library,
}

impl Sim {
    /// The process-wide handle.
    pub fn get() -> &'static Sim {
        static S: OnceLock<Sim> = OnceLock::new();
        S.get_or_init(|| {
            let p = setup();
            // SAFETY: the simulator has no initialisers with preconditions.
            let lib = unsafe { libloading::Library::new(&p) }.expect("dlopen simulator");
            Sim { lib }
        })
    }

    fn f0<R>(&self, name: &std::ffi::CStr) -> R
    where
        R: Copy,
    {
        // SAFETY: every symbol used through this helper is `fn() -> R` (simulator README).
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn() -> R>(name.to_bytes_with_nul())
                .expect("xsim symbol");
            f()
        }
    }

    /// `xsimSetFaults(spec)`.
    pub fn set_faults(&self, spec: &str) -> i32 {
        let c = CString::new(spec).expect("no NUL");
        // SAFETY: prototype from the simulator README.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn(*const c_char) -> i32>(b"xsimSetFaults\0")
                .expect("xsimSetFaults");
            f(c.as_ptr())
        }
    }

    /// `xsimCallCount(symbol)`.
    pub fn call_count(&self, symbol: &str) -> u64 {
        let c = CString::new(symbol).expect("no NUL");
        // SAFETY: prototype from the simulator README.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn(*const c_char) -> u64>(b"xsimCallCount\0")
                .expect("xsimCallCount");
            f(c.as_ptr())
        }
    }

    /// `xsimReset()`.
    pub fn reset(&self) -> i32 {
        self.f0(c"xsimReset")
    }

    /// `xsimReleaseHang()`.
    pub fn release_hang(&self) -> i32 {
        self.f0(c"xsimReleaseHang")
    }

    /// `xsimLiveStreams()`.
    pub fn live_streams(&self) -> u64 {
        self.f0(c"xsimLiveStreams")
    }

    /// `xsimLiveEvents()`.
    pub fn live_events(&self) -> u64 {
        self.f0(c"xsimLiveEvents")
    }

    /// `xsimLiveThreads()`.
    pub fn live_threads(&self) -> u64 {
        self.f0(c"xsimLiveThreads")
    }

    /// `aclrtResetDevice(ordinal)` called behind the backend's back.
    pub fn reset_device(&self, ordinal: i32) -> i32 {
        // SAFETY: ACL prototype (facts sheet §4).
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn(i32) -> i32>(b"aclrtResetDevice\0")
                .expect("aclrtResetDevice");
            f(ordinal)
        }
    }
}

/// Opens device `n` of the simulator.
pub fn ascend_device(n: usize) -> xstream_ascend::AscendDevice {
    setup();
    <xstream_ascend::AscendBackend as xstream_core::Backend>::open(n)
        .expect("open simulated device")
}

/// Waits (up to `limit`) until `f` holds; returns whether it did.
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    loop {
        if f() {
            return true;
        }
        if t0.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The number of threads of this process (`/proc/self/status`), 0 where unknown.
pub fn process_threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Threads:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// A small deterministic generator (xorshift64*), so failures reproduce from the seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next value.
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Runs `f` on its own thread and fails the test if it panics or takes longer than `limit`
/// (a hang). Returns its value.
pub fn watchdog<R: Send + 'static>(
    what: &str,
    limit: Duration,
    f: impl FnOnce() -> R + Send + 'static,
) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(limit) {
        Ok(()) => match h.join().expect("joined") {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        },
        Err(_) => panic!("{what}: no answer within {limit:?} (hang)"),
    }
}
