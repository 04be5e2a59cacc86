//! Shared test setup: locate (or build) the simulator and point the backend at it.
#![allow(dead_code)]

use std::ffi::CString;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Serializes tests that change simulator globals (faults, limits, poison).
pub fn global_lock() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

/// Points `XSTREAM_ACL_LIBRARY` at the simulator (before the first load) and asks for two
/// devices.
pub fn setup() -> PathBuf {
    xstream_conformance::simulator::setup(2)
}

/// The simulator's `xsim*` helpers, opened from the same library (same handle).
pub struct Sim {
    lib: libloading::Library,
}

impl Sim {
    pub fn get() -> &'static Sim {
        static S: OnceLock<Sim> = OnceLock::new();
        S.get_or_init(|| {
            let p = setup();
            // SAFETY: the simulator has no initialisers with preconditions.
            let lib = unsafe { libloading::Library::new(&p) }.expect("dlopen simulator");
            Sim { lib }
        })
    }

    pub fn set_faults(&self, spec: &str) -> i32 {
        let c = CString::new(spec).unwrap();
        // SAFETY: prototype from the simulator README.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn(*const std::ffi::c_char) -> i32>(c"xsimSetFaults")
                .unwrap();
            f(c.as_ptr())
        }
    }

    pub fn set_limits(&self, streams: u32, events: u32) -> i32 {
        // SAFETY: prototype from the simulator README.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn(u32, u32) -> i32>(c"xsimSetLimits")
                .unwrap();
            f(streams, events)
        }
    }

    pub fn reset(&self) -> i32 {
        // SAFETY: prototype from the simulator README.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn() -> i32>(c"xsimReset")
                .unwrap();
            f()
        }
    }

    pub fn live_streams(&self) -> u64 {
        // SAFETY: prototype from the simulator README.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn() -> u64>(c"xsimLiveStreams")
                .unwrap();
            f()
        }
    }
}

/// Opens device `n` of the simulator.
pub fn device(n: usize) -> xstream_ascend::AscendDevice {
    setup();
    <xstream_ascend::AscendBackend as xstream_core::Backend>::open(n)
        .expect("open simulated device")
}
