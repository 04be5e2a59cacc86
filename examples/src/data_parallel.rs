//! Data-parallel all-reduce: every rank computes its "gradients", the ranks average them with
//! one `all_reduce` per step, and every rank checks that it holds the average of all ranks.
//!
//! Per rank and step, on the rank's device:
//! 1. a *compute* stream writes the step's gradients and records an event;
//! 2. the *communication* stream waits for that event and enqueues `all_reduce(avg)` in
//!    place (`sum` then a host division where the backend lacks `avg`), then records an event;
//! 3. an *update* stream waits for the second event and reads the averaged gradients.
//!
//! Devices: every device of the backend in one process (`init_all`; `--ranks` picks how
//! many, the host backend repeats its device when it has fewer), or one rank per process when
//! the bootstrap environment is set (torchrun's `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, or Slurm's,
//! Open MPI's or PMI's equivalents (`collective::launcher`), and
//! `XSTREAM_UNIQUE_ID[_FILE]` or torchrun's `MASTER_ADDR`/`MASTER_PORT` for the TCP
//! rendezvous: the process opens device `LOCAL_RANK`).

use std::fmt;

use xstream::collective::bootstrap::Bootstrap;
use xstream::collective::{self, group, CommOf};
use xstream::{
    Backend, BackendKind, CollectiveBackend, Communicator, DataType, Device, Error, Event,
    EventDesc, ReduceOp, Result, Stream, StreamDesc, StreamFlags,
};

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// `auto` (CUDA with NCCL when available, else host), `host` or `cuda`.
    pub backend: String,
    /// Ranks in one-process mode (default: every device; 2 on a one-device host).
    pub ranks: Option<usize>,
    /// Gradient elements (f32) per rank.
    pub elems: usize,
    /// Training steps (one all_reduce each).
    pub steps: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            backend: "auto".into(),
            ranks: None,
            elems: 1 << 16,
            steps: 3,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The backend used.
    pub backend: BackendKind,
    /// Ranks of the job.
    pub world: usize,
    /// Ranks run by this process.
    pub ranks_here: usize,
    /// Steps verified.
    pub steps: usize,
    /// Whether `avg` was native (else `sum` and a division).
    pub native_avg: bool,
    /// The largest relative error seen against the exact average.
    pub max_rel_err: f64,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "data-parallel all-reduce OK: {} backend, {} ranks ({} in this process), {} steps verified, avg {}, max relative error {:.2e}",
            self.backend,
            self.world,
            self.ranks_here,
            self.steps,
            if self.native_avg { "native" } else { "as sum / world" },
            self.max_rel_err
        )
    }
}

/// Rank `rank`'s gradient `i` at `step` (exact in f32).
pub fn gradient(rank: usize, step: usize, i: usize) -> f32 {
    ((i * 7 + rank * 13 + step * 3) % 32) as f32 * 0.125
}

/// Runs the example on the configured backend.
///
/// # Errors
/// Backend errors, bad options, or a wrong average.
pub fn run(cfg: &Config) -> Result<Report> {
    let kind = pick(&cfg.backend)?;
    xstream::availability(kind)?;
    match kind {
        BackendKind::Host => run_on::<xstream::HostBackend>(cfg),
        BackendKind::Cuda => run_on::<xstream::CudaBackend>(cfg),
        BackendKind::Ascend => run_on::<xstream::AscendBackend>(cfg),
    }
}

fn pick(s: &str) -> Result<BackendKind> {
    if s != "auto" {
        return s.parse();
    }
    if xstream::availability(BackendKind::Cuda).is_ok()
        && xstream::cuda::collective::nccl_version().is_ok()
    {
        return Ok(BackendKind::Cuda);
    }
    Ok(BackendKind::Host)
}

/// The communicators this process runs: one (bootstrap environment) or all.
///
/// # Errors
/// Bootstrap and backend errors.
pub fn communicators<B: CollectiveBackend>(cfg: &Config) -> Result<Vec<CommOf<B>>> {
    if let Some(b) = Bootstrap::from_env()? {
        let dev = B::open(b.local_rank)?;
        return Ok(vec![b.init::<B>(&dev)?]);
    }
    let n = B::device_count()?;
    let host = B::KIND == BackendKind::Host;
    let ranks = cfg.ranks.unwrap_or(if host && n < 2 { 2 } else { n });
    if ranks == 0 || (!host && ranks > n) {
        return Err(Error::invalid(format!(
            "{ranks} ranks on {n} device(s) of the {} backend",
            B::KIND
        )));
    }
    let devices = (0..ranks)
        .map(|r| B::open(r % n.max(1)))
        .collect::<Result<Vec<_>>>()?;
    B::init_all(&devices)
}

fn run_on<B: CollectiveBackend>(cfg: &Config) -> Result<Report> {
    let comms = communicators::<B>(cfg)?;
    train::<B>(cfg, &comms)
}

/// One rank's streams and buffers.
struct Rank<B: Backend> {
    compute: B::Stream,
    comm: B::Stream,
    update: B::Stream,
    grads: B::Buffer,
}

/// The training loop over the communicators of this process (all ranks, or one).
///
/// # Errors
/// Backend errors; [`Error::InvalidArgument`] when a rank's average is wrong.
pub fn train<B: CollectiveBackend>(cfg: &Config, comms: &[CommOf<B>]) -> Result<Report> {
    if cfg.elems == 0 || cfg.steps == 0 || comms.is_empty() {
        return Err(Error::invalid("elems, steps and ranks must be at least 1"));
    }
    let world = comms[0].world_size();
    let native_avg = B::support(Some(ReduceOp::Avg), DataType::F32).is_supported();
    let op = if native_avg {
        ReduceOp::Avg
    } else {
        ReduceOp::Sum
    };
    let nb = StreamDesc::new().flags(StreamFlags::NON_BLOCKING);
    let ranks = comms
        .iter()
        .map(|c| {
            let d = c.device();
            Ok(Rank::<B> {
                compute: d.create_stream(&nb)?,
                comm: d.create_stream(&nb)?,
                update: d.create_stream(&nb)?,
                grads: d.alloc(cfg.elems * 4)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut max_rel_err = 0f64;
    for step in 0..cfg.steps {
        // 1. compute, then 2. the communication stream waits for it.
        for (c, r) in comms.iter().zip(&ranks) {
            let bytes: Vec<u8> = (0..cfg.elems)
                .flat_map(|i| gradient(c.rank(), step, i).to_le_bytes())
                .collect();
            r.compute.write(&r.grads, 0, bytes)?;
            let computed = c.device().create_event(&EventDesc::default())?;
            computed.record(&r.compute)?;
            r.comm.wait_event(&computed)?;
        }
        let refs: Vec<&CommOf<B>> = comms.iter().collect();
        group(&refs, || {
            for (c, r) in comms.iter().zip(&ranks) {
                c.all_reduce(&r.grads, &r.grads, cfg.elems, DataType::F32, op, &r.comm)?;
            }
            Ok(())
        })?;
        // 3. the update stream waits for the all_reduce and reads the average.
        let mut reads = Vec::new();
        for (c, r) in comms.iter().zip(&ranks) {
            let reduced = c.device().create_event(&EventDesc::default())?;
            reduced.record(&r.comm)?;
            r.update.wait_event(&reduced)?;
            reads.push(r.update.read(&r.grads, 0, cfg.elems * 4)?);
        }
        for ((c, r), rb) in comms.iter().zip(&ranks).zip(reads) {
            collective::synchronize(c, &r.comm)?;
            r.update.synchronize()?;
            let got = rb.take()?;
            for (i, w) in got.chunks_exact(4).enumerate() {
                let mut v = f64::from(f32::from_le_bytes([w[0], w[1], w[2], w[3]]));
                if !native_avg {
                    v /= world as f64;
                }
                let want = (0..world)
                    .map(|q| f64::from(gradient(q, step, i)))
                    .sum::<f64>()
                    / world as f64;
                let err = (v - want).abs() / want.abs().max(1.0);
                if err > 1e-5 {
                    return Err(Error::invalid(format!(
                        "step {step}, rank {}: gradient {i} is {v}, the average is {want}",
                        c.rank()
                    )));
                }
                max_rel_err = max_rel_err.max(err);
            }
        }
    }
    Ok(Report {
        backend: B::KIND,
        world,
        ranks_here: comms.len(),
        steps: cfg.steps,
        native_avg,
        max_rel_err,
    })
}
