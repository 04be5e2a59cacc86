//! NCCL all-reduce through xstream's communicator against raw `ncclAllReduce`, in one process,
//! on the same devices and contexts, interleaved, so that both sides are measured in the same
//! state (the same library, the same warm contexts, the same clocks).
//!
//! A plain `main` (no criterion), for the GPU machine; built with the benches' `nccl` feature
//! (`scripts/gpu-bundle.sh` does) and run by `scripts/gpu-collectives.sh` (step `raw`, which
//! puts a `libnccl.so` on the loader's path), or directly as `gpu-bundle/bench/gpu_nccl`. Without a CUDA device or without libnccl it
//! prints `SKIP: <reason>` and exits 0; a wrong result or a failed call exits 1.
//!
//! # Method
//! - Ranks: every visible device (`XS_RANKS` picks fewer), one thread driving them all, the
//!   calls of one iteration grouped (`xstream_core::collective::group` / raw
//!   `ncclGroupStart`/`ncclGroupEnd`) when there are several ranks.
//! - xstream side: `CudaBackend::init_all`, non-blocking xstream streams, buffers from
//!   `Device::alloc`, `Communicator::all_reduce` (f32, sum, out of place).
//! - raw side: `ncclCommInitAll` over the same devices, `cuStreamCreate(NON_BLOCKING)` and
//!   `cuMemAlloc` in each device's primary context (the one xstream uses), the context made
//!   current before each rank's call (as a raw program sets its device), `ncclAllReduce`.
//! - Sizes from 8 B to `XS_MAX` bytes (default 1 GiB), doubling. Per size: one checked call on
//!   each side, then a warm-up batch,
//!   then [`REPS`] repeats; each repeat times a batch of `XS_ITERS` (default 20) back-to-back
//!   calls followed by a synchronize of every stream (like nccl-tests), once per side, the
//!   order alternating between repeats. A cell is the median time per call (p10–p90).
//! - The check, per size and side: every element of every rank's receive buffer is first set to
//!   a NaN pattern (so a call that wrote nothing, or only part, leaves NaNs), every rank's input
//!   is written whole with a value that depends on the rank, the element and the size
//!   ([`input`]), and after the all-reduce every element of every rank is read back and compared
//!   with the exact sum (small integers, exact in f32). A result left over from the previous
//!   size, a short write or a wrong offset fails the bench (exit 1).
//! - algbw = bytes / time; busbw = algbw × 2(n−1)/n (0 for one rank, where algbw is shown).
//!
//! Output: a Markdown table (also to `$OUT/nccl_bench.md` when `$OUT` is set) and verdicts for
//! the targets: bandwidth ≥ 95% of raw at ≥ 64 MiB, latency at 8 B within 2 µs of raw.

use std::ffi::c_void;
use std::fmt::Write as _;
use std::ptr;
use std::time::Instant;

use cudarc::driver::sys;
use cudarc::nccl::sys as nccl;
use xstream_core::collective::{group, CommOf};
use xstream_core::{
    Backend, CollectiveBackend, Communicator, DataType, Device, Error, ReduceOp, Stream,
    StreamDesc, StreamFlags,
};
use xstream_cuda::{CudaBackend, CudaDevice};

/// Timed repeats per size and side.
const REPS: usize = 7;
/// The bit pattern the receive buffers are poisoned with before each checked call (a NaN, which
/// no correct sum equals).
const POISON: u32 = 0x7fc0_dead;

/// Rank `rank`'s input element `j` for the check at size `count` elements: small integers
/// (exact in f32, and so are their sums), different from one rank, element and size to the next.
fn input(rank: usize, j: usize, count: usize) -> f32 {
    ((j.wrapping_mul(7) + rank * 13 + count.trailing_zeros() as usize) % 61) as f32
}

/// The exact all-reduce (sum) of element `j` over `world` ranks.
fn expected(world: usize, j: usize, count: usize) -> f32 {
    (0..world).map(|r| input(r, j, count)).sum()
}

/// Rank `rank`'s whole input for `count` elements, as little-endian bytes.
fn input_bytes(rank: usize, count: usize) -> Vec<u8> {
    (0..count)
        .flat_map(|j| input(rank, j, count).to_le_bytes())
        .collect()
}

/// The first element of `bytes` (f32, little-endian) that is not the expected sum.
fn first_wrong(bytes: &[u8], world: usize, count: usize) -> Option<(usize, f32)> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .enumerate()
        .find(|&(j, v)| v.to_bits() != expected(world, j, count).to_bits())
}
/// `CU_STREAM_NON_BLOCKING`.
const CU_STREAM_NON_BLOCKING: u32 = 1;

/// Why the bench stopped: nothing to measure on this machine, or a real failure.
enum Stop {
    Skip(String),
    Fail(String),
}

type R<T> = std::result::Result<T, Stop>;

fn fail(what: &str, e: impl std::fmt::Display) -> Stop {
    Stop::Fail(format!("{what}: {e}"))
}

fn main() {
    match run() {
        Ok(()) => {}
        Err(Stop::Skip(reason)) => println!("SKIP: gpu_nccl: {reason}"),
        Err(Stop::Fail(e)) => {
            eprintln!("gpu_nccl: FAILED: {e}");
            std::process::exit(1);
        }
    }
}

fn env_usize(name: &str, default: usize) -> R<usize> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(v) => parse_size(&v).ok_or_else(|| fail(name, format!("not a size: {v:?}"))),
    }
}

/// `8`, `64K`, `1M`, `1G` (binary multiples).
fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mul) = match s.chars().last()?.to_ascii_uppercase() {
        'K' => (&s[..s.len() - 1], 1 << 10),
        'M' => (&s[..s.len() - 1], 1 << 20),
        'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().ok()?.checked_mul(mul)
}

fn ck(r: sys::CUresult, what: &str) -> R<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(fail(what, format!("{r:?}")))
    }
}

fn nck(r: nccl::ncclResult_t, what: &str) -> R<()> {
    if r == nccl::ncclResult_t::ncclSuccess {
        Ok(())
    } else {
        Err(fail(what, format!("{r:?}")))
    }
}

/// One rank of the raw side: its context, stream, buffers and communicator.
struct RawRank {
    ctx: sys::CUcontext,
    stream: sys::CUstream,
    send: sys::CUdeviceptr,
    recv: sys::CUdeviceptr,
    comm: nccl::ncclComm_t,
}

impl RawRank {
    fn bind(&self) -> R<()> {
        // SAFETY: `ctx` is a device's primary context, retained by the xstream device that
        // outlives every raw rank.
        ck(unsafe { sys::cuCtxSetCurrent(self.ctx) }, "cuCtxSetCurrent")
    }
}

/// Creates the raw ranks over the same devices (their primary contexts) and one communicator
/// clique with `ncclCommInitAll`.
fn raw_ranks(devs: &[CudaDevice], max: usize) -> R<Vec<RawRank>> {
    let mut ranks = Vec::with_capacity(devs.len());
    for d in devs {
        let ctx = d.raw_context().as_ptr();
        // SAFETY: the primary context of a live xstream device.
        ck(unsafe { sys::cuCtxSetCurrent(ctx) }, "cuCtxSetCurrent")?;
        let mut stream = ptr::null_mut();
        ck(
            // SAFETY: valid out-pointer; the device's context is current.
            unsafe { sys::cuStreamCreate(&mut stream, CU_STREAM_NON_BLOCKING) },
            "cuStreamCreate",
        )?;
        let (mut send, mut recv) = (0, 0);
        // SAFETY: valid out-pointers; context current; `max` bytes each.
        ck(unsafe { sys::cuMemAlloc_v2(&mut send, max) }, "cuMemAlloc")?;
        // SAFETY: as above.
        ck(unsafe { sys::cuMemAlloc_v2(&mut recv, max) }, "cuMemAlloc")?;
        ranks.push(RawRank {
            ctx,
            stream,
            send,
            recv,
            comm: ptr::null_mut(),
        });
    }
    let mut comms = vec![ptr::null_mut(); devs.len()];
    let list: Vec<i32> = devs.iter().map(CudaDevice::cu_device).collect();
    nck(
        // SAFETY: `comms` has room for one communicator per listed device; `list` holds valid
        // device ordinals. libnccl is loaded: xstream's init_all ran first and probed it.
        unsafe { nccl::ncclCommInitAll(comms.as_mut_ptr(), list.len() as i32, list.as_ptr()) },
        "ncclCommInitAll",
    )?;
    for (r, c) in ranks.iter_mut().zip(comms) {
        r.comm = c;
    }
    Ok(ranks)
}

fn raw_free(ranks: &[RawRank]) {
    for r in ranks {
        let _ = r.bind();
        // SAFETY: every handle below was created by `raw_ranks` and is released once, after
        // the last synchronize of its stream.
        unsafe {
            let _ = sys::cuStreamSynchronize(r.stream);
            let _ = nccl::ncclCommDestroy(r.comm);
            let _ = sys::cuMemFree_v2(r.send);
            let _ = sys::cuMemFree_v2(r.recv);
            let _ = sys::cuStreamDestroy_v2(r.stream);
        }
    }
}

/// One iteration on the raw side: every rank's `ncclAllReduce`, grouped when several.
fn raw_issue(ranks: &[RawRank], count: usize) -> R<()> {
    let many = ranks.len() > 1;
    if many {
        // SAFETY: paired with the `ncclGroupEnd` below on this thread.
        nck(unsafe { nccl::ncclGroupStart() }, "ncclGroupStart")?;
    }
    for r in ranks {
        r.bind()?;
        nck(
            // SAFETY: `send`/`recv` hold `max >= count * 4` bytes on the communicator's device;
            // the stream belongs to that device; the buffers outlive the stream's work (freed
            // only after a synchronize).
            unsafe {
                nccl::ncclAllReduce(
                    r.send as *const c_void,
                    r.recv as *mut c_void,
                    count,
                    nccl::ncclDataType_t::ncclFloat32,
                    nccl::ncclRedOp_t::ncclSum,
                    r.comm,
                    r.stream as nccl::cudaStream_t,
                )
            },
            "ncclAllReduce",
        )?;
    }
    if many {
        // SAFETY: closes the group opened above.
        nck(unsafe { nccl::ncclGroupEnd() }, "ncclGroupEnd")?;
    }
    Ok(())
}

fn raw_sync(ranks: &[RawRank]) -> R<()> {
    for r in ranks {
        ck(
            // SAFETY: a live stream of this program.
            unsafe { sys::cuStreamSynchronize(r.stream) },
            "cuStreamSynchronize",
        )?;
    }
    Ok(())
}

/// Poisons every raw receive buffer, writes every rank's whole input, runs one all-reduce and
/// checks every element of every rank's result.
fn raw_check(ranks: &[RawRank], count: usize) -> R<()> {
    let inputs: Vec<Vec<u8>> = (0..ranks.len()).map(|r| input_bytes(r, count)).collect();
    for (r, data) in ranks.iter().zip(&inputs) {
        r.bind()?;
        ck(
            // SAFETY: `recv` holds at least `count` f32; the stream is live.
            unsafe { sys::cuMemsetD32Async(r.recv, POISON, count, r.stream) },
            "cuMemsetD32Async",
        )?;
        ck(
            // SAFETY: `send` holds at least `count * 4` bytes and `data` has exactly that many;
            // the synchronous copy completes before `data` can be dropped.
            unsafe { sys::cuMemcpyHtoD_v2(r.send, data.as_ptr() as *const c_void, count * 4) },
            "cuMemcpyHtoD",
        )?;
    }
    raw_sync(ranks)?;
    raw_issue(ranks, count)?;
    raw_sync(ranks)?;
    for (i, r) in ranks.iter().enumerate() {
        r.bind()?;
        let mut host = vec![0u8; count * 4];
        ck(
            // SAFETY: `host` has room for `count` f32; `recv` holds at least that many; the
            // stream's work is complete.
            unsafe { sys::cuMemcpyDtoH_v2(host.as_mut_ptr() as *mut c_void, r.recv, count * 4) },
            "cuMemcpyDtoH",
        )?;
        if let Some((j, v)) = first_wrong(&host, ranks.len(), count) {
            return Err(Stop::Fail(format!(
                "raw all_reduce of {count} f32: rank {i} element {j} is {v} (want {})",
                expected(ranks.len(), j, count)
            )));
        }
    }
    Ok(())
}

/// The xstream side: communicators, streams and buffers.
struct Xs {
    comms: Vec<CommOf<CudaBackend>>,
    streams: Vec<<CudaBackend as Backend>::Stream>,
    bufs: Vec<(
        <CudaBackend as Backend>::Buffer,
        <CudaBackend as Backend>::Buffer,
    )>,
}

impl Xs {
    fn issue(&self, count: usize) -> xstream_core::Result<()> {
        let one = || {
            for ((c, s), (send, recv)) in self.comms.iter().zip(&self.streams).zip(&self.bufs) {
                c.all_reduce(send, recv, count, DataType::F32, ReduceOp::Sum, s)?;
            }
            Ok(())
        };
        if self.comms.len() == 1 {
            one()
        } else {
            let refs: Vec<_> = self.comms.iter().collect();
            group(&refs, one)
        }
    }

    fn sync(&self) -> xstream_core::Result<()> {
        for s in &self.streams {
            s.synchronize()?;
        }
        Ok(())
    }

    /// Poisons every receive buffer, writes every rank's whole input, runs one all-reduce and
    /// checks every element of every rank's result.
    fn check(&self, count: usize) -> R<()> {
        let world = self.comms.len();
        for (r, (s, (send, recv))) in self.streams.iter().zip(&self.bufs).enumerate() {
            s.write(recv, 0, POISON.to_le_bytes().repeat(count))
                .map_err(|e| fail("write", e))?;
            s.write(send, 0, input_bytes(r, count))
                .map_err(|e| fail("write", e))?;
        }
        self.sync().map_err(|e| fail("synchronize", e))?;
        self.issue(count).map_err(|e| fail("all_reduce", e))?;
        self.sync().map_err(|e| fail("synchronize", e))?;
        for (i, (s, (_, recv))) in self.streams.iter().zip(&self.bufs).enumerate() {
            let rb = s.read(recv, 0, count * 4).map_err(|e| fail("read", e))?;
            s.synchronize().map_err(|e| fail("synchronize", e))?;
            let bytes = rb.take().map_err(|e| fail("read", e))?;
            if let Some((j, v)) = first_wrong(&bytes, world, count) {
                return Err(Stop::Fail(format!(
                    "xstream all_reduce of {count} f32: rank {i} element {j} is {v} (want {})",
                    expected(world, j, count)
                )));
            }
        }
        Ok(())
    }
}

/// Median, p10 and p90 (nearest rank) of µs per call.
fn stat(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((q * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)];
    (at(0.5), at(0.1), at(0.9))
}

/// The check must be able to fail: a poisoned buffer (a call that wrote nothing), the previous
/// size's result left in place, and one rank's input (a one-rank "sum" that copied nothing into a
/// two-rank result) are each reported wrong, and the right answer is not. Runs before anything
/// else, with or without a GPU.
fn self_test() -> R<()> {
    for world in [1usize, 2, 8] {
        for count in [2usize, 1 << 10, 1 << 16] {
            let right: Vec<u8> = (0..count)
                .flat_map(|j| expected(world, j, count).to_le_bytes())
                .collect();
            let stale: Vec<u8> = (0..count)
                .flat_map(|j| expected(world, j, count / 2).to_le_bytes())
                .collect();
            let poisoned = POISON.to_le_bytes().repeat(count);
            let mut one_off = right.clone();
            one_off[4 * (count - 1)..].copy_from_slice(&(-1.0f32).to_le_bytes());
            let mut wrong = vec![
                ("poisoned", poisoned),
                ("previous size", stale),
                ("last element", one_off),
            ];
            if world > 1 {
                wrong.push(("one rank's input", input_bytes(0, count)));
            }
            if first_wrong(&right, world, count).is_some() {
                return Err(fail(
                    "self test",
                    format!("the right result is reported wrong ({world} ranks, {count} f32)"),
                ));
            }
            for (what, bytes) in wrong {
                if first_wrong(&bytes, world, count).is_none() {
                    return Err(fail(
                        "self test",
                        format!(
                            "a wrong result ({what}) passes the check ({world} ranks, {count} f32)"
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

fn run() -> R<()> {
    self_test()?;
    println!("gpu_nccl: self test of the result check passed (it rejects poisoned, stale and partial results)");
    if let Err(e) = CudaBackend::availability() {
        return Err(Stop::Skip(format!("no CUDA device: {e}")));
    }
    let n = CudaBackend::device_count().map_err(|e| fail("device_count", e))?;
    let ranks = env_usize("XS_RANKS", n)?.clamp(1, n.max(1));
    let max = env_usize("XS_MAX", 1 << 30)?.max(8);
    let iters = env_usize("XS_ITERS", 20)?.max(1);
    let devs = (0..ranks)
        .map(CudaBackend::open)
        .collect::<xstream_core::Result<Vec<CudaDevice>>>()
        .map_err(|e| fail("open", e))?;
    let comms = match CudaBackend::init_all(&devs) {
        Ok(c) => c,
        Err(Error::NotAvailable { reason, .. }) => {
            return Err(Stop::Skip(format!("NCCL not available: {reason}")))
        }
        Err(e) => return Err(fail("init_all", e)),
    };
    let streams = devs
        .iter()
        .map(|d| d.create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING)))
        .collect::<xstream_core::Result<Vec<_>>>()
        .map_err(|e| fail("create_stream", e))?;
    let bufs = devs
        .iter()
        .map(|d| Ok((d.alloc(max)?, d.alloc(max)?)))
        .collect::<xstream_core::Result<Vec<_>>>()
        .map_err(|e| fail("alloc", e))?;
    let xs = Xs {
        comms,
        streams,
        bufs,
    };
    let raw = raw_ranks(&devs, max)?;
    let result = sweep(&xs, &raw, &devs, max, iters);
    raw_free(&raw);
    if let Some(d) = devs.first() {
        // Later xstream calls expect their own binding; give the thread back to device 0.
        let _ = d.rebind_thread();
    }
    result
}

#[allow(clippy::too_many_lines)]
fn sweep(xs: &Xs, raw: &[RawRank], devs: &[CudaDevice], max: usize, iters: usize) -> R<()> {
    let world = devs.len();
    let bus = 2.0 * (world as f64 - 1.0) / world as f64;
    let bw_name = if world == 1 { "algbw" } else { "busbw" };
    let mut version = 0;
    nck(
        // SAFETY: valid out-pointer; libnccl is loaded.
        unsafe { nccl::ncclGetVersion(&mut version) },
        "ncclGetVersion",
    )?;
    let dev0 = devs[0].info();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "### NCCL all_reduce f32 sum, {world} rank(s) in one process: xstream vs raw `ncclAllReduce`\n\n\
         {} × {world}, NCCL {version}, {REPS} repeats of {iters} calls per size and side, \
         interleaved; µs per call: median (p10–p90); {bw_name} in GB/s from the medians\n",
        dev0.name
    );
    let _ = writeln!(
        md,
        "| size (B) | xstream µs | raw µs | xstream − raw (µs) | xstream {bw_name} | raw {bw_name} | xstream / raw |"
    );
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|---:|---:|");
    print!("{md}");
    let mut misses = Vec::new();
    let mut size = 8usize;
    while size <= max {
        let count = size / 4;
        xs.check(count)?;
        raw_check(raw, count)?;
        for _ in 0..iters.min(5) {
            xs.issue(count).map_err(|e| fail("all_reduce", e))?;
            raw_issue(raw, count)?;
        }
        xs.sync().map_err(|e| fail("synchronize", e))?;
        raw_sync(raw)?;
        let (mut tx, mut tr) = (Vec::with_capacity(REPS), Vec::with_capacity(REPS));
        for rep in 0..REPS {
            for side in 0..2 {
                let xs_turn = (side + rep) % 2 == 0;
                let t = Instant::now();
                if xs_turn {
                    for _ in 0..iters {
                        xs.issue(count).map_err(|e| fail("all_reduce", e))?;
                    }
                    xs.sync().map_err(|e| fail("synchronize", e))?;
                    tx.push(t.elapsed().as_secs_f64() * 1e6 / iters as f64);
                } else {
                    for _ in 0..iters {
                        raw_issue(raw, count)?;
                    }
                    raw_sync(raw)?;
                    tr.push(t.elapsed().as_secs_f64() * 1e6 / iters as f64);
                }
            }
        }
        for c in &xs.comms {
            c.async_error().map_err(|e| fail("async_error", e))?;
        }
        let (x, x10, x90) = stat(tx);
        let (r, r10, r90) = stat(tr);
        let bw = |us: f64| {
            let alg = size as f64 / us / 1e3;
            if world == 1 {
                alg
            } else {
                alg * bus
            }
        };
        let ratio = bw(x) / bw(r);
        let line = format!(
            "| {size} | {x:.2} ({x10:.2}–{x90:.2}) | {r:.2} ({r10:.2}–{r90:.2}) | {:+.2} | {:.2} | {:.2} | {:.1}% |",
            x - r,
            bw(x),
            bw(r),
            100.0 * ratio
        );
        println!("{line}");
        md.push_str(&line);
        md.push('\n');
        if size >= 64 << 20 && ratio < 0.95 {
            misses.push(format!("{size} B: {:.1}% of raw", 100.0 * ratio));
        }
        if size == 8 && x - r > 2.0 {
            misses.push(format!("8 B: {:+.2} µs over raw", x - r));
        }
        size *= 2;
    }
    let verdict = if misses.is_empty() {
        "MET".to_string()
    } else {
        format!("NOT MET: {}", misses.join("; "))
    };
    let tail = format!(
        "\nTargets (xstream vs raw NCCL, same process and state: ≥ 95% of raw {bw_name} at ≥ 64 MiB, \
         8 B latency within 2 µs of raw): {verdict}\n"
    );
    print!("{tail}");
    md.push_str(&tail);
    if let Ok(out) = std::env::var("OUT") {
        let p = std::path::Path::new(&out).join("nccl_bench.md");
        std::fs::write(&p, &md).map_err(|e| fail("write nccl_bench.md", e))?;
    }
    Ok(())
}
