//! Multi-threaded stress of the CUDA backend: 8 threads × 10k mixed operations (stream create
//! and drop with work pending, event record / wait across streams and threads, host callbacks,
//! `notify`, futures, kernels, memset / copy / read with result checks) on device 0.
//!
//! Checks: every host callback runs exactly once and in stream order (per-stream sequence
//! numbers), every `notify` runs exactly once, every read-back buffer holds exactly the bytes
//! written (also across streams ordered only by an event), no callback stays pending at the end.
//! Prints `SKIP: <test name>: <reason>` and passes when no CUDA device is available. Expected
//! run time on an H100/H200: a few seconds (the GPU flow's limit is 300 s per binary).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use xstream_core::{
    Backend, Device, Event, EventDesc, EventFlags, Kernel, Stream, StreamDesc, StreamFlags,
};
use xstream_cuda::{CudaBackend, CudaBuffer, CudaDevice, CudaEvent, CudaStream};

const THREADS: usize = 8;
const OPS_PER_THREAD: usize = 10_000;
const MAX_STREAMS: usize = 4;
const SHARED_EVENTS: usize = 16;
const BUF: usize = 64 * 1024;

fn device(test: &str) -> Option<CudaDevice> {
    if let Err(e) = CudaBackend::availability() {
        xstream_conformance::report_skip(test, &e);
        return None;
    }
    match CudaBackend::open(0) {
        Ok(d) => Some(d),
        Err(e) => panic!("{test}: CUDA is available but open(0) failed: {e}"),
    }
}

/// Counters shared by all threads and every callback.
#[derive(Default)]
struct Totals {
    /// Host callbacks that ran.
    callbacks_ran: AtomicU64,
    /// `notify` jobs that ran.
    notifies_ran: AtomicU64,
    /// Host callbacks that ran out of stream order.
    order_errors: AtomicU64,
    /// Host callbacks that ran with an error status.
    status_errors: AtomicU64,
}

/// One stream with the sequence state its callbacks check.
struct Tracked {
    stream: CudaStream,
    /// The last sequence number handed to a callback (enqueue side, this thread only).
    next: u64,
    /// The last sequence number a callback saw (callback side).
    seen: Arc<AtomicU64>,
}

/// What one worker enqueued (compared with what ran).
#[derive(Default, Debug)]
struct Counts {
    callbacks: u64,
    notifies: u64,
    data_checks: u64,
    streams_created: u64,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn ok<T>(what: &str, r: xstream_core::Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{what} failed: {e}"),
    }
}

fn new_stream(dev: &CudaDevice) -> Tracked {
    Tracked {
        stream: ok(
            "create_stream",
            dev.create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING)),
        ),
        next: 0,
        seen: Arc::new(AtomicU64::new(0)),
    }
}

fn check_bytes(what: &str, got: &[u8], len: usize, value: u8) {
    assert_eq!(got.len(), len, "{what}: read-back length");
    if let Some(i) = got.iter().position(|&b| b != value) {
        panic!(
            "{what}: byte {i} of {len} is {:#04x}, expected {value:#04x}",
            got[i]
        );
    }
}

#[allow(clippy::too_many_lines)]
fn worker(t: usize, dev: CudaDevice, shared: Arc<Vec<CudaEvent>>, totals: Arc<Totals>) -> Counts {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((t as u64 + 1) * 0x1000_0000_01B3));
    let mut c = Counts::default();
    let mut streams: Vec<Tracked> = vec![new_stream(&dev), new_stream(&dev)];
    c.streams_created += 2;
    let a: CudaBuffer = ok("alloc", dev.alloc(BUF));
    let b: CudaBuffer = ok("alloc", dev.alloc(BUF));
    let local = ok(
        "create_event",
        dev.create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING)),
    );

    for op in 0..OPS_PER_THREAD {
        let r = rng.below(100);
        let si = rng.below(streams.len());
        match r {
            // Create a stream; when full, replace one (dropped with its work still pending).
            0..=7 => {
                let s = new_stream(&dev);
                c.streams_created += 1;
                if streams.len() < MAX_STREAMS {
                    streams.push(s);
                } else {
                    streams[si] = s;
                }
            }
            // Drop a stream (its pending callbacks must still run).
            8..=11 => {
                if streams.len() > 1 {
                    drop(streams.swap_remove(si));
                }
            }
            // Host callback with an in-order check.
            12..=29 => {
                let tr = &mut streams[si];
                tr.next += 1;
                let k = tr.next;
                let seen = Arc::clone(&tr.seen);
                let tot = Arc::clone(&totals);
                ok(
                    "host_callback",
                    tr.stream.host_callback(move |status| {
                        if status.is_err() {
                            tot.status_errors.fetch_add(1, Ordering::Relaxed);
                        }
                        if seen.swap(k, Ordering::AcqRel) + 1 != k {
                            tot.order_errors.fetch_add(1, Ordering::Relaxed);
                        }
                        tot.callbacks_ran.fetch_add(1, Ordering::AcqRel);
                    }),
                );
                c.callbacks += 1;
            }
            // Record a shared event here, make another of this thread's streams wait on it.
            30..=41 => {
                let e = &shared[rng.below(SHARED_EVENTS)];
                ok("record", e.record(&streams[si].stream));
                let sj = rng.below(streams.len());
                ok("wait_event", streams[sj].stream.wait_event(e));
            }
            // Wait on a shared event, possibly recorded by another thread.
            42..=49 => {
                let e = &shared[rng.below(SHARED_EVENTS)];
                ok("wait_event", streams[si].stream.wait_event(e));
            }
            // A short kernel.
            50..=57 => {
                let us = rng.below(5) as u64;
                ok(
                    "launch",
                    streams[si]
                        .stream
                        .launch_builtin(Kernel::Delay(Duration::from_micros(us))),
                );
            }
            // memset + copy + read on one stream, checked.
            58..=69 => {
                let s = &streams[si].stream;
                let off = rng.below(BUF / 2);
                let len = 1 + rng.below(BUF / 2);
                let v = (rng.next() & 0xff) as u8;
                ok("memset", s.memset(&a, off, len, v));
                ok("copy", s.copy(&a, off, &b, off, len));
                let rb = ok("read", s.read(&b, off, len));
                ok("synchronize", s.synchronize());
                let got = ok("readback", rb.take());
                check_bytes(&format!("thread {t} op {op} same-stream"), &got, len, v);
                c.data_checks += 1;
            }
            // memset on stream 1 behind a kernel, event, stream 2 waits, copies and reads:
            // the bytes are right only if the wait ordered the copy after the memset.
            70..=77 => {
                if streams.len() < 2 {
                    streams.push(new_stream(&dev));
                    c.streams_created += 1;
                }
                let sj = (si + 1 + rng.below(streams.len() - 1)) % streams.len();
                let (s1, s2) = (&streams[si].stream, &streams[sj].stream);
                let off = rng.below(BUF / 2);
                let len = 1 + rng.below(BUF / 2);
                let v = (rng.next() & 0xff) as u8;
                ok(
                    "launch",
                    s1.launch_builtin(Kernel::Delay(Duration::from_micros(20))),
                );
                ok("memset", s1.memset(&a, off, len, v));
                ok("record", local.record(s1));
                ok("wait_event", s2.wait_event(&local));
                ok("copy", s2.copy(&a, off, &b, off, len));
                let rb = ok("read", s2.read(&b, off, len));
                ok("synchronize", s2.synchronize());
                let got = ok("readback", rb.take());
                check_bytes(&format!("thread {t} op {op} cross-stream"), &got, len, v);
                c.data_checks += 1;
            }
            // A future on the stream's completion.
            78..=81 => {
                let f = ok("completed", streams[si].stream.completed());
                // (The stream may still report Pending for a moment: the future resolves
                // inside the host function, before the stream moves past it.)
                ok("completed.wait", f.wait());
            }
            // A second-tier callback (dispatcher thread).
            82..=85 => {
                let tot = Arc::clone(&totals);
                ok(
                    "notify",
                    streams[si].stream.notify(move |_| {
                        tot.notifies_ran.fetch_add(1, Ordering::AcqRel);
                    }),
                );
                c.notifies += 1;
            }
            // Queries.
            86..=91 => {
                let _ = ok("stream query", streams[si].stream.query());
                let _ = ok("event query", local.query());
                let e = &shared[rng.below(SHARED_EVENTS)];
                let _ = ok("shared event query", e.query());
            }
            // Event create / record / synchronize / drop.
            _ => {
                let flags = if rng.below(2) == 0 {
                    EventFlags::DISABLE_TIMING
                } else {
                    EventFlags::empty()
                };
                let e = ok(
                    "create_event",
                    dev.create_event(&EventDesc::new().flags(flags)),
                );
                ok("record", e.record(&streams[si].stream));
                if rng.below(4) == 0 {
                    ok("event synchronize", e.synchronize());
                }
            }
        }
    }
    for tr in &streams {
        ok("final synchronize", tr.stream.synchronize());
        assert_eq!(
            tr.seen.load(Ordering::Acquire),
            tr.next,
            "thread {t}: a live stream's callbacks did not all run after synchronize"
        );
    }
    c
}

#[test]
fn cuda_stress_mixed_operations_8_threads() {
    let test = "cuda_stress_mixed_operations_8_threads";
    let Some(dev) = device(test) else {
        return;
    };
    let t0 = Instant::now();
    let shared: Arc<Vec<CudaEvent>> = Arc::new(
        (0..SHARED_EVENTS)
            .map(|_| {
                ok(
                    "create_event",
                    dev.create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING)),
                )
            })
            .collect(),
    );
    let totals = Arc::new(Totals::default());
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (dev, shared, totals) = (dev.clone(), Arc::clone(&shared), Arc::clone(&totals));
            std::thread::Builder::new()
                .name(format!("stress-{t}"))
                .spawn(move || worker(t, dev, shared, totals))
                .expect("spawn")
        })
        .collect();
    let mut sum = Counts::default();
    for (t, h) in handles.into_iter().enumerate() {
        let c = h
            .join()
            .unwrap_or_else(|_| panic!("worker thread {t} panicked (see above)"));
        sum.callbacks += c.callbacks;
        sum.notifies += c.notifies;
        sum.data_checks += c.data_checks;
        sum.streams_created += c.streams_created;
    }
    let work_s = t0.elapsed();
    // Dropped streams may still have callbacks queued: wait for the whole device.
    ok("device synchronize", dev.synchronize());
    let deadline = Instant::now() + Duration::from_secs(30);
    while (totals.callbacks_ran.load(Ordering::Acquire) < sum.callbacks
        || totals.notifies_ran.load(Ordering::Acquire) < sum.notifies
        || dev.pending_callbacks() > 0)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Anything firing twice would show up a little later.
    std::thread::sleep(Duration::from_millis(50));
    let ran = totals.callbacks_ran.load(Ordering::Acquire);
    let notified = totals.notifies_ran.load(Ordering::Acquire);
    eprintln!(
        "{test}: {THREADS} threads × {OPS_PER_THREAD} ops in {work_s:?} (+ drain {:?}): \
         {} callbacks ({ran} ran), {} notifies ({notified} ran), {} data checks, {} streams created",
        t0.elapsed() - work_s,
        sum.callbacks,
        sum.notifies,
        sum.data_checks,
        sum.streams_created
    );
    assert_eq!(ran, sum.callbacks, "host callbacks: ran != enqueued");
    assert_eq!(notified, sum.notifies, "notify jobs: ran != enqueued");
    assert_eq!(
        totals.order_errors.load(Ordering::Relaxed),
        0,
        "callbacks out of stream order"
    );
    assert_eq!(
        totals.status_errors.load(Ordering::Relaxed),
        0,
        "callbacks with an error status"
    );
    assert_eq!(dev.pending_callbacks(), 0, "callbacks still pending");
    assert!(
        dev.sticky_error().is_none(),
        "context poisoned: {:?}",
        dev.sticky_error()
    );
    assert!(sum.data_checks > 0 && sum.callbacks > 0);
}
