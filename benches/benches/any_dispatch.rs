//! The cost of the type-erased path (`xstream::any`) over the generic one: the same
//! operations on the same objects, once through `AnyStream` / `AnyEvent` (a match on the
//! backend) and once through the backend's own types (`downcast_ref` of the very same
//! objects). Host always; CUDA as well when a GPU is present (else a `SKIP:` line).
//!
//! Two measurements: criterion groups `any_<backend>` (`generic/<op>` and `erased/<op>`), and
//! a paired A/B (the figure docs/performance.md quotes; method at [`paired_one`]): short
//! blocks of generic and erased calls alternate for a time budget per operation, and the
//! median per-call difference is printed with its 95% confidence interval and a verdict
//! against the 2 ns bound. One operation makes no driver call (`capture_status`), so it shows
//! the dispatch itself without the driver's noise. Both sides go through `black_box` so that
//! the compiler cannot see which variant an erased object holds.
//!
//! `cargo bench -p xstream-benches --bench any_dispatch` (add `-- NONE` to run only the paired
//! part; `XSTREAM_BENCH_PAIRED_MS=N` sets the paired part's time per operation, default 1500).
// criterion_group! generates undocumented public functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, Criterion};
use xstream::any::{AnyBuffer, AnyDevice, AnyEvent, AnyStream, Erasable};
use xstream::{BackendKind, Buffer, Event, EventDesc, EventFlags, Stream, StreamDesc, StreamFlags};

/// One device's erased objects; the generic side uses the same objects through
/// `downcast_ref`.
struct Objects {
    s: AnyStream,
    w: AnyStream,
    e: AnyEvent,
    b: AnyBuffer,
    _dev: AnyDevice,
}

fn objects(kind: BackendKind) -> Objects {
    let dev = AnyDevice::open(kind, 0).expect("device");
    let nb = StreamDesc::new().flags(StreamFlags::NON_BLOCKING);
    let ed = EventDesc::new().flags(EventFlags::DISABLE_TIMING);
    let o = Objects {
        s: dev.create_stream(&nb).expect("stream"),
        w: dev.create_stream(&nb).expect("stream"),
        e: dev.create_event(&ed).expect("event"),
        b: dev.alloc(4096).expect("buffer"),
        _dev: dev,
    };
    o.e.record(&o.s).unwrap();
    o.s.synchronize().unwrap();
    o
}

/// The backends measured here: host, and CUDA where it is available.
fn kinds() -> Vec<BackendKind> {
    let mut v = vec![BackendKind::Host];
    match xstream::availability(BackendKind::Cuda) {
        Ok(()) => v.push(BackendKind::Cuda),
        Err(e) => println!("SKIP: any_dispatch on cuda: {e}"),
    }
    v
}

fn criterion_for<B: Erasable>(c: &mut Criterion) {
    let o = objects(B::KIND);
    let (ts, tw, te) = (
        o.s.downcast_ref::<B>().unwrap(),
        o.w.downcast_ref::<B>().unwrap(),
        o.e.downcast_ref::<B>().unwrap(),
    );
    let mut g = xstream_benches::short_group(c, &format!("any_{}", B::KIND));
    g.bench_function("generic/stream_query_idle", |b| {
        b.iter(|| black_box(ts).query().unwrap())
    });
    g.bench_function("erased/stream_query_idle", |b| {
        b.iter(|| black_box(&o.s).query().unwrap())
    });
    g.bench_function("generic/event_query_complete", |b| {
        b.iter(|| black_box(te).query().unwrap())
    });
    g.bench_function("erased/event_query_complete", |b| {
        b.iter(|| black_box(&o.e).query().unwrap())
    });
    g.bench_function("generic/record_and_wait", |b| {
        b.iter(|| {
            black_box(te).record(black_box(ts)).unwrap();
            black_box(tw).wait_event(black_box(te)).unwrap();
        })
    });
    g.bench_function("erased/record_and_wait", |b| {
        b.iter(|| {
            black_box(&o.e).record(black_box(&o.s)).unwrap();
            black_box(&o.w).wait_event(black_box(&o.e)).unwrap();
        })
    });
    g.finish();
    o.w.synchronize().unwrap();
}

fn criterion_all(c: &mut Criterion) {
    for k in kinds() {
        match k {
            BackendKind::Host => criterion_for::<xstream::HostBackend>(c),
            BackendKind::Cuda => criterion_for::<xstream::CudaBackend>(c),
            BackendKind::Ascend => {}
        }
    }
}

/// Per-call nanoseconds of `f` over a block of `n` calls.
fn block(n: u32, f: &mut dyn FnMut()) -> f64 {
    let t0 = Instant::now();
    for _ in 0..n {
        f();
    }
    t0.elapsed().as_nanos() as f64 / f64::from(n)
}

/// The bound on the erased path's cost per operation.
const TARGET_NS: f64 = 2.0;
/// A block lasts about this long (its call count is calibrated per operation).
const BLOCK_NS: f64 = 20_000.0;
/// Rounds per operation: at least, at most.
const MIN_ROUNDS: usize = 201;
const MAX_ROUNDS: usize = 50_001;

/// Time spent per operation in the paired part (`XSTREAM_BENCH_PAIRED_MS`, default 1500).
fn budget() -> std::time::Duration {
    let ms = std::env::var("XSTREAM_BENCH_PAIRED_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500u64);
    std::time::Duration::from_millis(ms)
}

/// The median of `d` and its distribution-free 95% confidence interval: the order statistics
/// at ranks n/2 ∓ 0.98·√n (the normal approximation of the binomial count of samples below
/// the true median).
fn median_ci(d: &mut [f64]) -> (f64, f64, f64) {
    d.sort_by(f64::total_cmp);
    let n = d.len();
    let half = 0.98 * (n as f64).sqrt();
    let k = ((n as f64 / 2.0 - half).floor().max(0.0) as usize).min(n - 1);
    (d[n / 2], d[k], d[n - 1 - k])
}

/// Paired A/B of `erased` against `generic`.
///
/// Method: the block length is calibrated so that a block of calls lasts about 20 µs (and
/// recalibrated every 64 rounds); then
/// rounds of one generic and one erased block (the order alternating, so a linear drift
/// cancels over two rounds) run until the time budget is spent (at least 201 rounds). Each
/// round gives one difference of per-call means; the figure is the median of those
/// differences with its 95% confidence interval. Short blocks interleave the two sides
/// finely, so the machine's slow drift (clocks, other processes, the driver) falls on both,
/// and the median ignores the rounds an interrupt hit. Verdict against the 2 ns bound:
/// `PASS` when the interval lies at or below it, `MISS` when above, `UNRESOLVED` when it
/// straddles it (more time, `XSTREAM_BENCH_PAIRED_MS`, narrows it).
fn paired_one(kind: BackendKind, op: &str, generic: &mut dyn FnMut(), erased: &mut dyn FnMut()) {
    // Warm-up and calibration.
    block(1000, generic);
    block(1000, erased);
    // The fastest of five blocks: the first calls of some operations are slower than the
    // steady state the rounds measure.
    let per_call = (0..5)
        .map(|_| block(1000, generic))
        .fold(f64::INFINITY, f64::min)
        .max(0.1);
    let calls = |per_call: f64| (BLOCK_NS / per_call).round().clamp(8.0, 100_000.0) as u32;
    let mut n = calls(per_call);
    let (mut gs, mut es, mut ds) = (Vec::new(), Vec::new(), Vec::new());
    let (start, budget) = (Instant::now(), budget());
    while ds.len() < MAX_ROUNDS && (ds.len() < MIN_ROUNDS || start.elapsed() < budget) {
        let (g, e) = if ds.len() % 2 == 0 {
            let g = block(n, generic);
            (g, block(n, erased))
        } else {
            let e = block(n, erased);
            (block(n, generic), e)
        };
        gs.push(g);
        es.push(e);
        ds.push(e - g);
        // Every 64 rounds the block length follows the generic side's recent per-call
        // time (a round's difference is per call, so blocks may differ in length).
        if ds.len().is_multiple_of(64) {
            let mut recent = gs[gs.len() - 64..].to_vec();
            n = calls(median_ci(&mut recent).0.max(0.1));
        }
    }
    let rounds = ds.len();
    let mg = median_ci(&mut gs).0;
    let me = median_ci(&mut es).0;
    let (md, lo, hi) = median_ci(&mut ds);
    let verdict = if op.starts_with("noise floor") {
        if lo <= 0.0 && hi >= 0.0 {
            "control: the interval holds 0"
        } else {
            "control: the interval misses 0 (a bias of the method at this noise)"
        }
    } else if hi <= TARGET_NS {
        "PASS"
    } else if lo > TARGET_NS {
        "MISS"
    } else {
        "UNRESOLVED"
    };
    println!(
        "paired {:<6} {op:<34} generic={mg:>8.1} ns erased={me:>8.1} ns \
         overhead={md:>+6.2} ns (95% CI {lo:+.2}..{hi:+.2}; {rounds} rounds, last blocks {n} calls) \
         target <= {TARGET_NS} ns: {verdict}",
        kind.name()
    );
}

fn paired_for<B: Erasable>() {
    let o = objects(B::KIND);
    let (ts, tw, te) = (
        o.s.downcast_ref::<B>().unwrap(),
        o.w.downcast_ref::<B>().unwrap(),
        o.e.downcast_ref::<B>().unwrap(),
    );
    let k = B::KIND;
    paired_one(
        k,
        "noise floor (gen/gen)",
        &mut || {
            black_box(ts).query().unwrap();
        },
        &mut || {
            black_box(ts).query().unwrap();
        },
    );
    paired_one(
        k,
        "capture_status (no driver call)",
        &mut || {
            black_box(black_box(ts).capture_status());
        },
        &mut || {
            black_box(black_box(&o.s).capture_status());
        },
    );
    paired_one(
        k,
        "stream_query_idle",
        &mut || {
            black_box(ts).query().unwrap();
        },
        &mut || {
            black_box(&o.s).query().unwrap();
        },
    );
    paired_one(
        k,
        "event_query_complete",
        &mut || {
            black_box(te).query().unwrap();
        },
        &mut || {
            black_box(&o.e).query().unwrap();
        },
    );
    paired_one(
        k,
        "event_record",
        &mut || black_box(te).record(black_box(ts)).unwrap(),
        &mut || black_box(&o.e).record(black_box(&o.s)).unwrap(),
    );
    // A buffer-taking operation that ends in core's checks (device rule, range, zero length)
    // with nothing enqueued: the erased buffer path's dispatch without the backend's work.
    let tb = o.b.downcast_ref::<B>().unwrap();
    paired_one(
        k,
        "memset_zero_length (checks only)",
        &mut || black_box(ts).memset(black_box(tb), 64, 0, 7).unwrap(),
        &mut || black_box(&o.s).memset(black_box(&o.b), 64, 0, 7).unwrap(),
    );
    // A view of a buffer (no driver call): the erased view helpers against the generic ones.
    paired_one(
        k,
        "buffer_view_slice (no driver call)",
        &mut || {
            black_box(black_box(tb).view().slice(64..128).unwrap());
        },
        &mut || {
            black_box(black_box(&o.b).view().slice(64..128).unwrap());
        },
    );
    // Drain the records, so that the waits below see a completed event in every run (a
    // backlog of records would put them on the slower path of a pending event).
    o.s.synchronize().unwrap();
    paired_one(
        k,
        "stream_wait_event",
        &mut || black_box(tw).wait_event(black_box(te)).unwrap(),
        &mut || black_box(&o.w).wait_event(black_box(&o.e)).unwrap(),
    );
    o.s.synchronize().unwrap();
    o.w.synchronize().unwrap();
}

fn paired() {
    println!(
        "paired A/B, erased against generic: median of the per-round differences, 95% CI, \
         ~{} ms per operation (blocks of ~20 µs, order alternating):",
        budget().as_millis()
    );
    for k in kinds() {
        match k {
            BackendKind::Host => paired_for::<xstream::HostBackend>(),
            BackendKind::Cuda => paired_for::<xstream::CudaBackend>(),
            BackendKind::Ascend => {}
        }
    }
}

criterion_group!(benches, criterion_all);

fn main() {
    benches();
    paired();
    Criterion::default().configure_from_args().final_summary();
}
