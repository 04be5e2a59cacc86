//! `xstream collectives`: a bandwidth sweep of one collective over message sizes, printed
//! like nccl-tests (time, algorithm bandwidth, bus bandwidth), with a progress line on stderr.
//!
//! Two modes:
//! - **one process, every rank** (default): `--ranks N` communicators made with `init_all`
//!   over devices `0..N` (the host backend repeats its device when it has fewer), driven from
//!   one thread with one group per iteration;
//! - **one rank per process**, when the bootstrap environment is set (`RANK`, `WORLD_SIZE`,
//!   `LOCAL_RANK`, and the id through `XSTREAM_UNIQUE_ID`, `XSTREAM_UNIQUE_ID_FILE` or, as
//!   torchrun sets them, `MASTER_ADDR`/`MASTER_PORT`: rank 0 serves the id over TCP, see
//!   `xstream_core::collective::rendezvous`): this process opens device `LOCAL_RANK` and joins
//!   the job; rank 0 prints the table.
//!
//! Bus bandwidth is the algorithm bandwidth times nccl-tests' factor (`2(n-1)/n` for
//! all_reduce, `(n-1)/n` for all_gather and reduce_scatter, 1 otherwise). Sizes are the
//! largest buffer of the operation, as in nccl-tests (all_gather: the gathered result).

use std::io::{IsTerminal, Write as _};
use std::time::{Duration, Instant};

use xstream::collective::bootstrap::Bootstrap;
use xstream::collective::{self, group, CommOf};
use xstream::{
    Backend, BackendKind, CollectiveBackend, CollectiveKind, Communicator, DataType, Device, Error,
    ReduceOp, Result, Stream, StreamDesc, StreamFlags,
};
use xstream_conformance::collectives::{cases, Case};

/// Options of `xstream collectives`.
#[derive(clap::Args, Debug, Clone)]
pub struct CollArgs {
    /// auto (CUDA with NCCL when available, else host), host or cuda.
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// The operation: all_reduce, all_gather, reduce_scatter, broadcast or reduce.
    #[arg(long, default_value = "all_reduce")]
    pub op: String,
    /// Element type: f32, f16, bf16, f64, i32, i64, u8.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// Reduction (reducing operations): sum, prod, max, min, avg.
    #[arg(long, default_value = "sum")]
    pub reduce: String,
    /// Smallest message (bytes; K, M, G suffixes).
    #[arg(long, default_value = "8")]
    pub min_bytes: String,
    /// Largest message (default: 1M on host, 128M on GPUs).
    #[arg(long)]
    pub max_bytes: Option<String>,
    /// Size multiplier between steps.
    #[arg(long, default_value_t = 2)]
    pub factor: usize,
    /// Timed iterations per size.
    #[arg(long, default_value_t = 20)]
    pub iters: usize,
    /// Untimed warm-up iterations per size.
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,
    /// Ranks in one-process mode (default: every device; 2 on a one-device host).
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Verify the result of each size up to this many bytes (0: never).
    #[arg(long, default_value = "16M")]
    pub check_max: String,
}

/// Parses `8`, `64K`, `16M`, `1G` (powers of 1024).
pub fn parse_size(s: &str) -> Result<usize> {
    let t = s.trim();
    let (num, mul) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1usize << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .ok_or_else(|| Error::invalid(format!("{s:?} is not a size (e.g. 8, 64K, 16M, 1G)")))
}

/// The sizes of the sweep: `min`, `min * factor`, ... up to `max`, each rounded down to a
/// multiple of `granule` (at least one granule).
pub fn sizes(min: usize, max: usize, factor: usize, granule: usize) -> Result<Vec<usize>> {
    if factor < 2 || min == 0 || min > max {
        return Err(Error::invalid(format!(
            "sizes {min}..{max} with factor {factor}: need 0 < min <= max and factor >= 2"
        )));
    }
    let mut v = Vec::new();
    let mut s = min;
    while s <= max {
        let r = (s / granule).max(1) * granule;
        if v.last() != Some(&r) {
            v.push(r);
        }
        s = match s.checked_mul(factor) {
            Some(n) => n,
            None => break,
        };
    }
    Ok(v)
}

struct Plan {
    kind: CollectiveKind,
    dtype: DataType,
    op: ReduceOp,
    sizes: Vec<usize>,
    iters: usize,
    warmup: usize,
    check_max: usize,
}

/// Runs the sweep on the chosen backend.
///
/// # Errors
/// Bad arguments, backend errors, wrong results.
pub fn run(a: &CollArgs) -> Result<()> {
    let kind = pick(&a.backend)?;
    xstream::availability(kind)?;
    match kind {
        BackendKind::Host => run_on::<xstream::HostBackend>(a, 1 << 20),
        #[cfg(feature = "nccl")]
        BackendKind::Cuda => run_on::<xstream::CudaBackend>(a, 128 << 20),
        #[cfg(feature = "hccl")]
        BackendKind::Ascend => run_on::<xstream::AscendBackend>(a, 1 << 20),
        #[allow(unreachable_patterns)]
        other => Err(Error::unsupported(
            other,
            "collectives in this build (CUDA needs the CLI's `nccl` feature, Ascend its `hccl`)",
        )),
    }
}

fn pick(s: &str) -> Result<BackendKind> {
    if s != "auto" {
        return s.parse();
    }
    #[cfg(feature = "nccl")]
    if xstream::availability(BackendKind::Cuda).is_ok()
        && xstream::cuda::collective::nccl_version().is_ok()
    {
        return Ok(BackendKind::Cuda);
    }
    Ok(BackendKind::Host)
}

fn plan(a: &CollArgs, world: usize, default_max: usize) -> Result<Plan> {
    let kind = CollectiveKind::parse(&a.op)?;
    if matches!(kind, CollectiveKind::Send | CollectiveKind::Recv) {
        return Err(Error::invalid(
            "--op: send/recv are not swept (use all_reduce, ...)",
        ));
    }
    let dtype = DataType::parse(&a.dtype)?;
    let op = ReduceOp::parse(&a.reduce)?;
    if a.iters == 0 {
        return Err(Error::invalid("--iters must be at least 1"));
    }
    let max = match &a.max_bytes {
        Some(m) => parse_size(m)?,
        None => default_max,
    };
    // all_gather and reduce_scatter split the message in `world` equal parts.
    let granule = match kind {
        CollectiveKind::AllGather | CollectiveKind::ReduceScatter => dtype.size_of() * world,
        _ => dtype.size_of(),
    };
    Ok(Plan {
        kind,
        dtype,
        op,
        sizes: sizes(parse_size(&a.min_bytes)?, max, a.factor, granule)?,
        iters: a.iters,
        warmup: a.warmup,
        check_max: parse_size(&a.check_max)?,
    })
}

fn run_on<B: CollectiveBackend>(a: &CollArgs, default_max: usize) -> Result<()> {
    let (comms, lead) = match Bootstrap::from_env()? {
        Some(b) => {
            let dev = B::open(b.local_rank)?;
            let c = b.init::<B>(&dev)?;
            (vec![c], b.rank == 0)
        }
        None => {
            let n = B::device_count()?;
            let ranks = a.ranks.unwrap_or(if n < 2 && B::KIND == BackendKind::Host {
                2
            } else {
                n
            });
            if ranks == 0 {
                return Err(Error::invalid("--ranks must be at least 1"));
            }
            let devices = (0..ranks)
                .map(|r| {
                    if r < n {
                        B::open(r)
                    } else if B::KIND == BackendKind::Host && n > 0 {
                        // The host backend accepts one device for several ranks.
                        B::open(r % n)
                    } else {
                        Err(Error::invalid(format!(
                            "--ranks {ranks}: only {n} device(s)"
                        )))
                    }
                })
                .collect::<Result<Vec<_>>>()?;
            (B::init_all(&devices)?, true)
        }
    };
    let world = comms[0].world_size();
    let p = plan(a, world, default_max)?;
    if lead {
        let d = comms[0].device().info();
        println!(
            "# xstream collectives: {} {} {} on {} ranks ({} backend, {} rank(s) in this process; device 0: {})",
            p.kind,
            p.dtype,
            if p.kind.has_reduction() { p.op.name() } else { "-" },
            world,
            B::KIND,
            comms.len(),
            d.name
        );
        println!(
            "# {:>12} {:>12} {:>6} {:>6} {:>12} {:>10} {:>10} {:>6}",
            "size(B)", "count", "type", "redop", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "check"
        );
    }
    let streams = comms
        .iter()
        .map(|c| {
            c.device()
                .create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING))
        })
        .collect::<Result<Vec<_>>>()?;
    let max = *p.sizes.last().unwrap_or(&1);
    let bufs = comms
        .iter()
        .map(|c| Ok((c.device().alloc(max)?, c.device().alloc(max)?)))
        .collect::<Result<Vec<_>>>()?;
    let progress = Progress::new(lead, p.sizes.len());
    let mut busbw_sum = 0.0;
    for (i, &size) in p.sizes.iter().enumerate() {
        progress.show(i, size);
        let case = case_for(&p, size, world);
        let checked = if size <= p.check_max {
            for ((c, s), (send, _)) in comms.iter().zip(&streams).zip(&bufs) {
                s.write(send, 0, case.input(c.rank(), world))?;
            }
            issue_all::<B>(&comms, &streams, &bufs, &case)?;
            sync_all::<B>(&comms, &streams)?;
            verify::<B>(&comms, &streams, &bufs, &case)?;
            "ok"
        } else {
            "-"
        };
        for _ in 0..p.warmup {
            issue_all::<B>(&comms, &streams, &bufs, &case)?;
        }
        sync_all::<B>(&comms, &streams)?;
        // Timed: a plain blocking synchronize (the polling of `collective::synchronize` would
        // add its poll period to the time), then the communicators' asynchronous errors.
        let t = Instant::now();
        for _ in 0..p.iters {
            issue_all::<B>(&comms, &streams, &bufs, &case)?;
        }
        for s in &streams {
            s.synchronize()?;
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / p.iters as f64;
        for c in &comms {
            c.async_error()?;
        }
        let algbw = size as f64 / us / 1e3;
        let busbw = algbw * p.kind.bus_factor(world);
        busbw_sum += busbw;
        if lead {
            progress.clear();
            println!(
                "  {:>12} {:>12} {:>6} {:>6} {:>12.2} {:>10.3} {:>10.3} {:>6}",
                size,
                size / p.dtype.size_of(),
                p.dtype,
                if p.kind.has_reduction() {
                    p.op.name()
                } else {
                    "-"
                },
                us,
                algbw,
                busbw,
                checked
            );
        }
    }
    progress.clear();
    if lead {
        println!(
            "# average bus bandwidth: {:.3} GB/s over {} sizes",
            busbw_sum / p.sizes.len() as f64,
            p.sizes.len()
        );
    }
    Ok(())
}

/// The operation on `size` bytes (the largest buffer), as a verifiable case.
fn case_for(p: &Plan, size: usize, world: usize) -> Case {
    let elems = size / p.dtype.size_of();
    let count = match p.kind {
        CollectiveKind::AllGather | CollectiveKind::ReduceScatter => elems / world,
        _ => elems,
    };
    Case {
        kind: p.kind,
        dtype: p.dtype,
        op: p.kind.has_reduction().then_some(p.op),
        count,
        root: 0,
    }
}

type Bufs<B> = [(<B as Backend>::Buffer, <B as Backend>::Buffer)];

fn issue_all<B: CollectiveBackend>(
    comms: &[CommOf<B>],
    streams: &[B::Stream],
    bufs: &Bufs<B>,
    case: &Case,
) -> Result<()> {
    let refs: Vec<&CommOf<B>> = comms.iter().collect();
    // One rank per process issues its operation directly, as a framework would; one thread
    // driving several ranks must group them.
    let grouped = |f: &dyn Fn() -> Result<()>| {
        if comms.len() == 1 {
            f()
        } else {
            group(&refs, f)
        }
    };
    grouped(&|| {
        for ((c, s), (send, recv)) in comms.iter().zip(streams).zip(bufs) {
            let (n, d, o, root) = (
                case.count,
                case.dtype,
                case.op.unwrap_or(ReduceOp::Sum),
                case.root,
            );
            match case.kind {
                CollectiveKind::AllReduce => c.all_reduce(send, recv, n, d, o, s)?,
                CollectiveKind::AllGather => c.all_gather(send, recv, n, d, s)?,
                CollectiveKind::ReduceScatter => c.reduce_scatter(send, recv, n, d, o, s)?,
                CollectiveKind::Broadcast => c.broadcast(send, recv, n, d, root, s)?,
                CollectiveKind::Reduce => c.reduce(send, recv, n, d, o, root, s)?,
                CollectiveKind::Send | CollectiveKind::Recv => {}
            }
        }
        Ok(())
    })
}

fn sync_all<B: CollectiveBackend>(comms: &[CommOf<B>], streams: &[B::Stream]) -> Result<()> {
    for (c, s) in comms.iter().zip(streams) {
        collective::synchronize(c, s)?;
    }
    Ok(())
}

fn verify<B: CollectiveBackend>(
    comms: &[CommOf<B>],
    streams: &[B::Stream],
    bufs: &Bufs<B>,
    case: &Case,
) -> Result<()> {
    let world = comms[0].world_size();
    for ((c, s), (_, recv)) in comms.iter().zip(streams).zip(bufs) {
        let Some(want) = case.expected(c.rank(), world) else {
            continue;
        };
        let rb = s.read(recv, 0, want.len() * case.dtype.size_of())?;
        s.synchronize()?;
        cases::compare(case.dtype, world, &rb.take()?, &want).map_err(|e| {
            Error::invalid(format!("{case}: rank {} got a wrong result: {e}", c.rank()))
        })?;
    }
    Ok(())
}

/// The progress line on stderr: rewritten in place on a terminal, else one line at most every
/// few seconds.
struct Progress {
    on: bool,
    tty: bool,
    total: usize,
    last: std::cell::Cell<Option<Instant>>,
}

impl Progress {
    fn new(on: bool, total: usize) -> Self {
        Self {
            on,
            tty: std::io::stderr().is_terminal(),
            total,
            last: std::cell::Cell::new(None),
        }
    }

    fn show(&self, i: usize, size: usize) {
        if !self.on {
            return;
        }
        let line = format!("[{}/{}] {} B ...", i + 1, self.total, size);
        let mut e = std::io::stderr().lock();
        if self.tty {
            let _ = write!(e, "\r{line:<40}");
            let _ = e.flush();
        } else if self
            .last
            .get()
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(5))
        {
            let _ = writeln!(e, "progress: {line}");
            self.last.set(Some(Instant::now()));
        }
    }

    fn clear(&self) {
        if self.on && self.tty {
            let _ = write!(std::io::stderr().lock(), "\r{:<40}\r", "");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_step() {
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("64k").unwrap(), 64 << 10);
        assert!(parse_size("lots").is_err());
        assert_eq!(sizes(8, 64, 2, 4).unwrap(), vec![8, 16, 32, 64]);
        // Rounded to whole elements per rank; duplicates dropped.
        assert_eq!(sizes(8, 32, 2, 12).unwrap(), vec![12, 24]);
        assert!(sizes(8, 4, 2, 4).is_err());
        assert!(sizes(8, 64, 1, 4).is_err());
    }

    fn args(op: &str) -> CollArgs {
        CollArgs {
            backend: "host".into(),
            op: op.into(),
            dtype: "i32".into(),
            reduce: "max".into(),
            min_bytes: "8".into(),
            max_bytes: Some("1K".into()),
            factor: 4,
            iters: 1,
            warmup: 0,
            ranks: Some(3),
            check_max: "1K".into(),
        }
    }

    /// Every swept operation runs and verifies on three host ranks.
    #[test]
    fn host_sweeps_verify() {
        for op in [
            "all_reduce",
            "all_gather",
            "reduce_scatter",
            "broadcast",
            "reduce",
        ] {
            run(&args(op)).unwrap_or_else(|e| panic!("{op}: {e}"));
        }
        assert!(run(&args("send")).is_err());
        assert!(run(&args("all_to_all")).is_err());
    }
}
