//! Interprocess buffers on the host backend (with interprocess events for the ordering): a
//! producer process and a consumer process (this test binary started again with the handles
//! in its environment). Every wait has a bound; a child past its bound is killed.

use std::io::{BufReader, Write};
use std::process::Child;
use std::time::Duration;

use xstream_conformance::child::{finish, gate, spawn_test, wait_line};
use xstream_core::{
    Backend, BackendKind, Buffer, Device, Error, Event, EventDesc, EventFlags, IpcBuffer, IpcEvent,
    IpcEventHandle, IpcMemHandle, Stream, StreamDesc,
};
use xstream_host::{HostBackend, HostDevice, HostDeviceBuffer, HostEvent};

const CHILD: &str = "XSTREAM_IPC_MEM_CHILD";
const MEM: &str = "XSTREAM_IPC_MEM_HANDLE";
const EVENT: &str = "XSTREAM_IPC_MEM_EVENT";
const LONG: Duration = Duration::from_secs(30);

fn dev() -> HostDevice {
    HostDevice::new_isolated(0)
}

fn spawn(test: &str, mem: &IpcMemHandle, event: Option<&IpcEventHandle>) -> Child {
    let mut env = vec![(CHILD, test.to_string()), (MEM, mem.to_hex())];
    if let Some(e) = event {
        env.push((EVENT, e.to_hex()));
    }
    spawn_test(test, env)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
}

#[test]
#[cfg_attr(
    miri,
    ignore = "locks a shared-memory state file (flock), which Miri does not support"
)]
fn bad_exports_and_handles_are_refused() {
    let d = dev();
    let b = d.alloc(4096).unwrap();
    for (off, len) in [(0, 0), (4000, 200), (usize::MAX, 2)] {
        let e = b.export_ipc_range(off, len).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{off}+{len}: {e}");
    }
    let h = b.export_ipc_range(1024, 2048).unwrap();
    assert_eq!(
        (h.backend(), h.offset(), h.len()),
        (BackendKind::Host, 1024, 2048)
    );
    // This process exported it: refused, as CUDA refuses it.
    let e = HostDeviceBuffer::open_ipc(&d, &h).unwrap_err();
    assert!(e.to_string().contains("exported by this process"), "{e}");
    // Another backend, another device, a payload that is no file name, garbage bytes.
    let cuda = IpcMemHandle::new(BackendKind::Cuda, 0, 0, 64, &[1; 64]).unwrap();
    assert!(matches!(
        HostDeviceBuffer::open_ipc(&d, &cuda),
        Err(Error::WrongBackend { .. })
    ));
    let other = IpcMemHandle::new(BackendKind::Host, 2, 0, 64, h.payload()).unwrap();
    assert!(matches!(
        HostDeviceBuffer::open_ipc(&d, &other),
        Err(Error::WrongDevice(_))
    ));
    let path = IpcMemHandle::new(BackendKind::Host, 0, 0, 64, b"../../../etc/passwd").unwrap();
    let e = HostDeviceBuffer::open_ipc(&d, &path).unwrap_err();
    assert!(
        e.to_string().contains("not a host IPC memory handle"),
        "{e}"
    );
    assert!(IpcMemHandle::from_bytes(&[0x33; 128]).is_err());
    // The exporter keeps working on its own buffer after export.
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    s.write(&b, 0, pattern(4096, 1)).unwrap();
    let r = s.read(&b, 0, 4096).unwrap();
    s.synchronize().unwrap();
    assert_eq!(r.take().unwrap(), pattern(4096, 1));
}

/// Consumer: opens the producer's range and event; its stream waits for the event, reads the
/// range, writes its answer into the first 16 bytes of the range.
#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn a_consumer_process_reads_and_answers_through_a_shared_range() {
    const T: &str = "a_consumer_process_reads_and_answers_through_a_shared_range";
    if std::env::var(CHILD).as_deref() == Ok(T) {
        let d = HostBackend::open(0).unwrap();
        let mem = IpcMemHandle::from_hex(&std::env::var(MEM).unwrap()).unwrap();
        let ev = IpcEventHandle::from_hex(&std::env::var(EVENT).unwrap()).unwrap();
        let buf = HostDeviceBuffer::open_ipc(&d, &mem).unwrap();
        assert_eq!(buf.len(), 2048);
        let e = HostEvent::open_ipc(&d, &ev).unwrap();
        let s = d.create_stream(&StreamDesc::new()).unwrap();
        s.wait_event(&e).unwrap();
        let r = s.read(&buf, 0, 2048).unwrap();
        s.write(&buf, 0, vec![0xAB; 16]).unwrap();
        println!("WAITING");
        std::io::stdout().flush().unwrap();
        s.synchronize_timeout(LONG).unwrap();
        let got = r.take().unwrap();
        assert_eq!(got, pattern(4096, 5)[1024..3072].to_vec());
        println!("CONSUMED");
        return;
    }
    let d = dev();
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let buf = d.alloc(4096).unwrap();
    let ev = d
        .create_event(&EventDesc::new().flags(EventFlags::INTERPROCESS))
        .unwrap();
    // The producer's write is held back until the consumer waits.
    let release = gate(&s, LONG);
    s.write(&buf, 0, pattern(4096, 5)).unwrap();
    ev.record(&s).unwrap();
    let mut child = spawn(
        T,
        &buf.export_ipc_range(1024, 2048).unwrap(),
        Some(&ev.export_ipc().unwrap()),
    );
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let waiting = wait_line(&mut out, "WAITING");
    release.send(()).unwrap();
    let consumed = wait_line(&mut out, "CONSUMED");
    let (ok, text) = finish(child, LONG);
    assert!(ok, "{waiting:?} {consumed:?}\n{text}");
    assert!(
        consumed.last().is_some_and(|l| l.contains("CONSUMED")),
        "{consumed:?}"
    );
    // The consumer's answer is in the producer's buffer; the rest is untouched.
    let r = s.read(&buf, 0, 4096).unwrap();
    s.synchronize().unwrap();
    let mut want = pattern(4096, 5);
    want[1024..1040].fill(0xAB);
    assert_eq!(r.take().unwrap(), want);
}

/// An export freed (dropped) by its process no longer opens.
#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn a_freed_export_no_longer_opens() {
    const T: &str = "a_freed_export_no_longer_opens";
    if std::env::var(CHILD).as_deref() == Ok(T) {
        let d = HostBackend::open(0).unwrap();
        let mem = IpcMemHandle::from_hex(&std::env::var(MEM).unwrap()).unwrap();
        let e = HostDeviceBuffer::open_ipc(&d, &mem).unwrap_err();
        assert!(e.to_string().contains("no longer exists"), "{e}");
        println!("REFUSED");
        return;
    }
    let d = dev();
    let buf = d.alloc(64).unwrap();
    let h = buf.export_ipc().unwrap();
    drop(buf);
    let (ok, text) = finish(spawn(T, &h, None), LONG);
    assert!(ok && text.contains("REFUSED"), "{text}");
}
