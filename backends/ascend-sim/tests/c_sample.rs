//! Builds `tests/c/sample.c`, a vendor-style ACL program written against the public prototypes
//! in `tests/c/acl_min.h`, with the system C compiler, links it against the simulated
//! `libascendcl.so` and runs it, as a CANN sample would be built and run.

use std::path::{Path, PathBuf};
use std::process::Command;

fn lib_dir() -> PathBuf {
    // `cargo test` builds the cdylib next to the test binary (target/<profile>/deps) and
    // `cargo build` one level up; prefer the first that has it.
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir").to_path_buf();
    if deps.join("libascendcl.so").exists() {
        return deps;
    }
    deps.parent().expect("profile dir").to_path_buf()
}

fn compiler() -> Option<String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "gcc".into());
    let ok = Command::new(&cc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(cc)
}

fn build(cc: &str, lib: &Path, out: &Path) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    let o = Command::new(cc)
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-D_POSIX_C_SOURCE=200809L",
        ])
        .arg("-I")
        .arg(&src)
        .arg(src.join("sample.c"))
        .arg("-o")
        .arg(out)
        .arg("-L")
        .arg(lib)
        .args(["-lascendcl", "-lpthread"])
        .output()
        .expect("run the C compiler");
    assert!(
        o.status.success(),
        "sample.c did not build:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn vendor_style_c_sample_runs_on_the_simulator() {
    let Some(cc) = compiler() else {
        println!("SKIP: no C compiler (gcc or $CC) on this machine");
        return;
    };
    let lib = lib_dir();
    assert!(
        lib.join("libascendcl.so").exists(),
        "libascendcl.so not built in {}",
        lib.display()
    );
    let out = std::env::temp_dir().join(format!("xsim-c-sample-{}", std::process::id()));
    build(&cc, &lib, &out);
    let run = Command::new(&out)
        .env("LD_LIBRARY_PATH", &lib)
        .env_remove("XSIM_FAULTS")
        .output()
        .expect("run the sample");
    let _ = std::fs::remove_file(&out);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "sample failed ({:?}):\n{stdout}{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    for line in [
        "version 1.17.0",
        "memcpy ok",
        "hostfunc ok",
        "value ok",
        "stream config ok",
        "exception ok",
        "SAMPLE OK",
    ] {
        assert!(stdout.contains(line), "missing `{line}` in:\n{stdout}");
    }
}
