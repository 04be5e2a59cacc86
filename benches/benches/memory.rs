//! Memory: process RSS (`/proc/self/statm`) before and after creating and dropping 100 000
//! streams and 100 000 events, one at a time (and 100 000 data-path cycles: a page-locked host
//! buffer allocated, copied and dropped plus an `alloc_async` / `free_async` pair), on the host
//! backend, on the Ascend backend over
//! the simulator, and with the raw simulator calls for reference. Each case first runs 1 000
//! warm-up create/drop pairs (allocator arenas, thread-locals, the reaper thread), then settles
//! (a data-path case synchronizes its stream; over the simulator it waits until the live-object
//! counts are back to where they were, as the Ascend backend destroys streams on its reaper
//! thread), then reads RSS after `malloc_trim(0)`, so that memory freed but kept by the
//! allocator is not counted, only what is still held. Prints one line per case; the target
//! is |after − before| ≤ 1 MiB, and the bench exits with status 1 when a case misses it.
//!
//! Run: `cargo bench -p xstream-benches --bench memory`.
#![allow(unsafe_code)]

mod common;

use std::time::{Duration, Instant};

use xstream_ascend::AscendBackend;
use xstream_core::{
    Backend, Device, ErrorKind, EventDesc, EventFlags, PinnedAllocDesc, Stream, StreamDesc,
    StreamFlags,
};
use xstream_host::HostBackend;

use common::RawAcl;

const N: usize = 100_000;
const WARM: usize = 1_000;
const MIB: f64 = 1024.0 * 1024.0;

/// Waits (up to 30 s) until the simulator holds no more streams and events than `base`.
fn settle_sim(base: (u64, u64)) {
    let t = RawAcl::get();
    let end = Instant::now() + Duration::from_secs(30);
    // SAFETY: no arguments.
    while unsafe { ((t.live_streams)(), (t.live_events)()) } > base && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn sim_live() -> (u64, u64) {
    let t = RawAcl::get();
    // SAFETY: no arguments.
    unsafe { ((t.live_streams)(), (t.live_events)()) }
}

/// RSS after handing the allocator's free pages back to the kernel (`malloc_trim(0)` on glibc),
/// so the reading counts memory the process still holds, not the allocator's high-water mark:
/// without it, freed pages stay resident, and a reading depended on how deep the queue of
/// in-flight cycles had ever been (the longer measured loop reaches deeper queues than the
/// warm-up, which read as growth, or as shrinkage when the warm-up happened to go deeper).
fn held_rss() -> u64 {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: no preconditions; it only returns free heap memory to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
    common::rss_bytes()
}

/// Runs `op` WARM times, settles, measures RSS, runs it N times, settles, measures again.
/// Settling runs `quiesce` (the data-path cases synchronize their stream there, so neither
/// reading counts work still in flight) and then, over the simulator, waits for its live-object
/// counts.
fn case(backend: &str, what: &str, sim: bool, quiesce: impl Fn(), mut op: impl FnMut()) -> bool {
    let base = if sim { sim_live() } else { (0, 0) };
    let settle = || {
        quiesce();
        if sim {
            settle_sim(base);
        }
    };
    for _ in 0..WARM {
        op();
    }
    settle();
    let before = held_rss();
    let t0 = Instant::now();
    for _ in 0..N {
        op();
    }
    let took = t0.elapsed();
    settle();
    let after = held_rss();
    let delta = after as f64 - before as f64;
    let flat = delta.abs() <= MIB;
    println!(
        "memory {backend:<14} {what:<26} n={N} rss_before={:.2} MiB rss_after={:.2} MiB \
         delta={:+.1} KiB ({:.2} s, {:.0} ns/pair) flat_within_1MiB={}",
        before as f64 / MIB,
        after as f64 / MIB,
        delta / 1024.0,
        took.as_secs_f64(),
        took.as_nanos() as f64 / N as f64,
        if flat { "yes" } else { "NO" }
    );
    flat
}

/// Creates a stream, retrying while the device is at its stream limit (the backend destroys
/// dropped streams asynchronously, so a create right after many drops can find it full).
fn create_retry<D: Device>(dev: &D, desc: &StreamDesc, retries: &mut u64) {
    loop {
        match dev.create_stream(desc) {
            Ok(s) => return drop(s),
            Err(e) if e.kind() == ErrorKind::ResourceExhausted => {
                *retries += 1;
                std::thread::sleep(Duration::from_micros(50));
            }
            Err(e) => panic!("create_stream: {e}"),
        }
    }
}

/// Synchronizes `s`: a data-path case queues up to 255 cycles between its synchronizes, and each
/// queued cycle holds its page-locked buffer and its stream-ordered block until the stream
/// reaches it, so an RSS reading taken without this depends on how many were still queued.
fn sync<S: Stream>(s: &S) -> impl Fn() + '_ {
    move || s.synchronize().expect("synchronize")
}

/// No work to wait for (the create/drop cases finish each pair before the next).
fn nothing() {}

fn main() {
    // The simulator's environment is given to a new process, never set in this one.
    xstream_conformance::simulator::reexec_configured(1);
    // `cargo bench` passes `--bench`; nothing to parse.
    let nb = StreamDesc::new().flags(StreamFlags::NON_BLOCKING);
    let ed = EventDesc::new().flags(EventFlags::DISABLE_TIMING);
    let timed = EventDesc::new();
    let mut all = true;

    let host = HostBackend::open(0).expect("host device");
    all &= case("host", "stream create+drop", false, nothing, || {
        drop(host.create_stream(&nb).unwrap())
    });
    all &= case("host", "event create+drop", false, nothing, || {
        drop(host.create_event(&ed).unwrap())
    });
    all &= case("host", "timed event create+drop", false, nothing, || {
        drop(host.create_event(&timed).unwrap())
    });

    // The data path: a page-locked host buffer allocated, copied in and dropped, and a
    // stream-ordered buffer allocated and freed, per cycle.
    let hs = host.create_stream(&nb).unwrap();
    let hb = host.alloc(4096).unwrap();
    let mut i = 0u64;
    all &= case(
        "host",
        "host buffer + alloc_async",
        false,
        sync(&hs),
        || {
            let h = host.alloc_pinned(4096, &PinnedAllocDesc::new()).unwrap();
            hs.copy_to_device(&h, 0, &hb, 0, 4096).unwrap();
            let x = hs.alloc_async(4096).unwrap();
            hs.free_async(x).unwrap();
            i += 1;
            if i.is_multiple_of(256) {
                hs.synchronize().unwrap();
            }
        },
    );
    hs.synchronize().unwrap();

    common::setup();
    let dev = AscendBackend::open(0).expect("open the simulated Ascend device");
    let s = dev.create_stream(&nb).unwrap();
    let db = dev.alloc(4096).unwrap();
    all &= case(
        "ascend-sim",
        "host buffer + alloc_async",
        true,
        sync(&s),
        || {
            let h = dev.alloc_pinned(4096, &PinnedAllocDesc::new()).unwrap();
            s.copy_to_device(&h, 0, &db, 0, 4096).unwrap();
            let x = s.alloc_async(4096).unwrap();
            s.free_async(x).unwrap();
            i += 1;
            if i.is_multiple_of(256) {
                s.synchronize().unwrap();
            }
        },
    );
    s.synchronize().unwrap();
    drop(s);
    let mut retries = 0u64;
    all &= case("ascend-sim", "stream create+drop", true, nothing, || {
        create_retry(&dev, &nb, &mut retries)
    });
    if retries > 0 {
        println!("memory ascend-sim: {retries} create retries at the simulator's stream limit");
    }
    all &= case("ascend-sim", "event create+drop", true, nothing, || {
        drop(dev.create_event(&ed).unwrap())
    });
    all &= case(
        "ascend-sim",
        "timed event create+drop",
        true,
        nothing,
        || drop(dev.create_event(&timed).unwrap()),
    );

    let t = RawAcl::get();
    dev.bind().expect("bind the device context");
    all &= case(
        "ascend-sim raw",
        "aclrtCreate/DestroyStream",
        true,
        nothing,
        || {
            let s = t.stream();
            // SAFETY: an idle stream created just above.
            assert_eq!(unsafe { (t.destroy_stream)(s) }, 0);
        },
    );
    all &= case(
        "ascend-sim raw",
        "aclrtCreate/DestroyEvent",
        true,
        nothing,
        || {
            let e = t.event();
            // SAFETY: an event created just above.
            assert_eq!(unsafe { (t.destroy_event)(e) }, 0);
        },
    );
    println!(
        "memory summary: {}",
        if all {
            "every case flat within 1 MiB"
        } else {
            "some case grew by more than 1 MiB (see above)"
        }
    );
    if !all {
        std::process::exit(1);
    }
}
