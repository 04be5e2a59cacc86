//! Interprocess events on the host backend: in one process (an event opened from its own
//! handle) and across processes (this test binary started again with a handle in its
//! environment). Every wait has a bound; a child past its bound is killed.

use std::io::{BufReader, Write};
use std::process::{Child, ChildStdin};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use xstream_conformance::child::{finish, gate, spawn_test, wait_line};
use xstream_core::{
    Backend, BackendKind, CaptureMode, Device, Error, Event, EventDesc, EventFlags, IpcBuffer,
    IpcEvent, IpcEventHandle, Status, Stream, StreamDesc,
};
use xstream_host::{HostBackend, HostDevice, HostDeviceBuffer, HostEvent};

/// Set by the parent in a child: which test body the child runs.
const CHILD: &str = "XSTREAM_IPC_EVENT_CHILD";
/// The handle, in hex, a child opens.
const HANDLE: &str = "XSTREAM_IPC_EVENT_HANDLE";
/// Bound for waits that succeed (they end far sooner; it only stops a broken test).
const LONG: Duration = Duration::from_secs(30);

fn dev() -> HostDevice {
    HostDevice::new_isolated(0)
}

fn ipc_event(d: &HostDevice) -> HostEvent {
    d.create_event(&EventDesc::new().flags(EventFlags::INTERPROCESS))
        .unwrap()
}

fn spawn_child(test: &str, handle: &IpcEventHandle) -> Child {
    spawn_test(test, [(CHILD, test.to_string()), (HANDLE, handle.to_hex())])
}

fn child_handle() -> IpcEventHandle {
    IpcEventHandle::from_hex(&std::env::var(HANDLE).expect("handle in the environment"))
        .expect("a handle")
}

fn read_stdin_line() {
    let mut s = String::new();
    let _ = std::io::stdin().read_line(&mut s);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "locks a shared-memory state file (flock), which Miri does not support"
)]
fn interprocess_flag_implies_disable_timing_and_exports() {
    let d = dev();
    let e = ipc_event(&d);
    assert_eq!(
        e.flags(),
        EventFlags::INTERPROCESS | EventFlags::DISABLE_TIMING
    );
    let h = e.export_ipc().unwrap();
    assert_eq!((h.backend(), h.device()), (BackendKind::Host, 0));
    assert_eq!(IpcEventHandle::from_bytes(h.as_bytes()).unwrap(), h);
    assert!(matches!(e.elapsed_ms(&e), Err(Error::TimingDisabled)));
    assert!(d
        .info()
        .capabilities
        .contains(xstream_core::Capabilities::INTERPROCESS_EVENTS));
    // A plain event does not export.
    let plain = d.create_event(&EventDesc::new()).unwrap();
    let err = plain.export_ipc().unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

/// The checked layer's callback gate holds for the interprocess operations too: inside a
/// stream-blocking callback, exports and opens of events and buffers are refused before the
/// backend is reached (outside it the same calls succeed, or for the buffer opened in its own
/// process fail otherwise).
#[test]
#[cfg_attr(
    miri,
    ignore = "locks a shared-memory state file (flock), which Miri does not support"
)]
fn ipc_calls_inside_a_callback_are_not_permitted() {
    let d = dev();
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let e = Arc::new(ipc_event(&d));
    let eh = e.export_ipc().unwrap();
    let b = Arc::new(d.alloc(64).unwrap());
    let bh = b.export_ipc().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let (d2, e2, b2) = (d.clone(), e.clone(), b.clone());
    s.host_callback(move |_| {
        let r = [
            e2.export_ipc().err(),
            HostEvent::open_ipc(&d2, &eh).err(),
            b2.export_ipc_range(0, 8).err(),
            b2.export_ipc_range_for(0, 8, &[1]).err(),
            HostDeviceBuffer::open_ipc(&d2, &bh).err(),
        ];
        tx.send(r.map(|e| format!("{e:?}"))).unwrap();
    })
    .unwrap();
    s.synchronize().unwrap();
    for (i, r) in rx.recv().unwrap().iter().enumerate() {
        assert!(
            r.starts_with("Some(NotPermitted("),
            "call {i} inside a callback: {r:?}"
        );
    }
    assert!(e.export_ipc().is_ok());
    assert!(HostEvent::open_ipc(&d, &eh).is_ok());
    assert!(b.export_ipc_range_for(0, 8, &[1]).is_ok());
}

#[test]
#[cfg_attr(
    miri,
    ignore = "locks a shared-memory state file (flock), which Miri does not support"
)]
fn an_opened_event_sees_records_of_the_exporter_and_back() {
    let d = dev();
    let (a, b) = (
        d.create_stream(&StreamDesc::new()).unwrap(),
        d.create_stream(&StreamDesc::new()).unwrap(),
    );
    let exported = ipc_event(&d);
    let opened = HostEvent::open_ipc(&d, &exported.export_ipc().unwrap()).unwrap();
    assert_eq!(opened.query().unwrap(), Status::Ready, "never recorded");
    // The exporter records behind a gate: the opened handle sees it pending, a stream waiting
    // on the opened handle holds its later work back.
    let release = gate(&a, LONG);
    exported.record(&a).unwrap();
    assert_eq!(opened.query().unwrap(), Status::Pending);
    let order = Arc::new(Mutex::new(Vec::new()));
    b.wait_event(&opened).unwrap();
    let o = Arc::clone(&order);
    b.host_callback(move |_| o.lock().unwrap().push("b after the wait"))
        .unwrap();
    let o = Arc::clone(&order);
    a.host_callback(move |_| o.lock().unwrap().push("a after the record"))
        .unwrap();
    assert!(matches!(
        opened.synchronize_timeout(Duration::from_millis(50)),
        Err(Error::Timeout(_))
    ));
    assert!(order.lock().unwrap().is_empty());
    release.send(()).unwrap();
    opened.synchronize_timeout(LONG).unwrap();
    b.synchronize().unwrap();
    a.synchronize().unwrap();
    assert_eq!(opened.query().unwrap(), Status::Ready);
    assert!(order.lock().unwrap().contains(&"b after the wait"));
    // And back: a record through the opened handle moves the exporter's view.
    let release = gate(&b, LONG);
    opened.record(&b).unwrap();
    assert_eq!(exported.query().unwrap(), Status::Pending);
    let done = exported.completed().unwrap();
    release.send(()).unwrap();
    xstream_core::block_on(done).unwrap();
    assert_eq!(exported.query().unwrap(), Status::Ready);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "locks a shared-memory state file (flock), which Miri does not support"
)]
fn bad_handles_are_refused() {
    let d = dev();
    let e = ipc_event(&d);
    let h = e.export_ipc().unwrap();
    // Garbage and truncated bytes.
    assert!(IpcEventHandle::from_bytes(&[0x5a; 128]).is_err());
    assert!(IpcEventHandle::from_bytes(&h.as_bytes()[..64]).is_err());
    // Another backend, another device.
    let cuda = IpcEventHandle::new(BackendKind::Cuda, 0, &[1; 64]).unwrap();
    let err = HostEvent::open_ipc(&d, &cuda).unwrap_err();
    assert!(matches!(err, Error::WrongBackend { .. }), "{err}");
    assert!(err.to_string().contains("cuda backend"), "{err}");
    let other = IpcEventHandle::new(BackendKind::Host, 3, h.payload()).unwrap();
    let err = HostEvent::open_ipc(&d, &other).unwrap_err();
    assert!(matches!(err, Error::WrongDevice(_)), "{err}");
    // A payload that is no state name (e.g. a path escaping the shared-memory directory).
    for p in [
        &b"../../etc/passwd"[..],
        b"xstream-host-ipc-event-/x",
        &[0xff; 20],
    ] {
        let bad = IpcEventHandle::new(BackendKind::Host, 0, p).unwrap();
        let err = HostEvent::open_ipc(&d, &bad).unwrap_err();
        assert!(
            err.to_string().contains("not a host IPC event handle"),
            "{err}"
        );
    }
    // The exporter dropped: the handle no longer opens.
    drop(e);
    let err = HostEvent::open_ipc(&d, &h).unwrap_err();
    assert!(err.to_string().contains("no longer exists"), "{err}");
}

#[test]
#[cfg_attr(
    miri,
    ignore = "locks a shared-memory state file (flock), which Miri does not support"
)]
fn interprocess_events_are_not_captured() {
    let d = dev();
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let e = ipc_event(&d);
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    let err = e.record(&s).unwrap_err();
    assert!(matches!(err, Error::Capture { .. }), "{err}");
    let _ = s.end_capture();
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    let err = s.wait_event(&e).unwrap_err();
    assert!(matches!(err, Error::Capture { .. }), "{err}");
    let _ = s.end_capture();
}

/// Child: opens the parent's event, sees it pending, makes a stream wait on it, and reports.
#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn a_process_waits_on_anothers_record() {
    const T: &str = "a_process_waits_on_anothers_record";
    if std::env::var(CHILD).as_deref() == Ok(T) {
        let d = HostBackend::open(0).unwrap();
        let e = HostEvent::open_ipc(&d, &child_handle()).unwrap();
        assert_eq!(e.query().unwrap(), Status::Pending);
        let s = d.create_stream(&StreamDesc::new()).unwrap();
        s.wait_event(&e).unwrap();
        let ran = Arc::new(Mutex::new(false));
        let r = Arc::clone(&ran);
        s.host_callback(move |_| *r.lock().unwrap() = true).unwrap();
        println!("PENDING");
        std::io::stdout().flush().unwrap();
        s.synchronize_timeout(LONG).unwrap();
        assert!(*ran.lock().unwrap());
        assert_eq!(e.query().unwrap(), Status::Ready);
        println!("DONE");
        return;
    }
    let d = dev();
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let e = ipc_event(&d);
    let release = gate(&s, LONG);
    e.record(&s).unwrap();
    let mut child = spawn_child(T, &e.export_ipc().unwrap());
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let before = wait_line(&mut out, "PENDING");
    // The child's stream is waiting on our record; release it.
    release.send(()).unwrap();
    let after = wait_line(&mut out, "DONE");
    let (ok, err) = finish(child, LONG);
    assert!(ok, "child failed: {before:?} {after:?}\n{err}");
    assert!(
        before.last().is_some_and(|l| l.contains("PENDING")),
        "{before:?}"
    );
    assert!(
        after.last().is_some_and(|l| l.contains("DONE")),
        "{after:?}"
    );
}

/// Child: records the parent's event behind a gate it opens when told; the parent waits.
#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn a_process_waits_for_a_record_made_in_another() {
    const T: &str = "a_process_waits_for_a_record_made_in_another";
    if std::env::var(CHILD).as_deref() == Ok(T) {
        let d = HostBackend::open(0).unwrap();
        let e = HostEvent::open_ipc(&d, &child_handle()).unwrap();
        let s = d.create_stream(&StreamDesc::new()).unwrap();
        s.host_callback(|_| read_stdin_line()).unwrap();
        e.record(&s).unwrap();
        println!("RECORDED");
        std::io::stdout().flush().unwrap();
        s.synchronize_timeout(LONG).unwrap();
        return;
    }
    let d = dev();
    let e = ipc_event(&d);
    let mut child = spawn_child(T, &e.export_ipc().unwrap());
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let seen = wait_line(&mut out, "RECORDED");
    assert!(
        seen.last().is_some_and(|l| l.contains("RECORDED")),
        "{seen:?}"
    );
    assert_eq!(
        e.query().unwrap(),
        Status::Pending,
        "the child's record is held"
    );
    let mut stdin: ChildStdin = child.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    e.synchronize_timeout(LONG).unwrap();
    assert_eq!(e.query().unwrap(), Status::Ready);
    let (ok, err) = finish(child, LONG);
    assert!(ok, "{err}");
}

/// A recorder that dies before its record completes: the waiter gets an error, not a hang.
#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn a_recorder_that_dies_fails_the_wait() {
    const T: &str = "a_recorder_that_dies_fails_the_wait";
    if std::env::var(CHILD).as_deref() == Ok(T) {
        let d = HostBackend::open(0).unwrap();
        let e = HostEvent::open_ipc(&d, &child_handle()).unwrap();
        let s = d.create_stream(&StreamDesc::new()).unwrap();
        s.host_callback(|_| std::thread::sleep(LONG)).unwrap();
        e.record(&s).unwrap();
        println!("RECORDED");
        std::io::stdout().flush().unwrap();
        std::thread::sleep(LONG);
        return;
    }
    let d = dev();
    let e = ipc_event(&d);
    let mut child = spawn_child(T, &e.export_ipc().unwrap());
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let seen = wait_line(&mut out, "RECORDED");
    assert!(
        seen.last().is_some_and(|l| l.contains("RECORDED")),
        "{seen:?}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let err = e.synchronize_timeout(LONG).unwrap_err();
    assert!(
        err.to_string().contains("exited before it completed"),
        "{err}"
    );
}

/// An exporter process killed without dropping its event: its handle no longer opens.
#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn a_dead_exporter_is_refused() {
    const T: &str = "a_dead_exporter_is_refused";
    if std::env::var(CHILD).as_deref() == Ok(T) {
        let d = HostBackend::open(0).unwrap();
        let e = ipc_event(&d);
        println!("HANDLE {}", e.export_ipc().unwrap().to_hex());
        std::io::stdout().flush().unwrap();
        std::thread::sleep(LONG);
        return;
    }
    let placeholder = ipc_event(&dev()).export_ipc().unwrap();
    let mut child = spawn_child(T, &placeholder);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let seen = wait_line(&mut out, "HANDLE ");
    let hex = seen
        .last()
        .and_then(|l| l.split_once("HANDLE "))
        .map(|(_, h)| h.trim().to_string())
        .unwrap_or_else(|| panic!("no handle from the child: {seen:?}"));
    let h = IpcEventHandle::from_hex(&hex).unwrap();
    // Alive: it opens.
    HostEvent::open_ipc(&dev(), &h).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let err = HostEvent::open_ipc(&dev(), &h).unwrap_err();
    assert!(err.to_string().contains("is gone"), "{err}");
    // The killed process could not remove its state file: remove it here.
    let name = std::str::from_utf8(h.payload()).unwrap();
    let _ = std::fs::remove_file(std::path::Path::new("/dev/shm").join(name));
}
