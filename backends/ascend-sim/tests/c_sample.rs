//! Builds `tests/c/sample.c`, a vendor-style ACL program written against the public prototypes
//! in `tests/c/acl_min.h`, with the system C compiler, links it against the simulated
//! `libascendcl.so` and runs it, as a CANN sample would be built and run.

use std::process::Command;

mod c_build;
use c_build::{build, compiler, lib_dir};

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
    build(
        &cc,
        &lib,
        &out,
        "sample.c",
        &["-D_POSIX_C_SOURCE=200809L"],
        &["-lpthread"],
    );
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
