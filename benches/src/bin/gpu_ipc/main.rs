//! Cross-process events and IPC buffers on CUDA: xstream against the raw driver, in one run.
//!
//! ```sh
//! cargo build --release -p xstream-benches --bin gpu_ipc    # here (no GPU needed to build)
//! gpu-bundle/bench/gpu_ipc [--mib N] [--gpus 1|2|auto]      # on the GPU machine
//! BENCH=ipc bash gpu-bundle/gpu-run.sh                       # the same through the script
//! ```
//!
//! The program is the exporter (parent); it starts itself again as the importer (child) and
//! hands it four handles (raw `CUipcEventHandle` and `CUipcMemHandle`, xstream's
//! `IpcEventHandle` and `IpcMemHandle`) in its environment. The two then talk through one
//! shared page of atomics (`shm.rs`): the parent posts a command, the child runs it and
//! answers; every wait is bounded and the child dies with its parent. Without a CUDA driver it
//! prints `SKIP: no CUDA driver: <reason>` and exits 0.
//!
//! # What is measured
//! - **Event signal round trip** (target: xstream ≤ raw + 5%). One iteration: the parent
//!   launches `xstream_delay(0)` (the kernel behind xstream's `Kernel::Delay`) and records
//!   its interprocess event on a stream, then posts "wait"; the child waits on its opened
//!   handle of that event, either on the host (`cuEventSynchronize` / `Event::synchronize`)
//!   or on a stream (`cuStreamWaitEvent` + `cuStreamSynchronize` / `Stream::wait_event` +
//!   `Stream::synchronize`), and answers; the parent's clock runs from before the launch to
//!   the answer. Raw and xstream use their own events, streams and the same kernel. Before
//!   timing, one iteration per variant with a 20 ms kernel checks that the child really waits
//!   (the round trip must last at least 10 ms).
//! - **Copy bandwidth** (target: a copy from the import ≥ 95% of the same copy in the
//!   exporting process). The exporter's source buffer (256 MiB, `cuMemAlloc` /
//!   `Device::alloc`) is copied device-to-device and device-to-host (page-locked), by the
//!   exporter from its own allocation and by the child from its import, raw and xstream:
//!   one code path (`side.rs`), so the four cells differ only in the source's origin and the
//!   API. The child first checks that its imports hold the bytes the exporter wrote.
//! - With two GPUs (`--gpus auto`, the default, when two are visible) a second configuration
//!   runs: the child's waiting stream and the copy destinations are on device 1 (the events
//!   and the source stay on device 0, opened there by the child), and device-to-device copies
//!   cross devices (`cuMemcpyPeerAsync` / `Stream::copy_peer`) in both processes. The child's
//!   stream wait then goes through a stream of device 0 on both sides (a direct
//!   `cuStreamWaitEvent` of a device-1 stream on the event opened in device 0's context kills
//!   the process inside the driver): raw `raw::wait_bridged_and_sync`, xstream's
//!   `Stream::wait_event`, which does the same itself. After the measured part the child
//!   prints `diag:` lines on its standard error: the peer copy from its import made three
//!   ways with raw calls (`diag.rs`; why that copy is slow with two GPUs, issue 29). Peer
//!   access is enabled both ways in both processes (device 1 -> 0 and 0 -> 1): GPU run 21's
//!   `diag:` lines showed the copy from the import at about a tenth of the exporter's rate
//!   with only 1 -> 0, and at the exporter's rate with 0 -> 1 too.
//!
//! Statistics: interleaved rounds (the order of the variants rotates each round), medians
//! with p10 and p90 (nearest rank) over all samples. Output: a Markdown report on stdout and,
//! when `$OUT` is set, in `$OUT/gpu_ipc.md`; one `PASS:` or `MISS:` line per target (a miss
//! is a measured result; the exit status is 0), `FAIL:` and exit 1 when the run itself
//! failed.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use xstream_core::{Backend, Error, Event, Kernel, Stream};
use xstream_cuda::{ptx_source, CudaBackend};

mod diag;
mod raw;
mod selftest;
mod shm;
mod side;

use shm::{Peer, Server, Shm};
use side::{Handles, Side};

type BenchResult<T> = std::result::Result<T, String>;

/// Set in the child: the path of the shared page.
pub(crate) const CHILD_ENV: &str = "XSTREAM_GPU_IPC_CHILD";
/// Set in the child: the parent's process id.
pub(crate) const PARENT_ENV: &str = "XSTREAM_GPU_IPC_PARENT";
/// Set in the child: the consumer device's ordinal.
const CONSUMER_ENV: &str = "XSTREAM_GPU_IPC_CONSUMER";
/// Set in the child: the four handles, hex.
const HANDLES_ENV: &str = "XSTREAM_GPU_IPC_HANDLES";
/// Set in the child: the buffer length in bytes.
const BYTES_ENV: &str = "XSTREAM_GPU_IPC_BYTES";
/// Set (to anything) to make both processes print each step of their set-up, every new
/// command and their teardown on stderr: where a process that dies of a signal stopped.
const TRACE_ENV: &str = "XSTREAM_GPU_IPC_TRACE";

/// Prints `step` on stderr (flushed) when [`TRACE_ENV`] is set.
pub(crate) fn trace(step: &str) {
    use std::io::Write as _;
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os(TRACE_ENV).is_some()) {
        let who = if std::env::var_os(CHILD_ENV).is_some() {
            "child"
        } else {
            "parent"
        };
        let mut e = std::io::stderr().lock();
        let _ = writeln!(e, "gpu_ipc {who} trace: {step}");
        let _ = e.flush();
    }
}

/// Rounds of the latency section; each runs every variant once, in rotating order.
const LAT_ROUNDS: usize = 12;
/// Round trips per variant per round.
const LAT_ITERS: usize = 250;
/// Untimed round trips per variant before the rounds.
const LAT_WARM: usize = 50;
/// The kernel of the "the child really waits" check.
const CHECK_DELAY: Duration = Duration::from_millis(20);
/// Rounds of the copy section.
const COPY_ROUNDS: usize = 7;
/// Copies per timed batch.
const DTOD_BATCH: u64 = 8;
const DTOH_BATCH: u64 = 2;
/// The default buffer size.
const DEFAULT_MIB: usize = 256;
/// Bound on one answer of the child.
const ACK_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on the child's first answer (it opens one or two devices first).
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the child waits for the next command before giving up.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// Target (a): xstream's round trip at most this much above raw.
const WAIT_TARGET_PCT: f64 = 5.0;
/// Target (b): a copy from the import at least this share of the exporter's.
const COPY_TARGET_PCT: f64 = 95.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Variant {
    Raw,
    Xs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    EventSync,
    StreamWait,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CopyKind {
    DtoD,
    DtoH,
}

/// A command to the child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// Check the imports' contents.
    Check,
    /// Wait on the opened event.
    Wait(Wait, Variant),
    /// `arg` copies from the import.
    Copy(CopyKind, Variant),
    /// Exit.
    Exit,
}

const VARIANTS: [Variant; 2] = [Variant::Raw, Variant::Xs];
const WAITS: [Wait; 2] = [Wait::EventSync, Wait::StreamWait];
const KINDS: [CopyKind; 2] = [CopyKind::DtoD, CopyKind::DtoH];

impl Op {
    fn code(self) -> u64 {
        let v = |v: Variant| u64::from(v == Variant::Xs);
        match self {
            Op::Check => 1,
            Op::Exit => 2,
            Op::Wait(w, x) => 16 + 2 * u64::from(w == Wait::StreamWait) + v(x),
            Op::Copy(k, x) => 32 + 2 * u64::from(k == CopyKind::DtoH) + v(x),
        }
    }

    fn from_code(c: u64) -> Option<Self> {
        let mut all = vec![Op::Check, Op::Exit];
        for v in VARIANTS {
            all.extend(WAITS.iter().map(|&w| Op::Wait(w, v)));
            all.extend(KINDS.iter().map(|&k| Op::Copy(k, v)));
        }
        all.into_iter().find(|o| o.code() == c)
    }
}

pub(crate) fn xe(e: Error) -> String {
    e.to_string()
}

fn main() {
    if let Some(path) = std::env::var_os(CHILD_ENV) {
        let r = if std::env::var_os(selftest::SELFTEST_ENV).is_some() {
            selftest::child(std::path::Path::new(&path))
        } else {
            child_main(path)
        };
        if let Err(e) = r {
            eprintln!("gpu_ipc child: FAILED: {e}");
            std::process::exit(1);
        }
        return;
    }
    // Checks of the process coordination, without a GPU (benches/tests/gpu_ipc.rs).
    match std::env::args().nth(1).as_deref() {
        Some("--selftest-protocol") => match selftest::protocol() {
            Ok(line) => return println!("{line}"),
            Err(e) => {
                println!("FAIL: protocol self-test: {e}");
                std::process::exit(1);
            }
        },
        Some("--selftest-orphan") => {
            let e = selftest::orphan().err().unwrap_or_default();
            println!("FAIL: orphan self-test: {e}");
            std::process::exit(1);
        }
        _ => {}
    }
    let opts = match Opts::parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("gpu_ipc: {e}\nusage: gpu_ipc [--mib N] [--gpus 1|2|auto]");
            std::process::exit(2);
        }
    };
    if let Err(e) = CudaBackend::availability() {
        let reason = match e {
            Error::NotAvailable { reason, .. } => reason,
            other => other.to_string(),
        };
        println!("SKIP: no CUDA driver: {reason}");
        return;
    }
    std::process::exit(run(&opts));
}

struct Opts {
    bytes: usize,
    /// `None`: two GPUs when two are visible.
    gpus: Option<usize>,
}

impl Opts {
    fn parse(mut args: impl Iterator<Item = String>) -> BenchResult<Self> {
        let mut o = Opts {
            bytes: DEFAULT_MIB << 20,
            gpus: None,
        };
        while let Some(a) = args.next() {
            match a.as_str() {
                // `cargo bench` passes --bench; ignored.
                "--bench" => {}
                "--mib" => {
                    let n: usize = args
                        .next()
                        .and_then(|v| v.parse().ok())
                        .filter(|&n| n > 0 && n <= 16 * 1024)
                        .ok_or("--mib takes 1..=16384")?;
                    o.bytes = n << 20;
                }
                "--gpus" => {
                    o.gpus = match args.next().as_deref() {
                        Some("1") => Some(1),
                        Some("2") => Some(2),
                        Some("auto") => None,
                        _ => return Err("--gpus takes 1, 2 or auto".into()),
                    }
                }
                other => return Err(format!("unknown argument {other}")),
            }
        }
        Ok(o)
    }
}

/// Runs the configurations; the exit status (0: every configuration ran).
fn run(opts: &Opts) -> i32 {
    let count = CudaBackend::device_count().unwrap_or(0);
    let mut report = String::new();
    let mut failed = false;
    let mut consumers = vec![0usize];
    match (opts.gpus, count >= 2) {
        (Some(1), _) => {}
        (_, true) => consumers.push(1),
        (Some(2), false) => {
            failed = true;
            let _ = writeln!(
                report,
                "FAIL: two GPUs asked for (--gpus 2), {count} visible\n"
            );
        }
        (_, false) => {
            let _ = writeln!(
                report,
                "SKIP: the two-GPU configuration: {count} device(s) visible\n"
            );
        }
    }
    if opts.gpus == Some(2) {
        consumers.retain(|&c| c == 1);
    }
    for c in consumers {
        eprintln!("== gpu_ipc: consumer on device {c}");
        match run_config(c, opts.bytes) {
            Ok(r) => report.push_str(&r),
            Err(e) => {
                failed = true;
                let _ = writeln!(
                    report,
                    "FAIL: configuration with the consumer on device {c}: {e}\n"
                );
            }
        }
    }
    print!("{report}");
    if let Some(out) = std::env::var_os("OUT") {
        let path = PathBuf::from(out).join("gpu_ipc.md");
        if let Err(e) = std::fs::write(&path, &report) {
            eprintln!("gpu_ipc: write {}: {e}", path.display());
            failed = true;
        }
    }
    i32::from(failed)
}

// ---------------------------------------------------------------------------------------------
// The child

fn child_main(path: OsString) -> BenchResult<()> {
    let var = |k: &str| std::env::var(k).map_err(|_| format!("{k} is not set"));
    let parent: u32 = var(PARENT_ENV)?
        .parse()
        .map_err(|_| format!("{PARENT_ENV} is not a process id"))?;
    let mut server = Server::attach(&PathBuf::from(path), parent)?;
    let consumer: usize = var(CONSUMER_ENV)?
        .parse()
        .map_err(|_| format!("{CONSUMER_ENV} is not an ordinal"))?;
    let len: usize = var(BYTES_ENV)?
        .parse()
        .map_err(|_| format!("{BYTES_ENV} is not a length"))?;
    let handles = Handles::from_line(&var(HANDLES_ENV)?)?;
    let mut side = Side::new(consumer, len, Some(&handles))?;
    let mut last: Option<Op> = None;
    loop {
        let (code, arg) = server.next(parent, IDLE_TIMEOUT)?;
        let op = Op::from_code(code).ok_or_else(|| format!("unknown command {code}"))?;
        if last != Some(op) {
            trace(&format!("command {op:?}"));
        }
        let mut result = 0u64;
        match op {
            Op::Check => side.check_contents()?,
            Op::Exit => {
                // After the measured part, so that its peer-access change touches no row.
                side.diag_import_copies(handles.raw_mem);
                server.reply(0);
                trace("exit: dropping the side");
                drop(side);
                trace("exit: side dropped, returning from main");
                return Ok(());
            }
            Op::Wait(w, v) => {
                // A batch repeats one command: bind its context once, before the first.
                if last != Some(op) {
                    bind_for_wait(&side, w, v)?;
                }
                child_wait(&side, w, v)?;
            }
            Op::Copy(k, v) => result = side.copy_batch(k, v, arg)?,
        }
        last = Some(op);
        server.reply(result);
    }
}

fn bind_for_wait(side: &Side, w: Wait, v: Variant) -> BenchResult<()> {
    match (w, v) {
        (Wait::EventSync, Variant::Raw) => raw::bind(side.ctx0),
        (Wait::StreamWait, Variant::Raw) => raw::bind(side.ctxc),
        (Wait::EventSync, Variant::Xs) => side.dev0.rebind_thread().map_err(xe),
        (Wait::StreamWait, Variant::Xs) => side.devc.rebind_thread().map_err(xe),
    }
}

/// The child's half of a round trip: wait for the latest record of the parent's event.
fn child_wait(side: &Side, w: Wait, v: Variant) -> BenchResult<()> {
    match (w, v) {
        (Wait::EventSync, Variant::Raw) => raw::event_sync(side.ev_raw),
        (Wait::EventSync, Variant::Xs) => side.ev_xs.synchronize().map_err(xe),
        (Wait::StreamWait, Variant::Raw) if side.two => raw::wait_bridged_and_sync(
            side.ctx0,
            side.ctxc,
            side.bridge_raw,
            side.relay_raw,
            side.sc_raw,
            side.ev_raw,
        ),
        (Wait::StreamWait, Variant::Raw) => raw::wait_and_sync(side.sc_raw, side.ev_raw),
        (Wait::StreamWait, Variant::Xs) => {
            side.sc_xs.wait_event(&side.ev_xs).map_err(xe)?;
            side.sc_xs.synchronize().map_err(xe)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The parent

/// The parent's delay kernel (raw side; xstream launches its own `Kernel::Delay`).
struct Producer<'a> {
    side: &'a Side,
    delay_fn: cudarc::driver::sys::CUfunction,
}

impl Producer<'_> {
    /// One round trip of `(w, v)` after a kernel of `delay`: nanoseconds.
    fn round_trip(
        &self,
        peer: &mut Peer,
        w: Wait,
        v: Variant,
        delay: Duration,
    ) -> BenchResult<f64> {
        let s = self.side;
        let t0 = std::time::Instant::now();
        match v {
            Variant::Raw => {
                let ns = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
                raw::launch_delay(self.delay_fn, s.s0_raw, ns)?;
                raw::record(s.ev_raw, s.s0_raw)?;
            }
            Variant::Xs => {
                s.s0_xs.launch_builtin(Kernel::Delay(delay)).map_err(xe)?;
                s.ev_xs.record(&s.s0_xs).map_err(xe)?;
            }
        }
        peer.call(Op::Wait(w, v).code(), 0, ACK_TIMEOUT)?;
        Ok(t0.elapsed().as_nanos() as f64)
    }

    /// `n` round trips (context bound before, stream drained after, both untimed).
    fn batch(
        &self,
        peer: &mut Peer,
        w: Wait,
        v: Variant,
        n: usize,
        delay: Duration,
    ) -> BenchResult<Vec<f64>> {
        match v {
            Variant::Raw => raw::bind(self.side.ctx0)?,
            Variant::Xs => self.side.dev0.rebind_thread().map_err(xe)?,
        }
        let out = (0..n)
            .map(|_| self.round_trip(peer, w, v, delay))
            .collect::<BenchResult<Vec<f64>>>()?;
        match v {
            Variant::Raw => raw::sync(self.side.s0_raw)?,
            Variant::Xs => self.side.s0_xs.synchronize().map_err(xe)?,
        }
        Ok(out)
    }
}

fn run_config(consumer: usize, len: usize) -> BenchResult<String> {
    let mut side = Side::new(consumer, len, None)?;
    let ptx = ptx_source("sm_90") + "\0";
    let delay_fn = raw::function(side.ctx0, &ptx, c"xstream_delay")?;
    let handles = side.export()?;
    let shm = Shm::create(&std::env::temp_dir())?;
    let mut peer = Peer::spawn(
        shm,
        &[
            (CONSUMER_ENV, consumer.to_string()),
            (BYTES_ENV, len.to_string()),
            (HANDLES_ENV, handles.to_line()),
        ],
    )?;
    trace(&format!("consumer {consumer}: child started, check"));
    peer.call(Op::Check.code(), 0, START_TIMEOUT)?;
    trace("latency");
    let lat = latency(
        &Producer {
            side: &side,
            delay_fn,
        },
        &mut peer,
    )?;
    trace("copies");
    let copies = copies(&mut side, &mut peer)?;
    trace("exit");
    peer.call(Op::Exit.code(), 0, ACK_TIMEOUT)?;
    peer.finish(Duration::from_secs(30))?;
    trace("child exited");
    let info = xstream_core::Device::info(&side.dev0).clone();
    let cinfo = xstream_core::Device::info(&side.devc).clone();
    Ok(report(consumer, len, &info, &cinfo, &lat, &copies))
}

/// The latency results of one kind of wait.
struct WaitResult {
    wait: Wait,
    /// Round trips, ns.
    raw: Vec<f64>,
    xs: Vec<f64>,
    /// The "really waits" check's round trips (raw, xstream), ns.
    checks: [f64; 2],
}

fn latency(p: &Producer<'_>, peer: &mut Peer) -> BenchResult<Vec<WaitResult>> {
    let combos: Vec<(Wait, Variant)> = WAITS
        .iter()
        .flat_map(|&w| VARIANTS.iter().map(move |&v| (w, v)))
        .collect();
    // Warm-up (loads the kernels, opens lazy paths), then the "really waits" check.
    for &(w, v) in &combos {
        p.batch(peer, w, v, LAT_WARM, Duration::ZERO)?;
    }
    let mut checks = vec![0.0; combos.len()];
    for (i, &(w, v)) in combos.iter().enumerate() {
        let t = p.batch(peer, w, v, 1, CHECK_DELAY)?[0];
        if t < CHECK_DELAY.as_nanos() as f64 / 2.0 {
            return Err(format!(
                "{w:?}/{v:?}: the round trip after a {CHECK_DELAY:?} kernel took {:.3} ms: the \
                 child did not wait for the parent's record",
                t / 1e6
            ));
        }
        checks[i] = t;
    }
    let mut samples = vec![Vec::new(); combos.len()];
    for r in 0..LAT_ROUNDS {
        for i in 0..combos.len() {
            let k = (i + r) % combos.len();
            let (w, v) = combos[k];
            samples[k].extend(p.batch(peer, w, v, LAT_ITERS, Duration::ZERO)?);
        }
    }
    let mut waits = Vec::new();
    for w in WAITS {
        let at = |v| combos.iter().position(|&c| c == (w, v)).unwrap_or(0);
        waits.push(WaitResult {
            wait: w,
            raw: std::mem::take(&mut samples[at(Variant::Raw)]),
            xs: std::mem::take(&mut samples[at(Variant::Xs)]),
            checks: [checks[at(Variant::Raw)], checks[at(Variant::Xs)]],
        });
    }
    Ok(waits)
}

/// Where a copy ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    Exporter,
    Importer,
}

/// The GB/s samples of one copy.
struct Cell {
    kind: CopyKind,
    who: Who,
    v: Variant,
    gbs: Vec<f64>,
}

/// Every copy's samples.
struct Copies {
    cells: Vec<Cell>,
}

fn copies(side: &mut Side, peer: &mut Peer) -> BenchResult<Copies> {
    let mut cells = Vec::new();
    for kind in KINDS {
        for who in [Who::Exporter, Who::Importer] {
            for v in VARIANTS {
                cells.push(Cell {
                    kind,
                    who,
                    v,
                    gbs: Vec::new(),
                });
            }
        }
    }
    let len = side.len as f64;
    // One timed batch: GB/s (bytes per ns).
    let mut one = |side: &mut Side, c: &Cell| -> BenchResult<f64> {
        let count = match c.kind {
            CopyKind::DtoD => DTOD_BATCH,
            CopyKind::DtoH => DTOH_BATCH,
        };
        let ns = match c.who {
            Who::Exporter => side.copy_batch(c.kind, c.v, count)?,
            Who::Importer => peer.call(Op::Copy(c.kind, c.v).code(), count, ACK_TIMEOUT)?,
        };
        Ok(count as f64 * len / ns.max(1) as f64)
    };
    for c in &cells {
        one(side, c)?; // warm-up
    }
    for r in 0..COPY_ROUNDS {
        for kind in KINDS {
            let idx: Vec<usize> = (0..cells.len())
                .filter(|&i| cells[i].kind == kind)
                .collect();
            for j in 0..idx.len() {
                let i = idx[(j + r) % idx.len()];
                let g = one(side, &cells[i])?;
                cells[i].gbs.push(g);
            }
        }
    }
    Ok(Copies { cells })
}

// ---------------------------------------------------------------------------------------------
// Statistics and the report

#[derive(Clone, Copy, Debug)]
struct Stat {
    med: f64,
    p10: f64,
    p90: f64,
}

fn stat(v: &[f64]) -> Stat {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return Stat {
            med: f64::NAN,
            p10: f64::NAN,
            p90: f64::NAN,
        };
    }
    let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
    Stat {
        med: at(0.5),
        p10: at(0.1),
        p90: at(0.9),
    }
}

fn us(s: Stat) -> String {
    format!(
        "{:.2} µs ({:.2}–{:.2})",
        s.med / 1e3,
        s.p10 / 1e3,
        s.p90 / 1e3
    )
}

fn gbs(s: Stat) -> String {
    format!("{:.1} ({:.1}–{:.1})", s.med, s.p10, s.p90)
}

fn wait_name(w: Wait) -> &'static str {
    match w {
        Wait::EventSync => "host wait: cuEventSynchronize / Event::synchronize",
        Wait::StreamWait => {
            "stream wait: cuStreamWaitEvent + cuStreamSynchronize / wait_event + synchronize"
        }
    }
}

fn kind_name(k: CopyKind, two: bool) -> &'static str {
    match (k, two) {
        (CopyKind::DtoD, false) => "device to device",
        (CopyKind::DtoD, true) => "device 0 to device 1 (peer)",
        (CopyKind::DtoH, _) => "device 0 to page-locked host",
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "MISS"
    }
}

fn report(
    consumer: usize,
    len: usize,
    info: &xstream_core::DeviceInfo,
    cinfo: &xstream_core::DeviceInfo,
    lat: &[WaitResult],
    copies: &Copies,
) -> String {
    let two = consumer != 0;
    let mut o = String::new();
    let mut verdicts = Vec::new();
    let cfg = if two {
        "two GPUs: producer and buffers on device 0, consumer stream and copy destinations on device 1"
    } else {
        "one GPU: both processes on device 0"
    };
    let _ = writeln!(o, "## gpu_ipc: {cfg}\n");
    let _ = writeln!(o, "device 0: {} ({})", info.name, info.driver);
    if two {
        let _ = writeln!(o, "device {consumer}: {} ({})", cinfo.name, cinfo.driver);
    }
    let _ = writeln!(
        o,
        "\n### Event signal round trip (parent: xstream_delay(0) then record; child: wait; \
         {LAT_ROUNDS} rounds × {LAT_ITERS}, median (p10–p90))\n"
    );
    let _ = writeln!(
        o,
        "| child's wait | raw driver | xstream | xstream − raw | check (20 ms kernel) raw / xstream |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|");
    for WaitResult {
        wait: w,
        raw: r,
        xs: x,
        checks,
    } in lat
    {
        let (sr, sx) = (stat(r), stat(x));
        let pct = (sx.med - sr.med) / sr.med * 100.0;
        let bridged = if two && *w == Wait::StreamWait {
            " (through a stream of device 0)"
        } else {
            ""
        };
        let _ = writeln!(
            o,
            "| {}{bridged} | {} | {} | {:+.0} ns ({pct:+.1}%) | {:.2} / {:.2} ms |",
            wait_name(*w),
            us(sr),
            us(sx),
            sx.med - sr.med,
            checks[0] / 1e6,
            checks[1] / 1e6
        );
        verdicts.push(format!(
            "{}: (a) cross-process event wait, {}, {}: xstream {:.2} µs vs raw {:.2} µs = {pct:+.1}% (target ≤ +{WAIT_TARGET_PCT:.0}%)",
            verdict(pct <= WAIT_TARGET_PCT),
            if two { "two GPUs" } else { "one GPU" },
            wait_name(*w),
            sx.med / 1e3,
            sr.med / 1e3
        ));
    }
    let _ = writeln!(
        o,
        "\n### Copies of {} MiB from the exporter's buffer: in the exporting process and from the \
         IPC import (GB/s, {COPY_ROUNDS} batches of {DTOD_BATCH} (DtoD) / {DTOH_BATCH} (DtoH) \
         copies, median (p10–p90))\n",
        len >> 20
    );
    let _ = writeln!(
        o,
        "| copy | raw: exporter | raw: import | xstream: exporter | xstream: import | raw import / raw exporter | xstream import / xstream exporter | xstream import / raw exporter |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|");
    let get = |k, who, v| {
        copies
            .cells
            .iter()
            .find(|c| (c.kind, c.who, c.v) == (k, who, v))
            .map(|c| stat(&c.gbs))
            .unwrap_or(Stat {
                med: f64::NAN,
                p10: f64::NAN,
                p90: f64::NAN,
            })
    };
    for k in KINDS {
        let re = get(k, Who::Exporter, Variant::Raw);
        let ri = get(k, Who::Importer, Variant::Raw);
        let xe_ = get(k, Who::Exporter, Variant::Xs);
        let xi = get(k, Who::Importer, Variant::Xs);
        let pct = |a: Stat, b: Stat| a.med / b.med * 100.0;
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {:.1}% | {:.1}% | {:.1}% |",
            kind_name(k, two),
            gbs(re),
            gbs(ri),
            gbs(xe_),
            gbs(xi),
            pct(ri, re),
            pct(xi, xe_),
            pct(xi, re)
        );
        let cfg = if two { "two GPUs" } else { "one GPU" };
        verdicts.push(format!(
            "{}: (b) copy from the import, {cfg}, {}: xstream import {:.1} GB/s = {:.1}% of xstream in the exporter (target ≥ {COPY_TARGET_PCT:.0}%)",
            verdict(pct(xi, xe_) >= COPY_TARGET_PCT),
            kind_name(k, two),
            xi.med,
            pct(xi, xe_)
        ));
        verdicts.push(format!(
            "{}: (b) copy from the import, {cfg}, {}: xstream import {:.1} GB/s = {:.1}% of the raw driver in the exporter (target ≥ {COPY_TARGET_PCT:.0}%)",
            verdict(pct(xi, re) >= COPY_TARGET_PCT),
            kind_name(k, two),
            xi.med,
            pct(xi, re)
        ));
    }
    let _ = writeln!(o);
    for v in verdicts {
        let _ = writeln!(o, "{v}");
    }
    let _ = writeln!(o);
    o
}
