//! Interprocess buffers and events on the Ascend backend over the ACL simulator (a test
//! double, not hardware) as its default A2, which has IPC: a producer process and a
//! consumer process (this test binary started again) share a range of a device buffer and an
//! event; whitelisted exports (`export_ipc_range_for`) admit only the named process. Every
//! wait has a bound; a child past its bound is killed.

use std::io::{BufReader, Write};
use std::process::Child;
use std::time::Duration;

use xstream_ascend::{AscendBackend, AscendBuffer, AscendEvent};
use xstream_conformance::child::{self, finish, gate, wait_line};
use xstream_conformance::simulator;
use xstream_core::{
    Backend, BackendKind, Buffer, Device, Error, Event, EventDesc, EventFlags, IpcBuffer, IpcEvent,
    IpcEventHandle, IpcMemHandle, Stream, StreamDesc,
};

const ROLE: &str = "XSTREAM_ASCEND_IPC_ROLE";
const LONG: Duration = Duration::from_secs(30);
const T: &str = "a_consumer_process_shares_a_range_and_an_event_on_the_simulator";

fn spawn(role: &str) -> Child {
    spawn_test(T, role)
}

fn spawn_test(test: &str, role: &str) -> Child {
    let mut env = simulator::env(2);
    env.push((ROLE, role.into()));
    child::spawn_test(test, env)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
}

fn say(s: &str) {
    let mut o = std::io::stdout().lock();
    writeln!(o, "{s}").unwrap();
    o.flush().unwrap();
}

fn consumer() {
    let d = AscendBackend::open(0).unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let parts: Vec<&str> = line.split_whitespace().collect();
    let mem = IpcMemHandle::from_hex(parts[0]).unwrap();
    let denied = IpcMemHandle::from_hex(parts[1]).unwrap();
    let allowed = IpcMemHandle::from_hex(parts[2]).unwrap();
    let ev = IpcEventHandle::from_hex(parts[3]).unwrap();
    // Whitelisted for another process only: the vendor's refusal, as an xstream error.
    let e = AscendBuffer::open_ipc(&d, &denied).unwrap_err();
    assert!(e.to_string().contains("aclrtIpcMemImportByKey"), "{e}");
    let ok = AscendBuffer::open_ipc(&d, &allowed).unwrap();
    assert_eq!(ok.len(), 64);
    drop(ok);
    // A garbage key of the right backend and device.
    let junk = IpcMemHandle::new(BackendKind::Ascend, 0, 0, 64, b"xsim-1-2-3").unwrap();
    assert!(AscendBuffer::open_ipc(&d, &junk).is_err());
    let buf = AscendBuffer::open_ipc(&d, &mem).unwrap();
    assert_eq!(buf.len(), 2048);
    let e = AscendEvent::open_ipc(&d, &ev).unwrap();
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    s.wait_event(&e).unwrap();
    let r = s.read(&buf, 0, 2048).unwrap();
    s.write(&buf, 0, vec![0xAB; 16]).unwrap();
    say("WAITING");
    s.synchronize().unwrap();
    assert_eq!(r.take().unwrap(), pattern(4096, 5)[1024..3072].to_vec());
    e.synchronize().unwrap();
    assert_eq!(e.query().unwrap(), xstream_core::Status::Ready);
    say("CONSUMED");
}

fn producer() {
    let d = AscendBackend::open(0).unwrap();
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let buf = d.alloc(4096).unwrap();
    let small = d.alloc(64).unwrap();
    let other = d.alloc(64).unwrap();
    let ev = d
        .create_event(&EventDesc::new().flags(EventFlags::INTERPROCESS))
        .unwrap();
    // Bad exports and handles in the exporting process.
    for (off, len) in [(0, 0), (4000, 200), (usize::MAX, 2)] {
        let e = buf.export_ipc_range(off, len).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{off}+{len}: {e}");
    }
    let cuda = IpcMemHandle::new(BackendKind::Cuda, 0, 0, 64, &[1; 64]).unwrap();
    assert!(matches!(
        AscendBuffer::open_ipc(&d, &cuda),
        Err(Error::WrongBackend { .. })
    ));
    let plain = d.create_event(&EventDesc::new()).unwrap();
    assert!(matches!(plain.export_ipc(), Err(Error::InvalidArgument(_))));
    let tx = gate(&s, LONG);
    s.write(&buf, 0, pattern(4096, 5)).unwrap();
    ev.record(&s).unwrap();
    let mem = buf.export_ipc_range(1024, 2048).unwrap();
    assert_eq!(
        (mem.backend(), mem.offset(), mem.len()),
        (BackendKind::Ascend, 1024, 2048)
    );
    let e = AscendBuffer::open_ipc(&d, &mem).unwrap_err();
    assert!(e.to_string().contains("this very process"), "{e}");
    let mut child = spawn("consumer");
    let denied = other.export_ipc_range_for(0, 64, &[1]).unwrap();
    let allowed = small.export_ipc_range_for(0, 64, &[child.id()]).unwrap();
    let evh = ev.export_ipc().unwrap();
    writeln!(
        child.stdin.as_mut().unwrap(),
        "{} {} {} {}",
        mem.to_hex(),
        denied.to_hex(),
        allowed.to_hex(),
        evh.to_hex()
    )
    .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let waiting = wait_line(&mut out, "WAITING");
    tx.send(()).unwrap();
    let consumed = wait_line(&mut out, "CONSUMED");
    let (ok, text) = finish(child, LONG);
    assert!(ok, "{waiting:?} {consumed:?}\n{text}");
    let r = s.read(&buf, 0, 4096).unwrap();
    s.synchronize().unwrap();
    let mut want = pattern(4096, 5);
    want[1024..1040].fill(0xAB);
    assert_eq!(r.take().unwrap(), want);
    say("PRODUCED");
}

#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn a_consumer_process_shares_a_range_and_an_event_on_the_simulator() {
    match std::env::var(ROLE).as_deref() {
        Ok("consumer") => return consumer(),
        Ok("producer") => return producer(),
        _ => {}
    }
    let child = spawn("producer");
    let (ok, text) = finish(child, 2 * LONG);
    assert!(ok && text.contains("PRODUCED"), "{text}");
}

const T2: &str = "handles_of_an_exited_exporter_another_device_or_garbage_are_refused";

/// Exports a buffer and an event, says their handles and exits.
fn short_lived_exporter() {
    let d = AscendBackend::open(0).unwrap();
    let buf = d.alloc(256).unwrap();
    let ev = d
        .create_event(&EventDesc::new().flags(EventFlags::INTERPROCESS))
        .unwrap();
    let mem = buf.export_ipc().unwrap();
    let evh = ev.export_ipc().unwrap();
    say(&format!("HANDLES {} {}", mem.to_hex(), evh.to_hex()));
}

fn checker() {
    let d = AscendBackend::open(0).unwrap();
    let mut child = spawn_test(T2, "exporter");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let lines = wait_line(&mut out, "HANDLES");
    let (ok, text) = finish(child, LONG);
    assert!(ok, "{lines:?}\n{text}");
    let last = lines.last().expect("a HANDLES line");
    let words: Vec<&str> = last[last.find("HANDLES").unwrap()..]
        .split_whitespace()
        .collect();
    let mem = IpcMemHandle::from_hex(words[1]).unwrap();
    let evh = IpcEventHandle::from_hex(words[2]).unwrap();
    // The exporter has exited: the vendor's refusal, as an xstream error (never a hang).
    let e = AscendBuffer::open_ipc(&d, &mem).unwrap_err();
    assert!(e.to_string().contains("aclrtIpcMemImportByKey"), "{e}");
    let e = AscendEvent::open_ipc(&d, &evh).unwrap_err();
    assert!(e.to_string().contains("aclrtIpcOpenEventHandle"), "{e}");
    // Another device of the same backend, and garbage bytes.
    let other = IpcMemHandle::new(BackendKind::Ascend, 1, 0, 256, mem.payload()).unwrap();
    assert!(matches!(
        AscendBuffer::open_ipc(&d, &other),
        Err(Error::WrongDevice(_))
    ));
    let nul = IpcMemHandle::new(BackendKind::Ascend, 0, 0, 8, b"a\0b").unwrap();
    assert!(matches!(
        AscendBuffer::open_ipc(&d, &nul),
        Err(Error::InvalidArgument(_))
    ));
    assert!(IpcMemHandle::from_bytes(&[0x5a; 128]).is_err());
    let junk = IpcEventHandle::new(BackendKind::Ascend, 0, &[0x5a; 64]).unwrap();
    assert!(AscendEvent::open_ipc(&d, &junk).is_err());
    say("CHECKED");
}

#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn handles_of_an_exited_exporter_another_device_or_garbage_are_refused() {
    match std::env::var(ROLE).as_deref() {
        Ok("exporter") => return short_lived_exporter(),
        Ok("checker") => return checker(),
        _ => {}
    }
    let child = spawn_test(T2, "checker");
    let (ok, text) = finish(child, 2 * LONG);
    assert!(ok && text.contains("CHECKED"), "{text}");
}
