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
    // `keep_all`): every KEEP_FLUSH entries the list is handed over (`hand_over`), no host
    // function: see `expect_hand_overs`.
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
/// hand-overs (stream/keep.rs `hand_over`), besides its own calls `own`. Each hand-over records
/// one pooled event on the stream (`cuEventRecord`; the pool is warm, so none is created) and
/// allocates the list that stays, at full size (one allocation). Each but the window's first
/// (the synchronize before the window released the batches of the warm-up) finds a pending
/// batch: it queries its event (`cuEventQuery`, complete at once in the double, so one query
/// releases it and the queue is empty again) with the thread's capture mode exchanged to
/// RELAXED and back (two `cuThreadExchangeStreamCaptureMode`). No host function.
pub(crate) fn expect_hand_overs(r: &Row, own: &[(&str, u64)], flushes: u64) {
    let mut want = own.to_vec();
    want.extend([
        ("cuEventRecord", flushes),
        ("cuEventQuery", flushes - 1),
        ("cuThreadExchangeStreamCaptureMode", 2 * (flushes - 1)),
    ]);
    expect_calls(r, &want);
    assert_eq!(
        r.allocs, flushes,
        "{}: heap allocations over {N} operations ({flushes} keep-list hand-overs, one list \
         each)",
        r.label
    );
}
