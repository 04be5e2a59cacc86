//! Fault injection through the ACL simulator: every ACL function the Ascend backend calls in
//! a representative workload fails once (the first call after the rule is set) with every
//! stream, event and callback error code of the ACL documentation (plus three device-fault
//! codes), and for each (function, code) pair the test checks that
//!
//! - the injected fault was taken by a call (the simulator's call count grew);
//! - nothing panics and nothing hangs (a watchdog);
//! - the first xstream error the workload sees is the mapped one (`xstream_ascend::map_error`
//!   is the oracle: same variant, same native code where the error keeps one); or, only for
//!   the calls listed in `ABSORBING` (each with its reason: a drop, a background thread, a
//!   best-effort probe), no error reached the workload. A listed call must absorb every code
//!   and an unlisted one must surface every code: the workload is ordered so that no
//!   background call races with its own calls for the fault, which makes the split
//!   deterministic (24 functions surface, 8 absorb, 41 codes each; `ABSORBING_CODES` lists
//!   single codes a surfacing call absorbs on purpose);
//! - a stream-blocking callback whose enqueue succeeded ran exactly once, and one whose
//!   enqueue failed never ran;
//! - after every object is dropped, the simulator's live streams and events are back to the
//!   baseline and its worker threads have exited; the process has no more threads than
//!   before;
//! - a follow-up workload without faults succeeds (the backend keeps working).
//!
//! Device open is swept the same way: a fault in any call of `open` must make it fail with
//! the mapped error, except in the probes listed in `OPEN_ABSORBING`.
//!
//! Each test runs in its own child process configured for the simulator
//! (`common::in_sim_process`); the tests hold `common::global_lock()` for the simulator
//! globals they change.
//!
//! One file (just past the ~600-line guide) on purpose: the workload, the mapping oracle, the
//! absorbing lists with their reasons and the tally are one argument; each list is only
//! meaningful beside the workload whose order makes the split deterministic.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, Sim};
use xstream_ascend::{map_error, AscendDevice};
use xstream_core::{
    Backend, CaptureMode, Device, Distribution, Error, Event, EventDesc, Graph, Kernel, Priority,
    RandomFill, RandomType, ReduceKind, ReduceType, Reduction, Stream, StreamAttr, StreamDesc,
};

/// Every ACL function in the backend's table (`backends/ascend/src/sys.rs`) but the
/// kernel-binary group (`loader::MODULES`, added when the sweep collects them); the sweep keeps
/// those the workload really calls (`xsimCallCount`).
const ACL_SYMBOLS: &[&str] = &[
    "aclInit",
    "aclFinalize",
    "aclrtSetDevice",
    "aclrtResetDevice",
    "aclrtGetDeviceCount",
    "aclrtSynchronizeDevice",
    "aclrtSetCurrentContext",
    "aclrtGetCurrentContext",
    "aclrtCreateStream",
    "aclrtDestroyStream",
    "aclrtSynchronizeStream",
    "aclrtStreamQuery",
    "aclrtStreamWaitEvent",
    "aclrtCreateEventWithFlag",
    "aclrtDestroyEvent",
    "aclrtRecordEvent",
    "aclrtQueryEventStatus",
    "aclrtSynchronizeEvent",
    "aclrtEventElapsedTime",
    "aclrtLaunchCallback",
    "aclrtSubscribeReport",
    "aclrtUnSubscribeReport",
    "aclrtProcessReport",
    "aclrtMalloc",
    "aclrtFree",
    "aclrtMemcpyAsync",
    "aclrtMemsetAsync",
    "aclFinalizeReference",
    "aclrtPeekAtLastError",
    "aclrtCreateContext",
    "aclrtDestroyContext",
    "aclrtDeviceGetStreamPriorityRange",
    "aclrtCreateStreamWithConfig",
    "aclrtDestroyStreamForce",
    "aclrtSynchronizeStreamWithTimeout",
    "aclrtSetStreamFailureMode",
    "aclrtStreamGetPriority",
    "aclrtStreamGetFlags",
    "aclrtStreamGetId",
    "aclrtGetStreamAvailableNum",
    "aclrtSetStreamAttribute",
    "aclrtGetStreamAttribute",
    "aclrtCreateEventExWithFlag",
    "aclrtSynchronizeEventWithTimeout",
    "aclrtLaunchHostFunc",
    "aclrtAllocatorCreateDesc",
    "aclrtAllocatorDestroyDesc",
    "aclrtAllocatorRegister",
    "aclrtAllocatorUnregister",
    "aclmdlRICaptureBegin",
    "aclmdlRICaptureGetInfo",
    "aclmdlRICaptureEnd",
    "aclmdlRIExecuteAsync",
    "aclmdlRIDestroy",
    "aclrtReduceAsync",
    "aclrtRandomNumAsync",
];

/// The stream, event and callback error codes of the ACL documentation, plus three
/// device-fault codes of `rt_error_codes.h` (sticky: 507015, 507899 lost device, 507010).
const CODES: &[i32] = &[
    100_000, 100_001, 100_002, 100_033, 100_034, 100_035, 100_036, 100_037, 107_000, 107_002,
    107_003, 107_006, 107_011, 107_012, 107_015, 107_019, 107_020, 107_023, 107_027, 107_028,
    107_029, 107_031, 107_036, 107_038, 207_000, 207_003, 207_007, 207_008, 207_016, 207_017,
    507_000, 507_002, 507_004, 507_006, 507_012, 507_046, 507_047, 507_903, 507_015, 507_899,
    507_010,
];

/// The workload's built-in reduce: the second half of the buffer summed into the first, bytewise.
const REDUCE: Reduction = Reduction {
    kind: ReduceKind::Sum,
    ty: ReduceType::I8,
};

/// The workload's built-in random fill (16 bytes: four uniform f32).
const RANDOM: RandomFill = RandomFill {
    dist: Distribution::Uniform { min: 0.0, max: 1.0 },
    ty: RandomType::F32,
    seed: 5,
    offset: 2,
};

/// What one workload saw.
struct Seen {
    errors: Vec<Error>,
    callback_enqueued: bool,
    callback_runs: Arc<AtomicUsize>,
}

/// A representative workload: two streams (one with a priority), three events, a buffer,
/// copies, a memset, a kernel, a built-in reduce, a built-in random fill, record / wait, a callback, a future, queries, synchronizes
/// (plain and timed), elapsed time, attributes, a capture replayed on the other stream, the
/// default stream and a device synchronize. Keeps going after errors where it can.
fn workload(dev: &AscendDevice) -> Seen {
    let mut errors = Vec::new();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut enqueued = false;
    macro_rules! t {
        ($e:expr) => {
            match $e {
                Ok(v) => Some(v),
                Err(e) => {
                    errors.push(e);
                    None
                }
            }
        };
    }
    let s = t!(dev.create_stream(&StreamDesc::new()));
    let s2 = t!(dev.create_stream(&StreamDesc::new().priority(Priority::High)));
    let e1 = t!(dev.create_event(&EventDesc::new()));
    let e2 = t!(dev.create_event(&EventDesc::new()));
    let buf = t!(dev.alloc(64));
    let rnd = t!(dev.alloc(16));
    if let (Some(s), Some(s2), Some(e1), Some(e2), Some(buf)) = (&s, &s2, &e1, &e2, &buf) {
        // Queried before any callback is enqueued: the backend queries a stream inside its
        // callback trampoline (copies enqueue callbacks too), and such a query would race
        // with this one for the injected fault.
        t!(s2.query());
        t!(e1.record(s));
        t!(s.write(buf, 0, vec![7; 64]));
        t!(s.memset(buf, 0, 32, 1));
        t!(s.launch_builtin(Kernel::Lcg { buf, rounds: 2 }));
        t!(s.reduce(buf, 0, buf, 32, 32, REDUCE));
        if let Some(r) = &rnd {
            t!(s.launch_builtin(Kernel::Random {
                buf: r,
                offset: 0,
                len: 16,
                fill: RANDOM,
            }));
        }
        t!(e2.record(s));
        t!(s2.wait_event(e2));
        let rb = t!(s2.read(buf, 0, 64));
        let r2 = runs.clone();
        enqueued = t!(s2.host_callback(move |_| {
            r2.fetch_add(1, Ordering::SeqCst);
        }))
        .is_some();
        t!(s2.synchronize());
        if let Some(rb) = rb {
            let clean = errors.is_empty();
            match rb.take() {
                Ok(v) if clean => {
                    let mut want = vec![7u8; 64];
                    want[..32].fill(1);
                    xstream_core::lcg_reference(&mut want, 2);
                    let (lo, hi) = want.split_at_mut(32);
                    xstream_core::reduce::apply(REDUCE, lo, hi);
                    assert_eq!(v, want, "wrong data without an error");
                    if let Some(r) = &rnd {
                        let mut want = vec![0u8; 16];
                        xstream_core::random::fill(&RANDOM, &mut want);
                        match s2.read(r, 0, 16).and_then(|rb| {
                            s2.synchronize()?;
                            rb.take()
                        }) {
                            Ok(got) => {
                                assert_eq!(got, want, "wrong random numbers without an error")
                            }
                            Err(e) => errors.push(e),
                        }
                    }
                }
                // An earlier call failed: the bytes may legitimately differ.
                Ok(_) => {}
                Err(e) => errors.push(e),
            }
        }
        t!(s.synchronize_timeout(Duration::from_secs(10)));
        t!(e2.synchronize());
        t!(e2.query());
        t!(e1.elapsed_ms(e2));
        t!(e2.synchronize_timeout(Duration::from_secs(10)));
        if let Some(c) = t!(s.completed()) {
            t!(c.wait());
        }
        if let Some(c) = t!(e2.completed()) {
            t!(c.wait());
        }
        t!(s.attribute(StreamAttr::Priority));
        // The graph is kept until after the device synchronize below: dropping it makes the
        // backend's reaper call aclrtSynchronizeDevice, which would race with the workload's
        // own call for the injected fault.
        let mut graph = None;
        if t!(s.begin_capture(CaptureMode::Global)).is_some() {
            t!(s.memset(buf, 0, 64, 3));
            if let Some(g) = t!(s.end_capture()) {
                t!(g.replay(s2));
                t!(s2.synchronize());
                graph = Some(g);
            }
        }
        if let Some(d) = t!(dev.default_stream()) {
            t!(d.synchronize());
        }
        t!(dev.synchronize());
        drop(graph);
        t!(s2.synchronize());
    }
    Seen {
        errors,
        callback_enqueued: enqueued,
        callback_runs: runs,
    }
}

/// Whether `e` is what `map_error` makes of `code`.
fn is_mapped(e: &Error, code: i32) -> bool {
    let want = map_error("any", code, None);
    let same_kind =
        std::mem::discriminant(e) == std::mem::discriminant(&want) && e.kind() == want.kind();
    let same_code = match e.native() {
        Some(n) => n.code == i64::from(code),
        None => true,
    };
    same_kind && same_code
}

/// The calls whose failure the backend absorbs on purpose: no xstream error reaches the
/// workload, with the reason. Every other call the workload makes must surface its injected
/// code as the first error; every call listed here must absorb every code.
const ABSORBING: &[(&str, &str)] = &[
    (
        "aclrtDestroyStream",
        "made when a stream is dropped (on the reaper thread): Drop has no caller to report to; \
         the backend retries, then force-destroys",
    ),
    (
        "aclrtDestroyEvent",
        "made when an event is dropped: Drop has no caller to report to; the backend retries once",
    ),
    (
        "aclrtFree",
        "made on the reaper thread after a buffer is dropped: no caller to report to",
    ),
    (
        "aclmdlRIDestroy",
        "made on the reaper thread after a graph is dropped: no caller to report to",
    ),
    (
        "aclrtUnSubscribeReport",
        "made on the reaper thread after a subscribed stream is dropped: no caller to report to",
    ),
    (
        "aclrtProcessReport",
        "made only by the backend's report thread, whose loop retries a failed poll",
    ),
    (
        "aclrtStreamGetId",
        "best-effort read-back at stream creation: the id falls back to a process-unique counter",
    ),
    (
        "aclrtStreamGetPriority",
        "best-effort read-back at stream creation: the priority falls back to the requested one",
    ),
];

/// Single codes a call absorbs on purpose, with the reason (the call surfaces every other code).
const ABSORBING_CODES: &[(&str, i32, &str)] = &[
    (
        "aclrtCreateStream",
        207_007,
        "at the stream limit, creation lets the reaper finish queued destroys and tries once \
         more: a one-off exhaustion is absorbed by the retry",
    ),
    (
        "aclrtCreateStream",
        207_008,
        "at the stream limit, creation lets the reaper finish queued destroys and tries once \
         more: a one-off exhaustion is absorbed by the retry",
    ),
];

/// Why a fault with `code` in `sym` may be absorbed, if it may: the call absorbs every code
/// ([`ABSORBING`]) or this one ([`ABSORBING_CODES`]).
fn absorbs_case(sym: &str, code: i32) -> Option<&'static str> {
    absorbs(ABSORBING, sym).or_else(|| {
        ABSORBING_CODES
            .iter()
            .find(|(s, c, _)| *s == sym && *c == code)
            .map(|(_, _, why)| *why)
    })
}

/// Why `sym` may absorb a fault, if it may.
fn absorbs(list: &[(&'static str, &'static str)], sym: &str) -> Option<&'static str> {
    list.iter().find(|(s, _)| *s == sym).map(|(_, why)| *why)
}

/// Tally of one sweep.
#[derive(Debug, Default)]
struct Tally {
    injected: usize,
    hit: usize,
    surfaced_mapped: usize,
    absorbed: usize,
    by_symbol: BTreeMap<&'static str, (usize, usize)>,
    /// Injections that broke a rule: a wrong first error, a fault absorbed by a call that is
    /// not listed in [`ABSORBING`], an error from a call that is, or a fault no call took.
    mismatches: Vec<String>,
    leaks: Vec<String>,
}

/// Waits until the simulator is back to `s0` live streams, `e0` live events and no worker
/// threads, and the backend's reaper has released every buffer and graph made since the last
/// `xsimReset` (a buffer or graph can be released after the streams that kept it alive, so
/// the stream count alone does not show it). `injected` is the function that failed once
/// since the reset, if any: a failed `aclrtMalloc` or `aclmdlRICaptureEnd` made nothing to
/// release. Without this barrier a late release of one injection's objects would take the
/// next injection's fault.
fn settle(sim: &Sim, s0: u64, e0: u64, injected: Option<&str>) -> bool {
    let failed = |f: &str| u64::from(injected == Some(f));
    eventually(Duration::from_secs(10), || {
        sim.live_streams() == s0
            && sim.live_events() == e0
            && sim.live_threads() == 0
            && sim.call_count("aclrtFree") + failed("aclrtMalloc") >= sim.call_count("aclrtMalloc")
            && sim.call_count("aclmdlRIDestroy") + failed("aclmdlRICaptureEnd")
                >= sim.call_count("aclmdlRICaptureEnd")
    })
}

fn sweep(symbols: &[&'static str], codes: &[i32]) -> Tally {
    let sim = Sim::get();
    sim.reset();
    let dev = common::ascend_device(0);
    // Warm up (report thread, reaper, dispatcher, poller exist from here on).
    let w = workload(&dev);
    assert!(w.errors.is_empty(), "clean workload failed: {:?}", w.errors);
    drop(w);
    let (mut s0, mut e0) = (0, 0);
    assert!(settle(sim, s0, e0, None), "baseline not reached");
    let threads0 = common::process_threads();
    let mut tally = Tally::default();
    for &sym in symbols {
        for &code in codes {
            let case = format!("{sym}:1:{code}");
            sim.reset();
            if std::env::var_os("FAULT_SWEEP_TRACE").is_some() {
                eprintln!("inject {case}");
            }
            assert_eq!(sim.set_faults(&case), 0);
            let before = sim.call_count(sym);
            let dev2 = dev.clone();
            let seen = common::watchdog(&case, Duration::from_secs(30), move || workload(&dev2));
            // Background calls (the reaper) may come after the workload returns.
            let leak_free = settle(sim, s0, e0, Some(sym));
            let hit = sim.call_count(sym) > before;
            sim.set_faults("");
            tally.injected += 1;
            tally.hit += usize::from(hit);
            if !hit {
                tally
                    .mismatches
                    .push(format!("{case}: no call took the fault"));
            }
            let ent = tally.by_symbol.entry(sym).or_default();
            match (seen.errors.first(), absorbs_case(sym, code)) {
                (Some(first), None) if is_mapped(first, code) => {
                    tally.surfaced_mapped += 1;
                    ent.0 += 1;
                }
                (Some(first), None) => tally
                    .mismatches
                    .push(format!("{case}: first error {first:?}")),
                (Some(first), Some(_)) => tally.mismatches.push(format!(
                    "{case}: listed as absorbing, but the workload saw {first:?}"
                )),
                (None, Some(_)) => {
                    tally.absorbed += 1;
                    ent.1 += 1;
                }
                (None, None) => tally.mismatches.push(format!(
                    "{case}: no error reached the workload, and {sym} is not listed as absorbing"
                )),
            }
            let runs = &seen.callback_runs;
            let once = if seen.callback_enqueued {
                eventually(Duration::from_secs(10), || runs.load(Ordering::SeqCst) >= 1)
                    && runs.load(Ordering::SeqCst) == 1
            } else {
                runs.load(Ordering::SeqCst) == 0
            };
            assert!(once, "{case}: callback ran {runs:?} times");
            if !leak_free {
                tally.leaks.push(format!(
                    "{case}: streams {} events {} sim threads {} (errors {:?})",
                    sim.live_streams(),
                    sim.live_events(),
                    sim.live_threads(),
                    seen.errors
                ));
                // Go on from the leaked state (the leak is reported at the end).
                s0 = sim.live_streams();
                e0 = sim.live_events();
            }
            drop(seen);
            // The backend keeps working.
            let again = workload(&dev);
            assert!(
                again.errors.is_empty(),
                "{case}: follow-up workload failed: {:?}",
                again.errors
            );
            drop(again);
            assert!(settle(sim, s0, e0, Some(sym)), "{case}: follow-up leaked");
        }
    }
    let threads = common::process_threads();
    assert!(
        threads <= threads0,
        "process threads grew from {threads0} to {threads}"
    );
    sim.reset();
    tally
}

/// The functions the workload calls on a device that is already open.
fn called_symbols() -> Vec<&'static str> {
    let sim = Sim::get();
    let dev = common::ascend_device(0);
    let w = workload(&dev);
    assert!(w.errors.is_empty(), "{:?}", w.errors);
    drop(w);
    assert!(settle(sim, 0, 0, None), "baseline not reached");
    sim.reset();
    let w = workload(&dev);
    assert!(w.errors.is_empty(), "{:?}", w.errors);
    drop(w);
    assert!(settle(sim, 0, 0, None), "baseline not reached");
    ACL_SYMBOLS
        .iter()
        .chain(xstream_ascend::loader::MODULES.symbols)
        .copied()
        .filter(|s| sim.call_count(s) > 0)
        .collect()
}

fn report(name: &str, t: &Tally, symbols: usize) {
    println!(
        "{name}: {symbols} functions x {} codes = {} injections ({} hit a call); first error \
         mapped: {}; absorbed (listed calls): {}; mismatches: {}",
        CODES.len(),
        t.injected,
        t.hit,
        t.surfaced_mapped,
        t.absorbed,
        t.mismatches.len()
    );
    for (s, (m, a)) in &t.by_symbol {
        println!("  {s:40} mapped {m:3} absorbed {a:3}");
    }
    for m in &t.mismatches {
        println!("  MISMATCH {m}");
    }
    for m in &t.leaks {
        println!("  LEAK {m}");
    }
}

/// Checks a finished sweep: every injection hit a call; no mismatch, no leak; every listed
/// absorbing call the workload makes absorbed every code and every other call surfaced every
/// code (the split is deterministic).
fn check(t: &Tally, symbols: &[&'static str], codes: &[i32]) {
    assert_eq!(t.injected, symbols.len() * codes.len(), "injections made");
    assert!(t.mismatches.is_empty(), "mismatches: {:#?}", t.mismatches);
    assert!(t.leaks.is_empty(), "leaks: {:#?}", t.leaks);
    assert_eq!(t.hit, t.injected, "injections that hit a call");
    let absorbing = symbols
        .iter()
        .flat_map(|s| codes.iter().map(move |c| (s, *c)))
        .filter(|(s, c)| absorbs_case(s, *c).is_some())
        .count();
    assert_eq!(t.absorbed, absorbing, "absorbed injections");
    assert_eq!(
        t.surfaced_mapped,
        symbols.len() * codes.len() - absorbing,
        "injections whose code surfaced as the first error"
    );
}

#[test]
fn every_called_acl_function_fails_once_with_every_code() {
    if !common::in_sim_process() {
        return;
    }
    let _g = common::global_lock();
    common::setup();
    let mut symbols = called_symbols();
    let mut codes = CODES.to_vec();
    // FAULT_SWEEP_ONLY=SYMBOL:CODE replays one case (for debugging).
    if let Ok(one) = std::env::var("FAULT_SWEEP_ONLY") {
        let (s, c) = one.split_once(':').expect("SYMBOL:CODE");
        symbols.retain(|x| *x == s);
        codes = vec![c.parse().expect("code")];
        assert!(!symbols.is_empty(), "{s} is not called by the workload");
        let tally = sweep(&symbols, &codes);
        report("one case", &tally, 1);
        check(&tally, &symbols, &codes);
        return;
    }
    assert!(symbols.len() >= 15, "too few functions called: {symbols:?}");
    for (sym, why) in ABSORBING {
        assert!(
            symbols.contains(sym),
            "{sym} is listed as absorbing ({why}) but the workload never calls it"
        );
    }
    let tally = sweep(&symbols, &codes);
    report("fault sweep", &tally, symbols.len());
    check(&tally, &symbols, &codes);
}

/// The calls of `open` whose failure the backend absorbs on purpose (open succeeds), with the
/// reason. A fault in any other call of `open` must make `open` fail with the mapped error.
const OPEN_ABSORBING: &[(&str, &str)] = &[
    (
        "aclrtDeviceGetStreamPriorityRange",
        "optional probe: without it the device reports the flat priority range 0..0",
    ),
    (
        "aclrtGetStreamAvailableNum",
        "optional probe: without it the device reports no stream limit",
    ),
    (
        "aclrtCreateEventExWithFlag",
        "capability probe for IPC events: a refusal means the capability is absent",
    ),
    (
        "aclrtBinaryLoadFromData",
        "loading the builtin module is a probe: a refusal leaves the device without KERNELS, \
         as on a runtime that cannot run the simulator's binary format",
    ),
    (
        "aclrtBinaryGetFunction",
        "part of the builtin-module probe: a failure unloads the binary and leaves the device \
         without KERNELS",
    ),
    (
        "aclrtRandomNumAsync",
        "capability probe for the random-number task (NULL addresses, nothing enqueued): any \
         answer but the runtime's parameter error leaves the device without RANDOM",
    ),
];

#[test]
fn device_open_fails_cleanly_under_every_code() {
    if !common::in_sim_process() {
        return;
    }
    let _g = common::global_lock();
    common::setup();
    let sim = Sim::get();
    let open_symbols = [
        "aclrtGetDeviceCount",
        "aclrtSetDevice",
        "aclrtGetCurrentContext",
        "aclrtDeviceGetStreamPriorityRange",
        "aclrtGetStreamAvailableNum",
        "aclrtCreateEventExWithFlag",
        "aclrtBinaryLoadFromData",
        "aclrtBinaryGetFunction",
        "aclrtRandomNumAsync",
    ];
    let (mut failed, mut absorbed) = (0, 0);
    for sym in open_symbols {
        for &code in CODES {
            let case = format!("{sym}:1:{code}");
            sim.reset();
            assert_eq!(sim.set_faults(&case), 0);
            let before = sim.call_count(sym);
            let r = common::watchdog("open", Duration::from_secs(30), || {
                xstream_ascend::AscendBackend::open(1).map(drop)
            });
            let hit = sim.call_count(sym) > before;
            sim.set_faults("");
            assert!(hit, "{case}: open never called {sym}");
            match (&r, absorbs(OPEN_ABSORBING, sym)) {
                (Err(e), None) => {
                    assert!(is_mapped(e, code), "{case}: open failed with {e:?}");
                    failed += 1;
                }
                (Err(e), Some(why)) => {
                    panic!(
                        "{case}: open failed with {e:?}, but {sym} is listed as absorbing ({why})"
                    )
                }
                (Ok(()), Some(_)) => absorbed += 1,
                (Ok(()), None) => panic!(
                    "{case}: open succeeded although {sym} failed, and {sym} is not listed as \
                     absorbing"
                ),
            }
            // A clean open works afterwards.
            let d = xstream_ascend::AscendBackend::open(1).expect("open after fault");
            let s = d.create_stream(&StreamDesc::new()).expect("stream");
            s.synchronize().expect("sync");
            let resets = sim.call_count("aclrtResetDevice");
            drop(s);
            drop(d);
            assert!(settle(sim, 0, 0, None), "{case}: leaked");
            // The reaper may still hold the device for a moment after the last handle
            // dropped; the next case must open it afresh, so wait until it was released.
            assert!(
                eventually(Duration::from_secs(10), || sim
                    .call_count("aclrtResetDevice")
                    > resets),
                "{case}: the device was never released"
            );
        }
    }
    println!(
        "device open: {} injections: open failed with the mapped error {failed}, absorbed by \
         a probe {absorbed}",
        open_symbols.len() * CODES.len()
    );
    sim.reset();
}
