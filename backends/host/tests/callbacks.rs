//! Host callbacks on the host backend: exactly once and in order, later work waits for them,
//! panics surface once, xstream calls inside a stream-blocking callback are refused and
//! second-tier callbacks may call xstream.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use common::{dev, nb};
use xstream_core::Event;
use xstream_core::{Backend, Device, Error, EventDesc, Status, Stream, StreamDesc};
use xstream_host::HostBackend;

#[test]
fn callbacks_run_exactly_once_in_order() {
    let d = dev();
    let s = nb(&d);
    let buf = d.alloc(4).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let calls = Arc::new(AtomicUsize::new(0));
    for i in 0..50 {
        s.memset(&buf, 0, 4, i as u8).unwrap();
        let (seen, calls) = (seen.clone(), calls.clone());
        s.host_callback(move |r| {
            assert!(r.is_ok());
            calls.fetch_add(1, Ordering::SeqCst);
            seen.lock().unwrap().push(i);
        })
        .unwrap();
    }
    s.synchronize().unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 50);
    assert_eq!(*seen.lock().unwrap(), (0..50).collect::<Vec<_>>());
    assert_eq!(d.pending_callbacks(), 0);
}

#[test]
fn callback_later_work_waits_for_it() {
    let d = dev();
    let s = nb(&d);
    let buf = d.alloc(4).unwrap();
    // The callback runs until the test releases it: the memset behind it must not run while
    // it is held, whatever the machine's speed.
    let (running_tx, running_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    s.host_callback(move |_| {
        running_tx.send(()).unwrap();
        let _ = release_rx.recv_timeout(Duration::from_secs(60));
    })
    .unwrap();
    s.memset(&buf, 0, 4, 9).unwrap();
    running_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the callback started");
    assert_eq!(
        buf.snapshot(),
        vec![0; 4],
        "memset ran before the callback finished"
    );
    release_tx.send(()).unwrap();
    s.synchronize().unwrap();
    assert_eq!(buf.snapshot(), vec![9; 4]);
}

#[test]
fn panic_surfaces_once_at_next_synchronize() {
    let d = dev();
    let s = nb(&d);
    let after = Arc::new(AtomicUsize::new(0));
    s.host_callback(|_| panic!("boom in callback")).unwrap();
    let a2 = after.clone();
    s.host_callback(move |r| {
        assert!(r.is_ok());
        a2.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    match s.synchronize() {
        Err(Error::CallbackPanicked(m)) => assert!(m.contains("boom in callback"), "{m}"),
        other => panic!("expected CallbackPanicked, got {other:?}"),
    }
    assert_eq!(after.load(Ordering::SeqCst), 1, "later callbacks still run");
    s.synchronize().unwrap();
    s.memset(&d.alloc(1).unwrap(), 0, 1, 1).unwrap();
    s.synchronize().unwrap();
}

#[test]
fn calls_inside_callbacks_are_not_permitted() {
    let d = dev();
    let s = Arc::new(nb(&d));
    let e = Arc::new(d.create_event(&EventDesc::new()).unwrap());
    let (tx, rx) = mpsc::channel();
    let (s3, d3, e3) = (s.clone(), d.clone(), e.clone());
    s.host_callback(move |_| {
        let r = [
            s3.query().err(),
            s3.synchronize().err(),
            d3.create_stream(&StreamDesc::new()).err(),
            d3.synchronize().err(),
            e3.query().err(),
            e3.record(&s3).err(),
            d3.alloc(4).err(),
            HostBackend::open(0).err(),
            s3.completed().err(),
        ];
        tx.send(r.iter().all(|e| matches!(e, Some(Error::NotPermitted(_)))))
            .unwrap();
    })
    .unwrap();
    s.synchronize().unwrap();
    assert!(
        rx.recv().unwrap(),
        "every call inside a callback is NotPermitted"
    );
    // Outside the callback the same calls work.
    assert_eq!(s.query().unwrap(), Status::Ready);
}

#[test]
fn notify_may_call_xstream() {
    let d = dev();
    let s = Arc::new(nb(&d));
    let (tx, rx) = mpsc::channel();
    let s2 = s.clone();
    s.notify(move |r| {
        tx.send((r.is_ok(), s2.query().is_ok())).unwrap();
    })
    .unwrap();
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        (true, true)
    );
}
