//! The ACL runtime simulator (`backends/ascend-sim`: a test double of `libascendcl.so`, not
//! hardware) for every test and bench that dlopens it: locating it, starting test processes
//! with its environment (never setting it inside a running process), and its `xsim*`
//! controls.

use std::path::PathBuf;
use std::sync::OnceLock;

/// Path of the simulator library:
/// `XSTREAM_ACL_LIBRARY` when set; else next to the running
/// test or bench executable (`target/<profile>/deps`, where `cargo test` builds it as a
/// dependency of its own tests); else the profile directory (`cargo build -p
/// xstream-ascend-sim`); else it is built there now (`--release` for non-debug profiles, so
/// benches measure an optimised simulator).
///
/// # Panics
/// When the simulator cannot be found or built (a test that needs it cannot run).
pub fn path() -> PathBuf {
    locate(
        "XSTREAM_ACL_LIBRARY",
        "libascendcl.so",
        "xstream-ascend-sim",
    )
}

/// Path of the HCCL simulator (`backends/hccl-sim`, a test double of `libhccl.so`, not
/// hardware), found like [`path`]: `XSTREAM_HCCL_LIBRARY`, then next to the executable, then
/// the profile directory, else built there (`cargo build -p xstream-hccl-sim`).
///
/// # Panics
/// When it cannot be found or built.
pub fn hccl_path() -> PathBuf {
    locate("XSTREAM_HCCL_LIBRARY", "libhccl.so", "xstream-hccl-sim")
}

fn locate(var: &str, file: &str, package: &str) -> PathBuf {
    if let Ok(p) = std::env::var(var) {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir").to_path_buf();
    let in_deps = deps.join(file);
    if in_deps.exists() {
        return in_deps;
    }
    let profile = deps.parent().expect("profile dir").to_path_buf();
    let lib = profile.join(file);
    if !lib.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = std::process::Command::new(cargo);
        cmd.args(["build", "-p", package]);
        if profile.file_name().is_some_and(|n| n != "debug") {
            cmd.arg("--release");
        }
        let status = cmd
            .env("CARGO_TARGET_DIR", profile.parent().expect("target dir"))
            .status()
            .unwrap_or_else(|e| panic!("run cargo build -p {package}: {e}"));
        assert!(status.success(), "building {package} failed");
    }
    assert!(lib.exists(), "{file} not found at {}", lib.display());
    lib
}

/// The environment a process using the simulator must be started with: `XSTREAM_ACL_LIBRARY`
/// (the library, from [`path`]) and `XSIM_DEVICES` (`devices`); for collectives also
/// `XSIM_HCCL_TIMEOUT_MS` (60 s: no simulated collective waits longer, whatever HCCL's
/// defaults) and, when the HCCL simulator is built, `XSTREAM_HCCL_LIBRARY`
/// ([`hccl_path_if_built`]).
///
/// Both are read once, by the backend's loader and by the simulator. They are never set from
/// inside a running test process (`std::env::set_var` races with `getenv` on other threads):
/// a process is started with them, by [`run_in_child`] or [`reexec_configured`] through
/// `Command::env`, or by the user.
pub fn env(devices: u32) -> Vec<(&'static str, std::ffi::OsString)> {
    let mut v = vec![
        ("XSTREAM_ACL_LIBRARY", path().into_os_string()),
        ("XSIM_DEVICES", devices.to_string().into()),
        ("XSIM_HCCL_TIMEOUT_MS", "60000".into()),
    ];
    if let Some(h) = hccl_path_if_built() {
        v.push(("XSTREAM_HCCL_LIBRARY", h.into_os_string()));
    }
    v
}

/// [`hccl_path`] when the HCCL simulator is already built (or named by
/// `XSTREAM_HCCL_LIBRARY`); never builds it.
pub fn hccl_path_if_built() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("XSTREAM_HCCL_LIBRARY") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    [deps.join("libhccl.so"), deps.parent()?.join("libhccl.so")]
        .into_iter()
        .find(|p| p.exists())
}

/// Whether this process was started with the simulator's environment for `devices` devices
/// (reads only).
pub fn configured(devices: u32) -> bool {
    std::env::var_os("XSTREAM_ACL_LIBRARY").is_some_and(|p| !p.is_empty())
        && std::env::var("XSIM_DEVICES").is_ok_and(|n| n.trim() == devices.to_string())
}

/// Runs the calling test in a child process of the running test binary started with the
/// simulator's environment ([`env()`]), unless this process already has it.
///
/// Returns `true` when this process is configured: the caller runs the test body. Returns
/// `false` after the child ran the same test (`<name> --exact`, the name of the calling
/// libtest thread) and passed: the caller returns. The child's output is passed on (`SKIP`
/// lines straight to stderr, like [`crate::report_skip`]).
///
/// # Panics
/// When the child fails, or does not run exactly one test (a wrong name), or when called
/// from a thread that libtest did not name after its test.
#[must_use]
pub fn run_in_child(devices: u32) -> bool {
    if configured(devices) {
        return true;
    }
    rerun_in_child(devices, &[]);
    false
}

/// The variable [`run_alone_in_child`] sets in the child it starts.
const ALONE: &str = "XSIM_TEST_ALONE";

/// As [`run_in_child`], but the test always runs in a process of its own, also when this
/// process already has the simulator's environment. In such a process (scripts/valgrind.sh
/// starts the test binaries so) every test of the binary runs on libtest's parallel threads
/// against the same simulated devices; a test that asserts on process-wide state (a device's
/// pending callbacks, the count of callback slots made) would see the other tests' work.
///
/// # Panics
/// As [`run_in_child`].
#[must_use]
pub fn run_alone_in_child(devices: u32) -> bool {
    if std::env::var_os(ALONE).is_some() && configured(devices) {
        return true;
    }
    rerun_in_child(devices, &[(ALONE, "1")]);
    false
}

/// Runs the calling libtest test again, alone, in a child process of the running test binary
/// with the simulator's environment for `devices` devices and `extra` variables; passes its
/// output on and panics unless it ran that one test and passed.
fn rerun_in_child(devices: u32, extra: &[(&str, &str)]) {
    let thread = std::thread::current();
    let name = thread
        .name()
        .filter(|n| *n != "main")
        .expect("run_in_child is called from a libtest test thread");
    let exe = std::env::current_exe().expect("current_exe");
    let out = std::process::Command::new(exe)
        // `--include-ignored`: this process already chose to run the test.
        .args([
            name,
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(env(devices))
        .envs(extra.iter().copied())
        .output()
        .expect("start the test binary again");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    for line in stderr.lines() {
        if line.starts_with("SKIP: ") {
            crate::report_skip_line(line);
        } else {
            eprintln!("{line}");
        }
    }
    assert!(
        out.status.success(),
        "{name} failed in its simulator child process ({})",
        out.status
    );
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "the child process did not run {name} exactly once"
    );
}

/// For a program's `main` (a bench), before it starts any thread: unless this process is
/// configured for `devices` devices, runs the same executable with the same arguments and the
/// simulator's environment ([`env()`]), then exits with its status.
///
/// # Panics
/// When the executable cannot be started again.
pub fn reexec_configured(devices: u32) {
    if configured(devices) {
        return;
    }
    let exe = std::env::current_exe().expect("current_exe");
    let status = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .envs(env(devices))
        .status()
        .expect("start the program again");
    std::process::exit(status.code().unwrap_or(1));
}

/// The simulator's path, in a process started with its environment ([`run_in_child`],
/// [`reexec_configured`], or by the user).
///
/// # Panics
/// When this process is not configured for `devices` devices: the environment can no longer
/// be set safely once threads run.
pub fn setup(devices: u32) -> PathBuf {
    assert!(
        configured(devices),
        "the process must be started with XSTREAM_ACL_LIBRARY and XSIM_DEVICES={devices} \
         (tests: `if !simulator::run_in_child({devices}) {{ return; }}` first)"
    );
    path()
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
    /// The process-wide handle, in a process configured for two devices ([`setup`]).
    ///
    /// # Panics
    /// When the process is not configured, or the simulator cannot be loaded.
    pub fn get() -> &'static Controls {
        static C: OnceLock<Controls> = OnceLock::new();
        C.get_or_init(|| {
            let p = setup(2);
            // SAFETY: the simulator's initialisers are Rust statics with no preconditions.
            let lib = unsafe { libloading::Library::new(&p) }.expect("dlopen the ACL simulator");
            Controls { lib }
        })
    }

    /// The symbol `name` of the simulator, read as a `T`.
    ///
    /// # Safety
    /// `T` must be the symbol's exact type: an `unsafe extern "C" fn` pointer with the
    /// prototype the simulator README (or, for ACL functions, the ACL documentation) gives for
    /// `name`. A wrong `T` makes every later call through it undefined behaviour.
    ///
    /// # Panics
    /// When the symbol is missing.
    unsafe fn sym<T: Copy>(&self, name: &std::ffi::CStr) -> T {
        // SAFETY: the caller guarantees `T` is the symbol's type; the library outlives
        // `self`, and `T: Copy` leaves no borrow of the library behind.
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
        // SAFETY: `aclError xsimSetFaults(const char*)` (simulator README).
        let f: unsafe extern "C" fn(*const std::ffi::c_char) -> i32 =
            unsafe { self.sym(c"xsimSetFaults") };
        // SAFETY: `c` is a valid C string for the duration of the call.
        unsafe { f(c.as_ptr()) }
    }

    /// `xsimSetLimits(streams, events)` (0 restores the product's default).
    pub fn set_limits(&self, streams: u32, events: u32) -> i32 {
        // SAFETY: `aclError xsimSetLimits(uint32_t, uint32_t)` (simulator README).
        let f: unsafe extern "C" fn(u32, u32) -> i32 = unsafe { self.sym(c"xsimSetLimits") };
        // SAFETY: plain integer arguments.
        unsafe { f(streams, events) }
    }

    /// `xsimSetIpc`: `Some(true)` gives the simulated product IPC memory and IPC events,
    /// `Some(false)` takes them away, `None` goes back to `XSIM_IPC` (on unless `0`): 0.
    pub fn set_ipc(&self, on: Option<bool>) -> i32 {
        // SAFETY: `aclError xsimSetIpc(int32_t)` (simulator README).
        let f: unsafe extern "C" fn(i32) -> i32 = unsafe { self.sym(c"xsimSetIpc") };
        // SAFETY: a plain integer argument.
        unsafe { f(on.map_or(-1, i32::from)) }
    }

    /// `xsimSetProduct(name)` (`"a2"`, `"310p"`, `"910"`; `None` back to `XSIM_PRODUCT`): 0, or
    /// 100000 for an unknown name.
    pub fn set_product(&self, name: Option<&str>) -> i32 {
        let c = name.map(|n| std::ffi::CString::new(n).expect("no NUL in a product name"));
        // SAFETY: `aclError xsimSetProduct(const char*)` (simulator README).
        let f: unsafe extern "C" fn(*const std::ffi::c_char) -> i32 =
            unsafe { self.sym(c"xsimSetProduct") };
        // SAFETY: NULL or a valid C string for the duration of the call.
        unsafe { f(c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr())) }
    }

    /// `xsimCallCount(symbol)`.
    pub fn call_count(&self, symbol: &str) -> u64 {
        let c = std::ffi::CString::new(symbol).expect("no NUL in a symbol name");
        // SAFETY: `uint64_t xsimCallCount(const char*)` (simulator README).
        let f: unsafe extern "C" fn(*const std::ffi::c_char) -> u64 =
            unsafe { self.sym(c"xsimCallCount") };
        // SAFETY: `c` is a valid C string for the duration of the call.
        unsafe { f(c.as_ptr()) }
    }

    /// Calls the argument-less control `name`.
    ///
    /// # Safety
    /// `name`'s prototype (simulator README) takes no argument and returns exactly `R`.
    unsafe fn call0<R>(&self, name: &std::ffi::CStr) -> R {
        // SAFETY: the caller guarantees the prototype `R name(void)`.
        let f: unsafe extern "C" fn() -> R = unsafe { self.sym(name) };
        // SAFETY: no arguments; the simulator's controls have no preconditions.
        unsafe { f() }
    }

    /// `xsimReset()`: clears faults, counters, hangs and poison.
    pub fn reset(&self) -> i32 {
        // SAFETY: `aclError xsimReset(void)` (simulator README).
        unsafe { self.call0(c"xsimReset") }
    }

    /// `xsimReleaseHang()`.
    pub fn release_hang(&self) -> i32 {
        // SAFETY: `aclError xsimReleaseHang(void)` (simulator README).
        unsafe { self.call0(c"xsimReleaseHang") }
    }

    /// `xsimLiveStreams()` (default streams not counted).
    pub fn live_streams(&self) -> u64 {
        // SAFETY: `uint64_t xsimLiveStreams(void)` (simulator README).
        unsafe { self.call0(c"xsimLiveStreams") }
    }

    /// `xsimLiveEvents()`.
    pub fn live_events(&self) -> u64 {
        // SAFETY: `uint64_t xsimLiveEvents(void)` (simulator README).
        unsafe { self.call0(c"xsimLiveEvents") }
    }

    /// `xsimLiveThreads()`: threads the simulator itself runs.
    pub fn live_threads(&self) -> u64 {
        // SAFETY: `uint64_t xsimLiveThreads(void)` (simulator README).
        unsafe { self.call0(c"xsimLiveThreads") }
    }

    /// `xsimLiveAllocs()`: `aclrtMalloc` blocks not yet freed.
    pub fn live_allocs(&self) -> u64 {
        // SAFETY: `uint64_t xsimLiveAllocs(void)` (simulator README).
        unsafe { self.call0(c"xsimLiveAllocs") }
    }

    /// `xsimAllocSize(p)`: the bytes really allocated for the live block starting at `addr`
    /// (0 when none starts there).
    pub fn alloc_size(&self, addr: u64) -> u64 {
        // SAFETY: `uint64_t xsimAllocSize(const void*)` (simulator README).
        let f: unsafe extern "C" fn(*const std::ffi::c_void) -> u64 =
            unsafe { self.sym(c"xsimAllocSize") };
        // SAFETY: the simulator only compares the address, never dereferences it.
        unsafe { f(addr as usize as *const std::ffi::c_void) }
    }

    /// `xsimAllocRequested(p)`: the size passed to the allocation of the live block starting
    /// at `addr` (0 when none starts there).
    pub fn alloc_requested(&self, addr: u64) -> u64 {
        // SAFETY: `uint64_t xsimAllocRequested(const void*)` (simulator README).
        let f: unsafe extern "C" fn(*const std::ffi::c_void) -> u64 =
            unsafe { self.sym(c"xsimAllocRequested") };
        // SAFETY: the simulator only compares the address, never dereferences it.
        unsafe { f(addr as usize as *const std::ffi::c_void) }
    }

    /// `aclrtResetDevice(ordinal)`, called behind the backend's back.
    pub fn reset_device(&self, ordinal: i32) -> i32 {
        // SAFETY: `aclError aclrtResetDevice(int32_t deviceId)` (ACL documentation).
        let f: unsafe extern "C" fn(i32) -> i32 = unsafe { self.sym(c"aclrtResetDevice") };
        // SAFETY: a plain integer argument.
        unsafe { f(ordinal) }
    }

    /// Holds the stream `stream` (a raw `aclrtStream` of this library) after its current or
    /// next task until [`Controls::release_hang`]: sets the fault spec `hang:ID` (replacing
    /// the rules) with the stream's id. Returns the first non-zero code, or 0.
    ///
    /// # Safety
    /// `stream` must be a live stream handle of this simulator.
    pub unsafe fn hang_stream(&self, stream: *mut std::ffi::c_void) -> i32 {
        // SAFETY: `aclError aclrtStreamGetId(aclrtStream, int32_t*)` (ACL documentation).
        let get_id: unsafe extern "C" fn(*mut std::ffi::c_void, *mut i32) -> i32 =
            unsafe { self.sym(c"aclrtStreamGetId") };
        let mut id = 0;
        // SAFETY: the caller guarantees a live stream; `id` is a live local.
        let rc = unsafe { get_id(stream, &mut id) };
        if rc != 0 {
            return rc;
        }
        self.set_faults(&format!("hang:{id}"))
    }
}
