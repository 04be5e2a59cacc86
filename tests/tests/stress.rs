//! Concurrency stress: 8 threads × N mixed operations (create, record, wait, callbacks,
//! copies, kernels, futures, drop) on one device, on the host backend and on the Ascend
//! backend over the ACL simulator. It checks results, not only the absence of crashes:
//!
//! - every stream-blocking callback runs exactly once, with `Ok`, and in stream order (a
//!   per-stream sequence number), also for streams dropped with work still queued;
//! - every `notify` runs exactly once;
//! - data written on one stream and read on another after `record` + `wait_event` is the data
//!   written; memsets and LCG kernels produce the host reference;
//! - a synchronized stream's `query` is `Ready`, a synchronized event's too;
//! - on the simulator, live streams and events return to their baseline after every object
//!   is dropped and its worker threads have exited.
//!
//! The ordinary run is 8 × 10,000 operations per backend (about 3 s in all); the
//! `#[ignore]`d runs (`scripts/reliability.sh`) are 8 × 100,000.

mod common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, Rng};
use xstream_core::{
    lcg_reference, Backend, Capabilities, Device, Event, EventDesc, EventFlags, Kernel, Status,
    Stream, StreamDesc, StreamFlags,
};

/// What one run did and checked.
#[derive(Debug, Default)]
struct Totals {
    ops: AtomicUsize,
    callbacks_enqueued: AtomicUsize,
    callbacks_ran: AtomicUsize,
    notifies_enqueued: AtomicUsize,
    notifies_ran: AtomicUsize,
    streams_created: AtomicUsize,
    events_created: AtomicUsize,
    data_checks: AtomicUsize,
    violations: AtomicUsize,
}

impl Totals {
    fn violation(&self, what: String) {
        eprintln!("VIOLATION: {what}");
        self.violations.fetch_add(1, Ordering::SeqCst);
    }
}

/// A stream with its callback sequence counter.
struct Tracked<S> {
    s: S,
    next: u64,
    last_ran: Arc<AtomicU64>,
}

fn new_stream<B: Backend>(dev: &B::Device, rng: &mut Rng, tot: &Totals) -> Tracked<B::Stream> {
    let flags = if rng.below(2) == 0 {
        StreamFlags::NON_BLOCKING
    } else {
        StreamFlags::empty()
    };
    let s = dev
        .create_stream(&StreamDesc::new().flags(flags))
        .expect("create_stream");
    tot.streams_created.fetch_add(1, Ordering::Relaxed);
    Tracked {
        s,
        next: 1,
        last_ran: Arc::new(AtomicU64::new(0)),
    }
}

fn new_event<B: Backend>(dev: &B::Device, rng: &mut Rng, tot: &Totals) -> B::Event {
    let flags = if rng.below(2) == 0 {
        EventFlags::DISABLE_TIMING
    } else {
        EventFlags::empty()
    };
    tot.events_created.fetch_add(1, Ordering::Relaxed);
    dev.create_event(&EventDesc::new().flags(flags))
        .expect("create_event")
}

const BUF: usize = 256;

fn worker<B: Backend>(dev: B::Device, seed: u64, ops: usize, tot: Arc<Totals>) {
    let mut rng = Rng::new(seed);
    let kernels = dev.info().capabilities.contains(Capabilities::KERNELS);
    let mut streams = vec![new_stream::<B>(&dev, &mut rng, &tot)];
    let mut events: Vec<B::Event> = vec![new_event::<B>(&dev, &mut rng, &tot)];
    let buf = dev.alloc(BUF).expect("alloc");
    let buf2 = dev.alloc(BUF).expect("alloc");
    for op in 0..ops {
        tot.ops.fetch_add(1, Ordering::Relaxed);
        let si = rng.below(streams.len());
        match rng.below(16) {
            // create / drop streams (drop with queued work: callbacks must still run)
            0 => {
                if streams.len() < 4 {
                    streams.push(new_stream::<B>(&dev, &mut rng, &tot));
                }
            }
            1 => {
                if streams.len() > 1 {
                    let t = streams.swap_remove(si);
                    if rng.below(2) == 0 {
                        t.s.launch_builtin(Kernel::Delay(Duration::from_micros(50)))
                            .expect("delay");
                    }
                    drop(t);
                }
            }
            // create / drop events
            2 => {
                if events.len() < 4 {
                    events.push(new_event::<B>(&dev, &mut rng, &tot));
                } else {
                    events.swap_remove(rng.below(events.len()));
                }
            }
            // record
            3 | 4 => {
                if !events.is_empty() {
                    let e = &events[rng.below(events.len())];
                    e.record(&streams[si].s).expect("record");
                }
            }
            // wait
            5 => {
                if !events.is_empty() {
                    let e = &events[rng.below(events.len())];
                    streams[si].s.wait_event(e).expect("wait_event");
                }
            }
            // stream-blocking callback: exactly once, Ok, in order
            6 | 7 => {
                let t = &mut streams[si];
                let seq = t.next;
                t.next += 1;
                let last = t.last_ran.clone();
                let tot2 = tot.clone();
                tot.callbacks_enqueued.fetch_add(1, Ordering::SeqCst);
                t.s.host_callback(move |r| {
                    if let Err(e) = r {
                        tot2.violation(format!("callback got {e:?}"));
                    }
                    let prev = last.swap(seq, Ordering::SeqCst);
                    if prev != seq - 1 {
                        tot2.violation(format!("callback {seq} ran after {prev}"));
                    }
                    tot2.callbacks_ran.fetch_add(1, Ordering::SeqCst);
                })
                .expect("host_callback");
            }
            // second tier
            8 => {
                let tot2 = tot.clone();
                tot.notifies_enqueued.fetch_add(1, Ordering::SeqCst);
                streams[si]
                    .s
                    .notify(move |r| {
                        if r.is_err() {
                            tot2.violation(format!("notify got {r:?}"));
                        }
                        tot2.notifies_ran.fetch_add(1, Ordering::SeqCst);
                    })
                    .expect("notify");
            }
            // cross-stream data: write on A, record, B waits, B reads
            9 | 10 => {
                let sj = rng.below(streams.len());
                let byte = (rng.next() & 0xff) as u8;
                let data: Vec<u8> = (0..BUF).map(|i| byte.wrapping_add(i as u8)).collect();
                let e = new_event::<B>(&dev, &mut rng, &tot);
                streams[si].s.write(&buf, 0, data.clone()).expect("write");
                e.record(&streams[si].s).expect("record");
                streams[sj].s.wait_event(&e).expect("wait_event");
                drop(e); // the wait snapshot outlives the event
                let rb = streams[sj].s.read(&buf, 0, BUF).expect("read");
                streams[sj].s.synchronize().expect("synchronize");
                match rb.take() {
                    Ok(got) if got == data => {
                        tot.data_checks.fetch_add(1, Ordering::Relaxed);
                    }
                    other => tot.violation(format!("op {op}: cross-stream read {other:?}")),
                }
                // every stream must be done with `buf` before the next writer
                for t in &streams {
                    t.s.synchronize().expect("synchronize");
                }
            }
            // memset + read on one stream, or a kernel checked against the host reference
            11 => {
                let t = &streams[si].s;
                if kernels && rng.below(2) == 0 {
                    let mut data: Vec<u8> = (0..BUF).map(|_| rng.next() as u8).collect();
                    t.write(&buf2, 0, data.clone()).expect("write");
                    t.launch_builtin(Kernel::Lcg {
                        buf: &buf2,
                        rounds: 3,
                    })
                    .expect("lcg");
                    let rb = t.read(&buf2, 0, BUF).expect("read");
                    t.synchronize().expect("synchronize");
                    lcg_reference(&mut data, 3);
                    match rb.take() {
                        Ok(got) if got == data => {
                            tot.data_checks.fetch_add(1, Ordering::Relaxed);
                        }
                        other => tot.violation(format!("op {op}: lcg {other:?}")),
                    }
                } else {
                    let v = rng.next() as u8;
                    t.memset(&buf2, 0, BUF, v).expect("memset");
                    let rb = t.read(&buf2, 0, BUF).expect("read");
                    t.synchronize().expect("synchronize");
                    match rb.take() {
                        Ok(got) if got.iter().all(|&b| b == v) => {
                            tot.data_checks.fetch_add(1, Ordering::Relaxed);
                        }
                        other => tot.violation(format!("op {op}: memset {other:?}")),
                    }
                }
            }
            // query / synchronize
            12 => {
                let t = &streams[si].s;
                t.query().expect("query");
                t.synchronize().expect("synchronize");
                if t.query().expect("query") != Status::Ready {
                    tot.violation("synchronized stream not Ready".into());
                }
            }
            13 => {
                if !events.is_empty() {
                    let e = &events[rng.below(events.len())];
                    e.query().expect("event query");
                    e.synchronize().expect("event synchronize");
                    if e.query().expect("event query") != Status::Ready {
                        tot.violation("synchronized event not Ready".into());
                    }
                }
            }
            // futures
            14 => {
                let t = &streams[si];
                let c = t.s.completed().expect("completed");
                c.wait().expect("stream future");
                // in order: every callback enqueued before the future has run
                let ran = t.last_ran.load(Ordering::SeqCst);
                if ran != t.next - 1 {
                    tot.violation(format!(
                        "future resolved with callback {ran} of {}",
                        t.next - 1
                    ));
                }
            }
            _ => {
                if !events.is_empty() {
                    let e = &events[rng.below(events.len())];
                    e.completed()
                        .expect("event completed")
                        .wait()
                        .expect("event future");
                } else {
                    streams[si]
                        .s
                        .synchronize_timeout(Duration::from_secs(30))
                        .expect("synchronize_timeout");
                }
            }
        }
    }
    for t in &streams {
        t.s.synchronize().expect("final synchronize");
        if t.last_ran.load(Ordering::SeqCst) != t.next - 1 {
            tot.violation("callbacks missing after synchronize".into());
        }
    }
}

/// Runs `threads` × `ops` on `dev`; returns the totals after every callback ran.
fn stress<B: Backend>(dev: &B::Device, threads: usize, ops: usize, seed: u64) -> Arc<Totals> {
    let tot = Arc::new(Totals::default());
    let hs: Vec<_> = (0..threads)
        .map(|i| {
            let dev = dev.clone();
            let tot = tot.clone();
            std::thread::Builder::new()
                .name(format!("stress-{i}"))
                .spawn(move || worker::<B>(dev, seed ^ ((i as u64 + 1) * 7919), ops, tot))
                .expect("spawn")
        })
        .collect();
    for h in hs {
        h.join().expect("a stress thread panicked");
    }
    // Dropped streams finish their work in the background: wait for their callbacks.
    let all_ran = eventually(Duration::from_secs(60), || {
        tot.callbacks_ran.load(Ordering::SeqCst) == tot.callbacks_enqueued.load(Ordering::SeqCst)
            && tot.notifies_ran.load(Ordering::SeqCst)
                == tot.notifies_enqueued.load(Ordering::SeqCst)
    });
    // Give late duplicates (a violation of exactly-once) a moment to show.
    std::thread::sleep(Duration::from_millis(20));
    println!(
        "{}: {threads} threads x {ops} ops = {} ops; streams {}, events {}, callbacks {}/{}, \
         notifies {}/{}, data checks {}, violations {}",
        B::KIND,
        tot.ops.load(Ordering::SeqCst),
        tot.streams_created.load(Ordering::SeqCst),
        tot.events_created.load(Ordering::SeqCst),
        tot.callbacks_ran.load(Ordering::SeqCst),
        tot.callbacks_enqueued.load(Ordering::SeqCst),
        tot.notifies_ran.load(Ordering::SeqCst),
        tot.notifies_enqueued.load(Ordering::SeqCst),
        tot.data_checks.load(Ordering::SeqCst),
        tot.violations.load(Ordering::SeqCst),
    );
    assert!(all_ran, "callbacks or notifies never ran: {tot:?}");
    assert_eq!(tot.violations.load(Ordering::SeqCst), 0, "{tot:?}");
    assert_eq!(tot.ops.load(Ordering::SeqCst), threads * ops);
    assert!(tot.data_checks.load(Ordering::SeqCst) > 0);
    tot
}

fn host_run(ops: usize) {
    let dev = xstream_host::HostBackend::open(0).expect("host device");
    stress::<xstream_host::HostBackend>(&dev, 8, ops, 0x5eed);
}

fn sim_run(ops: usize) {
    let _g = common::global_lock();
    let sim = common::Sim::get();
    let dev = common::ascend_device(0);
    // Settle whatever earlier tests left, then take the baseline.
    eventually(Duration::from_secs(10), || sim.live_threads() == 0);
    let (s0, e0) = (sim.live_streams(), sim.live_events());
    stress::<xstream_ascend::AscendBackend>(&dev, 8, ops, SIM_SEED);
    let back = eventually(Duration::from_secs(30), || {
        sim.live_streams() == s0 && sim.live_events() == e0 && sim.live_threads() == 0
    });
    println!(
        "simulator after drop: streams {} (baseline {s0}), events {} (baseline {e0}), \
         worker threads {}",
        sim.live_streams(),
        sim.live_events(),
        sim.live_threads()
    );
    assert!(back, "simulator objects or threads leaked");
}

/// The seed of the simulator runs.
const SIM_SEED: u64 = 0xAC1;

#[test]
fn host_8_threads_x_10k() {
    host_run(10_000);
}

#[test]
fn simulator_8_threads_x_10k() {
    if !common::in_sim_process() {
        return;
    }
    sim_run(10_000);
}

#[test]
#[ignore = "slow: 8 x 100k operations; scripts/reliability.sh runs it"]
fn host_8_threads_x_100k() {
    host_run(100_000);
}

#[test]
#[ignore = "slow: 8 x 100k operations; scripts/reliability.sh runs it"]
fn simulator_8_threads_x_100k() {
    if !common::in_sim_process() {
        return;
    }
    sim_run(100_000);
}
