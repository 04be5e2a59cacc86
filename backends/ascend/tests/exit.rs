//! Process exit while the backend's reaper thread still destroys a dropped stream: the exit
//! waits for it before later exit handlers run (the CANN runtime tears itself down in one;
//! racing it crashed `xstream conform` on the real runtime, docs/simulators.md). On the ACL
//! simulator (a test double of `libascendcl.so`), in a child process.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use xstream_ascend::AscendBackend;
use xstream_core::{Backend, Device, Stream, StreamDesc};

/// Live simulator streams before the child created its stream.
static BEFORE: AtomicU64 = AtomicU64::new(u64::MAX);

/// Registered before the backend's reaper starts, so it runs after the backend's own exit
/// handler (handlers run in reverse order): by then the dropped stream must be destroyed.
extern "C" fn check_at_exit() {
    let ok = std::panic::catch_unwind(|| {
        let live = common::Sim::get().live_streams();
        let before = BEFORE.load(Ordering::SeqCst);
        let line = format!("at exit: {live} live streams ({before} before)\n");
        // SAFETY: writes a live buffer of its length to the process's stdout descriptor.
        unsafe { libc::write(1, line.as_ptr().cast(), line.len()) };
        live == before
    });
    if !matches!(ok, Ok(true)) {
        // SAFETY: ends the process at once with a failing status (no further handlers).
        unsafe { libc::_exit(3) };
    }
}

fn child() -> ! {
    // SAFETY: `check_at_exit` is a plain `extern "C" fn()` that does not unwind.
    unsafe { libc::atexit(check_at_exit) };
    let sim = common::Sim::get();
    let d = AscendBackend::open(0).expect("open");
    BEFORE.store(sim.live_streams(), Ordering::SeqCst);
    let s = d.create_stream(&StreamDesc::new()).expect("stream");
    let buf = d.alloc(64).expect("alloc");
    s.memset(&buf, 0, 64, 1).expect("memset");
    // SAFETY: a live stream of the simulator.
    assert_eq!(unsafe { sim.hang_stream(s.as_raw().0) }, 0);
    s.memset(&buf, 0, 64, 2).expect("memset");
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(100));
        common::Sim::get().release_hang();
    });
    // The reaper synchronizes the held stream (until the release), then destroys it.
    drop(s);
    drop(buf);
    std::process::exit(0);
}

#[test]
fn exit_waits_for_the_reaper() {
    if std::env::var_os("XSTREAM_EXIT_CHILD").is_some() {
        child();
    }
    let out = std::process::Command::new(std::env::current_exe().expect("current_exe"))
        .args([
            "exit_waits_for_the_reaper",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(xstream_conformance::simulator::env(2))
        .env("XSTREAM_EXIT_CHILD", "1")
        .output()
        .expect("start the test binary again");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the child failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("at exit: "),
        "the exit check did not run:\n{stdout}"
    );
}
