//! Portable semantics that must hold on the Ascend backend (over the simulator): flag rules on
//! native bits, best effort that creates anyway, reported semantic changes, host waits that
//! really wait, force-destroy scoped to its stream, and the edge cases of allocation, capture
//! node counts, the stream limit and priorities.
//!
//! Some tests inject simulator faults or lower its limits (process-wide), so every test here
//! holds the global lock.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{global_lock, Sim};
use xstream_ascend::AscendBackend;
use xstream_core::{
    CaptureMode, Device, Error, ErrorKind, Event, EventDesc, EventFlags, Graph, Kernel, PoolConfig,
    Priority, PriorityClass, Status, Stream, StreamAttr, StreamAttrValue, StreamDesc, StreamFlags,
    StreamPool, TranslationPolicy,
};

fn best_effort(f: StreamFlags) -> StreamDesc {
    StreamDesc::new()
        .flags(f)
        .policy(TranslationPolicy::BestEffort)
}

#[test]
fn combination_rules_look_at_native_bits() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(0);
    // NON_BLOCKING is inherent on ACL (no bit): 0x20 alone, which the runtime accepts.
    let s = d
        .create_stream(
            &StreamDesc::new().flags(StreamFlags::NON_BLOCKING | StreamFlags::DEVICE_USE_ONLY),
        )
        .unwrap();
    assert_eq!(s.native_flags().unwrap(), 0x20);
    // A stream's own flags() create a stream like it.
    let again = d
        .create_stream(&StreamDesc::new().flags(s.flags()))
        .unwrap();
    assert_eq!(again.native_flags().unwrap(), 0x20);
    // So does a pool of such streams.
    let pool = StreamPool::<AscendBackend>::new(
        d.clone(),
        PoolConfig {
            per_class: [1, 1, 1],
            flags: StreamFlags::NON_BLOCKING | StreamFlags::DEVICE_USE_ONLY,
        },
    )
    .unwrap();
    let p = pool.get(PriorityClass::Normal).unwrap();
    assert!(p.flags().contains(StreamFlags::DEVICE_USE_ONLY));
    // Event flags that carry no ACL bit next to a lone kind.
    for (f, bit) in [
        (EventFlags::EXTERNAL | EventFlags::DISABLE_TIMING, 0x20),
        (EventFlags::EXTERNAL | EventFlags::BLOCKING_SYNC, 0x20),
        (
            EventFlags::DEVICE_USE_ONLY | EventFlags::DISABLE_TIMING,
            0x10,
        ),
    ] {
        let e = d.create_event(&EventDesc::new().flags(f)).unwrap();
        assert_eq!(e.native_flags(), bit, "{f:?}");
        assert!(e.flags().contains(f), "{f:?} → {:?}", e.flags());
    }
}

#[test]
fn best_effort_creates_and_reports_the_drop() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(0);
    for extra in [
        StreamFlags::FAST_SYNC,
        StreamFlags::FAST_LAUNCH,
        StreamFlags::HUGE,
    ] {
        let f = StreamFlags::DEVICE_USE_ONLY | extra;
        let e = d.create_stream(&StreamDesc::new().flags(f)).unwrap_err();
        assert!(matches!(e, Error::RejectedCombination { .. }), "{e:?}");
        let s = d.create_stream(&best_effort(f)).unwrap();
        assert_eq!(s.native_flags().unwrap(), 0x20, "{f:?}");
        assert!(s.flags().contains(StreamFlags::DEVICE_USE_ONLY));
        assert!(!s.flags().contains(extra));
        let name = extra.iter_names().next().unwrap().0;
        assert!(
            s.report().flags.dropped.iter().any(|(n, _)| *n == name),
            "{:?}",
            s.report().flags
        );
    }
}

#[test]
fn interprocess_consults_the_probed_capability() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    // A chip without IPC events: the simulator switched as `XSIM_IPC=0` before the device opens.
    // The switch is restored when the test ends (pass or fail), and the device is a context of
    // its own, probed now: the primary context may already be open in this process (another
    // test of this binary holding it, e.g. under valgrind, where tests share one process) with
    // the capabilities it was probed with.
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = Sim::get().set_ipc(None);
        }
    }
    common::setup();
    assert_eq!(Sim::get().set_ipc(Some(false)), 0);
    let _restore = Restore;
    let d = xstream_ascend::AscendDevice::new_isolated(0).expect("an isolated context");
    assert!(!d
        .info()
        .capabilities
        .contains(xstream_core::Capabilities::INTERPROCESS_EVENTS));
    for f in [
        EventFlags::INTERPROCESS,
        EventFlags::INTERPROCESS | EventFlags::DISABLE_TIMING,
    ] {
        match d.create_event(&EventDesc::new().flags(f)) {
            Err(Error::UnsupportedFlag { flag, .. }) => assert_eq!(flag, "INTERPROCESS"),
            other => panic!("strict {f:?}: {other:?}"),
        }
        let e = d
            .create_event(
                &EventDesc::new()
                    .flags(f)
                    .policy(TranslationPolicy::BestEffort),
            )
            .unwrap();
        assert!(!e.flags().contains(EventFlags::INTERPROCESS));
        assert!(
            e.report().dropped.iter().any(|(n, _)| *n == "INTERPROCESS"),
            "{:?}",
            e.report()
        );
        // What is left is an ordinary event that works.
        let s = d.create_stream(&StreamDesc::new()).unwrap();
        e.record(&s).unwrap();
        e.synchronize().unwrap();
    }
    let plain = d.create_event(&EventDesc::new()).unwrap();
    assert!(plain.report().is_exact(), "{:?}", plain.report());
}

#[test]
fn blocking_request_is_reported() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    assert!(!s.report().flags.is_exact(), "{:?}", s.report().flags);
    assert!(s
        .report()
        .flags
        .hints
        .iter()
        .any(|(n, why)| n.contains("NON_BLOCKING") && why.contains("default stream")));
    let nb = d
        .create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING))
        .unwrap();
    assert!(nb.report().flags.is_exact(), "{:?}", nb.report().flags);
}

#[test]
fn host_waits_are_real_on_cpu_schedule_and_device_use_only() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(0);
    for f in [StreamFlags::CPU_SCHEDULE, StreamFlags::DEVICE_USE_ONLY] {
        let s = d.create_stream(&StreamDesc::new().flags(f)).unwrap();
        let done = Arc::new(AtomicUsize::new(0));
        s.launch_builtin(Kernel::Delay(Duration::from_millis(200)))
            .unwrap();
        let c = done.clone();
        s.host_callback(move |r| {
            assert!(r.is_ok());
            c.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        assert_eq!(s.query().unwrap(), Status::Pending, "{f:?}");
        assert!(
            matches!(
                s.synchronize_timeout(Duration::from_millis(1)),
                Err(Error::Timeout(_))
            ),
            "{f:?}"
        );
        s.synchronize().unwrap();
        assert_eq!(
            done.load(Ordering::SeqCst),
            1,
            "{f:?}: synchronize returned before the work"
        );
        assert_eq!(s.query().unwrap(), Status::Ready);
        s.synchronize_timeout(Duration::from_secs(5)).unwrap();
    }
}

#[test]
fn host_wait_refused_by_the_runtime_names_the_flag() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(0);
    let sim = Sim::get();
    let s = d
        .create_stream(&StreamDesc::new().flags(StreamFlags::DEVICE_USE_ONLY))
        .unwrap();
    s.launch_builtin(Kernel::Delay(Duration::from_millis(50)))
        .unwrap();
    // A runtime that refuses the internal record: a clear error, never an early return.
    assert_eq!(sim.set_faults("aclrtRecordEvent:1:107000"), 0);
    let e = s.synchronize().unwrap_err();
    sim.set_faults("");
    assert!(
        matches!(&e, Error::Unsupported { what, .. } if what.contains("DEVICE_USE_ONLY")),
        "{e:?}"
    );
    s.synchronize().unwrap();
    sim.reset();
}

#[test]
fn destroy_force_cancels_only_its_own_callbacks() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(0);
    let a = d.create_stream(&StreamDesc::new()).unwrap();
    let b = d.create_stream(&StreamDesc::new()).unwrap();
    let got_a = Arc::new(Mutex::new(Vec::new()));
    let got_b = Arc::new(Mutex::new(Vec::new()));
    a.launch_builtin(Kernel::Delay(Duration::from_millis(100)))
        .unwrap();
    let g = got_a.clone();
    a.host_callback(move |r| g.lock().unwrap().push(r)).unwrap();
    b.launch_builtin(Kernel::Delay(Duration::from_millis(300)))
        .unwrap();
    let g = got_b.clone();
    b.host_callback(move |r| g.lock().unwrap().push(r)).unwrap();
    b.destroy_force().unwrap();
    a.synchronize().unwrap();
    let ra = got_a.lock().unwrap();
    assert_eq!(
        ra.len(),
        1,
        "the other stream's callback ran {} times",
        ra.len()
    );
    assert!(ra[0].is_ok(), "the other stream's callback got {:?}", ra[0]);
    let rb = got_b.lock().unwrap();
    assert!(rb.len() <= 1);
    assert!(rb
        .iter()
        .all(|r| matches!(r, Err(Error::CallbackCancelled(_)))));
}

#[test]
fn alloc_too_large_is_out_of_memory() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(0);
    for len in [usize::MAX, usize::MAX / 2 + 1] {
        let e = d.alloc(len).unwrap_err();
        assert!(matches!(e, Error::OutOfMemory { .. }), "{len}: {e:?}");
    }
    d.alloc(64).unwrap();
}

#[test]
fn captured_write_is_one_node() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(0);
    let buf = d.alloc(64).unwrap();
    let s = d
        .create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING))
        .unwrap();
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    s.write(&buf, 0, vec![7; 64]).unwrap();
    let g = s.end_capture().unwrap();
    assert_eq!(g.node_count(), 1);
    g.replay(&s).unwrap();
    let rb = s.read(&buf, 0, 64).unwrap();
    s.synchronize().unwrap();
    assert_eq!(rb.take().unwrap(), vec![7; 64]);
}

#[test]
fn creation_at_the_limit_waits_for_pending_destroys() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(0);
    let sim = Sim::get();
    // Work queued on each, so its destroy waits on the reaper after the drop.
    let (v, err) = common::fill_to_limit(&d, |s| {
        s.launch_builtin(Kernel::Delay(Duration::from_millis(100)))
            .unwrap();
    });
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err:?}");
    drop(v);
    let r = d.create_stream(&StreamDesc::new());
    sim.set_limits(0, 0);
    r.expect("creation right after dropping streams at the limit");
}

#[test]
fn priority_attribute_and_collapse() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(0);
    let s = d
        .create_stream(&StreamDesc::new().priority(Priority::Lowest))
        .unwrap();
    assert_eq!(s.priority(), 7);
    // aclrtSetStreamAttribute(ACL_STREAM_ATTR_PRIORITY) is exported by the simulator.
    s.set_attribute(StreamAttrValue::Priority(3)).unwrap();
    assert_eq!(s.priority(), 3);
    assert_eq!(
        s.attribute(StreamAttr::Priority).unwrap(),
        StreamAttrValue::Priority(3)
    );
    assert!(matches!(
        s.set_attribute(StreamAttrValue::Priority(9)),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(s.priority(), 3);
    // ACL's default is already the most urgent value: High and Highest equal Normal.
    for p in [Priority::High, Priority::Highest] {
        let h = d.create_stream(&StreamDesc::new().priority(p)).unwrap();
        assert_eq!(h.priority(), 0);
        assert_eq!(h.report().priority.collapsed_into, Some(Priority::Normal));
    }
    let n = d.create_stream(&StreamDesc::new()).unwrap();
    assert_eq!(n.report().priority.collapsed_into, None);
    assert_eq!(
        d.info().priority_range.collapsed_classes(),
        vec![Priority::High, Priority::Highest]
    );
}
