//! Events, capture and device faults on the host backend.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use xstream_core::{
    CaptureErrorKind, CaptureMode, CaptureStatus, Device, Error, Event, EventDesc, EventFlags,
    Graph, Kernel, Status, Stream, StreamDesc, StreamFlags as F, TranslationPolicy,
};
mod common;

use common::{dev, nb, Gate};

fn capture_err(r: Result<impl std::fmt::Debug, Error>) -> CaptureErrorKind {
    match r {
        Err(Error::Capture { kind, .. }) => kind,
        other => panic!("expected a capture error, got {other:?}"),
    }
}

#[test]
fn elapsed_time_and_its_errors() {
    let d = dev();
    let s = nb(&d);
    let (a, b) = (
        d.create_event(&EventDesc::new()).unwrap(),
        d.create_event(&EventDesc::new()).unwrap(),
    );
    assert!(matches!(a.elapsed_ms(&b), Err(Error::EventNotRecorded)));
    a.record(&s).unwrap();
    s.launch_builtin(Kernel::Delay(Duration::from_millis(20)))
        .unwrap();
    b.record(&s).unwrap();
    assert!(matches!(a.elapsed_ms(&b), Err(Error::NotReady)));
    assert_eq!(b.query().unwrap(), Status::Pending);
    b.synchronize().unwrap();
    let t = a.elapsed_ms(&b).unwrap();
    assert!((15.0..200.0).contains(&t), "elapsed {t} ms");
    let back = b.elapsed_ms(&a).unwrap();
    assert!(back < 0.0 && (back + t).abs() < 0.01, "sign kept: {back}");

    let nt = d
        .create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))
        .unwrap();
    nt.record(&s).unwrap();
    s.synchronize().unwrap();
    assert!(matches!(a.elapsed_ms(&nt), Err(Error::TimingDisabled)));
    assert!(matches!(nt.elapsed_ms(&a), Err(Error::TimingDisabled)));
    // INTERPROCESS implies DISABLE_TIMING (tests/ipc_events.rs has the rest).
    let ipc = d
        .create_event(&EventDesc::new().flags(EventFlags::INTERPROCESS))
        .unwrap();
    ipc.record(&s).unwrap();
    s.synchronize().unwrap();
    assert!(matches!(a.elapsed_ms(&ipc), Err(Error::TimingDisabled)));
    let e = d
        .create_event(
            &EventDesc::new()
                .flags(EventFlags::INTERPROCESS | EventFlags::EXTERNAL)
                .policy(TranslationPolicy::BestEffort),
        )
        .unwrap();
    assert_eq!(
        e.flags(),
        EventFlags::INTERPROCESS | EventFlags::DISABLE_TIMING | EventFlags::EXTERNAL,
        "INTERPROCESS is native on the host (a shared-memory state) and implies DISABLE_TIMING"
    );
}

#[test]
fn never_recorded_event_is_complete() {
    let d = dev();
    let s = nb(&d);
    let e = d
        .create_event(&EventDesc::new().flags(EventFlags::BLOCKING_SYNC))
        .unwrap();
    assert_eq!(e.query().unwrap(), Status::Ready);
    e.synchronize().unwrap();
    e.synchronize_timeout(Duration::from_millis(1)).unwrap();
    s.wait_event(&e).unwrap();
    assert_eq!(
        s.enqueued_count(),
        0,
        "waiting on a never-recorded event is a no-op"
    );
    assert!(matches!(
        e.synchronize_timeout(Duration::ZERO),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "many threads held by gates; too slow under Miri (run natively by cargo test)"
)]
fn wait_takes_a_snapshot_of_the_record() {
    let d = dev();
    let (a, b, idle) = (nb(&d), nb(&d), nb(&d));
    let e = d.create_event(&EventDesc::new()).unwrap();
    let gate = Gate::hold(&a);
    e.record(&a).unwrap();
    b.wait_event(&e).unwrap();
    e.record(&idle).unwrap(); // re-record on an idle stream: completes at once
                              // The latest record is the idle one: this returns while `a` is held (waiting for the
                              // first record would keep it until the gate gave up).
    e.synchronize().unwrap();
    assert_eq!(
        b.query().unwrap(),
        Status::Pending,
        "the wait did not keep the first record"
    );
    gate.open();
    b.synchronize().unwrap();
    assert!(
        gate.released(),
        "event synchronize waited for the first record"
    );
}

#[test]
fn event_sync_timeout_and_blocking_sync() {
    let d = dev();
    let s = nb(&d);
    for flags in [EventFlags::empty(), EventFlags::BLOCKING_SYNC] {
        let e = d.create_event(&EventDesc::new().flags(flags)).unwrap();
        let gate = Gate::hold(&s);
        e.record(&s).unwrap();
        assert!(matches!(
            e.synchronize_timeout(Duration::from_millis(5)),
            Err(Error::Timeout(_))
        ));
        assert_eq!(e.query().unwrap(), Status::Pending);
        gate.open();
        e.synchronize().unwrap();
        assert!(gate.released());
        assert_eq!(e.query().unwrap(), Status::Ready);
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "many threads held by gates; too slow under Miri (run natively by cargo test)"
)]
fn cross_device_wait_and_wrong_device_record() {
    let (d1, d2) = (dev(), dev());
    let (s1, s2) = (nb(&d1), nb(&d2));
    let e1 = d1.create_event(&EventDesc::new()).unwrap();
    assert!(matches!(e1.record(&s2), Err(Error::WrongDevice(_))));
    let buf = d2.alloc(4).unwrap();
    let gate = Gate::hold(&s1);
    e1.record(&s1).unwrap();
    s2.wait_event(&e1).unwrap();
    s2.memset(&buf, 0, 4, 8).unwrap();
    assert_eq!(s2.query().unwrap(), Status::Pending);
    assert_eq!(
        buf.snapshot(),
        vec![0; 4],
        "ran before the other device's record"
    );
    gate.open();
    s2.synchronize().unwrap();
    assert!(gate.released());
    assert_eq!(buf.snapshot(), vec![8; 4]);
}

#[test]
fn capture_records_and_replays() {
    let d = dev();
    let s = nb(&d);
    let other = nb(&d);
    let init: Vec<u8> = (0..64).collect();
    let buf = d.alloc(64).unwrap();
    let twice = d.alloc(64).unwrap();
    s.write(&buf, 0, init.clone()).unwrap();
    s.write(&twice, 0, init.clone()).unwrap();
    s.synchronize().unwrap();

    s.begin_capture(CaptureMode::Global).unwrap();
    assert_eq!(s.capture_status(), CaptureStatus::Active);
    assert_eq!(
        capture_err(s.begin_capture(CaptureMode::Global)),
        CaptureErrorKind::AlreadyCapturing
    );
    assert_eq!(s.capture_status(), CaptureStatus::Active, "still valid");
    s.launch_builtin(Kernel::Lcg {
        buf: &buf,
        rounds: 5,
    })
    .unwrap();
    s.launch_builtin(Kernel::Delay(Duration::from_millis(1)))
        .unwrap();
    std::thread::sleep(Duration::from_millis(10));
    assert_eq!(buf.snapshot(), init, "captured work does not execute");
    let g = s.end_capture().unwrap();
    assert_eq!(g.node_count(), 2);
    assert_eq!(s.capture_status(), CaptureStatus::None);
    assert_eq!(buf.snapshot(), init);

    g.replay(&other).unwrap();
    g.replay(&other).unwrap();
    other.synchronize().unwrap();
    // Replaying twice equals running twice.
    s.launch_builtin(Kernel::Lcg {
        buf: &twice,
        rounds: 5,
    })
    .unwrap();
    s.launch_builtin(Kernel::Lcg {
        buf: &twice,
        rounds: 5,
    })
    .unwrap();
    s.synchronize().unwrap();
    let mut want = init;
    xstream_core::lcg_reference(&mut want, 10);
    assert_eq!(buf.snapshot(), want);
    assert_eq!(twice.snapshot(), want);
    assert_eq!(capture_err(s.end_capture()), CaptureErrorKind::NotCapturing);
}

#[test]
fn capture_events_and_graph_records() {
    let d = dev();
    let s = nb(&d);
    let t = nb(&d);
    let e = d.create_event(&EventDesc::new()).unwrap();
    let buf = d.alloc(4).unwrap();
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    s.launch_builtin(Kernel::Delay(Duration::from_millis(40)))
        .unwrap();
    e.record(&s).unwrap();
    s.wait_event(&e).unwrap(); // a local wait: recorded
    s.memset(&buf, 0, 4, 1).unwrap();
    let g = s.end_capture().unwrap();
    assert_eq!(g.node_count(), 4);
    assert_eq!(
        e.query().unwrap(),
        Status::Ready,
        "a graph node is not a record"
    );
    g.replay(&t).unwrap();
    assert_eq!(
        e.query().unwrap(),
        Status::Pending,
        "launch binds the record"
    );
    e.synchronize().unwrap();
    t.synchronize().unwrap();
    assert_eq!(buf.snapshot(), vec![1; 4]);
}

#[test]
fn capture_refusals_invalidate() {
    let d = dev();
    let s = nb(&d);
    let buf = d.alloc(4).unwrap();

    s.begin_capture(CaptureMode::Global).unwrap();
    assert_eq!(capture_err(s.query()), CaptureErrorKind::Unsupported);
    assert_eq!(s.capture_status(), CaptureStatus::Invalidated);
    assert_eq!(
        capture_err(s.memset(&buf, 0, 4, 1)),
        CaptureErrorKind::Invalidated
    );
    assert_eq!(capture_err(s.end_capture()), CaptureErrorKind::Invalidated);
    s.memset(&buf, 0, 4, 2).unwrap(); // usable at once
    s.synchronize().unwrap();
    assert_eq!(buf.snapshot(), vec![2; 4]);

    let called = Arc::new(AtomicUsize::new(0));
    s.begin_capture(CaptureMode::Global).unwrap();
    let c2 = called.clone();
    assert_eq!(
        capture_err(s.host_callback(move |_| {
            c2.fetch_add(1, Ordering::SeqCst);
        })),
        CaptureErrorKind::Unsupported
    );
    assert_eq!(capture_err(s.end_capture()), CaptureErrorKind::Invalidated);

    s.begin_capture(CaptureMode::Global).unwrap();
    assert_eq!(capture_err(s.synchronize()), CaptureErrorKind::Unsupported);
    assert!(s.end_capture().is_err());

    s.begin_capture(CaptureMode::Global).unwrap();
    assert_eq!(
        capture_err(s.read(&buf, 0, 4)),
        CaptureErrorKind::Unsupported
    );
    assert!(s.end_capture().is_err());

    // Waiting on an event recorded outside the capture: isolation.
    let e = d.create_event(&EventDesc::new()).unwrap();
    e.record(&s).unwrap();
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    assert_eq!(capture_err(s.wait_event(&e)), CaptureErrorKind::Isolation);
    assert_eq!(capture_err(s.end_capture()), CaptureErrorKind::Invalidated);

    // Querying an event recorded in the capture: refused, capture invalidated.
    let e2 = d.create_event(&EventDesc::new()).unwrap();
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    e2.record(&s).unwrap();
    assert_eq!(capture_err(e2.query()), CaptureErrorKind::Unsupported);
    assert_eq!(s.capture_status(), CaptureStatus::Invalidated);
    assert!(s.end_capture().is_err());
    s.synchronize().unwrap();
    assert_eq!(
        called.load(Ordering::SeqCst),
        0,
        "refused callback never called"
    );
}

#[test]
fn end_capture_on_the_wrong_thread() {
    let d = dev();
    let s = Arc::new(nb(&d));
    s.begin_capture(CaptureMode::Global).unwrap();
    let s2 = s.clone();
    let r = std::thread::spawn(move || s2.end_capture().map(|_| ()))
        .join()
        .unwrap();
    assert_eq!(capture_err(r), CaptureErrorKind::WrongThread);
    assert_eq!(s.capture_status(), CaptureStatus::Active);
    s.end_capture().unwrap();
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    let s3 = s.clone();
    std::thread::spawn(move || s3.end_capture().map(|_| ()))
        .join()
        .unwrap()
        .unwrap();
}

#[test]
fn persistent_stream_records_from_creation() {
    let d = dev();
    let p = d
        .create_stream(&StreamDesc::new().flags(F::PERSISTENT | F::NON_BLOCKING))
        .unwrap();
    assert!(p
        .report()
        .flags
        .emulated
        .iter()
        .any(|(n, _)| *n == "PERSISTENT"));
    assert_eq!(p.capture_status(), CaptureStatus::Active);
    let buf = d.alloc(8).unwrap();
    p.memset(&buf, 0, 8, 9).unwrap();
    assert_eq!(p.query().unwrap(), Status::Ready);
    p.synchronize().unwrap();
    assert_eq!(p.capture_status(), CaptureStatus::Active, "not invalidated");
    assert_eq!(buf.snapshot(), vec![0; 8], "nothing executed");
    let g = p.end_capture().unwrap();
    assert_eq!(g.node_count(), 1);
    assert_eq!(p.capture_status(), CaptureStatus::Active, "records again");
    // A recorded hour-long delay: query and synchronize still return (they would hang if
    // they ran or waited for it); the graph holding it is never launched.
    p.launch_builtin(Kernel::Delay(Duration::from_secs(3600)))
        .unwrap();
    assert_eq!(p.query().unwrap(), Status::Ready);
    p.synchronize().unwrap();
    assert_eq!(p.end_capture().unwrap().node_count(), 1);
    let g2 = p.end_capture().unwrap();
    assert_eq!(g2.node_count(), 0);
    let s = nb(&d);
    g.replay(&s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(buf.snapshot(), vec![9; 8]);
}

#[test]
fn fault_poisons_the_device() {
    let d = dev();
    let (s, t) = (nb(&d), nb(&d));
    let statuses = Arc::new(Mutex::new(Vec::new()));
    let calls = Arc::new(AtomicUsize::new(0));
    let cb = |tag: &'static str| {
        let (statuses, calls) = (statuses.clone(), calls.clone());
        move |r: xstream_core::Result<()>| {
            calls.fetch_add(1, Ordering::SeqCst);
            statuses.lock().unwrap().push((tag, r));
        }
    };
    let buf = d.alloc(4).unwrap();
    let held = Gate::hold(&t);
    t.host_callback(cb("t-pending")).unwrap();
    s.launch_builtin(Kernel::Delay(Duration::from_millis(20)))
        .unwrap();
    s.launch_builtin(Kernel::Fault).unwrap();
    s.memset(&buf, 0, 4, 1).unwrap();
    let r = s.read(&buf, 0, 4).unwrap();
    s.host_callback(cb("s-after-fault")).unwrap();

    let err = s.synchronize().unwrap_err();
    assert!(err.is_sticky());
    let n = err.native().unwrap();
    assert_eq!(
        (n.code, n.name, n.api, n.backend),
        (
            700,
            "HOST_DEVICE_FAULT",
            "kernel",
            xstream_core::BackendKind::Host
        )
    );
    assert!(err.is_device_lost(), "{err:?}");
    assert!(r.take().is_err_and(|e| e.is_device_lost()));
    assert_eq!(
        buf.snapshot(),
        vec![0; 4],
        "work after the fault is skipped"
    );
    // The pending callback on the other stream fails while that stream is still held, not
    // after its earlier work (the wait is a guard against hangs).
    let t0 = Instant::now();
    while calls.load(Ordering::SeqCst) < 2 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the held stream's pending callback was not failed at once"
    );
    held.open();
    assert!(t.synchronize().unwrap_err().is_sticky());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "each callback exactly once"
    );
    for (tag, st) in statuses.lock().unwrap().iter() {
        assert!(
            st.as_ref().is_err_and(Error::is_device_lost),
            "{tag}: {st:?}"
        );
    }
    // Every later call fails with the sticky error at once.
    assert!(s.query().unwrap_err().is_sticky());
    assert!(s.memset(&buf, 0, 4, 1).unwrap_err().is_sticky());
    let called = Arc::new(AtomicUsize::new(0));
    let c2 = called.clone();
    assert!(s
        .host_callback(move |_| {
            c2.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap_err()
        .is_sticky());
    assert!(d.create_stream(&StreamDesc::new()).unwrap_err().is_sticky());
    assert!(d.create_event(&EventDesc::new()).unwrap_err().is_sticky());
    assert!(d.alloc(4).unwrap_err().is_sticky());
    assert!(d.synchronize().unwrap_err().is_sticky());
    assert!(d.fault().is_some());
    assert_eq!(
        called.load(Ordering::SeqCst),
        0,
        "refused callback dropped uncalled"
    );
    // Another context is unaffected.
    let other = dev();
    let o = nb(&other);
    o.memset(&other.alloc(4).unwrap(), 0, 4, 1).unwrap();
    o.synchronize().unwrap();
}
