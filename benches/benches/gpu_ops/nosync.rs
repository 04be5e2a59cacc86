//! Allocation and frees without host synchronization (issue 23, item 3): host time of each
//! operation while another stream runs a long delay kernel, xstream against the raw driver in
//! the same run.
//!
//! # Method
//! Each repeat launches a [`BUSY`] delay kernel (`xstream_delay`) on a "busy" stream, then times
//! [`OPS`] operations on the host, then asks whether the busy stream is still running
//! (`cuStreamQuery`). An operation that waited for the device shows both in its time (up to
//! the kernel's length) and in the "busy still running" count dropping below the repeats.
//! Inputs are prepared before the kernel is launched and cleaned up after it finished, outside
//! the timed region. A cell is the host ns per operation: median (p10–p90) over [`super::REPS`]
//! repeats.
//!
//! Rows:
//! - `alloc_uninit` (`cuMemAlloc` alone) against raw `cuMemAlloc`; `Device::alloc` (zeroed, waits
//!   for its zeroing on the internal stream) and `alloc_zeroed_on` (zeroing enqueued) for
//!   reference;
//! - `free_async` of a stream-ordered buffer that six other streams used, the busy one among
//!   them (one pooled event recorded on each, one wait each on the freeing stream,
//!   `cuMemFreeAsync`), against the same sequence on the raw driver; before issue 23 xstream
//!   synchronized the context here (more than four users), so it waited for the kernel;
//! - dropping an `alloc_uninit` buffer (`cuMemFree` on the dropping thread) against raw
//!   `cuMemFree`, both while the kernel runs: whether the driver's free waits is shown, not
//!   assumed.

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

use cudarc::driver::sys;
use xstream_core::{Device, Kernel, Stream, StreamDesc, StreamFlags};
use xstream_cuda::{CudaBuffer, CudaDevice, CudaStream};

use super::{ck, fmt_cell, raw_event, raw_launch_delay, raw_stream, raw_sync, stat, xs, REPS};

/// The busy stream's kernel.
const BUSY: Duration = Duration::from_millis(100);
/// Operations timed per repeat.
const OPS: usize = 16;
/// Bytes per allocation.
const LEN: usize = 1 << 20;
/// Streams other than the freeing one that use each freed buffer (the busy one included).
const USERS: usize = 6;

/// One row: per-op host ns over the repeats, and in how many repeats the busy stream was still
/// running after the timed operations.
pub(crate) struct NoSyncRow {
    pub(crate) op: &'static str,
    pub(crate) x: Option<(super::Stat, usize)>,
    pub(crate) raw: Option<(super::Stat, usize)>,
}

fn busy_pending(s: sys::CUstream) -> bool {
    // SAFETY: `s` is live.
    unsafe { sys::cuStreamQuery(s) == sys::CUresult::CUDA_ERROR_NOT_READY }
}

/// Runs `reps` repeats of: `prep()`, launch the busy kernel with `launch`, time `op(inputs)`,
/// query the busy stream, wait for it, `done(inputs)`.
fn measure<T>(
    busy: sys::CUstream,
    launch: &dyn Fn(),
    mut prep: impl FnMut() -> T,
    mut op: impl FnMut(&mut T),
    mut done: impl FnMut(T),
) -> (super::Stat, usize) {
    let mut ns = Vec::with_capacity(REPS);
    let mut still = 0;
    for _ in 0..REPS {
        let mut inputs = prep();
        launch();
        let t = Instant::now();
        op(&mut inputs);
        let el = t.elapsed();
        if busy_pending(busy) {
            still += 1;
        }
        raw_sync(busy);
        done(inputs);
        ns.push(el.as_nanos() as f64 / OPS as f64);
    }
    (stat(&ns), still)
}

/// The section: its rows (see the module docs).
#[allow(clippy::too_many_lines)]
pub(crate) fn rows(dev: &CudaDevice, delay_fn: sys::CUfunction) -> Result<Vec<NoSyncRow>, String> {
    let nb = StreamDesc::new().flags(StreamFlags::NON_BLOCKING);
    let mk = || dev.create_stream(&nb).map_err(|e| e.to_string());
    let busy: CudaStream = mk()?;
    let s: CudaStream = mk()?;
    let users: Vec<CudaStream> = (0..USERS - 1).map(|_| mk()).collect::<Result<_, _>>()?;
    let busy_raw = busy.as_raw().as_ptr();
    let xlaunch = || xs(busy.launch_builtin(Kernel::Delay(BUSY)));
    let rbusy = raw_stream();
    let rs = raw_stream();
    let rusers: Vec<sys::CUstream> = (0..USERS - 1).map(|_| raw_stream()).collect();
    let rlaunch = || raw_launch_delay(delay_fn, rbusy, BUSY.as_nanos() as u64);
    let rev = raw_event(2);
    // Warm-up: the driver's pool, xstream's kernels and event pool.
    for _ in 0..4 {
        let b = s.alloc_async(LEN).map_err(|e| e.to_string())?;
        busy.wait_stream(&s).map_err(|e| e.to_string())?;
        busy.memset(&b, 0, 16, 1).map_err(|e| e.to_string())?;
        s.free_async(b).map_err(|e| e.to_string())?;
    }
    xs(s.synchronize());
    xs(busy.synchronize());
    let mut rows = Vec::new();

    let raw_alloc = || {
        let mut p = 0;
        // SAFETY: valid out-pointer; the context is current.
        ck(unsafe { sys::cuMemAlloc_v2(&mut p, LEN) }, "cuMemAlloc");
        p
    };
    // SAFETY: `p` is a live `cuMemAlloc` block, freed once, its last use enqueued before.
    let raw_free = |p: u64| ck(unsafe { sys::cuMemFree_v2(p) }, "cuMemFree");

    rows.push(NoSyncRow {
        op: "alloc_uninit (1 MiB) vs cuMemAlloc, another stream busy",
        x: Some(measure(
            busy_raw,
            &xlaunch,
            || Vec::with_capacity(OPS),
            |v: &mut Vec<CudaBuffer>| {
                for _ in 0..OPS {
                    // SAFETY: `alloc_uninit`'s contract: the buffers are never read.
                    v.push(unsafe { dev.alloc_uninit(LEN) }.expect("alloc_uninit"));
                }
            },
            drop,
        )),
        raw: Some(measure(
            rbusy,
            &rlaunch,
            || Vec::with_capacity(OPS),
            |v: &mut Vec<u64>| {
                for _ in 0..OPS {
                    v.push(black_box(raw_alloc()));
                }
            },
            |v| v.into_iter().for_each(raw_free),
        )),
    });

    rows.push(NoSyncRow {
        op: "Device::alloc (1 MiB, zeroed; waits for its own zeroing), another stream busy",
        x: Some(measure(
            busy_raw,
            &xlaunch,
            || Vec::with_capacity(OPS),
            |v: &mut Vec<CudaBuffer>| {
                for _ in 0..OPS {
                    v.push(dev.alloc(LEN).expect("alloc"));
                }
            },
            drop,
        )),
        raw: None,
    });

    rows.push(NoSyncRow {
        op: "alloc_zeroed_on(s) (1 MiB; zeroing enqueued on s), another stream busy",
        x: Some(measure(
            busy_raw,
            &xlaunch,
            || Vec::with_capacity(OPS),
            |v: &mut Vec<CudaBuffer>| {
                for _ in 0..OPS {
                    v.push(dev.alloc_zeroed_on(&s, LEN).expect("alloc_zeroed_on"));
                }
            },
            |v| {
                xs(s.synchronize());
                drop(v);
            },
        )),
        raw: None,
    });

    rows.push(NoSyncRow {
        op: "free_async of a buffer 6 streams used (busy one included) vs raw record/wait/cuMemFreeAsync",
        x: Some(measure(
            busy_raw,
            &xlaunch,
            || {
                let v: Vec<CudaBuffer> = (0..OPS)
                    .map(|_| s.alloc_async(LEN).expect("alloc_async"))
                    .collect();
                // The allocations are ordered on `s`; the users start after them.
                xs(s.synchronize());
                for b in &v {
                    for u in users.iter().chain(std::iter::once(&busy)) {
                        xs(u.memset(b, 0, 16, 1));
                    }
                }
                v
            },
            |v: &mut Vec<CudaBuffer>| {
                for b in v.drain(..) {
                    s.free_async(b).expect("free_async");
                }
            },
            |_| {
                xs(s.synchronize());
                for u in &users {
                    xs(u.synchronize());
                }
            },
        )),
        raw: Some(measure(
            rbusy,
            &rlaunch,
            || {
                let v: Vec<u64> = (0..OPS)
                    .map(|_| {
                        let mut p = 0;
                        // SAFETY: valid out-pointer; `rs` is live.
                        ck(
                            unsafe { sys::cuMemAllocAsync(&mut p, LEN, rs) },
                            "cuMemAllocAsync",
                        );
                        p
                    })
                    .collect();
                raw_sync(rs);
                for &p in &v {
                    for &u in rusers.iter().chain(std::iter::once(&rbusy)) {
                        // SAFETY: `p` is a live block of `LEN` bytes; `u` is live.
                        ck(
                            unsafe { sys::cuMemsetD8Async(p, 1, 16, u) },
                            "cuMemsetD8Async",
                        );
                    }
                }
                v
            },
            |v: &mut Vec<u64>| {
                for p in v.drain(..) {
                    for &u in rusers.iter().chain(std::iter::once(&rbusy)) {
                        // SAFETY: `rev`, `u` and `rs` are live.
                        unsafe {
                            ck(sys::cuEventRecord(rev, u), "cuEventRecord");
                            ck(sys::cuStreamWaitEvent(rs, rev, 0), "cuStreamWaitEvent");
                        }
                    }
                    // SAFETY: `p` is a live block, freed once, after every use (waits above).
                    ck(unsafe { sys::cuMemFreeAsync(p, rs) }, "cuMemFreeAsync");
                }
            },
            |_| {
                raw_sync(rs);
                rusers.iter().for_each(|&u| raw_sync(u));
            },
        )),
    });

    rows.push(NoSyncRow {
        op: "drop of an alloc_uninit buffer (cuMemFree) vs cuMemFree, another stream busy",
        x: Some(measure(
            busy_raw,
            &xlaunch,
            || {
                let mut v = Vec::with_capacity(OPS);
                for _ in 0..OPS {
                    // SAFETY: `alloc_uninit`'s contract: the buffers are never read.
                    v.push(unsafe { dev.alloc_uninit(LEN) }.expect("alloc_uninit"));
                }
                v
            },
            |v: &mut Vec<CudaBuffer>| drop(std::mem::take(v)),
            drop,
        )),
        raw: Some(measure(
            rbusy,
            &rlaunch,
            || (0..OPS).map(|_| raw_alloc()).collect::<Vec<u64>>(),
            |v: &mut Vec<u64>| v.drain(..).for_each(raw_free),
            drop,
        )),
    });

    // SAFETY: live handles made above, not used again.
    unsafe {
        ck(sys::cuEventDestroy_v2(rev), "cuEventDestroy");
        for r in rusers.into_iter().chain([rbusy, rs]) {
            ck(sys::cuStreamDestroy_v2(r), "cuStreamDestroy");
        }
    }
    Ok(rows)
}

/// The section's Markdown table.
pub(crate) fn markdown(rows: &[NoSyncRow]) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "**Allocation and frees without host synchronization** (host ns per op, median (p10–p90) \
         over {REPS} repeats of {OPS} ops, each while another stream runs a {} ms delay kernel; \
         `still busy` = repeats after which that kernel was still running: {REPS}/{REPS} means \
         the operations did not wait for it)\n",
        BUSY.as_millis()
    );
    md.push_str("| operation | xstream | still busy | raw driver | still busy |\n|---|---:|---:|---:|---:|\n");
    let cell = |c: &Option<(super::Stat, usize)>| match c {
        Some((st, k)) => (fmt_cell(Some(*st)), format!("{k}/{REPS}")),
        None => ("–".to_string(), "–".to_string()),
    };
    for r in rows {
        let (x, xk) = cell(&r.x);
        let (w, wk) = cell(&r.raw);
        let _ = writeln!(md, "| {} | {x} | {xk} | {w} | {wk} |", r.op);
    }
    md.push('\n');
    md
}
