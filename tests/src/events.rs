//! Events: timing and never-recorded events.

use std::time::{Duration, Instant};

use xstream_core::{
    Backend, Capabilities, Device, Error, Event, EventDesc, EventFlags, Kernel, Status, Stream,
};

use crate::{nb, pass, CheckResult, Ctx, Env, Gate};

/// How long the kernel-free `event_timing` variant holds its stream between the two records.
const HELD_MS: u64 = 30;

pub(crate) fn event_timing<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let e0 = dev.create_event(&EventDesc::new()).ctx("event")?;
    let e1 = dev.create_event(&EventDesc::new()).ctx("event")?;
    let never = dev.create_event(&EventDesc::new()).ctx("event")?;
    let notime = dev
        .create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))
        .ctx("event")?;
    // Kernel-free, every backend: a host function holds the stream between the two records
    // until the test opens it, at least HELD_MS after the first record completed.
    let wall = Instant::now();
    e0.record(&s).ctx("record")?;
    let gate = Gate::hold::<B>(&s)?;
    e1.record(&s).ctx("record")?;
    notime.record(&s).ctx("record")?;
    e0.synchronize().ctx("first record's sync")?;
    std::thread::sleep(Duration::from_millis(HELD_MS));
    gate.open();
    e1.synchronize().ctx("event sync")?;
    ensure!(gate.released(), "the gate was not released by the test");
    // Both bounds are logical, not timing budgets: the second record ran after the gate
    // opened, at least HELD_MS after the first one had completed (10 ms of slack for a device clock that reads a little short), and
    // no more time can pass between them than passed on the host around them (1 ms of slack
    // for the two clocks' resolutions).
    let around = wall.elapsed().as_secs_f64() * 1e3 + 1.0;
    let held_ms = f64::from(e0.elapsed_ms(&e1).ctx("elapsed")?);
    ensure!(
        (HELD_MS as f64 - 10.0..=around).contains(&held_ms),
        "elapsed {held_ms} ms around a stream held {HELD_MS} ms by a host function, within {around:.1} ms of host time"
    );
    let mut what = format!("{held_ms:.2} ms around a stream held {HELD_MS} ms by a host function");
    if dev.info().capabilities.contains(Capabilities::KERNELS) {
        let wall = Instant::now();
        e0.record(&s).ctx("record")?;
        s.launch_builtin(Kernel::Delay(Duration::from_millis(30)))
            .ctx("delay")?;
        e1.record(&s).ctx("record")?;
        e1.synchronize().ctx("event sync")?;
        // As above: the 30 ms delay lies between the two records.
        let around = wall.elapsed().as_secs_f64() * 1e3 + 1.0;
        let ms = f64::from(e0.elapsed_ms(&e1).ctx("elapsed")?);
        ensure!(
            (20.0..=around).contains(&ms),
            "elapsed {ms} ms around a 30 ms delay, within {around:.1} ms of host time"
        );
        what.push_str(&format!(", {ms:.2} ms around a 30 ms delay kernel"));
    } else {
        what.push_str(" (no kernels here for the delay-kernel variant)");
    }
    ensure!(
        matches!(e0.elapsed_ms(&notime), Err(Error::TimingDisabled)),
        "timing-disabled end not refused"
    );
    ensure!(
        matches!(e0.elapsed_ms(&never), Err(Error::EventNotRecorded)),
        "never-recorded end not refused"
    );
    ensure!(
        matches!(never.elapsed_ms(&e1), Err(Error::EventNotRecorded)),
        "never-recorded start not refused"
    );
    let gate = Gate::hold::<B>(&s)?;
    e1.record(&s).ctx("re-record")?;
    match e0.elapsed_ms(&e1) {
        Err(e) if e.is_not_ready() => {}
        other => return Err(format!("pending end: expected NotReady, got {other:?}")),
    }
    gate.open();
    s.synchronize().ctx("sync")?;
    ensure!(gate.released(), "the gate was not released by the test");
    pass(what)
}

pub(crate) fn never_recorded_event<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let e = dev.create_event(&EventDesc::new()).ctx("event")?;
    ensure!(
        e.query().ctx("query")? == Status::Ready,
        "never-recorded event not Ready"
    );
    e.synchronize().ctx("synchronize")?;
    e.synchronize_timeout(Duration::from_millis(10))
        .ctx("timed synchronize")?;
    let s = dev.create_stream(&nb()).ctx("create")?;
    s.wait_event(&e).ctx("wait")?;
    s.synchronize_timeout(Duration::from_secs(2))
        .ctx("sync after waiting on it")?;
    pass("Ready, synchronize returns, wait is a no-op")
}
