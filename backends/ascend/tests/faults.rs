//! Fault injection and limits (simulator globals: every test holds the global lock).
mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{eventually, global_lock, Sim};
use xstream_core::{Device, Error, ErrorKind, Kernel, Stream, StreamDesc};

#[test]
fn stream_limit_is_resource_exhausted() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(0);
    let sim = Sim::get();
    let (v, err) = common::fill_to_limit(&d, |_| {});
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err:?}");
    assert_eq!(err.native().map(|n| n.code), Some(207_008), "{err}");
    sim.set_limits(0, 0);
    drop(v);
    d.create_stream(&StreamDesc::new()).unwrap();
}

#[test]
fn injected_faults_map_and_backend_keeps_working() {
    if !common::in_sim_process() {
        return;
    }
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
    assert_eq!(e.kind(), ErrorKind::ResourceExhausted, "{e:?}");
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

/// The statuses one callback ran with, one entry per run.
type Log = Arc<Mutex<Vec<Result<(), Error>>>>;

#[test]
fn device_fault_fails_callbacks_exactly_once() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(1);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let sim = Sim::get();
    // One status log per callback: each entry is the status of one run.
    let logs: Vec<Log> = (0..4).map(|_| Arc::new(Mutex::new(Vec::new()))).collect();
    let log_of = |i: usize| {
        let log = logs[i].clone();
        move |r: Result<(), Error>| log.lock().unwrap().push(r)
    };
    // Hold the stream after a short kernel, so the fault task (and the callbacks behind it)
    // cannot run before every callback is enqueued.
    // SAFETY: a live stream of the simulator.
    assert_eq!(unsafe { sim.hang_stream(s.as_raw().0) }, 0);
    s.launch_builtin(Kernel::Delay(Duration::from_micros(1)))
        .unwrap();
    s.launch_builtin(Kernel::Fault).unwrap();
    for i in 0..3 {
        s.host_callback(log_of(i)).unwrap();
    }
    assert!(
        logs.iter().all(|l| l.lock().unwrap().is_empty()),
        "a callback ran before the stream was released"
    );
    assert_eq!(sim.release_hang(), 0);
    let e = s.synchronize().unwrap_err();
    assert!(e.is_sticky(), "{e:?}");
    // Once the fault has run, the context is poisoned: an enqueue is refused, and its
    // callback must never run.
    let refused = s.host_callback(log_of(3));
    assert!(
        matches!(&refused, Err(e) if e.is_sticky()),
        "enqueue on a poisoned context: {refused:?}"
    );
    // Callbacks failed by the fault may still be finishing on another thread.
    assert!(
        eventually(Duration::from_secs(10), || d.pending_callbacks() == 0
            && logs[..3].iter().all(|l| !l.lock().unwrap().is_empty())),
        "the callbacks did not all run"
    );
    let never = logs[3].lock().unwrap();
    assert!(never.is_empty(), "the refused callback ran: {never:?}");
    for (i, log) in logs[..3].iter().enumerate() {
        let got = log.lock().unwrap();
        assert_eq!(
            got.len(),
            1,
            "callback {i} ran {} times: {got:?}",
            got.len()
        );
        assert!(
            matches!(&got[0], Err(e) if e.is_sticky()),
            "callback {i} ran with {:?}, expected the sticky device error",
            got[0]
        );
    }
    Sim::get().reset();
    s.synchronize().unwrap();
    let ok = Arc::new(Mutex::new(Vec::new()));
    let ok2 = ok.clone();
    s.host_callback(move |r| ok2.lock().unwrap().push(r))
        .unwrap();
    s.synchronize().unwrap();
    let got = ok.lock().unwrap();
    assert!(
        got.len() == 1 && got[0].is_ok(),
        "after the reset the callback must run once with Ok: {got:?}"
    );
}
