//! Shared test setup: locate (or build) the simulator and point the backend at it.
#![allow(dead_code, unused_imports)]

use std::path::PathBuf;

pub use xstream_conformance::simulator::{global_lock, Controls as Sim};

/// Whether the calling test runs its body here: `false` after it ran (and passed) in a child
/// process started with the simulator's environment for two devices
/// (`xstream_conformance::simulator::run_in_child`). Every simulator test starts with
/// `if !common::in_sim_process() { return; }`.
#[must_use]
pub fn in_sim_process() -> bool {
    xstream_conformance::simulator::run_in_child(2)
}

/// As [`in_sim_process`], but the test body always runs in a process of its own, also when
/// this process already has the simulator's environment (scripts/valgrind.sh starts the test
/// binaries so, and every test then shares the simulated devices): for tests that assert on
/// process-wide state, such as a device's pending callbacks or the count of callback slots.
#[must_use]
pub fn in_own_sim_process() -> bool {
    xstream_conformance::simulator::run_alone_in_child(2)
}

/// The simulator's path, in a process started with its environment for two devices.
pub fn setup() -> PathBuf {
    xstream_conformance::simulator::setup(2)
}

/// Opens device `n` of the simulator.
pub fn device(n: usize) -> xstream_ascend::AscendDevice {
    setup();
    <xstream_ascend::AscendBackend as xstream_core::Backend>::open(n)
        .expect("open simulated device")
}

/// Under each simulated product of `products` in turn, opens device 0 as a context of its own
/// (probed after the product switch) and calls `f` with the product's name and the device;
/// the default product is set back afterwards, also when `f` panics.
pub fn each_product(products: &[&str], mut f: impl FnMut(&str, xstream_ascend::AscendDevice)) {
    setup();
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = Sim::get().set_product(None);
        }
    }
    let _restore = Restore;
    for product in products {
        assert_eq!(Sim::get().set_product(Some(product)), 0);
        f(
            product,
            xstream_ascend::AscendDevice::new_isolated(0).expect("open an isolated device"),
        );
    }
}

/// Lowers the simulator's stream limit to 3 more than the live streams, then creates streams
/// (calling `each` on every one) until creation fails. Returns the streams and the error; the
/// caller restores the limit with `Sim::get().set_limits(0, 0)`.
pub fn fill_to_limit(
    d: &xstream_ascend::AscendDevice,
    each: impl Fn(&xstream_ascend::AscendStream),
) -> (Vec<xstream_ascend::AscendStream>, xstream_core::Error) {
    use xstream_core::Device;
    let sim = Sim::get();
    let before = sim.live_streams() as u32;
    assert_eq!(sim.set_limits(before + 3, 0), 0);
    let mut v = Vec::new();
    loop {
        match d.create_stream(&xstream_core::StreamDesc::new()) {
            Ok(s) => {
                each(&s);
                v.push(s);
            }
            Err(e) => return (v, e),
        }
        assert!(v.len() < 10, "limit not enforced");
    }
}

/// Waits (up to `limit`, a guard against hangs, never a timing bound) until `f` holds.
pub fn eventually(limit: std::time::Duration, mut f: impl FnMut() -> bool) -> bool {
    let t0 = std::time::Instant::now();
    while !f() {
        if t0.elapsed() > limit {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    true
}
