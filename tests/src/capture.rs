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
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let n = 1024;
    // Kernel-free, every backend with capture: a captured copy from `from` to `to`. Each
    // replay copies what `from` holds then, so a replay after `from` changed shows the work
    // ran again (not once at capture or at the first replay).
    let from = dev.alloc(n).ctx("alloc")?;
    let to = dev.alloc(n).ctx("alloc")?;
    s.memset(&from, 0, n, 1).ctx("memset from")?;
    s.memset(&to, 0, n, 0).ctx("memset to")?;
    s.synchronize().ctx("sync")?;
    s.begin_capture(CaptureMode::Global).ctx("begin")?;
    ensure!(
        s.capture_status() == CaptureStatus::Active,
        "status not Active"
    );
    s.copy(&from, 0, &to, 0, n).ctx("captured copy")?;
    let copy_graph = s.end_capture().ctx("end")?;
    ensure!(
        s.capture_status() == CaptureStatus::None,
        "status not None after end"
    );
    ensure!(copy_graph.node_count() >= 1, "graph has no nodes");
    ensure!(
        read_all::<B>(&s, &to)?.iter().all(|&x| x == 0),
        "captured copy executed before replay"
    );
    copy_graph.replay(&s).ctx("replay 1")?;
    ensure!(
        read_all::<B>(&s, &to)?.iter().all(|&x| x == 1),
        "the first replay did not copy"
    );
    s.memset(&from, 0, n, 2).ctx("memset from again")?;
    copy_graph.replay(&s).ctx("replay 2")?;
    ensure!(
        read_all::<B>(&s, &to)?.iter().all(|&x| x == 2),
        "the second replay did not copy the source's new bytes"
    );
    if !dev.info().capabilities.contains(Capabilities::KERNELS) {
        return pass(format!(
            "captured copy ({} node(s)) deferred, then run again by each of two replays; no kernels here for the LCG variant",
            copy_graph.node_count()
        ));
    }
    let init: Vec<u8> = (0..n).map(|i| (i % 256) as u8).collect();
    let buf = dev.alloc(n).ctx("alloc")?;
    s.write(&buf, 0, init.clone()).ctx("write")?;
    s.synchronize().ctx("sync")?;
    s.begin_capture(CaptureMode::Global).ctx("begin")?;
    s.launch_builtin(Kernel::Lcg {
        buf: &buf,
        rounds: 3,
    })
    .ctx("captured launch")?;
    let g = s.end_capture().ctx("end")?;
    ensure!(g.node_count() >= 1, "graph has no nodes");
    let before = read_all::<B>(&s, &buf)?;
    ensure!(before == init, "captured work executed before replay");
    g.replay(&s).ctx("replay 1")?;
    g.replay(&s).ctx("replay 2")?;
    let after = read_all::<B>(&s, &buf)?;
    let mut want = init;
    crate::reference::lcg_jump(&mut want, 6);
    ensure!(
        after == want,
        "two replays differ from running the work twice"
    );
    pass(format!(
        "captured copy replayed twice with the source changed between; graph of {} node(s) replayed twice = 6 LCG rounds",
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
