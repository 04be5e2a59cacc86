//! Streams on the simulator: flags, combinations, priority, query/sync/timeout, attributes.
mod common;

use std::time::Duration;

use xstream_ascend::AscendStream;
use xstream_core::{
    Capabilities, Device, Error, FailureMode, Kernel, Ownership, Priority, Status, Stream,
    StreamAttr, StreamAttrValue, StreamDesc, StreamFlags, TranslationPolicy,
};

#[test]
fn each_flag_and_combination() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    for (f, bit) in [
        (StreamFlags::empty(), 0),
        (StreamFlags::NON_BLOCKING, 0),
        (StreamFlags::FAST_LAUNCH, 0x1),
        (StreamFlags::FAST_SYNC, 0x2),
        (StreamFlags::PERSISTENT, 0x4),
        (StreamFlags::HUGE, 0x8),
        (StreamFlags::CPU_SCHEDULE, 0x10),
        (StreamFlags::DEVICE_USE_ONLY, 0x20),
        (StreamFlags::FAST_LAUNCH | StreamFlags::FAST_SYNC, 0x3),
        (StreamFlags::PERSISTENT | StreamFlags::FAST_LAUNCH, 0x5),
    ] {
        let s = d.create_stream(&StreamDesc::new().flags(f)).unwrap();
        assert_eq!(s.native_flags().unwrap(), bit, "{f:?}");
        assert!(s.flags().contains(f | StreamFlags::NON_BLOCKING));
        assert_eq!(s.ownership(), Ownership::Owned);
        s.synchronize().unwrap();
    }
    let e = d
        .create_stream(
            &StreamDesc::new().flags(StreamFlags::DEVICE_USE_ONLY | StreamFlags::FAST_SYNC),
        )
        .unwrap_err();
    assert!(matches!(e, Error::RejectedCombination { .. }), "{e:?}");
    // Best effort creates anyway (see tests/semantics.rs for the report).
    let s = d
        .create_stream(
            &StreamDesc::new()
                .flags(StreamFlags::DEVICE_USE_ONLY | StreamFlags::FAST_SYNC)
                .policy(TranslationPolicy::BestEffort),
        )
        .unwrap();
    assert_eq!(s.native_flags().unwrap(), 0x20);
}

#[test]
fn priority_range_and_clamp() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let r = d.info().priority_range;
    assert_eq!((r.least, r.greatest, r.default), (7, 0, 0));
    assert!(d.info().capabilities.contains(Capabilities::PRIORITY));
    let s = d
        .create_stream(&StreamDesc::new().priority(Priority::Lowest))
        .unwrap();
    assert_eq!(s.priority(), 7);
    let s = d
        .create_stream(&StreamDesc::new().priority(Priority::Highest))
        .unwrap();
    assert_eq!(s.priority(), 0);
    assert!(d
        .create_stream(&StreamDesc::new().priority(Priority::Native(9)))
        .is_err());
    let s = d
        .create_stream(
            &StreamDesc::new()
                .priority(Priority::Native(9))
                .policy(TranslationPolicy::BestEffort),
        )
        .unwrap();
    assert_eq!(s.priority(), 7);
    assert_eq!(s.report().priority.clamped_from, Some(9));
    assert_eq!(
        s.attribute(StreamAttr::Priority).unwrap(),
        StreamAttrValue::Priority(7)
    );
}

#[test]
fn query_sync_timeout() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    assert_eq!(s.query().unwrap(), Status::Ready);
    s.launch_builtin(Kernel::Delay(Duration::from_millis(300)))
        .unwrap();
    assert_eq!(s.query().unwrap(), Status::Pending);
    let e = s
        .synchronize_timeout(Duration::from_millis(20))
        .unwrap_err();
    assert!(
        matches!(e, Error::Timeout(t) if t == Duration::from_millis(20)),
        "{e:?}"
    );
    assert!(matches!(
        s.synchronize_timeout(Duration::ZERO),
        Err(Error::InvalidArgument(_))
    ));
    s.synchronize_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(s.query().unwrap(), Status::Ready);
    let fs = d
        .create_stream(&StreamDesc::new().flags(StreamFlags::FAST_SYNC))
        .unwrap();
    fs.launch_builtin(Kernel::Delay(Duration::from_millis(5)))
        .unwrap();
    fs.synchronize().unwrap();
}

#[test]
fn default_stream_ids_and_from_raw() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let def = d.default_stream().unwrap();
    assert_eq!(def.ownership(), Ownership::Default);
    assert!(def.as_raw().0.is_null());
    def.synchronize().unwrap();
    let a = d.create_stream(&StreamDesc::new().name("a")).unwrap();
    let b = d.create_stream(&StreamDesc::new()).unwrap();
    assert_ne!(a.id(), b.id());
    assert_eq!(a.name(), Some("a"));
    // SAFETY: `a` outlives the borrowed wrapper.
    let borrowed = unsafe { AscendStream::borrow_raw(&d, a.as_raw()) }.unwrap();
    assert_eq!(borrowed.ownership(), Ownership::Borrowed);
    assert_eq!(borrowed.id(), a.id());
    borrowed.synchronize().unwrap();
    assert!(matches!(
        borrowed.set_allocator(None),
        Err(Error::NotOwned {
            kind: xstream_core::NotOwnedKind::Borrowed,
            ..
        })
    ));
    drop(borrowed);
    a.synchronize().unwrap();
}

/// The runtime hands a destroyed stream's id out again (the simulator does as the runtime's
/// driver does): xstream's ids stay unique across create/drop, views share their stream's id,
/// and the runtime's id stays readable as `native_id`.
#[test]
fn ids_unique_although_the_runtime_reuses_its_own() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let mut seen = std::collections::HashSet::new();
    let mut natives = std::collections::HashSet::new();
    let mut native_reused = false;
    // Dropped streams are destroyed on the reaper thread, so a reuse shows in a later round.
    for _ in 0..200 {
        if native_reused {
            break;
        }
        let v: Vec<_> = (0..4)
            .map(|_| d.create_stream(&StreamDesc::new()).unwrap())
            .collect();
        for s in &v {
            assert!(seen.insert(s.id()), "xstream id {} repeated", s.id());
            let n = s.native_id().expect("the simulator has aclrtStreamGetId");
            native_reused |= !natives.insert(n);
            // SAFETY: `s` outlives the borrowed wrapper.
            let view = unsafe { AscendStream::borrow_raw(&d, s.as_raw()) }.unwrap();
            assert_eq!(view.id(), s.id());
            assert_eq!(view.native_id(), Some(n));
        }
        drop(v);
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(
        native_reused,
        "the runtime (simulator) reused no stream id: the check proves nothing"
    );
}

#[test]
fn attributes() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(1);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    assert_eq!(
        s.attribute(StreamAttr::FailureMode).unwrap(),
        StreamAttrValue::FailureMode(FailureMode::Continue)
    );
    s.set_attribute(StreamAttrValue::UserTag(42)).unwrap();
    assert_eq!(
        s.attribute(StreamAttr::UserTag).unwrap(),
        StreamAttrValue::UserTag(42)
    );
    s.set_attribute(StreamAttrValue::FailureMode(FailureMode::Stop))
        .unwrap();
    assert_eq!(
        s.attribute(StreamAttr::FailureMode).unwrap(),
        StreamAttrValue::FailureMode(FailureMode::Stop)
    );
    let t = d.create_stream(&StreamDesc::new()).unwrap();
    t.copy_attributes_from(&s).unwrap();
    assert_eq!(
        t.attribute(StreamAttr::UserTag).unwrap(),
        StreamAttrValue::UserTag(42)
    );
    assert!(matches!(
        s.attribute(StreamAttr::SyncPolicy),
        Err(Error::Unsupported { .. })
    ));
    assert!(matches!(
        s.set_attribute(StreamAttrValue::SyncPolicy(xstream_core::SyncPolicy::Spin)),
        Err(Error::Unsupported { .. })
    ));
    let u = d.create_stream(&StreamDesc::new()).unwrap();
    u.set_failure_mode(FailureMode::Continue).unwrap();
}

#[test]
fn drop_does_not_block_and_reaps() {
    if !common::in_sim_process() {
        return;
    }
    let _g = common::global_lock();
    let d = common::device(0);
    let sim = common::Sim::get();
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    // Hold the stream after a short kernel until released: a drop that waited for the work
    // would not return before the release below.
    // SAFETY: a live stream of the simulator.
    assert_eq!(unsafe { sim.hang_stream(s.as_raw().0) }, 0);
    s.launch_builtin(Kernel::Delay(Duration::from_micros(1)))
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(s);
        let _ = tx.send(());
    });
    let returned = rx.recv_timeout(Duration::from_secs(10)).is_ok();
    assert_eq!(sim.release_hang(), 0);
    assert!(returned, "drop blocked on the held stream");
    sim.set_faults("");
    // That the reaper then destroys it is checked where nothing else runs beside it: the
    // fault sweep's return to zero live streams after every workload.
    let f = d.create_stream(&StreamDesc::new()).unwrap();
    f.launch_builtin(Kernel::Delay(Duration::from_millis(200)))
        .unwrap();
    f.destroy_force().unwrap();
}
