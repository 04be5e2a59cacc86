//! Futures, the stream pool and host allocators.

use std::sync::Arc;
use std::time::Duration;

use xstream_core::{
    block_on, Backend, Capabilities, Device, Event, EventDesc, HeapAllocator, Kernel, PoolConfig,
    PriorityClass, Status, Stream, StreamFlags, StreamPool,
};

use crate::{nb, pass, CheckResult, Ctx, Env};

pub(crate) fn futures_resolve<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let kernels = dev.info().capabilities.contains(Capabilities::KERNELS);
    if kernels {
        s.launch_builtin(Kernel::Delay(Duration::from_millis(30)))
            .ctx("delay")?;
    }
    let before = dev.create_event(&EventDesc::new()).ctx("event")?;
    before.record(&s).ctx("record")?;
    let f = s.completed().ctx("stream future")?;
    block_on(f).ctx("stream future result")?;
    // The future's own host callback may still be finishing, but everything before it is done.
    ensure!(
        before.query().ctx("query")? == Status::Ready,
        "future resolved before the work completed"
    );
    let e = dev.create_event(&EventDesc::new()).ctx("event")?;
    if kernels {
        s.launch_builtin(Kernel::Delay(Duration::from_millis(20)))
            .ctx("delay")?;
    }
    e.record(&s).ctx("record")?;
    e.completed()
        .ctx("event future")?
        .wait()
        .ctx("event future result")?;
    ensure!(
        e.query().ctx("query")? == Status::Ready,
        "event future resolved early"
    );
    if kernels {
        s.launch_builtin(Kernel::Delay(Duration::from_millis(20)))
            .ctx("delay")?;
    }
    drop(s.completed().ctx("future to drop")?);
    drop(e.completed().ctx("future to drop")?);
    s.synchronize().ctx("sync after dropping futures")?;
    pass("stream and event futures resolved after the work; dropped ones harmless")
}

pub(crate) fn pool_round_robin_and_lease<B: Backend>(env: &Env<B>) -> CheckResult {
    let pool = StreamPool::<B>::new(
        env.device.clone(),
        PoolConfig {
            per_class: [1, 3, 1],
            flags: StreamFlags::NON_BLOCKING,
        },
    )
    .ctx("pool")?;
    let ids: Vec<u64> = (0..6)
        .map(|_| pool.get(PriorityClass::Normal).map(|s| s.id()))
        .collect::<Result<_, _>>()
        .ctx("get")?;
    ensure!(
        ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2],
        "first round not distinct: {ids:?}"
    );
    ensure!(ids[..3] == ids[3..], "not round-robin: {ids:?}");
    ensure!(
        pool.created() == 3,
        "created {} streams for 3 slots",
        pool.created()
    );
    let hi = pool.get(PriorityClass::High).ctx("high")?;
    ensure!(!ids.contains(&hi.id()), "high class shares a normal stream");
    let l1 = pool.lease(PriorityClass::Normal).ctx("lease")?;
    let l2 = pool.lease(PriorityClass::Normal).ctx("lease")?;
    let (i1, i2) = (l1.id(), l2.id());
    ensure!(
        i1 != i2 && !ids.contains(&i1) && !ids.contains(&i2),
        "leases are not exclusive"
    );
    drop(l1);
    let l3 = pool.lease(PriorityClass::Normal).ctx("lease")?;
    ensure!(l3.id() == i1, "a returned lease was not reused");
    ensure!(
        StreamPool::<B>::new(
            env.device.clone(),
            PoolConfig {
                per_class: [0, 1, 1],
                flags: StreamFlags::NON_BLOCKING
            }
        )
        .is_err(),
        "empty class accepted"
    );
    pass(format!(
        "{} streams created for 6 gets + 3 leases",
        pool.created()
    ))
}

pub(crate) fn allocator_lookup<B: Backend>(env: &Env<B>) -> CheckResult {
    let s = env.device.create_stream(&nb()).ctx("create")?;
    ensure!(
        s.allocator().ctx("lookup")?.is_none(),
        "fresh stream has an allocator"
    );
    let a = HeapAllocator::new();
    let dynamic: Arc<dyn xstream_core::Allocator> = a.clone();
    s.set_allocator(Some(dynamic.clone())).ctx("register")?;
    let found = s
        .allocator()
        .ctx("lookup")?
        .ok_or("registered allocator not found")?;
    ensure!(
        Arc::as_ptr(&found) as *const () == Arc::as_ptr(&dynamic) as *const (),
        "lookup returned a different allocator"
    );
    let b = found
        .alloc(256)
        .ok_or("allocation through the looked-up allocator failed")?;
    ensure!(found.address(b) != 0, "block has no address");
    ensure!(
        a.live_blocks() == 1,
        "allocation did not reach the registered allocator"
    );
    found.free(b);
    ensure!(
        a.live_blocks() == 0,
        "free did not reach the registered allocator"
    );
    s.set_allocator(None).ctx("unregister")?;
    ensure!(
        s.allocator().ctx("lookup")?.is_none(),
        "allocator still registered"
    );
    pass("register, look up, allocate, free, unregister")
}
