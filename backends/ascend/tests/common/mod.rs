//! Shared test setup: locate (or build) the simulator and point the backend at it.
#![allow(dead_code)]

use std::ffi::CString;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, Once, OnceLock};

/// Serializes tests that change simulator globals (faults, limits, poison).
pub fn global_lock() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

fn sim_path() -> PathBuf {
    if let Ok(p) = std::env::var("XSTREAM_ACL_LIBRARY") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test> → target/<profile>/libascendcl.so
    let profile_dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("profile dir")
        .to_path_buf();
    // `cargo test` builds the simulator as a dependency of its own tests, into deps/; a
    // top-level `cargo build -p xstream-ascend-sim` puts it in the profile directory.
    let in_deps = exe.parent().expect("deps dir").join("libascendcl.so");
    if in_deps.exists() {
        return in_deps;
    }
    let lib = profile_dir.join("libascendcl.so");
    if !lib.exists() {
        let target_dir = profile_dir.parent().expect("target dir").to_path_buf();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "-p", "xstream-ascend-sim"])
            .env("CARGO_TARGET_DIR", &target_dir)
            .status()
            .expect("run cargo build -p xstream-ascend-sim");
        assert!(status.success(), "building the simulator failed");
    }
    assert!(lib.exists(), "simulator not found at {}", lib.display());
    lib
}

/// Points `XSTREAM_ACL_LIBRARY` at the simulator (before the first load) and asks it for two
/// devices.
pub fn setup() -> PathBuf {
    static ONCE: Once = Once::new();
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    ONCE.call_once(|| {
        let p = sim_path();
        std::env::set_var("XSTREAM_ACL_LIBRARY", &p);
        std::env::set_var("XSIM_DEVICES", "2");
        let _ = PATH.set(p);
    });
    PATH.get().unwrap().clone()
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
