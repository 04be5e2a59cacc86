//! CUDA peer copies (`cuDeviceCanAccessPeer`, `cuCtxEnablePeerAccess`,
//! `cuCtxDisablePeerAccess`, `cuMemcpyPeerAsync`). Tests skip (printing `SKIP: <test>:
//! <reason>`) without a CUDA device, and those that need two devices skip without a second one
//! that the first can access. Run with `--test-threads=1` on the GPU machine.

use xstream_conformance::{report_line, report_skip, run, Env};
use xstream_core::{Backend, Capabilities, Device, Error, Stream, StreamDesc, StreamFlags};
use xstream_cuda::{CudaBackend, CudaDevice};

fn device(test: &str) -> Option<CudaDevice> {
    if let Err(e) = CudaBackend::availability() {
        report_skip(test, &e);
        return None;
    }
    Some(CudaBackend::open(0).expect("CUDA is available but open(0) failed"))
}

/// Device 0 and a peer it can access, or `None` after printing why not.
fn two_devices(test: &str) -> Option<(CudaDevice, CudaDevice)> {
    let d0 = device(test)?;
    let n = CudaBackend::device_count().expect("cuDeviceGetCount");
    if n < 2 {
        report_skip(test, &format!("{n} CUDA device(s); a peer copy needs two"));
        return None;
    }
    let d1 = CudaBackend::open(1).expect("open(1)");
    if !d0.can_access_peer(&d1).expect("cuDeviceCanAccessPeer") {
        report_skip(
            test,
            &"CUDA device 0 cannot access device 1 (cuDeviceCanAccessPeer)",
        );
        return None;
    }
    Some((d0, d1))
}

fn nb() -> StreamDesc {
    StreamDesc::new().flags(StreamFlags::NON_BLOCKING)
}

/// The generic `peer_copy` conformance check between devices 0 and 1.
#[test]
fn peer_copy_conformance() {
    let Some((d0, _)) = two_devices("peer_copy_conformance") else {
        return;
    };
    assert!(
        d0.info().capabilities.contains(Capabilities::PEER_COPY),
        "device 0 can access device 1 but lacks PEER_COPY"
    );
    let env = Env::<CudaBackend> {
        device: d0,
        isolated: None,
    };
    let sum = run(&env, Some("peer_copy"), report_line);
    assert_eq!((sum.passed, sum.failed), (1, 0), "{sum:?}");
}

/// The stream keeps both buffers of a queued peer copy alive: the handles are dropped right
/// after enqueueing, behind a slow kernel, and the bytes still arrive.
#[test]
fn peer_copy_keeps_buffers_alive() {
    let Some((d0, d1)) = two_devices("peer_copy_keeps_buffers_alive") else {
        return;
    };
    d0.enable_peer_access(&d1).unwrap();
    const LEN: usize = 8 << 20;
    let s = d0.create_stream(&nb()).unwrap();
    let src = d0.alloc(LEN).unwrap();
    let dst = d1.alloc(LEN).unwrap();
    let back = d0.alloc(LEN).unwrap();
    let data: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8).collect();
    s.write(&src, 0, data.clone()).unwrap();
    s.copy_peer(&src, 0, &dst, 0, LEN).unwrap();
    drop(src);
    s.copy_peer(&dst, 0, &back, 0, LEN).unwrap();
    drop(dst);
    let rb = s.read(&back, 0, LEN).unwrap();
    s.synchronize().unwrap();
    assert!(rb.take().unwrap() == data, "bytes changed on the way");
    // A stream-ordered buffer of the other device is refused (its free is ordered only with
    // its own device's streams).
    if d1
        .info()
        .capabilities
        .contains(Capabilities::STREAM_ORDERED_ALLOC)
    {
        let s1 = d1.create_stream(&nb()).unwrap();
        let ordered = s1.alloc_async(64).unwrap();
        assert!(matches!(
            s.copy_peer(&back, 0, &ordered, 0, 64),
            Err(Error::Unsupported { .. })
        ));
        s1.free_async(ordered).unwrap();
        s1.synchronize().unwrap();
    }
    d0.disable_peer_access(&d1).unwrap();
}

/// On one device: a device is not its own peer, and `copy_peer` with two buffers of the
/// stream's device is the ordinary copy.
#[test]
fn same_device_peer_calls() {
    let Some(d) = device("same_device_peer_calls") else {
        return;
    };
    assert!(!d.can_access_peer(&d).unwrap());
    assert!(matches!(
        d.enable_peer_access(&d),
        Err(Error::InvalidArgument(_))
    ));
    let s = d.create_stream(&nb()).unwrap();
    let a = d.alloc(64).unwrap();
    let b = d.alloc(64).unwrap();
    s.write(&a, 0, vec![9; 64]).unwrap();
    s.copy_peer(&a, 0, &b, 0, 64).unwrap();
    assert!(matches!(
        s.copy_peer(&a, 1, &b, 0, 64),
        Err(Error::InvalidArgument(_))
    ));
    let rb = s.read(&b, 0, 64).unwrap();
    s.synchronize().unwrap();
    assert_eq!(rb.take().unwrap(), vec![9; 64]);
}
