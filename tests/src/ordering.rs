//! Ordering across streams: event waits, query and the default-stream rule.

use std::time::Duration;

use xstream_core::{
    Backend, Capabilities, Device, Error, Event, EventDesc, EventFlags, Kernel, Status, Stream,
    StreamDesc, StreamFlags,
};

use crate::{nb, pass, read_all, CheckResult, Ctx, Env, Gate};

/// How long a check waits on a stream that must stay held (a timed synchronize that has to
/// time out; never a bound on how fast anything runs).
const HELD_PROBE: Duration = Duration::from_millis(50);

pub(crate) fn ordering_across_streams<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let a = dev.create_stream(&nb().name("producer")).ctx("create a")?;
    let b = dev.create_stream(&nb().name("consumer")).ctx("create b")?;
    let n = 4096;
    let src = dev.alloc(n).ctx("alloc")?;
    let dst = dev.alloc(n).ctx("alloc")?;
    let e = dev
        .create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))
        .ctx("event")?;
    // Kernel-free, every backend: a held host function keeps the producer busy, so the
    // consumer's wait must hold until the test opens it.
    let gate = Gate::hold::<B>(&a)?;
    a.memset(&src, 0, n, 7).ctx("memset")?;
    e.record(&a).ctx("record")?;
    b.wait_event(&e).ctx("wait")?;
    b.copy(&src, 0, &dst, 0, n).ctx("copy")?;
    let held = b.query().ctx("consumer query while the producer is held")?;
    // A consumer that did not wait would finish its copy: its timed synchronize must time out.
    let timed = b.synchronize_timeout(HELD_PROBE);
    gate.open();
    let got = read_all::<B>(&b, &dst)?;
    ensure!(
        held == Status::Pending,
        "the consumer was {held:?} while its producer was held by a host function"
    );
    ensure!(
        matches!(timed, Err(Error::Timeout(_))),
        "the consumer's synchronize gave {timed:?} while its producer was held, expected Timeout"
    );
    ensure!(
        got.iter().all(|&x| x == 7),
        "consumer saw data before the held producer finished"
    );
    a.synchronize().ctx("producer sync")?;
    ensure!(gate.released(), "the gate was not released by the test");
    if !dev.info().capabilities.contains(Capabilities::KERNELS) {
        return pass("consumer waited (Pending) behind a producer held by a host function, then saw its bytes; no kernels here for the delay-kernel variant");
    }
    // Where kernels exist: the same with a device-side delay instead of a host function.
    let e = dev
        .create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))
        .ctx("event")?;
    a.memset(&src, 0, n, 0).ctx("clear src")?;
    a.synchronize().ctx("sync after clearing")?;
    b.memset(&dst, 0, n, 0).ctx("clear dst")?;
    a.launch_builtin(Kernel::Delay(Duration::from_millis(50)))
        .ctx("delay")?;
    a.memset(&src, 0, n, 7).ctx("memset")?;
    e.record(&a).ctx("record")?;
    b.wait_event(&e).ctx("wait")?;
    b.copy(&src, 0, &dst, 0, n).ctx("copy")?;
    let got = read_all::<B>(&b, &dst)?;
    ensure!(
        got.iter().all(|&x| x == 7),
        "consumer saw data before the producer finished"
    );
    pass("consumer waited behind a producer held by a host function, and behind a 50 ms delay kernel; it saw the producer's bytes both times")
}

pub(crate) fn wait_takes_snapshot<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let a = dev.create_stream(&nb()).ctx("a")?;
    let b = dev.create_stream(&nb()).ctx("b")?;
    let idle = dev.create_stream(&nb()).ctx("idle")?;
    let buf = dev.alloc(256).ctx("alloc")?;
    // Kernel-free, every backend: a is held by a host function while the event is recorded
    // on it, waited for on b, and recorded again on an idle stream.
    let e = dev.create_event(&EventDesc::new()).ctx("event")?;
    let gate = Gate::hold::<B>(&a)?;
    a.memset(&buf, 0, 256, 9).ctx("memset")?;
    e.record(&a).ctx("record on a")?;
    b.wait_event(&e).ctx("wait")?;
    e.record(&idle).ctx("re-record on idle")?;
    idle.synchronize().ctx("idle sync")?;
    let held = b.query().ctx("query b while a is held")?;
    let timed = b.synchronize_timeout(HELD_PROBE);
    gate.open();
    let got = read_all::<B>(&b, &buf)?;
    ensure!(
        held == Status::Pending,
        "b was {held:?} after the event's later record on an idle stream completed: the wait followed the later record instead of the snapshot"
    );
    ensure!(
        matches!(timed, Err(Error::Timeout(_))),
        "b's synchronize gave {timed:?} while a was held, expected Timeout: the wait followed the later record instead of the snapshot"
    );
    ensure!(
        got.iter().all(|&x| x == 9),
        "the wait followed the later record instead of the snapshot"
    );
    ensure!(gate.released(), "the gate was not released by the test");
    drop(e);
    if !dev.info().capabilities.contains(Capabilities::KERNELS) {
        return pass("re-recording after the wait did not release it (producer held by a host function); no kernels here for the delay-kernel variant");
    }
    let e = dev.create_event(&EventDesc::new()).ctx("event")?;
    a.memset(&buf, 0, 256, 0).ctx("clear")?;
    a.synchronize().ctx("sync after clearing")?;
    a.launch_builtin(Kernel::Delay(Duration::from_millis(60)))
        .ctx("delay")?;
    a.memset(&buf, 0, 256, 9).ctx("memset")?;
    e.record(&a).ctx("record on a")?;
    b.wait_event(&e).ctx("wait")?;
    e.record(&idle).ctx("re-record on idle")?;
    let got = read_all::<B>(&b, &buf)?;
    ensure!(
        got.iter().all(|&x| x == 9),
        "the wait followed the later record instead of the snapshot (delay kernel)"
    );
    drop(e);
    pass("re-recording after the wait did not release it, behind a held host function and behind a delay kernel")
}

pub(crate) fn query_pending_then_ready<B: Backend>(env: &Env<B>) -> CheckResult {
    let s = env.device.create_stream(&nb()).ctx("create")?;
    ensure!(
        s.query().ctx("idle query")? == Status::Ready,
        "idle stream not Ready"
    );
    let gate = Gate::hold::<B>(&s)?;
    ensure!(
        s.query().ctx("busy query")? == Status::Pending,
        "stream held by a gate not Pending"
    );
    gate.open();
    s.synchronize().ctx("sync")?;
    ensure!(gate.released(), "the gate was not released by the test");
    ensure!(
        s.query().ctx("query after sync")? == Status::Ready,
        "not Ready after synchronize"
    );
    pass("Ready → Pending (held) → Ready")
}

pub(crate) fn default_stream_rule<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let legacy = dev
        .info()
        .capabilities
        .contains(Capabilities::LEGACY_DEFAULT_STREAM);
    let ds = dev.default_stream().ctx("default stream")?;
    let plain = dev.create_stream(&StreamDesc::new()).ctx("plain")?;
    let nonblocking = dev.create_stream(&nb()).ctx("non-blocking")?;
    // Streams that never wait for the default stream: work on them completes (their
    // synchronize returns) while the default stream is held by a gate. A stream that waited
    // would keep its synchronize until the gate gave up, and the gate would report that.
    let mut independent = vec![("non-blocking", &nonblocking)];
    if !legacy {
        ensure!(
            plain.flags().contains(StreamFlags::NON_BLOCKING),
            "backend without the legacy rule must report NON_BLOCKING as inherent"
        );
        independent.push(("plain (inherently non-blocking)", &plain));
    }
    for (what, s) in independent {
        let held = dev.alloc(64).ctx("alloc")?;
        let own = dev.alloc(64).ctx("alloc")?;
        let gate = Gate::hold::<B>(&ds)?;
        ds.memset(&held, 0, 64, 9)
            .ctx("memset on the default stream")?;
        s.memset(&own, 0, 64, 1).ctx("memset")?;
        s.synchronize()
            .ctx("synchronize while the default stream is held")?;
        gate.open();
        ds.synchronize().ctx("default stream synchronize")?;
        ensure!(
            gate.released(),
            "the {what} stream waited for the held default stream"
        );
        ensure!(
            read_all::<B>(s, &own)?.iter().all(|&x| x == 1),
            "work of the {what} stream did not complete"
        );
        // And the default stream does not wait for it.
        let gate = Gate::hold::<B>(s)?;
        s.memset(&held, 0, 64, 2).ctx("memset behind the gate")?;
        ds.memset(&own, 0, 64, 3)
            .ctx("memset on the default stream")?;
        ds.synchronize()
            .ctx("default stream synchronize while the other is held")?;
        gate.open();
        s.synchronize().ctx("synchronize")?;
        ensure!(
            gate.released(),
            "the default stream waited for the held {what} stream"
        );
    }
    if !legacy {
        return pass(
            "no legacy default stream: plain and non-blocking streams neither wait for the \
             default stream nor hold it (observed with the default stream held)",
        );
    }
    // Legacy rule: a blocking stream and the default stream wait for each other. The reads
    // are enqueued while the other stream is held: they see the held stream's bytes only if
    // they waited for it.
    let b1 = dev.alloc(64).ctx("alloc")?;
    let gate = Gate::hold::<B>(&ds)?;
    ds.memset(&b1, 0, 64, 5).ctx("memset")?;
    let rb = plain.read(&b1, 0, 64).ctx("read on the blocking stream")?;
    gate.open();
    plain.synchronize().ctx("synchronize")?;
    ensure!(
        rb.take().ctx("readback")?.iter().all(|&x| x == 5),
        "blocking stream did not wait for the default stream"
    );
    let b3 = dev.alloc(64).ctx("alloc")?;
    let gate = Gate::hold::<B>(&plain)?;
    plain.memset(&b3, 0, 64, 4).ctx("memset")?;
    let rb = ds.read(&b3, 0, 64).ctx("read on the default stream")?;
    gate.open();
    ds.synchronize().ctx("synchronize")?;
    ensure!(
        rb.take().ctx("readback")?.iter().all(|&x| x == 4),
        "default stream did not wait for a blocking stream"
    );
    dev.synchronize().ctx("device sync")?;
    pass("blocking ↔ default ordered both ways; non-blocking independent (observed with gates)")
}
