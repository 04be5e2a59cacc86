//! Events: inverted status enum, elapsed time, never recorded, timing disabled, cross-device.
mod common;

use std::time::Duration;

use common::{global_lock, Sim};
use xstream_core::{
    Device, Error, Event, EventDesc, EventFlags, Kernel, Status, Stream, StreamDesc,
};

#[test]
fn status_and_elapsed() {
    if !common::in_sim_process() {
        return;
    }
    // The test holds its stream with the simulator's process-wide hang control.
    let _g = global_lock();
    let sim = Sim::get();
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let a = d.create_event(&EventDesc::new()).unwrap();
    let b = d.create_event(&EventDesc::new()).unwrap();
    assert_eq!(a.native_flags(), 0x9);
    assert_eq!(
        a.query().unwrap(),
        Status::Ready,
        "never recorded is complete"
    );
    a.synchronize().unwrap();
    assert!(matches!(a.elapsed_ms(&b), Err(Error::EventNotRecorded)));
    a.record(&s).unwrap();
    // Held after the kernel until the pending state and the timed-out wait are observed (no
    // race with the kernel's duration, however slow the machine).
    // SAFETY: a live stream of the simulator.
    assert_eq!(unsafe { sim.hang_stream(s.as_raw().0) }, 0);
    s.launch_builtin(Kernel::Delay(Duration::from_millis(200)))
        .unwrap();
    b.record(&s).unwrap();
    assert_eq!(b.query().unwrap(), Status::Pending);
    assert!(matches!(a.elapsed_ms(&b), Err(Error::NotReady)));
    assert!(matches!(
        b.synchronize_timeout(Duration::from_millis(10)),
        Err(Error::Timeout(_))
    ));
    assert_eq!(sim.release_hang(), 0);
    b.synchronize_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(b.query().unwrap(), Status::Ready);
    let ms = a.elapsed_ms(&b).unwrap();
    assert!(ms >= 150.0, "{ms}");
    b.completed().unwrap().wait().unwrap();
}

#[test]
fn timing_disabled_and_waits() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let s1 = d.create_stream(&StreamDesc::new()).unwrap();
    let s2 = d.create_stream(&StreamDesc::new()).unwrap();
    let e = d
        .create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))
        .unwrap();
    assert_eq!(e.native_flags(), 0x1);
    let never = d.create_event(&EventDesc::new()).unwrap();
    s2.wait_event(&never).unwrap();
    s1.launch_builtin(Kernel::Delay(Duration::from_millis(100)))
        .unwrap();
    e.record(&s1).unwrap();
    s2.wait_event(&e).unwrap();
    drop(e);
    assert_eq!(s2.query().unwrap(), Status::Pending);
    s2.synchronize().unwrap();
    let e2 = d
        .create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))
        .unwrap();
    let e3 = d.create_event(&EventDesc::new()).unwrap();
    assert!(matches!(e2.elapsed_ms(&e3), Err(Error::TimingDisabled)));
    let b = d
        .create_event(&EventDesc::new().flags(EventFlags::BLOCKING_SYNC))
        .unwrap();
    b.record(&s1).unwrap();
    b.synchronize().unwrap();
}

#[test]
fn special_kinds() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let ext = d
        .create_event(&EventDesc::new().flags(EventFlags::EXTERNAL))
        .unwrap();
    assert_eq!(ext.native_flags(), 0x20);
    let dev = d
        .create_event(&EventDesc::new().flags(EventFlags::DEVICE_USE_ONLY))
        .unwrap();
    assert_eq!(dev.native_flags(), 0x10);
    // The default simulated A2 has IPC events (`XSIM_IPC=0` takes them away: semantics.rs).
    let ipc = d
        .create_event(&EventDesc::new().flags(EventFlags::INTERPROCESS))
        .unwrap();
    assert_eq!(ipc.native_flags(), 0x40);
    assert!(d
        .info()
        .capabilities
        .contains(xstream_core::Capabilities::INTERPROCESS_EVENTS));
    // The rule is on native bits: DISABLE_TIMING adds none next to EXTERNAL.
    let ext = d
        .create_event(&EventDesc::new().flags(EventFlags::EXTERNAL | EventFlags::DISABLE_TIMING))
        .unwrap();
    assert_eq!(ext.native_flags(), 0x20);
    assert!(matches!(
        d.create_event(&EventDesc::new().flags(EventFlags::EXTERNAL | EventFlags::DEVICE_USE_ONLY)),
        Err(Error::RejectedCombination { .. })
    ));
}

#[test]
fn cross_device_rejected() {
    if !common::in_sim_process() {
        return;
    }
    let d0 = common::device(0);
    let d1 = common::device(1);
    let s0 = d0.create_stream(&StreamDesc::new()).unwrap();
    let s1 = d1.create_stream(&StreamDesc::new()).unwrap();
    let e1 = d1.create_event(&EventDesc::new()).unwrap();
    e1.record(&s1).unwrap();
    assert!(matches!(s0.wait_event(&e1), Err(Error::WrongDevice(_))));
    assert!(matches!(e1.record(&s0), Err(Error::WrongDevice(_))));
    e1.synchronize().unwrap();
}
