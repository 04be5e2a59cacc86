//! CUDA-specific tests. Every test skips (prints `SKIP: <test>: <reason>` and passes) when no
//! CUDA device is available. Run with `--test-threads=1` on the GPU machine. Fault tests run in
//! a child process (a device fault poisons the whole process, driver behaviour in docs/semantics.md).
//!
//! One file (past the ~600-line guide) on purpose: `docs/coverage.md` names these tests
//! `cuda:TEST`, and the GPU run executes this one binary with `--test-threads=1`; the fault
//! tests re-execute it (`in_child`). The tests run in this order of concerns: priorities,
//! flags and ids; capture and replay; memory; events and callbacks; faults; drop and
//! synchronize; allocators and attributes; capture dependencies; interop and cross-device.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use xstream_core::{
    lcg_reference, Allocator, Backend, CaptureErrorKind, CaptureMode, CaptureStatus, Device, Error,
    Event, EventDesc, EventFlags, Graph, Kernel, Ownership, Priority, Status, Stream, StreamDesc,
    StreamFlags, TranslationPolicy,
};
use xstream_cuda::{CudaBackend, CudaDevice};

const CHILD_ENV: &str = "XSTREAM_CUDA_CHILD";

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

fn nb() -> StreamDesc {
    StreamDesc::new().flags(StreamFlags::NON_BLOCKING)
}

/// In the parent: runs `test` in a child process and returns its output. In the child:
/// returns `None` (run the body).
fn in_child(test: &str) -> Option<std::process::Output> {
    if std::env::var(CHILD_ENV).as_deref() == Ok(test) {
        return None;
    }
    let exe = std::env::current_exe().expect("current_exe");
    let out = std::process::Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, test)
        .output()
        .expect("spawn child");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    eprintln!("--- child {test} ---\n{text}\n--- end child ---");
    Some(out)
}

fn child_ok(out: &std::process::Output) -> bool {
    out.status.success() && String::from_utf8_lossy(&out.stdout).contains("CHILD-OK")
}

/// A host callback that holds its stream until the returned sender sends (or 10 s pass, a
/// guard against hangs); the flag says whether it was released by a send. Work queued behind
/// it stays pending whatever the load of the machine.
fn gate(s: &xstream_cuda::CudaStream) -> (mpsc::Sender<()>, Arc<std::sync::Mutex<Option<bool>>>) {
    let (tx, rx) = mpsc::channel::<()>();
    let released = Arc::new(std::sync::Mutex::new(None));
    let r2 = released.clone();
    s.host_callback(move |_| {
        let opened = rx.recv_timeout(Duration::from_secs(10)).is_ok();
        *r2.lock().unwrap() = Some(opened);
    })
    .unwrap();
    (tx, released)
}

#[test]
fn priority_clamping_is_read_back_and_reported() {
    let Some(d) = device("priority_clamping_is_read_back_and_reported") else {
        return;
    };
    let r = d.info().priority_range;
    assert_eq!(r.default, 0);
    let hi = d.create_stream(&nb().priority(Priority::Highest)).unwrap();
    assert_eq!(hi.priority(), r.greatest);
    assert_eq!(hi.native_priority().unwrap(), r.greatest);
    let lo = d.create_stream(&nb().priority(Priority::Lowest)).unwrap();
    assert_eq!(lo.priority(), r.least);
    // Strict refuses out-of-range native values; best effort clamps and reports.
    assert!(d
        .create_stream(&nb().priority(Priority::Native(-100)))
        .is_err());
    let c = d
        .create_stream(
            &nb()
                .priority(Priority::Native(-100))
                .policy(TranslationPolicy::BestEffort),
        )
        .unwrap();
    assert_eq!(c.priority(), r.greatest);
    assert_eq!(c.report().priority.clamped_from, Some(-100));
    assert_eq!(c.native_priority().unwrap(), r.greatest);
    // priority() is computed at creation, not read back: it must equal the driver's value.
    for p in [
        Priority::Lowest,
        Priority::Low,
        Priority::Normal,
        Priority::High,
        Priority::Highest,
        Priority::Native(r.greatest),
    ] {
        let s = d.create_stream(&nb().priority(p)).unwrap();
        assert_eq!(s.priority(), s.native_priority().unwrap(), "{p:?}");
    }
}

#[test]
fn flags_are_read_back() {
    let Some(d) = device("flags_are_read_back") else {
        return;
    };
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    assert_eq!(s.native_flags().unwrap(), 0);
    assert!(!s.flags().contains(StreamFlags::NON_BLOCKING));
    let s = d.create_stream(&nb().priority(Priority::High)).unwrap();
    assert_eq!(s.native_flags().unwrap(), 1);
    assert!(s.flags().contains(StreamFlags::NON_BLOCKING));
    assert!(d
        .create_stream(&nb().flags(StreamFlags::CPU_SCHEDULE))
        .is_err());
    let s = d
        .create_stream(
            &nb()
                .flags(StreamFlags::CPU_SCHEDULE | StreamFlags::FAST_LAUNCH)
                .policy(TranslationPolicy::BestEffort),
        )
        .unwrap();
    assert_eq!(s.report().flags.dropped.len(), 1);
    assert!(!s.flags().contains(StreamFlags::CPU_SCHEDULE));
    let def = d.default_stream().unwrap();
    assert_eq!(def.ownership(), Ownership::Default);
    assert_eq!(def.native_flags().unwrap(), 0);
    assert_eq!(def.native_device().unwrap(), d.cu_device());
    assert_eq!(s.native_context().unwrap(), d.raw_context());
    let (ctx, green) = s.native_context_v2().unwrap();
    assert_eq!(ctx, d.raw_context());
    assert_eq!(green, None);
    let e = d
        .create_event(&EventDesc::new().flags(EventFlags::INTERPROCESS))
        .unwrap();
    assert!(e.flags().contains(EventFlags::DISABLE_TIMING));
}

#[test]
fn ids_are_unique_and_not_recycled() {
    let Some(d) = device("ids_are_unique_and_not_recycled") else {
        return;
    };
    let mut seen = std::collections::HashSet::new();
    let mut raws = std::collections::HashSet::new();
    for _ in 0..50 {
        let s = d.create_stream(&nb()).unwrap();
        assert!(seen.insert(s.id()), "id {} reused", s.id());
        assert_eq!(s.native_id().unwrap(), s.id());
        raws.insert(format!("{:?}", s.as_raw()));
    }
    // Handles were recycled (driver behaviour in docs/semantics.md), ids were not.
    eprintln!("50 streams, {} distinct handles", raws.len());
    let a = d.default_stream().unwrap();
    let b = d.default_stream().unwrap();
    assert_eq!(a.id(), b.id());
}

#[test]
fn capture_rules() {
    let Some(d) = device("capture_rules") else {
        return;
    };
    let s = d.create_stream(&nb()).unwrap();
    // Default stream: not capturable.
    let def = d.default_stream().unwrap();
    assert!(matches!(
        def.begin_capture(CaptureMode::Global),
        Err(Error::Capture {
            kind: CaptureErrorKind::NotCapturable,
            ..
        })
    ));
    // Twice: AlreadyCapturing, still valid.
    s.begin_capture(CaptureMode::Global).unwrap();
    assert!(matches!(
        s.begin_capture(CaptureMode::Global),
        Err(Error::Capture {
            kind: CaptureErrorKind::AlreadyCapturing,
            ..
        })
    ));
    assert_eq!(s.capture_status(), CaptureStatus::Active);
    assert_eq!(s.native_capture_status().unwrap(), CaptureStatus::Active);
    let info = s.capture_info().unwrap();
    assert_eq!(info.status, CaptureStatus::Active);
    assert!(info.id != 0);
    s.launch_builtin(Kernel::Delay(Duration::from_micros(10)))
        .unwrap();
    let deps = s.capture_info().unwrap().dependencies;
    assert_eq!(deps.len(), 1);
    s.update_capture_dependencies(&deps, xstream_cuda::DependencyUpdate::Set)
        .unwrap();
    let g = s.end_capture().unwrap();
    assert_eq!(g.node_count(), 1);
    // Synchronize during capture invalidates.
    s.begin_capture(CaptureMode::Global).unwrap();
    assert!(matches!(
        s.synchronize(),
        Err(Error::Capture {
            kind: CaptureErrorKind::Unsupported,
            ..
        })
    ));
    assert_eq!(s.capture_status(), CaptureStatus::Invalidated);
    assert!(matches!(
        s.end_capture(),
        Err(Error::Capture {
            kind: CaptureErrorKind::Invalidated,
            ..
        })
    ));
    s.synchronize().unwrap();
    // Callbacks are refused during capture (and invalidate it).
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    assert!(matches!(
        s.host_callback(|_| {}),
        Err(Error::Capture {
            kind: CaptureErrorKind::Unsupported,
            ..
        })
    ));
    assert!(s.end_capture().is_err());
    // Status callbacks too; and query.
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    assert!(s.add_status_callback(|_| {}).is_err());
    assert!(s.end_capture().is_err());
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    assert!(s.query().is_err());
    assert!(s.end_capture().is_err());
    assert_eq!(s.query().unwrap(), Status::Ready);
    // Capture into a new graph, external wait.
    let e = d.create_event(&EventDesc::new()).unwrap();
    let other = d.create_stream(&nb()).unwrap();
    e.record(&other).unwrap();
    s.begin_capture_to_new_graph(CaptureMode::Global).unwrap();
    s.wait_event_external(&e).unwrap();
    s.launch_builtin(Kernel::Delay(Duration::from_micros(1)))
        .unwrap();
    let g = s.end_capture().unwrap();
    assert!(g.node_count() >= 1);
    g.replay(&s).unwrap();
    s.synchronize().unwrap();
    // Thread capture mode exchange.
    let old = xstream_cuda::exchange_thread_capture_mode(CaptureMode::Relaxed).unwrap();
    assert_eq!(old, CaptureMode::Global);
    xstream_cuda::exchange_thread_capture_mode(old).unwrap();
}

#[test]
fn replay_runs_lcg_n_times() {
    let Some(d) = device("replay_runs_lcg_n_times") else {
        return;
    };
    let s = d.create_stream(&nb()).unwrap();
    let n_words = 1 << 16;
    let init: Vec<u8> = (0..n_words as u32).flat_map(|i| i.to_le_bytes()).collect();
    let buf = d.alloc(init.len()).unwrap();
    s.write(&buf, 0, init.clone()).unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    s.launch_builtin(Kernel::Lcg {
        buf: &buf,
        rounds: 3,
    })
    .unwrap();
    let g = s.end_capture().unwrap();
    assert_eq!(g.node_count(), 1);
    let n = 5;
    for _ in 0..n {
        g.replay(&s).unwrap();
    }
    drop(g); // the queued replays keep what they use
    let rb = s.read(&buf, 0, init.len()).unwrap();
    s.synchronize().unwrap();
    let mut expect = init;
    lcg_reference(&mut expect, 3 * n);
    assert_eq!(rb.take().unwrap(), expect);
}

#[test]
fn write_read_copy_memset_round_trip() {
    let Some(d) = device("write_read_copy_memset_round_trip") else {
        return;
    };
    let s = d.create_stream(&nb()).unwrap();
    let a = d.alloc(4096).unwrap();
    let b = d.alloc(4096).unwrap();
    assert!(s.read(&a, 4000, 100).is_err());
    let z = s.read(&a, 0, 4096).unwrap();
    s.synchronize().unwrap();
    assert!(z.take().unwrap().iter().all(|&x| x == 0));
    s.write(&a, 0, vec![7u8; 4096]).unwrap();
    s.memset(&a, 100, 10, 9).unwrap();
    s.copy(&a, 0, &b, 0, 4096).unwrap();
    let r = s.read(&b, 95, 20).unwrap();
    drop(a); // deferred free
    s.synchronize().unwrap();
    let got = r.take().unwrap();
    assert_eq!(&got[..5], &[7; 5]);
    assert_eq!(&got[5..15], &[9; 10]);
    assert_eq!(&got[15..], &[7; 5]);
}

#[test]
fn never_recorded_event_and_elapsed_time() {
    let Some(d) = device("never_recorded_event_and_elapsed_time") else {
        return;
    };
    let s = d.create_stream(&nb()).unwrap();
    let e = d.create_event(&EventDesc::new()).unwrap();
    assert_eq!(e.query().unwrap(), Status::Ready);
    e.synchronize().unwrap();
    s.wait_event(&e).unwrap();
    assert!(e.completed().unwrap().wait().is_ok());
    let f = d.create_event(&EventDesc::new()).unwrap();
    assert!(matches!(e.elapsed_ms(&f), Err(Error::EventNotRecorded)));
    let nt = d
        .create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))
        .unwrap();
    assert!(matches!(e.elapsed_ms(&nt), Err(Error::TimingDisabled)));
    e.record(&s).unwrap();
    s.launch_builtin(Kernel::Delay(Duration::from_millis(20)))
        .unwrap();
    f.record(&s).unwrap();
    // CUDA_ERROR_NOT_READY (600), kept as the driver's code, classified as not ready.
    assert!(e.elapsed_ms(&f).is_err_and(|e| e.is_not_ready()));
    let c = f.completed().unwrap();
    c.wait().unwrap();
    let ms = e.elapsed_ms(&f).unwrap();
    assert!((19.0..100.0).contains(&ms), "{ms}");
    let blocking = d
        .create_event(&EventDesc::new().flags(EventFlags::BLOCKING_SYNC))
        .unwrap();
    s.launch_builtin(Kernel::Delay(Duration::from_millis(5)))
        .unwrap();
    blocking.record(&s).unwrap();
    assert!(matches!(
        blocking.synchronize_timeout(Duration::from_micros(100)),
        Err(Error::Timeout(_))
    ));
    blocking.synchronize().unwrap();
}

#[test]
fn callbacks_run_once_and_panics_are_reported() {
    let Some(d) = device("callbacks_run_once_and_panics_are_reported") else {
        return;
    };
    let s = d.create_stream(&nb()).unwrap();
    let n = Arc::new(AtomicUsize::new(0));
    for _ in 0..10 {
        let n = n.clone();
        s.host_callback(move |r| {
            assert!(r.is_ok());
            // xstream calls are refused inside.
            assert!(matches!(CudaBackend::open(0), Err(Error::NotPermitted(_))));
            n.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    }
    s.host_callback(|_| panic!("boom")).unwrap();
    assert!(matches!(s.synchronize(), Err(Error::CallbackPanicked(m)) if m == "boom"));
    assert_eq!(n.load(Ordering::SeqCst), 10);
    s.synchronize().unwrap();
    let (tx, rx) = mpsc::channel();
    s.add_status_callback(move |r| tx.send(r.is_ok()).unwrap())
        .unwrap();
    assert!(rx.recv_timeout(Duration::from_secs(5)).unwrap());
    s.completed().unwrap().wait().unwrap();
    let (tx, rx) = mpsc::channel();
    s.notify(move |r| {
        // The second tier may call xstream.
        tx.send(r.is_ok() && CudaBackend::is_available()).unwrap()
    })
    .unwrap();
    assert!(rx.recv_timeout(Duration::from_secs(5)).unwrap());
    assert_eq!(d.pending_callbacks(), 0);
}

fn fault_body(d: &CudaDevice, place_on_other: bool) {
    let s = d.create_stream(&nb()).unwrap();
    let t = d.create_stream(&nb()).unwrap();
    let fired = Arc::new(AtomicUsize::new(0));
    let errs = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    let target = if place_on_other { &t } else { &s };
    if place_on_other {
        t.launch_builtin(Kernel::Delay(Duration::from_millis(300)))
            .unwrap();
    }
    s.launch_builtin(Kernel::Fault).unwrap();
    for _ in 0..3 {
        let (fired, errs, tx) = (fired.clone(), errs.clone(), tx.clone());
        target
            .host_callback(move |r| {
                fired.fetch_add(1, Ordering::SeqCst);
                if let Err(e) = r {
                    assert!(e.is_sticky(), "{e}");
                    errs.fetch_add(1, Ordering::SeqCst);
                }
                let _ = tx.send(());
            })
            .unwrap();
    }
    // Nobody calls xstream: the watcher must fail them.
    for _ in 0..3 {
        rx.recv_timeout(Duration::from_secs(10))
            .expect("pending callback failed by xstream");
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(fired.load(Ordering::SeqCst), 3, "exactly once");
    assert_eq!(errs.load(Ordering::SeqCst), 3);
    let e = s.synchronize().unwrap_err();
    assert!(e.is_sticky());
    assert_eq!(e.native().unwrap().name, "CUDA_ERROR_ILLEGAL_ADDRESS");
    assert!(t.synchronize().unwrap_err().is_sticky());
    assert!(d.sticky_error().is_some());
    // Callbacks after the fault: refused at enqueue (never silently dropped).
    let late = Arc::new(AtomicUsize::new(0));
    let l2 = late.clone();
    assert!(s
        .host_callback(move |_| {
            l2.fetch_add(1, Ordering::SeqCst);
        })
        .is_err());
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(late.load(Ordering::SeqCst), 0);
    assert_eq!(d.pending_callbacks(), 0);
    println!("CHILD-OK");
}

/// Runs `fault_body` in a child process (a fault poisons the whole process, driver behaviour in docs/semantics.md);
/// the parent checks the child's verdict. Skips without a GPU.
fn fault_test(name: &str, other_streams: bool) {
    if std::env::var(CHILD_ENV).is_err() {
        if let Err(e) = CudaBackend::availability() {
            xstream_conformance::report_skip(name, &e);
            return;
        }
    }
    match in_child(name) {
        Some(out) => assert!(child_ok(&out), "child failed"),
        None => {
            let d = device(name).unwrap();
            fault_body(&d, other_streams);
        }
    }
}

#[test]
fn fault_is_sticky_and_fails_pending_callbacks_once() {
    fault_test("fault_is_sticky_and_fails_pending_callbacks_once", false);
}

#[test]
fn fault_fails_callbacks_on_other_streams() {
    fault_test("fault_fails_callbacks_on_other_streams", true);
}

#[test]
fn destroy_with_pending_work_completes_it() {
    let Some(d) = device("destroy_with_pending_work_completes_it") else {
        return;
    };
    let (tx, rx) = mpsc::channel();
    let buf = d.alloc(1 << 20).unwrap();
    let s = d.create_stream(&nb()).unwrap();
    let (open, released) = gate(&s);
    s.launch_builtin(Kernel::Lcg {
        buf: &buf,
        rounds: 1,
    })
    .unwrap();
    s.host_callback(move |r| tx.send(r.is_ok()).unwrap())
        .unwrap();
    // The gate opens only after drop returns: a drop that waited for the work would wait
    // until the gate gave up, and the gate would say so.
    drop(s);
    drop(buf); // deferred behind the queued kernel
    open.send(()).unwrap();
    assert!(rx.recv_timeout(Duration::from_secs(20)).unwrap());
    d.synchronize().unwrap();
    assert_eq!(
        *released.lock().unwrap(),
        Some(true),
        "drop blocked until the queued work gave up waiting"
    );
}

#[test]
fn fast_sync_and_timeouts() {
    let Some(d) = device("fast_sync_and_timeouts") else {
        return;
    };
    let s = d
        .create_stream(&nb().flags(StreamFlags::NON_BLOCKING | StreamFlags::FAST_SYNC))
        .unwrap();
    assert!(s.flags().contains(StreamFlags::FAST_SYNC));
    assert_eq!(s.report().flags.emulated.len(), 1);
    // The emulated (spin-polling) synchronize returns only after the work completed: the
    // kernel's result is there and an event recorded after it is complete, without waiting.
    let buf = d.alloc(4096).unwrap();
    let init: Vec<u8> = (0..4096).map(|i| (i % 251) as u8).collect();
    s.write(&buf, 0, init.clone()).unwrap();
    s.launch_builtin(Kernel::Delay(Duration::from_millis(5)))
        .unwrap();
    s.launch_builtin(Kernel::Lcg {
        buf: &buf,
        rounds: 2,
    })
    .unwrap();
    let after = d.create_event(&EventDesc::new()).unwrap();
    after.record(&s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(after.query().unwrap(), Status::Ready);
    assert_eq!(s.query().unwrap(), Status::Ready);
    let r = s.read(&buf, 0, 4096).unwrap();
    s.synchronize().unwrap();
    let mut want = init;
    lcg_reference(&mut want, 2);
    assert_eq!(r.take().unwrap(), want);
    let n = d.create_stream(&nb()).unwrap();
    assert!(matches!(
        n.synchronize_timeout(Duration::ZERO),
        Err(Error::InvalidArgument(_))
    ));
    // A timeout while the work is held by a gate: Timeout, still pending; then it completes.
    let (open, released) = gate(&n);
    assert!(matches!(
        n.synchronize_timeout(Duration::from_millis(20)),
        Err(Error::Timeout(_))
    ));
    assert_eq!(n.query().unwrap(), Status::Pending);
    open.send(()).unwrap();
    n.synchronize_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(n.query().unwrap(), Status::Ready);
    assert_eq!(*released.lock().unwrap(), Some(true));
}

#[test]
fn persistent_stream_records() {
    let Some(d) = device("persistent_stream_records") else {
        return;
    };
    let s = d
        .create_stream(&nb().flags(StreamFlags::NON_BLOCKING | StreamFlags::PERSISTENT))
        .unwrap();
    assert!(s.is_capturing());
    let other = d.create_stream(&nb()).unwrap();
    let buf = d.alloc(4096).unwrap();
    let init = vec![3u8; 4096];
    other.write(&buf, 0, init.clone()).unwrap();
    other.synchronize().unwrap();
    s.launch_builtin(Kernel::Lcg {
        buf: &buf,
        rounds: 1,
    })
    .unwrap();
    s.synchronize().unwrap();
    assert_eq!(s.query().unwrap(), Status::Ready);
    // Nothing ran: the buffer is unchanged.
    let r = other.read(&buf, 0, 4096).unwrap();
    other.synchronize().unwrap();
    assert_eq!(r.take().unwrap(), init, "recorded work ran before replay");
    let g = s.end_capture().unwrap();
    assert_eq!(g.node_count(), 1);
    assert!(s.is_capturing());
    g.replay(&other).unwrap();
    let r = other.read(&buf, 0, 4096).unwrap();
    other.synchronize().unwrap();
    let mut want = init;
    lcg_reference(&mut want, 1);
    assert_eq!(
        r.take().unwrap(),
        want,
        "the replay did not run the recorded kernel"
    );
}

#[test]
fn allocator_and_attributes() {
    let Some(d) = device("allocator_and_attributes") else {
        return;
    };
    use xstream_core::{StreamAttr, StreamAttrValue, SyncPolicy};
    let s = d.create_stream(&nb()).unwrap();
    assert!(s.allocator().unwrap().is_none());
    match d.async_allocator(&s) {
        Ok(a) => {
            let b = a.alloc(1 << 20).unwrap();
            assert_ne!(a.address(b), 0);
            assert_eq!(a.live_blocks(), 1);
            a.free(b);
            assert_eq!(a.live_blocks(), 0);
            s.set_allocator(Some(a)).unwrap();
            assert!(s.allocator().unwrap().is_some());
            let p = xstream_cuda::memory::alloc_async_raw(&s, 4096).unwrap();
            // SAFETY: `p` came from `alloc_async_raw` on this device; nothing uses it.
            unsafe { xstream_cuda::memory::free_async_raw(&s, p) }.unwrap();
            s.synchronize().unwrap();
        }
        Err(e) => {
            assert!(
                !d.info()
                    .capabilities
                    .contains(xstream_core::Capabilities::STREAM_ORDERED_ALLOC),
                "the device reports memory pools but async_allocator failed: {e}"
            );
            assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
            xstream_conformance::report_skip(
                "allocator_and_attributes (stream-ordered allocator part)",
                &format!("no memory pools on this device: {e}"),
            );
        }
    }
    s.set_attribute(StreamAttrValue::SyncPolicy(SyncPolicy::BlockingSync))
        .unwrap();
    assert_eq!(
        s.attribute(StreamAttr::SyncPolicy).unwrap(),
        StreamAttrValue::SyncPolicy(SyncPolicy::BlockingSync)
    );
    let r = d.info().priority_range;
    s.set_attribute(StreamAttrValue::Priority(r.greatest))
        .unwrap();
    assert_eq!(s.priority(), r.greatest);
    let t = d.create_stream(&nb()).unwrap();
    t.copy_attributes_from(&s).unwrap();
    assert_eq!(t.priority(), r.greatest);
    let _ = t.attribute(StreamAttr::AccessPolicyWindow).unwrap();
    assert!(matches!(
        s.attribute(StreamAttr::FailureMode),
        Err(Error::Unsupported { .. })
    ));
    if d.info()
        .capabilities
        .contains(xstream_core::Capabilities::MANAGED_MEMORY)
    {
        let m = d.alloc_managed(1 << 16).unwrap();
        // Every mode, each ordered on the stream and completed before the next.
        for how in [
            xstream_cuda::MemAttach::Single,
            xstream_cuda::MemAttach::Host,
            xstream_cuda::MemAttach::Global,
        ] {
            s.attach_mem_async(&m, how)
                .unwrap_or_else(|e| panic!("attach {how:?}: {e}"));
            s.synchronize()
                .unwrap_or_else(|e| panic!("synchronize after attach {how:?}: {e}"));
            assert_eq!(s.query().unwrap(), Status::Ready);
        }
    } else {
        let m = d.alloc_managed(1 << 16);
        assert!(
            matches!(m, Err(Error::Unsupported { .. })),
            "managed allocation without MANAGED_MEMORY: {:?}",
            m.as_ref().map(|_| "Ok(..)")
        );
        xstream_conformance::report_skip(
            "allocator_and_attributes (attach_mem_async part)",
            &"the device has no managed memory",
        );
    }
}

/// `update_capture_dependencies` with `Add` and with `Set`, observed through the replayed
/// graph's output: a copy captured on stream `s` right after the update must follow a kernel
/// captured on another stream `t` (forked from `s` by an event), which it only does through
/// the updated dependency set. The kernel's branch starts with a delay, so a copy that did
/// not follow it would read the buffer before the kernel changed it.
#[test]
fn capture_dependencies_add_and_set_order_work() {
    let Some(d) = device("capture_dependencies_add_and_set_order_work") else {
        return;
    };
    for how in [
        xstream_cuda::DependencyUpdate::Add,
        xstream_cuda::DependencyUpdate::Set,
    ] {
        let s = d.create_stream(&nb()).unwrap();
        let t = d.create_stream(&nb()).unwrap();
        let src = d.alloc(4096).unwrap();
        let dst = d.alloc(4096).unwrap();
        let other = d.alloc(4096).unwrap();
        let init: Vec<u8> = (0..4096).map(|i| (i * 7 % 256) as u8).collect();
        s.write(&src, 0, init.clone()).unwrap();
        s.synchronize().unwrap();
        let fork = d
            .create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))
            .unwrap();
        let join = d
            .create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))
            .unwrap();
        s.begin_capture(CaptureMode::Global).unwrap();
        fork.record(&s).unwrap();
        t.wait_event(&fork).unwrap();
        t.launch_builtin(Kernel::Delay(Duration::from_millis(20)))
            .unwrap();
        t.launch_builtin(Kernel::Lcg {
            buf: &src,
            rounds: 1,
        })
        .unwrap();
        let kernel = t.capture_info().unwrap().dependencies;
        assert_eq!(kernel.len(), 1, "{how:?}: the kernel branch has one tip");
        s.launch_builtin(Kernel::Lcg {
            buf: &other,
            rounds: 1,
        })
        .unwrap();
        s.update_capture_dependencies(&kernel, how).unwrap();
        let deps = s.capture_info().unwrap().dependencies;
        let want_deps = match how {
            xstream_cuda::DependencyUpdate::Add => 2,
            xstream_cuda::DependencyUpdate::Set => 1,
        };
        assert_eq!(deps.len(), want_deps, "{how:?}: dependency set {deps:?}");
        assert!(
            deps.contains(&kernel[0]),
            "{how:?}: kernel not a dependency"
        );
        s.copy(&src, 0, &dst, 0, 4096).unwrap();
        // Rejoin the forked stream (required to end the capture); after the copy, so the
        // copy's order comes from the update alone.
        join.record(&t).unwrap();
        s.wait_event(&join).unwrap();
        let g = s.end_capture().unwrap();
        g.replay(&s).unwrap();
        let r = s.read(&dst, 0, 4096).unwrap();
        s.synchronize().unwrap();
        let mut want = init;
        lcg_reference(&mut want, 1);
        assert_eq!(
            r.take().unwrap(),
            want,
            "{how:?}: the copy did not follow the kernel it was made to depend on"
        );
    }
}

#[test]
fn interop_and_special_streams() {
    let Some(d) = device("interop_and_special_streams") else {
        return;
    };
    let cs = d.cudarc_context().new_stream().unwrap();
    let x = xstream_cuda::CudaStream::from_cudarc(&d, cs.clone()).unwrap();
    assert_eq!(x.ownership(), Ownership::Borrowed);
    assert_eq!(x.as_raw().as_ptr(), cs.cu_stream());
    x.launch_builtin(Kernel::Delay(Duration::from_micros(10)))
        .unwrap();
    x.synchronize().unwrap();
    let own = d.create_stream(&nb()).unwrap();
    let back = own.cudarc_stream().clone();
    assert_eq!(back.cu_stream(), own.as_raw().as_ptr());
    drop(back);
    // SAFETY: `own` outlives the borrowed view.
    #[allow(unsafe_code)]
    let b = unsafe { xstream_cuda::CudaStream::borrow_raw(&d, own.as_raw()) }.unwrap();
    assert_eq!(b.id(), own.id());
    assert_eq!(b.ownership(), Ownership::Borrowed);
    drop(b);
    let pt = d.per_thread_stream().unwrap();
    pt.launch_builtin(Kernel::Delay(Duration::from_micros(10)))
        .unwrap();
    pt.synchronize().unwrap();
    let def = d.default_stream().unwrap();
    def.launch_builtin(Kernel::Delay(Duration::from_micros(10)))
        .unwrap();
    def.synchronize().unwrap();
    // Work from another thread (context bound there by xstream).
    let d2 = d.clone();
    std::thread::spawn(move || {
        let s = d2.create_stream(&nb()).unwrap();
        s.launch_builtin(Kernel::Delay(Duration::from_micros(10)))
            .unwrap();
        s.synchronize().unwrap();
    })
    .join()
    .unwrap();
}

/// Two GPUs: a stream of device 1 waits on an event recorded on device 0 (the driver allows
/// cross-device waits), and only completes after device 0's work.
#[test]
fn cross_device_wait_orders_work() {
    let test = "cross_device_wait_orders_work";
    let Some(d0) = device(test) else {
        return;
    };
    let n = CudaBackend::device_count().unwrap();
    if n < 2 {
        xstream_conformance::report_skip(test, &format!("needs 2 CUDA devices, found {n}"));
        return;
    }
    let d1 = CudaBackend::open(1).unwrap();
    assert!(d1
        .info()
        .capabilities
        .contains(xstream_core::Capabilities::CROSS_DEVICE_WAIT));
    let a = d0.create_stream(&nb()).unwrap();
    let b = d1.create_stream(&nb()).unwrap();
    let e = d0
        .create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))
        .unwrap();
    a.launch_builtin(Kernel::Delay(Duration::from_millis(300)))
        .unwrap();
    e.record(&a).unwrap();
    b.wait_event(&e).unwrap();
    let marker = d1.create_event(&EventDesc::new()).unwrap();
    marker.record(&b).unwrap();
    // b has no work of its own: it is pending only because of the wait on device 0.
    assert_eq!(b.query().unwrap(), Status::Pending);
    assert_eq!(marker.query().unwrap(), Status::Pending);
    b.synchronize().unwrap();
    assert_eq!(
        a.query().unwrap(),
        Status::Ready,
        "b finished before a's work"
    );
    assert_eq!(marker.query().unwrap(), Status::Ready);
}

/// A status callback that runs after its stream and device were dropped holds the last
/// reference to the device's state; that state's teardown (sentinel stream, pooled events,
/// modules, the context's release) calls the driver, which the driver's callback thread must
/// not do, so it runs on xstream's dispatcher. Afterwards the device opens again and its
/// callbacks still run (a callback thread stuck in a driver call would hold them).
#[test]
fn status_callback_outliving_its_device_tears_down_off_the_driver_thread() {
    let Some(d) = device("status_callback_outliving_its_device_tears_down_off_the_driver_thread")
    else {
        return;
    };
    let s = d.create_stream(&nb()).unwrap();
    s.launch_builtin(Kernel::Delay(Duration::from_millis(50)))
        .unwrap();
    let (tx, rx) = mpsc::channel();
    s.add_status_callback(move |r| tx.send(r.is_ok()).unwrap())
        .unwrap();
    drop(s);
    drop(d);
    assert!(rx.recv_timeout(Duration::from_secs(10)).unwrap());
    let d = CudaBackend::open(0).unwrap();
    let s = d.create_stream(&nb()).unwrap();
    let (tx, rx) = mpsc::channel();
    s.host_callback(move |r| tx.send(r.is_ok()).unwrap())
        .unwrap();
    assert!(
        rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        "a host callback after the teardown did not run"
    );
    s.synchronize().unwrap();
}
