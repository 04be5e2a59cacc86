//! The work a stream worker runs: the `Task` enum (copies, memsets, event records / resets /
//! waits, callbacks, host funcs, simulated kernels, faults), its execution on the worker, the
//! simulated kernels' exports (`xsimLaunchDelay`, `xsimLaunchLcg`; simulator-only, NOT part of
//! ACL) and `ExtTask`, through which a vendor area living in its own module (value wait /
//! write) adds a task: it pushes `Task::Ext(Arc<..>)`; the stream worker runs it in order like
//! any other task, skips it once the context is poisoned, and keeps it in captures and
//! persistent streams.

use crate::callback::*;
use crate::codes::*;
use crate::error::*;
use crate::event::*;
use crate::stream::*;
use std::ffi::c_void;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

/// A task a stream worker runs in order.
pub(crate) trait ExtTask: Send + Sync {
    /// Runs the task on `stream`'s worker. Long waits must return once
    /// `stream.cancelled(epoch)` (abort / force destroy) or the context is poisoned.
    fn run(&self, stream: &Stream, epoch: u64);
}

/// Work item executed by a stream worker (or recorded by capture / persistent streams).
#[derive(Clone)]
pub(crate) enum Task {
    Copy {
        dst: usize,
        src: usize,
        n: usize,
    },
    Set {
        dst: usize,
        val: u8,
        n: usize,
    },
    Record {
        ev: Arc<Event>,
        gen: u64,
    },
    Reset(Arc<Event>),
    Wait {
        ev: Arc<Event>,
        target: u64,
    },
    Callback {
        f: unsafe extern "C" fn(*mut c_void),
        data: usize,
        block: bool,
        tid: u64,
    },
    HostFunc {
        f: unsafe extern "C" fn(*mut c_void),
        data: usize,
    },
    Delay(u64),
    Lcg {
        ptr: usize,
        words: usize,
        rounds: u32,
    },
    Fault(i32),
    /// Work of a vendor area that lives in its own module (value wait/write, ...).
    Ext(Arc<dyn crate::task::ExtTask>),
}

impl Task {
    /// Turns a template into a queued task: records get a new generation, waits snapshot the
    /// record current at enqueue time.
    pub(crate) fn instantiate(&self) -> Task {
        match self {
            Task::Record { ev, .. } => {
                let mut g = lock(&ev.st);
                g.record_gen += 1;
                let gen = g.record_gen;
                g.pending.insert(gen);
                g.recorded = true;
                crate::ipc_event::on_record(ev, gen);
                Task::Record {
                    ev: ev.clone(),
                    gen: g.record_gen,
                }
            }
            Task::Wait { ev, .. } => Task::Wait {
                ev: ev.clone(),
                target: crate::ipc_event::wait_target(ev)
                    .unwrap_or_else(|| lock(&ev.st).record_gen),
            },
            t => t.clone(),
        }
    }
    /// Called for work dropped by abort/force destroy: complete records so that nobody hangs.
    pub(crate) fn discard(self) {
        if let Task::Record { ev, gen } = self {
            ev.complete(gen);
        }
    }
}

impl Stream {
    pub(crate) fn run(&self, t: Task, epoch: u64) {
        self.tasks_run.fetch_add(1, SeqCst);
        let poisoned = self.ctx.poisoned() != 0;
        match t {
            Task::Copy { dst, src, n } if !poisoned => {
                // SAFETY: the caller of aclrtMemcpyAsync promised both ranges stay valid until
                // the copy executes; `copy` tolerates overlap.
                unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, n) }
            }
            Task::Set { dst, val, n } if !poisoned => {
                // SAFETY: the caller of aclrtMemsetAsync promised the range stays valid.
                unsafe { std::ptr::write_bytes(dst as *mut u8, val, n) }
            }
            Task::Record { ev, gen } => ev.complete(gen),
            Task::Reset(ev) => {
                let mut g = lock(&ev.st);
                g.pending.clear();
                g.recorded = false;
                g.ts_ns = None;
                ev.cv.notify_all();
            }
            Task::Wait { ev, target } if !poisoned => {
                let stop = || self.cancelled(epoch) || self.ctx.poisoned() != 0;
                if crate::ipc_event::wait_shared(&ev, target, &stop) {
                    return;
                }
                let mut g = lock(&ev.st);
                while g.pending.contains(&target) {
                    drop(g);
                    if self.cancelled(epoch) || self.ctx.poisoned() != 0 {
                        return;
                    }
                    g = lock(&ev.st);
                    if !g.pending.contains(&target) {
                        break;
                    }
                    g = wait_for(&ev.cv, g, SLICE);
                }
            }
            Task::Callback {
                f,
                data,
                block,
                tid,
            } => {
                let done = block.then(|| Arc::new(Done::default()));
                let rep = Report {
                    f,
                    data,
                    done: done.clone(),
                };
                if !deliver_report(tid, rep) {
                    return;
                }
                if let Some(d) = done {
                    self.wait_done(&d, epoch);
                }
            }
            Task::HostFunc { f, data } => {
                let d = Arc::new(Done::default());
                let rep = Report {
                    f,
                    data,
                    done: Some(d.clone()),
                };
                if let Err(rep) = crate::hostfunc::deliver(self.id, rep) {
                    self.ctx.hf_submit(rep);
                }
                self.wait_done(&d, epoch);
            }
            Task::Delay(us) if !poisoned => self.spin(Duration::from_micros(us), epoch),
            Task::Lcg { ptr, words, rounds } if !poisoned => {
                // SAFETY: the caller of xsimLaunchLcg promised `words` u32s at `ptr` stay valid.
                unsafe { lcg_words(ptr as *mut u32, words, rounds) }
            }
            Task::Fault(code) if !poisoned => self.fault(code),
            Task::Ext(x) if !poisoned => x.run(self, epoch),
            _ => {}
        }
    }

    /// Occupies the stream for `d` (a simulated kernel's run time), ending early on abort or
    /// force destroy.
    pub(crate) fn spin(&self, d: Duration, epoch: u64) {
        let end = Instant::now() + d;
        loop {
            let now = Instant::now();
            if now >= end || self.cancelled(epoch) {
                break;
            }
            std::thread::sleep((end - now).min(SLICE));
        }
    }

    /// A device fault with `code`: reports it to the exception callback, then poisons the
    /// context.
    pub(crate) fn fault(&self, code: i32) {
        // Report before poisoning, so a synchronize that sees the code can rely on the
        // exception callback having run.
        crate::exception::raise(self, code);
        self.ctx.poison.store(code, SeqCst);
    }

    fn wait_done(&self, d: &Done, epoch: u64) {
        let mut g = lock(&d.m);
        while !*g {
            drop(g);
            if self.cancelled(epoch) {
                return;
            }
            g = lock(&d.m);
            if *g {
                break;
            }
            g = wait_for(&d.cv, g, SLICE);
        }
    }
}

/// The simulated LCG kernel: for each of the `words` u32 values at `ptr`, `rounds` times
/// `x = x*1664525 + 1013904223` (wrapping).
///
/// # Safety
/// `ptr` must point to `words` valid, 4-byte aligned u32 values no one else accesses meanwhile.
pub(crate) unsafe fn lcg_words(ptr: *mut u32, words: usize, rounds: u32) {
    if words == 0 {
        return;
    }
    // SAFETY: as the caller promised.
    let s = unsafe { std::slice::from_raw_parts_mut(ptr, words) };
    for x in s {
        let mut v = *x;
        for _ in 0..rounds {
            v = v.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        }
        *x = v;
    }
}

/// `aclError xsimLaunchDelay(aclrtStream stream, uint64_t micros)`: a simulated kernel that
/// occupies the stream for `micros` microseconds (interrupted by abort / force destroy).
///
/// # Safety
/// `stream` is a lookup key.
#[no_mangle]
pub unsafe extern "C" fn xsimLaunchDelay(stream: *mut c_void, micros: u64) -> i32 {
    ffi("xsimLaunchDelay", true, || {
        enqueue_stream(stream)?.push(Task::Delay(micros))
    })
}

/// `aclError xsimLaunchLcg(aclrtStream stream, void* devPtr, size_t words, uint32_t rounds)`:
/// a simulated kernel; for each u32 word `x`, `rounds` times `x = x*1664525 + 1013904223`
/// (wrapping).
///
/// # Safety
/// `dev_ptr` must point to `words` u32 values that stay valid until the kernel has run.
#[no_mangle]
pub unsafe extern "C" fn xsimLaunchLcg(
    stream: *mut c_void,
    dev_ptr: *mut c_void,
    words: usize,
    rounds: u32,
) -> i32 {
    ffi("xsimLaunchLcg", true, || {
        if dev_ptr.is_null() && words > 0 {
            return err(ACL_ERROR_INVALID_PARAM, "devPtr is NULL");
        }
        if !(dev_ptr as usize).is_multiple_of(4) {
            return err(ACL_ERROR_INVALID_PARAM, "devPtr is not 4-byte aligned");
        }
        enqueue_stream(stream)?.push(Task::Lcg {
            ptr: dev_ptr as usize,
            words,
            rounds,
        })
    })
}
