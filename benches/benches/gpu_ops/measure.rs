//! Timing the variants of one operation: batches, interleaved repeats and the idle-path and
//! `alloc_async` rows.

use std::hint::black_box;
use std::time::{Duration, Instant};

use cudarc::driver::sys;
use xstream_core::{Event, Stream};
use xstream_cuda::{CudaEvent, CudaStream};

use super::{ck, fmt_cell, raw_sync, stat, xs, Row, Target, REPS};

/// One variant: runs a batch of `n` iterations and returns the timed part.
pub(crate) type Batch<'a> = Box<dyn FnMut(u64) -> Duration + 'a>;

/// Idle-stream query, event query and idle synchronize, xstream vs raw, labelled with the
/// context state (the driver's idle paths differ before and after the first kernel).
pub(crate) fn state_rows(
    state: &str,
    xa: &CudaStream,
    xe: &CudaEvent,
    ra: sys::CUstream,
    re: sys::CUevent,
) -> Vec<Row> {
    xs(xe.record(xa));
    xs(xa.synchronize());
    // SAFETY: live event and stream made by `run`.
    ck(unsafe { sys::cuEventRecord(re, ra) }, "cuEventRecord");
    raw_sync(ra);
    vec![
        compare(
            &format!("idle stream query ({state})"),
            100_000,
            Target::OverheadNs(20.0),
            Some(Box::new(|n| timed(n, || drop(black_box(xa.query()))))),
            Some(Box::new(|n| {
                // SAFETY: live stream.
                timed(n, || {
                    // SAFETY: live handle made by `run`.
                    black_box(unsafe { sys::cuStreamQuery(ra) });
                })
            })),
            None,
        ),
        compare(
            &format!("completed event query ({state})"),
            100_000,
            Target::OverheadNs(20.0),
            Some(Box::new(|n| timed(n, || drop(black_box(xe.query()))))),
            Some(Box::new(|n| {
                // SAFETY: live event.
                timed(n, || {
                    // SAFETY: live handle made by `run`.
                    black_box(unsafe { sys::cuEventQuery(re) });
                })
            })),
            None,
        ),
        compare(
            &format!("idle stream synchronize ({state})"),
            100_000,
            Target::OverheadNs(20.0),
            Some(Box::new(|n| timed(n, || drop(black_box(xa.synchronize()))))),
            Some(Box::new(|n| {
                // SAFETY: live stream.
                timed(n, || {
                    // SAFETY: live handle made by `run`.
                    black_box(unsafe { sys::cuStreamSynchronize(ra) });
                })
            })),
            None,
        ),
    ]
}

/// `alloc_async` + `free_async` (1 MiB, the device's default pool) vs the raw pair.
pub(crate) fn alloc_async_row(xa: &CudaStream, ra: sys::CUstream) -> Row {
    const LEN: usize = 1 << 20;
    compare(
        "alloc_async + free_async (1 MiB, default pool)",
        20_000,
        Target::OverheadPct(5.0),
        Some(Box::new(|n| {
            let d = timed(n, || {
                let b = xa.alloc_async(LEN).expect("alloc_async");
                xa.free_async(black_box(b)).expect("free_async");
            });
            xs(xa.synchronize());
            d
        })),
        Some(Box::new(|n| {
            let d = timed(n, || {
                let mut p = 0;
                // SAFETY: valid out-pointer, live stream; the block is freed right after in
                // stream order and never touched.
                unsafe {
                    ck(sys::cuMemAllocAsync(&mut p, LEN, ra), "cuMemAllocAsync");
                    ck(sys::cuMemFreeAsync(black_box(p), ra), "cuMemFreeAsync");
                }
            });
            raw_sync(ra);
            d
        })),
        None,
    )
}

/// Times `n` calls of `f`.
pub(crate) fn timed(n: u64, mut f: impl FnMut()) -> Duration {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed()
}

/// Runs the variants (warm-up, then [`REPS`] interleaved repeats) and returns the row.
pub(crate) fn compare(
    op: &str,
    n: u64,
    target: Target,
    x: Option<Batch<'_>>,
    raw: Option<Batch<'_>>,
    safe: Option<Batch<'_>>,
) -> Row {
    compare_reps(op, n, REPS, target, x, raw, safe)
}

/// [`compare`] with `reps` interleaved repeats instead of [`REPS`], for a row whose target is
/// closer than the spread of 7 repeats resolves (the report names the row's count).
pub(crate) fn compare_reps(
    op: &str,
    n: u64,
    reps: usize,
    target: Target,
    x: Option<Batch<'_>>,
    raw: Option<Batch<'_>>,
    safe: Option<Batch<'_>>,
) -> Row {
    let mut vs: [Option<Batch<'_>>; 3] = [x, raw, safe];
    for b in vs.iter_mut().flatten() {
        b(n);
    }
    let mut samples: [Vec<f64>; 3] = Default::default();
    for rep in 0..reps {
        for k in 0..3 {
            let i = (k + rep) % 3;
            if let Some(b) = vs[i].as_mut() {
                let d = b(n);
                samples[i].push(d.as_nanos() as f64 / n as f64);
            }
        }
    }
    let st = |i: usize| (!samples[i].is_empty()).then(|| stat(&samples[i]));
    let row = Row {
        op: op.into(),
        iters: n,
        reps,
        x: st(0),
        raw: st(1),
        safe: st(2),
        target,
    };
    eprintln!(
        "  {:<52} xstream {:>26} | raw {:>26} | safe {:>26}",
        row.op,
        fmt_cell(row.x),
        fmt_cell(row.raw),
        fmt_cell(row.safe)
    );
    row
}
