//! The main job, as a library: a multi-stream copy-in → compute → copy-out pipeline over
//! page-locked host memory, used by `xstream demo` and by the benchmarks.
//!
//! The input is cut into chunks; chunk `c` goes to stream `c % streams` and to that stream's
//! device slot `(c / streams) % 2` (two device buffers per stream, used alternately). Each
//! chunk has its own page-locked input and output buffer, filled before the timed region and
//! checked after it, so the timed region holds only device work: one native asynchronous
//! copy in, one kernel, one native asynchronous copy out per chunk. Events bracket every
//! stage and give the timeline.
//!
//! On a backend without page-locked host memory the copies fall back to the pageable path
//! ([`Stream::write`] / [`Stream::read`], staged by the vendor). The compute stage is a
//! launch of the builtin module's [`BUILTIN_LCG`] through [`Stream::launch_kernel`] (the
//! path of users' own kernels) on a device with [`Capabilities::MODULES`] and
//! [`Capabilities::KERNELS`] (the builtin module); a device with the built-in kernels but
//! without modules uses [`Kernel::Lcg`]. A device without kernels but with the built-in reduce
//! ([`Capabilities::REDUCE`]: every Ascend NPU, whose runtime has `aclrtReduceAsync` and no
//! builtin module) runs the **reduce stage** instead: the chunk holds `f32` words (small
//! integers, [`reduce_input_word`]) and each round adds an addend buffer into it with one
//! [`Stream::reduce`] (f32 sum, the one kind and type every Ascend product has), so a chunk ends
//! as `input + rounds × addend`, checked against a host reference. [`ComputeChoice::Reduce`]
//! asks for that stage on any device with the capability. Without either the compute stage is
//! skipped and reported, and the output is then the input copied there and back.

use std::time::Instant;

use xstream_core::module::{lcg_launch, BUILTIN_LCG};
use xstream_core::{
    lcg_reference, Backend, Capabilities, Device, Error, Event, EventDesc, FunctionOf, Kernel,
    KernelArg, Module, PinnedAllocDesc, PinnedBuffer, Readback, ReduceKind, ReduceType, Reduction,
    Result, Stream, StreamDesc, StreamFlags,
};

/// The shape of one pipeline run.
#[derive(Debug, Clone, Copy)]
pub struct PipelineConfig {
    /// Pipeline streams (at least 1).
    pub streams: usize,
    /// Chunks of input (at least 1).
    pub chunks: usize,
    /// Bytes per chunk (a positive multiple of 4).
    pub chunk_bytes: usize,
    /// LCG rounds per word.
    pub rounds: u32,
    /// Bracket every stage with timing events (the per-chunk timeline). Each event is one
    /// more record on the device, which costs device time with small chunks: leave it off to
    /// measure end-to-end throughput.
    pub timeline: bool,
}

/// Which compute stage a pipeline runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ComputeChoice {
    /// The builtin LCG kernel where the device has it, else the built-in reduce where the
    /// device has it, else none (reported).
    #[default]
    Auto,
    /// The built-in reduce stage ([`Error::Unsupported`] on a device without
    /// [`Capabilities::REDUCE`]).
    Reduce,
}

/// Input word `k` of chunk `c` for the reduce stage: a small integer (0..=255) as `f32`.
pub fn reduce_input_word(c: usize, k: usize) -> f32 {
    f32::from(input_byte(c, 4 * k))
}

/// Word `k` of the reduce stage's addend: a multiple of 0.5 in 0.5..=3.5 (every sum of the
/// stage is exact in `f32`).
pub fn reduce_addend_word(k: usize) -> f32 {
    (k % 7 + 1) as f32 * 0.5
}

/// Chunk `c`'s input bytes for the chosen stage.
fn fill_input(reduce: bool, c: usize, out: &mut [u8]) {
    if reduce {
        for (k, w) in out.chunks_exact_mut(4).enumerate() {
            w.copy_from_slice(&reduce_input_word(c, k).to_le_bytes());
        }
    } else {
        for (k, b) in out.iter_mut().enumerate() {
            *b = input_byte(c, k);
        }
    }
}

/// The former name of [`CopyPath`] (issue 33: `Host` names the host backend).
#[deprecated(
    since = "0.2.0",
    note = "renamed `CopyPath` (`Host` names the host backend)"
)]
pub type HostPath = CopyPath;

/// How the host side of the copies was done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyPath {
    /// Page-locked buffers, one native asynchronous copy each way.
    PageLocked,
    /// Pageable memory, staged by the vendor (the reason page-locked memory was not used).
    Pageable(String),
}

/// One chunk's stage times, in ms from the run's origin event.
#[derive(Debug, Clone, Copy)]
pub struct ChunkTimes {
    /// Its stream.
    pub stream: usize,
    /// Before the copy-in.
    pub start: f32,
    /// After the copy-in.
    pub h2d: f32,
    /// After the kernel.
    pub compute: f32,
    /// After the copy-out.
    pub d2h: f32,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct PipelineReport {
    /// The configuration.
    pub config: PipelineConfig,
    /// Host path used.
    pub host_path: CopyPath,
    /// Why the compute stage did not run, if it did not.
    pub compute_skipped: Option<String>,
    /// Device timeline, origin to end (ms).
    pub device_ms: f32,
    /// Host wall time of the timed region (ms).
    pub host_ms: f64,
    /// Per-chunk stage times (empty without [`PipelineConfig::timeline`]).
    pub chunks: Vec<ChunkTimes>,
}

impl PipelineReport {
    /// Total bytes processed.
    pub fn bytes(&self) -> f64 {
        (self.config.chunks * self.config.chunk_bytes) as f64
    }
    /// End-to-end throughput in GB/s (10^9 bytes) over the device timeline.
    pub fn end_to_end_gbs(&self) -> f64 {
        self.bytes() / (f64::from(self.device_ms.max(f32::EPSILON)) * 1e6)
    }
    /// Sums of the stage durations (copy-in, compute, copy-out) in ms.
    pub fn stage_totals(&self) -> (f32, f32, f32) {
        self.chunks.iter().fold((0.0, 0.0, 0.0), |(a, b, c), t| {
            (
                a + t.h2d - t.start,
                b + t.compute - t.h2d,
                c + t.d2h - t.compute,
            )
        })
    }
    /// Copy-in and copy-out throughput in GB/s (bytes over the summed stage durations).
    pub fn copy_gbs(&self) -> (f64, f64) {
        let (h, _, d) = self.stage_totals();
        let g = |ms: f32| self.bytes() / (f64::from(ms.max(f32::EPSILON)) * 1e6);
        (g(h), g(d))
    }
    /// Overlap: the summed busy time of the streams over the timeline (0 without
    /// [`PipelineConfig::timeline`]).
    pub fn overlap(&self) -> f32 {
        let busy: f32 = self.chunks.iter().map(|t| t.d2h - t.start).sum();
        busy / self.device_ms.max(f32::EPSILON)
    }
}

/// The deterministic input byte `i` of chunk `c`.
pub fn input_byte(c: usize, i: usize) -> u8 {
    (i.wrapping_mul(2_654_435_761) ^ c.wrapping_mul(40_503)) as u8
}

/// Buffers of a pipeline, allocated once and reusable across runs.
pub struct Pipeline<B: Backend> {
    dev: B::Device,
    config: PipelineConfig,
    streams: Vec<B::Stream>,
    slots: Vec<[B::Buffer; 2]>,
    inputs: Vec<PinnedBuffer<B>>,
    outputs: Vec<PinnedBuffer<B>>,
    pageable_reason: Option<String>,
    pageable_out: Vec<Vec<u8>>,
    compute_skipped: Option<String>,
    /// The builtin LCG function, on devices with modules.
    lcg: Option<FunctionOf<B>>,
    /// The addend of the reduce stage, when that stage runs.
    addend: Option<B::Buffer>,
}

impl<B: Backend> Pipeline<B> {
    /// Creates the streams, device slots and page-locked buffers, and fills the input.
    ///
    /// # Errors
    /// Bad configuration ([`Error::InvalidArgument`]); allocation and backend errors.
    pub fn new(dev: &B::Device, config: PipelineConfig) -> Result<Self> {
        Self::with_compute(dev, config, ComputeChoice::Auto)
    }

    /// As [`Pipeline::new`], with the compute stage chosen by `compute`.
    ///
    /// # Errors
    /// As [`Pipeline::new`]; [`Error::Unsupported`] for [`ComputeChoice::Reduce`] on a device
    /// without [`Capabilities::REDUCE`].
    pub fn with_compute(
        dev: &B::Device,
        config: PipelineConfig,
        compute: ComputeChoice,
    ) -> Result<Self> {
        if config.streams == 0 || config.chunks == 0 || config.chunk_bytes == 0 {
            return Err(Error::invalid(
                "streams, chunks and chunk size must be at least 1",
            ));
        }
        if !config.chunk_bytes.is_multiple_of(4) {
            return Err(Error::invalid(
                "the chunk size must be a multiple of 4 bytes",
            ));
        }
        let streams = (0..config.streams)
            .map(|i| {
                dev.create_stream(
                    &StreamDesc::new()
                        .flags(StreamFlags::NON_BLOCKING)
                        .name(format!("pipe-{i}")),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let slots = (0..config.streams)
            .map(|_| {
                Ok([
                    dev.alloc(config.chunk_bytes)?,
                    dev.alloc(config.chunk_bytes)?,
                ])
            })
            .collect::<Result<Vec<_>>>()?;
        let caps = dev.info().capabilities;
        // MODULES alone is not enough: a device may load user modules but have no builtin
        // one (Ascend on an NPU: the builtin module is a simulator-format binary).
        let auto = compute == ComputeChoice::Auto;
        let lcg = if auto && caps.contains(Capabilities::MODULES | Capabilities::KERNELS) {
            Some(dev.builtin_module()?.function(BUILTIN_LCG)?)
        } else {
            None
        };
        let kernels = auto && caps.contains(Capabilities::KERNELS);
        let reduce = lcg.is_none() && !kernels && caps.contains(Capabilities::REDUCE);
        if compute == ComputeChoice::Reduce && !reduce {
            return Err(xstream_core::reduce::unsupported(
                B::KIND,
                "the pipeline's reduce stage needs Capabilities::REDUCE",
            ));
        }
        let addend = if reduce {
            let a = dev.alloc(config.chunk_bytes)?;
            let words: Vec<u8> = (0..config.chunk_bytes / 4)
                .flat_map(|k| reduce_addend_word(k).to_le_bytes())
                .collect();
            streams[0].write(&a, 0, words)?;
            streams[0].synchronize()?;
            Some(a)
        } else {
            None
        };
        let compute_skipped = (lcg.is_none() && !kernels && !reduce).then(|| {
            format!(
                "the {} backend has neither the built-in kernels nor the built-in reduce here",
                B::KIND
            )
        });
        let mut inputs = Vec::with_capacity(config.chunks);
        let mut outputs = Vec::with_capacity(config.chunks);
        let mut pageable_reason = None;
        for c in 0..config.chunks {
            let made = dev
                .alloc_pinned(config.chunk_bytes, &PinnedAllocDesc::new())
                .and_then(|i| {
                    Ok((
                        i,
                        dev.alloc_pinned(config.chunk_bytes, &PinnedAllocDesc::new())?,
                    ))
                });
            match made {
                Ok((mut i, o)) => {
                    fill_input(reduce, c, i.as_mut_slice()?);
                    inputs.push(i);
                    outputs.push(o);
                }
                Err(e @ Error::Unsupported { .. }) => {
                    pageable_reason = Some(e.to_string());
                    inputs.clear();
                    outputs.clear();
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(Self {
            dev: dev.clone(),
            config,
            streams,
            slots,
            inputs,
            outputs,
            pageable_reason,
            pageable_out: Vec::new(),
            compute_skipped,
            lcg,
            addend,
        })
    }

    /// How the compute stage runs: `"module launch (xstream_lcg)"`, `"built-in kernel
    /// (Kernel::Lcg)"`, `"built-in reduce (Stream::reduce, f32 sum)"` or `"skipped"`.
    pub fn compute_path(&self) -> &'static str {
        match (&self.lcg, &self.addend, &self.compute_skipped) {
            (Some(_), _, _) => "module launch (xstream_lcg)",
            (None, Some(_), _) => "built-in reduce (Stream::reduce, f32 sum)",
            (None, None, None) => "built-in kernel (Kernel::Lcg)",
            (None, None, Some(_)) => "skipped",
        }
    }

    /// Whether the compute stage is the built-in reduce.
    pub fn uses_reduce(&self) -> bool {
        self.addend.is_some()
    }

    /// Runs the pipeline once (the timed region) and returns its timeline.
    ///
    /// # Errors
    /// Backend errors.
    pub fn run(&mut self) -> Result<PipelineReport> {
        let cfg = self.config;
        let new_event = || self.dev.create_event(&EventDesc::new());
        let origin = new_event()?;
        let end = new_event()?;
        let staged = if cfg.timeline { cfg.chunks } else { 0 };
        let events: Vec<[B::Event; 4]> = (0..staged)
            .map(|_| Ok([new_event()?, new_event()?, new_event()?, new_event()?]))
            .collect::<Result<_>>()?;
        let tails: Vec<B::Event> = (0..cfg.streams)
            .map(|_| new_event())
            .collect::<Result<_>>()?;
        let mut reads: Vec<Readback> = Vec::new();
        let pageable: Vec<Vec<u8>> = if self.pageable_reason.is_some() {
            (0..cfg.chunks)
                .map(|c| {
                    let mut v = vec![0u8; cfg.chunk_bytes];
                    fill_input(self.addend.is_some(), c, &mut v);
                    v
                })
                .collect()
        } else {
            Vec::new()
        };
        for s in &self.streams {
            s.synchronize()?;
        }
        let wall = Instant::now();
        origin.record(&self.streams[0])?;
        for s in &self.streams[1..] {
            s.wait_event(&origin)?;
        }
        let (n, len) = (cfg.streams, cfg.chunk_bytes);
        for c in 0..cfg.chunks {
            let s = &self.streams[c % n];
            let buf = &self.slots[c % n][(c / n) % 2];
            let ev = events.get(c);
            if let Some(ev) = ev {
                ev[0].record(s)?;
            }
            match self.inputs.get(c) {
                Some(i) => s.copy_to_device(i, 0, buf, 0, len)?,
                None => {
                    let data = pageable.get(c).ok_or(Error::NotReady)?;
                    s.write(buf, 0, data.clone())?;
                }
            }
            if let Some(ev) = ev {
                ev[1].record(s)?;
            }
            match (&self.lcg, &self.compute_skipped) {
                _ if self.addend.is_some() => {
                    let add = self.addend.as_ref().ok_or(Error::NotReady)?;
                    let r = Reduction::new(ReduceKind::Sum, ReduceType::F32);
                    for _ in 0..cfg.rounds {
                        s.reduce(buf, 0, add, 0, len, r)?;
                    }
                }
                (Some(f), _) => {
                    let (words, launch) = lcg_launch(len)?;
                    s.launch_kernel(
                        f,
                        &launch,
                        &[
                            KernelArg::Buffer(buf),
                            KernelArg::U32(words),
                            KernelArg::U32(cfg.rounds),
                        ],
                    )?;
                }
                (None, None) => s.launch_builtin(Kernel::Lcg {
                    buf,
                    rounds: cfg.rounds,
                })?,
                (None, Some(_)) => {}
            }
            if let Some(ev) = ev {
                ev[2].record(s)?;
            }
            match self.outputs.get_mut(c) {
                Some(o) => s.copy_to_host(buf, 0, o, 0, len)?,
                None => reads.push(s.read(buf, 0, len)?),
            }
            if let Some(ev) = ev {
                ev[3].record(s)?;
            }
        }
        let join = &self.streams[0];
        for (e, s) in tails.iter().zip(&self.streams) {
            e.record(s)?;
            join.wait_event(e)?;
        }
        end.record(join)?;
        end.synchronize()?;
        let host_ms = wall.elapsed().as_secs_f64() * 1e3;
        for s in &self.streams {
            s.synchronize()?;
        }
        if !reads.is_empty() {
            self.pageable_out = reads.iter().map(Readback::take).collect::<Result<_>>()?;
        }
        let chunks = events
            .iter()
            .enumerate()
            .map(|(c, ev)| {
                Ok(ChunkTimes {
                    stream: c % n,
                    start: origin.elapsed_ms(&ev[0])?,
                    h2d: origin.elapsed_ms(&ev[1])?,
                    compute: origin.elapsed_ms(&ev[2])?,
                    d2h: origin.elapsed_ms(&ev[3])?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(PipelineReport {
            config: cfg,
            host_path: self
                .pageable_reason
                .clone()
                .map_or(CopyPath::PageLocked, CopyPath::Pageable),
            compute_skipped: self.compute_skipped.clone(),
            device_ms: origin.elapsed_ms(&end)?,
            host_ms,
            chunks,
        })
    }

    /// Checks every output chunk of the last run against the host reference (the LCG, or
    /// the input itself when the compute stage was skipped), on every CPU core.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the first chunk that differs.
    pub fn verify(&self) -> Result<()> {
        let cfg = self.config;
        let outs: Vec<&[u8]> = if self.pageable_reason.is_some() {
            self.pageable_out.iter().map(Vec::as_slice).collect()
        } else {
            self.outputs
                .iter()
                .map(PinnedBuffer::as_slice)
                .collect::<Result<_>>()?
        };
        if outs.len() != cfg.chunks {
            return Err(Error::invalid("verify needs a completed run"));
        }
        let rounds = self.compute_skipped.is_none().then_some(cfg.rounds);
        let reduce = self.addend.is_some();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let bad = std::sync::atomic::AtomicUsize::new(usize::MAX);
        std::thread::scope(|sc| {
            for t in 0..cores.min(cfg.chunks) {
                let (outs, bad) = (&outs, &bad);
                sc.spawn(move || {
                    let mut want = vec![0u8; cfg.chunk_bytes];
                    for c in (t..cfg.chunks).step_by(cores) {
                        match rounds {
                            Some(r) if reduce => reduce_reference(c, r, &mut want),
                            Some(r) => {
                                fill_input(false, c, &mut want);
                                lcg_reference(&mut want, r);
                            }
                            None => fill_input(reduce, c, &mut want),
                        }
                        if outs[c] != want.as_slice() {
                            bad.fetch_min(c, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        match bad.into_inner() {
            usize::MAX => Ok(()),
            c => Err(Error::invalid(format!(
                "chunk {c}: the device result differs from the host reference"
            ))),
        }
    }
}

/// The reduce stage's expected chunk `c` after `rounds` rounds, in typed `f32` arithmetic:
/// word `k` is the input word plus the addend word, added `rounds` times.
fn reduce_reference(c: usize, rounds: u32, out: &mut [u8]) {
    for (k, w) in out.chunks_exact_mut(4).enumerate() {
        let mut v = reduce_input_word(c, k);
        for _ in 0..rounds {
            v += reduce_addend_word(k);
        }
        w.copy_from_slice(&v.to_le_bytes());
    }
}
