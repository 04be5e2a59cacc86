//! Releases handed to the callback dispatcher from inside a host callback: they keep their
//! context alive until they ran, and a stream-ordered allocator's blocks are freed there too.

use super::*;
use std::sync::Arc;

/// The driver releases a function's objects make, and whether a release came before the
/// context's: a buffer's `cuMemFree`, an event's `cuEventDestroy`, a module's `cuModuleUnload`
/// and page-locked memory's `cuMemFreeHost`.
const RELEASES: [&str; 4] = [
    "cuMemFree_v2",
    "cuEventDestroy_v2",
    "cuModuleUnload",
    "cuMemFreeHost",
];

/// A device's buffer, event, module and page-locked memory dropped inside a host callback, while
/// the dispatcher (which runs their releases) is held up, and then the device's last handle
/// dropped on this thread, outside any callback: that drop tears the device state down and
/// releases the context (`cuDevicePrimaryCtxRelease`) at once, unless the dispatched releases
/// hold the context. They must: the double's call order has every release before the
/// context's release (on a GPU, a free in a released context is a use after destroy).
pub(crate) fn releases_outlive_their_device(null: &Null, s: &CudaStream) {
    let other = CudaBackend::open(0).expect("a second handle of device 0");
    let buf = other.alloc(LEN).expect("alloc");
    let ev = other
        .create_event(&xstream_core::EventDesc::new())
        .expect("create_event");
    let m = other
        .load_module(&ModuleSource::Ptx(PTX))
        .expect("load the test PTX");
    let pinned = other
        .alloc_pinned(LEN, &PinnedAllocDesc::new())
        .expect("alloc_pinned");
    let before: Vec<u64> = RELEASES.iter().map(|n| null.calls(n)).collect();
    let ctx_releases = null.calls("cuDevicePrimaryCtxRelease_v2");
    // Holds the dispatcher up: the releases queue behind this job.
    let (open, gate) = std::sync::mpsc::channel::<()>();
    xstream_core::callback::dispatch(Box::new(move || {
        let _ = gate.recv_timeout(Duration::from_secs(30));
    }));
    drop_in_a_host_callback(
        null,
        s,
        (buf, ev, m, pinned),
        "a buffer, an event, a module and page-locked memory",
    );
    drop(other);
    open.send(()).expect("the dispatcher waits");
    let guard = Duration::from_secs(10);
    for (name, n) in RELEASES.iter().zip(&before) {
        assert!(
            wait_calls(null, name, n + 1, guard) > *n,
            "{name}: the dispatched release never ran"
        );
    }
    assert!(
        wait_calls(
            null,
            "cuDevicePrimaryCtxRelease_v2",
            ctx_releases + 1,
            guard
        ) > ctx_releases,
        "the dropped device's context was never released"
    );
    let ctx_release = null.last_call("cuDevicePrimaryCtxRelease_v2");
    for name in RELEASES {
        let at = null.last_call(name);
        assert!(
            at < ctx_release,
            "{name} (call {at}) ran after the context's release (call {ctx_release}): the \
             dispatched release did not keep its context alive"
        );
    }
    println!("dispatched releases: each ran before its context's release");
}

/// A stream-ordered allocator's block given back, and the allocator dropped with a block still
/// allocated, each inside a host callback: both `cuMemFreeAsync` run on the dispatcher, none
/// from inside the host function, and neither block is leaked.
pub(crate) fn allocator_in_a_host_callback(
    null: &Null,
    dev: &xstream_cuda::CudaDevice,
    s: &CudaStream,
) {
    use xstream_core::Allocator;
    let on = dev.create_stream(&nb()).expect("create_stream");
    let a = dev.async_allocator(&on).expect("async_allocator");
    let (b1, _b2) = (
        a.alloc(LEN).expect("a block"),
        a.alloc(LEN).expect("a block"),
    );
    assert_eq!(a.live_blocks(), 2);
    let frees = null.calls("cuMemFreeAsync");
    let a2 = Arc::clone(&a);
    in_a_host_callback(null, s, move || a2.free(b1), "an allocator's free");
    let guard = Duration::from_secs(10);
    assert_eq!(
        wait_calls(null, "cuMemFreeAsync", frees + 1, guard),
        frees + 1,
        "a block given back inside a host callback was not freed"
    );
    assert_eq!(a.live_blocks(), 1);
    drop_in_a_host_callback(null, s, a, "an allocator holding a block");
    assert_eq!(
        wait_calls(null, "cuMemFreeAsync", frees + 2, guard),
        frees + 2,
        "the block of an allocator dropped inside a host callback was not freed"
    );
    on.synchronize().expect("synchronize");
    println!("allocator: a free and a drop inside host callbacks freed on the dispatcher");
}
