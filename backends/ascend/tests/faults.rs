//! Fault injection and limits (simulator globals: every test holds the global lock).
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{global_lock, Sim};
use xstream_core::{Device, Error, Kernel, Stream, StreamDesc};

#[test]
fn stream_limit_is_resource_exhausted() {
    let _g = global_lock();
    let d = common::device(0);
    let sim = Sim::get();
    let (v, err) = common::fill_to_limit(&d, |_| {});
    assert!(matches!(err, Error::ResourceExhausted { .. }), "{err:?}");
    assert!(err.to_string().contains("207008"), "{err}");
    sim.set_limits(0, 0);
    drop(v);
    d.create_stream(&StreamDesc::new()).unwrap();
}

#[test]
fn injected_faults_map_and_backend_keeps_working() {
    let _g = global_lock();
    let d = common::device(0);
    let sim = Sim::get();
    // At the stream limit creation waits for queued destroys and tries once more: a limit
    // that holds on the retry is reported, a limit that went away is not.
    assert_eq!(
        sim.set_faults("aclrtCreateStream:1:207008;aclrtCreateStream:2:207008"),
        0
    );
    let e = d.create_stream(&StreamDesc::new()).unwrap_err();
    assert!(matches!(e, Error::ResourceExhausted { .. }), "{e:?}");
    assert_eq!(sim.set_faults("aclrtCreateStream:1:207008"), 0);
    // Kept alive to the end: a dropped stream is destroyed on the reaper, whose synchronize
    // would race this test's injected synchronize fault below.
    let _kept = d.create_stream(&StreamDesc::new()).unwrap();
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    assert_eq!(sim.set_faults("aclrtSynchronizeStream:1:507035"), 0);
    let e = s.synchronize().unwrap_err();
    let n = e.native().expect("native");
    assert_eq!(n.code, 507_035);
    assert_eq!(n.name, "ACL_ERROR_RT_VECTOR_CORE_EXCEPTION");
    assert!(n.sticky);
    assert!(
        n.message.as_deref().unwrap_or("").contains("injected"),
        "{n:?}"
    );
    s.synchronize().unwrap();
    sim.set_faults("");
    sim.reset();
}

#[test]
fn device_fault_fails_callbacks_exactly_once() {
    let _g = global_lock();
    let d = common::device(1);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let n = Arc::new(AtomicUsize::new(0));
    let errs = Arc::new(AtomicUsize::new(0));
    s.launch(Kernel::Fault).unwrap();
    for _ in 0..3 {
        let (n, errs) = (n.clone(), errs.clone());
        // The fault poisons the context; enqueue may already fail (then the callback is dropped).
        let _ = s.host_callback(move |r| {
            n.fetch_add(1, Ordering::SeqCst);
            if r.is_err() {
                errs.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    let e = s.synchronize().unwrap_err();
    assert!(e.is_sticky(), "{e:?}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(n.load(Ordering::SeqCst), errs.load(Ordering::SeqCst));
    assert_eq!(d.pending_callbacks(), 0);
    Sim::get().reset();
    s.synchronize().unwrap();
    let ok = Arc::new(AtomicUsize::new(0));
    let ok2 = ok.clone();
    s.host_callback(move |r| {
        assert!(r.is_ok());
        ok2.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    s.synchronize().unwrap();
    assert_eq!(ok.load(Ordering::SeqCst), 1);
}
