//! The `gpu_ipc` bench binary on a machine without CUDA: it says SKIP and exits 0, and its
//! two-process coordination (the same code the GPU run uses) works: answers, a timeout on an
//! unanswered command, a child's exit noticed, and a child that dies with its parent.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use xstream_core::Backend;

const BIN: &str = env!("CARGO_BIN_EXE_gpu_ipc");

#[test]
fn says_skip_without_a_cuda_driver() {
    if xstream_cuda::CudaBackend::availability().is_ok() {
        println!("SKIP: says_skip_without_a_cuda_driver: a CUDA driver is present (the bench runs from gpu-run.sh)");
        return;
    }
    let out = Command::new(BIN).output().expect("run gpu_ipc");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "status {}: {stdout}", out.status);
    assert!(
        stdout.starts_with("SKIP: no CUDA driver: "),
        "unexpected output: {stdout}"
    );
}

#[test]
fn coordination_answers_times_out_and_notices_a_dead_child() {
    let out = Command::new(BIN)
        .arg("--selftest-protocol")
        .output()
        .expect("run gpu_ipc");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "status {}: {stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("protocol self-test: PASS"),
        "unexpected output: {stdout}"
    );
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // "pid (comm) S ...": the state follows the last ')'.
        Ok(s) => s
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

#[test]
fn the_child_dies_with_its_parent() {
    // Read the pid line only: the orphan inherits the pipes, so waiting for their end (as
    // `output()` does) would wait for the child itself.
    let mut parent = Command::new(BIN)
        .arg("--selftest-orphan")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run gpu_ipc");
    let mut line = String::new();
    BufReader::new(parent.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the child pid");
    let status = parent.wait().expect("wait for gpu_ipc");
    assert!(status.success(), "status {status}: {line}");
    let pid: u32 = line
        .strip_prefix("child pid ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no child pid in: {line}"));
    // A bound, not a speed claim: the kernel delivers the death signal when the parent exits
    // (the child's own idle bound is 120 s, twice this one).
    let start = Instant::now();
    while !gone(pid) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the child {pid} outlived its parent"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
