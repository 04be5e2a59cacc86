//! The expected driver calls and allocations of each counted operation, read from the code's
//! paths (each comment says which).

use super::*;

/// What the code is meant to do, per operation (read from its paths; see each comment).
pub(crate) fn check_rows(rows: &[Row]) {
    let by = |label: &str| {
        rows.iter()
            .find(|r| r.label == label)
            .unwrap_or_else(|| panic!("no row {label}"))
    };
    // A launch is one `cuLaunchKernel` (module.rs `launch_ex` → ffi `launch_values`); the
    // context binding is cached per thread (no `cuCtxSetCurrent`), the layout was read at
    // `function()`, and up to 32 values and pointers live on the stack: no allocation.
    for label in [
        "launch_kernel: no parameters (user PTX)",
        "launch_kernel: u64, u32, f32 (scalars)",
        "launch builder: u64, u32, f32 (scalars)",
        "launch(Kernel::Delay(0)) (builtin module)",
    ] {
        let r = by(label);
        expect_calls(r, &[("cuLaunchKernel", N)]);
        assert_eq!(r.allocs, 0, "{label}: heap allocations over {N} launches");
    }
    // A buffer argument adds one entry to the stream's keep-alive list (stream/keep.rs
    // `keep_all`): every KEEP_FLUSH entries the list is handed over on the side stream
    // (`hand_over`): see `expect_hand_overs`.
    let keep_flushes = |entries_per_op: u64| N * entries_per_op / KEEP_FLUSH;
    for label in [
        "launch_kernel: buffer, u32, f32",
        "launch builder: buffer, u32, f32",
    ] {
        let r = by(label);
        expect_hand_overs(r, &[("cuLaunchKernel", N)], keep_flushes(1));
    }
    // Pageable typed copies: the copy and a `cuStreamSynchronize` (the slice is free again on
    // return), no allocation (stream/memory.rs `write_bytes_now` / `read_bytes_now`).
    for (label, copy) in [
        (
            "write_from_blocking 4 KiB (pageable)",
            "cuMemcpyHtoDAsync_v2",
        ),
        (
            "read_into_blocking 4 KiB (pageable)",
            "cuMemcpyDtoHAsync_v2",
        ),
    ] {
        let r = by(label);
        expect_calls(r, &[(copy, N), ("cuStreamSynchronize", N)]);
        assert_eq!(r.allocs, 0, "{label}: heap allocations over {N} copies");
    }
    // Page-locked copies: the copy only; the host buffer's fence event is recorded once, by the
    // next host access or use on another stream, not behind each copy on the same stream
    // (xstream-core hostmem.rs `fenced_copy`, the CUDA stream's fence anchor; the null_driver
    // `fence` module counts those records), and two keep-alive entries per copy (the device
    // buffer and the host span).
    for (label, copy) in [
        (
            "write_from_host 4 KiB (page-locked)",
            "cuMemcpyHtoDAsync_v2",
        ),
        ("read_into_host 4 KiB (page-locked)", "cuMemcpyDtoHAsync_v2"),
    ] {
        let r = by(label);
        expect_hand_overs(r, &[(copy, N)], keep_flushes(2));
    }
    // `record_event` (the trait's default): a new timing-disabled event, recorded, then
    // destroyed inline when dropped; one allocation per event (the `Arc` of its handle: the
    // flag translation is remembered per request and the flag report made only when read,
    // backends/cuda/src/flag_memo.rs).
    let r = by("record_event");
    expect_calls(
        r,
        &[
            ("cuEventCreate", N),
            ("cuEventRecord", N),
            ("cuEventDestroy_v2", N),
        ],
    );
    assert_eq!(r.allocs, N, "record_event: heap allocations");
    // `wait_stream`: one pooled event (event_pool.rs `order_after`), recorded on the other stream
    // and waited for here; the pool is warm, so nothing is created or allocated.
    let r = by("join (another stream)");
    expect_calls(r, &[("cuEventRecord", N), ("cuStreamWaitEvent", N)]);
    assert_eq!(r.allocs, 0, "join: heap allocations");
}

/// The calls and allocations of an operation whose window made `flushes` keep-list
/// hand-overs (stream/keep.rs `hand_over`), besides its own calls `own`. Each hand-over
/// records one pooled event on the stream (`cuEventRecord`; the pool is warm, so none is
/// created), makes the stream's side stream wait for it (`cuStreamWaitEvent`; the side stream
/// exists since the warm-up, so no `cuStreamCreate`) and launches the release's host function
/// there (`cuLaunchHostFunc`, stream/drop.rs `release_after`). No query, no capture-mode
/// exchange. Allocations: five per hand-over are fixed by the code and asserted as the floor:
/// the new list, the holder `Arc`, the boxed callback, the panic slot `Arc`, the callback
/// slot `Arc`. Above that, up to four more per hand-over are allowed, and they are not pinned
/// because they depend on when other threads run, which this test does not control (it uses
/// no timed waits): the device's pending-callback list grows (1) when the driver's callback
/// thread has not yet retired the earlier slots, and the fault watcher registers again (its
/// boxed check, its completion state, the poller queue's growth: 3) when it went idle between
/// two hand-overs.
pub(crate) fn expect_hand_overs(r: &Row, own: &[(&str, u64)], flushes: u64) {
    let mut want = own.to_vec();
    want.extend([
        ("cuEventRecord", flushes),
        ("cuStreamWaitEvent", flushes),
        ("cuLaunchHostFunc", flushes),
    ]);
    expect_calls(r, &want);
    let fixed = 5 * flushes;
    assert!(
        (fixed..=fixed + 4 * flushes).contains(&r.allocs),
        "{}: {} heap allocations over {N} operations ({flushes} keep-list hand-overs): \
         expected the {fixed} fixed ones (5 per hand-over) plus at most 4 per hand-over from \
         the pending-callback list and the fault watcher",
        r.label,
        r.allocs
    );
    println!(
        "{}: {} allocations = {fixed} fixed (5 per hand-over) + {} from the callback list / \
         watcher",
        r.label,
        r.allocs,
        r.allocs - fixed
    );
}
