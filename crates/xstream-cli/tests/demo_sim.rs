//! `xstream demo` as a user runs it, on the Ascend backend over the ACL runtime simulator (a
//! test double of `libascendcl.so`, started in the child's environment): with
//! `XSIM_REAL_KERNELS=1` the simulator refuses its test-only kernel format as a real runtime
//! does, and the demo must still run on the NPU path with the built-in reduce as its compute
//! stage and verify every chunk; without the switch it runs the builtin kernels.

use std::process::{Command, Output};

use xstream_conformance::simulator;

const CHUNKS: &str = "6";

fn demo(backend: &str, extra_env: &[(&str, &str)], extra_args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xstream"));
    cmd.args([
        "demo",
        "--backend",
        backend,
        "--streams",
        "2",
        "--chunks",
        CHUNKS,
        "--chunk-kib",
        "16",
        "--rounds",
        "3",
        "--reps",
        "1",
    ])
    .args(extra_args);
    if backend == "ascend" {
        cmd.envs(simulator::env(1));
    }
    cmd.envs(extra_env.iter().copied());
    cmd.output().expect("start xstream")
}

fn checked(out: &Output, backend: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "demo failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.starts_with(&format!("backend {backend}, device ")),
        "the demo did not run on {backend}:\n{stdout}"
    );
    let verified =
        format!("all {CHUNKS} chunks verified against the host reference in each of 2 runs");
    assert!(
        stdout.lines().any(|l| l == verified),
        "not verified:\n{stdout}"
    );
    stdout
}

#[test]
fn demo_on_the_simulator_with_real_kernels_runs_the_reduce_stage() {
    let out = demo("ascend", &[("XSIM_REAL_KERNELS", "1")], &[]);
    let stdout = checked(&out, "ascend");
    assert!(
        stdout
            .lines()
            .any(|l| l == "compute stage: built-in reduce"),
        "the reduce stage did not run:\n{stdout}"
    );
    assert!(
        stdout.contains("stage compute: ran (3 f32 sums per chunk"),
        "{stdout}"
    );
}

#[test]
fn demo_on_the_simulator_runs_the_builtin_kernels_without_the_switch() {
    let out = demo("ascend", &[("XSIM_REAL_KERNELS", "0")], &[]);
    let stdout = checked(&out, "ascend");
    assert!(
        stdout
            .lines()
            .any(|l| l == "compute stage: builtin kernels"),
        "{stdout}"
    );
}

#[test]
fn demo_reduce_stage_on_request_and_bad_choice() {
    let stdout = checked(&demo("host", &[], &["--compute", "reduce"]), "host");
    assert!(
        stdout
            .lines()
            .any(|l| l == "compute stage: built-in reduce"),
        "{stdout}"
    );
    let out = demo("host", &[], &["--compute", "lcg-please"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected auto or reduce"));
}
