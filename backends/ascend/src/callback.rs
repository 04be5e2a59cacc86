//! Host callbacks over ACL's report mechanism, the per-device report thread, the background
//! reaper, and the `extern "C"` trampolines (the only module besides `sys`/`result` that
//! contains `unsafe`).
//!
//! **Report thread.** The first callback on a device spawns one thread for it. The thread makes
//! the device context current (`aclrtSetCurrentContext`), publishes its `pthread_self()`, then
//! loops `aclrtProcessReport(100)` (507012 = idle, normal) until its stop flag is set. Each
//! stream is `aclrtSubscribeReport`-ed to that thread lazily, before its first callback; the
//! callback itself is `aclrtLaunchCallback(trampoline, data, ACL_CALLBACK_BLOCK, stream)`.
//! Device drop stops and joins the thread (after its streams were synchronized and
//! unsubscribed by their own drops).
//!
//! **Reaper.** One background thread ([`xstream_core::reaper::Reaper`]) runs deferred
//! releases (stream destroy after a synchronize, buffer free after a device synchronize, model
//! destroy) so that `Drop` never blocks the caller and never calls ACL from inside a callback.
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{JoinHandle, ThreadId};

use xstream_core::callback::CallbackSlot;
use xstream_core::reaper::{ReapJob, Reaper};
use xstream_core::{Allocator, Block, Error, Result};

use crate::result;
use crate::stream::StreamState;
use crate::sys::{AclFns, RawContext, RawStream};

/// The per-device report-processing thread.
#[derive(Debug)]
pub(crate) struct Reporter {
    pub(crate) tid: u64,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    thread: ThreadId,
}

impl Reporter {
    /// Spawns the thread and waits until it has its context and thread id.
    pub(crate) fn spawn(t: &'static AclFns, ctx: RawContext, ordinal: usize) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let (tx, rx) = channel::<Result<u64>>();
        let handle = std::thread::Builder::new()
            .name(format!("xstream-acl-report-{ordinal}"))
            .spawn(move || {
                if let Err(e) = result::device::set_current_context(t, ctx) {
                    let _ = tx.send(Err(e));
                    return;
                }
                crate::device::note_bound(ctx);
                // SAFETY: pthread_self has no preconditions.
                let tid = unsafe { libc::pthread_self() } as u64;
                let _ = tx.send(Ok(tid));
                while !stop2.load(Ordering::Acquire) {
                    match result::callback::process_report(t, 100) {
                        0 | 507_012 => {}
                        // 107012: nothing subscribed yet; anything else: keep serving.
                        _ => std::thread::sleep(std::time::Duration::from_millis(1)),
                    }
                }
            })
            .map_err(|e| Error::invalid(format!("cannot spawn the ACL report thread: {e}")))?;
        let thread = handle.thread().id();
        let tid = rx
            .recv()
            .map_err(|_| Error::invalid("the ACL report thread died at start"))??;
        Ok(Self {
            tid,
            stop,
            handle: Some(handle),
            thread,
        })
    }

    /// Stops the thread and joins it (detaches when called from the thread itself).
    pub(crate) fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            if std::thread::current().id() != self.thread {
                let _ = h.join();
            }
        }
    }
}

/// What a report-style callback carries through `void* userData`.
pub(crate) struct CbData {
    pub(crate) slot: Arc<CallbackSlot>,
    pub(crate) state: Arc<StreamState>,
    pub(crate) t: &'static AclFns,
    /// The callback's position among the stream's enqueues (0 for a captured callback): when
    /// it runs, everything enqueued before it has completed.
    pub(crate) pos: u64,
    /// Whether the device tracks the slot (xstream's failure paths may fail it). An untracked
    /// callback is only ever run by the runtime: [`cancel_outstanding`] drops it uncalled (its
    /// closure's in-flight host memory goes to the stream's orphans, released after it).
    pub(crate) tracked: bool,
}

/// Launches `data` as a blocking report callback on `stream`. On failure the data (and the
/// callback inside, uncalled) is dropped.
pub(crate) fn launch(t: &'static AclFns, stream: RawStream, data: CbData) -> Result<()> {
    let p = outstanding_insert(data);
    let r = result::callback::launch(
        t,
        trampoline,
        p,
        crate::sys::consts::ACL_CALLBACK_BLOCK,
        stream,
    );
    if r.is_err() {
        // The runtime refused the task, so it will never call the trampoline with `p`.
        drop(outstanding_take(p));
    }
    r
}

/// Callback data handed to the runtime and not yet claimed, by address. Whoever removes an
/// address owns its box: the trampoline when the runtime calls it, or
/// [`cancel_outstanding`] when a force-destroyed stream's queued callbacks will never be
/// called (without it their boxes, and the stream state they hold, would leak).
fn outstanding() -> std::sync::MutexGuard<'static, std::collections::HashSet<usize>> {
    static SET: OnceLock<Mutex<std::collections::HashSet<usize>>> = OnceLock::new();
    SET.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn outstanding_insert(data: CbData) -> *mut c_void {
    let p = Box::into_raw(Box::new(data));
    outstanding().insert(p as usize);
    p.cast()
}

/// Takes ownership of the box at `p` if nobody has claimed it yet.
fn outstanding_take(p: *mut c_void) -> Option<Box<CbData>> {
    if !outstanding().remove(&(p as usize)) {
        return None;
    }
    // SAFETY: `p` came from `Box::into_raw` in `outstanding_insert`, and removing it from the
    // set under the lock makes this the only owner.
    Some(unsafe { Box::from_raw(p.cast::<CbData>()) })
}

/// Fails with `err`, in enqueue order, the tracked callbacks of `state` that the runtime will
/// never call (`aclrtDestroyStreamForce` dropped them), and frees the data of all of them (an
/// untracked one is dropped uncalled: only the runtime runs those). They are the stream's
/// entries still unclaimed in [`outstanding`] (the trampoline claims one the runtime calls), so
/// the stream keeps no list of its own and a slot's one tracking reference is the device's list,
/// which may reuse the slot once its data is freed here. A slot the device's failure path failed
/// already does not run again.
pub(crate) fn cancel_outstanding(state: &Arc<StreamState>, err: &Error) {
    let mut mine: Vec<Box<CbData>> = {
        let mut set = outstanding();
        let addrs: Vec<usize> = set
            .iter()
            .copied()
            .filter(|&a| {
                // SAFETY: every address in the set is a live box nobody else may free while
                // the set's lock is held.
                Arc::ptr_eq(&unsafe { &*(a as *const CbData) }.state, state)
            })
            .collect();
        addrs
            .into_iter()
            .map(|a| {
                set.remove(&a);
                // SAFETY: removed from the set under its lock: this is now the only owner.
                unsafe { Box::from_raw(a as *mut CbData) }
            })
            .collect()
    };
    // Outside the set's lock: the callbacks run here.
    mine.sort_by_key(|d| d.pos);
    for d in mine.iter().filter(|d| d.tracked) {
        d.slot.fire(Err(err.clone()));
    }
    drop(mine);
}

/// Launches `data` with `aclrtLaunchHostFunc` (the runtime's own callback thread).
pub(crate) fn launch_host_func(t: &'static AclFns, stream: RawStream, data: CbData) -> Result<()> {
    let p = outstanding_insert(data);
    let r = result::callback::launch_host_func(t, stream, trampoline, p);
    if r.is_err() {
        drop(outstanding_take(p));
    }
    r
}

/// The `aclrtCallback` every xstream callback goes through. Never unwinds.
unsafe extern "C" fn trampoline(data: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let _span = tracing::trace_span!("acl_host_callback").entered();
        // Claimed here unless the stream was force-destroyed and its data freed already.
        let Some(d) = outstanding_take(data) else {
            return;
        };
        // Learn whether earlier work failed: a poisoned context reports its sticky code on
        // query. Skipped while the stream captures (a query would invalidate the capture).
        let status = if d.state.capture.is_capturing() {
            Ok(())
        } else {
            match result::stream::query(d.t, d.state.raw) {
                Err(e) if e.is_sticky() => Err(e),
                _ => Ok(()),
            }
        };
        if status.is_ok() {
            d.state.note_done(d.pos.saturating_sub(1));
        }
        d.slot.fire(status);
    }));
}

/// A `aclrtAllocatorBlock`: the allocator's block and the allocator itself (the
/// get-address callback receives only the block).
struct BlockRec {
    alloc: Arc<dyn Allocator>,
    block: Block,
}

/// The `aclrtAllocator` object type: a leaked `Box<Arc<dyn Allocator>>`.
pub(crate) type AllocObj = Arc<dyn Allocator>;

/// Leaks `a` as the `aclrtAllocator` object pointer.
pub(crate) fn alloc_obj_into_raw(a: Arc<dyn Allocator>) -> *mut c_void {
    Box::into_raw(Box::new(a)).cast()
}

/// Frees an object pointer made by [`alloc_obj_into_raw`] (after unregistering it).
pub(crate) fn alloc_obj_free(p: usize) {
    if p != 0 {
        // SAFETY: `p` came from `alloc_obj_into_raw` and was unregistered, so the runtime no
        // longer calls the trampolines with it; freed once by the owner.
        drop(unsafe { Box::from_raw(p as *mut AllocObj) });
    }
}

/// The registered allocator behind an object pointer, if it is ours.
pub(crate) fn alloc_obj_get(p: *mut c_void) -> Option<Arc<dyn Allocator>> {
    if p.is_null() {
        return None;
    }
    // SAFETY: only called with a pointer compared equal to one we leaked and still own.
    Some(Arc::clone(unsafe { &*p.cast::<AllocObj>() }))
}

fn obj<'a>(p: *mut c_void) -> Option<&'a AllocObj> {
    // SAFETY: the runtime passes back the object pointer we registered, which stays alive
    // until after unregistration.
    (!p.is_null()).then(|| unsafe { &*p.cast::<AllocObj>() })
}

fn block_into_raw(alloc: &AllocObj, b: Option<Block>) -> *mut c_void {
    match b {
        Some(block) => Box::into_raw(Box::new(BlockRec {
            alloc: Arc::clone(alloc),
            block,
        }))
        .cast(),
        None => std::ptr::null_mut(),
    }
}

pub(crate) unsafe extern "C" fn alloc_tramp(a: *mut c_void, size: usize) -> *mut c_void {
    catch_unwind(AssertUnwindSafe(|| match obj(a) {
        Some(o) => block_into_raw(o, o.alloc(size)),
        None => std::ptr::null_mut(),
    }))
    .unwrap_or(std::ptr::null_mut())
}

pub(crate) unsafe extern "C" fn advise_tramp(
    a: *mut c_void,
    size: usize,
    addr: *mut c_void,
) -> *mut c_void {
    catch_unwind(AssertUnwindSafe(|| match obj(a) {
        Some(o) => block_into_raw(o, o.alloc_advise(size, addr as u64)),
        None => std::ptr::null_mut(),
    }))
    .unwrap_or(std::ptr::null_mut())
}

pub(crate) unsafe extern "C" fn free_tramp(_a: *mut c_void, block: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if !block.is_null() {
            // SAFETY: `block` came from `block_into_raw`; the runtime frees each block once.
            let rec = unsafe { Box::from_raw(block.cast::<BlockRec>()) };
            rec.alloc.free(rec.block);
        }
    }));
}

pub(crate) unsafe extern "C" fn addr_tramp(block: *mut c_void) -> *mut c_void {
    catch_unwind(AssertUnwindSafe(|| {
        if block.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: `block` came from `block_into_raw` and is live until freed.
        let rec = unsafe { &*block.cast::<BlockRec>() };
        rec.alloc.address(rec.block) as *mut c_void
    }))
    .unwrap_or(std::ptr::null_mut())
}

/// The trampolines a registration installs.
pub(crate) fn alloc_funcs() -> result::allocator::Funcs {
    result::allocator::Funcs {
        alloc: alloc_tramp,
        free: free_tramp,
        advise: advise_tramp,
        addr: addr_tramp,
    }
}

type Job = ReapJob;

/// The Ascend backend's reaper (`xstream_core::reaper`: order, panics, the exit flush and
/// parking). Its exit handler is registered when its thread starts, after the ACL library was
/// loaded, so it runs before the runtime's own exit handlers. The CANN runtime tears its
/// devices down in an exit handler (`PrepareRuntimeProcessExitImpl` in `libruntime_v100.so`);
/// a reaper job still destroying a stream or resetting a device at that moment raced with it
/// and crashed the process after `main` returned (a core dump of `xstream conform` on the
/// real runtime over the driver emulation: `aclrtResetDevice` on the reaper thread against
/// that handler on the main thread, docs/simulators.md).
static REAPER: Reaper = Reaper::new("xstream-acl-reaper", register_reaper_at_exit, || {});

fn register_reaper_at_exit() -> bool {
    #[cfg(not(miri))]
    {
        // SAFETY: `reaper_at_exit` is a plain `extern "C" fn()` that never unwinds
        // (`Reaper::at_exit` catches panics); registering it has no other precondition.
        unsafe { libc::atexit(reaper_at_exit) == 0 }
    }
    #[cfg(miri)]
    {
        false
    }
}

/// The process-exit handler of [`REAPER`] (`atexit`).
extern "C" fn reaper_at_exit() {
    REAPER.at_exit();
}

/// Runs `job` on the background reaper thread ([`REAPER`]).
pub(crate) fn reap(job: Job) {
    REAPER.submit(job);
}

/// Waits (at most `limit`) until every job queued on the reaper before this call has run:
/// stream creation at the device limit calls it so that streams dropped just before are
/// destroyed first. Returns whether the reaper got there in time.
pub(crate) fn reap_flush(limit: std::time::Duration) -> bool {
    REAPER.flush(limit)
}
