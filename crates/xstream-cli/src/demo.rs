//! The main job: a multi-stream pipeline over page-locked host memory.
//!
//! The input is cut into chunks; chunk `c` goes to stream `c % streams` and to one of that
//! stream's two device buffers (used alternately), where it is copied in with one native
//! asynchronous copy from a page-locked buffer, transformed by the built-in LCG kernel (real
//! compute on every backend), and copied back into a page-locked buffer. Events bracket every
//! stage and give the timeline. The results are checked against the host reference. The work
//! itself is [`xstream::pipeline`], shared with the benchmarks.
//!
//! On a backend without the built-in kernels but with the built-in reduce (an Ascend NPU: its
//! runtime refuses the simulator-format builtin module but has `aclrtReduceAsync`) the compute
//! stage is the reduce stage instead (`rounds` f32 sums of an addend into each chunk, checked
//! against the host reference); `--compute reduce` asks for it on any backend that has it. The
//! line `compute stage: ...` says which one ran. Without either the copy stages still run and
//! the report says that the compute stage did not; on a backend without page-locked memory the
//! copies take the pageable, staged path and the report says so.

use std::fmt::Write as _;

use xstream::pipeline::{ChunkTimes, ComputeChoice, CopyPath, Pipeline, PipelineConfig};
use xstream::{Backend, BackendKind, Device, Error, Result};

/// Options of `xstream demo`.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// auto (a GPU/NPU that can run the whole job when present, else host), host, cuda or
    /// ascend.
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// Pipeline streams.
    #[arg(long, default_value_t = 4)]
    pub streams: usize,
    /// Chunks of input.
    #[arg(long, default_value_t = 32)]
    pub chunks: usize,
    /// Chunk size in KiB (a multiple of 4 bytes).
    #[arg(long, default_value_t = 1024)]
    pub chunk_kib: usize,
    /// LCG rounds per word (compute intensity).
    #[arg(long, default_value_t = 32)]
    pub rounds: u32,
    /// Timed repetitions (the best is reported; the first also warms the device up).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Compute stage: auto (the builtin LCG kernel, else the built-in reduce where only that
    /// exists) or reduce (the built-in reduce stage, on any backend that has it).
    #[arg(long, default_value = "auto")]
    pub compute: String,
    /// Write a Chrome/Perfetto trace (JSON) of the stream timeline here.
    #[arg(long)]
    pub trace: Option<std::path::PathBuf>,
}

/// Runs the demo on the chosen backend.
///
/// # Errors
/// Bad arguments, backend errors, or results that differ from the reference.
pub fn run(a: &DemoArgs) -> Result<()> {
    if a.streams == 0 || a.chunks == 0 || a.chunk_kib == 0 || a.reps == 0 {
        return Err(Error::invalid(
            "--streams, --chunks, --chunk-kib and --reps must be at least 1",
        ));
    }
    compute_choice(&a.compute)?;
    let kind = crate::pick_backend(&a.backend)?;
    xstream::availability(kind)?;
    xstream::dispatch!(kind, B => pipeline::<B>(a, kind))
}

fn compute_choice(s: &str) -> Result<ComputeChoice> {
    match s {
        "auto" => Ok(ComputeChoice::Auto),
        "reduce" => Ok(ComputeChoice::Reduce),
        other => Err(Error::invalid(format!(
            "--compute {other}: expected auto or reduce"
        ))),
    }
}

fn pipeline<B: Backend>(a: &DemoArgs, kind: BackendKind) -> Result<()> {
    let choice = compute_choice(&a.compute)?;
    let dev = B::open(0)?;
    let info = dev.info().clone();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "backend {kind}, device {} ({}); {} streams, {} chunks of {} KiB, {} LCG rounds; {} CPU \
         cores",
        info.name, info.driver, a.streams, a.chunks, a.chunk_kib, a.rounds, cores
    );
    let cfg = PipelineConfig {
        streams: a.streams,
        chunks: a.chunks,
        chunk_bytes: a.chunk_kib * 1024,
        rounds: a.rounds,
        timeline: true,
    };
    // One run with a timing event around every stage (the stage times and the trace), then
    // `reps` runs with only a start and an end event (end-to-end throughput: stage events
    // cost device time with small chunks).
    let mut p = Pipeline::<B>::with_compute(&dev, cfg, choice)?;
    let r = p.run()?;
    p.verify()?;
    let mut plain = Pipeline::<B>::with_compute(
        &dev,
        PipelineConfig {
            timeline: false,
            ..cfg
        },
        choice,
    )?;
    let mut best_ms = f32::MAX;
    let mut best_gbs = 0.0;
    for _ in 0..a.reps {
        let e = plain.run()?;
        plain.verify()?;
        if e.device_ms < best_ms {
            best_ms = e.device_ms;
            best_gbs = e.end_to_end_gbs();
        }
    }
    match &r.host_path {
        CopyPath::PageLocked => println!(
            "host buffers: page-locked (aligned heap on the host backend); one native asynchronous copy per chunk each way"
        ),
        CopyPath::Pageable(why) => println!(
            "host buffers: pageable, copies staged by the runtime (page-locked memory: {why})"
        ),
    }
    println!("stage copy-in: ran");
    match &r.compute_skipped {
        None if p.uses_reduce() => println!(
            "stage compute: ran ({} f32 sums per chunk, {})",
            a.rounds,
            p.compute_path()
        ),
        None => println!("stage compute: ran (LCG kernel, {})", p.compute_path()),
        Some(why) => println!("stage compute: NOT RUN ({why}); output checked against the input"),
    }
    println!("stage copy-out: ran");
    println!(
        "compute stage: {}",
        match (&r.compute_skipped, p.uses_reduce()) {
            (Some(_), _) => "none",
            (None, true) => "built-in reduce",
            (None, false) => "builtin kernels",
        }
    );
    println!(
        "all {} chunks verified against the host reference in each of {} runs",
        a.chunks,
        a.reps + 1
    );
    let (t_h2d, t_comp, t_d2h) = r.stage_totals();
    let (h2d, d2h) = r.copy_gbs();
    println!(
        "with stage events: device timeline {:.3} ms (host wall {:.3} ms)",
        r.device_ms, r.host_ms
    );
    println!(
        "copy-in {t_h2d:.3} ms ({h2d:.2} GB/s), kernel {t_comp:.3} ms, copy-out {t_d2h:.3} ms \
         ({d2h:.2} GB/s) (stage sums over all streams)"
    );
    println!(
        "overlap {:.2}x (sum of stream busy time / timeline, from the run with stage events)",
        r.overlap()
    );
    println!(
        "end to end: {best_gbs:.3} GB/s ({best_ms:.3} ms, best of {} runs without stage events; \
         {:.3} GB/s with them)",
        a.reps,
        r.end_to_end_gbs()
    );
    if kind == BackendKind::Host {
        println!(
            "note: the host backend runs each stream on a CPU thread; with {cores} cores, overlap \
             above {cores}x is time slicing, not parallel work"
        );
    }
    if let Some(path) = &a.trace {
        let json = trace_json(kind, &r.chunks, a.streams);
        std::fs::write(path, json)
            .map_err(|e| Error::invalid(format!("cannot write trace {}: {e}", path.display())))?;
        println!(
            "trace written to {} (open in ui.perfetto.dev)",
            path.display()
        );
    }
    Ok(())
}

/// Chrome trace-event JSON: one complete ("X") event per stage, one thread per stream.
fn trace_json(kind: BackendKind, times: &[ChunkTimes], streams: usize) -> String {
    let mut out = String::from("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
    let mut first = true;
    let mut push = |s: String| {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(&s);
    };
    push(format!(
        "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{{\"name\":\"xstream demo ({kind})\"}}}}"
    ));
    for i in 0..streams {
        push(format!(
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{i},\"args\":{{\"name\":\"stream pipe-{i}\"}}}}"
        ));
    }
    for (c, t) in times.iter().enumerate() {
        for (name, a, b) in [
            ("copy-in", t.start, t.h2d),
            ("compute", t.h2d, t.compute),
            ("copy-out", t.compute, t.d2h),
        ] {
            let mut e = String::new();
            let _ = write!(
                e,
                "{{\"name\":\"{name}\",\"cat\":\"chunk\",\"ph\":\"X\",\"pid\":1,\"tid\":{},\"ts\":{:.3},\"dur\":{:.3},\"args\":{{\"chunk\":{c}}}}}",
                t.stream,
                a as f64 * 1e3,
                ((b - a) as f64 * 1e3).max(0.0)
            );
            push(e);
        }
    }
    out.push_str("]}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_is_valid_json_with_one_event_per_stage() {
        let times = vec![
            ChunkTimes {
                stream: 0,
                start: 0.0,
                h2d: 1.0,
                compute: 2.5,
                d2h: 3.0,
            },
            ChunkTimes {
                stream: 1,
                start: 0.5,
                h2d: 1.0,
                compute: 2.0,
                d2h: 2.25,
            },
        ];
        let j: serde_json::Value =
            serde_json::from_str(&trace_json(BackendKind::Host, &times, 2)).unwrap();
        let ev = j["traceEvents"].as_array().unwrap();
        let x: Vec<_> = ev.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(x.len(), 6);
        assert_eq!(x[1]["name"], "compute");
        assert_eq!(x[1]["ts"].as_f64().unwrap(), 1000.0);
        assert_eq!(x[1]["dur"].as_f64().unwrap(), 1500.0);
        assert_eq!(x[3]["tid"], 1);
    }

    #[test]
    fn host_demo_runs_and_writes_a_trace() {
        let dir = std::env::temp_dir().join(format!("xstream-demo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let trace = dir.join("t.json");
        let args = DemoArgs {
            backend: "host".into(),
            streams: 3,
            chunks: 7,
            chunk_kib: 16,
            rounds: 4,
            reps: 2,
            compute: "auto".into(),
            trace: Some(trace.clone()),
        };
        run(&args).unwrap();
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
        let n = j["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .count();
        assert_eq!(n, 21);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn zero_streams_is_refused() {
        let args = DemoArgs {
            backend: "host".into(),
            streams: 0,
            chunks: 1,
            chunk_kib: 1,
            rounds: 1,
            reps: 1,
            compute: "auto".into(),
            trace: None,
        };
        assert!(matches!(run(&args), Err(Error::InvalidArgument(_))));
    }
}
