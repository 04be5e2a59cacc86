//! The cost of the type-erased path (`xstream::any`) over the generic one: the same
//! operations on the same objects, once through `AnyStream` / `AnyEvent` (a match on the
//! backend) and once through the backend's own types (`downcast_ref` of the very same
//! objects). Host always; CUDA as well when a GPU is present (else a `SKIP:` line).
//!
//! Two measurements: criterion groups `any_<backend>` (`generic/<op>` and `erased/<op>`), and
//! a paired A/B that alternates blocks of 2000 generic and 2000 erased calls for 101 rounds
//! and prints the median per-call difference (the figure docs/performance.md quotes; the
//! blocks' interleaving cancels most of the drift of a loaded machine). Both sides go through
//! `black_box` so that the compiler cannot see which variant an erased object holds.
//!
//! `cargo bench -p xstream-benches --bench any_dispatch` (add `-- NONE` to run only the paired
//! part).
// criterion_group! generates undocumented public functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, Criterion};
use xstream::any::{AnyDevice, AnyEvent, AnyStream, Erasable};
use xstream::{BackendKind, Event, EventDesc, EventFlags, Stream, StreamDesc, StreamFlags};

/// One device's erased objects; the generic side uses the same objects through
/// `downcast_ref`.
struct Objects {
    s: AnyStream,
    w: AnyStream,
    e: AnyEvent,
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

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Paired A/B of `erased` against `generic`; prints the medians and the median difference
/// with its interquartile range.
fn paired_one(kind: BackendKind, op: &str, generic: &mut dyn FnMut(), erased: &mut dyn FnMut()) {
    const ROUNDS: usize = 101;
    const BLOCK: u32 = 2_000;
    let (mut gs, mut es, mut ds) = (Vec::new(), Vec::new(), Vec::new());
    block(BLOCK, generic);
    block(BLOCK, erased);
    for i in 0..ROUNDS {
        let (g, e) = if i % 2 == 0 {
            let g = block(BLOCK, generic);
            (g, block(BLOCK, erased))
        } else {
            let e = block(BLOCK, erased);
            (block(BLOCK, generic), e)
        };
        gs.push(g);
        es.push(e);
        ds.push(e - g);
    }
    let mg = median(&mut gs);
    let me = median(&mut es);
    let md = median(&mut ds);
    let (q1, q3) = (ds[ROUNDS / 4], ds[3 * ROUNDS / 4]);
    println!(
        "paired {:<6} {op:<24} generic={mg:>8.1} ns erased={me:>8.1} ns \
         overhead={md:>+6.1} ns (IQR {q1:+.1}..{q3:+.1})",
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
    println!("paired A/B, erased against generic (median of 101 rounds of 2000 calls each):");
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
