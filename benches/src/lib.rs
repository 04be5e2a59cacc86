//! Shared benchmark bodies, generic over the backend, so every backend is measured by the same
//! code (`benches/host_ops.rs`, the Ascend simulator bench, the GPU bench binary).
//!
//! ## Map of the package
//! - `src/lib.rs` (this file): the shared, backend-generic benchmark bodies.
//! - `benches/host_ops.rs`, `benches/ascend_sim.rs`: criterion benches of the host backend and
//!   the ACL runtime simulator; `benches/memory.rs`: memory and data-path benches;
//!   `benches/common/`: what the bench targets share.
//! - `benches/gpu_ops/`: the GPU bench binary (`main.rs` and its modules: statistics, timing,
//!   the raw-driver side, synchronize latency, the JSON writer, the data path).
//! - `benches/gpu_nccl.rs` (feature `nccl`): NCCL all-reduce through xstream's communicator
//!   against raw `ncclAllReduce` in the same process, run by `scripts/gpu-collectives.sh`.
//! - `tests/`: checks of the benches' own claims (e.g. no allocation on the data path).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};
use xstream_core::{
    Backend, Device, ErrorKind, Event, EventDesc, EventFlags, PoolConfig, PriorityClass, Stream,
    StreamDesc, StreamFlags, StreamPool,
};

/// A benchmark group with the settings every xstream bench uses: 20 samples, 300 ms warm-up,
/// 1 s measurement (the whole `cargo bench -p xstream-benches` stays within minutes on 2
/// cores).
pub fn short_group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(20);
    g.warm_up_time(Duration::from_millis(300));
    g.measurement_time(Duration::from_secs(1));
    g
}

/// Registers the per-operation benchmarks of backend `B` on device `dev` under `group`.
///
/// # Panics
/// When the backend fails an operation (a benchmark cannot continue).
pub fn stream_ops<B: Backend>(c: &mut Criterion, group: &str, dev: &B::Device) {
    let mut g = short_group(c, group);
    let nb = StreamDesc::new().flags(StreamFlags::NON_BLOCKING);
    // Backends that destroy streams asynchronously (Ascend: a reaper thread synchronizes and
    // destroys) can fall behind a tight create/drop loop and hit the device's stream limit;
    // the time spent waiting for them to catch up is not counted.
    g.bench_function("stream_create_destroy", |b| {
        b.iter_custom(|iters| {
            let mut waited = Duration::ZERO;
            let t0 = Instant::now();
            for _ in 0..iters {
                loop {
                    match dev.create_stream(&nb) {
                        Ok(s) => break drop(s),
                        Err(e) if e.kind() == ErrorKind::ResourceExhausted => {
                            let w = Instant::now();
                            std::thread::sleep(Duration::from_micros(200));
                            waited += w.elapsed();
                        }
                        Err(e) => panic!("create_stream: {e}"),
                    }
                }
            }
            t0.elapsed().saturating_sub(waited)
        })
    });
    let pool = StreamPool::<B>::new(dev.clone(), PoolConfig::default()).unwrap();
    for _ in 0..32 {
        pool.get(PriorityClass::Normal).unwrap();
    }
    g.bench_function("pooled_stream_get", |b| {
        b.iter(|| pool.get(PriorityClass::Normal).unwrap())
    });
    let ed = EventDesc::new().flags(EventFlags::DISABLE_TIMING);
    g.bench_function("event_create_destroy", |b| {
        b.iter(|| drop(dev.create_event(&ed).unwrap()))
    });
    let s = dev.create_stream(&nb).unwrap();
    let t = dev.create_stream(&nb).unwrap();
    let e = dev.create_event(&ed).unwrap();
    g.bench_function("event_record", |b| {
        b.iter(|| e.record(&s).unwrap());
    });
    s.synchronize().unwrap();
    g.bench_function("stream_query_idle", |b| b.iter(|| s.query().unwrap()));
    g.bench_function("event_query_complete", |b| b.iter(|| e.query().unwrap()));
    g.bench_function("record_and_wait", |b| {
        b.iter(|| {
            e.record(&s).unwrap();
            t.wait_event(&e).unwrap();
        })
    });
    t.synchronize().unwrap();
    g.bench_function("synchronize_idle", |b| b.iter(|| s.synchronize().unwrap()));
    g.bench_function("host_callback_enqueue", |b| {
        b.iter_custom(|iters| {
            let t0 = Instant::now();
            for _ in 0..iters {
                s.host_callback(|_| {}).unwrap();
            }
            let el = t0.elapsed();
            s.synchronize().unwrap();
            el
        })
    });
    g.bench_function("host_callback_round_trip", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let flag = Arc::new(AtomicBool::new(false));
                let f2 = flag.clone();
                let t0 = Instant::now();
                s.host_callback(move |_| f2.store(true, Ordering::Release))
                    .unwrap();
                while !flag.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                total += t0.elapsed();
            }
            total
        })
    });
    g.bench_function("future_completion", |b| {
        b.iter(|| s.completed().unwrap().wait().unwrap())
    });
    g.finish();
}
