//! Locating the ACL runtime simulator (`backends/ascend-sim`: a test double of
//! `libascendcl.so`, not hardware) for every test and bench that dlopens it.

use std::path::PathBuf;
use std::sync::OnceLock;

/// Path of the simulator library: `XSTREAM_ACL_LIBRARY` when set; else next to the running
/// test or bench executable (`target/<profile>/deps`, where `cargo test` builds it as a
/// dependency of its own tests); else the profile directory (`cargo build -p
/// xstream-ascend-sim`); else it is built there now (`--release` for non-debug profiles, so
/// benches measure an optimised simulator).
///
/// # Panics
/// When the simulator cannot be found or built (a test that needs it cannot run).
pub fn path() -> PathBuf {
    if let Ok(p) = std::env::var("XSTREAM_ACL_LIBRARY") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir").to_path_buf();
    let in_deps = deps.join("libascendcl.so");
    if in_deps.exists() {
        return in_deps;
    }
    let profile = deps.parent().expect("profile dir").to_path_buf();
    let lib = profile.join("libascendcl.so");
    if !lib.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = std::process::Command::new(cargo);
        cmd.args(["build", "-p", "xstream-ascend-sim"]);
        if profile.file_name().is_some_and(|n| n != "debug") {
            cmd.arg("--release");
        }
        let status = cmd
            .env("CARGO_TARGET_DIR", profile.parent().expect("target dir"))
            .status()
            .expect("run cargo build -p xstream-ascend-sim");
        assert!(status.success(), "building the ACL simulator failed");
    }
    assert!(lib.exists(), "ACL simulator not found at {}", lib.display());
    lib
}

/// Points the Ascend backend at the simulator (`XSTREAM_ACL_LIBRARY`) and asks the simulator
/// for `devices` devices (`XSIM_DEVICES`), once per process and before the first load.
/// Returns the library path.
pub fn setup(devices: u32) -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let p = path();
        std::env::set_var("XSTREAM_ACL_LIBRARY", &p);
        std::env::set_var("XSIM_DEVICES", devices.to_string());
        p
    })
    .clone()
}

/// Serializes the tests of one process that change simulator globals (faults, limits, poison)
/// or count its live objects.
pub fn global_lock() -> std::sync::MutexGuard<'static, ()> {
    static M: std::sync::Mutex<()> = std::sync::Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

/// The simulator's `xsim*` controls (see `backends/ascend-sim/README.md`), opened from the
/// same path as the backend, so they act on the same loaded library instance.
#[derive(Debug)]
pub struct Controls {
    lib: libloading::Library,
}

impl Controls {
    /// The process-wide handle (calls [`setup`] with two devices first).
    ///
    /// # Panics
    /// When the simulator cannot be loaded.
    pub fn get() -> &'static Controls {
        static C: OnceLock<Controls> = OnceLock::new();
        C.get_or_init(|| {
            let p = setup(2);
            // SAFETY: the simulator's initialisers are Rust statics with no preconditions.
            let lib = unsafe { libloading::Library::new(&p) }.expect("dlopen the ACL simulator");
            Controls { lib }
        })
    }

    fn sym<T: Copy>(&self, name: &std::ffi::CStr) -> T {
        // SAFETY: every caller names `T` as the symbol's prototype from the simulator README
        // or the ACL facts sheet; the library outlives `self`.
        unsafe {
            *self
                .lib
                .get::<T>(name.to_bytes_with_nul())
                .expect("simulator symbol")
        }
    }

    /// `xsimSetFaults(spec)`: 0, or 100000 for a malformed spec.
    pub fn set_faults(&self, spec: &str) -> i32 {
        let c = std::ffi::CString::new(spec).expect("no NUL in a fault spec");
        let f: unsafe extern "C" fn(*const std::ffi::c_char) -> i32 = self.sym(c"xsimSetFaults");
        // SAFETY: `c` is a valid C string for the duration of the call.
        unsafe { f(c.as_ptr()) }
    }

    /// `xsimSetLimits(streams, events)` (0 restores the product's default).
    pub fn set_limits(&self, streams: u32, events: u32) -> i32 {
        let f: unsafe extern "C" fn(u32, u32) -> i32 = self.sym(c"xsimSetLimits");
        // SAFETY: plain integer arguments.
        unsafe { f(streams, events) }
    }

    /// `xsimCallCount(symbol)`.
    pub fn call_count(&self, symbol: &str) -> u64 {
        let c = std::ffi::CString::new(symbol).expect("no NUL in a symbol name");
        let f: unsafe extern "C" fn(*const std::ffi::c_char) -> u64 = self.sym(c"xsimCallCount");
        // SAFETY: `c` is a valid C string for the duration of the call.
        unsafe { f(c.as_ptr()) }
    }

    fn call0<R>(&self, name: &std::ffi::CStr) -> R {
        let f: unsafe extern "C" fn() -> R = self.sym(name);
        // SAFETY: the named symbols take no arguments (simulator README).
        unsafe { f() }
    }

    /// `xsimReset()`: clears faults, counters, hangs and poison.
    pub fn reset(&self) -> i32 {
        self.call0(c"xsimReset")
    }

    /// `xsimReleaseHang()`.
    pub fn release_hang(&self) -> i32 {
        self.call0(c"xsimReleaseHang")
    }

    /// `xsimLiveStreams()` (default streams not counted).
    pub fn live_streams(&self) -> u64 {
        self.call0(c"xsimLiveStreams")
    }

    /// `xsimLiveEvents()`.
    pub fn live_events(&self) -> u64 {
        self.call0(c"xsimLiveEvents")
    }

    /// `xsimLiveThreads()`: threads the simulator itself runs.
    pub fn live_threads(&self) -> u64 {
        self.call0(c"xsimLiveThreads")
    }

    /// `aclrtResetDevice(ordinal)`, called behind the backend's back.
    pub fn reset_device(&self, ordinal: i32) -> i32 {
        let f: unsafe extern "C" fn(i32) -> i32 = self.sym(c"aclrtResetDevice");
        // SAFETY: ACL prototype (facts sheet section 4.1).
        unsafe { f(ordinal) }
    }
}
