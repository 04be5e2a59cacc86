//! Interprocess buffers on CUDA (`cuIpcGetMemHandle` / `cuIpcOpenMemHandle` /
//! `cuIpcCloseMemHandle`, with interprocess events for the ordering): a producer process and
//! a consumer process on device 0 (this test binary started again with the handles in its
//! environment). Every test skips (prints `SKIP: <test>: <reason>` and passes) without a
//! CUDA device. Every wait has a bound; a child past its bound is killed.

use std::io::{BufReader, Write};
use std::process::Child;
use std::time::Duration;

use xstream_conformance::child::{finish, gate, spawn_test, wait_line};
use xstream_core::{
    Backend, BackendKind, Buffer, Device, Error, Event, EventDesc, EventFlags, IpcBuffer, IpcEvent,
    IpcEventHandle, IpcMemHandle, Stream, StreamDesc,
};
use xstream_cuda::{CudaBackend, CudaBuffer, CudaDevice, CudaEvent};

const CHILD: &str = "XSTREAM_CUDA_IPC_MEM_CHILD";
const MEM: &str = "XSTREAM_IPC_MEM_HANDLE";
const EVENT: &str = "XSTREAM_IPC_MEM_EVENT";
const LONG: Duration = Duration::from_secs(30);

fn device(test: &str) -> Option<CudaDevice> {
    if let Err(e) = CudaBackend::availability() {
        xstream_conformance::report_skip(test, &e);
        return None;
    }
    match CudaBackend::open(0) {
        Ok(d) => Some(d),
        Err(e) => panic!("{test}: CUDA is available but open(0) failed: {e}"),
    }
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
fn cuda_ipc_bad_exports_and_handles_are_refused() {
    let Some(d) = device("cuda_ipc_bad_exports_and_handles_are_refused") else {
        return;
    };
    let b = d.alloc(4096).unwrap();
    for (off, len) in [(0, 0), (4000, 200), (usize::MAX, 2)] {
        let e = b.export_ipc_range(off, len).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{off}+{len}: {e}");
    }
    let h = b.export_ipc_range(1024, 2048).unwrap();
    assert_eq!(
        (h.backend(), h.offset(), h.len(), h.payload().len()),
        (BackendKind::Cuda, 1024, 2048, 64)
    );
    let host = IpcMemHandle::new(BackendKind::Host, 0, 0, 64, b"xstream-host-ipc-mem-1").unwrap();
    assert!(matches!(
        CudaBuffer::open_ipc(&d, &host),
        Err(Error::WrongBackend { .. })
    ));
    let other = IpcMemHandle::new(BackendKind::Cuda, 9, 0, 64, h.payload()).unwrap();
    assert!(matches!(
        CudaBuffer::open_ipc(&d, &other),
        Err(Error::WrongDevice(_))
    ));
    let short = IpcMemHandle::new(BackendKind::Cuda, 0, 0, 64, &[1; 8]).unwrap();
    assert!(matches!(
        CudaBuffer::open_ipc(&d, &short),
        Err(Error::InvalidArgument(_))
    ));
    // The driver refuses opening in the exporting process: an error, whichever code.
    assert!(CudaBuffer::open_ipc(&d, &h).is_err());
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let ordered = s.alloc_async(64).unwrap();
    assert!(matches!(
        ordered.export_ipc(),
        Err(Error::InvalidArgument(_))
    ));
    s.synchronize().unwrap();
}

/// Consumer: opens the producer's range and event; its stream waits for the event, reads the
/// range, writes its answer into the first 16 bytes of the range.
#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn cuda_ipc_a_consumer_process_reads_and_answers_through_a_shared_range() {
    const T: &str = "cuda_ipc_a_consumer_process_reads_and_answers_through_a_shared_range";
    let Some(d) = device(T) else {
        return;
    };
    if std::env::var(CHILD).as_deref() == Ok(T) {
        let mem = IpcMemHandle::from_hex(&std::env::var(MEM).unwrap()).unwrap();
        let ev = IpcEventHandle::from_hex(&std::env::var(EVENT).unwrap()).unwrap();
        let buf = CudaBuffer::open_ipc(&d, &mem).unwrap();
        assert_eq!(buf.len(), 2048);
        let e = CudaEvent::open_ipc(&d, &ev).unwrap();
        let s = d.create_stream(&StreamDesc::new()).unwrap();
        s.wait_event(&e).unwrap();
        // The wait is enqueued without blocking. `read` is announced before it is called:
        // on CUDA it returns only once its copy into pageable memory is done (the driver's
        // rule for `cuMemcpyDtoHAsync` to pageable memory, docs/semantics.md), and that copy
        // waits behind the producer's gated work (GPU run 15 saw the read hold the consumer
        // until the producer's gate gave up).
        println!("WAITING");
        std::io::stdout().flush().unwrap();
        let r = s.read(&buf, 0, 2048).unwrap();
        s.write(&buf, 0, vec![0xAB; 16]).unwrap();
        s.synchronize_timeout(LONG).unwrap();
        let got = r.take().unwrap();
        assert_eq!(got, pattern(4096, 5)[1024..3072].to_vec());
        println!("CONSUMED");
        return;
    }
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

/// The importer works on another device than the exporter's (what multi-GPU serving does, and
/// `gpu_ipc`'s configuration "consumer on device 1"): the consumer process opens the range and
/// the event on device 0 (the exporter's device, which the handles name), enables peer access
/// from device 1, makes a device-1 stream wait for the event, copies the range to device 1 and
/// writes its answer back into the range from device 1 (`copy_peer` both ways), then drops
/// everything and exits normally: the exit status is checked, so a crash at teardown fails the
/// test. Needs two CUDA devices with peer access; prints SKIP otherwise.
#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn cuda_ipc_an_importer_on_another_device_reads_and_answers() {
    const T: &str = "cuda_ipc_an_importer_on_another_device_reads_and_answers";
    let Some(d) = device(T) else {
        return;
    };
    let count = CudaBackend::device_count().unwrap_or(0);
    if count < 2 {
        println!("SKIP: {T}: {count} CUDA device(s) visible; the importer needs a second one");
        return;
    }
    let d1 = CudaBackend::open(1).expect("CUDA device 1");
    if !d1.can_access_peer(&d).unwrap_or(false) {
        println!("SKIP: {T}: device 1 cannot access device 0's memory (no peer access)");
        return;
    }
    if std::env::var(CHILD).as_deref() == Ok(T) {
        d1.enable_peer_access(&d).expect("peer access 1 -> 0");
        let mem = IpcMemHandle::from_hex(&std::env::var(MEM).unwrap()).unwrap();
        let ev = IpcEventHandle::from_hex(&std::env::var(EVENT).unwrap()).unwrap();
        let buf = CudaBuffer::open_ipc(&d, &mem).unwrap();
        let e = CudaEvent::open_ipc(&d, &ev).unwrap();
        let s1 = d1.create_stream(&StreamDesc::new()).unwrap();
        let dst = d1.alloc(2048).unwrap();
        let answer = d1.alloc(16).unwrap();
        s1.memset(&answer, 0, 16, 0xCD).unwrap();
        s1.wait_event(&e).unwrap();
        s1.copy_peer(&buf, 0, &dst, 0, 2048).unwrap();
        s1.copy_peer(&answer, 0, &buf, 0, 16).unwrap();
        // As in the test above: the read into pageable memory returns only once it ran,
        // behind the producer's gated work.
        println!("WAITING");
        std::io::stdout().flush().unwrap();
        let r = s1.read(&dst, 0, 2048).unwrap();
        s1.synchronize_timeout(LONG).unwrap();
        assert_eq!(r.take().unwrap(), pattern(4096, 9)[1024..3072].to_vec());
        println!("CONSUMED");
        std::io::stdout().flush().unwrap();
        // Everything is dropped here, in declaration order reversed, and the process exits.
        return;
    }
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let buf = d.alloc(4096).unwrap();
    let ev = d
        .create_event(&EventDesc::new().flags(EventFlags::INTERPROCESS))
        .unwrap();
    let release = gate(&s, LONG);
    s.write(&buf, 0, pattern(4096, 9)).unwrap();
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
    assert!(
        ok,
        "the importer on device 1 failed or did not exit cleanly: {waiting:?} {consumed:?}\n{text}"
    );
    assert!(
        consumed.last().is_some_and(|l| l.contains("CONSUMED")),
        "{consumed:?}"
    );
    let r = s.read(&buf, 0, 4096).unwrap();
    s.synchronize().unwrap();
    let mut want = pattern(4096, 9);
    want[1024..1040].fill(0xCD);
    assert_eq!(r.take().unwrap(), want, "the answer written from device 1");
}
