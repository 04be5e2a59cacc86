//! The keep-alive list's hand-over on a side stream (`backends/cuda/src/stream/keep.rs`),
//! against the double's counters: no host function on the stream itself and its later work
//! not ordered behind the hand-over, entries freed only after the work before the hand-over's
//! event ran and never by the enqueuing thread, a stream left idle still releasing its
//! batches, the fallbacks when the side stream or its calls fail, and a drop with side work
//! pending. Behaviour of this crate's code only: the double is not a GPU (it runs every host
//! function, whatever its stream, on one thread in the order they were queued, so a held host
//! function holds every later one; the checks hold work that way).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use xstream_core::Status;

use super::*;

/// `CUDA_ERROR_OUT_OF_MEMORY`: the failure injected (not sticky: the context stays usable).
const OUT_OF_MEMORY: u32 = 2;

/// A host callback on `s` that holds the stream's later work, and with the double's one
/// host-function thread every later host function, until the returned sender is used (or
/// dropped); and a flag it sets when it returns.
fn hold(s: &CudaStream) -> (std::sync::mpsc::Sender<()>, Arc<AtomicBool>) {
    let (open, held) = std::sync::mpsc::channel::<()>();
    let ran = Arc::new(AtomicBool::new(false));
    let r2 = Arc::clone(&ran);
    s.host_callback(move |_| {
        // A guard, not a timing bound: the check opens it.
        let _ = held.recv_timeout(Duration::from_secs(30));
        r2.store(true, Ordering::SeqCst);
    })
    .expect("host_callback");
    (open, ran)
}

fn mine(null: &Null, name: &str) -> u64 {
    null.count(b"xnull_thread_calls\0", name)
}

/// Checks the `cuMemFree` of `n` buffers of handed-over batches while a host function holds
/// the double's host-function thread: none by this (the enqueuing) thread, none while held
/// (a short window: an early free follows the call just made), all `n` once `open` released
/// the hold, by another thread.
fn freed_after(null: &Null, open: std::sync::mpsc::Sender<()>, n: u64, what: &str) {
    let free = "cuMemFree_v2";
    assert_eq!(mine(null, free), 0, "{what}: freed by the enqueuing thread");
    assert_eq!(
        wait_calls(null, free, 1, Duration::from_millis(300)),
        0,
        "{what}: a buffer was freed before the held host function ran"
    );
    open.send(()).expect("open the held callback");
    assert_eq!(
        wait_calls(null, free, n, Duration::from_secs(10)),
        n,
        "{what}: not freed once the held host function ran"
    );
    assert_eq!(mine(null, free), 0, "{what}: freed by the enqueuing thread");
}

/// The native handle of `s` (through its cudarc view, held by `s` only).
fn raw(s: &CudaStream) -> sys::CUstream {
    s.cudarc_stream().cu_stream()
}

pub(crate) fn keep_hand_overs(
    null: &Null,
    dev: &xstream_cuda::CudaDevice,
    f: &xstream_cuda::CudaFunction,
) {
    let launch = |s: &CudaStream, b: &xstream_cuda::CudaBuffer| launch_with_buffer(s, f, b);
    // `c` stays held here: its entries only fill the lists. A batch starts with one launch
    // using a fresh buffer dropped at once, so the list holds its last reference and its
    // `cuMemFree` shows the batch's release.
    let c = dev.alloc(LEN).expect("alloc");
    let k = KEEP_FLUSH;
    let batch = |s: &CudaStream| {
        let b = dev.alloc(LEN).expect("alloc");
        launch(s, &b);
        drop(b);
        for _ in 1..k {
            launch(s, &c);
        }
    };
    let guard = Duration::from_secs(10);

    // 1. No host function on the stream, and its later work is not behind the hand-over:
    // with the double's host-function thread held by another stream, the stream is idle
    // after its hand-overs (a host function on it would keep it busy), and the release
    // waits (it is a host function on the side stream).
    let g = dev.create_stream(&nb()).expect("create_stream");
    let a = dev.create_stream(&nb()).expect("create_stream");
    let (open_g, _) = hold(&g);
    null.reset();
    batch(&a);
    assert_eq!(
        mine(null, "cuStreamCreate"),
        1,
        "the first hand-over did not create the side stream"
    );
    batch(&a);
    assert_eq!(
        mine(null, "cuStreamCreate"),
        1,
        "a later hand-over created another side stream"
    );
    for (name, want) in [
        ("cuEventRecord", 2),
        ("cuStreamWaitEvent", 2),
        ("cuLaunchHostFunc", 2),
    ] {
        assert_eq!(mine(null, name), want, "{name} over two hand-overs");
    }
    assert_eq!(
        null.stream_host_fns(raw(&a)),
        0,
        "a hand-over put a host function on the stream itself"
    );
    assert_eq!(
        a.query().expect("query"),
        Status::Ready,
        "the stream's work is ordered behind its hand-over's release"
    );
    freed_after(
        null,
        open_g,
        2,
        "batches behind the side stream's host functions",
    );
    drop((a, g));

    // 2. Held work: nothing freed while the work before the event is held; freed once it
    // ran, by another thread than the enqueuing one.
    let a = dev.create_stream(&nb()).expect("create_stream");
    let (open, _) = hold(&a);
    null.reset();
    batch(&a);
    freed_after(null, open, 1, "a batch of held work");
    a.synchronize().expect("synchronize");
    drop(a);

    // 3. A stream left idle after a hand-over (no synchronize, no later call on it) still
    // has its batch freed once the work ran.
    let a = dev.create_stream(&nb()).expect("create_stream");
    null.reset();
    batch(&a);
    assert_eq!(
        wait_calls(null, "cuMemFree_v2", 1, guard),
        1,
        "an idle stream's completed batch was kept"
    );
    assert_eq!(
        mine(null, "cuMemFree_v2"),
        0,
        "freed by the enqueuing thread"
    );

    // 4. Fallbacks. (a) No side stream (`cuStreamCreate` refused): a host function on the
    // stream itself, behind the held work; the next hand-over creates the side stream.
    let a = dev.create_stream(&nb()).expect("create_stream");
    let (open, _) = hold(&a);
    null.reset();
    null.fail_next("cuStreamCreate", 1, OUT_OF_MEMORY);
    batch(&a);
    assert_eq!(
        mine(null, "cuStreamWaitEvent"),
        0,
        "a wait without a side stream"
    );
    assert_eq!(
        null.stream_host_fns(raw(&a)),
        2,
        "no host-function fallback on the stream (the hold is the first)"
    );
    batch(&a);
    assert_eq!(
        mine(null, "cuStreamCreate"),
        2,
        "the next hand-over did not try the side stream again"
    );
    assert_eq!(
        null.stream_host_fns(raw(&a)),
        2,
        "the side stream was not used again"
    );
    freed_after(null, open, 2, "the fallback's batch and the next");
    // (b) The wait on the side stream refused: the host function on the stream instead.
    null.fail_next("cuStreamWaitEvent", 1, OUT_OF_MEMORY);
    batch(&a);
    assert_eq!(
        null.stream_host_fns(raw(&a)),
        3,
        "a failed wait did not take the host-function fallback"
    );
    assert_eq!(
        wait_calls(null, "cuMemFree_v2", 3, guard),
        3,
        "the batch of the failed wait was not freed once the work ran"
    );
    // (c) Every host function refused (on the side stream, then on the stream): the entries
    // go back on the list, and the stream's synchronize releases them (on this thread, as
    // any wait's release does).
    a.synchronize().expect("synchronize");
    null.reset();
    null.fail_next("cuLaunchHostFunc", 2, OUT_OF_MEMORY);
    batch(&a);
    assert_eq!(
        mine(null, "cuLaunchHostFunc"),
        2,
        "both host functions tried"
    );
    assert_eq!(
        wait_calls(null, "cuMemFree_v2", 1, Duration::from_millis(300)),
        0,
        "entries whose hand-over failed were freed"
    );
    a.synchronize().expect("synchronize");
    assert_eq!(
        mine(null, "cuMemFree_v2"),
        1,
        "the entries put back on the list were not released by the synchronize"
    );
    drop(a);
    // Its teardown (on the reaper) before the next check counts destroys.
    assert_eq!(
        wait_calls(null, "cuStreamDestroy_v2", 2, guard),
        2,
        "a dropped stream and its side stream were not both destroyed"
    );

    // 5. Drop with side work pending behind held work: the drop returns while the work is
    // held, the stream and its side stream are destroyed (on the reaper), nothing is freed
    // early, and the batch is freed once the work ran.
    let a = dev.create_stream(&nb()).expect("create_stream");
    let (open, ran) = hold(&a);
    batch(&a);
    for _ in 0..10 {
        launch(&a, &c);
    }
    null.reset();
    drop(a);
    assert!(
        !ran.load(Ordering::SeqCst),
        "the drop waited for the held work"
    );
    assert_eq!(
        wait_calls(null, "cuStreamDestroy_v2", 2, guard),
        2,
        "the stream and its side stream were not both destroyed"
    );
    freed_after(null, open, 1, "a dropped stream's batch on its side stream");
    println!(
        "keep hand-overs: side stream, no host function on the stream, freed off the \
         enqueuing thread after the work, idle stream released, fallbacks, drop"
    );
}
