//! Per-operation costs of the Ascend backend over the ACL runtime simulator, side by side with
//! the raw simulator calls it wraps (function pointers taken with libloading from the same
//! `libascendcl.so`, on the same device context, in the same run).
//!
//! Groups: `ascend_sim/xstream` (the generic bodies of `xstream_benches::stream_ops`, the same
//! code the host and GPU benches run) and `ascend_sim/raw` (the same operation names, each the
//! bare ACL call sequence). Build the simulator first for an optimised one:
//! `cargo build --release -p xstream-ascend-sim` (otherwise this builds it).
// criterion_group! generates undocumented public functions.
#![allow(missing_docs)]
#![allow(unsafe_code)]
// The raw ACL calls are many one-liners with one safety argument, stated once where they start
// ("SAFETY (every raw call): ..."): live handles of the context current on this thread and
// out-pointers to live locals.
#![allow(clippy::undocumented_unsafe_blocks)]

mod common;

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use xstream_ascend::{AscendBackend, AscendDevice};
use xstream_core::Backend;

use common::{RawAcl, RawReporter, ACL_CALLBACK_BLOCK};

fn device() -> AscendDevice {
    common::setup();
    AscendBackend::open(0).expect("open the simulated Ascend device")
}

fn xstream(c: &mut Criterion) {
    let dev = device();
    xstream_benches::stream_ops::<AscendBackend>(c, "ascend_sim/xstream", &dev);
}

unsafe extern "C" fn noop(_: *mut c_void) {}

unsafe extern "C" fn set_flag(p: *mut c_void) {
    // SAFETY: `p` is the `AtomicBool` the launcher spins on; it outlives the callback.
    unsafe { &*p.cast::<AtomicBool>() }.store(true, Ordering::Release);
}

struct Waiter {
    done: AtomicBool,
    thread: std::thread::Thread,
}

unsafe extern "C" fn wake(p: *mut c_void) {
    // SAFETY: `p` is the `Waiter` the launcher parks on until `done`; it outlives the callback.
    let w = unsafe { &*p.cast::<Waiter>() };
    // Clone the handle first: once `done` is set the launcher may return and free `w`.
    let th = w.thread.clone();
    w.done.store(true, Ordering::Release);
    th.unpark();
}

fn ok(rc: i32, what: &str) {
    assert_eq!(rc, 0, "{what} failed");
}

fn raw(c: &mut Criterion) {
    let dev = device();
    let t = RawAcl::get();
    // ACL contexts are per thread: make the device's context current on the bench thread.
    dev.bind().expect("bind the device context");
    let ctx = dev.context().0;
    let mut g = xstream_benches::short_group(c, "ascend_sim/raw");
    g.bench_function("stream_create_destroy", |b| {
        b.iter(|| {
            let s = t.stream();
            // SAFETY: a stream created just above, idle.
            ok(unsafe { (t.destroy_stream)(s) }, "aclrtDestroyStream");
        })
    });
    g.bench_function("event_create_destroy", |b| {
        b.iter(|| {
            let e = t.event();
            // SAFETY: an event created just above.
            ok(unsafe { (t.destroy_event)(e) }, "aclrtDestroyEvent");
        })
    });
    let s = t.stream();
    let w = t.stream();
    let e = t.event();
    // SAFETY (all calls below): live handles of the current context; out-pointers to locals.
    g.bench_function("event_record", |b| {
        b.iter(|| ok(unsafe { (t.record_event)(e, s) }, "aclrtRecordEvent"))
    });
    ok(
        unsafe { (t.synchronize_stream)(s) },
        "aclrtSynchronizeStream",
    );
    g.bench_function("stream_query_idle", |b| {
        b.iter(|| {
            let mut st = 0;
            ok(unsafe { (t.stream_query)(s, &mut st) }, "aclrtStreamQuery");
            st
        })
    });
    g.bench_function("event_query_complete", |b| {
        b.iter(|| {
            let mut st = 0;
            ok(
                unsafe { (t.query_event_status)(e, &mut st) },
                "aclrtQueryEventStatus",
            );
            st
        })
    });
    g.bench_function("record_and_wait", |b| {
        b.iter(|| {
            ok(unsafe { (t.record_event)(e, s) }, "aclrtRecordEvent");
            ok(
                unsafe { (t.stream_wait_event)(w, e) },
                "aclrtStreamWaitEvent",
            );
        })
    });
    ok(
        unsafe { (t.synchronize_stream)(w) },
        "aclrtSynchronizeStream",
    );
    g.bench_function("synchronize_idle", |b| {
        b.iter(|| {
            ok(
                unsafe { (t.synchronize_stream)(s) },
                "aclrtSynchronizeStream",
            )
        })
    });
    let rep = RawReporter::spawn(ctx as usize);
    ok(
        unsafe { (t.subscribe_report)(rep.tid, s) },
        "aclrtSubscribeReport",
    );
    g.bench_function("host_callback_enqueue", |b| {
        b.iter_custom(|iters| {
            let t0 = Instant::now();
            for _ in 0..iters {
                ok(
                    unsafe {
                        (t.launch_callback)(noop, std::ptr::null_mut(), ACL_CALLBACK_BLOCK, s)
                    },
                    "aclrtLaunchCallback",
                );
            }
            let el = t0.elapsed();
            ok(
                unsafe { (t.synchronize_stream)(s) },
                "aclrtSynchronizeStream",
            );
            el
        })
    });
    g.bench_function("host_callback_round_trip", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let flag = AtomicBool::new(false);
                let p = std::ptr::from_ref(&flag).cast_mut().cast::<c_void>();
                let t0 = Instant::now();
                ok(
                    unsafe { (t.launch_callback)(set_flag, p, ACL_CALLBACK_BLOCK, s) },
                    "aclrtLaunchCallback",
                );
                while !flag.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                total += t0.elapsed();
            }
            total
        })
    });
    g.bench_function("future_completion", |b| {
        b.iter(|| {
            let waiter = Waiter {
                done: AtomicBool::new(false),
                thread: std::thread::current(),
            };
            let p = std::ptr::from_ref(&waiter).cast_mut().cast::<c_void>();
            ok(
                unsafe { (t.launch_callback)(wake, p, ACL_CALLBACK_BLOCK, s) },
                "aclrtLaunchCallback",
            );
            while !waiter.done.load(Ordering::Acquire) {
                std::thread::park();
            }
        })
    });
    g.finish();
    ok(
        unsafe { (t.synchronize_stream)(s) },
        "aclrtSynchronizeStream",
    );
    ok(
        unsafe { (t.unsubscribe_report)(rep.tid, s) },
        "aclrtUnSubscribeReport",
    );
    drop(rep);
    ok(unsafe { (t.destroy_event)(e) }, "aclrtDestroyEvent");
    ok(unsafe { (t.destroy_stream)(w) }, "aclrtDestroyStream");
    ok(unsafe { (t.destroy_stream)(s) }, "aclrtDestroyStream");
}

/// Per-call nanoseconds of `f` over a block of `n` calls.
fn block(n: u32, f: &mut dyn FnMut()) -> f64 {
    let t0 = Instant::now();
    for _ in 0..n {
        f();
    }
    t0.elapsed().as_nanos() as f64 / f64::from(n)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Paired A/B: `ROUNDS` rounds, each timing a block of `BLOCK` xstream calls and a block of
/// `BLOCK` raw calls (order alternating per round); prints the medians and the median of the
/// per-round differences with its interquartile range. The differences of interleaved blocks
/// cancel most of the drift a 2-core VM has between criterion's sequential groups.
fn paired_one(op: &str, x: &mut dyn FnMut(), r: &mut dyn FnMut()) {
    const ROUNDS: usize = 101;
    const BLOCK: u32 = 2_000;
    let (mut xs, mut rs, mut ds) = (Vec::new(), Vec::new(), Vec::new());
    block(BLOCK, x);
    block(BLOCK, r);
    for i in 0..ROUNDS {
        let (a, b) = if i % 2 == 0 {
            let a = block(BLOCK, x);
            (a, block(BLOCK, r))
        } else {
            let b = block(BLOCK, r);
            (block(BLOCK, x), b)
        };
        xs.push(a);
        rs.push(b);
        ds.push(a - b);
    }
    let mx = median(&mut xs);
    let mr = median(&mut rs);
    let md = median(&mut ds);
    let (q1, q3) = (ds[ROUNDS / 4], ds[3 * ROUNDS / 4]);
    println!(
        "paired {op:<22} xstream={mx:>8.1} ns raw={mr:>8.1} ns overhead={md:>+7.1} ns \
         (IQR {q1:+.1}..{q3:+.1}) ratio={:.3}",
        mx / mr
    );
}

/// The thin-wrapper operations, xstream against the raw call, paired.
fn paired() {
    use xstream_core::{Device, Event, EventDesc, EventFlags, Stream, StreamDesc, StreamFlags};
    let dev = device();
    let t = RawAcl::get();
    let nb = StreamDesc::new().flags(StreamFlags::NON_BLOCKING);
    let ed = EventDesc::new().flags(EventFlags::DISABLE_TIMING);
    let (s, w) = (
        dev.create_stream(&nb).unwrap(),
        dev.create_stream(&nb).unwrap(),
    );
    let e = dev.create_event(&ed).unwrap();
    dev.bind().expect("bind the device context");
    // The raw calls use the very handles the xstream objects wrap (`as_raw`), so both sides
    // hit the same simulator objects (its handle lookups cost differ between handles).
    let (rs, rw, re) = (s.as_raw().0, w.as_raw().0, e.as_raw().0);
    let mut st = 0i32;
    let stp: *mut i32 = &mut st;
    println!("paired A/B on the simulator (median of 101 rounds of 2000 calls each):");
    // SAFETY (every raw call): live handles of the device context, current on this thread;
    // `stp` points at a live local.
    paired_one(
        "noise floor (raw/raw)",
        &mut || ok(unsafe { (t.stream_query)(rs, stp) }, "q"),
        &mut || ok(unsafe { (t.stream_query)(rs, stp) }, "q"),
    );
    paired_one(
        "stream_query_idle",
        &mut || {
            s.query().unwrap();
        },
        &mut || ok(unsafe { (t.stream_query)(rs, stp) }, "q"),
    );
    paired_one(
        "synchronize_idle",
        &mut || s.synchronize().unwrap(),
        &mut || ok(unsafe { (t.synchronize_stream)(rs) }, "sync"),
    );
    e.record(&s).unwrap();
    s.synchronize().unwrap();
    paired_one(
        "event_query_complete",
        &mut || {
            e.query().unwrap();
        },
        &mut || ok(unsafe { (t.query_event_status)(re, stp) }, "qe"),
    );
    // Enqueues: hang both streams (simulator fault rule `hang:<stream id>`) so every record
    // and wait only appends to a queue; otherwise each call may wake or spawn the simulator's
    // stream worker thread, whose microsecond jitter hides a nanosecond overhead.
    let spec = format!(
        "hang:{};hang:{}",
        s.id() & ((1 << 40) - 1),
        w.id() & ((1 << 40) - 1)
    );
    let spec = std::ffi::CString::new(spec).unwrap();
    ok(unsafe { (t.set_faults)(spec.as_ptr()) }, "xsimSetFaults");
    s.launch_builtin(xstream_core::Kernel::Delay(Duration::ZERO))
        .unwrap();
    w.launch_builtin(xstream_core::Kernel::Delay(Duration::ZERO))
        .unwrap();
    paired_one(
        "stream_wait_event",
        &mut || w.wait_event(&e).unwrap(),
        &mut || ok(unsafe { (t.stream_wait_event)(rw, re) }, "wait"),
    );
    paired_one("event_record", &mut || e.record(&s).unwrap(), &mut || {
        ok(unsafe { (t.record_event)(re, rs) }, "record")
    });
    ok(unsafe { (t.release_hang)() }, "xsimReleaseHang");
    ok(unsafe { (t.set_faults)(std::ptr::null()) }, "xsimSetFaults");
    s.synchronize().unwrap();
    w.synchronize().unwrap();
    ok(unsafe { (t.synchronize_stream)(rs) }, "sync");
    ok(unsafe { (t.synchronize_stream)(rw) }, "sync");
}

criterion_group!(benches, xstream, raw);

fn main() {
    // The simulator's environment is given to a new process, never set in this one.
    xstream_conformance::simulator::reexec_configured(1);
    benches();
    paired();
    Criterion::default().configure_from_args().final_summary();
}
