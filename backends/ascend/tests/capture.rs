//! Capture + replay, PERSISTENT streams, the capture state machine.
mod common;

use xstream_core::{
    CaptureErrorKind, CaptureMode, CaptureStatus, Device, Error, Graph, Kernel, Status, Stream,
    StreamDesc, StreamFlags,
};

#[test]
fn capture_and_replay() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let buf = d.alloc(16).unwrap();
    s.write(
        &buf,
        0,
        vec![1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0],
    )
    .unwrap();
    s.synchronize().unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    assert_eq!(s.capture_status(), CaptureStatus::Active);
    assert_eq!(s.native_capture_info().unwrap().0, CaptureStatus::Active);
    assert!(matches!(
        s.begin_capture(CaptureMode::Global),
        Err(Error::Capture {
            kind: CaptureErrorKind::AlreadyCapturing,
            ..
        })
    ));
    s.launch_builtin(Kernel::Lcg {
        buf: &buf,
        rounds: 1,
    })
    .unwrap();
    let g = s.end_capture().unwrap();
    assert_eq!(g.node_count(), 1);
    assert_eq!(s.capture_status(), CaptureStatus::None);
    for _ in 0..3 {
        g.replay(&s).unwrap();
    }
    let rb = s.read(&buf, 0, 16).unwrap();
    s.synchronize().unwrap();
    let mut want = vec![1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0];
    xstream_core::lcg_reference(&mut want, 3);
    assert_eq!(rb.take().unwrap(), want);
}

#[test]
fn illegal_ops_invalidate() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    assert!(matches!(
        s.synchronize(),
        Err(Error::Capture {
            kind: CaptureErrorKind::Unsupported,
            ..
        })
    ));
    assert_eq!(s.capture_status(), CaptureStatus::Invalidated);
    assert!(matches!(
        s.end_capture(),
        Err(Error::Capture {
            kind: CaptureErrorKind::Invalidated,
            ..
        })
    ));
    assert_eq!(s.query().unwrap(), Status::Ready);
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    assert!(matches!(
        s.host_callback(|_| {}),
        Err(Error::Capture { .. })
    ));
    assert!(s.end_capture().is_err());
    assert!(matches!(
        s.end_capture(),
        Err(Error::Capture {
            kind: CaptureErrorKind::NotCapturing,
            ..
        })
    ));
    let def = d.default_stream().unwrap();
    assert!(matches!(
        def.begin_capture(CaptureMode::Global),
        Err(Error::Capture {
            kind: CaptureErrorKind::NotCapturable,
            ..
        })
    ));
    s.synchronize().unwrap();
}

#[test]
fn persistent_stream_builds_a_graph() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(1);
    let p = d
        .create_stream(&StreamDesc::new().flags(StreamFlags::PERSISTENT))
        .unwrap();
    assert_eq!(p.capture_status(), CaptureStatus::Active);
    let buf = d.alloc(8).unwrap();
    p.memset(&buf, 0, 8, 7).unwrap();
    p.synchronize().unwrap();
    assert_eq!(p.query().unwrap(), Status::Ready);
    let g = p.end_capture().unwrap();
    assert_eq!(g.node_count(), 1);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let rb = s.read(&buf, 0, 8).unwrap();
    s.synchronize().unwrap();
    assert_eq!(
        rb.take().unwrap(),
        vec![0; 8],
        "persistent work did not run by itself"
    );
    g.replay(&s).unwrap();
    let rb = s.read(&buf, 0, 8).unwrap();
    s.synchronize().unwrap();
    assert_eq!(rb.take().unwrap(), vec![7; 8]);
    drop(p);
    g.replay(&s).unwrap();
    s.synchronize().unwrap();
}

/// Page-locked copies are refused inside a capture (a replay does not borrow the host buffer,
/// so its slices could race with it: docs/semantics.md); the capture stays valid, and the
/// capturable path, `write`, still records its copy.
#[test]
fn page_locked_copies_are_refused_inside_a_capture() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let buf = d.alloc(64).unwrap();
    let mut h = d
        .alloc_pinned(64, &xstream_core::PinnedAllocDesc::new())
        .unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    assert!(matches!(
        s.copy_to_device(&h, 0, &buf, 0, 64),
        Err(Error::Unsupported { .. })
    ));
    assert!(matches!(
        s.copy_to_host(&buf, 0, &mut h, 0, 64),
        Err(Error::Unsupported { .. })
    ));
    assert_eq!(s.capture_status(), CaptureStatus::Active);
    s.write(&buf, 0, vec![9; 64]).unwrap();
    let g = s.end_capture().unwrap();
    assert_eq!(g.node_count(), 1);
    g.replay(&s).unwrap();
    s.copy_to_host(&buf, 0, &mut h, 0, 64).unwrap();
    assert_eq!(h.as_slice().unwrap(), &[9u8; 64][..]);
}

/// `Device::alloc` zeroes the new buffer with the synchronous `aclrtMemset`, which the runtime
/// refuses on a thread that captures in GLOBAL or THREAD_LOCAL mode (107030) and which leaves
/// the capture valid. The error names the code; the capture still ends with its graph.
#[test]
fn alloc_during_a_capture_names_the_runtime_code() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    let e = d.alloc(8).unwrap_err();
    let n = e.native().expect("a native ACL error");
    assert_eq!((n.api, n.code), ("aclrtMemset", 107_030), "{e}");
    assert_eq!(n.name, "ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT");
    assert!(e
        .to_string()
        .contains("ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT"));
    assert_eq!(s.capture_status(), CaptureStatus::Active);
    let g = s.end_capture().unwrap();
    assert_eq!(g.node_count(), 0);
}
