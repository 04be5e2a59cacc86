//! Peer copies on the simulator's two devices: the generic check, the runtime's own rules
//! (`aclrtDeviceCanAccessPeer`, a device-to-device `aclrtMemcpyAsync` across devices without
//! `aclrtDeviceEnablePeerAccess`) and injected failures of the peer-access calls.
mod common;

use xstream_conformance::{report_line, run, Env};
use xstream_core::{Buffer, Capabilities, Device, Error, Stream, StreamDesc};

#[test]
fn peer_copy_conformance_on_two_devices() {
    if !common::in_sim_process() {
        return;
    }
    // Peer access and registrations are process-wide: tests sharing a process (valgrind)
    // take turns.
    let _g = common::global_lock();
    let d = common::device(0);
    assert!(d.info().capabilities.contains(Capabilities::PEER_COPY));
    let env = Env::<xstream_ascend::AscendBackend> {
        device: d,
        isolated: None,
    };
    let sum = run(&env, Some("peer_copy"), report_line);
    assert_eq!((sum.passed, sum.failed, sum.skipped), (1, 0, 0), "{sum:?}");
}

/// The simulator's rules under the backend: a device is not its own peer (100000), and a
/// cross-device copy without enabled access is refused by the runtime itself (100000), not
/// only by xstream's check; after enabling, the same raw copy runs.
#[test]
fn runtime_refuses_cross_device_copy_without_peer_access() {
    if !common::in_sim_process() {
        return;
    }
    let _g = common::global_lock();
    let (d0, d1) = (common::device(0), common::device(1));
    let t = d0.fns();
    let can = t.aclrtDeviceCanAccessPeer.expect("simulator exports it");
    let mut v = -1;
    // SAFETY: `v` is a live out-parameter; plain integers otherwise.
    assert_eq!(unsafe { can(&mut v, 0, 0) }, 100_000);
    // SAFETY: as above.
    assert_eq!(unsafe { can(&mut v, 0, 1) }, 0);
    assert_eq!(v, 1);
    // SAFETY: as above; device 7 does not exist.
    assert_eq!(unsafe { can(&mut v, 0, 7) }, 107_001);

    let s = d0.create_stream(&StreamDesc::new()).unwrap();
    let mine = d0.alloc(64).unwrap();
    let theirs = d1.alloc(64).unwrap();
    s.write(&mine, 0, vec![5; 64]).unwrap();
    s.synchronize().unwrap();
    let _ = d0.disable_peer_access(&d1);
    d0.bind().unwrap();
    let raw_copy = |s: &xstream_ascend::AscendStream| {
        // SAFETY: both buffers are live 64-byte allocations, kept until after the synchronize
        // below; the stream is live and its device's context is current.
        unsafe {
            (t.aclrtMemcpyAsync)(
                theirs.device_address() as *mut std::ffi::c_void,
                64,
                mine.device_address() as *const std::ffi::c_void,
                64,
                3,
                s.as_raw().0,
            )
        }
    };
    assert_eq!(raw_copy(&s), 100_000, "copy without peer access");
    d0.enable_peer_access(&d1).unwrap();
    d0.bind().unwrap();
    assert_eq!(raw_copy(&s), 0, "copy with peer access");
    s.synchronize().unwrap();
    let s1 = d1.create_stream(&StreamDesc::new()).unwrap();
    let rb = s1.read(&theirs, 0, 64).unwrap();
    s1.synchronize().unwrap();
    assert_eq!(rb.take().unwrap(), vec![5; 64]);
    d0.disable_peer_access(&d1).unwrap();
}

/// An injected failure of `aclrtDeviceEnablePeerAccess` surfaces as the runtime's error and
/// leaves access disabled (the copy is still `NotPermitted`); the next call enables it. A
/// failed disable keeps access enabled.
#[test]
fn injected_peer_access_faults() {
    if !common::in_sim_process() {
        return;
    }
    let _g = common::global_lock();
    let sim = common::Sim::get();
    let (d0, d1) = (common::device(0), common::device(1));
    let s = d0.create_stream(&StreamDesc::new()).unwrap();
    let (a, b) = (d0.alloc(16).unwrap(), d1.alloc(16).unwrap());
    let _ = d0.disable_peer_access(&d1);
    assert_eq!(sim.set_faults("aclrtDeviceEnablePeerAccess:1:207000"), 0);
    let e = d0.enable_peer_access(&d1).unwrap_err();
    assert!(!matches!(e, Error::NotPermitted(_)), "{e:?}");
    assert!(e.to_string().contains("aclrtDeviceEnablePeerAccess"), "{e}");
    assert!(matches!(
        s.copy_peer(&a, 0, &b, 0, 16),
        Err(Error::NotPermitted(_))
    ));
    d0.enable_peer_access(&d1).unwrap();
    s.copy_peer(&a, 0, &b, 0, 16).unwrap();
    assert_eq!(sim.set_faults("aclrtDeviceDisablePeerAccess:1:507000"), 0);
    assert!(d0.disable_peer_access(&d1).is_err());
    s.copy_peer(&b, 0, &a, 0, 16).unwrap();
    s.synchronize().unwrap();
    sim.set_faults("");
    d0.disable_peer_access(&d1).unwrap();
}

/// A stream-ordered buffer of the other device is refused (its block cache cannot order its
/// reuse after this device's copy); one of the stream's own device works.
#[test]
fn stream_ordered_buffer_of_the_other_device_is_refused() {
    if !common::in_sim_process() {
        return;
    }
    let _g = common::global_lock();
    let (d0, d1) = (common::device(0), common::device(1));
    d0.enable_peer_access(&d1).unwrap();
    let s0 = d0.create_stream(&StreamDesc::new()).unwrap();
    let s1 = d1.create_stream(&StreamDesc::new()).unwrap();
    let theirs = s1.alloc_async(32).unwrap();
    let mine = s0.alloc_async(32).unwrap();
    s0.write(&mine, 0, vec![4; 32]).unwrap();
    assert!(matches!(
        s0.copy_peer(&mine, 0, &theirs, 0, 32),
        Err(Error::Unsupported { .. })
    ));
    let plain = d1.alloc(32).unwrap();
    s0.copy_peer(&mine, 0, &plain, 0, 32).unwrap();
    s0.synchronize().unwrap();
    let rb = s1.read(&plain, 0, 32).unwrap();
    s1.synchronize().unwrap();
    assert_eq!(rb.take().unwrap(), vec![4; 32]);
    s1.free_async(theirs).unwrap();
    s0.free_async(mine).unwrap();
    d0.disable_peer_access(&d1).unwrap();
}
