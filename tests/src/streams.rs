//! Stream identity and argument checking.

use std::time::Duration;

use xstream_core::{
    Backend, Buffer, Capabilities, Device, Error, Event, EventDesc, Kernel, Stream,
};

use crate::{nb, pass, CheckResult, Ctx, Env};

pub(crate) fn stream_ids_unique<B: Backend>(env: &Env<B>) -> CheckResult {
    let mut seen = std::collections::HashSet::new();
    for round in 0..2 {
        let v: Vec<_> = (0..16)
            .map(|_| env.device.create_stream(&nb()))
            .collect::<Result<_, _>>()
            .ctx("create")?;
        for s in &v {
            ensure!(
                seen.insert(s.id()),
                "id {} repeated (round {round})",
                s.id()
            );
        }
    }
    pass("32 streams, 32 distinct ids across create/drop cycles")
}

pub(crate) fn bad_input<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    // alloc(0) is allowed (an empty buffer; see the `zero_length` check).
    ensure!(
        dev.alloc(0).is_ok_and(|b| b.len() == 0),
        "alloc(0) did not give a zero-length buffer"
    );
    let s = dev.create_stream(&nb()).ctx("create")?;
    let buf = dev.alloc(64).ctx("alloc")?;
    ensure!(
        matches!(s.memset(&buf, 60, 8, 0), Err(Error::InvalidArgument(_))),
        "memset out of range not refused"
    );
    ensure!(
        matches!(
            s.write(&buf, 0, vec![0; 65]),
            Err(Error::InvalidArgument(_))
        ),
        "write out of range not refused"
    );
    ensure!(
        matches!(s.read(&buf, usize::MAX, 2), Err(Error::InvalidArgument(_))),
        "read with overflowing range not refused"
    );
    ensure!(
        matches!(
            s.synchronize_timeout(Duration::ZERO),
            Err(Error::InvalidArgument(_))
        ),
        "zero stream timeout not refused"
    );
    let e = dev.create_event(&EventDesc::new()).ctx("event")?;
    ensure!(
        matches!(
            e.synchronize_timeout(Duration::ZERO),
            Err(Error::InvalidArgument(_))
        ),
        "zero event timeout not refused"
    );
    if dev.info().capabilities.contains(Capabilities::KERNELS) {
        let odd = dev.alloc(6).ctx("alloc 6")?;
        ensure!(
            matches!(
                s.launch_builtin(Kernel::Lcg {
                    buf: &odd,
                    rounds: 1
                }),
                Err(Error::InvalidArgument(_))
            ),
            "LCG on a 6-byte buffer not refused"
        );
    }
    s.synchronize().ctx("stream still usable")?;
    pass("out-of-range copies and zero timeouts refused, alloc(0) allowed; stream still usable")
}
