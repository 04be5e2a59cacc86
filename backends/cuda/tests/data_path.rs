//! CUDA data path: page-locked host buffers (`cuMemHostAlloc`, `cuMemHostRegister`),
//! asynchronous copies without staging, stream-ordered allocation (`cuMemAllocAsync` /
//! `cuMemFreeAsync`) and their bad inputs. Every test skips (prints `SKIP: <test>: <reason>`)
//! without a CUDA device. Run with `--test-threads=1` on the GPU machine.

use xstream_core::{
    lcg_reference, Backend, Buffer, CaptureErrorKind, CaptureMode, Device, Error, Kernel,
    PinnedAllocDesc, PinnedFlags, Stream, StreamDesc, StreamFlags, TranslationPolicy,
};
use xstream_cuda::{CudaBackend, CudaDevice};

fn device(test: &str) -> Option<CudaDevice> {
    if let Err(e) = CudaBackend::availability() {
        xstream_conformance::report_skip(test, &e);
        return None;
    }
    Some(CudaBackend::open(0).expect("CUDA is available but open(0) failed"))
}

fn nb() -> StreamDesc {
    StreamDesc::new().flags(StreamFlags::NON_BLOCKING)
}

#[test]
fn page_locked_roundtrip_through_a_kernel() {
    let Some(d) = device("page_locked_roundtrip_through_a_kernel") else {
        return;
    };
    let s = d.create_stream(&nb()).unwrap();
    const LEN: usize = 1 << 20;
    for flags in [
        PinnedFlags::empty(),
        PinnedFlags::PORTABLE,
        PinnedFlags::DEVICE_MAPPED,
        PinnedFlags::WRITE_COMBINED,
    ] {
        let mut src = d
            .alloc_pinned(LEN, &PinnedAllocDesc::new().flags(flags))
            .unwrap();
        assert!(src.is_page_locked());
        assert_eq!(src.flags(), flags);
        assert!(src.report().dropped.is_empty());
        for (i, b) in src.as_mut_slice().unwrap().iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        let mut dst = d.alloc_pinned(LEN, &PinnedAllocDesc::new()).unwrap();
        let buf = d.alloc(LEN).unwrap();
        s.copy_to_device(&src, 0, &buf, 0, LEN).unwrap();
        s.launch_builtin(Kernel::Lcg {
            buf: &buf,
            rounds: 5,
        })
        .unwrap();
        s.copy_to_host(&buf, 0, &mut dst, 0, LEN).unwrap();
        // No synchronize: as_slice waits for the copy through the buffer's fence.
        let mut want = src.as_slice().unwrap().to_vec();
        lcg_reference(&mut want, 5);
        assert!(
            dst.as_slice().unwrap() == want.as_slice(),
            "flags {flags:?}"
        );
    }
}

#[test]
fn registered_memory_is_copied_without_staging() {
    let Some(d) = device("registered_memory_is_copied_without_staging") else {
        return;
    };
    let s = d.create_stream(&nb()).unwrap();
    let data: Vec<u8> = (0..65_536u32).map(|i| (i % 251) as u8).collect();
    let want = data.clone();
    let reg = d.register_host(data, &PinnedAllocDesc::new()).unwrap();
    let buf = d.alloc(65_536).unwrap();
    s.copy_to_device(&reg, 0, &buf, 0, 65_536).unwrap();
    let rb = s.read(&buf, 0, 65_536).unwrap();
    s.synchronize().unwrap();
    assert_eq!(rb.take().unwrap(), want);
    // Registration cannot make memory write-combined: strict refuses, best effort reports.
    let e = d
        .register_host(
            vec![0u8; 4096],
            &PinnedAllocDesc::new().flags(PinnedFlags::WRITE_COMBINED),
        )
        .unwrap_err();
    assert!(matches!(
        e,
        Error::UnsupportedFlag {
            flag: "WRITE_COMBINED",
            ..
        }
    ));
    let r = d
        .register_host(
            vec![0u8; 4096],
            &PinnedAllocDesc::new()
                .flags(PinnedFlags::WRITE_COMBINED)
                .policy(TranslationPolicy::BestEffort),
        )
        .unwrap();
    assert_eq!(r.report().dropped.len(), 1);
}

#[test]
fn copies_on_two_streams_are_ordered_by_the_fence() {
    let Some(d) = device("copies_on_two_streams_are_ordered_by_the_fence") else {
        return;
    };
    let (a, b) = (
        d.create_stream(&nb()).unwrap(),
        d.create_stream(&nb()).unwrap(),
    );
    const LEN: usize = 4 << 20;
    let mut h = d.alloc_pinned(LEN, &PinnedAllocDesc::new()).unwrap();
    h.as_mut_slice().unwrap().fill(9);
    let x = d.alloc(LEN).unwrap();
    // Stream a: a long kernel, then the copy into `h` (overwrites it with the LCG of zeros).
    a.launch_builtin(Kernel::Delay(std::time::Duration::from_millis(20)))
        .unwrap();
    a.copy_to_host(&x, 0, &mut h, 0, LEN).unwrap();
    // Stream b reads `h`: the fence makes it wait for a's copy, so it sees zeros, not nines.
    let y = d.alloc(LEN).unwrap();
    b.copy_to_device(&h, 0, &y, 0, LEN).unwrap();
    let rb = b.read(&y, 0, 16).unwrap();
    b.synchronize().unwrap();
    assert_eq!(rb.take().unwrap(), vec![0u8; 16]);
}

#[test]
fn bad_copies_are_clear_errors() {
    let Some(d) = device("bad_copies_are_clear_errors") else {
        return;
    };
    let s = d.create_stream(&nb()).unwrap();
    let mut h = d.alloc_pinned(1024, &PinnedAllocDesc::new()).unwrap();
    let buf = d.alloc(512).unwrap();
    let inv = |r: xstream_core::Result<()>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(inv(s.copy_to_device(&h, 0, &buf, 0, 1024)), "device side");
    assert!(inv(s.copy_to_device(&h, 1000, &buf, 0, 100)), "host side");
    assert!(inv(s.copy_to_host(&buf, 500, &mut h, 0, 13)), "source");
    assert!(
        inv(s.copy_to_host(&buf, 0, &mut h, usize::MAX, 2)),
        "overflow"
    );
    // Zero bytes: a no-op (docs/semantics.md, zero-length buffers and copies).
    s.copy_to_device(&h, 0, &buf, 0, 0)
        .expect("empty copy is a no-op");
    // A zero-length host buffer: empty, and copies of it are no-ops.
    let mut empty = d.alloc_pinned(0, &PinnedAllocDesc::new()).unwrap();
    assert_eq!(empty.len(), 0);
    assert!(empty.is_empty() && empty.as_slice().unwrap().is_empty());
    s.copy_to_device(&empty, 0, &buf, 0, 0).unwrap();
    s.copy_to_host(&buf, 0, &mut empty, 0, 0).unwrap();
    assert!(matches!(
        s.copy_to_device(&empty, 0, &buf, 0, 1),
        Err(Error::InvalidArgument(_))
    ));
    // Inside a capture: refused (not yet), the capture is left usable.
    s.begin_capture(CaptureMode::Global).unwrap();
    assert!(matches!(
        s.copy_to_device(&h, 0, &buf, 0, 16),
        Err(Error::Unsupported { .. })
    ));
    s.end_capture().unwrap();
    s.synchronize().unwrap();
}

/// Copies whose fence was not yet recorded (the stream's `FenceAnchor`, xstream-core
/// `hostmem`), then a capture begun on their stream: host access cannot record behind them
/// there (it would be a graph node), so it waits for the mark the stream recorded before the
/// capture (backends/cuda/src/stream/fence.rs), sees the copied bytes, and leaves the capture
/// usable.
#[test]
fn host_access_waits_for_copies_made_before_a_capture() {
    let Some(d) = device("host_access_waits_for_copies_made_before_a_capture") else {
        return;
    };
    let s = d.create_stream(&nb()).unwrap();
    const LEN: usize = 1 << 20;
    let buf = d.alloc(LEN).unwrap();
    let mut h = d.alloc_pinned(LEN, &PinnedAllocDesc::new()).unwrap();
    s.write_from_blocking(&buf, &vec![0x5au8; LEN][..]).unwrap();
    // The copy stays queued behind a 50 ms kernel while the capture begins.
    s.launch_builtin(Kernel::Delay(std::time::Duration::from_millis(50)))
        .unwrap();
    s.read_into_host(&buf, &mut h, 0).unwrap();
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    let bytes = h.as_slice().expect("host access during the capture");
    assert!(
        bytes.iter().all(|&b| b == 0x5a),
        "host access did not wait for the copy"
    );
    assert_eq!(s.capture_status(), xstream_core::CaptureStatus::Active);
    s.end_capture().expect("the capture stays usable");
    s.synchronize().unwrap();
}

#[test]
fn stream_ordered_buffers_work_across_streams() {
    let Some(d) = device("stream_ordered_buffers_work_across_streams") else {
        return;
    };
    let (a, b) = (
        d.create_stream(&nb()).unwrap(),
        d.create_stream(&nb()).unwrap(),
    );
    d.set_pool_release_threshold(64 << 20).unwrap();
    const LEN: usize = 1 << 20;
    let mut out = d.alloc_pinned(LEN, &PinnedAllocDesc::new()).unwrap();
    for round in 0..50u8 {
        let x = a.alloc_async(LEN).unwrap();
        assert!(x.is_stream_ordered());
        assert_eq!(x.len(), LEN);
        a.memset(&x, 0, LEN, round).unwrap();
        // b uses x after a's memset; the free on a must wait for b's copy (record_stream
        // rule, tracked by the buffer).
        let ev = d.create_event(&xstream_core::EventDesc::new()).unwrap();
        xstream_core::Event::record(&ev, &a).unwrap();
        b.wait_event(&ev).unwrap();
        b.launch_builtin(Kernel::Delay(std::time::Duration::from_millis(1)))
            .unwrap();
        b.copy_to_host(&x, 0, &mut out, 0, LEN).unwrap();
        a.free_async(x).unwrap();
        // A new block on a may reuse x's memory: it must not disturb b's copy.
        let y = a.alloc_async(LEN).unwrap();
        a.memset(&y, 0, LEN, 0xEE).unwrap();
        a.free_async(y).unwrap();
        assert!(
            out.as_slice().unwrap().iter().all(|&v| v == round),
            "round {round}"
        );
    }
    a.synchronize().unwrap();
    b.synchronize().unwrap();
    // Dropping without free_async frees in stream order on the owner stream.
    let z = a.alloc_async(LEN).unwrap();
    a.memset(&z, 0, LEN, 1).unwrap();
    drop(z);
    a.synchronize().unwrap();
    // Zero bytes: a zero-length buffer (docs/semantics.md).
    let empty = a.alloc_async(0).expect("zero-length buffer");
    assert_eq!(xstream_core::Buffer::len(&empty), 0);
    a.free_async(empty)
        .expect("free_async of a zero-length buffer");
}

#[test]
fn stream_ordered_buffer_in_a_capture_invalidates_it() {
    let Some(d) = device("stream_ordered_buffer_in_a_capture_invalidates_it") else {
        return;
    };
    let s = d.create_stream(&nb()).unwrap();
    let x = s.alloc_async(4096).unwrap();
    s.synchronize().unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    let _ = s.memset(&x, 0, 4096, 1);
    let e = s.end_capture().unwrap_err();
    assert!(
        matches!(
            e,
            Error::Capture {
                kind: CaptureErrorKind::Invalidated,
                ..
            }
        ),
        "{e}"
    );
    s.free_async(x).unwrap();
    s.synchronize().unwrap();
}

#[test]
fn many_host_buffer_and_async_allocation_cycles_run_clean() {
    let Some(d) = device("many_host_buffer_and_async_allocation_cycles_run_clean") else {
        return;
    };
    let s = d.create_stream(&nb()).unwrap();
    let buf = d.alloc(4096).unwrap();
    // 2,000 cycles here (the 100,000-cycle figure is in the memory bench): every cycle
    // allocates, copies and frees; nothing may stay behind.
    for _ in 0..2000 {
        let h = d.alloc_pinned(4096, &PinnedAllocDesc::new()).unwrap();
        s.copy_to_device(&h, 0, &buf, 0, 4096).unwrap();
        let x = s.alloc_async(4096).unwrap();
        s.copy(&buf, 0, &x, 0, 4096).unwrap();
        s.free_async(x).unwrap();
    }
    s.synchronize().unwrap();
}

fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

#[test]
fn memory_is_flat_after_100k_host_buffer_and_async_allocation_cycles() {
    let Some(d) = device("memory_is_flat_after_100k_host_buffer_and_async_allocation_cycles")
    else {
        return;
    };
    let s = d.create_stream(&nb()).unwrap();
    let buf = d.alloc(4096).unwrap();
    let cycle = |i: usize| {
        let h = d.alloc_pinned(4096, &PinnedAllocDesc::new()).unwrap();
        s.copy_to_device(&h, 0, &buf, 0, 4096).unwrap();
        let x = s.alloc_async(4096).unwrap();
        s.copy(&buf, 0, &x, 0, 4096).unwrap();
        s.free_async(x).unwrap();
        if i.is_multiple_of(256) {
            s.synchronize().unwrap();
        }
    };
    for i in 0..1000 {
        cycle(i);
    }
    s.synchronize().unwrap();
    let before = rss_bytes();
    for i in 0..100_000 {
        cycle(i);
    }
    s.synchronize().unwrap();
    let after = rss_bytes();
    let delta = after as f64 - before as f64;
    println!(
        "memory cuda 100k (alloc_pinned + copy + drop, alloc_async + free_async): rss {:.2} -> {:.2} MiB ({:+.1} KiB)",
        before as f64 / 1048576.0,
        after as f64 / 1048576.0,
        delta / 1024.0
    );
    assert!(delta.abs() <= 4.0 * 1048576.0, "RSS grew by {delta} bytes");
}

/// Issue 21: the driver's allocation under an odd-length buffer is rounded up to the granule
/// (`cuMemGetAddressRange`), plain and stream-ordered; `len()` and bounds checks stay exact.
#[test]
fn allocations_are_rounded_to_the_granule() {
    let Some(d) = device("allocations_are_rounded_to_the_granule") else {
        return;
    };
    // An f16 buffer of 1031 elements: the size NCCL's LL kernels over-read by 2 bytes.
    const ODD: usize = 2062;
    let want = xstream_core::alloc_size(ODD).unwrap();
    assert_eq!(want, 2560);
    let s = d.create_stream(&nb()).unwrap();
    let a = d.alloc(ODD).unwrap();
    assert_eq!(a.len(), ODD);
    let (base, size) = a.address_range().unwrap();
    assert_eq!(
        base,
        a.device_address(),
        "cuMemAlloc: the buffer starts its allocation"
    );
    // The driver reports the size it was asked for (at least: it may round further itself);
    // before issue 21 that was 2062, which is what memcheck saw NCCL read past.
    println!("cuMemGetAddressRange: {size} bytes under a {ODD}-byte buffer");
    assert!(
        size >= want,
        "cuMemAlloc: the driver holds {size} bytes, less than the rounded {want}"
    );
    // Bounds checks use `len`.
    let b = d.alloc(ODD).unwrap();
    s.write(&a, 0, vec![3; ODD]).unwrap();
    s.copy(&a, 0, &b, 0, ODD).unwrap();
    let whole = s.read(&b, 0, ODD).unwrap();
    assert!(matches!(
        s.copy(&a, 0, &b, 0, ODD + 1),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.read(&a, 0, ODD + 1),
        Err(Error::InvalidArgument(_))
    ));
    s.synchronize().unwrap();
    assert_eq!(whole.take().unwrap(), vec![3; ODD]);
    // Stream-ordered: the rounded block lies inside the range the driver reports for it.
    let o = s.alloc_async(ODD).unwrap();
    assert_eq!(o.len(), ODD);
    let (base, size) = o.address_range().unwrap();
    let p = o.device_address();
    assert!(
        base <= p && p + want as u64 <= base + size as u64,
        "cuMemAllocAsync: [{p:#x}, +{want}) not inside [{base:#x}, +{size})"
    );
    assert!(matches!(
        s.copy(&a, 0, &o, 0, ODD + 1),
        Err(Error::InvalidArgument(_))
    ));
    s.free_async(o).unwrap();
    s.synchronize().unwrap();
}

/// Streams and buffers dropped while their work is pending are torn down on xstream's
/// background threads (`cuStreamDestroy`, `cuMemFree`, `cuMemFreeHost` on the reaper, after
/// the work completed) while this thread captures, in RELAXED and in GLOBAL mode: each capture
/// must survive, since the background threads switch themselves to RELAXED. Under
/// compute-sanitizer memcheck a capture began while an earlier test's teardown was still
/// running ended invalidated (GPU runs 30 and 31, `docs/gpu-runs/2026-11-28-exit-bisect/`);
/// this makes the overlap on purpose.
#[test]
fn captures_survive_teardown_on_background_threads() {
    let Some(d) = device("captures_survive_teardown_on_background_threads") else {
        return;
    };
    let s = d.create_stream(&nb()).unwrap();
    const LEN: usize = 1 << 20;
    for mode in [CaptureMode::Relaxed, CaptureMode::Global] {
        {
            let a = d.create_stream(&nb()).unwrap();
            a.launch_builtin(Kernel::Delay(std::time::Duration::from_millis(30)))
                .unwrap();
            let mut held = Vec::new();
            for _ in 0..8 {
                let x = d.alloc(LEN).unwrap();
                let mut h = d.alloc_pinned(LEN, &PinnedAllocDesc::new()).unwrap();
                a.copy_to_host(&x, 0, &mut h, 0, LEN).unwrap();
                held.push((x, h));
            }
            // `a` and every buffer go here, their work still pending behind the delay.
        }
        s.begin_capture(mode).unwrap();
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(150) {
            s.launch_builtin(Kernel::Delay(std::time::Duration::ZERO))
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let graph = s.end_capture();
        assert!(
            graph.is_ok(),
            "{mode:?} capture during background teardown: {:?}",
            graph.err()
        );
        s.synchronize().unwrap();
    }
}
