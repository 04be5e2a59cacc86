//! The main job: a multi-stream pipeline.
//!
//! The input is cut into chunks; chunk `c` goes to stream `c % streams`, where it is copied to
//! the device, transformed by the built-in LCG kernel (real compute on every backend), and
//! copied back. Every stage is bracketed by events, which give the timeline; a join stream
//! waits on every pipeline stream's last event (events as dependencies) and a host callback
//! counts finished chunks (progress). The results are checked against the host reference.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use xstream::{
    lcg_reference, Backend, BackendKind, Capabilities, Device, Error, Event, EventDesc, Kernel,
    Readback, Result, Status, Stream, StreamDesc, StreamFlags,
};

/// Options of `xstream demo`.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// auto (a GPU/NPU when present, else host), host, cuda or ascend.
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
    /// Write a Chrome/Perfetto trace (JSON) of the stream timeline here.
    #[arg(long)]
    pub trace: Option<std::path::PathBuf>,
}

/// Runs the demo on the chosen backend.
///
/// # Errors
/// Bad arguments, backend errors, or results that differ from the reference.
pub fn run(a: &DemoArgs) -> Result<()> {
    if a.streams == 0 || a.chunks == 0 || a.chunk_kib == 0 {
        return Err(Error::invalid(
            "--streams, --chunks and --chunk-kib must be at least 1",
        ));
    }
    let kind = crate::pick_backend(&a.backend)?;
    xstream::availability(kind)?;
    xstream::dispatch!(kind, B => pipeline::<B>(a, kind))
}

struct ChunkTimes {
    stream: usize,
    start: f32,
    h2d: f32,
    compute: f32,
    d2h: f32,
}

fn pipeline<B: Backend>(a: &DemoArgs, kind: BackendKind) -> Result<()> {
    let dev = B::open(0)?;
    let info = dev.info().clone();
    if !info.capabilities.contains(Capabilities::KERNELS) {
        return Err(Error::unsupported(
            kind,
            "the built-in kernels the demo's compute step needs",
        ));
    }
    let chunk = a.chunk_kib * 1024;
    println!(
        "backend {kind}, device {} ({}); {} streams, {} chunks of {} KiB, {} LCG rounds",
        info.name, info.driver, a.streams, a.chunks, a.chunk_kib, a.rounds
    );
    let streams: Vec<B::Stream> = (0..a.streams)
        .map(|i| {
            dev.create_stream(
                &StreamDesc::new()
                    .flags(StreamFlags::NON_BLOCKING)
                    .name(format!("pipe-{i}")),
            )
        })
        .collect::<Result<_>>()?;
    let join = dev.create_stream(
        &StreamDesc::new()
            .flags(StreamFlags::NON_BLOCKING)
            .name("join"),
    )?;
    let bufs: Vec<B::Buffer> = (0..a.streams)
        .map(|_| dev.alloc(chunk))
        .collect::<Result<_>>()?;
    let input: Vec<Vec<u8>> = (0..a.chunks)
        .map(|c| {
            (0..chunk)
                .map(|i| (i.wrapping_mul(2_654_435_761) ^ c.wrapping_mul(40_503)) as u8)
                .collect()
        })
        .collect();

    let new_event = || dev.create_event(&EventDesc::new());
    let origin = new_event()?;
    let done = Arc::new(AtomicUsize::new(0));
    let wall = Instant::now();
    origin.record(&streams[0])?;
    for s in &streams[1..] {
        s.wait_event(&origin)?;
    }
    let mut events: Vec<[B::Event; 4]> = Vec::with_capacity(a.chunks);
    let mut reads: Vec<Readback> = Vec::with_capacity(a.chunks);
    for (c, data) in input.iter().enumerate() {
        let si = c % a.streams;
        let s = &streams[si];
        let buf = &bufs[si];
        let ev = [new_event()?, new_event()?, new_event()?, new_event()?];
        ev[0].record(s)?;
        s.write(buf, 0, data.clone())?;
        ev[1].record(s)?;
        s.launch(Kernel::Lcg {
            buf,
            rounds: a.rounds,
        })?;
        ev[2].record(s)?;
        reads.push(s.read(buf, 0, chunk)?);
        ev[3].record(s)?;
        let d = done.clone();
        s.host_callback(move |r| {
            if r.is_ok() {
                d.fetch_add(1, Ordering::Relaxed);
            }
        })?;
        events.push(ev);
    }
    // The join stream depends on every pipeline stream's last event.
    let tails: Vec<B::Event> = streams
        .iter()
        .map(|s| {
            let e = new_event()?;
            e.record(s)?;
            Ok(e)
        })
        .collect::<Result<_>>()?;
    for e in &tails {
        join.wait_event(e)?;
    }
    let end = new_event()?;
    end.record(&join)?;
    let finished = end.completed()?;
    let mut last_print = Instant::now();
    while end.query()? == Status::Pending {
        std::thread::sleep(Duration::from_millis(20));
        if last_print.elapsed() > Duration::from_millis(500) {
            eprint!(
                "\r  progress: {}/{} chunks",
                done.load(Ordering::Relaxed),
                a.chunks
            );
            let _ = std::io::stderr().flush();
            last_print = Instant::now();
        }
    }
    finished.wait()?;
    for s in &streams {
        s.synchronize()?;
    }
    let host_wall = wall.elapsed();
    if last_print.elapsed() < host_wall {
        eprintln!();
    }
    if done.load(Ordering::Relaxed) != a.chunks {
        return Err(Error::invalid(format!(
            "only {} of {} completion callbacks ran",
            done.load(Ordering::Relaxed),
            a.chunks
        )));
    }

    // Check every chunk against the reference.
    for (c, (rb, data)) in reads.iter().zip(&input).enumerate() {
        let got = rb.take()?;
        let mut want = data.clone();
        lcg_reference(&mut want, a.rounds);
        if got != want {
            return Err(Error::invalid(format!(
                "chunk {c}: device result differs from the host reference"
            )));
        }
    }

    // Timeline from the events.
    let mut times = Vec::with_capacity(a.chunks);
    for (c, ev) in events.iter().enumerate() {
        times.push(ChunkTimes {
            stream: c % a.streams,
            start: origin.elapsed_ms(&ev[0])?,
            h2d: origin.elapsed_ms(&ev[1])?,
            compute: origin.elapsed_ms(&ev[2])?,
            d2h: origin.elapsed_ms(&ev[3])?,
        });
    }
    let device_wall = origin.elapsed_ms(&end)?.max(f32::EPSILON);
    let mut busy = vec![0f32; a.streams];
    let (mut t_h2d, mut t_comp, mut t_d2h) = (0f32, 0f32, 0f32);
    for t in &times {
        busy[t.stream] += t.d2h - t.start;
        t_h2d += t.h2d - t.start;
        t_comp += t.compute - t.h2d;
        t_d2h += t.d2h - t.compute;
    }
    let total_busy: f32 = busy.iter().sum();
    let bytes = (a.chunks * chunk) as f64;
    println!(
        "all {} chunks verified against the host reference",
        a.chunks
    );
    println!(
        "device timeline: {:.2} ms (host wall {:.2} ms)",
        device_wall,
        host_wall.as_secs_f64() * 1e3
    );
    for (i, b) in busy.iter().enumerate() {
        println!(
            "  stream pipe-{i}: busy {b:.2} ms ({:.0}% of the timeline)",
            100.0 * b / device_wall
        );
    }
    println!("stage totals: copy-in {t_h2d:.2} ms, compute {t_comp:.2} ms, copy-out {t_d2h:.2} ms");
    println!(
        "overlap: {:.2}x (sum of stream busy time / timeline)",
        total_busy / device_wall
    );
    println!(
        "throughput: {:.1} MiB/s end to end, {:.2} G word-rounds/s",
        bytes / (1024.0 * 1024.0) / (device_wall as f64 / 1e3),
        bytes / 4.0 * a.rounds as f64 / (device_wall as f64 / 1e3) / 1e9
    );
    if let Some(path) = &a.trace {
        let json = trace_json(kind, &times, a.streams);
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
            trace: None,
        };
        assert!(matches!(run(&args), Err(Error::InvalidArgument(_))));
    }
}
