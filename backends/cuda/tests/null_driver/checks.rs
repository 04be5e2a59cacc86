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
    // A launch is one `cuLaunchKernel` (module.rs `launch_ex` → ffi `launch_kernel`); the
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
    // destroyed inline when dropped; no allocation per event (the handle is inline, an `Arc`
    // keeper only made by `completed` or for a cudarc event, backends/cuda/src/event.rs; the
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
    assert_eq!(r.allocs, 0, "record_event: heap allocations");
    // `wait_stream`: one pooled event (event_pool.rs `order_after`), recorded on the other stream
    // and waited for here; the pool is warm, so nothing is created or allocated.
    let r = by("join (another stream)");
    expect_calls(r, &[("cuEventRecord", N), ("cuStreamWaitEvent", N)]);
    assert_eq!(r.allocs, 0, "join: heap allocations");
    // A stream never used is destroyed inline at its drop (stream/drop.rs): the create and the
    // destroy, no other driver call (no id, flag or priority read-back: stream/create.rs), and
    // one allocation, the handle's `Arc` (the state is made by the first operation that needs
    // it, `LazyState` in stream.rs; the flag report when first read, flag_memo.rs).
    let r = by("create_stream (NON_BLOCKING) + drop");
    expect_calls(r, &[("cuStreamCreate", N), ("cuStreamDestroy_v2", N)]);
    assert_eq!(r.allocs, N, "create_stream + drop: heap allocations");
    // A stream-ordered buffer freed on its own stream: the allocation and the free, nothing
    // to order (no other user: memory.rs `free_on`, event_pool.rs `order_after`), and no
    // allocation (the buffer is inline, its use set empty).
    let r = by("alloc_async 4 KiB + free_async (default pool)");
    expect_calls(r, &[("cuMemAllocAsync", N), ("cuMemFreeAsync", N)]);
    assert_eq!(r.allocs, 0, "alloc_async + free_async: heap allocations");
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

/// Every wrong argument list is refused with `InvalidArgument` before the driver is called,
/// through `launch_kernel` and the builder, against the driver's layout (`args3`: `.u64`,
/// `.u32`, `.f32`) and against declared kinds (a `u64` where a buffer is declared has the
/// right size and is still refused); a right list launches afterwards.
pub(crate) fn wrong_arguments_are_refused(
    null: &Null,
    s: &CudaStream,
    args3: &xstream_cuda::CudaFunction,
    buf: &xstream_cuda::CudaBuffer,
) {
    use xstream_core::{Error, ParamKind};
    let single = LaunchConfig::single();
    let before = null.calls("cuLaunchKernel");
    let refused = |r: xstream_core::Result<()>, what: &str| {
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{what}: {r:?}");
    };
    let bad: [(&str, Vec<KernelArg<'_, xstream_cuda::CudaBuffer>>); 5] = [
        ("none", vec![]),
        ("too few", vec![KernelArg::U64(1), KernelArg::U32(2)]),
        (
            "too many",
            vec![
                KernelArg::Buffer(buf),
                KernelArg::U32(2),
                KernelArg::F32(0.5),
                KernelArg::U32(3),
            ],
        ),
        (
            "a wrong size first",
            vec![KernelArg::U32(1), KernelArg::U32(2), KernelArg::F32(0.5)],
        ),
        (
            "a wrong size last",
            vec![
                KernelArg::Buffer(buf),
                KernelArg::U32(2),
                KernelArg::F64(0.5),
            ],
        ),
    ];
    for (what, args) in &bad {
        refused(s.launch_kernel(args3, &single, args), what);
        let mut b = s.launch_builder(args3);
        for a in args {
            b.arg(*a);
        }
        refused(b.launch(), what);
    }
    let declared = args3
        .with_params(&[ParamKind::Buffer, ParamKind::U32, ParamKind::F32])
        .expect("with_params");
    let same_size = [
        KernelArg::U64(xstream_core::Buffer::device_address(buf)),
        KernelArg::U32(2),
        KernelArg::F32(0.5),
    ];
    refused(
        s.launch_kernel(&declared, &single, &same_size),
        "a u64 for a declared buffer",
    );
    assert_eq!(
        null.calls("cuLaunchKernel"),
        before,
        "a refused launch reached the driver"
    );
    let right = [
        KernelArg::Buffer(buf),
        KernelArg::U32(2),
        KernelArg::F32(0.5),
    ];
    s.launch_kernel(&declared, &single, &right)
        .expect("the declared kinds");
    s.launch_kernel(args3, &single, &same_size)
        .expect("the driver's layout");
    assert_eq!(null.calls("cuLaunchKernel"), before + 2);
    s.synchronize().expect("synchronize");
}

/// A stream's state is made by its first operation (`LazyState` in backends/cuda/src/stream.rs):
/// what a stream answers does not depend on whether it was made yet. The priority of a new
/// stream (no state yet) and of the same stream after a synchronize (state made); a stream
/// whose state was made (by formatting it) but that never had work is still destroyed on the
/// dropping thread (one `cuStreamDestroy_v2` here, the reaper not involved), and one with a kept buffer
/// is not (its keep list goes to the reaper).
pub(crate) fn lazy_stream_state(null: &Null, dev: &xstream_cuda::CudaDevice) {
    use xstream_core::Priority;
    let hi = dev
        .create_stream(&nb().priority(Priority::Highest))
        .expect("create_stream(Highest)");
    let before = hi.priority();
    assert_eq!(before, -5, "Highest on the null driver's range 0..=-5");
    hi.synchronize().expect("synchronize");
    assert_eq!(
        hi.priority(),
        before,
        "the priority moved when the state was made"
    );
    assert_eq!(hi.report().priority.native, before);
    drop(hi);
    let s = dev.create_stream(&nb()).expect("create_stream");
    // Formatting reads the capture state (the state is made), not the handle.
    assert!(format!("{s:?}").contains("capture"));
    null.reset();
    drop(s);
    assert_eq!(
        null.count(b"xnull_thread_calls\0", "cuStreamDestroy_v2"),
        1,
        "a stream without work was not destroyed on the dropping thread"
    );
    let s = dev.create_stream(&nb()).expect("create_stream");
    let buf = dev.alloc(LEN).expect("alloc");
    s.memset(&buf, 0, LEN, 0).expect("memset");
    null.reset();
    drop(s);
    assert_eq!(
        null.count(b"xnull_thread_calls\0", "cuStreamDestroy_v2"),
        0,
        "a stream with work was destroyed on the dropping thread"
    );
    println!("lazy stream state: priority and inline destroy as before");
}
