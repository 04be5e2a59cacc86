//! Interprocess events on CUDA (`cuIpcGetEventHandle` / `cuIpcOpenEventHandle`) between two
//! processes on device 0: this test binary started again with the handle in its environment.
//! Every test skips (prints `SKIP: <test>: <reason>` and passes) without a CUDA device. Every
//! wait has a bound; a child past its bound is killed.

use std::io::{BufReader, Write};
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use xstream_conformance::child::{finish, gate, spawn_test, wait_line};
use xstream_core::{
    Backend, BackendKind, Device, Error, Event, EventDesc, EventFlags, IpcEvent, IpcEventHandle,
    Status, Stream, StreamDesc, StreamFlags,
};
use xstream_cuda::{CudaBackend, CudaDevice, CudaEvent, CudaStream};

const CHILD: &str = "XSTREAM_CUDA_IPC_CHILD";
const HANDLE: &str = "XSTREAM_CUDA_IPC_HANDLE";
const LONG: Duration = Duration::from_secs(60);

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

fn nb(d: &CudaDevice) -> CudaStream {
    d.create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING))
        .unwrap()
}

fn ipc_event(d: &CudaDevice) -> CudaEvent {
    d.create_event(&EventDesc::new().flags(EventFlags::INTERPROCESS))
        .unwrap()
}

fn spawn_child(test: &str, handle: &IpcEventHandle) -> Child {
    spawn_test(test, [(CHILD, test.to_string()), (HANDLE, handle.to_hex())])
}

fn child_handle() -> IpcEventHandle {
    IpcEventHandle::from_hex(&std::env::var(HANDLE).expect("handle")).expect("a handle")
}

#[test]
fn cuda_ipc_export_and_bad_handles() {
    let Some(d) = device("cuda_ipc_export_and_bad_handles") else {
        return;
    };
    let e = ipc_event(&d);
    assert!(e.flags().contains(EventFlags::DISABLE_TIMING));
    let h = e.export_ipc().unwrap();
    assert_eq!(
        (h.backend(), h.device(), h.payload().len()),
        (BackendKind::Cuda, 0, 64)
    );
    let plain = d.create_event(&EventDesc::new()).unwrap();
    assert!(matches!(plain.export_ipc(), Err(Error::InvalidArgument(_))));
    let host = IpcEventHandle::new(BackendKind::Host, 0, b"xstream-host-ipc-event-1").unwrap();
    assert!(matches!(
        CudaEvent::open_ipc(&d, &host),
        Err(Error::WrongBackend { .. })
    ));
    let other = IpcEventHandle::new(BackendKind::Cuda, 7, h.payload()).unwrap();
    assert!(matches!(
        CudaEvent::open_ipc(&d, &other),
        Err(Error::WrongDevice(_))
    ));
    let short = IpcEventHandle::new(BackendKind::Cuda, 0, &[1; 10]).unwrap();
    assert!(matches!(
        CudaEvent::open_ipc(&d, &short),
        Err(Error::InvalidArgument(_))
    ));
}

/// Child: opens the parent's event, sees its record pending, makes a stream wait on it.
#[test]
fn cuda_ipc_a_process_waits_on_anothers_record() {
    const T: &str = "cuda_ipc_a_process_waits_on_anothers_record";
    let Some(d) = device(T) else {
        return;
    };
    if std::env::var(CHILD).as_deref() == Ok(T) {
        let e = CudaEvent::open_ipc(&d, &child_handle()).unwrap();
        assert_eq!(e.query().unwrap(), Status::Pending);
        let s = nb(&d);
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
    let s = nb(&d);
    let e = ipc_event(&d);
    let release = gate(&s, LONG);
    e.record(&s).unwrap();
    let mut child = spawn_child(T, &e.export_ipc().unwrap());
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let before = wait_line(&mut out, "PENDING");
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
    s.synchronize().unwrap();
}

/// Child: records the parent's event behind a gate it opens when told; the parent waits.
#[test]
fn cuda_ipc_a_process_waits_for_a_record_made_in_another() {
    const T: &str = "cuda_ipc_a_process_waits_for_a_record_made_in_another";
    let Some(d) = device(T) else {
        return;
    };
    if std::env::var(CHILD).as_deref() == Ok(T) {
        let e = CudaEvent::open_ipc(&d, &child_handle()).unwrap();
        let s = nb(&d);
        s.host_callback(|_| {
            let mut l = String::new();
            let _ = std::io::stdin().read_line(&mut l);
        })
        .unwrap();
        e.record(&s).unwrap();
        println!("RECORDED");
        std::io::stdout().flush().unwrap();
        s.synchronize_timeout(LONG).unwrap();
        return;
    }
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
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    e.synchronize_timeout(LONG).unwrap();
    assert_eq!(e.query().unwrap(), Status::Ready);
    let (ok, err) = finish(child, LONG);
    assert!(ok, "{err}");
}
