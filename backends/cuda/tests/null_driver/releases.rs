//! Where memory is released: buffers of a dropped stream (on the dropping thread when the work
//! is known complete, after it otherwise) and the raw-buffer round trip, against the double's
//! allocation table.

use super::*;

/// One launch of `f` (the `args3` kernel: a buffer, a `u32`, an `f32`) on `s` with `b`.
pub(crate) fn launch_with_buffer(
    s: &CudaStream,
    f: &xstream_cuda::CudaFunction,
    b: &xstream_cuda::CudaBuffer,
) {
    s.launch_kernel(
        f,
        &LaunchConfig::single(),
        &[KernelArg::Buffer(b), KernelArg::U32(1), KernelArg::F32(1.0)],
    )
    .expect("launch with a buffer")
}

/// Waits until every thread made `want` calls of `name` since the last reset, at most `guard`
/// (not a timing bound: a buffer's `cuMemFree` may run behind its stream's work, off the
/// dropping thread). Returns the count then.
pub(crate) fn wait_calls(null: &Null, name: &str, want: u64, guard: Duration) -> u64 {
    let end = Instant::now() + guard;
    loop {
        let n = null.calls(name);
        if n >= want || Instant::now() > end {
            return n;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What a dropped stream does with the buffers its work used (`backends/cuda/src/stream/drop.rs`):
/// when its work is known complete (here observed through an event only, so its keep-alive
/// list was never trimmed, as in the conformance check `record_event_orders`), the last
/// reference's `cuMemFree` runs on the dropping thread before `drop` returns, never later on
/// another thread (where it would wait for the whole device at a moment no caller controls);
/// while its work is still held, the drop frees nothing and returns, and the memory is freed
/// once the work ran. Behaviour of this crate's code only: the double is not a GPU.
pub(crate) fn dropped_stream_releases(
    null: &Null,
    dev: &xstream_cuda::CudaDevice,
    f: &xstream_cuda::CudaFunction,
) {
    use xstream_core::Event;
    let launch = |s: &CudaStream, b: &xstream_cuda::CudaBuffer| launch_with_buffer(s, f, b);

    // Completed work, seen through an event: freed inline, on this thread.
    let a = dev.create_stream(&nb()).expect("create_stream");
    let b = dev.alloc(LEN).expect("alloc");
    launch(&a, &b);
    let e = a.record_event().expect("record_event");
    drop(b);
    e.synchronize().expect("event synchronize");
    drop(e);
    null.reset();
    drop(a);
    assert_eq!(
        null.count(b"xnull_thread_calls\0", "cuMemFree_v2"),
        1,
        "a dropped stream whose work had completed left its buffer's cuMemFree to another \
         thread (it runs later, at a time the caller does not control)"
    );
    // This thread's calls only: another thread's late release of an earlier check's work
    // may launch a host function meanwhile (seen once on a loaded CI machine).
    assert_eq!(
        null.count(b"xnull_thread_calls\0", "cuLaunchHostFunc"),
        0,
        "a completed stream's release went through a host function"
    );

    // Work held by a host callback: the drop frees nothing and returns; the free follows the
    // work.
    let a = dev.create_stream(&nb()).expect("create_stream");
    let b = dev.alloc(LEN).expect("alloc");
    let (open, held) = std::sync::mpsc::channel::<()>();
    a.host_callback(move |_| {
        // A guard, not a timing bound: the test opens it below.
        let _ = held.recv_timeout(Duration::from_secs(30));
    })
    .expect("host_callback");
    launch(&a, &b);
    drop(b);
    null.reset();
    drop(a);
    assert_eq!(
        null.calls("cuMemFree_v2"),
        0,
        "a dropped stream freed a buffer its held work still uses"
    );
    open.send(()).expect("open the held callback");
    assert_eq!(
        wait_calls(null, "cuMemFree_v2", 1, Duration::from_secs(10)),
        1,
        "the buffer of a dropped stream was not freed once its work ran"
    );
    println!("dropped streams: completed work released inline, held work released after it ran");
}

/// An event's native handle (`backends/cuda/src/event.rs`): a plain event is destroyed by its
/// drop, on the dropping thread; one whose `completed` future is still polling outlives the
/// drop (the future's keeper holds it), so the future still resolves `Ok`, and it is destroyed
/// exactly once, after the future let go. Behaviour of this crate's code only.
pub(crate) fn event_outlives_its_future(null: &Null, dev: &xstream_cuda::CudaDevice) {
    use xstream_core::{Event, EventDesc, EventFlags};
    let desc = EventDesc::new().flags(EventFlags::DISABLE_TIMING);
    let s = dev.create_stream(&nb()).expect("create_stream");
    let e = dev.create_event(&desc).expect("create_event");
    e.record(&s).expect("record");
    null.reset();
    drop(e);
    assert_eq!(
        null.count(b"xnull_thread_calls\0", "cuEventDestroy_v2"),
        1,
        "a plain event was not destroyed by its drop on the dropping thread"
    );

    let (open, held) = std::sync::mpsc::channel::<()>();
    s.host_callback(move |_| {
        // A guard, not a timing bound: the test opens it below.
        let _ = held.recv_timeout(Duration::from_secs(30));
    })
    .expect("host_callback");
    let e = dev.create_event(&desc).expect("create_event");
    e.record(&s).expect("record behind the held callback");
    let fut = e.completed().expect("completed");
    null.reset();
    drop(e);
    assert_eq!(
        null.calls("cuEventDestroy_v2"),
        0,
        "an event was destroyed while its completed() future still polls it"
    );
    open.send(()).expect("open the held callback");
    fut.wait()
        .expect("the future of a dropped event resolves Ok (its native event is alive)");
    assert_eq!(
        wait_calls(null, "cuEventDestroy_v2", 1, Duration::from_secs(10)),
        1,
        "the event was not destroyed once its future let go"
    );
    s.synchronize().expect("synchronize");
    assert_eq!(null.calls("cuEventDestroy_v2"), 1, "destroyed twice");
    println!("events: a plain event destroyed by its drop; one with a pending future after it");
}

/// `Buffer::into_raw` / `from_raw` / `from_raw_borrowed` through the CUDA backend's own code
/// (`backends/cuda/src/memory.rs`), against the double's allocation table: the bytes survive
/// the round trip, `into_raw` frees nothing, a borrowed buffer never frees, the owner frees
/// exactly once, and the descriptors the driver can check (`cuMemGetAddressRange`) are refused
/// when wrong. Behaviour of this crate's code only: the double is not a GPU.
pub(crate) fn raw_buffers(null: &Null, dev: &xstream_cuda::CudaDevice, s: &CudaStream) {
    use xstream_core::{BackendKind, Error, RawAlloc, RawBuffer};
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
    let b = dev.alloc(1000).expect("alloc");
    s.write_from_blocking(&b, &data)
        .expect("write_from_blocking");
    null.reset();
    let raw = b.into_raw();
    s.synchronize().expect("synchronize");
    assert_eq!(
        raw.len, 1000,
        "the descriptor's length is not the requested one"
    );
    assert_eq!(raw.alloc, RawAlloc::Plain);
    assert_eq!(raw.backend, BackendKind::Cuda);
    assert_eq!(null.calls("cuMemFree_v2"), 0, "into_raw freed the memory");

    // Descriptors the backend must refuse (checked before anything is taken over).
    let refused = |r: xstream_core::Result<xstream_cuda::CudaBuffer>, what: &str| match r {
        Err(
            Error::InvalidArgument(_)
            | Error::WrongDevice(_)
            | Error::WrongBackend { .. }
            | Error::Unsupported { .. },
        ) => {}
        other => panic!("{what}: expected a refusal, got {other:?}"),
    };
    let bad = [
        (
            RawBuffer {
                backend: BackendKind::Host,
                ..raw
            },
            "another backend",
        ),
        (
            RawBuffer {
                ordinal: raw.ordinal + 1,
                ..raw
            },
            "another device",
        ),
        (RawBuffer { address: 0, ..raw }, "a null address"),
        (
            RawBuffer {
                address: raw.address + 16,
                len: 16,
                ..raw
            },
            "owned, not at the allocation's base",
        ),
        (
            RawBuffer {
                len: raw.len + (1 << 20),
                ..raw
            },
            "past the allocation's end",
        ),
        (
            RawBuffer {
                address: 0x10,
                len: 16,
                ..raw
            },
            "no allocation there",
        ),
    ];
    for (r, what) in bad {
        // SAFETY: each descriptor is refused before any memory is taken over (the assertion).
        refused(unsafe { xstream_cuda::CudaBuffer::from_raw(dev, r) }, what);
    }
    // A part of a live allocation may be borrowed; past its end may not.
    // SAFETY: the range lies inside the live allocation, which outlives the borrow.
    let part = unsafe {
        xstream_cuda::CudaBuffer::from_raw_borrowed(
            dev,
            RawBuffer {
                address: raw.address + 16,
                len: 16,
                ..raw
            },
        )
    }
    .expect("borrow a part of a live allocation");
    assert_eq!(part.len(), 16);
    // SAFETY: refused before anything is taken over (the assertion).
    refused(
        unsafe {
            xstream_cuda::CudaBuffer::from_raw_borrowed(
                dev,
                RawBuffer {
                    len: raw.len + (1 << 20),
                    ..raw
                },
            )
        },
        "borrowed past the allocation's end",
    );

    // SAFETY: `raw` came from `into_raw` of a live plain allocation of this device; nothing
    // else frees it.
    let back = unsafe { xstream_cuda::CudaBuffer::from_raw(dev, raw) }.expect("from_raw");
    // SAFETY: the same allocation, owned by `back`, which outlives `alias`.
    let alias = unsafe { xstream_cuda::CudaBuffer::from_raw_borrowed(dev, raw) }
        .expect("from_raw_borrowed");
    let mut got = vec![0u8; 1000];
    s.read_into_blocking(&alias, &mut got)
        .expect("read_into_blocking");
    assert_eq!(got, data, "the bytes did not survive into_raw / from_raw");
    s.memset(&back, 0, 8, 0xee)
        .expect("memset through the owner");
    s.read_into_blocking(&alias, &mut got)
        .expect("read_into_blocking");
    assert_eq!(
        &got[..8],
        &[0xee; 8],
        "the alias does not see the owner's write"
    );
    drop(alias);
    drop(part);
    s.synchronize().expect("synchronize");
    assert_eq!(
        // A short window: a free would come from the drops just made (the owner's, below,
        // takes the same path and is waited for up to 10 s).
        wait_calls(null, "cuMemFree_v2", 1, Duration::from_millis(300)),
        0,
        "a borrowed buffer freed its owner's memory"
    );
    drop(back);
    s.synchronize().expect("synchronize");
    assert_eq!(
        wait_calls(null, "cuMemFree_v2", 1, Duration::from_secs(10)),
        1,
        "the buffer taken back by from_raw was not freed exactly once"
    );
    println!("raw buffers: round trip, refusals and frees as intended");
}

/// Drops `value` inside a host callback on `s` and waits for the callback: then no driver call
/// was made from inside the host function (`what` names the value in the failure).
pub(crate) fn drop_in_a_host_callback<T: Send + 'static>(
    null: &Null,
    s: &CudaStream,
    value: T,
    what: &str,
) {
    in_a_host_callback(null, s, move || drop(value), what);
}

/// Runs `f` inside a host callback on `s` and waits for the callback: then no driver call was
/// made from inside the host function (`what` names `f` in the failure).
pub(crate) fn in_a_host_callback(
    null: &Null,
    s: &CudaStream,
    f: impl FnOnce() + Send + 'static,
    what: &str,
) {
    let before = null.host_fn_calls();
    let (tx, rx) = std::sync::mpsc::channel();
    s.host_callback(move |_| {
        f();
        let _ = tx.send(());
    })
    .expect("host_callback");
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the host callback ran");
    s.synchronize().expect("synchronize");
    assert_eq!(
        null.host_fn_calls(),
        before,
        "{what} dropped in a host callback called the driver from inside the host function"
    );
}

/// A host callback whose closure holds the last reference to a device (another handle of the
/// same GPU): the device state's teardown (`cuStreamDestroy` of its sentinel, `cuEventDestroy`
/// of its pooled events, the module unload and the context's release) must not run on the
/// driver's callback thread, where CUDA permits no driver call; it runs on the dispatcher.
/// The double counts every driver call made from inside a host function.
pub(crate) fn device_dropped_in_a_host_callback(null: &Null, s: &CudaStream) {
    let other = CudaBackend::open(0).expect("a second handle of device 0");
    let destroys = null.calls("cuStreamDestroy_v2");
    drop_in_a_host_callback(null, s, other, "a device's last handle");
    let n = wait_calls(
        null,
        "cuStreamDestroy_v2",
        destroys + 1,
        Duration::from_secs(10),
    );
    assert!(
        n > destroys,
        "the dropped device's sentinel stream was never destroyed"
    );
}

/// A reserved range and a physical allocation dropped inside a host callback: their releases
/// (`cuMemAddressFree`, `cuMemRelease`) run on the dispatcher, none from inside the host
/// function.
pub(crate) fn vmm_dropped_in_a_host_callback(
    null: &Null,
    dev: &xstream_cuda::CudaDevice,
    s: &CudaStream,
) {
    use xstream_core::VirtualMemory;
    let g = dev.granularity().expect("granularity").minimum;
    let range = dev.reserve(g).expect("reserve");
    let p = dev.create_physical(g).expect("create_physical");
    let (frees, releases) = (null.calls("cuMemAddressFree"), null.calls("cuMemRelease"));
    drop_in_a_host_callback(
        null,
        s,
        (range, p),
        "a reserved range and a physical allocation",
    );
    let guard = Duration::from_secs(10);
    assert!(wait_calls(null, "cuMemAddressFree", frees + 1, guard) > frees);
    assert!(wait_calls(null, "cuMemRelease", releases + 1, guard) > releases);
}
