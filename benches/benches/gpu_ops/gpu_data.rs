//! The data path on the GPU, side by side with the raw driver in one process and one context
//! state (after kernels): the demo pipeline (`xstream::pipeline`) against the same
//! pipeline on `cudarc::driver::sys` (same kernel, same launch shape, same chunking, page-locked
//! host buffers from `cuMemHostAlloc`), page-locked copy bandwidth against raw
//! `cuMemcpyHtoDAsync` / `cuMemcpyDtoHAsync`, the typed copies (`write_from_blocking` / `read_into_blocking`,
//! `write_from_host` / `read_into_host`) against the same raw copies of the same bytes, and
//! `alloc_async` + `free_async` against `cuMemAllocAsync` + `cuMemFreeAsync`.

use std::cell::RefCell;
use std::ffi::c_void;
use std::fmt::Write as _;
use std::ptr;
use std::time::Instant;

use cudarc::driver::sys;
use xstream::pipeline::{Pipeline, PipelineConfig};
use xstream_core::{Buffer, Device, PinnedAllocDesc, Stream, StreamDesc, StreamFlags};
use xstream_cuda::{CudaBackend, CudaDevice, CudaStream};

use super::measure::Batch;
use super::modules::per_launch;
use super::{
    ck, compare, raw_event, raw_function, raw_stream, raw_sync, stat, timed, xs, Row, Stat, Target,
    REPS,
};

/// LCG rounds of the pipeline rows (as the demo's default).
const ROUNDS: u32 = 32;

/// One pipeline row: GB/s (end to end over the device timeline) per repeat.
pub struct PipeRow {
    pub streams: usize,
    pub chunk_mib: usize,
    pub chunks: usize,
    pub x: Stat,
    pub raw: Stat,
}

/// One bandwidth row (GB/s per repeat).
pub struct BwRow {
    pub dir: &'static str,
    pub mib: usize,
    pub x: Stat,
    pub raw: Stat,
}

/// The raw-driver pipeline of the same shape as [`Pipeline`].
struct RawPipe {
    streams: Vec<sys::CUstream>,
    slots: Vec<[u64; 2]>,
    ins: Vec<*mut u8>,
    outs: Vec<*mut u8>,
    lcg: sys::CUfunction,
    cfg: PipelineConfig,
    origin: sys::CUevent,
    end: sys::CUevent,
    tails: Vec<sys::CUevent>,
}

fn host_alloc(len: usize) -> *mut u8 {
    let mut p: *mut c_void = ptr::null_mut();
    // SAFETY: valid out-pointer; context current.
    ck(
        unsafe { sys::cuMemHostAlloc(&mut p, len, 0) },
        "cuMemHostAlloc",
    );
    p as *mut u8
}

fn dev_alloc(len: usize) -> u64 {
    let mut d = 0;
    // SAFETY: valid out-pointer; context current.
    ck(unsafe { sys::cuMemAlloc_v2(&mut d, len) }, "cuMemAlloc");
    d
}

impl RawPipe {
    fn new(cfg: PipelineConfig, lcg: sys::CUfunction) -> Self {
        let streams: Vec<_> = (0..cfg.streams).map(|_| raw_stream()).collect();
        let slots = (0..cfg.streams)
            .map(|_| [dev_alloc(cfg.chunk_bytes), dev_alloc(cfg.chunk_bytes)])
            .collect();
        let ins: Vec<_> = (0..cfg.chunks)
            .map(|_| host_alloc(cfg.chunk_bytes))
            .collect();
        let outs = (0..cfg.chunks)
            .map(|_| host_alloc(cfg.chunk_bytes))
            .collect();
        for (c, p) in ins.iter().enumerate() {
            // SAFETY: `p` is a live cuMemHostAlloc block of chunk_bytes bytes.
            let s = unsafe { std::slice::from_raw_parts_mut(*p, cfg.chunk_bytes) };
            for (k, b) in s.iter_mut().enumerate() {
                *b = xstream::pipeline::input_byte(c, k);
            }
        }
        Self {
            streams,
            slots,
            ins,
            outs,
            lcg,
            cfg,
            origin: raw_event(0),
            end: raw_event(0),
            tails: (0..cfg.streams).map(|_| raw_event(2)).collect(),
        }
    }

    /// One run; returns the device timeline in ms.
    fn run(&self) -> f32 {
        let (n, len) = (self.cfg.streams, self.cfg.chunk_bytes);
        let words = (len / 4) as u32;
        let grid = words.div_ceil(256).clamp(1, 4096);
        // SAFETY: every call below gets live handles made by `new`; host blocks of `len` bytes
        // that nothing else touches until the final synchronize; kernel params point to live
        // locals for the duration of the launch call.
        unsafe {
            for s in &self.streams {
                ck(sys::cuStreamSynchronize(*s), "sync");
            }
            ck(sys::cuEventRecord(self.origin, self.streams[0]), "record");
            for s in &self.streams[1..] {
                ck(sys::cuStreamWaitEvent(*s, self.origin, 0), "wait");
            }
            for c in 0..self.cfg.chunks {
                let s = self.streams[c % n];
                let buf = self.slots[c % n][(c / n) % 2];
                ck(
                    sys::cuMemcpyHtoDAsync_v2(buf, self.ins[c] as *const c_void, len, s),
                    "HtoD",
                );
                let (mut d, mut w, mut r) = (buf, words, ROUNDS);
                let mut params = [
                    &mut d as *mut u64 as *mut c_void,
                    &mut w as *mut u32 as *mut c_void,
                    &mut r as *mut u32 as *mut c_void,
                ];
                ck(
                    sys::cuLaunchKernel(
                        self.lcg,
                        grid,
                        1,
                        1,
                        256,
                        1,
                        1,
                        0,
                        s,
                        params.as_mut_ptr(),
                        ptr::null_mut(),
                    ),
                    "launch",
                );
                ck(
                    sys::cuMemcpyDtoHAsync_v2(self.outs[c] as *mut c_void, buf, len, s),
                    "DtoH",
                );
            }
            for (e, s) in self.tails.iter().zip(&self.streams) {
                ck(sys::cuEventRecord(*e, *s), "record");
                ck(sys::cuStreamWaitEvent(self.streams[0], *e, 0), "wait");
            }
            ck(sys::cuEventRecord(self.end, self.streams[0]), "record");
            ck(sys::cuEventSynchronize(self.end), "sync");
            let mut ms = 0f32;
            ck(
                sys::cuEventElapsedTime_v2(&mut ms, self.origin, self.end),
                "elapsed",
            );
            ms
        }
    }
}

impl Drop for RawPipe {
    fn drop(&mut self) {
        // SAFETY: every handle was made by `new`, all work is done (synchronized), each is
        // released once.
        unsafe {
            for s in &self.streams {
                let _ = sys::cuStreamSynchronize(*s);
            }
            for p in self.ins.iter().chain(&self.outs) {
                let _ = sys::cuMemFreeHost(*p as *mut c_void);
            }
            for d in self.slots.iter().flatten() {
                let _ = sys::cuMemFree_v2(*d);
            }
            for s in &self.streams {
                let _ = sys::cuStreamDestroy_v2(*s);
            }
            for e in self.tails.iter().chain([&self.origin, &self.end]) {
                let _ = sys::cuEventDestroy_v2(*e);
            }
        }
    }
}

fn gbs(bytes: usize, ms: f64) -> f64 {
    bytes as f64 / (ms.max(1e-9) * 1e6)
}

/// Demo pipeline vs raw pipeline at 1 and 4 streams, 1 MiB and 64 MiB chunks.
pub fn pipelines(dev: &CudaDevice) -> Result<Vec<PipeRow>, String> {
    let lcg = raw_function(&(xstream_cuda::ptx_source("sm_90") + "\0"), c"xstream_lcg");
    let mut rows = Vec::new();
    for (chunk_mib, chunks) in [(1usize, 64usize), (64, 16)] {
        for streams in [1usize, 4] {
            let cfg = PipelineConfig {
                streams,
                chunks,
                chunk_bytes: chunk_mib << 20,
                rounds: ROUNDS,
                timeline: false,
            };
            let bytes = cfg.chunks * cfg.chunk_bytes;
            let mut p = Pipeline::<CudaBackend>::new(dev, cfg).map_err(|e| e.to_string())?;
            let raw = RawPipe::new(cfg, lcg);
            // Warm-up, and a correctness check of both.
            p.run().map_err(|e| e.to_string())?;
            p.verify().map_err(|e| e.to_string())?;
            raw.run();
            let (mut xs, mut rs) = (Vec::new(), Vec::new());
            for rep in 0..REPS {
                let mut x = || -> Result<(), String> {
                    let r = p.run().map_err(|e| e.to_string())?;
                    xs.push(gbs(bytes, f64::from(r.device_ms)));
                    Ok(())
                };
                if rep % 2 == 0 {
                    x()?;
                    rs.push(gbs(bytes, f64::from(raw.run())));
                } else {
                    rs.push(gbs(bytes, f64::from(raw.run())));
                    x()?;
                }
            }
            let row = PipeRow {
                streams,
                chunk_mib,
                chunks,
                x: stat(&xs),
                raw: stat(&rs),
            };
            eprintln!(
                "  pipeline {streams} stream(s) × {chunks} chunks of {chunk_mib} MiB: xstream {:.2} GB/s, raw {:.2} GB/s ({:.1}%)",
                row.x.med,
                row.raw.med,
                row.x.med / row.raw.med * 100.0
            );
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Page-locked copy bandwidth: `copy_to_device` / `copy_to_host` vs raw async copies of the
/// same size on one stream (k copies then a synchronize, host wall).
pub fn bandwidth(dev: &CudaDevice) -> Result<Vec<BwRow>, String> {
    let e = |r: xstream_core::Error| r.to_string();
    let s = dev
        .create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING))
        .map_err(e)?;
    let rs = raw_stream();
    let mut rows = Vec::new();
    for mib in [1usize, 64, 256] {
        let len = mib << 20;
        let k = (1024 / mib).clamp(4, 256);
        let mut hb = dev.alloc_pinned(len, &PinnedAllocDesc::new()).map_err(e)?;
        let db = dev.alloc(len).map_err(e)?;
        let rh = host_alloc(len);
        let rd = dev_alloc(len);
        for dir in ["H2D", "D2H"] {
            let mut x = |n: usize| -> Result<f64, String> {
                let t = Instant::now();
                for _ in 0..n {
                    if dir == "H2D" {
                        s.copy_to_device(&hb, 0, &db, 0, len).map_err(e)?;
                    } else {
                        s.copy_to_host(&db, 0, &mut hb, 0, len).map_err(e)?;
                    }
                }
                s.synchronize().map_err(e)?;
                Ok(gbs(len * n, t.elapsed().as_secs_f64() * 1e3))
            };
            let r = |n: usize| -> f64 {
                let t = Instant::now();
                for _ in 0..n {
                    // SAFETY: live page-locked block and device allocation of `len` bytes,
                    // live stream; synchronized below before anything else touches them.
                    unsafe {
                        if dir == "H2D" {
                            ck(
                                sys::cuMemcpyHtoDAsync_v2(rd, rh as *const c_void, len, rs),
                                "HtoD",
                            );
                        } else {
                            ck(
                                sys::cuMemcpyDtoHAsync_v2(rh as *mut c_void, rd, len, rs),
                                "DtoH",
                            );
                        }
                    }
                }
                raw_sync(rs);
                gbs(len * n, t.elapsed().as_secs_f64() * 1e3)
            };
            x(2)?;
            r(2);
            let (mut xs, mut raws) = (Vec::new(), Vec::new());
            for rep in 0..REPS {
                if rep % 2 == 0 {
                    xs.push(x(k)?);
                    raws.push(r(k));
                } else {
                    raws.push(r(k));
                    xs.push(x(k)?);
                }
            }
            let row = BwRow {
                dir,
                mib,
                x: stat(&xs),
                raw: stat(&raws),
            };
            eprintln!(
                "  page-locked {dir} {mib} MiB: xstream {:.2} GB/s, raw {:.2} GB/s ({:.1}%)",
                row.x.med,
                row.raw.med,
                row.x.med / row.raw.med * 100.0
            );
            rows.push(row);
        }
        // SAFETY: synchronized above; released once.
        unsafe {
            let _ = sys::cuMemFreeHost(rh as *mut c_void);
            let _ = sys::cuMemFree_v2(rd);
        }
        let _ = db.len();
    }
    // SAFETY: idle stream made here.
    unsafe {
        let _ = sys::cuStreamDestroy_v2(rs);
    }
    Ok(rows)
}

/// The measured cells of a row: xstream, raw, their ratio and the verdict against `min_pct`.
fn cells(x: Stat, raw: Stat, min_pct: f64) -> String {
    let ratio = x.med / raw.med * 100.0;
    format!(
        "{:.2} ({:.2}–{:.2}) | {:.2} ({:.2}–{:.2}) | {ratio:.1}% | ≥ {min_pct:.0}%: {} |",
        x.med,
        x.p10,
        x.p90,
        raw.med,
        raw.p10,
        raw.p90,
        if ratio >= min_pct { "PASS" } else { "FAIL" }
    )
}

/// The Markdown of the data-path rows.
pub fn markdown(pipes: &[PipeRow], bws: &[BwRow]) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\n**Demo pipeline vs the same pipeline on the raw driver** (GB/s end to end over the device timeline, median (p10–p90) of {REPS} reps, {ROUNDS} LCG rounds, page-locked host buffers)\n"
    );
    md.push_str("| streams | chunks × size | xstream | raw | xstream / raw | target |\n|---:|---|---:|---:|---:|---|\n");
    for r in pipes {
        let _ = writeln!(
            md,
            "| {} | {} × {} MiB | {}",
            r.streams,
            r.chunks,
            r.chunk_mib,
            cells(r.x, r.raw, 85.0)
        );
    }
    for mib in [1usize, 64] {
        let get = |n: usize| {
            pipes
                .iter()
                .find(|r| r.streams == n && r.chunk_mib == mib)
                .map(|r| r.x.med)
        };
        if let (Some(a), Some(b)) = (get(1), get(4)) {
            let _ = writeln!(
                md,
                "\n4 streams vs 1 stream, {mib} MiB chunks (xstream): {:.2}× (target ≥ 1.8×: {})",
                b / a,
                if b / a >= 1.8 { "PASS" } else { "FAIL" }
            );
        }
    }
    let _ = writeln!(
        md,
        "\n**Page-locked copy bandwidth** (GB/s, one stream, k back-to-back copies + synchronize, median (p10–p90) of {REPS} reps)\n"
    );
    md.push_str("| direction | size | xstream | raw | xstream / raw | target |\n|---|---:|---:|---:|---:|---|\n");
    for r in bws {
        let _ = writeln!(
            md,
            "| {} | {} MiB | {}",
            r.dir,
            r.mib,
            cells(r.x, r.raw, 90.0)
        );
    }
    md
}

/// Heap allocations per call, by variant.
pub(crate) type AllocRows = Vec<(&'static str, f64)>;

/// One typed-copy row of the main table and the bytes each of its operations moves.
pub(crate) struct CopyRow {
    pub row: Row,
    pub bytes: usize,
}

/// Sizes of the typed-copy rows: (bytes, copies per batch). 4 KiB is latency-bound (host ns
/// per copy), 64 MiB bandwidth-bound (few copies, to keep the bench short).
const TYPED_SIZES: [(usize, u64); 2] = [(4 << 10, 1000), (64 << 20, 4)];

fn size_label(len: usize) -> String {
    if len >= 1 << 20 {
        format!("{} MiB", len >> 20)
    } else {
        format!("{} KiB", len >> 10)
    }
}

/// A row's label, with the error of its xstream side's first call when that failed (the row
/// then has no xstream cell and its verdict reads FAIL).
fn label(op: String, err: &Option<String>) -> String {
    match err {
        None => op,
        Some(e) => format!("{op} — xstream failed: {e}"),
    }
}

/// The typed copies (`write_from_blocking` / `read_into_blocking` from pageable slices, `write_from_host` /
/// `read_into_host` with page-locked host buffers) against the raw driver on the same bytes,
/// in the table's method ([`compare`]: host ns per copy, interleaved repeats), with the
/// target "≥ 97% of raw's rate". Pageable rows compare against `cuMemcpy*Async` from or into
/// the same `Vec` followed by `cuStreamSynchronize` (`write_from_blocking` and `read_into_blocking` return when
/// the slice may be reused or holds the bytes); page-locked rows against the bare async copy
/// between `cuMemHostAlloc` memory and `cuMemAlloc` memory, timing the batch of copies and
/// the synchronize that ends it (so that 64 MiB measures the bandwidth, not the enqueue).
/// Also returns heap allocations per 4 KiB typed copy (this thread, counted by the bench's
/// allocator).
pub(crate) fn typed_copy_rows(
    dev: &CudaDevice,
    xa: &CudaStream,
    ra: sys::CUstream,
) -> Result<(Vec<CopyRow>, AllocRows), String> {
    let e = |r: xstream_core::Error| r.to_string();
    let mut rows = Vec::new();
    let mut allocs = Vec::new();
    for (len, n) in TYPED_SIZES {
        let size = size_label(len);
        let words = len / 4;
        let db = dev.alloc(len).map_err(e)?;
        let mut hb = dev.alloc_pinned(len, &PinnedAllocDesc::new()).map_err(e)?;
        let rd = dev_alloc(len);
        let rh = host_alloc(len);
        // Pageable memory, every page written (resident) before any copy.
        let pattern: Vec<u32> = (0..words as u32).map(|i| i ^ 0x5a5a_5a5a).collect();
        let host = RefCell::new(pattern.clone());

        // First calls of each operation, checking the bytes they move. An operation that
        // fails here gets no xstream cell (its row reads FAIL, the error in its label); the
        // rest of the bench still runs.
        let check = |same: bool, what: &str| -> Result<(), String> {
            if same {
                Ok(())
            } else {
                Err(format!(
                    "{what}: the bytes read back differ from those written"
                ))
            }
        };
        let mut back = vec![0u32; words];
        let pageable_err = (|| -> Result<(), String> {
            xa.write_from_blocking(&db, &pattern[..]).map_err(e)?;
            xa.read_into_blocking(&db, &mut back[..]).map_err(e)?;
            check(back == pattern, "write_from_blocking + read_into_blocking")
        })()
        .err();
        let flipped: Vec<u32> = pattern.iter().map(|w| !w).collect();
        let h2d_err = (|| -> Result<(), String> {
            hb.typed_mut::<u32>().map_err(e)?.copy_from_slice(&flipped);
            xa.write_from_host(&hb, 0, &db).map_err(e)?;
            xa.read_into_blocking(&db, &mut back[..]).map_err(e)?;
            check(back == flipped, "write_from_host + read_into_blocking")
        })()
        .err();
        let d2h_err = (|| -> Result<(), String> {
            xa.write_from_blocking(&db, &pattern[..]).map_err(e)?;
            xa.read_into_host(&db, &mut hb, 0).map_err(e)?;
            let got = hb.typed::<u32>().map_err(e)?;
            check(got == &pattern[..], "write_from_blocking + read_into_host")
        })()
        .err();
        xa.synchronize().map_err(e)?;
        for err in [&pageable_err, &h2d_err, &d2h_err].into_iter().flatten() {
            eprintln!("  typed copies {size}: xstream failed: {err}");
        }

        rows.push(CopyRow {
            bytes: len,
            row: compare(
                &label(
                    format!(
                        "write_from_blocking {size} (pageable &[u32]) vs cuMemcpyHtoDAsync + sync"
                    ),
                    &pageable_err,
                ),
                n,
                Target::RatePct(97.0),
                (pageable_err.is_none()).then(|| -> Batch<'_> {
                    Box::new(|n| {
                        let h = host.borrow();
                        timed(n, || xs(xa.write_from_blocking(&db, &h[..])))
                    })
                }),
                Some(Box::new(|n| {
                    let h = host.borrow();
                    timed(n, || {
                        // SAFETY: `h` is a live slice of `len` bytes and `rd` a device block
                        // of `len` bytes; the synchronize below ends the copy before `h` is
                        // used again.
                        ck(
                            unsafe {
                                sys::cuMemcpyHtoDAsync_v2(rd, h.as_ptr() as *const c_void, len, ra)
                            },
                            "cuMemcpyHtoDAsync",
                        );
                        raw_sync(ra);
                    })
                })),
                None,
            ),
        });
        rows.push(CopyRow {
            bytes: len,
            row: compare(
                &label(
                    format!("read_into_blocking {size} (pageable &mut [u32]) vs cuMemcpyDtoHAsync + sync"),
                    &pageable_err,
                ),
                n,
                Target::RatePct(97.0),
                (pageable_err.is_none()).then(|| -> Batch<'_> {
                    Box::new(|n| {
                        let mut h = host.borrow_mut();
                        timed(n, || xs(xa.read_into_blocking(&db, &mut h[..])))
                    })
                }),
                Some(Box::new(|n| {
                    let mut h = host.borrow_mut();
                    timed(n, || {
                        // SAFETY: `h` is a live, exclusively borrowed slice of `len` bytes and
                        // `rd` a device block of `len` bytes; the synchronize below ends the
                        // copy before `h` is touched again.
                        ck(
                            unsafe {
                                sys::cuMemcpyDtoHAsync_v2(
                                    h.as_mut_ptr() as *mut c_void,
                                    rd,
                                    len,
                                    ra,
                                )
                            },
                            "cuMemcpyDtoHAsync",
                        );
                        raw_sync(ra);
                    })
                })),
                None,
            ),
        });
        rows.push(CopyRow {
            bytes: len,
            row: compare(
                &label(
                    format!(
                        "write_from_host {size} (page-locked, async; batch + sync) vs cuMemcpyHtoDAsync"
                    ),
                    &h2d_err,
                ),
                n,
                Target::RatePct(97.0),
                (h2d_err.is_none()).then(|| -> Batch<'_> {
                    Box::new(|n| {
                        let t = Instant::now();
                        for _ in 0..n {
                            xs(xa.write_from_host(&hb, 0, &db));
                        }
                        xs(xa.synchronize());
                        t.elapsed()
                    })
                }),
                Some(Box::new(|n| {
                    let t = Instant::now();
                    for _ in 0..n {
                        // SAFETY: `rh` is a live page-locked block and `rd` a device block,
                        // both of `len` bytes; nothing writes `rh` while copies are pending
                        // (the stream is synchronized after the batch).
                        ck(
                            unsafe { sys::cuMemcpyHtoDAsync_v2(rd, rh as *const c_void, len, ra) },
                            "cuMemcpyHtoDAsync",
                        );
                    }
                    raw_sync(ra);
                    t.elapsed()
                })),
                None,
            ),
        });
        let hbm = RefCell::new(hb);
        rows.push(CopyRow {
            bytes: len,
            row: compare(
                &label(
                    format!(
                        "read_into_host {size} (page-locked, async; batch + sync) vs cuMemcpyDtoHAsync"
                    ),
                    &d2h_err,
                ),
                n,
                Target::RatePct(97.0),
                (d2h_err.is_none()).then(|| -> Batch<'_> {
                    Box::new(|n| {
                        let mut h = hbm.borrow_mut();
                        let t = Instant::now();
                        for _ in 0..n {
                            xs(xa.read_into_host(&db, &mut h, 0));
                        }
                        xs(xa.synchronize());
                        t.elapsed()
                    })
                }),
                Some(Box::new(|n| {
                    let t = Instant::now();
                    for _ in 0..n {
                        // SAFETY: `rh` is a live page-locked block and `rd` a device block,
                        // both of `len` bytes; nothing reads `rh` while copies are pending
                        // (the stream is synchronized after the batch).
                        ck(
                            unsafe { sys::cuMemcpyDtoHAsync_v2(rh as *mut c_void, rd, len, ra) },
                            "cuMemcpyDtoHAsync",
                        );
                    }
                    raw_sync(ra);
                    t.elapsed()
                })),
                None,
            ),
        });

        // The caller's own memory registered in place for a scope (`with_registered_host`):
        // uploads against the bare async copy from the same registered memory.
        let mut user: Vec<u32> = pattern.iter().map(|w| w.rotate_left(7)).collect();
        let user_ptr = user.as_ptr() as *const c_void;
        let want_user = user.clone();
        let reg_row = dev
            .with_registered_host(&mut user, |reg| {
                let first = (|| -> Result<(), String> {
                    reg.upload(xa, 0, &db).map_err(e)?;
                    xa.read_into_blocking(&db, &mut back[..]).map_err(e)?;
                    check(back == want_user, "registered upload + read_into_blocking")
                })()
                .err();
                if let Some(err) = &first {
                    eprintln!("  typed copies {size}: xstream failed: {err}");
                }
                compare(
                    &label(
                        format!(
                            "registered upload {size} (caller's Vec registered in place, async; batch + sync) vs cuMemcpyHtoDAsync from the same memory"
                        ),
                        &first,
                    ),
                    n,
                    Target::RatePct(97.0),
                    first.is_none().then(|| -> Batch<'_> {
                        Box::new(|n| {
                            let t = Instant::now();
                            for _ in 0..n {
                                xs(reg.upload(xa, 0, &db));
                            }
                            xs(xa.synchronize());
                            t.elapsed()
                        })
                    }),
                    Some(Box::new(|n| {
                        let t = Instant::now();
                        for _ in 0..n {
                            // SAFETY: `user_ptr` is the registered, live vector of `len` bytes
                            // (borrowed by the scope, which outlives these copies) and `rd` a
                            // device block of `len` bytes; the stream is synchronized after
                            // the batch.
                            ck(
                                unsafe { sys::cuMemcpyHtoDAsync_v2(rd, user_ptr, len, ra) },
                                "cuMemcpyHtoDAsync",
                            );
                        }
                        raw_sync(ra);
                        t.elapsed()
                    })),
                    None,
                )
            })
            .map_err(e)?;
        rows.push(CopyRow {
            bytes: len,
            row: reg_row,
        });

        let all_ok = pageable_err.is_none() && h2d_err.is_none() && d2h_err.is_none();
        if len == TYPED_SIZES[0].0 && all_ok {
            let xsync = || xs(xa.synchronize());
            let mut h = host.borrow_mut();
            let mut hb = hbm.borrow_mut();
            let mut count = |name: &'static str, f: &mut dyn FnMut()| {
                let a = per_launch(f);
                xsync();
                eprintln!("  allocations per copy: {name}: {a:.4}");
                allocs.push((name, a));
            };
            count("xstream write_from_blocking 4 KiB (pageable)", &mut || {
                xs(xa.write_from_blocking(&db, &h[..]));
            });
            count("xstream read_into_blocking 4 KiB (pageable)", &mut || {
                xs(xa.read_into_blocking(&db, &mut h[..]));
            });
            count("xstream write_from_host 4 KiB (page-locked)", &mut || {
                xs(xa.write_from_host(&hb, 0, &db));
            });
            count("xstream read_into_host 4 KiB (page-locked)", &mut || {
                xs(xa.read_into_host(&db, &mut hb, 0));
            });
        }
        xs(xa.synchronize());
        // SAFETY: the raw stream was synchronized after every batch; released once.
        unsafe {
            let _ = sys::cuMemFreeHost(rh as *mut c_void);
            let _ = sys::cuMemFree_v2(rd);
        }
    }
    Ok((rows, allocs))
}

/// The typed-copy rows as GB/s (bytes per copy over the row's ns per copy; the verdicts are
/// in the main table).
pub(crate) fn typed_markdown(rows: &[CopyRow]) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\n**Typed copies as GB/s** (the typed-copy rows of the table above: bytes per copy / ns per copy, median (p10–p90) of {REPS} reps)\n"
    );
    md.push_str("| operation | xstream GB/s | raw GB/s | xstream / raw |\n|---|---:|---:|---:|\n");
    for r in rows {
        let (Some(x), Some(raw)) = (r.row.x, r.row.raw) else {
            continue;
        };
        let g = |ns: f64| r.bytes as f64 / ns;
        let _ = writeln!(
            md,
            "| {} | {:.2} ({:.2}–{:.2}) | {:.2} ({:.2}–{:.2}) | {:.1}% |",
            r.row.op,
            g(x.med),
            g(x.p90),
            g(x.p10),
            g(raw.med),
            g(raw.p90),
            g(raw.p10),
            raw.med / x.med * 100.0
        );
    }
    md
}

/// The enqueue of a 64 MiB upload while the stream is held by a 50 ms device-side delay:
/// `with_registered_host`'s upload returns at once, `write_from_blocking` (synchronous with respect to
/// its slice) only after the delay. One markdown paragraph, with its verdict: PASS when the
/// registered upload's enqueue took under 1% of the delay and `write_from_blocking` at least the delay.
pub(crate) fn held_enqueue(dev: &CudaDevice, xa: &CudaStream) -> Result<String, String> {
    use std::time::Duration;
    let e = |r: xstream_core::Error| r.to_string();
    const LEN: usize = 64 << 20;
    const HOLD: Duration = Duration::from_millis(50);
    let db = dev.alloc(LEN).map_err(e)?;
    let mut user = vec![0x3cu8; LEN];
    xa.synchronize().map_err(e)?;
    let (reg_t, reg_done) = dev
        .with_registered_host(&mut user, |reg| -> Result<(Duration, Duration), String> {
            let t0 = Instant::now();
            xa.launch_builtin(xstream_core::Kernel::Delay(HOLD))
                .map_err(e)?;
            let t = Instant::now();
            reg.upload(xa, 0, &db).map_err(e)?;
            let enq = t.elapsed();
            xa.synchronize().map_err(e)?;
            Ok((enq, t0.elapsed()))
        })
        .map_err(e)??;
    let src = vec![0x5au8; LEN];
    xa.launch_builtin(xstream_core::Kernel::Delay(HOLD))
        .map_err(e)?;
    let t = Instant::now();
    xa.write_from_blocking(&db, &src[..]).map_err(e)?;
    let wf_t = t.elapsed();
    xa.synchronize().map_err(e)?;
    let ok = reg_t < HOLD / 100 && wf_t >= HOLD && reg_done >= HOLD;
    let line = format!(
        "enqueue of a 64 MiB upload behind a {} ms device-side delay: registered upload {:.1} µs (the \
         whole delay + copy {:.1} ms), write_from_blocking {:.1} ms: {}\n",
        HOLD.as_millis(),
        reg_t.as_secs_f64() * 1e6,
        reg_done.as_secs_f64() * 1e3,
        wf_t.as_secs_f64() * 1e3,
        if ok { "PASS" } else { "FAIL" }
    );
    eprint!("  {line}");
    Ok(line)
}
