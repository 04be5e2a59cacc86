//! Stream behaviour of the host backend, proven by buffer contents and orders (gates hold
//! streams where a test needs work to be pending; no wall-clock bounds).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{dev, nb, Gate};
use xstream_core::{
    Backend, Buffer, CaptureErrorKind, Device, Error, EventDesc, FailureMode, HeapAllocator,
    Kernel, Ownership, PoolConfig, Priority, PriorityClass, Status, Stream, StreamAttr,
    StreamAttrValue, StreamDesc, StreamFlags, StreamPool, SyncPolicy, TranslationPolicy,
};
use xstream_core::{Event, StreamFlags as F};
use xstream_host::{HostBackend, HostDevice, HostStream};

#[test]
#[cfg_attr(
    miri,
    ignore = "many threads held by gates; too slow under Miri (run natively by cargo test)"
)]
fn events_order_two_streams() {
    let d = dev();
    let (a, b, c) = (nb(&d), nb(&d), nb(&d));
    let src = d.alloc(64).unwrap();
    let dst = d.alloc(64).unwrap();
    let unordered = d.alloc(64).unwrap();
    let e = d.create_event(&EventDesc::new()).unwrap();
    let gate = Gate::hold(&a);
    a.memset(&src, 0, 64, 7).unwrap();
    e.record(&a).unwrap();
    b.wait_event(&e).unwrap();
    drop(e); // the wait does not need the event any more
    b.copy(&src, 0, &dst, 0, 64).unwrap();
    let rb = b.read(&dst, 0, 64).unwrap();
    // Control: a stream without the wait copies before A's memset.
    c.copy(&src, 0, &unordered, 0, 64).unwrap();
    c.synchronize().unwrap();
    assert_eq!(unordered.snapshot(), vec![0; 64]);
    gate.open();
    b.synchronize().unwrap();
    assert!(gate.released());
    assert_eq!(rb.take().unwrap(), vec![7; 64]);
    assert!(matches!(rb.take(), Err(Error::NotReady)));
}

#[test]
fn write_read_copy_round_trip_and_bounds() {
    let d = dev();
    let s = nb(&d);
    let a = d.alloc(16).unwrap();
    let b = d.alloc(16).unwrap();
    assert_ne!(a.device_address(), b.device_address());
    assert_eq!(a.len(), 16);
    s.write(&a, 4, vec![1, 2, 3, 4]).unwrap();
    s.copy(&a, 4, &b, 0, 4).unwrap();
    s.copy(&b, 0, &b, 2, 4).unwrap(); // overlapping, same buffer
    let r = s.read(&b, 0, 8).unwrap();
    s.synchronize().unwrap();
    assert_eq!(r.take().unwrap(), vec![1, 2, 1, 2, 3, 4, 0, 0]);
    let empty = d.alloc(0).unwrap();
    assert_eq!(empty.len(), 0);
    s.memset(&empty, 0, 0, 1).unwrap();
    assert!(matches!(
        s.memset(&a, 10, 7, 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.write(&a, 15, vec![0; 2]),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.read(&a, usize::MAX, 2),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.copy(&a, 0, &b, 9, 8),
        Err(Error::InvalidArgument(_))
    ));
    let odd = d.alloc(6).unwrap();
    assert!(matches!(
        s.launch_builtin(Kernel::Lcg {
            buf: &odd,
            rounds: 1
        }),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn lcg_kernel_equals_reference() {
    let d = dev();
    let s = nb(&d);
    let data: Vec<u8> = (0..=255).collect();
    let buf = d.alloc(256).unwrap();
    s.write(&buf, 0, data.clone()).unwrap();
    s.launch_builtin(Kernel::Lcg {
        buf: &buf,
        rounds: 9,
    })
    .unwrap();
    let r = s.read(&buf, 0, 256).unwrap();
    s.synchronize().unwrap();
    let mut want = data;
    xstream_core::lcg_reference(&mut want, 9);
    assert_eq!(r.take().unwrap(), want);
}

#[test]
fn sync_timeout_then_recovery() {
    let d = dev();
    let s = nb(&d);
    let gate = Gate::hold(&s);
    assert!(matches!(
        s.synchronize_timeout(Duration::from_millis(10)),
        Err(Error::Timeout(t)) if t == Duration::from_millis(10)
    ));
    assert!(matches!(
        s.synchronize_timeout(Duration::ZERO),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(s.query().unwrap(), Status::Pending);
    gate.open();
    s.synchronize().unwrap();
    assert!(
        gate.released(),
        "the gate gave up: synchronize did not wait for it"
    );
    assert_eq!(s.query().unwrap(), Status::Ready);
    s.synchronize_timeout(Duration::from_millis(10)).unwrap();
}

#[test]
fn fast_sync_and_spin_policy_wait_correctly() {
    let d = dev();
    let s = d
        .create_stream(&StreamDesc::new().flags(F::NON_BLOCKING | F::FAST_SYNC))
        .unwrap();
    assert!(s.flags().contains(F::FAST_SYNC));
    assert_ne!(s.native_flags() & xstream_host::conv::STREAM_SPIN_SYNC, 0);
    let buf = d.alloc(8).unwrap();
    s.launch_builtin(Kernel::Delay(Duration::from_millis(20)))
        .unwrap();
    s.memset(&buf, 0, 8, 3).unwrap();
    s.synchronize().unwrap();
    assert_eq!(
        buf.snapshot(),
        vec![3; 8],
        "spin synchronize returned early"
    );
    let gate = Gate::hold(&s);
    assert!(matches!(
        s.synchronize_timeout(Duration::from_millis(5)),
        Err(Error::Timeout(_))
    ));
    gate.open();
    s.synchronize().unwrap();
    assert!(gate.released());
    let y = nb(&d);
    y.set_attribute(StreamAttrValue::SyncPolicy(SyncPolicy::Yield))
        .unwrap();
    y.launch_builtin(Kernel::Delay(Duration::from_millis(10)))
        .unwrap();
    y.memset(&buf, 0, 8, 4).unwrap();
    y.synchronize().unwrap();
    assert_eq!(buf.snapshot(), vec![4; 8]);
}

#[test]
fn query_pending_then_ready() {
    let d = dev();
    let s = nb(&d);
    assert_eq!(s.query().unwrap(), Status::Ready);
    let gate = Gate::hold(&s);
    assert_eq!(s.query().unwrap(), Status::Pending);
    gate.open();
    s.synchronize().unwrap();
    assert!(gate.released());
    assert_eq!(s.query().unwrap(), Status::Ready);
    assert_eq!(s.enqueued_count(), s.completed_count());
}

#[test]
#[cfg_attr(
    miri,
    ignore = "many threads held by gates; too slow under Miri (run natively by cargo test)"
)]
fn default_stream_rule() {
    let d = dev();
    let def = d.default_stream().unwrap();
    assert_eq!(def.ownership(), Ownership::Default);
    let blocking = d.create_stream(&StreamDesc::new()).unwrap();
    let nonblocking = nb(&d);
    let (buf, copy) = (d.alloc(4).unwrap(), d.alloc(4).unwrap());

    // With the default stream held: a non-blocking stream's work completes (a stream that
    // waited would keep its synchronize until the gate gave up); a blocking stream's copy
    // waits, so it sees the default stream's bytes written after the gate.
    let gate = Gate::hold(&def);
    def.memset(&buf, 0, 4, 5).unwrap();
    nonblocking.memset(&copy, 0, 4, 1).unwrap();
    nonblocking.synchronize().unwrap();
    assert_eq!(copy.snapshot(), vec![1; 4]);
    blocking.copy(&buf, 0, &copy, 0, 4).unwrap();
    assert_eq!(blocking.query().unwrap(), Status::Pending);
    gate.open();
    blocking.synchronize().unwrap();
    assert!(
        gate.released(),
        "the non-blocking stream waited for the default stream"
    );
    assert_eq!(
        copy.snapshot(),
        vec![5; 4],
        "blocking copy ran before the default stream's work"
    );

    // The default stream's new work waits for every blocking stream's earlier work, and not
    // for non-blocking streams.
    let held_blocking = Gate::hold(&blocking);
    let held_nonblocking = Gate::hold(&nonblocking);
    blocking.memset(&buf, 0, 4, 6).unwrap();
    def.copy(&buf, 0, &copy, 0, 4).unwrap();
    assert_eq!(def.query().unwrap(), Status::Pending);
    held_blocking.open();
    def.synchronize().unwrap();
    assert_eq!(
        copy.snapshot(),
        vec![6; 4],
        "default stream did not wait for a blocking one"
    );
    held_nonblocking.open();
    nonblocking.synchronize().unwrap();
    assert!(held_blocking.released());
    assert!(
        held_nonblocking.released(),
        "the default stream waited for a NON_BLOCKING stream"
    );
}

#[test]
fn device_synchronize_covers_every_stream_and_dropped_ones() {
    let d = dev();
    let flag = Arc::new(AtomicUsize::new(0));
    let s = nb(&d);
    let gate = Gate::hold(&s);
    let f2 = flag.clone();
    s.host_callback(move |r| {
        assert!(r.is_ok());
        f2.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    // The gate opens only after drop returns: a blocking drop would make the gate give up.
    drop(s);
    assert_eq!(flag.load(Ordering::SeqCst), 0);
    gate.open();
    d.synchronize().unwrap();
    assert!(gate.released(), "drop blocked until the work gave up");
    assert_eq!(
        flag.load(Ordering::SeqCst),
        1,
        "work of a dropped stream still ran"
    );
}

#[test]
fn ids_names_and_shared_contexts() {
    let d = HostBackend::open(0).unwrap();
    let d2 = HostBackend::open(0).unwrap();
    assert!(d.same_context(&d2));
    assert!(!d.same_context(&HostDevice::new_isolated(0)));
    assert_eq!(d.info().name, "host-cpu-0");
    assert_eq!(d.info().max_streams, None);
    assert!(d
        .info()
        .capabilities
        .contains(xstream_core::Capabilities::LEGACY_DEFAULT_STREAM));
    assert!(!d
        .info()
        .capabilities
        .contains(xstream_core::Capabilities::ALLOCATOR_REGISTRY));
    assert!(HostBackend::is_available());
    assert!(matches!(
        HostBackend::open(1000),
        Err(Error::InvalidArgument(_))
    ));
    let a = d.create_stream(&StreamDesc::new().name("alpha")).unwrap();
    let b = d.create_stream(&StreamDesc::new()).unwrap();
    assert_eq!(a.name(), Some("alpha"));
    assert_eq!(b.name(), None);
    assert!(b.id() > a.id());
    assert!(
        a.flags().contains(F::CPU_SCHEDULE),
        "inherent flag reported"
    );
    assert_eq!(HostBackend::flag_table().check_total(), Ok(()));
}

#[test]
fn priority_clamp_reported_or_refused() {
    let d = dev();
    let r = d.info().priority_range;
    assert_eq!((r.least, r.greatest, r.default), (0, -5, 0));
    let s = d
        .create_stream(
            &StreamDesc::new()
                .priority(Priority::Native(-100))
                .policy(TranslationPolicy::BestEffort),
        )
        .unwrap();
    assert_eq!(s.priority(), -5);
    assert_eq!(s.report().priority.clamped_from, Some(-100));
    assert!(matches!(
        d.create_stream(&StreamDesc::new().priority(Priority::Native(-100))),
        Err(Error::InvalidArgument(_))
    ));
    let h = d
        .create_stream(&StreamDesc::new().priority(Priority::Highest))
        .unwrap();
    assert_eq!(h.priority(), -5);
    assert_eq!(h.report().priority.clamped_from, None);
    assert_eq!(
        h.attribute(StreamAttr::Priority).unwrap(),
        StreamAttrValue::Priority(-5)
    );
    // Flags: strict refuses an unsupported flag, best effort reports it dropped.
    assert!(matches!(
        d.create_stream(&StreamDesc::new().flags(F::DEVICE_USE_ONLY)),
        Err(Error::UnsupportedFlag {
            flag: "DEVICE_USE_ONLY",
            ..
        })
    ));
    let s = d
        .create_stream(
            &StreamDesc::new()
                .flags(F::DEVICE_USE_ONLY | F::HUGE)
                .policy(TranslationPolicy::BestEffort),
        )
        .unwrap();
    assert_eq!(s.report().flags.dropped.len(), 1);
    assert_eq!(s.report().flags.hints.len(), 1);
    assert!(!s.flags().contains(F::DEVICE_USE_ONLY));
}

#[test]
fn attributes() {
    let d = dev();
    let s = nb(&d);
    let t = nb(&d);
    assert_eq!(
        s.attribute(StreamAttr::SyncPolicy).unwrap(),
        StreamAttrValue::SyncPolicy(SyncPolicy::Auto)
    );
    s.set_attribute(StreamAttrValue::Priority(-3)).unwrap();
    assert_eq!(s.priority(), -3);
    assert!(matches!(
        s.set_attribute(StreamAttrValue::Priority(4)),
        Err(Error::InvalidArgument(_))
    ));
    s.set_attribute(StreamAttrValue::SyncPolicy(SyncPolicy::Spin))
        .unwrap();
    s.set_attribute(StreamAttrValue::FailureMode(FailureMode::Stop))
        .unwrap();
    s.set_attribute(StreamAttrValue::UserTag(42)).unwrap();
    assert_eq!(
        s.attribute(StreamAttr::UserTag).unwrap(),
        StreamAttrValue::UserTag(42)
    );
    assert!(matches!(
        s.attribute(StreamAttr::AccessPolicyWindow),
        Err(Error::Unsupported { .. })
    ));
    assert!(matches!(
        s.set_attribute(StreamAttrValue::AccessPolicyWindow(
            xstream_core::AccessPolicyWindow {
                base: 0,
                bytes: 0,
                hit_ratio: 0.5,
                hit: xstream_core::AccessProperty::Persisting,
                miss: xstream_core::AccessProperty::Streaming,
            }
        )),
        Err(Error::Unsupported { .. })
    ));
    t.copy_attributes_from(&s).unwrap();
    assert_eq!(t.priority(), -3);
    assert_eq!(
        t.attribute(StreamAttr::FailureMode).unwrap(),
        StreamAttrValue::FailureMode(FailureMode::Stop)
    );
    assert_eq!(
        t.attribute(StreamAttr::UserTag).unwrap(),
        StreamAttrValue::UserTag(42)
    );
    s.launch_builtin(Kernel::Delay(Duration::from_millis(5)))
        .unwrap();
    s.synchronize().unwrap(); // spins
}

#[test]
fn raw_round_trip_and_borrowed_refusals() {
    let d = dev();
    let s = nb(&d);
    let buf = d.alloc(4).unwrap();
    #[allow(unsafe_code)]
    // SAFETY: `s` outlives the borrowed view and is not dropped while it lives.
    let b = unsafe { HostStream::borrow_raw(&d, s.as_raw()) }.unwrap();
    assert_eq!(b.id(), s.id());
    assert_eq!(b.ownership(), Ownership::Borrowed);
    b.launch_builtin(Kernel::Delay(Duration::from_millis(30)))
        .unwrap();
    b.memset(&buf, 0, 4, 5).unwrap();
    assert_eq!(
        s.query().unwrap(),
        Status::Pending,
        "one queue behind both handles"
    );
    s.synchronize().unwrap();
    assert_eq!(buf.snapshot(), vec![5; 4]);
    assert!(matches!(
        b.set_attribute(StreamAttrValue::UserTag(1)),
        Err(Error::NotOwned {
            kind: xstream_core::NotOwnedKind::Borrowed,
            ..
        })
    ));
    assert!(matches!(b.set_allocator(None), Err(Error::NotOwned { .. })));
    assert!(matches!(
        b.begin_capture(Default::default()),
        Err(Error::NotOwned { .. })
    ));
    drop(b);
    s.memset(&buf, 0, 4, 6).unwrap(); // dropping a borrowed view destroys nothing
    s.synchronize().unwrap();
    assert_eq!(buf.snapshot(), vec![6; 4]);
    #[allow(unsafe_code)]
    // SAFETY: an unknown id is refused before anything is built.
    let r = unsafe { HostStream::borrow_raw(&d, u64::MAX) };
    assert!(matches!(r, Err(Error::InvalidArgument(_))));
    let def = d.default_stream().unwrap();
    assert!(matches!(
        def.begin_capture(Default::default()),
        Err(Error::Capture {
            kind: CaptureErrorKind::NotCapturable,
            ..
        })
    ));
}

#[test]
fn allocator_slot() {
    let d = dev();
    let s = nb(&d);
    assert!(s.allocator().unwrap().is_none());
    let a = HeapAllocator::new();
    s.set_allocator(Some(a.clone())).unwrap();
    let got = s.allocator().unwrap().unwrap();
    let blk = got.alloc(32).unwrap();
    assert_eq!(a.live_blocks(), 1);
    got.free(blk);
    assert_eq!(a.live_blocks(), 0);
    s.set_allocator(None).unwrap();
    assert!(s.allocator().unwrap().is_none());
}

#[test]
fn pool_round_robin_and_exclusive_leases() {
    let d = dev();
    let pool = StreamPool::<HostBackend>::new(
        d,
        PoolConfig {
            per_class: [1, 2, 1],
            flags: StreamFlags::NON_BLOCKING,
        },
    )
    .unwrap();
    let ids: Vec<u64> = (0..4)
        .map(|_| pool.get(PriorityClass::Normal).unwrap().id())
        .collect();
    assert_ne!(ids[0], ids[1]);
    assert_eq!(ids[0], ids[2]);
    assert_eq!(ids[1], ids[3]);
    let hi = pool.get(PriorityClass::High).unwrap();
    assert_eq!(hi.priority(), -5);
    assert_eq!(pool.get(PriorityClass::Low).unwrap().priority(), 0);
    let l1 = pool.lease(PriorityClass::Normal).unwrap();
    let l2 = pool.lease(PriorityClass::Normal).unwrap();
    assert_ne!(l1.id(), l2.id());
    assert!(!ids.contains(&l1.id()) && !ids.contains(&l2.id()));
    let id1 = l1.id();
    l1.launch_builtin(Kernel::Delay(Duration::from_millis(5)))
        .unwrap();
    drop(l1);
    let l3 = pool.lease(PriorityClass::Normal).unwrap();
    assert_eq!(l3.id(), id1, "a returned lease is reused");
    l3.synchronize().unwrap();
    assert_eq!(pool.created(), 2 + 1 + 1 + 2);
}

#[test]
fn completion_futures() {
    let d = dev();
    let s = nb(&d);
    let gate = Gate::hold(&s);
    let c = s.completed().unwrap();
    assert!(!c.is_done(), "stream future done while the stream is held");
    gate.open();
    c.wait().unwrap();
    assert!(gate.released());

    let e = d.create_event(&EventDesc::new()).unwrap();
    xstream_core::block_on(e.completed().unwrap()).unwrap(); // never recorded
    let gate = Gate::hold(&s);
    e.record(&s).unwrap();
    let c = e.completed().unwrap();
    assert!(!c.is_done(), "event future done while its record is held");
    gate.open();
    xstream_core::block_on(c).unwrap();
    assert!(gate.released());
    assert_eq!(e.query().unwrap(), Status::Ready);
}
