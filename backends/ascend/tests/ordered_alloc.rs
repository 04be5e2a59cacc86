//! Stream-ordered allocation emulated with events (`alloc_async` / `free_async`): reuse on the
//! freeing stream at once, on another stream only after the release events completed, flat
//! memory over many cycles, the release threshold, the cache freed with the device,
//! out-of-memory recovery and bad input. Streams are held with the simulator's hang control,
//! so every "not yet" is deterministic; live `aclrtMalloc` blocks are counted by the simulator.
mod common;

use std::time::Duration;

use common::{eventually, Sim};
use xstream_ascend::{AscendDevice, AscendStream};
use xstream_core::{
    Buffer, CaptureErrorKind, CaptureMode, Device, Error, Kernel, Stream, StreamDesc,
};

/// Serializes the tests of this file (the simulator's counters are process-wide when the tests
/// share one process, as under valgrind) and waits until the blocks of earlier tests, released
/// on the reaper thread, are gone.
fn quiet() -> std::sync::MutexGuard<'static, ()> {
    let g = common::global_lock();
    assert!(
        eventually(Duration::from_secs(60), || Sim::get().live_allocs() == 0),
        "blocks of an earlier test are still allocated"
    );
    g
}

/// What most tests here use: the lock of [`quiet`], an isolated device and two of its streams.
struct Fx {
    _g: std::sync::MutexGuard<'static, ()>,
    d: AscendDevice,
    s: AscendStream,
    t: AscendStream,
    sim: &'static Sim,
}

fn fixture() -> Fx {
    let _g = quiet();
    let d = AscendDevice::new_isolated(0).unwrap();
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let t = d.create_stream(&StreamDesc::new()).unwrap();
    Fx {
        _g,
        d,
        s,
        t,
        sim: Sim::get(),
    }
}

/// Holds `s` after its next task (released by `Sim::release_hang`).
fn hold(s: &AscendStream) {
    // SAFETY: a live stream of the simulator.
    assert_eq!(unsafe { Sim::get().hang_stream(s.as_raw().0) }, 0);
}

#[test]
fn same_stream_reuses_at_once() {
    if !common::in_sim_process() {
        return;
    }
    let Fx { _g, s, sim, .. } = fixture();
    let base = sim.live_allocs();
    hold(&s);
    let a = s.alloc_async(1000).unwrap();
    assert_eq!(a.len(), 1000);
    let addr = a.device_address();
    s.memset(&a, 0, 1000, 7).unwrap();
    s.free_async(a).unwrap();
    // The stream is held, so the free's event has not completed: only stream order allows it.
    let b = s.alloc_async(1000).unwrap();
    assert_eq!(
        b.device_address(),
        addr,
        "the block freed on this stream is reused"
    );
    assert_eq!(sim.live_allocs(), base + 1);
    // A request of the same size class (1000 and 1024 both round to 1024) reuses it too.
    s.free_async(b).unwrap();
    let c = s.alloc_async(1024).unwrap();
    assert_eq!(c.device_address(), addr);
    assert_eq!(sim.release_hang(), 0);
    s.memset(&c, 0, 1024, 3).unwrap();
    let r = s.read(&c, 0, 1024).unwrap();
    s.synchronize().unwrap();
    assert_eq!(r.take().unwrap(), vec![3; 1024]);
    s.free_async(c).unwrap();
    s.synchronize().unwrap();
}

#[test]
fn other_stream_reuses_only_after_the_event() {
    if !common::in_sim_process() {
        return;
    }
    let Fx { _g, s, t, sim, .. } = fixture();
    let base = sim.live_allocs();
    hold(&s);
    let x = s.alloc_async(4096).unwrap();
    let addr = x.device_address();
    s.memset(&x, 0, 4096, 1).unwrap();
    s.free_async(x).unwrap();
    let y = t.alloc_async(4096).unwrap();
    assert_ne!(
        y.device_address(),
        addr,
        "reused while the freeing stream still runs"
    );
    assert_eq!(sim.live_allocs(), base + 2);
    assert_eq!(sim.release_hang(), 0);
    s.synchronize().unwrap();
    let z = t.alloc_async(4096).unwrap();
    assert_eq!(z.device_address(), addr, "completed block not reused");
    assert_eq!(sim.live_allocs(), base + 2);
    t.free_async(y).unwrap();
    t.free_async(z).unwrap();
    t.synchronize().unwrap();
}

#[test]
fn use_on_another_stream_orders_the_free() {
    if !common::in_sim_process() {
        return;
    }
    let Fx { _g, s, t, sim, .. } = fixture();
    let x = s.alloc_async(4096).unwrap();
    let addr = x.device_address();
    s.synchronize().unwrap();
    // `t` uses the buffer and is held; the free on `s` must wait for `t` as well.
    hold(&t);
    t.memset(&x, 0, 4096, 2).unwrap();
    s.free_async(x).unwrap();
    let y = s.alloc_async(4096).unwrap();
    assert_ne!(
        y.device_address(),
        addr,
        "reused on the freeing stream while another stream that used it still runs"
    );
    assert_eq!(sim.release_hang(), 0);
    t.synchronize().unwrap();
    s.synchronize().unwrap();
    let z = s.alloc_async(4096).unwrap();
    assert_eq!(z.device_address(), addr);
    s.free_async(y).unwrap();
    s.free_async(z).unwrap();
    s.synchronize().unwrap();
}

#[test]
fn memory_stays_flat_over_many_cycles() {
    if !common::in_sim_process() {
        return;
    }
    let Fx { _g, s, t, sim, .. } = fixture();
    let cycle = |i: usize| {
        let a = s.alloc_async(4096).unwrap();
        let b = s.alloc_async(3 << 20).unwrap();
        s.memset(&a, 0, 16, i as u8).unwrap();
        let used_on_t = i.is_multiple_of(64);
        if used_on_t {
            // Now and then another stream uses one (its release event is then waited for
            // before the block is reused; the wait keeps the count deterministic).
            t.memset(&b, 0, 16, 1).unwrap();
        }
        s.free_async(a).unwrap();
        s.free_async(b).unwrap();
        if used_on_t {
            t.synchronize().unwrap();
        }
    };
    for i in 0..256 {
        cycle(i);
    }
    s.synchronize().unwrap();
    t.synchronize().unwrap();
    let (allocs, events) = (sim.live_allocs(), sim.live_events());
    for i in 0..100_000 {
        cycle(i);
    }
    s.synchronize().unwrap();
    t.synchronize().unwrap();
    assert_eq!(sim.live_allocs(), allocs, "aclrtMalloc blocks grew");
    assert_eq!(sim.live_events(), events, "internal events grew");
    assert!(allocs <= 4, "{allocs} blocks for two buffers in flight");
}

#[test]
fn release_threshold_and_trim() {
    if !common::in_sim_process() {
        return;
    }
    let Fx { _g, d, s, sim, .. } = fixture();
    assert_eq!(
        d.pool_release_threshold(),
        xstream_ascend::blocks::DEFAULT_RELEASE_THRESHOLD
    );
    let base = sim.live_allocs();
    let events = sim.live_events();
    const K: usize = 512 << 10;
    let bufs: Vec<_> = (0..4).map(|_| s.alloc_async(K).unwrap()).collect();
    for b in bufs {
        s.free_async(b).unwrap();
    }
    s.synchronize().unwrap();
    assert_eq!(d.pool_cached(), (4 * K as u64, 4));
    assert_eq!(sim.live_allocs(), base + 4);
    // Lowering the threshold trims the completed blocks at once.
    d.set_pool_release_threshold(2 * K as u64).unwrap();
    assert_eq!(d.pool_cached(), (2 * K as u64, 2));
    assert_eq!(sim.live_allocs(), base + 2);
    // A block whose stream still runs is never freed by a trim.
    hold(&s);
    let a = s.alloc_async(K).unwrap();
    s.memset(&a, 0, K, 0).unwrap();
    s.free_async(a).unwrap();
    assert_eq!(d.trim_pool(0).unwrap(), K as u64);
    assert_eq!(d.pool_cached(), (K as u64, 1));
    assert_eq!(sim.live_allocs(), base + 1);
    assert_eq!(sim.release_hang(), 0);
    s.synchronize().unwrap();
    assert_eq!(d.trim_pool(0).unwrap(), K as u64);
    assert_eq!(d.pool_cached(), (0, 0));
    assert_eq!(sim.live_allocs(), base);
    assert_eq!(
        sim.live_events(),
        events,
        "a full trim leaves no internal event"
    );
    // Threshold 0: every completed block goes back at the next free.
    d.set_pool_release_threshold(0).unwrap();
    let a = s.alloc_async(K).unwrap();
    s.free_async(a).unwrap();
    s.synchronize().unwrap();
    let b = s.alloc_async(4096).unwrap();
    s.free_async(b).unwrap();
    assert!(sim.live_allocs() <= base + 1, "{}", sim.live_allocs());
    s.synchronize().unwrap();
}

#[test]
fn device_drop_frees_the_cache() {
    if !common::in_sim_process() {
        return;
    }
    let _g = quiet();
    let sim = Sim::get();
    let d = AscendDevice::new_isolated(0).unwrap();
    let base = sim.live_allocs();
    let events = sim.live_events();
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let t = d.create_stream(&StreamDesc::new()).unwrap();
    let a = s.alloc_async(4096).unwrap();
    let b = s.alloc_async(8 << 20).unwrap();
    t.memset(&b, 0, 16, 1).unwrap();
    let kept = s.alloc_async(100).unwrap();
    s.free_async(a).unwrap();
    s.free_async(b).unwrap();
    assert_eq!(sim.live_allocs(), base + 3);
    assert_eq!(d.pool_cached().1, 2);
    drop((s, t, d));
    // Dropped without free_async: freed the conservative way.
    drop(kept);
    // The streams and the device are released on the reaper thread.
    assert!(
        eventually(Duration::from_secs(20), || sim.live_allocs() == base),
        "{} blocks left",
        sim.live_allocs() - base
    );
    assert!(eventually(Duration::from_secs(20), || sim.live_events() <= events));
}

#[test]
fn out_of_memory_frees_completed_blocks_and_retries() {
    if !common::in_sim_process() {
        return;
    }
    let Fx { _g, d, s, sim, .. } = fixture();
    let a = s.alloc_async(4096).unwrap();
    s.free_async(a).unwrap();
    s.synchronize().unwrap();
    let base = sim.live_allocs();
    let frees = sim.call_count("aclrtFree");
    // The next aclrtMalloc fails with ACL_ERROR_RT_MEMORY_ALLOCATION; the cached block (of
    // another size class, so not reusable) is freed and the retry succeeds.
    assert_eq!(sim.set_faults("aclrtMalloc:1:207001"), 0);
    let b = s.alloc_async(8192).unwrap();
    assert_eq!(sim.call_count("aclrtFree"), frees + 1);
    assert_eq!(sim.live_allocs(), base);
    assert_eq!(d.pool_cached(), (0, 0));
    s.free_async(b).unwrap();
    s.synchronize().unwrap();
    // Every aclrtMalloc fails: a clear out-of-memory error, the cache emptied.
    assert_eq!(sim.set_faults("aclrtMalloc:*:207001"), 0);
    let e = s.alloc_async(1 << 20).unwrap_err();
    assert!(e.is_out_of_memory(), "{e:?}");
    assert_eq!(
        e.native().map(|n| n.code),
        Some(207_001),
        "the code is kept"
    );
    assert_eq!(d.pool_cached(), (0, 0));
    assert_eq!(sim.set_faults(""), 0);
    let c = s.alloc_async(1 << 20).unwrap();
    s.free_async(c).unwrap();
    s.synchronize().unwrap();
}

#[test]
fn bad_input_is_a_clear_error() {
    if !common::in_sim_process() {
        return;
    }
    let Fx { _g, s, .. } = fixture();
    // Zero bytes: a zero-length buffer (docs/semantics.md).
    let empty = s.alloc_async(0).expect("zero-length buffer");
    assert_eq!(xstream_core::Buffer::len(&empty), 0);
    s.free_async(empty)
        .expect("free_async of a zero-length buffer");
    assert!(matches!(
        s.alloc_async(usize::MAX),
        Err(Error::OutOfMemory { .. })
    ));
    // A buffer of another device.
    let other = common::device(1);
    let o = other.default_stream().unwrap().alloc_async(64).unwrap();
    assert!(matches!(s.free_async(o), Err(Error::WrongDevice(_))));
    // A clone used after the free, and freed again.
    let a = s.alloc_async(64).unwrap();
    let clone = a.clone();
    s.free_async(a).unwrap();
    assert!(matches!(
        s.memset(&clone, 0, 64, 1),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.free_async(clone),
        Err(Error::InvalidArgument(_))
    ));
    s.synchronize().unwrap();
    // During capture: refused (and the capture invalidated); ACL has no allocation nodes.
    let b = s.alloc_async(64).unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    assert!(matches!(s.alloc_async(64), Err(Error::Capture { .. })));
    assert!(s.end_capture().is_err());
    s.begin_capture(CaptureMode::Global).unwrap();
    // The refused buffer is dropped: freed the conservative way, no leak.
    assert!(matches!(s.free_async(b), Err(Error::Capture { .. })));
    assert!(s.end_capture().is_err());
}

#[test]
fn stream_ordered_buffer_in_a_capture_invalidates_it() {
    if !common::in_sim_process() {
        return;
    }
    let Fx { _g, d, s, .. } = fixture();
    let a = s.alloc_async(4096).unwrap();
    s.synchronize().unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    assert!(matches!(
        s.memset(&a, 0, 4096, 5),
        Err(Error::Capture { .. })
    ));
    let e = s.end_capture().unwrap_err();
    assert!(
        matches!(
            e,
            Error::Capture {
                kind: CaptureErrorKind::Invalidated,
                ..
            }
        ),
        "{e}"
    );
    // Outside the capture the buffer is usable and goes back to the cache.
    s.memset(&a, 0, 4096, 5).unwrap();
    s.free_async(a).unwrap();
    s.synchronize().unwrap();
    assert_eq!(d.pool_cached(), (4096, 1));
}

#[test]
fn untracked_frees_are_conservative() {
    if !common::in_sim_process() {
        return;
    }
    let Fx { _g, d, s, sim, .. } = fixture();
    let base = sim.live_allocs();
    // Any number of other streams is tracked (no slot limit): with six other users the block
    // is still cached, ordered by one release event per stream, and no device synchronize.
    let others: Vec<_> = (0..6)
        .map(|_| d.create_stream(&StreamDesc::new()).unwrap())
        .collect();
    let a = s.alloc_async(4096).unwrap();
    for o in &others {
        o.memset(&a, 0, 16, 1).unwrap();
    }
    s.free_async(a).unwrap();
    assert_eq!(d.pool_cached(), (4096, 1));
    // Reused once every user's release event completed.
    for o in &others {
        o.synchronize().unwrap();
    }
    s.synchronize().unwrap();
    let a2 = s.alloc_async(4096).unwrap();
    assert_eq!(d.pool_cached(), (0, 0), "the cached block was not reused");
    s.free_async(a2).unwrap();
    assert_eq!(d.pool_cached(), (4096, 1));
    // A stream that used the buffer was dropped before the free: freed after a device
    // synchronize, never cached.
    let b = s.alloc_async(4096).unwrap();
    let gone = d.create_stream(&StreamDesc::new()).unwrap();
    gone.memset(&b, 0, 16, 1).unwrap();
    drop(gone);
    s.free_async(b).unwrap();
    // `b` took the cached block; freed untracked, it is not cached again.
    assert_eq!(d.pool_cached(), (0, 0), "the untracked block was cached");
    assert!(
        eventually(Duration::from_secs(20), || sim.live_allocs() == base),
        "the untracked block was not freed"
    );
    s.synchronize().unwrap();
}

/// The data-level form of the cross-stream rule: a copy on another stream, held until after
/// the free, still reads the freed buffer's bytes, whatever the freeing stream allocates and
/// writes meanwhile.
#[test]
fn a_held_reader_on_another_stream_sees_the_freed_bytes() {
    if !common::in_sim_process() {
        return;
    }
    let Fx { _g, d, s, t, sim } = fixture();
    for round in 1..=8u8 {
        let x = s.alloc_async(256).unwrap();
        s.memset(&x, 0, 256, round).unwrap();
        s.synchronize().unwrap();
        let y = d.alloc(256).unwrap();
        // Held after a short kernel: the copy waits behind the hold.
        hold(&t);
        t.launch_builtin(Kernel::Delay(Duration::from_micros(1)))
            .unwrap();
        t.copy(&x, 0, &y, 0, 256).unwrap();
        s.free_async(x).unwrap();
        let z = s.alloc_async(256).unwrap();
        s.memset(&z, 0, 256, 0xFF).unwrap();
        s.synchronize().unwrap();
        assert_eq!(sim.release_hang(), 0);
        let r = t.read(&y, 0, 256).unwrap();
        t.synchronize().unwrap();
        assert_eq!(r.take().unwrap(), vec![round; 256], "round {round}");
        s.free_async(z).unwrap();
    }
    s.synchronize().unwrap();
}

/// Out of memory while the cached blocks still run: the device is synchronized, the blocks
/// freed and the allocation retried (the outcome is the same if the kernel ended earlier and
/// the first stage freed the block).
#[test]
fn out_of_memory_with_running_blocks_synchronizes_and_retries() {
    if !common::in_sim_process() {
        return;
    }
    let Fx { _g, d, s, t, sim } = fixture();
    let base = sim.live_allocs();
    s.launch_builtin(Kernel::Delay(Duration::from_millis(500)))
        .unwrap();
    let x = s.alloc_async(4096).unwrap();
    s.memset(&x, 0, 4096, 1).unwrap();
    s.free_async(x).unwrap();
    assert_eq!(d.pool_cached(), (4096, 1));
    assert_eq!(sim.set_faults("aclrtMalloc:1:207001"), 0);
    let y = t.alloc_async(8192).unwrap();
    assert_eq!(sim.set_faults(""), 0);
    assert_eq!(d.pool_cached(), (0, 0));
    assert_eq!(sim.live_allocs(), base + 1);
    t.free_async(y).unwrap();
    t.synchronize().unwrap();
    s.synchronize().unwrap();
}

/// A stream-ordered buffer dropped without `free_async`, while its allocating stream is alive,
/// is released in that stream's order (release events on it and on the other streams that
/// used it, then the block cache), with no device synchronize; the block is reused once those
/// events completed.
#[test]
fn drop_without_free_async_is_stream_ordered() {
    if !common::in_sim_process() {
        return;
    }
    let Fx { _g, d, s, t, sim } = fixture();
    let a = s.alloc_async(4096).unwrap();
    t.memset(&a, 0, 16, 1).unwrap();
    let syncs = sim.call_count("aclrtSynchronizeDevice");
    let frees = sim.call_count("aclrtFree");
    drop(a);
    assert!(
        eventually(Duration::from_secs(20), || d.pool_cached() == (4096, 1)),
        "the dropped block did not reach the cache: {:?}",
        d.pool_cached()
    );
    assert_eq!(
        sim.call_count("aclrtSynchronizeDevice"),
        syncs,
        "dropping a stream-ordered buffer synchronized the device"
    );
    assert_eq!(
        sim.call_count("aclrtFree"),
        frees,
        "the block was freed, not cached"
    );
    t.synchronize().unwrap();
    s.synchronize().unwrap();
    let b = s.alloc_async(4096).unwrap();
    assert_eq!(d.pool_cached(), (0, 0), "the cached block was not reused");
    s.free_async(b).unwrap();
    s.synchronize().unwrap();
}
