//! Stream capture: deferral, replay and the calls capture refuses.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use xstream_core::{
    Backend, Capabilities, CaptureErrorKind, CaptureMode, CaptureStatus, Device, Error, Graph,
    Kernel, Stream,
};

use crate::{nb, pass, read_all, CheckResult, Ctx, Env};

pub(crate) fn capture_defers_and_replays<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::CAPTURE, "stream capture");
    need!(env, Capabilities::KERNELS, "a kernel to capture");
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let n = 1024;
    let init: Vec<u8> = (0..n).map(|i| (i % 256) as u8).collect();
    let buf = dev.alloc(n).ctx("alloc")?;
    s.write(&buf, 0, init.clone()).ctx("write")?;
    s.synchronize().ctx("sync")?;
    s.begin_capture(CaptureMode::Global).ctx("begin")?;
    ensure!(
        s.capture_status() == CaptureStatus::Active,
        "status not Active"
    );
    s.launch(Kernel::Lcg {
        buf: &buf,
        rounds: 3,
    })
    .ctx("captured launch")?;
    let g = s.end_capture().ctx("end")?;
    ensure!(
        s.capture_status() == CaptureStatus::None,
        "status not None after end"
    );
    ensure!(g.node_count() >= 1, "graph has no nodes");
    let before = read_all::<B>(&s, &buf)?;
    ensure!(before == init, "captured work executed before replay");
    g.launch(&s).ctx("replay 1")?;
    g.launch(&s).ctx("replay 2")?;
    let after = read_all::<B>(&s, &buf)?;
    let mut want = init;
    crate::reference::lcg_jump(&mut want, 6);
    ensure!(
        after == want,
        "two replays differ from running the work twice"
    );
    pass(format!(
        "graph of {} node(s) replayed twice = 6 LCG rounds",
        g.node_count()
    ))
}

pub(crate) fn capture_gates<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::CAPTURE, "stream capture");
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let buf = dev.alloc(64).ctx("alloc")?;
    s.begin_capture(CaptureMode::Global).ctx("begin")?;
    ensure!(
        matches!(
            s.begin_capture(CaptureMode::Global),
            Err(Error::Capture {
                kind: CaptureErrorKind::AlreadyCapturing,
                ..
            })
        ),
        "second begin not refused"
    );
    ensure!(
        s.capture_status() == CaptureStatus::Active,
        "second begin broke the capture"
    );
    s.memset(&buf, 0, 64, 1).ctx("captured memset")?;
    ensure!(
        matches!(s.synchronize(), Err(Error::Capture { .. })),
        "synchronize during capture not refused"
    );
    ensure!(
        s.capture_status() == CaptureStatus::Invalidated,
        "capture not invalidated"
    );
    ensure!(
        matches!(
            s.end_capture(),
            Err(Error::Capture {
                kind: CaptureErrorKind::Invalidated,
                ..
            })
        ),
        "end of an invalidated capture did not fail"
    );
    s.synchronize().ctx("stream usable after failed capture")?;
    s.begin_capture(CaptureMode::Global).ctx("begin again")?;
    let ran = Arc::new(AtomicUsize::new(0));
    let r2 = ran.clone();
    ensure!(
        matches!(
            s.host_callback(move |_| {
                r2.fetch_add(1, Ordering::SeqCst);
            }),
            Err(Error::Capture { .. })
        ),
        "callback during capture not refused"
    );
    ensure!(
        matches!(s.query(), Err(Error::Capture { .. })),
        "query during capture not refused"
    );
    ensure!(
        s.end_capture().is_err(),
        "capture survived a refused callback"
    );
    s.synchronize().ctx("sync")?;
    ensure!(ran.load(Ordering::SeqCst) == 0, "refused callback ran");
    let ds = dev.default_stream().ctx("default")?;
    ensure!(
        matches!(
            ds.begin_capture(CaptureMode::Global),
            Err(Error::Capture { .. })
        ),
        "default stream capture not refused"
    );
    pass("second begin, sync, query, callback, default-stream capture all handled")
}
