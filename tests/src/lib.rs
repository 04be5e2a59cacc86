//! # xstream conformance suite
//!
//! One set of behavioural checks, written once against the `xstream_core` traits and run on
//! every backend: by `cargo test` (host, the Ascend simulator, CUDA when a GPU is present) and
//! by `xstream conform --backend B` on a user's own machine.
//!
//! Each check returns [`Outcome::Pass`] with a short detail, [`Outcome::Skip`] with the reason
//! (a capability the device lacks), or an error string saying what broke.

mod memop;
pub mod simulator;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use xstream_core::{
    block_on, lcg_reference, Backend, Buffer, Capabilities, CaptureErrorKind, CaptureMode,
    CaptureStatus, Combination, Device, Error, Event, EventDesc, EventFlags, Graph, HostAllocator,
    Kernel, PoolConfig, Priority, PriorityClass, Status, Stream, StreamDesc, StreamFlags,
    StreamPool, Translation, TranslationPolicy,
};

/// What a passing or skipped check reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The behaviour was observed; a short detail.
    Pass(String),
    /// The check does not apply; the reason.
    Skip(String),
}

/// The result of one check: `Err` says what broke.
pub type CheckResult = Result<Outcome, String>;

/// Where the checks run.
pub struct Env<B: Backend> {
    /// The device under test.
    pub device: B::Device,
    /// Makes a device whose context a check may poison (a deliberate fault), when the backend
    /// can isolate one within the process.
    pub isolated: Option<fn() -> xstream_core::Result<B::Device>>,
}

/// One named check.
pub struct Check<B: Backend> {
    /// Short name, unique.
    pub name: &'static str,
    /// What it proves.
    pub about: &'static str,
    /// The check.
    pub run: fn(&Env<B>) -> CheckResult,
}

/// Counts of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Checks that passed.
    pub passed: usize,
    /// Checks that failed.
    pub failed: usize,
    /// Checks that were skipped.
    pub skipped: usize,
}

trait Ctx<T> {
    fn ctx(self, what: &str) -> Result<T, String>;
}

impl<T> Ctx<T> for xstream_core::Result<T> {
    fn ctx(self, what: &str) -> Result<T, String> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

fn pass(s: impl Into<String>) -> CheckResult {
    Ok(Outcome::Pass(s.into()))
}

fn need<B: Backend>(env: &Env<B>, cap: Capabilities, why: &str) -> Option<Outcome> {
    if env.device.info().capabilities.contains(cap) {
        None
    } else {
        Some(Outcome::Skip(format!(
            "device lacks capability {cap:?} ({why})"
        )))
    }
}

macro_rules! need {
    ($env:expr, $cap:expr, $why:expr) => {
        if let Some(o) = need($env, $cap, $why) {
            return Ok(o);
        }
    };
}

fn nb() -> StreamDesc {
    StreamDesc::new().flags(StreamFlags::NON_BLOCKING)
}

fn read_all<B: Backend>(s: &B::Stream, buf: &B::Buffer) -> Result<Vec<u8>, String> {
    let rb = s.read(buf, 0, buf.len()).ctx("read")?;
    s.synchronize().ctx("synchronize after read")?;
    rb.take().ctx("readback")
}

/// Every check, in a stable order.
pub fn checks<B: Backend>() -> Vec<Check<B>> {
    macro_rules! c {
        ($name:ident, $about:expr) => {
            Check {
                name: stringify!($name),
                about: $about,
                run: $name::<B>,
            }
        };
    }
    vec![
        c!(flag_table_total, "every portable flag has exactly one translation row"),
        c!(flag_policy, "strict refuses unsupported flags by name and vendor-rejected combinations up front; best effort creates anyway and reports what it dropped"),
        c!(priority_mapping, "portable priorities map through the native range; clamps are reported, strict refuses"),
        c!(stream_ids_unique, "stream ids are unique and never reused"),
        c!(bad_input, "invalid arguments give clear errors"),
        c!(lcg_kernel, "the built-in compute kernel matches the host reference"),
        c!(ordering_across_streams, "an event wait orders work across streams (buffer contents)"),
        c!(wait_takes_snapshot, "a wait binds to the record current at call time"),
        c!(query_pending_then_ready, "query reports Pending, then Ready after synchronize"),
        c!(sync_timeout_recovers, "synchronize with timeout expires with Timeout and the stream stays usable"),
        c!(event_timing, "elapsed time is sane; disabled timing and unrecorded events are distinct errors"),
        c!(never_recorded_event, "a never-recorded event is complete and waiting on it is a no-op"),
        c!(callbacks_once_in_order, "callbacks run exactly once, in stream order, with Ok"),
        c!(callback_panic_surfaces, "a panicking callback is reported once by the next synchronize"),
        c!(callback_not_permitted, "xstream calls inside a stream-blocking callback return NotPermitted"),
        c!(notify_may_call_xstream, "second-tier callbacks run off the stream and may call xstream"),
        c!(callback_error_after_fault, "after a device fault, pending callbacks run once with the sticky error"),
        c!(stream_drop_does_not_cancel, "dropping a stream neither blocks nor cancels its work and callbacks"),
        c!(default_stream_rule, "blocking streams synchronize with the default stream; non-blocking ones do not"),
        c!(capture_defers_and_replays, "captured work runs only on replay; replaying twice equals running twice"),
        c!(capture_gates, "query/sync/callbacks during capture are refused and invalidate the capture"),
        c!(futures_resolve, "stream and event futures resolve; dropping a pending one is harmless"),
        c!(pool_round_robin_and_lease, "the pool hands out streams round-robin and leases exclusively"),
        c!(allocator_lookup, "a registered allocator is found from its stream"),
        Check {
            name: "value_wait_write",
            about: "a memory wait blocks only its stream until a write releases it (32/64-bit, GEQ across a wrap)",
            run: memop::value_wait_write::<B>,
        },
    ]
}

/// Runs the checks whose name contains `filter` (all when `None`), reporting each.
pub fn run<B: Backend>(
    env: &Env<B>,
    filter: Option<&str>,
    mut report: impl FnMut(&Check<B>, &CheckResult, Duration),
) -> Summary {
    let mut sum = Summary::default();
    for c in checks::<B>() {
        if let Some(f) = filter {
            if !c.name.contains(f) {
                continue;
            }
        }
        let t = Instant::now();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (c.run)(env)))
            .unwrap_or_else(|p| {
                Err(format!(
                    "check panicked: {}",
                    xstream_core::callback::panic_message(&*p)
                ))
            });
        match &r {
            Ok(Outcome::Pass(_)) => sum.passed += 1,
            Ok(Outcome::Skip(_)) => sum.skipped += 1,
            Err(_) => sum.failed += 1,
        }
        report(&c, &r, t.elapsed());
    }
    sum
}

/// Reports a test that skipped because its hardware is absent: `SKIP: <test>: <reason>`,
/// written straight to the process's stderr so that `cargo test`'s output capture does not
/// hide it (a skipped test must never look like a silent pass).
pub fn report_skip(test: &str, reason: &dyn std::fmt::Display) {
    use std::io::Write as _;
    let line = format!("SKIP: {test}: {reason}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Prints one line per check (`PASS`/`SKIP`/`FAIL name: detail`), the form used by tests and
/// the CLI.
pub fn print_line<B: Backend>(c: &Check<B>, r: &CheckResult, took: Duration) {
    let ms = took.as_secs_f64() * 1e3;
    match r {
        Ok(Outcome::Pass(d)) => println!("PASS {:<30} {ms:>8.1} ms  {d}", c.name),
        Ok(Outcome::Skip(d)) => println!("SKIP {:<30} {ms:>8.1} ms  {d}", c.name),
        Err(e) => println!("FAIL {:<30} {ms:>8.1} ms  {e}", c.name),
    }
}

// ---------------------------------------------------------------------------------------
// Flags and priorities

fn flag_table_total<B: Backend>(_env: &Env<B>) -> CheckResult {
    B::flag_table().check_total()?;
    pass(format!(
        "{} stream rows, {} event rows",
        B::flag_table().stream.rows.len(),
        B::flag_table().event.rows.len()
    ))
}

fn flag_policy<B: Backend>(env: &Env<B>) -> CheckResult {
    let t = B::flag_table();
    let dev = &env.device;
    let mut tried = 0;
    for row in t.stream.rows {
        let name = row.flag.name();
        match row.translation {
            Translation::Unsupported(_) => {
                match dev.create_stream(&StreamDesc::new().flags(row.flag)) {
                    Err(Error::UnsupportedFlag { flag, .. }) => {
                        ensure!(flag == name, "strict error names {flag}, expected {name}")
                    }
                    other => {
                        return Err(format!(
                            "strict {name}: expected UnsupportedFlag, got {other:?}"
                        ))
                    }
                }
                let s = dev
                    .create_stream(
                        &StreamDesc::new()
                            .flags(row.flag)
                            .policy(TranslationPolicy::BestEffort),
                    )
                    .ctx("best-effort create")?;
                ensure!(
                    s.report().flags.dropped.iter().any(|(f, _)| *f == name),
                    "best effort did not report {name} as dropped: {:?}",
                    s.report().flags
                );
                ensure!(
                    !s.flags().contains(row.flag),
                    "dropped {name} still in flags()"
                );
            }
            Translation::Hint(_) | Translation::Emulated(_) | Translation::Native { .. } => {
                let s = dev
                    .create_stream(&StreamDesc::new().flags(row.flag))
                    .ctx(&format!("strict create with {name}"))?;
                ensure!(
                    s.flags().contains(row.flag),
                    "{name} missing from flags(): {:?}",
                    s.flags()
                );
                if let Translation::Hint(_) = row.translation {
                    ensure!(
                        s.report().flags.hints.iter().any(|(f, _)| *f == name),
                        "hint {name} not reported"
                    );
                }
                if let Translation::Emulated(_) = row.translation {
                    ensure!(
                        s.report().flags.emulated.iter().any(|(f, _)| *f == name),
                        "emulated {name} not reported"
                    );
                }
            }
        }
        tried += 1;
    }
    let mut rules = 0;
    for rule in t.stream.rules {
        if let Combination::Alone(f, _) = rule {
            let other = if *f == StreamFlags::FAST_LAUNCH {
                StreamFlags::FAST_SYNC
            } else {
                StreamFlags::FAST_LAUNCH
            };
            match dev.create_stream(&StreamDesc::new().flags(*f | other)) {
                Err(Error::RejectedCombination { .. }) => rules += 1,
                got => {
                    return Err(format!(
                        "strict {f:?} with another flag: expected RejectedCombination, got {got:?}"
                    ))
                }
            }
            // Best effort creates anyway, keeping the rule's flag and reporting the drop.
            let s = dev
                .create_stream(
                    &StreamDesc::new()
                        .flags(*f | other)
                        .policy(TranslationPolicy::BestEffort),
                )
                .ctx(&format!("best-effort {f:?} with another flag"))?;
            let name = other.name();
            ensure!(
                s.flags().contains(*f) && !s.flags().contains(other),
                "best effort kept the wrong flag: {:?}",
                s.flags()
            );
            ensure!(
                s.report().flags.dropped.iter().any(|(d, _)| *d == name),
                "best effort did not report {name} as dropped: {:?}",
                s.report().flags
            );
        }
    }
    for row in t.event.rows {
        if let Translation::Unsupported(_) = row.translation {
            match dev.create_event(&EventDesc::new().flags(row.flag)) {
                Err(Error::UnsupportedFlag { .. }) | Err(Error::RejectedCombination { .. }) => {}
                other => {
                    return Err(format!(
                        "event {}: expected UnsupportedFlag, got {other:?}",
                        row.flag.name()
                    ))
                }
            }
            // Best effort creates the event anyway and its report names the drop.
            let e = dev
                .create_event(
                    &EventDesc::new()
                        .flags(row.flag)
                        .policy(TranslationPolicy::BestEffort),
                )
                .ctx("best-effort event")?;
            ensure!(
                e.report()
                    .dropped
                    .iter()
                    .any(|(f, _)| *f == row.flag.name()),
                "best-effort event did not report {} as dropped: {:?}",
                row.flag.name(),
                e.report()
            );
        }
    }
    pass(format!(
        "{tried} stream flags created, {rules} combination rules enforced"
    ))
}

fn priority_mapping<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let r = dev.info().priority_range;
    let hi = dev
        .create_stream(&nb().priority(Priority::Highest))
        .ctx("highest")?;
    let lo = dev
        .create_stream(&nb().priority(Priority::Lowest))
        .ctx("lowest")?;
    ensure!(
        hi.priority() == r.greatest,
        "Highest gave {} not {}",
        hi.priority(),
        r.greatest
    );
    ensure!(
        lo.priority() == r.least,
        "Lowest gave {} not {}",
        lo.priority(),
        r.least
    );
    // A value beyond the least-urgent end.
    let beyond = if r.least >= r.greatest {
        r.least + 100
    } else {
        r.least - 100
    };
    match dev.create_stream(&nb().priority(Priority::Native(beyond))) {
        Err(Error::InvalidArgument(_)) => {}
        other => {
            return Err(format!(
                "strict out-of-range priority: expected InvalidArgument, got {other:?}"
            ))
        }
    }
    let c = dev
        .create_stream(
            &nb()
                .priority(Priority::Native(beyond))
                .policy(TranslationPolicy::BestEffort),
        )
        .ctx("best-effort out-of-range priority")?;
    ensure!(
        c.priority() == r.least,
        "clamped to {} not {}",
        c.priority(),
        r.least
    );
    ensure!(
        c.report().priority.clamped_from == Some(beyond),
        "clamp not reported: {:?}",
        c.report().priority
    );
    // A class the range cannot tell from Normal says so in the creation report.
    let mut collapsed = Vec::new();
    for p in [
        Priority::Lowest,
        Priority::Low,
        Priority::Normal,
        Priority::High,
        Priority::Highest,
    ] {
        let s = dev.create_stream(&nb().priority(p)).ctx("class")?;
        let same = s.report().priority.native == r.default && p != Priority::Normal;
        ensure!(
            s.report().priority.collapsed_into == same.then_some(Priority::Normal),
            "{p:?} → native {}: collapse report {:?}",
            s.report().priority.native,
            s.report().priority.collapsed_into
        );
        if same {
            collapsed.push(format!("{p:?}"));
        }
    }
    pass(format!(
        "range least {} greatest {} default {}; {beyond} clamped to {}; equal to Normal: [{}]",
        r.least,
        r.greatest,
        r.default,
        c.priority(),
        collapsed.join(", ")
    ))
}

fn stream_ids_unique<B: Backend>(env: &Env<B>) -> CheckResult {
    let mut seen = std::collections::HashSet::new();
    for round in 0..2 {
        let v: Vec<_> = (0..16)
            .map(|_| env.device.create_stream(&nb()))
            .collect::<Result<_, _>>()
            .ctx("create")?;
        for s in &v {
            ensure!(
                seen.insert(s.id()),
                "id {} repeated (round {round})",
                s.id()
            );
        }
    }
    pass("32 streams, 32 distinct ids across create/drop cycles")
}

fn bad_input<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    ensure!(
        matches!(dev.alloc(0), Err(Error::InvalidArgument(_))),
        "alloc(0) not refused"
    );
    let s = dev.create_stream(&nb()).ctx("create")?;
    let buf = dev.alloc(64).ctx("alloc")?;
    ensure!(
        matches!(s.memset(&buf, 60, 8, 0), Err(Error::InvalidArgument(_))),
        "memset out of range not refused"
    );
    ensure!(
        matches!(
            s.write(&buf, 0, vec![0; 65]),
            Err(Error::InvalidArgument(_))
        ),
        "write out of range not refused"
    );
    ensure!(
        matches!(s.read(&buf, usize::MAX, 2), Err(Error::InvalidArgument(_))),
        "read with overflowing range not refused"
    );
    ensure!(
        matches!(
            s.synchronize_timeout(Duration::ZERO),
            Err(Error::InvalidArgument(_))
        ),
        "zero stream timeout not refused"
    );
    let e = dev.create_event(&EventDesc::new()).ctx("event")?;
    ensure!(
        matches!(
            e.synchronize_timeout(Duration::ZERO),
            Err(Error::InvalidArgument(_))
        ),
        "zero event timeout not refused"
    );
    if dev.info().capabilities.contains(Capabilities::KERNELS) {
        let odd = dev.alloc(6).ctx("alloc 6")?;
        ensure!(
            matches!(
                s.launch(Kernel::Lcg {
                    buf: &odd,
                    rounds: 1
                }),
                Err(Error::InvalidArgument(_))
            ),
            "LCG on a 6-byte buffer not refused"
        );
    }
    s.synchronize().ctx("stream still usable")?;
    pass("alloc(0), out-of-range copies, zero timeouts refused; stream still usable")
}

fn lcg_kernel<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::KERNELS, "built-in kernels");
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let n = 1 << 16;
    let data: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
    let buf = dev.alloc(n).ctx("alloc")?;
    s.write(&buf, 0, data.clone()).ctx("write")?;
    s.launch(Kernel::Lcg {
        buf: &buf,
        rounds: 7,
    })
    .ctx("launch")?;
    let got = read_all::<B>(&s, &buf)?;
    let mut want = data;
    lcg_reference(&mut want, 7);
    ensure!(got == want, "device result differs from the host reference");
    pass(format!("{n} bytes, 7 rounds, identical to the reference"))
}

// ---------------------------------------------------------------------------------------
// Ordering, query, synchronize

fn ordering_across_streams<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(
        env,
        Capabilities::KERNELS,
        "a delay kernel to make ordering observable"
    );
    let dev = &env.device;
    let a = dev.create_stream(&nb().name("producer")).ctx("create a")?;
    let b = dev.create_stream(&nb().name("consumer")).ctx("create b")?;
    let n = 4096;
    let src = dev.alloc(n).ctx("alloc")?;
    let dst = dev.alloc(n).ctx("alloc")?;
    let e = dev
        .create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))
        .ctx("event")?;
    a.launch(Kernel::Delay(Duration::from_millis(50)))
        .ctx("delay")?;
    a.memset(&src, 0, n, 7).ctx("memset")?;
    e.record(&a).ctx("record")?;
    b.wait_event(&e).ctx("wait")?;
    b.copy(&src, 0, &dst, 0, n).ctx("copy")?;
    let got = read_all::<B>(&b, &dst)?;
    ensure!(
        got.iter().all(|&x| x == 7),
        "consumer saw data before the producer finished"
    );
    pass("consumer saw the producer's bytes after a 50 ms delay")
}

fn wait_takes_snapshot<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::KERNELS, "a delay kernel");
    let dev = &env.device;
    let a = dev.create_stream(&nb()).ctx("a")?;
    let b = dev.create_stream(&nb()).ctx("b")?;
    let idle = dev.create_stream(&nb()).ctx("idle")?;
    let buf = dev.alloc(256).ctx("alloc")?;
    let e = dev.create_event(&EventDesc::new()).ctx("event")?;
    a.launch(Kernel::Delay(Duration::from_millis(60)))
        .ctx("delay")?;
    a.memset(&buf, 0, 256, 9).ctx("memset")?;
    e.record(&a).ctx("record on a")?;
    b.wait_event(&e).ctx("wait")?;
    e.record(&idle).ctx("re-record on idle")?;
    let got = read_all::<B>(&b, &buf)?;
    ensure!(
        got.iter().all(|&x| x == 9),
        "the wait followed the later record instead of the snapshot"
    );
    drop(e);
    pass("re-recording after the wait did not release it")
}

fn query_pending_then_ready<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::KERNELS, "a delay kernel");
    let s = env.device.create_stream(&nb()).ctx("create")?;
    ensure!(
        s.query().ctx("idle query")? == Status::Ready,
        "idle stream not Ready"
    );
    s.launch(Kernel::Delay(Duration::from_millis(100)))
        .ctx("delay")?;
    ensure!(
        s.query().ctx("busy query")? == Status::Pending,
        "busy stream not Pending"
    );
    s.synchronize().ctx("sync")?;
    ensure!(
        s.query().ctx("query after sync")? == Status::Ready,
        "not Ready after synchronize"
    );
    pass("Ready → Pending → Ready")
}

fn sync_timeout_recovers<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::KERNELS, "a delay kernel");
    let s = env.device.create_stream(&nb()).ctx("create")?;
    s.launch(Kernel::Delay(Duration::from_millis(300)))
        .ctx("delay")?;
    let t = Instant::now();
    match s.synchronize_timeout(Duration::from_millis(20)) {
        Err(Error::Timeout(_)) => {}
        other => return Err(format!("expected Timeout, got {other:?}")),
    }
    let waited = t.elapsed();
    ensure!(
        waited < Duration::from_millis(250),
        "timeout took {waited:?}"
    );
    s.synchronize().ctx("synchronize after timeout")?;
    s.synchronize_timeout(Duration::from_secs(5))
        .ctx("timed sync on idle stream")?;
    pass(format!(
        "timed out after {:.1} ms, then synchronized",
        waited.as_secs_f64() * 1e3
    ))
}

fn event_timing<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::KERNELS, "a delay kernel");
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let e0 = dev.create_event(&EventDesc::new()).ctx("event")?;
    let e1 = dev.create_event(&EventDesc::new()).ctx("event")?;
    let never = dev.create_event(&EventDesc::new()).ctx("event")?;
    let notime = dev
        .create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))
        .ctx("event")?;
    e0.record(&s).ctx("record")?;
    s.launch(Kernel::Delay(Duration::from_millis(30)))
        .ctx("delay")?;
    e1.record(&s).ctx("record")?;
    notime.record(&s).ctx("record")?;
    e1.synchronize().ctx("event sync")?;
    let ms = e0.elapsed_ms(&e1).ctx("elapsed")?;
    ensure!(
        (20.0..2000.0).contains(&ms),
        "elapsed {ms} ms around a 30 ms delay"
    );
    ensure!(
        matches!(e0.elapsed_ms(&notime), Err(Error::TimingDisabled)),
        "timing-disabled end not refused"
    );
    ensure!(
        matches!(e0.elapsed_ms(&never), Err(Error::EventNotRecorded)),
        "never-recorded end not refused"
    );
    ensure!(
        matches!(never.elapsed_ms(&e1), Err(Error::EventNotRecorded)),
        "never-recorded start not refused"
    );
    s.launch(Kernel::Delay(Duration::from_millis(80)))
        .ctx("delay")?;
    e1.record(&s).ctx("re-record")?;
    match e0.elapsed_ms(&e1) {
        Err(Error::NotReady) => {}
        other => return Err(format!("pending end: expected NotReady, got {other:?}")),
    }
    s.synchronize().ctx("sync")?;
    pass(format!("{ms:.2} ms around a 30 ms delay"))
}

fn never_recorded_event<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let e = dev.create_event(&EventDesc::new()).ctx("event")?;
    ensure!(
        e.query().ctx("query")? == Status::Ready,
        "never-recorded event not Ready"
    );
    e.synchronize().ctx("synchronize")?;
    e.synchronize_timeout(Duration::from_millis(10))
        .ctx("timed synchronize")?;
    let s = dev.create_stream(&nb()).ctx("create")?;
    s.wait_event(&e).ctx("wait")?;
    s.synchronize_timeout(Duration::from_secs(2))
        .ctx("sync after waiting on it")?;
    pass("Ready, synchronize returns, wait is a no-op")
}

// ---------------------------------------------------------------------------------------
// Callbacks

fn callbacks_once_in_order<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let buf = dev.alloc(64).ctx("alloc")?;
    let log = Arc::new(Mutex::new(Vec::new()));
    let n = 200;
    for i in 0..n {
        if i % 10 == 0 {
            s.memset(&buf, 0, 64, i as u8).ctx("memset")?;
        }
        let log = log.clone();
        s.host_callback(move |r| log.lock().unwrap().push((i, r.is_ok())))
            .ctx("callback")?;
    }
    s.synchronize().ctx("sync")?;
    let got = log.lock().unwrap().clone();
    ensure!(got.len() == n, "{} callbacks ran, expected {n}", got.len());
    for (k, (i, ok)) in got.iter().enumerate() {
        ensure!(*i == k, "callback {i} ran in position {k}");
        ensure!(*ok, "callback {i} got an error");
    }
    pass(format!("{n} callbacks, each once, in order"))
}

fn callback_panic_surfaces<B: Backend>(env: &Env<B>) -> CheckResult {
    let s = env.device.create_stream(&nb()).ctx("create")?;
    let after = Arc::new(AtomicUsize::new(0));
    s.host_callback(|_| panic!("deliberate panic in a host callback"))
        .ctx("callback")?;
    let a2 = after.clone();
    s.host_callback(move |r| {
        if r.is_ok() {
            a2.fetch_add(1, Ordering::SeqCst);
        }
    })
    .ctx("callback")?;
    match s.synchronize() {
        Err(Error::CallbackPanicked(m)) => ensure!(m.contains("deliberate"), "message lost: {m}"),
        other => return Err(format!("expected CallbackPanicked, got {other:?}")),
    }
    ensure!(
        after.load(Ordering::SeqCst) == 1,
        "the callback after the panic did not run once with Ok"
    );
    s.synchronize().ctx("second synchronize must be clean")?;
    pass("panic reported once; later work unaffected")
}

fn callback_not_permitted<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = env.device.clone();
    let s = Arc::new(env.device.create_stream(&nb()).ctx("create")?);
    let other = Arc::new(env.device.create_stream(&nb()).ctx("create")?);
    let results = Arc::new(Mutex::new(Vec::new()));
    let (r2, o2, d2) = (results.clone(), other.clone(), dev.clone());
    s.host_callback(move |_| {
        let mut r = r2.lock().unwrap();
        r.push(("query", o2.query().err()));
        r.push(("synchronize", o2.synchronize().err()));
        r.push(("create_stream", d2.create_stream(&StreamDesc::new()).err()));
        r.push(("create_event", d2.create_event(&EventDesc::new()).err()));
    })
    .ctx("callback")?;
    s.synchronize().ctx("sync")?;
    let r = results.lock().unwrap();
    ensure!(r.len() == 4, "callback did not run");
    for (what, e) in r.iter() {
        ensure!(
            matches!(e, Some(Error::NotPermitted(_))),
            "{what} inside a callback gave {e:?}"
        );
    }
    other
        .query()
        .ctx("outside the callback the same call works")?;
    pass("query, synchronize, create_stream, create_event refused inside")
}

fn notify_may_call_xstream<B: Backend>(env: &Env<B>) -> CheckResult {
    let s = Arc::new(env.device.create_stream(&nb()).ctx("create")?);
    let (tx, rx) = std::sync::mpsc::channel();
    let s2 = s.clone();
    s.notify(move |r| {
        let q = s2.query();
        let _ = tx.send((r.is_ok(), q.is_ok()));
    })
    .ctx("notify")?;
    s.synchronize().ctx("sync")?;
    let (ok, q) = rx
        .recv_timeout(Duration::from_secs(10))
        .map_err(|_| "notify callback never ran".to_string())?;
    ensure!(ok, "notify got an error status");
    ensure!(q, "query from a notify callback failed");
    pass("ran on the dispatcher and called query()")
}

fn callback_error_after_fault<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(
        env,
        Capabilities::FAULT_INJECTION,
        "a deliberate device fault"
    );
    let Some(make) = env.isolated else {
        return Ok(Outcome::Skip(
            "a fault poisons the whole process on this backend; covered by the backend's own child-process test".into(),
        ));
    };
    let dev = make().ctx("isolated device")?;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let calls = Arc::new(Mutex::new(Vec::new()));
    s.launch(Kernel::Delay(Duration::from_millis(20)))
        .ctx("delay")?;
    s.launch(Kernel::Fault).ctx("fault")?;
    for _ in 0..3 {
        let c = calls.clone();
        s.host_callback(move |r| c.lock().unwrap().push(r))
            .ctx("callback")?;
    }
    let err = match s.synchronize() {
        Err(e) => e,
        Ok(()) => return Err("synchronize after a fault returned Ok".into()),
    };
    ensure!(err.is_sticky(), "fault error is not sticky: {err}");
    let t = Instant::now();
    while calls.lock().unwrap().len() < 3 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let got = calls.lock().unwrap();
    ensure!(got.len() == 3, "{} of 3 callbacks ran", got.len());
    ensure!(
        got.iter().all(|r| matches!(r, Err(e) if e.is_sticky())),
        "callbacks did not all get the sticky error: {got:?}"
    );
    ensure!(s.query().is_err(), "query after the fault succeeded");
    pass(format!("3 callbacks failed once each with: {err}"))
}

fn stream_drop_does_not_cancel<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::KERNELS, "a delay kernel");
    let dev = &env.device;
    let buf = dev.alloc(128).ctx("alloc")?;
    let ran = Arc::new(Mutex::new(None));
    {
        let s = dev.create_stream(&nb()).ctx("create")?;
        s.launch(Kernel::Delay(Duration::from_millis(50)))
            .ctx("delay")?;
        s.memset(&buf, 0, 128, 3).ctx("memset")?;
        let r2 = ran.clone();
        s.host_callback(move |r| *r2.lock().unwrap() = Some(r.is_ok()))
            .ctx("callback")?;
        let t = Instant::now();
        drop(s);
        ensure!(
            t.elapsed() < Duration::from_millis(40),
            "drop blocked for {:?}",
            t.elapsed()
        );
    }
    let t = Instant::now();
    while ran.lock().unwrap().is_none() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(1));
    }
    dev.synchronize().ctx("device synchronize")?;
    ensure!(
        *ran.lock().unwrap() == Some(true),
        "callback of the dropped stream: {:?}",
        ran.lock().unwrap()
    );
    let r = dev.create_stream(&nb()).ctx("create")?;
    let got = read_all::<B>(&r, &buf)?;
    ensure!(
        got.iter().all(|&x| x == 3),
        "work of the dropped stream did not complete"
    );
    pass("drop returned at once; work and callback completed")
}

fn default_stream_rule<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    if !dev
        .info()
        .capabilities
        .contains(Capabilities::LEGACY_DEFAULT_STREAM)
    {
        let s = dev.create_stream(&StreamDesc::new()).ctx("create")?;
        ensure!(
            s.flags().contains(StreamFlags::NON_BLOCKING),
            "backend without the legacy rule must report NON_BLOCKING as inherent"
        );
        return pass("no legacy default stream: every stream is non-blocking (inherent)");
    }
    need!(env, Capabilities::KERNELS, "a delay kernel");
    let ds = dev.default_stream().ctx("default stream")?;
    let blocking = dev.create_stream(&StreamDesc::new()).ctx("blocking")?;
    let nonblocking = dev.create_stream(&nb()).ctx("non-blocking")?;
    let b1 = dev.alloc(64).ctx("alloc")?;
    ds.launch(Kernel::Delay(Duration::from_millis(60)))
        .ctx("delay")?;
    ds.memset(&b1, 0, 64, 5).ctx("memset")?;
    let got = read_all::<B>(&blocking, &b1)?;
    ensure!(
        got.iter().all(|&x| x == 5),
        "blocking stream did not wait for the default stream"
    );
    let b2 = dev.alloc(64).ctx("alloc")?;
    ds.launch(Kernel::Delay(Duration::from_millis(300)))
        .ctx("delay")?;
    ds.memset(&b2, 0, 64, 9).ctx("memset")?;
    let got = read_all::<B>(&nonblocking, &b2)?;
    ensure!(
        got.iter().all(|&x| x == 0),
        "non-blocking stream waited for the default stream"
    );
    // And the default stream waits for blocking streams.
    let b3 = dev.alloc(64).ctx("alloc")?;
    blocking
        .launch(Kernel::Delay(Duration::from_millis(60)))
        .ctx("delay")?;
    blocking.memset(&b3, 0, 64, 4).ctx("memset")?;
    let got = read_all::<B>(&ds, &b3)?;
    ensure!(
        got.iter().all(|&x| x == 4),
        "default stream did not wait for a blocking stream"
    );
    dev.synchronize().ctx("device sync")?;
    pass("blocking ↔ default ordered both ways; non-blocking independent")
}

// ---------------------------------------------------------------------------------------
// Capture

fn capture_defers_and_replays<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::CAPTURE, "stream capture");
    need!(env, Capabilities::KERNELS, "a kernel to capture");
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let n = 1024;
    let init: Vec<u8> = (0..n).map(|i| (i % 256) as u8).collect();
    let buf = dev.alloc(n).ctx("alloc")?;
    s.write(&buf, 0, init.clone()).ctx("write")?;
    s.synchronize().ctx("sync")?;
    s.begin_capture(CaptureMode::Global).ctx("begin")?;
    ensure!(
        s.capture_status() == CaptureStatus::Active,
        "status not Active"
    );
    s.launch(Kernel::Lcg {
        buf: &buf,
        rounds: 3,
    })
    .ctx("captured launch")?;
    let g = s.end_capture().ctx("end")?;
    ensure!(
        s.capture_status() == CaptureStatus::None,
        "status not None after end"
    );
    ensure!(g.node_count() >= 1, "graph has no nodes");
    let before = read_all::<B>(&s, &buf)?;
    ensure!(before == init, "captured work executed before replay");
    g.launch(&s).ctx("replay 1")?;
    g.launch(&s).ctx("replay 2")?;
    let after = read_all::<B>(&s, &buf)?;
    let mut want = init;
    lcg_reference(&mut want, 6);
    ensure!(
        after == want,
        "two replays differ from running the work twice"
    );
    pass(format!(
        "graph of {} node(s) replayed twice = 6 LCG rounds",
        g.node_count()
    ))
}

fn capture_gates<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::CAPTURE, "stream capture");
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let buf = dev.alloc(64).ctx("alloc")?;
    s.begin_capture(CaptureMode::Global).ctx("begin")?;
    ensure!(
        matches!(
            s.begin_capture(CaptureMode::Global),
            Err(Error::Capture {
                kind: CaptureErrorKind::AlreadyCapturing,
                ..
            })
        ),
        "second begin not refused"
    );
    ensure!(
        s.capture_status() == CaptureStatus::Active,
        "second begin broke the capture"
    );
    s.memset(&buf, 0, 64, 1).ctx("captured memset")?;
    ensure!(
        matches!(s.synchronize(), Err(Error::Capture { .. })),
        "synchronize during capture not refused"
    );
    ensure!(
        s.capture_status() == CaptureStatus::Invalidated,
        "capture not invalidated"
    );
    ensure!(
        matches!(
            s.end_capture(),
            Err(Error::Capture {
                kind: CaptureErrorKind::Invalidated,
                ..
            })
        ),
        "end of an invalidated capture did not fail"
    );
    s.synchronize().ctx("stream usable after failed capture")?;
    s.begin_capture(CaptureMode::Global).ctx("begin again")?;
    let ran = Arc::new(AtomicUsize::new(0));
    let r2 = ran.clone();
    ensure!(
        matches!(
            s.host_callback(move |_| {
                r2.fetch_add(1, Ordering::SeqCst);
            }),
            Err(Error::Capture { .. })
        ),
        "callback during capture not refused"
    );
    ensure!(
        matches!(s.query(), Err(Error::Capture { .. })),
        "query during capture not refused"
    );
    ensure!(
        s.end_capture().is_err(),
        "capture survived a refused callback"
    );
    s.synchronize().ctx("sync")?;
    ensure!(ran.load(Ordering::SeqCst) == 0, "refused callback ran");
    let ds = dev.default_stream().ctx("default")?;
    ensure!(
        matches!(
            ds.begin_capture(CaptureMode::Global),
            Err(Error::Capture { .. })
        ),
        "default stream capture not refused"
    );
    pass("second begin, sync, query, callback, default-stream capture all handled")
}

// ---------------------------------------------------------------------------------------
// Futures, pool, allocator

fn futures_resolve<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let kernels = dev.info().capabilities.contains(Capabilities::KERNELS);
    if kernels {
        s.launch(Kernel::Delay(Duration::from_millis(30)))
            .ctx("delay")?;
    }
    let before = dev.create_event(&EventDesc::new()).ctx("event")?;
    before.record(&s).ctx("record")?;
    let f = s.completed().ctx("stream future")?;
    block_on(f).ctx("stream future result")?;
    // The future's own host callback may still be finishing, but everything before it is done.
    ensure!(
        before.query().ctx("query")? == Status::Ready,
        "future resolved before the work completed"
    );
    let e = dev.create_event(&EventDesc::new()).ctx("event")?;
    if kernels {
        s.launch(Kernel::Delay(Duration::from_millis(20)))
            .ctx("delay")?;
    }
    e.record(&s).ctx("record")?;
    e.completed()
        .ctx("event future")?
        .wait()
        .ctx("event future result")?;
    ensure!(
        e.query().ctx("query")? == Status::Ready,
        "event future resolved early"
    );
    if kernels {
        s.launch(Kernel::Delay(Duration::from_millis(20)))
            .ctx("delay")?;
    }
    drop(s.completed().ctx("future to drop")?);
    drop(e.completed().ctx("future to drop")?);
    s.synchronize().ctx("sync after dropping futures")?;
    pass("stream and event futures resolved after the work; dropped ones harmless")
}

fn pool_round_robin_and_lease<B: Backend>(env: &Env<B>) -> CheckResult {
    let pool = StreamPool::<B>::new(
        env.device.clone(),
        PoolConfig {
            per_class: [1, 3, 1],
            flags: StreamFlags::NON_BLOCKING,
        },
    )
    .ctx("pool")?;
    let ids: Vec<u64> = (0..6)
        .map(|_| pool.get(PriorityClass::Normal).map(|s| s.id()))
        .collect::<Result<_, _>>()
        .ctx("get")?;
    ensure!(
        ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2],
        "first round not distinct: {ids:?}"
    );
    ensure!(ids[..3] == ids[3..], "not round-robin: {ids:?}");
    ensure!(
        pool.created() == 3,
        "created {} streams for 3 slots",
        pool.created()
    );
    let hi = pool.get(PriorityClass::High).ctx("high")?;
    ensure!(!ids.contains(&hi.id()), "high class shares a normal stream");
    let l1 = pool.lease(PriorityClass::Normal).ctx("lease")?;
    let l2 = pool.lease(PriorityClass::Normal).ctx("lease")?;
    let (i1, i2) = (l1.id(), l2.id());
    ensure!(
        i1 != i2 && !ids.contains(&i1) && !ids.contains(&i2),
        "leases are not exclusive"
    );
    drop(l1);
    let l3 = pool.lease(PriorityClass::Normal).ctx("lease")?;
    ensure!(l3.id() == i1, "a returned lease was not reused");
    ensure!(
        StreamPool::<B>::new(
            env.device.clone(),
            PoolConfig {
                per_class: [0, 1, 1],
                flags: StreamFlags::NON_BLOCKING
            }
        )
        .is_err(),
        "empty class accepted"
    );
    pass(format!(
        "{} streams created for 6 gets + 3 leases",
        pool.created()
    ))
}

fn allocator_lookup<B: Backend>(env: &Env<B>) -> CheckResult {
    let s = env.device.create_stream(&nb()).ctx("create")?;
    ensure!(
        s.allocator().ctx("lookup")?.is_none(),
        "fresh stream has an allocator"
    );
    let a = HostAllocator::new();
    let dynamic: Arc<dyn xstream_core::Allocator> = a.clone();
    s.set_allocator(Some(dynamic.clone())).ctx("register")?;
    let found = s
        .allocator()
        .ctx("lookup")?
        .ok_or("registered allocator not found")?;
    ensure!(
        Arc::as_ptr(&found) as *const () == Arc::as_ptr(&dynamic) as *const (),
        "lookup returned a different allocator"
    );
    let b = found
        .alloc(256)
        .ok_or("allocation through the looked-up allocator failed")?;
    ensure!(found.address(b) != 0, "block has no address");
    ensure!(
        a.live_blocks() == 1,
        "allocation did not reach the registered allocator"
    );
    found.free(b);
    ensure!(
        a.live_blocks() == 0,
        "free did not reach the registered allocator"
    );
    s.set_allocator(None).ctx("unregister")?;
    ensure!(
        s.allocator().ctx("lookup")?.is_none(),
        "allocator still registered"
    );
    pass("register, look up, allocate, free, unregister")
}
