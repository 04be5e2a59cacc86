//! The conformance suite on the Ascend backend, over the ACL runtime simulator (a test double
//! of `libascendcl.so`, built by this workspace and loaded with dlopen). This is not hardware
//! verification.

use std::path::PathBuf;

use xstream_ascend::AscendBackend;
use xstream_conformance::{print_line, run, Env};
use xstream_core::Backend;

fn simulator() -> PathBuf {
    if let Ok(p) = std::env::var("XSTREAM_ACL_LIBRARY") {
        return PathBuf::from(p);
    }
    // target/<profile>/deps/<test binary> → target/<profile>/libascendcl.so
    let exe = std::env::current_exe().expect("current_exe");
    let profile = exe
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
    let lib = profile.join("libascendcl.so");
    if !lib.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "-p", "xstream-ascend-sim"])
            .env("CARGO_TARGET_DIR", profile.parent().expect("target dir"))
            .status()
            .expect("run cargo build -p xstream-ascend-sim");
        assert!(status.success(), "building the ACL simulator failed");
    }
    lib
}

#[test]
fn conformance_on_ascend_simulator() {
    let lib = simulator();
    assert!(lib.exists(), "ACL simulator not found at {}", lib.display());
    std::env::set_var("XSTREAM_ACL_LIBRARY", &lib);
    AscendBackend::availability().expect("the simulator must load through dlopen");
    let env = Env::<AscendBackend> {
        device: AscendBackend::open(0).expect("simulated Ascend device"),
        isolated: None,
    };
    let sum = run(&env, None, print_line);
    println!("ascend (simulator): {sum:?}");
    assert_eq!(
        sum.failed, 0,
        "conformance failures on the Ascend simulator"
    );
    assert!(sum.passed >= 20, "too few checks passed: {sum:?}");
}
