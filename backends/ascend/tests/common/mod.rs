//! Shared test setup: locate (or build) the simulator and point the backend at it.
#![allow(dead_code, unused_imports)]

use std::path::PathBuf;

pub use xstream_conformance::simulator::{global_lock, Controls as Sim};

/// Points `XSTREAM_ACL_LIBRARY` at the simulator (before the backend's first load) and asks
/// it for two devices. Returns the library path.
pub fn setup() -> PathBuf {
    xstream_conformance::simulator::setup(2)
}

/// Opens device `n` of the simulator.
pub fn device(n: usize) -> xstream_ascend::AscendDevice {
    setup();
    <xstream_ascend::AscendBackend as xstream_core::Backend>::open(n)
        .expect("open simulated device")
}
