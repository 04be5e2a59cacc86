//! Synchronize with a timeout.

use std::time::Duration;

use xstream_core::{Backend, Device, Error, Status, Stream};

use crate::{nb, pass, read_all, CheckResult, Ctx, Env, Gate};

pub(crate) fn sync_timeout_recovers<B: Backend>(env: &Env<B>) -> CheckResult {
    let s = env.device.create_stream(&nb()).ctx("create")?;
    let buf = env.device.alloc(64).ctx("alloc")?;
    let gate = Gate::hold::<B>(&s)?;
    s.memset(&buf, 0, 64, 6).ctx("memset behind the gate")?;
    match s.synchronize_timeout(Duration::from_millis(20)) {
        Err(Error::Timeout(_)) => {}
        other => return Err(format!("expected Timeout, got {other:?}")),
    }
    ensure!(
        s.query().ctx("query after the timeout")? == Status::Pending,
        "the work behind the gate is not pending after the timeout"
    );
    gate.open();
    s.synchronize().ctx("synchronize after timeout")?;
    ensure!(gate.released(), "the gate was not released by the test");
    s.synchronize_timeout(Duration::from_secs(5))
        .ctx("timed sync on idle stream")?;
    let got = read_all::<B>(&s, &buf)?;
    ensure!(
        got.iter().all(|&x| x == 6),
        "the work queued before the timeout did not complete"
    );
    pass("Timeout while the work was held, then it completed and the stream synchronized")
}
