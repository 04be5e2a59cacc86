//! Checks of the two-process coordination without a GPU (`benches/tests/gpu_ipc.rs` runs them
//! on the CPU machine): the same `Peer` / `Server` code as the bench, with a child that echoes
//! instead of touching CUDA.
//!
//! - `--selftest-protocol`: 1000 round trips with checked answers; an unanswered command ends
//!   in the parent's timeout; a child that exits mid-command is noticed; a clean exit.
//! - `--selftest-orphan`: one answered command, then the parent prints `child pid N` and
//!   exits without ending the child; the caller checks that the child died with it.

use std::time::Duration;

use super::shm::{Peer, Server, Shm};
use super::{BenchResult, IDLE_TIMEOUT, PARENT_ENV};

/// Set in the child: run the echo server instead of the bench.
pub(crate) const SELFTEST_ENV: &str = "XSTREAM_GPU_IPC_SELFTEST";

const ECHO: u64 = 1;
const EXIT: u64 = 2;
/// The child exits without answering.
const DIE: u64 = 3;
/// The child never answers (it waits for the parent's end).
const HANG: u64 = 4;

/// The echo server: answers `ECHO x` with `2x + 1`.
pub(crate) fn child(path: &std::path::Path) -> BenchResult<()> {
    let parent: u32 = std::env::var(PARENT_ENV)
        .ok()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("{PARENT_ENV} is not a process id"))?;
    let mut server = Server::attach(path, parent)?;
    loop {
        let (op, arg) = server.next(parent, IDLE_TIMEOUT)?;
        match op {
            ECHO => server.reply(arg.wrapping_mul(2).wrapping_add(1)),
            EXIT => {
                server.reply(0);
                return Ok(());
            }
            DIE => std::process::exit(3),
            HANG => loop {
                // Ended by the parent's kill, or by its death (PR_SET_PDEATHSIG).
                std::thread::sleep(Duration::from_millis(50));
            },
            other => return Err(format!("unknown self-test command {other}")),
        }
    }
}

fn spawn() -> BenchResult<Peer> {
    let shm = Shm::create(&std::env::temp_dir())?;
    Peer::spawn(shm, &[(SELFTEST_ENV, "1".to_string())])
}

const T: Duration = Duration::from_secs(30);

/// `--selftest-protocol`.
pub(crate) fn protocol() -> BenchResult<String> {
    let mut p = spawn()?;
    for x in 0..1000u64 {
        let got = p.call(ECHO, x, T)?;
        if got != 2 * x + 1 {
            return Err(format!("echo {x}: answer {got}, expected {}", 2 * x + 1));
        }
    }
    p.call(EXIT, 0, T)?;
    p.finish(T)?;

    let mut p = spawn()?;
    p.call(ECHO, 7, T)?;
    match p.call(HANG, 0, Duration::from_millis(300)) {
        Err(e) if e.contains("no answer within") => {}
        Err(e) => return Err(format!("an unanswered command: unexpected error: {e}")),
        Ok(v) => return Err(format!("an unanswered command returned {v}")),
    }
    drop(p); // kills the hanging child and reaps it

    let mut p = spawn()?;
    match p.call(DIE, 0, T) {
        Err(e) if e.contains("the child exited") => {}
        Err(e) => return Err(format!("a child that exits: unexpected error: {e}")),
        Ok(v) => return Err(format!("a child that exits answered {v}")),
    }
    Ok(
        "protocol self-test: PASS (1000 echoed commands; timeout on an unanswered command; \
        a child's exit noticed; clean exit)"
            .into(),
    )
}

/// `--selftest-orphan`: returns only on error (it exits the process on success).
pub(crate) fn orphan() -> BenchResult<()> {
    let mut p = spawn()?;
    p.call(ECHO, 1, T)?;
    println!("child pid {}", p.pid());
    let _ = std::fs::remove_file(p.shm_path());
    // No destructor: the child is left running, as if this process had crashed.
    std::process::exit(0);
}
