//! Interprocess events on the Ascend backend.
//!
//! Over the ACL simulator (a test double, not hardware) switched to a chip without IPC
//! (`xsimSetIpc(0)`, as `XSIM_IPC=0`): its `aclrtIpcOpenEventHandle` refuses with 207000, as the
//! runtime on such a chip, and every path must end in a clear xstream error, never a crash.
//! (The default simulated A2 has IPC events: `ipc_memory.rs`.)
//!
//! On the real CANN runtime (built from source by `scripts/cann-runtime.sh`, over the driver
//! emulation `backends/ascend-hal-sim`; `XSTREAM_CANN_RUNTIME_DIR` names its libraries, SKIP
//! otherwise): a producer and a consumer process (this test binary started again) wait on each
//! other's records, device-side. Every wait has a bound; a child past its bound is killed.
mod common;

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use xstream_ascend::{AscendBackend, AscendEvent};
use xstream_conformance::child::{self, finish, gate, wait_line};
use xstream_core::{
    Backend, BackendKind, Capabilities, Device, Error, Event, EventDesc, EventFlags, IpcEvent,
    IpcEventHandle, Status, Stream, StreamDesc, StreamFlags, TranslationPolicy,
};

#[test]
fn ipc_events_are_refused_cleanly_on_the_simulated_chip() {
    if !common::in_sim_process() {
        return;
    }
    let _g = common::global_lock();
    common::setup();
    assert_eq!(common::Sim::get().set_ipc(Some(false)), 0);
    let d = common::device(0);
    // Not an INTERPROCESS event (best effort dropped the flag on this chip).
    let e = d
        .create_event(
            &EventDesc::new()
                .flags(EventFlags::INTERPROCESS)
                .policy(TranslationPolicy::BestEffort),
        )
        .unwrap();
    let err = e.export_ipc().unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    // A handle of another backend, of another device, of the wrong payload size.
    let cuda = IpcEventHandle::new(BackendKind::Cuda, 0, &[1; 64]).unwrap();
    let err = AscendEvent::open_ipc(&d, &cuda).unwrap_err();
    assert!(matches!(err, Error::WrongBackend { .. }), "{err}");
    assert!(err.to_string().contains("cuda backend"), "{err}");
    let other = IpcEventHandle::new(BackendKind::Ascend, 1, &[1; 64]).unwrap();
    assert!(matches!(
        AscendEvent::open_ipc(&d, &other),
        Err(Error::WrongDevice(_))
    ));
    let short = IpcEventHandle::new(BackendKind::Ascend, 0, &[1; 8]).unwrap();
    assert!(matches!(
        AscendEvent::open_ipc(&d, &short),
        Err(Error::InvalidArgument(_))
    ));
    // A well-formed handle: the simulated chip has no IPC events (207000).
    let ok = IpcEventHandle::new(BackendKind::Ascend, 0, &[1; 64]).unwrap();
    let err = AscendEvent::open_ipc(&d, &ok).unwrap_err();
    assert!(
        err.is_unsupported()
            && err.native().map(|n| (n.api, n.code)) == Some(("aclrtIpcOpenEventHandle", 207_000)),
        "{err}"
    );
}

/// The role of a process of the real-runtime test (unset: the test itself).
const ROLE: &str = "XSTREAM_ASCEND_IPC_EVENT_ROLE";
/// The folder of the real runtime's libraries (`scripts/cann-runtime.sh`'s `run/lib64`).
const RUNTIME_DIR: &str = "XSTREAM_CANN_RUNTIME_DIR";
const REAL: &str = "a_process_waits_on_anothers_record_on_the_real_runtime";
/// The bound of every wait (it only stops a broken test).
const BOUND: Duration = Duration::from_secs(60);

/// Starts `role` of [`REAL`] with the real runtime's environment (its `libacl_rt.so`, its folder
/// on the library path, one emulated device).
fn spawn_real(dir: &std::ffi::OsStr, role: &str) -> std::process::Child {
    let env: Vec<(&str, std::ffi::OsString)> = vec![
        (
            "XSTREAM_ACL_LIBRARY",
            std::path::Path::new(dir).join("libacl_rt.so").into(),
        ),
        ("LD_LIBRARY_PATH", dir.into()),
        ("XSTREAM_HAL_SIM_DEVICES", "1".into()),
        (RUNTIME_DIR, dir.into()),
        (ROLE, role.into()),
    ];
    child::spawn_test(REAL, env)
}

fn say(s: &str) {
    let mut o = std::io::stdout().lock();
    writeln!(o, "{s}").unwrap();
    o.flush().unwrap();
}

fn interprocess(d: &xstream_ascend::AscendDevice) -> AscendEvent {
    d.create_event(&EventDesc::new().flags(EventFlags::INTERPROCESS))
        .unwrap()
}

/// The producer: its stream is held by a gate before it records `ready`; the consumer's
/// stream waits on `ready` and records `done`; this stream waits on `done` (enqueued while the
/// gate holds, so a real device-side wait) before `after`. Nothing may complete before the gate
/// opens; everything completes after.
fn producer(dir: &std::ffi::OsStr) {
    let d = AscendBackend::open(0).unwrap();
    assert!(
        d.info()
            .capabilities
            .contains(Capabilities::INTERPROCESS_EVENTS),
        "the device probes INTERPROCESS_EVENTS"
    );
    let s = d
        .create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING))
        .unwrap();
    let (ready, done) = (interprocess(&d), interprocess(&d));
    let after = d.create_event(&EventDesc::new()).unwrap();
    let open = gate(&s, BOUND);
    ready.record(&s).unwrap();
    let mut c = spawn_real(dir, "consumer");
    let line = format!(
        "{} {}\n",
        ready.export_ipc().unwrap().to_hex(),
        done.export_ipc().unwrap().to_hex()
    );
    c.stdin
        .as_mut()
        .unwrap()
        .write_all(line.as_bytes())
        .unwrap();
    let mut out = BufReader::new(c.stdout.take().unwrap());
    let seen = wait_line(&mut out, "ENQUEUED");
    assert!(
        seen.last().is_some_and(|l| l.contains("ENQUEUED")),
        "the consumer did not enqueue: {seen:?}"
    );
    // The consumer's record of `done` is enqueued behind its wait on `ready`, which our gate
    // holds back.
    s.wait_event(&done).unwrap();
    after.record(&s).unwrap();
    assert_eq!(
        ready.query().unwrap(),
        Status::Pending,
        "ready before the gate"
    );
    assert_eq!(
        done.query().unwrap(),
        Status::Pending,
        "done before the gate"
    );
    assert_eq!(
        after.query().unwrap(),
        Status::Pending,
        "after before the gate"
    );
    open.send(()).unwrap();
    after.synchronize_timeout(BOUND).unwrap();
    assert_eq!(done.query().unwrap(), Status::Ready, "done after our wait");
    assert_eq!(
        ready.query().unwrap(),
        Status::Ready,
        "ready after our wait"
    );
    c.stdout = Some(out.into_inner());
    let (ok, text) = finish(c, BOUND);
    assert!(ok && text.contains("CONSUMER_DONE"), "{text}");
    say("PRODUCER_DONE");
}

/// The consumer: opens both events, waits on `ready` (device-side), records `done`.
fn consumer() {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
    let mut hex = line.split_whitespace();
    let mut next = || IpcEventHandle::from_hex(hex.next().expect("two handles")).unwrap();
    let (h_ready, h_done) = (next(), next());
    let d = AscendBackend::open(0).unwrap();
    let ready = AscendEvent::open_ipc(&d, &h_ready).unwrap();
    let done = AscendEvent::open_ipc(&d, &h_done).unwrap();
    // The producer's gate holds its record of `ready` until we say ENQUEUED.
    assert_eq!(ready.query().unwrap(), Status::Pending, "ready, opened");
    let s = d
        .create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING))
        .unwrap();
    s.wait_event(&ready).unwrap();
    done.record(&s).unwrap();
    say("ENQUEUED");
    s.synchronize_timeout(BOUND).unwrap();
    assert_eq!(
        ready.query().unwrap(),
        Status::Ready,
        "ready after the wait"
    );
    say("CONSUMER_DONE");
}

#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn a_process_waits_on_anothers_record_on_the_real_runtime() {
    let Some(dir) = std::env::var_os(RUNTIME_DIR).filter(|d| !d.is_empty()) else {
        return xstream_conformance::report_skip(
            REAL,
            &"XSTREAM_CANN_RUNTIME_DIR is not set (the real CANN runtime built by \
              scripts/cann-runtime.sh, over the driver emulation)",
        );
    };
    match std::env::var(ROLE).as_deref() {
        Ok("consumer") => return consumer(),
        Ok("producer") => return producer(&dir),
        _ => {}
    }
    let (ok, text) = finish(spawn_real(&dir, "producer"), 3 * BOUND);
    assert!(ok && text.contains("PRODUCER_DONE"), "{text}");
    println!("{REAL}: the producer and the consumer waited on each other's records");
}
