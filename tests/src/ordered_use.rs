//! Ordering shorthand and allocation without host synchronization: `Stream::wait_stream`,
//! `Stream::record_event`, the [`EventPool`], `Device::alloc_uninit` / `alloc_zeroed_on`, use
//! tracking of a stream-ordered buffer by any number of streams, and `Stream::record_use`
//! (the last also with work enqueued through a raw handle: [`record_use_with_raw_copy`]).
//!
//! Every ordering is made observable with a `Gate` (a host callback holding its stream), so
//! the checks observe order, not time. Where a check lets an unordered stream run ahead, it
//! does so with a bounded wait that is never an assertion (as `stream_ordered_alloc` does).

use std::time::Duration;

use xstream_core::{
    Backend, Buffer, Device, Error, Event, EventDesc, EventPool, Status, Stream, StreamOf,
};

use crate::{nb, pass, read_all, CheckResult, Ctx, Env, Gate};

/// How long a check lets a stream that should not depend on a held one run ahead (a bound on
/// a wait, never an assertion).
const RUN_AHEAD: Duration = Duration::from_millis(200);

const N: usize = 4096;

/// `b.wait_stream(&a)`: b's copy reads the bytes a's held memset writes.
pub(crate) fn join_orders<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let a = dev.create_stream(&nb().name("producer")).ctx("create a")?;
    let b = dev.create_stream(&nb().name("consumer")).ctx("create b")?;
    let src = dev.alloc(N).ctx("alloc")?;
    let dst = dev.alloc(N).ctx("alloc")?;
    b.wait_stream(&b).ctx("join with itself")?;
    let gate = Gate::hold::<B>(&a)?;
    a.memset(&src, 0, N, 7).ctx("memset behind the gate")?;
    b.wait_stream(&a).ctx("join")?;
    b.copy(&src, 0, &dst, 0, N).ctx("copy after the join")?;
    // An unordered consumer would copy now, before the held memset.
    let _ = b.synchronize_timeout(RUN_AHEAD);
    ensure!(
        !gate.gave_up(),
        "join waited on the host for the held stream"
    );
    gate.open();
    let got = read_all::<B>(&b, &dst)?;
    a.synchronize().ctx("synchronize a")?;
    ensure!(gate.released(), "the gate gave up before it was opened");
    ensure!(
        got.iter().all(|&x| x == 7),
        "the joined stream ran before the work it joined"
    );
    pass("b.wait_stream(&a) ordered b's copy after a's held memset; joining itself is a no-op")
}

/// `a.record_event()`: a fresh, recorded event (pending while a is held) that orders a wait.
pub(crate) fn record_event_orders<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let a = dev.create_stream(&nb()).ctx("create a")?;
    let b = dev.create_stream(&nb()).ctx("create b")?;
    let src = dev.alloc(N).ctx("alloc")?;
    let dst = dev.alloc(N).ctx("alloc")?;
    let gate = Gate::hold::<B>(&a)?;
    a.memset(&src, 0, N, 3).ctx("memset behind the gate")?;
    let e = a.record_event().ctx("record_event")?;
    ensure!(
        e.query().ctx("query")? == Status::Pending,
        "the event from record_event is not pending while its stream is held (not recorded?)"
    );
    b.wait_event(&e).ctx("wait")?;
    b.copy(&src, 0, &dst, 0, N).ctx("copy")?;
    let _ = b.synchronize_timeout(RUN_AHEAD);
    gate.open();
    let got = read_all::<B>(&b, &dst)?;
    e.synchronize().ctx("event synchronize")?;
    ensure!(gate.released(), "the gate gave up before it was opened");
    ensure!(
        got.iter().all(|&x| x == 3),
        "a wait on record_event's event did not order the copy"
    );
    pass("record_event gave a recorded event: Pending while held, and a wait on it ordered a copy")
}

/// The event pool: bounded, refuses foreign flags, hands pooled events out again, and its
/// events order work after reuse (a wait keeps its snapshot when the event is re-recorded).
pub(crate) fn event_pool_bounded<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    ensure!(
        matches!(EventPool::<B>::new(dev, 0), Err(Error::InvalidArgument(_))),
        "a pool of capacity 0 was accepted"
    );
    let pool = EventPool::<B>::new(dev, 2).ctx("pool")?;
    let es: Vec<_> = (0..3)
        .map(|_| pool.get())
        .collect::<Result<_, _>>()
        .ctx("get")?;
    ensure!(pool.is_empty(), "a new pool had pooled events");
    let kept: Vec<bool> = es.into_iter().map(|e| pool.put(e)).collect();
    ensure!(
        kept == [true, true, false] && pool.len() == 2,
        "a pool of capacity 2 kept {kept:?} ({} pooled)",
        pool.len()
    );
    let timing = dev.create_event(&EventDesc::new()).ctx("timing event")?;
    ensure!(
        !pool.put(timing),
        "the pool took back an event with other flags (timing enabled)"
    );
    let e = pool.get().ctx("get pooled")?;
    ensure!(pool.len() == 1, "get did not hand out a pooled event");
    ensure!(pool.put(e), "the pool did not take its own event back");
    // Ordering through pooled events: the join's event goes back at once and is re-recorded
    // by the next join on an idle stream; the first wait keeps its snapshot.
    let a = dev.create_stream(&nb()).ctx("create a")?;
    let b = dev.create_stream(&nb()).ctx("create b")?;
    let idle = dev.create_stream(&nb()).ctx("create idle")?;
    let src = dev.alloc(N).ctx("alloc")?;
    let dst = dev.alloc(N).ctx("alloc")?;
    let gate = Gate::hold::<B>(&a)?;
    a.memset(&src, 0, N, 9).ctx("memset behind the gate")?;
    pool.wait_stream(&b, &a).ctx("pool join")?;
    let e = pool
        .record(&idle)
        .ctx("re-record a pooled event on an idle stream")?;
    b.copy(&src, 0, &dst, 0, N).ctx("copy")?;
    let _ = b.synchronize_timeout(RUN_AHEAD);
    gate.open();
    let got = read_all::<B>(&b, &dst)?;
    a.synchronize().ctx("synchronize a")?;
    pool.put(e);
    ensure!(gate.released(), "the gate gave up before it was opened");
    ensure!(
        got.iter().all(|&x| x == 9),
        "a join through a pooled event did not order the copy (or re-recording moved the wait)"
    );
    pass("capacity 2 kept 2 of 3, refused a timing event, reused its events; a pooled join ordered a copy")
}

/// `alloc_zeroed_on` returns while its stream is held (no host wait) and the zeros are there
/// in that stream's order and, after a join, on another stream; `alloc_uninit` is usable once
/// written.
pub(crate) fn alloc_without_host_sync<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create s")?;
    let t = dev.create_stream(&nb()).ctx("create t")?;
    #[allow(unsafe_code)]
    // SAFETY: `alloc_uninit`'s contract: every byte is written by the memset below before
    // anything reads it.
    let u = unsafe { dev.alloc_uninit(N) }.ctx("alloc_uninit")?;
    ensure!(u.len() == N, "alloc_uninit gave {} bytes", u.len());
    s.memset(&u, 0, N, 0x5A).ctx("memset")?;
    ensure!(
        read_all::<B>(&s, &u)?.iter().all(|&x| x == 0x5A),
        "an uninitialised buffer did not hold the bytes written"
    );
    let gate = Gate::hold::<B>(&s)?;
    let z = dev.alloc_zeroed_on(&s, N).ctx("alloc_zeroed_on")?;
    ensure!(
        !gate.gave_up(),
        "alloc_zeroed_on waited on the host for its held stream"
    );
    ensure!(z.len() == N, "alloc_zeroed_on gave {} bytes", z.len());
    t.wait_stream(&s).ctx("join")?;
    // The gate opens before the reads: a `read` into pageable memory may itself block the
    // host until its copy ran (CUDA, docs/semantics.md), which a held stream never allows.
    // The zeroing is still ordered behind the held gate on `s`, and `t` joined `s` while held.
    gate.open();
    let rb = s.read(&z, 0, N).ctx("read on s")?;
    let rt = t.read(&z, 0, N).ctx("read on t")?;
    s.synchronize().ctx("synchronize s")?;
    t.synchronize().ctx("synchronize t")?;
    ensure!(gate.released(), "the gate gave up before it was opened");
    ensure!(
        rb.take().ctx("readback s")?.iter().all(|&x| x == 0),
        "alloc_zeroed_on: not zero in its stream's order"
    );
    ensure!(
        rt.take().ctx("readback t")?.iter().all(|&x| x == 0),
        "alloc_zeroed_on: not zero on a stream joined after it"
    );
    pass("alloc_zeroed_on returned while its stream was held and read zero there and after a join; alloc_uninit held what was written")
}

/// A stream-ordered buffer used by six other streams (more than any fixed slot count), each
/// held by a gate: `free_async` returns at once (no host or device-wide wait) and every held
/// stream still reads the buffer's bytes, whatever the freeing stream allocates and writes.
pub(crate) fn many_stream_users<B: Backend>(env: &Env<B>) -> CheckResult {
    const USERS: usize = 6;
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create s")?;
    let x = s.alloc_async(N).ctx("alloc_async")?;
    s.memset(&x, 0, N, 7).ctx("memset")?;
    s.synchronize().ctx("synchronize")?;
    let mut held = Vec::new();
    for i in 0..USERS {
        let t = dev.create_stream(&nb()).ctx("create a user")?;
        let y = dev.alloc(N).ctx("alloc")?;
        let gate = Gate::hold::<B>(&t)?;
        t.copy(&x, 0, &y, 0, N)
            .map_err(|e| format!("copy on user {i}: {e}"))?;
        held.push((t, y, gate));
    }
    s.free_async(x).ctx("free_async")?;
    ensure!(
        held.iter().all(|(_, _, g)| !g.gave_up()),
        "free_async waited on the host for the held users"
    );
    let z = s.alloc_async(N).ctx("alloc_async after the free")?;
    s.memset(&z, 0, N, 0xEE).ctx("memset of the new buffer")?;
    let _ = s.synchronize_timeout(RUN_AHEAD);
    for (_, _, g) in &held {
        g.open();
    }
    s.synchronize().ctx("synchronize the freeing stream")?;
    for (i, (t, y, g)) in held.iter().enumerate() {
        t.synchronize().ctx("synchronize a user")?;
        ensure!(
            g.released(),
            "user {i}: the gate gave up before it was opened"
        );
        ensure!(
            read_all::<B>(t, y)?.iter().all(|&b| b == 7),
            "user {i} of {USERS} read bytes written after the free"
        );
    }
    s.free_async(z).ctx("free_async")?;
    s.synchronize().ctx("synchronize")?;
    pass(format!(
        "{USERS} held streams kept the freed buffer's bytes; free_async did not wait on the host"
    ))
}

/// `record_use` on plain and stream-ordered buffers never waits on the host, and the marked
/// stream's work completes. (Where a backend has a native path outside xstream, the
/// data-level form is [`record_use_with_raw_copy`].)
pub(crate) fn record_use_no_host_wait<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create s")?;
    let t = dev.create_stream(&nb()).ctx("create t")?;
    let plain = dev.alloc(N).ctx("alloc")?;
    let ordered = s.alloc_async(N).ctx("alloc_async")?;
    s.synchronize().ctx("synchronize")?;
    let gate = Gate::hold::<B>(&t)?;
    t.record_use(&plain).ctx("record_use (plain)")?;
    t.record_use(&ordered).ctx("record_use (stream-ordered)")?;
    t.record_use(&ordered).ctx("record_use twice")?;
    s.free_async(ordered).ctx("free_async (stream-ordered)")?;
    s.free_async(plain).ctx("free_async (plain)")?;
    ensure!(
        !gate.gave_up(),
        "marking or freeing waited on the host for the marked stream"
    );
    gate.open();
    t.synchronize().ctx("synchronize t")?;
    s.synchronize().ctx("synchronize s")?;
    ensure!(gate.released(), "the gate gave up before it was opened");
    pass("record_use and the frees after it returned while the marked stream was held")
}

/// A native device-to-device copy of `len` bytes from device address `src` to `dst`, enqueued
/// through the stream's raw handle, so xstream does not see it (`cuMemcpyDtoDAsync`,
/// `aclrtMemcpyAsync`).
pub type RawCopy<B> = fn(&StreamOf<B>, u64, u64, usize) -> xstream_core::Result<()>;

/// What [`record_use_with_raw_copy`] observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawUse {
    /// The held raw copy read the freed buffer's bytes.
    Kept,
    /// The held raw copy read bytes the freeing stream wrote into a new allocation: the memory
    /// was reused before the raw work ran.
    Reused,
}

/// The `record_stream` check: stream T, held by a gate, copies a stream-ordered buffer X
/// through its raw handle (`raw_copy`: xstream does not see it); with `mark`, T then declares
/// the use with `record_use`. X is freed with `free_async` on stream S, which allocates a new
/// buffer of the same size and fills it with `0xEE` (the stream-ordered allocator may hand
/// X's memory out again at once). Once the gate opens, the raw copy shows whether X's bytes
/// survived. Marked, they must (`Ok(RawUse::Kept)`, else an error); unmarked, the result is
/// returned for the caller to judge (a backend that reuses memory in stream order shows
/// [`RawUse::Reused`]: the check fails without the marking).
///
/// # Errors
/// A description of what broke.
pub fn record_use_with_raw_copy<B: Backend>(
    env: &Env<B>,
    raw_copy: RawCopy<B>,
    mark: bool,
) -> Result<RawUse, String> {
    let dev = &env.device;
    let s = dev.create_stream(&nb().name("freeing")).ctx("create s")?;
    let t = dev.create_stream(&nb().name("raw user")).ctx("create t")?;
    let x = s.alloc_async(N).ctx("alloc_async")?;
    s.memset(&x, 0, N, 7).ctx("memset")?;
    s.synchronize().ctx("synchronize")?;
    let y = dev.alloc(N).ctx("alloc")?;
    t.synchronize().ctx("synchronize t")?;
    let gate = Gate::hold::<B>(&t)?;
    raw_copy(&t, x.device_address(), y.device_address(), N).ctx("raw copy")?;
    if mark {
        t.record_use(&x).ctx("record_use")?;
    }
    s.free_async(x).ctx("free_async")?;
    let z = s.alloc_async(N).ctx("alloc_async after the free")?;
    s.memset(&z, 0, N, 0xEE).ctx("memset of the new buffer")?;
    let _ = s.synchronize_timeout(RUN_AHEAD);
    ensure!(
        !gate.gave_up(),
        "the free waited on the host for the marked stream"
    );
    gate.open();
    t.synchronize().ctx("synchronize t")?;
    s.synchronize().ctx("synchronize s")?;
    ensure!(gate.released(), "the gate gave up before it was opened");
    // `y` outlived the raw copy (it is read here, after t synchronized).
    let got = read_all::<B>(&s, &y)?;
    s.free_async(z).ctx("free_async")?;
    s.synchronize().ctx("synchronize")?;
    let r = if got.iter().all(|&b| b == 7) {
        RawUse::Kept
    } else if got.iter().all(|&b| b == 0xEE) {
        RawUse::Reused
    } else {
        return Err("the raw copy read neither the old bytes nor the new ones".into());
    };
    if mark && r == RawUse::Reused {
        return Err(
            "record_use: the freed buffer's memory was reused before the marked stream's raw \
             copy ran"
                .into(),
        );
    }
    Ok(r)
}
