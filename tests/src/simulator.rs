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
