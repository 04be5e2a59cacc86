//! Streams and events: `cuStream*`, `cuEvent*` (each holds the ticket of the last host function
//! it is ordered after; `cuLaunchHostFunc` is with the launches, in `module`).

use super::*;

pub(super) const STREAM_MAGIC: u64 = 0x5854_524d_4e55_4c4c;
pub(super) const EVENT_MAGIC: u64 = 0x5845_564e_4e55_4c4c;

/// A stream: the ticket of the last host function it must wait for.
pub(super) struct StreamObj {
    magic: u64,
    alive: AtomicBool,
    flags: u32,
    priority: i32,
    id: u64,
    pub(super) ticket: AtomicU64,
    /// Host functions launched on it (`xnull_stream_host_fns`).
    pub(super) host_fns: AtomicU64,
}

/// The special handles (0, `CU_STREAM_LEGACY` = 1, `CU_STREAM_PER_THREAD` = 2): ordered after
/// every host function queued so far on any stream.
pub(super) static DEFAULT_STREAM: StreamObj = StreamObj {
    magic: STREAM_MAGIC,
    alive: AtomicBool::new(true),
    flags: 0,
    priority: 0,
    id: 0,
    ticket: AtomicU64::new(0),
    host_fns: AtomicU64::new(0),
};

pub(super) static NEXT_STREAM_ID: AtomicU64 = AtomicU64::new(16);

pub(super) fn stream(h: CUstream) -> Result<&'static StreamObj, u32> {
    let s = any_stream(h)?;
    if !s.alive.load(Ordering::Acquire) {
        return Err(INVALID_HANDLE);
    }
    Ok(s)
}

/// A stream handle the null driver returned, live or destroyed (the controls read destroyed
/// streams' counters too).
pub(super) fn any_stream(h: CUstream) -> Result<&'static StreamObj, u32> {
    if (h as usize) <= 2 {
        return Ok(&DEFAULT_STREAM);
    }
    // SAFETY: a stream handle is the address of a leaked `StreamObj` (never freed, see the
    // module docs), so it is readable for the life of the process.
    let s = unsafe { &*(h as *const StreamObj) };
    if s.magic != STREAM_MAGIC {
        return Err(INVALID_HANDLE);
    }
    Ok(s)
}

/// The ticket work on `s` is ordered after.
pub(super) fn target(h: CUstream, s: &StreamObj) -> u64 {
    if (h as usize) <= 2 {
        state::issued()
    } else {
        s.ticket.load(Ordering::Acquire)
    }
}

pub(super) fn new_stream(out: *mut CUstream, flags: u32, priority: i32) -> R {
    current()?;
    if out.is_null() || flags > 1 {
        return Err(INVALID_VALUE);
    }
    let s: &'static StreamObj = Box::leak(Box::new(StreamObj {
        magic: STREAM_MAGIC,
        alive: AtomicBool::new(true),
        flags,
        priority: priority.clamp(PRIORITY_GREATEST, 0),
        id: NEXT_STREAM_ID.fetch_add(1, Ordering::Relaxed),
        ticket: AtomicU64::new(0),
        host_fns: AtomicU64::new(0),
    }));
    // SAFETY: checked not null; the caller's out-pointer.
    unsafe { put(out, s as *const StreamObj as CUstream) }
}

/// `cuStreamCreate`.
#[no_mangle]
pub extern "C" fn cuStreamCreate(out: *mut CUstream, flags: u32) -> CUresult {
    run(F::cuStreamCreate, || new_stream(out, flags, 0))
}

/// `cuStreamCreateWithPriority` (the priority is clamped to the range, as the driver does).
#[no_mangle]
pub extern "C" fn cuStreamCreateWithPriority(
    out: *mut CUstream,
    flags: u32,
    priority: i32,
) -> CUresult {
    run(F::cuStreamCreateWithPriority, || {
        new_stream(out, flags, priority)
    })
}

/// `cuStreamDestroy_v2`: the handle is invalid afterwards; queued host functions still run.
#[no_mangle]
pub extern "C" fn cuStreamDestroy_v2(h: CUstream) -> CUresult {
    run(F::cuStreamDestroy_v2, || {
        if (h as usize) <= 2 {
            return Err(INVALID_HANDLE);
        }
        stream(h)?.alive.store(false, Ordering::Release);
        Ok(())
    })
}

/// `cuStreamQuery`: `CUDA_ERROR_NOT_READY` while a host function it waits for has not run.
#[no_mangle]
pub extern "C" fn cuStreamQuery(h: CUstream) -> CUresult {
    run(F::cuStreamQuery, || {
        let s = stream(h)?;
        if state::done(target(h, s)) {
            Ok(())
        } else {
            Err(NOT_READY)
        }
    })
}

/// `cuStreamSynchronize`.
#[no_mangle]
pub extern "C" fn cuStreamSynchronize(h: CUstream) -> CUresult {
    run(F::cuStreamSynchronize, || {
        let s = stream(h)?;
        state::wait(target(h, s))
    })
}

/// `cuStreamWaitEvent`: later work on the stream is ordered after the event's host functions.
#[no_mangle]
pub extern "C" fn cuStreamWaitEvent(h: CUstream, e: CUevent, flags: u32) -> CUresult {
    run(F::cuStreamWaitEvent, || {
        let s = stream(h)?;
        let e = event(e)?;
        if flags > 1 {
            return Err(INVALID_VALUE);
        }
        s.ticket
            .fetch_max(e.ticket.load(Ordering::Acquire), Ordering::AcqRel);
        Ok(())
    })
}

/// `cuStreamGetFlags`.
#[no_mangle]
pub extern "C" fn cuStreamGetFlags(h: CUstream, flags: *mut u32) -> CUresult {
    run(F::cuStreamGetFlags, || {
        let s = stream(h)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(flags, s.flags) }
    })
}

/// `cuStreamGetPriority`.
#[no_mangle]
pub extern "C" fn cuStreamGetPriority(h: CUstream, p: *mut i32) -> CUresult {
    run(F::cuStreamGetPriority, || {
        let s = stream(h)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(p, s.priority) }
    })
}

/// `cuStreamGetId`: created streams from 16 up; the special handles 1 (null and legacy) and 2
/// (per-thread).
#[no_mangle]
pub extern "C" fn cuStreamGetId(h: CUstream, id: *mut u64) -> CUresult {
    run(F::cuStreamGetId, || {
        let s = stream(h)?;
        let v = match h as usize {
            0 | 1 => 1,
            2 => 2,
            _ => s.id,
        };
        // SAFETY: the caller's out-pointer.
        unsafe { put(id, v) }
    })
}

/// An event: the ticket its record was ordered after.
pub(super) struct EventObj {
    magic: u64,
    alive: AtomicBool,
    ticket: AtomicU64,
}

pub(super) fn event(h: CUevent) -> Result<&'static EventObj, u32> {
    if h.is_null() {
        return Err(INVALID_HANDLE);
    }
    // SAFETY: an event handle is the address of a leaked `EventObj` (never freed).
    let e = unsafe { &*(h as *const EventObj) };
    if e.magic != EVENT_MAGIC || !e.alive.load(Ordering::Acquire) {
        return Err(INVALID_HANDLE);
    }
    Ok(e)
}

/// `cuEventCreate`.
#[no_mangle]
pub extern "C" fn cuEventCreate(out: *mut CUevent, flags: u32) -> CUresult {
    run(F::cuEventCreate, || {
        current()?;
        if out.is_null() || flags > 0xf {
            return Err(INVALID_VALUE);
        }
        let e: &'static EventObj = Box::leak(Box::new(EventObj {
            magic: EVENT_MAGIC,
            alive: AtomicBool::new(true),
            ticket: AtomicU64::new(0),
        }));
        // SAFETY: checked not null; the caller's out-pointer.
        unsafe { put(out, e as *const EventObj as CUevent) }
    })
}

/// `cuEventRecord`.
#[no_mangle]
pub extern "C" fn cuEventRecord(e: CUevent, h: CUstream) -> CUresult {
    run(F::cuEventRecord, || {
        let e = event(e)?;
        let s = stream(h)?;
        e.ticket.store(target(h, s), Ordering::Release);
        Ok(())
    })
}

/// `cuEventQuery`.
#[no_mangle]
pub extern "C" fn cuEventQuery(e: CUevent) -> CUresult {
    run(F::cuEventQuery, || {
        if state::done(event(e)?.ticket.load(Ordering::Acquire)) {
            Ok(())
        } else {
            Err(NOT_READY)
        }
    })
}

/// `cuEventSynchronize`.
#[no_mangle]
pub extern "C" fn cuEventSynchronize(e: CUevent) -> CUresult {
    run(F::cuEventSynchronize, || {
        state::wait(event(e)?.ticket.load(Ordering::Acquire))
    })
}

/// `cuEventDestroy_v2`.
#[no_mangle]
pub extern "C" fn cuEventDestroy_v2(e: CUevent) -> CUresult {
    run(F::cuEventDestroy_v2, || {
        event(e)?.alive.store(false, Ordering::Release);
        Ok(())
    })
}
