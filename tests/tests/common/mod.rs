//! Shared helpers of the reliability tests (`stress.rs`, `fault_sweep.rs`, `bad_input.rs`):
//! locating the ACL simulator (`xstream_conformance::simulator`), its `xsim*` controls, a lock
//! for simulator globals, a small deterministic RNG and a watchdog against hangs.
#![allow(dead_code, unused_imports)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use xstream_conformance::simulator::{global_lock, Controls as Sim};

/// Whether the calling test runs its body here: `false` after it ran (and passed) in a child
/// process started with the simulator's environment for two devices
/// (`xstream_conformance::simulator::run_in_child`). Every simulator test starts with
/// `if !common::in_sim_process() { return; }`.
#[must_use]
pub fn in_sim_process() -> bool {
    xstream_conformance::simulator::run_in_child(2)
}

/// The simulator's path, in a process started with its environment for two devices.
pub fn setup() -> PathBuf {
    xstream_conformance::simulator::setup(2)
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
