//! The keep-alive list's hand-over behind events (`backends/cuda/src/stream/keep.rs`), against
//! the double's counters: no host function while a stream lives, completed batches released
//! by the enqueuing thread, held work keeping its buffers, the host-function fallback past the
//! pending bound, and a drop with batches pending. Behaviour of this crate's code only: the
//! double is not a GPU (an event is "not ready" while a host function it is ordered after has
//! not run, which is how the checks hold work).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::*;

/// Pending batches at most (`PENDING_MAX` in backends/cuda/src/stream/keep.rs).
const PENDING_MAX: u64 = 8;

/// A host callback on `s` that holds the stream's later work until the returned sender is
/// used (or dropped), and a flag it sets when it returns.
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

pub(crate) fn keep_hand_overs(
    null: &Null,
    dev: &xstream_cuda::CudaDevice,
    f: &xstream_cuda::CudaFunction,
) {
    let single = LaunchConfig::single();
    let launch = |s: &CudaStream, b: &xstream_cuda::CudaBuffer| {
        s.launch_kernel(
            f,
            &single,
            &[KernelArg::Buffer(b), KernelArg::U32(1), KernelArg::F32(1.0)],
        )
        .expect("launch with a buffer")
    };
    // `c` stays held here: its entries only fill the lists; `b` is dropped after one launch,
    // so the stream holds its last reference and its `cuMemFree` shows its release.
    let c = dev.alloc(LEN).expect("alloc");
    let k = KEEP_FLUSH;

    // 1. Work completes (the double runs it at once): three hand-overs, no host function;
    // the second releases the first batch (with `b`) on this thread.
    let a = dev.create_stream(&nb()).expect("create_stream");
    let b = dev.alloc(LEN).expect("alloc");
    null.reset();
    launch(&a, &b);
    drop(b);
    for _ in 1..3 * k {
        launch(&a, &c);
    }
    assert_eq!(
        mine(null, "cuLaunchHostFunc"),
        0,
        "a live stream handed its keep list to a host function"
    );
    assert_eq!(
        mine(null, "cuEventRecord"),
        3,
        "one event per hand-over ({} entries)",
        3 * k
    );
    assert_eq!(
        mine(null, "cuMemFree_v2"),
        1,
        "the completed first batch's buffer was not freed by the enqueuing thread at the \
         next hand-over"
    );
    a.synchronize().expect("synchronize");
    drop(a);

    // 2. Held work: its batches stay pending (the event is not ready), the buffer lives; the
    // synchronize releases them.
    let a = dev.create_stream(&nb()).expect("create_stream");
    let b = dev.alloc(LEN).expect("alloc");
    let (open, _) = hold(&a);
    null.reset();
    launch(&a, &b);
    drop(b);
    for _ in 1..3 * k {
        launch(&a, &c);
    }
    assert_eq!(mine(null, "cuLaunchHostFunc"), 0, "host function hand-over");
    assert!(
        mine(null, "cuEventQuery") >= 2,
        "the later hand-overs did not query the pending batch's event"
    );
    assert_eq!(
        null.calls("cuMemFree_v2"),
        0,
        "a buffer of held work was freed (its batch's event was not complete)"
    );
    open.send(()).expect("open the held callback");
    a.synchronize().expect("synchronize");
    assert_eq!(
        mine(null, "cuMemFree_v2"),
        1,
        "the synchronize did not release the pending batches"
    );
    drop(a);

    // 3. Fallback: held work and PENDING_MAX batches pending, the next hand-over (with `b`)
    // goes to a host function behind the work, which releases it once the work ran.
    let a = dev.create_stream(&nb()).expect("create_stream");
    let (open, _) = hold(&a);
    for _ in 0..PENDING_MAX * k {
        launch(&a, &c);
    }
    let b = dev.alloc(LEN).expect("alloc");
    null.reset();
    launch(&a, &b);
    drop(b);
    for _ in 1..k {
        launch(&a, &c);
    }
    assert_eq!(
        mine(null, "cuLaunchHostFunc"),
        1,
        "the hand-over past {PENDING_MAX} pending batches did not take the host-function \
         fallback"
    );
    assert_eq!(
        mine(null, "cuEventRecord"),
        0,
        "an event was recorded past the bound"
    );
    assert_eq!(
        null.calls("cuMemFree_v2"),
        0,
        "the fallback freed a buffer of held work"
    );
    open.send(()).expect("open the held callback");
    assert_eq!(
        wait_calls(null, "cuMemFree_v2", 1, Duration::from_secs(10)),
        1,
        "the fallback batch's buffer was not freed once the work ran"
    );
    a.synchronize().expect("synchronize");
    drop(a);

    // 4. Drop with batches pending behind held work: the drop returns while the work is still
    // held, frees nothing early, and the batches are freed once the work ran.
    let a = dev.create_stream(&nb()).expect("create_stream");
    let b = dev.alloc(LEN).expect("alloc");
    let (open, ran) = hold(&a);
    launch(&a, &b);
    drop(b);
    for _ in 1..2 * k + 10 {
        launch(&a, &c);
    }
    null.reset();
    drop(a);
    assert!(
        !ran.load(Ordering::SeqCst),
        "the drop waited for the held work"
    );
    assert_eq!(
        // A short window: an early free would come from the drop just made (on the reaper).
        wait_calls(null, "cuMemFree_v2", 1, Duration::from_millis(300)),
        0,
        "a dropped stream freed a buffer of its pending batches before the work ran"
    );
    open.send(()).expect("open the held callback");
    assert_eq!(
        wait_calls(null, "cuMemFree_v2", 1, Duration::from_secs(10)),
        1,
        "the pending batches of a dropped stream were not released once the work ran"
    );
    println!(
        "keep hand-overs: events, no host function; held work kept; fallback past \
         {PENDING_MAX} pending; drop with pending batches released after the work"
    );
}
