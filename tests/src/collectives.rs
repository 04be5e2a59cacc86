//! Collective checks: one suite, generic over `B: CollectiveBackend`, for every backend's
//! communicator (host, the HCCL simulator, NCCL on GPUs).
//!
//! [`run_collectives`] runs the one-process checks on the communicators of
//! [`CollEnv::devices`] (made with `init_all`, or with `init_rank` from one thread per rank);
//! [`rank_conformance`] is the part one rank runs in its own process (multi-process jobs):
//! every op × dtype on that rank, verified against the same reference.
//!
//! | check | what it proves |
//! |---|---|
//! | `coll_support_table` | the op × dtype table is total; unsupported cells are refused with `Unsupported` |
//! | `coll_ops_dtypes` | every op × dtype × reduction: exact for integers, within tolerance for floats |
//! | `coll_init_rank_threads` | `new_unique_id` + `init_rank` (one thread per rank) make a working job |
//! | `coll_send_recv` | send/recv in a group (ring exchange) and in order without a group |
//! | `coll_event_ordering` | a collective waits for an event on its input; a consumer waits for an event after it |
//! | `coll_capture` | a captured all_reduce replays (each replay a new operation) |
//! | `coll_bad_args` | bad counts, roots, peers, devices and group misuse give clear errors at enqueue |
//! | `coll_peer_mismatch` | ranks that disagree on count or dtype fail with `InvalidArgument` (where detected) |
//! | `coll_dead_peer` | a missing peer gives a timeout error (not a hang) and the communicator refuses later work |
//! | `coll_abort` | an abort makes the aborting rank's later work fail and its waiting peer get an error |

use std::time::Duration;

use xstream_core::collective::{self, group, CommOf};
use xstream_core::{
    Backend, Buffer, BufferOf, CollectiveBackend, CollectiveErrorKind, CollectiveKind,
    CollectiveSupport, Communicator, DataType, Device, Error, ReduceOp, Stream, StreamOf,
};

use crate::{nb, pass, read_all, CheckResult, Ctx, Outcome, Summary};

pub mod cases;

pub use cases::{all_cases, Case};

/// Where the collective checks run.
pub struct CollEnv<B: CollectiveBackend> {
    /// One entry per rank (the same device may repeat where the backend allows it).
    pub devices: Vec<B::Device>,
    /// The timeout the failure checks give their communicators (short: a dead peer must be
    /// reported quickly). Never a timing bound of a check.
    pub short_timeout: Duration,
}

/// One named collective check.
pub struct CollCheck<B: CollectiveBackend> {
    /// Short name, unique.
    pub name: &'static str,
    /// What it proves.
    pub about: &'static str,
    /// The check.
    pub run: fn(&CollEnv<B>) -> CheckResult,
}

/// Every collective check, in a stable order.
pub fn collective_checks<B: CollectiveBackend>() -> Vec<CollCheck<B>> {
    macro_rules! c {
        ($name:ident, $about:expr) => {
            CollCheck {
                name: stringify!($name),
                about: $about,
                run: $name::<B>,
            }
        };
    }
    vec![
        c!(
            coll_support_table,
            "the op x dtype table is total; unsupported cells are refused"
        ),
        c!(
            coll_ops_dtypes,
            "every op x dtype x reduction matches the reference"
        ),
        c!(
            coll_init_rank_threads,
            "new_unique_id + init_rank from one thread per rank"
        ),
        c!(
            coll_send_recv,
            "send/recv: ring exchange in a group, ordered pairs without"
        ),
        c!(
            coll_event_ordering,
            "events order a collective after its producer and before its consumer"
        ),
        c!(
            coll_capture,
            "a captured all_reduce replays as new operations"
        ),
        c!(
            coll_bad_args,
            "bad counts, roots, peers, devices, group misuse: clear errors"
        ),
        c!(
            coll_peer_mismatch,
            "ranks disagreeing on count or dtype fail with InvalidArgument"
        ),
        c!(
            coll_dead_peer,
            "a missing peer gives a timeout error, not a hang"
        ),
        c!(
            coll_abort,
            "abort fails the aborting rank's work and its waiting peer"
        ),
    ]
}

/// Runs the collective checks whose name contains `filter` (all when `None`), reporting
/// each; a skip is never a failure here (each says why).
pub fn run_collectives<B: CollectiveBackend>(
    env: &CollEnv<B>,
    filter: Option<&str>,
    mut report: impl FnMut(&CollCheck<B>, &CheckResult, Duration),
) -> Summary {
    let mut sum = Summary::default();
    for c in collective_checks::<B>() {
        if filter.is_some_and(|f| !c.name.contains(f)) {
            continue;
        }
        let t = std::time::Instant::now();
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

/// Prints one result line (`PASS`/`SKIP`/`FAIL name (time): detail`); skips also go to
/// stderr so `cargo test` shows them.
pub fn report_coll_line<B: CollectiveBackend>(c: &CollCheck<B>, r: &CheckResult, took: Duration) {
    let (tag, d) = match r {
        Ok(Outcome::Pass(d)) => ("PASS", d.clone()),
        Ok(Outcome::Skip(d)) => ("SKIP", d.clone()),
        Err(e) => ("FAIL", e.clone()),
    };
    println!("{tag} {} ({took:.1?}): {d}", c.name);
    if tag == "SKIP" {
        crate::report_skip(c.name, &d);
    }
}

/// The communicators of `env` (one job over all its devices, `init_all`).
fn comms<B: CollectiveBackend>(env: &CollEnv<B>) -> Result<Vec<CommOf<B>>, String> {
    if env.devices.len() < 2 {
        return Err("the collective checks need at least 2 ranks".into());
    }
    B::init_all(&env.devices).ctx("init_all")
}

/// One non-blocking stream per communicator, on its device.
fn streams<B: CollectiveBackend>(cs: &[CommOf<B>]) -> Result<Vec<StreamOf<B>>, String> {
    cs.iter()
        .map(|c| c.device().create_stream(&nb()).ctx("create_stream"))
        .collect()
}

fn refs<T>(v: &[T]) -> Vec<&T> {
    v.iter().collect()
}

/// A buffer of at least one byte holding `bytes` (written on `s`).
fn buffer_with<B: Backend>(
    dev: &B::Device,
    s: &B::Stream,
    len: usize,
    bytes: &[u8],
) -> Result<BufferOf<B>, String> {
    let b = dev.alloc(len.max(1)).ctx("alloc")?;
    if !bytes.is_empty() {
        s.write(&b, 0, bytes.to_vec()).ctx("write")?;
    }
    Ok(b)
}

/// Enqueues `case` on one rank.
fn issue<B: CollectiveBackend>(
    c: &CommOf<B>,
    s: &StreamOf<B>,
    case: &Case,
    send: &BufferOf<B>,
    recv: &BufferOf<B>,
) -> xstream_core::Result<()> {
    let op = case.op.unwrap_or(ReduceOp::Sum);
    match case.kind {
        CollectiveKind::AllReduce => c.all_reduce(send, recv, case.count, case.dtype, op, s),
        CollectiveKind::AllGather => c.all_gather(send, recv, case.count, case.dtype, s),
        CollectiveKind::ReduceScatter => {
            c.reduce_scatter(send, recv, case.count, case.dtype, op, s)
        }
        CollectiveKind::Broadcast => c.broadcast(send, recv, case.count, case.dtype, case.root, s),
        CollectiveKind::Reduce => c.reduce(send, recv, case.count, case.dtype, op, case.root, s),
        CollectiveKind::Send => c.send(send, case.count, case.dtype, case.root, s),
        CollectiveKind::Recv => c.recv(recv, case.count, case.dtype, case.root, s),
    }
}

/// The buffers of one rank for `case`, the input written.
fn rank_buffers<B: CollectiveBackend>(
    c: &CommOf<B>,
    s: &StreamOf<B>,
    case: &Case,
) -> Result<(BufferOf<B>, BufferOf<B>), String> {
    let (rank, world) = (c.rank(), c.world_size());
    let sz = case.dtype.size_of();
    let send = buffer_with::<B>(
        c.device(),
        s,
        case.send_elems(world) * sz,
        &case.input(rank, world),
    )?;
    let recv = buffer_with::<B>(c.device(), s, case.recv_elems(world) * sz, &[])?;
    Ok((send, recv))
}

/// Checks one rank's receive buffer after `case` completed.
fn verify<B: CollectiveBackend>(
    c: &CommOf<B>,
    s: &StreamOf<B>,
    case: &Case,
    recv: &BufferOf<B>,
) -> Result<(), String> {
    let (rank, world) = (c.rank(), c.world_size());
    let got = read_all::<B>(s, recv)?;
    match case.expected(rank, world) {
        Some(want) => cases::compare(case.dtype, world, &got, &want)
            .map_err(|e| format!("{case} on rank {rank} of {world}: {e}")),
        // Not written: still zero.
        None if got.iter().all(|&b| b == 0) => Ok(()),
        None => Err(format!("{case}: rank {rank}'s receive buffer was written")),
    }
}

/// Whether `case` is refused as unsupported by `B` (and then checks it is refused so).
fn unsupported<B: CollectiveBackend>(case: &Case) -> bool {
    !B::support(case.op, case.dtype).is_supported()
}

/// Runs `case` on every rank of one process (issued in one group, so one thread may drive
/// every rank) and verifies every rank.
///
/// # Errors
/// What differs or failed.
pub fn run_case_all<B: CollectiveBackend>(
    cs: &[CommOf<B>],
    ss: &[StreamOf<B>],
    case: &Case,
) -> Result<(), String> {
    let bufs = cs
        .iter()
        .zip(ss)
        .map(|(c, s)| rank_buffers::<B>(c, s, case))
        .collect::<Result<Vec<_>, _>>()?;
    group(&refs(cs), || {
        for ((c, s), (send, recv)) in cs.iter().zip(ss).zip(&bufs) {
            issue::<B>(c, s, case, send, recv)?;
        }
        Ok(())
    })
    .ctx(&format!("{case}"))?;
    for (c, s) in cs.iter().zip(ss) {
        collective::synchronize(c, s).ctx(&format!("{case}: synchronize rank {}", c.rank()))?;
    }
    for ((c, s), (_, recv)) in cs.iter().zip(ss).zip(&bufs) {
        verify::<B>(c, s, case, recv)?;
    }
    Ok(())
}

/// Runs `case` on this rank only (the other ranks run it in their processes) and verifies
/// this rank's result.
///
/// # Errors
/// What differs or failed.
pub fn run_case_rank<B: CollectiveBackend>(
    c: &CommOf<B>,
    s: &StreamOf<B>,
    case: &Case,
) -> Result<(), String> {
    let (send, recv) = rank_buffers::<B>(c, s, case)?;
    issue::<B>(c, s, case, &send, &recv).ctx(&format!("{case}"))?;
    collective::synchronize(c, s).ctx(&format!("{case}: synchronize"))?;
    verify::<B>(c, s, case, &recv)
}

/// Every supported op × dtype × reduction on this rank of a job whose other ranks run the
/// same function in their own processes (a multi-process conformance run), then a ring
/// send/recv. Unsupported cells must be refused with `Unsupported` at enqueue.
///
/// # Errors
/// The first case that failed.
pub fn rank_conformance<B: CollectiveBackend>(
    c: &CommOf<B>,
    s: &StreamOf<B>,
) -> Result<String, String> {
    let (mut ran, mut refused) = (0, 0);
    for case in all_cases(c.world_size()) {
        if unsupported::<B>(&case) {
            expect_unsupported::<B>(c, s, &case)?;
            refused += 1;
            continue;
        }
        run_case_rank::<B>(c, s, &case)?;
        ran += 1;
    }
    ring::<B>(std::slice::from_ref(c), std::slice::from_ref(s))?;
    Ok(format!(
        "rank {} of {}: {ran} cases verified, {refused} unsupported cells refused, ring send/recv",
        c.rank(),
        c.world_size()
    ))
}

fn expect_unsupported<B: CollectiveBackend>(
    c: &CommOf<B>,
    s: &StreamOf<B>,
    case: &Case,
) -> Result<(), String> {
    let (send, recv) = rank_buffers::<B>(c, s, case)?;
    match issue::<B>(c, s, case, &send, &recv) {
        Err(e) if e.is_unsupported() => Ok(()),
        other => Err(format!(
            "{case}: the table says unsupported, the call gave {other:?}"
        )),
    }
}

fn coll_support_table<B: CollectiveBackend>(_env: &CollEnv<B>) -> CheckResult {
    let table = collective::support_table::<B>();
    ensure!(
        table.len() == 1 + ReduceOp::ALL.len(),
        "{} rows, expected {}",
        table.len(),
        1 + ReduceOp::ALL.len()
    );
    let mut counts = [0usize; 3];
    for (_, row) in &table {
        ensure!(
            row.len() == DataType::ALL.len(),
            "a row has {} cells",
            row.len()
        );
        for cell in row {
            counts[match cell {
                CollectiveSupport::Native => 0,
                CollectiveSupport::Emulated(_) => 1,
                CollectiveSupport::Unsupported(_) => 2,
            }] += 1;
        }
    }
    pass(format!(
        "{} native, {} emulated, {} unsupported cells",
        counts[0], counts[1], counts[2]
    ))
}

fn coll_ops_dtypes<B: CollectiveBackend>(env: &CollEnv<B>) -> CheckResult {
    let cs = comms(env)?;
    let ss = streams::<B>(&cs)?;
    let (mut ran, mut refused) = (0, 0);
    for case in all_cases(cs.len()) {
        if unsupported::<B>(&case) {
            for (c, s) in cs.iter().zip(&ss) {
                expect_unsupported::<B>(c, s, &case)?;
            }
            refused += 1;
            continue;
        }
        run_case_all::<B>(&cs, &ss, &case)?;
        ran += 1;
    }
    // Count 0 is a valid no-op.
    let zero = Case {
        count: 0,
        ..all_cases(cs.len())[0]
    };
    run_case_all::<B>(&cs, &ss, &zero)?;
    pass(format!(
        "{ran} cases on {} ranks verified (integers exact, floats within tolerance), {refused} unsupported cells refused",
        cs.len()
    ))
}

fn coll_init_rank_threads<B: CollectiveBackend>(env: &CollEnv<B>) -> CheckResult {
    let id = B::new_unique_id().ctx("new_unique_id")?;
    let world = env.devices.len();
    let case = Case {
        kind: CollectiveKind::AllReduce,
        dtype: DataType::F32,
        op: Some(ReduceOp::Sum),
        count: 257,
        root: 0,
    };
    let results: Vec<Result<(), String>> = std::thread::scope(|sc| {
        let hs: Vec<_> = env
            .devices
            .iter()
            .enumerate()
            .map(|(rank, dev)| {
                let id = &id;
                sc.spawn(move || {
                    let c = B::init_rank(dev, id, rank, world).ctx("init_rank")?;
                    let s = dev.create_stream(&nb()).ctx("create_stream")?;
                    ensure!(
                        c.rank() == rank && c.world_size() == world,
                        "rank/world wrong"
                    );
                    run_case_rank::<B>(&c, &s, &case)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("rank thread panicked".into()))
            })
            .collect()
    });
    for r in results {
        r?;
    }
    pass(format!(
        "{world} ranks joined by unique id ({} bytes) and all-reduced",
        id.as_bytes().len()
    ))
}

/// Each rank sends its input to the next rank and receives from the previous one, in one
/// group; `cs` may hold every rank (one process) or only this one (multi-process).
fn ring<B: CollectiveBackend>(cs: &[CommOf<B>], ss: &[StreamOf<B>]) -> Result<(), String> {
    let dtype = DataType::I32;
    let count = 333;
    let mut bufs = Vec::new();
    for (c, s) in cs.iter().zip(ss) {
        let (r, w) = (c.rank(), c.world_size());
        let data = cases::encode(dtype, (0..count).map(|i| (r * 1000 + i) as f64));
        let send = buffer_with::<B>(c.device(), s, count * 4, &data)?;
        let recv = buffer_with::<B>(c.device(), s, count * 4, &[])?;
        bufs.push((send, recv, (r + 1) % w, (r + w - 1) % w));
    }
    group(&refs(cs), || {
        for ((c, s), (send, recv, next, prev)) in cs.iter().zip(ss).zip(&bufs) {
            c.send(send, count, dtype, *next, s)?;
            c.recv(recv, count, dtype, *prev, s)?;
        }
        Ok(())
    })
    .ctx("ring send/recv")?;
    for ((c, s), (_, recv, _, prev)) in cs.iter().zip(ss).zip(&bufs) {
        collective::synchronize(c, s).ctx("ring synchronize")?;
        let want: Vec<f64> = (0..count).map(|i| (prev * 1000 + i) as f64).collect();
        cases::compare(dtype, 1, &read_all::<B>(s, recv)?, &want)
            .map_err(|e| format!("ring: rank {} from rank {prev}: {e}", c.rank()))?;
    }
    Ok(())
}

fn coll_send_recv<B: CollectiveBackend>(env: &CollEnv<B>) -> CheckResult {
    let cs = comms(env)?;
    let ss = streams::<B>(&cs)?;
    ring::<B>(&cs, &ss)?;
    // Without a group: rank 0 sends two messages to rank 1, which receives them in order.
    let dtype = DataType::U8;
    let (a, b) = (vec![7u8; 64], vec![9u8; 64]);
    let dev0 = cs[0].device();
    let dev1 = cs[1].device();
    let sa = buffer_with::<B>(dev0, &ss[0], 64, &a)?;
    let sb = buffer_with::<B>(dev0, &ss[0], 64, &b)?;
    let ra = buffer_with::<B>(dev1, &ss[1], 64, &[])?;
    let rb = buffer_with::<B>(dev1, &ss[1], 64, &[])?;
    group(&refs(&cs), || {
        cs[0].send(&sa, 64, dtype, 1, &ss[0])?;
        cs[0].send(&sb, 64, dtype, 1, &ss[0])?;
        cs[1].recv(&ra, 64, dtype, 0, &ss[1])?;
        cs[1].recv(&rb, 64, dtype, 0, &ss[1])
    })
    .ctx("ordered send/recv")?;
    for (c, s) in cs.iter().zip(&ss).take(2) {
        collective::synchronize(c, s).ctx("synchronize")?;
    }
    ensure!(read_all::<B>(&ss[1], &ra)? == a, "first message not first");
    ensure!(
        read_all::<B>(&ss[1], &rb)? == b,
        "second message not second"
    );
    pass(format!(
        "ring over {} ranks; two ordered messages",
        cs.len()
    ))
}

fn coll_event_ordering<B: CollectiveBackend>(env: &CollEnv<B>) -> CheckResult {
    use xstream_core::{Event, EventDesc};
    let cs = comms(env)?;
    let ss = streams::<B>(&cs)?;
    let case = Case {
        kind: CollectiveKind::AllReduce,
        dtype: DataType::I64,
        op: Some(ReduceOp::Sum),
        count: 513,
        root: 0,
    };
    let world = cs.len();
    let mut parts = Vec::new();
    for (c, s) in cs.iter().zip(&ss) {
        let dev = c.device();
        // The input is written on a producer stream held by a gate: the collective's stream
        // must wait for the producer's event, not run on the stale (zero) input.
        let producer = dev.create_stream(&nb()).ctx("producer stream")?;
        let consumer = dev.create_stream(&nb()).ctx("consumer stream")?;
        let sz = case.dtype.size_of() * case.count;
        let send = dev.alloc(sz).ctx("alloc")?;
        let recv = dev.alloc(sz).ctx("alloc")?;
        let gate = crate::Gate::hold::<B>(&producer)?;
        producer
            .write(&send, 0, case.input(c.rank(), world))
            .ctx("write")?;
        let produced = dev.create_event(&EventDesc::default()).ctx("event")?;
        produced.record(&producer).ctx("record")?;
        s.wait_event(&produced).ctx("wait_event")?;
        parts.push((producer, consumer, send, recv, gate));
    }
    group(&refs(&cs), || {
        for ((c, s), (_, _, send, recv, _)) in cs.iter().zip(&ss).zip(&parts) {
            c.all_reduce(send, recv, case.count, case.dtype, ReduceOp::Sum, s)?;
        }
        Ok(())
    })
    .ctx("all_reduce")?;
    // A consumer stream waits for the collective's event, then copies the result.
    let mut outs = Vec::new();
    for ((c, s), (_, consumer, _, recv, _)) in cs.iter().zip(&ss).zip(&parts) {
        let dev = c.device();
        let done = dev.create_event(&EventDesc::default()).ctx("event")?;
        done.record(s).ctx("record after all_reduce")?;
        consumer.wait_event(&done).ctx("consumer wait")?;
        let out = dev.alloc(recv.len()).ctx("alloc")?;
        consumer.copy(recv, 0, &out, 0, recv.len()).ctx("copy")?;
        outs.push(out);
    }
    for (_, _, _, _, gate) in &parts {
        ensure!(!gate.gave_up(), "a gate gave up before it was opened");
        gate.open();
    }
    for ((c, s), ((_, consumer, _, _, gate), out)) in
        cs.iter().zip(&ss).zip(parts.iter().zip(&outs))
    {
        collective::synchronize(c, s).ctx("synchronize")?;
        ensure!(gate.released(), "the gate was not released by open()");
        let want = case.expected(c.rank(), world).unwrap_or_default();
        cases::compare(case.dtype, world, &read_all::<B>(consumer, out)?, &want)
            .map_err(|e| format!("rank {}: {e}", c.rank()))?;
    }
    pass("the collective waited for its producer's event; the consumer saw the result")
}

fn coll_capture<B: CollectiveBackend>(env: &CollEnv<B>) -> CheckResult {
    use xstream_core::{Capabilities, CaptureMode, Graph};
    need!(
        &crate::Env::<B> {
            device: env.devices[0].clone(),
            isolated: None
        },
        Capabilities::CAPTURE,
        "collectives inside a capture"
    );
    let cs = comms(env)?;
    let ss = streams::<B>(&cs)?;
    let world = cs.len();
    let count = 100;
    let mut bufs = Vec::new();
    for (c, s) in cs.iter().zip(&ss) {
        let data = cases::encode(DataType::F32, (0..count).map(|i| (i % 3 + 1) as f64));
        bufs.push(buffer_with::<B>(c.device(), s, count * 4, &data)?);
        s.synchronize().ctx("synchronize before capture")?;
    }
    for s in &ss {
        s.begin_capture(CaptureMode::Relaxed).ctx("begin_capture")?;
    }
    let captured = group(&refs(&cs), || {
        for ((c, s), b) in cs.iter().zip(&ss).zip(&bufs) {
            c.all_reduce(b, b, count, DataType::F32, ReduceOp::Sum, s)?;
        }
        Ok(())
    });
    let graphs: Vec<_> = ss.iter().map(|s| s.end_capture()).collect();
    if let Err(e) = captured {
        return match e {
            e if e.is_unsupported() || matches!(e, Error::Capture { .. }) => Ok(Outcome::Skip(
                format!("the backend refuses collectives in a capture: {e}"),
            )),
            e => Err(format!("all_reduce in capture: {e}")),
        };
    }
    let graphs = graphs
        .into_iter()
        .collect::<xstream_core::Result<Vec<_>>>()
        .ctx("end_capture")?;
    for _ in 0..2 {
        for (g, s) in graphs.iter().zip(&ss) {
            g.replay(s).ctx("graph launch")?;
        }
    }
    let w = world as f64;
    for ((c, s), b) in cs.iter().zip(&ss).zip(&bufs) {
        collective::synchronize(c, s).ctx("synchronize")?;
        let want: Vec<f64> = (0..count).map(|i| (i % 3 + 1) as f64 * w * w).collect();
        cases::compare(DataType::F32, world, &read_all::<B>(s, b)?, &want)
            .map_err(|e| format!("rank {} after two replays: {e}", c.rank()))?;
    }
    pass("an in-place all_reduce captured once and replayed twice scaled by world^2")
}

fn expect_invalid(what: &str, r: xstream_core::Result<()>) -> Result<(), String> {
    match r {
        Err(Error::InvalidArgument(_)) => Ok(()),
        other => Err(format!("{what}: expected InvalidArgument, got {other:?}")),
    }
}

fn coll_bad_args<B: CollectiveBackend>(env: &CollEnv<B>) -> CheckResult {
    let cs = comms(env)?;
    let ss = streams::<B>(&cs)?;
    let (c, s) = (&cs[0], &ss[0]);
    let dev = c.device();
    let small = dev.alloc(16).ctx("alloc")?;
    let big = dev.alloc(1024).ctx("alloc")?;
    let f32_ = DataType::F32;
    let world = cs.len();
    expect_invalid(
        "all_reduce count beyond the send buffer",
        c.all_reduce(&small, &big, 5, f32_, ReduceOp::Sum, s),
    )?;
    expect_invalid(
        "all_reduce count beyond the receive buffer",
        c.all_reduce(&big, &small, 5, f32_, ReduceOp::Sum, s),
    )?;
    expect_invalid(
        "all_gather receive buffer smaller than world x count",
        c.all_gather(&small, &small, 4, f32_, s),
    )?;
    expect_invalid(
        "reduce_scatter send buffer smaller than world x count",
        c.reduce_scatter(&small, &big, 4, f32_, ReduceOp::Sum, s),
    )?;
    expect_invalid(
        "broadcast root out of range",
        c.broadcast(&big, &big, 4, f32_, world, s),
    )?;
    expect_invalid(
        "reduce root out of range",
        c.reduce(&big, &big, 4, f32_, ReduceOp::Max, world + 3, s),
    )?;
    expect_invalid("send peer out of range", c.send(&big, 4, f32_, world, s))?;
    expect_invalid(
        "recv peer out of range",
        c.recv(&big, 4, f32_, usize::MAX, s),
    )?;
    expect_invalid(
        "count overflowing",
        c.all_reduce(&big, &big, usize::MAX / 2, DataType::I64, ReduceOp::Sum, s),
    )?;
    expect_invalid("group_end without group_start", c.group_end())?;
    // Nothing was enqueued: the communicator is still healthy.
    c.async_error().ctx("async_error after refused calls")?;
    // A buffer of another device, where the job spans two distinct devices.
    let other = env
        .devices
        .iter()
        .position(|d| d.info().ordinal != dev.info().ordinal);
    let cross = match other {
        Some(i) => {
            let foreign = env.devices[i].alloc(64).ctx("alloc on another device")?;
            match c.all_reduce(&foreign, &big, 4, f32_, ReduceOp::Sum, s) {
                Err(Error::WrongDevice(_)) => "; a buffer of another device: WrongDevice",
                other => {
                    return Err(format!(
                        "foreign buffer: expected WrongDevice, got {other:?}"
                    ))
                }
            }
        }
        None => "; (one device: the foreign-buffer case needs two)",
    };
    pass(format!(
        "sizes, roots, peers, overflow, group misuse refused{cross}"
    ))
}

fn coll_peer_mismatch<B: CollectiveBackend>(env: &CollEnv<B>) -> CheckResult {
    if !B::CHECKS_PEER_ARGS {
        return Ok(Outcome::Skip(format!(
            "{} does not detect ranks that disagree (its vendor library does not)",
            B::KIND
        )));
    }
    let mut seen = Vec::new();
    for (what, dtype1, count1) in [("count", DataType::F32, 9), ("dtype", DataType::I32, 8)] {
        let cs = comms(env)?;
        let ss = streams::<B>(&cs)?;
        for c in &cs {
            c.set_timeout(env.short_timeout).ctx("set_timeout")?;
        }
        let bufs = cs
            .iter()
            .zip(&ss)
            .map(|(c, s)| buffer_with::<B>(c.device(), s, 64, &[]))
            .collect::<Result<Vec<_>, _>>()?;
        group(&refs(&cs), || {
            for (r, ((c, s), b)) in cs.iter().zip(&ss).zip(&bufs).enumerate() {
                let (dt, n) = if r == 1 {
                    (dtype1, count1)
                } else {
                    (DataType::F32, 8)
                };
                c.all_reduce(b, b, n, dt, ReduceOp::Sum, s)?;
            }
            Ok(())
        })
        .ctx("mismatched all_reduce enqueue")?;
        for (c, s) in cs.iter().zip(&ss) {
            match collective::synchronize(c, s) {
                Err(Error::InvalidArgument(m)) => seen.push(m),
                other => {
                    return Err(format!(
                        "{what} mismatch, rank {}: expected InvalidArgument, got {other:?}",
                        c.rank()
                    ))
                }
            }
        }
    }
    pass(format!("every rank refused; e.g. {}", seen[0]))
}

/// The error of a failed collective wait, checked to be a collective (or vendor) error.
fn expect_failure(what: &str, r: xstream_core::Result<()>) -> Result<Error, String> {
    match r {
        Ok(()) => Err(format!("{what}: completed, an error was expected")),
        Err(e @ (Error::Collective { .. } | Error::Native(_))) => Ok(e),
        Err(e) => Err(format!("{what}: unexpected kind of error: {e}")),
    }
}

/// One all_reduce of the failure checks' size on every rank, so that a vendor that connects
/// ranks lazily (at their first operation) has connected them before one rank goes alone.
fn warm_up<B: CollectiveBackend>(cs: &[CommOf<B>], ss: &[StreamOf<B>]) -> Result<(), String> {
    let case = Case {
        kind: CollectiveKind::AllReduce,
        dtype: DataType::F32,
        op: Some(ReduceOp::Sum),
        count: 16,
        root: 0,
    };
    run_case_all::<B>(cs, ss, &case).map_err(|e| format!("warm-up: {e}"))
}

fn coll_dead_peer<B: CollectiveBackend>(env: &CollEnv<B>) -> CheckResult {
    let cs = comms(env)?;
    let ss = streams::<B>(&cs)?;
    let b = buffer_with::<B>(cs[0].device(), &ss[0], 64, &[])?;
    // The warm-up runs under the default timeout: under a slow harness (valgrind) a healthy
    // all_reduce can take longer than the short one.
    warm_up::<B>(&cs, &ss)?;
    if let Err(e) = cs[0].set_timeout(env.short_timeout) {
        return Ok(Outcome::Skip(format!("set_timeout: {e}")));
    }
    // Rank 0 enters an all_reduce; no other rank ever does.
    group(&[&cs[0]], || {
        cs[0].all_reduce(&b, &b, 16, DataType::F32, ReduceOp::Sum, &ss[0])
    })
    .ctx("enqueue")?;
    let e = expect_failure("a lone all_reduce", collective::synchronize(&cs[0], &ss[0]))?;
    let kind = e.collective_kind();
    ensure!(
        kind.is_none() || kind == Some(CollectiveErrorKind::Timeout),
        "expected a timeout, got {e}"
    );
    // The stream is usable again (nothing left hanging) and the communicator refuses work.
    ss[0].synchronize().ctx("stream after the failure")?;
    ensure!(
        cs[0].async_error().is_err(),
        "async_error is Ok after the failure"
    );
    let again = cs[0].all_reduce(&b, &b, 16, DataType::F32, ReduceOp::Sum, &ss[0]);
    ensure!(again.is_err(), "a failed communicator accepted new work");
    pass(format!("missing peer reported: {e}"))
}

fn coll_abort<B: CollectiveBackend>(env: &CollEnv<B>) -> CheckResult {
    let cs = comms(env)?;
    let ss = streams::<B>(&cs)?;
    let b0 = buffer_with::<B>(cs[0].device(), &ss[0], 64, &[])?;
    let b1 = buffer_with::<B>(cs[1].device(), &ss[1], 64, &[])?;
    // Warm-up first, under the default timeout (see coll_dead_peer).
    warm_up::<B>(&cs, &ss)?;
    for c in &cs {
        if let Err(e) = c.set_timeout(env.short_timeout) {
            return Ok(Outcome::Skip(format!("set_timeout: {e}")));
        }
    }
    group(&[&cs[0]], || {
        cs[0].all_reduce(&b0, &b0, 16, DataType::F32, ReduceOp::Sum, &ss[0])
    })
    .ctx("enqueue")?;
    cs[1].abort().ctx("abort")?;
    let mine = cs[1].all_reduce(&b1, &b1, 16, DataType::F32, ReduceOp::Sum, &ss[1]);
    ensure!(mine.is_err(), "the aborted rank accepted new work");
    let peer = expect_failure(
        "the peer of an aborted rank",
        collective::synchronize(&cs[0], &ss[0]),
    )?;
    ss[0].synchronize().ctx("peer stream after the failure")?;
    pass(format!(
        "aborted rank refuses work ({}); its peer got: {peer}",
        mine.err().map(|e| e.to_string()).unwrap_or_default()
    ))
}
