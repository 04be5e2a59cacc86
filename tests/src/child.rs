//! Child processes for the interprocess tests: the running test binary started again as a
//! child that runs one named test, with given environment variables and piped stdio. The
//! parent reads the child's stdout line by line, waits for it with a bound (killing it past
//! that) and collects what it wrote. Nothing here names a backend; [`gate`] works through the
//! portable [`Stream`] trait only.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use xstream_core::Stream;

/// Starts this test binary again as a child that runs only the test named `test` (exactly,
/// with `--nocapture` and one test thread), with the variables of `env` set and stdin,
/// stdout and stderr piped.
///
/// # Panics
/// When the path of the running binary is unknown or the child cannot be started (a broken
/// test environment, not a finding).
pub fn spawn_test<I, K, V>(test: &str, env: I) -> Child
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    Command::new(std::env::current_exe().expect("current_exe"))
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the test binary again")
}

/// Reads the child's stdout until a line holding `word` (or its end); returns every line
/// read, the one holding `word` last.
pub fn wait_line(out: &mut BufReader<ChildStdout>, word: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let mut line = String::new();
    while out.read_line(&mut line).unwrap_or(0) > 0 {
        let done = line.contains(word);
        seen.push(std::mem::take(&mut line));
        if done {
            break;
        }
    }
    seen
}

/// Waits for `child` up to `bound`, killing it past that; returns whether it exited
/// successfully (false when killed) and what it wrote: the rest of its stdout (if the parent
/// did not take that pipe) followed by its stderr.
///
/// # Panics
/// When the child's status cannot be read.
pub fn finish(mut child: Child, bound: Duration) -> (bool, String) {
    let start = Instant::now();
    let ok = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s.success();
        }
        if start.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            break false;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut text = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut text);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut text);
    }
    (ok, text)
}

/// Enqueues a host callback that holds `s` until the returned sender sends, is dropped, or
/// `bound` passes (the bound only stops a broken test).
///
/// # Panics
/// When the stream refuses the callback.
pub fn gate<S: Stream>(s: &S, bound: Duration) -> mpsc::Sender<()> {
    let (tx, rx) = mpsc::channel::<()>();
    s.host_callback(move |_| {
        let _ = rx.recv_timeout(bound);
    })
    .unwrap();
    tx
}
