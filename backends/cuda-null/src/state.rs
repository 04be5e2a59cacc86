//! The null driver's state: call counters, the host-function thread and its tickets, and the
//! tables of device and page-locked allocations. Safe code; the FFI surface is `driver.rs`.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};

/// Declares the exported driver functions: an index per function ([`F`]) and their names.
macro_rules! driver_functions {
    ($($f:ident),* $(,)?) => {
        /// One exported driver function (the index of its counters).
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        #[derive(Debug, Clone, Copy)]
        #[repr(usize)]
        pub(crate) enum F { $($f),* }
        /// The exported driver functions' names, in [`F`] order.
        pub(crate) const NAMES: &[&str] = &[$(stringify!($f)),*];
    };
}

driver_functions!(
    cuInit,
    cuDriverGetVersion,
    cuDeviceGetCount,
    cuDeviceGet,
    cuDeviceGetAttribute,
    cuDeviceGetName,
    cuDeviceTotalMem_v2,
    cuDeviceGetUuid_v2,
    cuDeviceGetPCIBusId,
    cuDevicePrimaryCtxRetain,
    cuDevicePrimaryCtxRelease_v2,
    cuCtxGetCurrent,
    cuCtxSetCurrent,
    cuCtxGetStreamPriorityRange,
    cuCtxSynchronize,
    cuMemGetInfo_v2,
    cuThreadExchangeStreamCaptureMode,
    cuStreamCreate,
    cuStreamCreateWithPriority,
    cuStreamDestroy_v2,
    cuStreamQuery,
    cuStreamSynchronize,
    cuStreamWaitEvent,
    cuStreamGetFlags,
    cuStreamGetPriority,
    cuStreamGetId,
    cuEventCreate,
    cuEventRecord,
    cuEventQuery,
    cuEventSynchronize,
    cuEventDestroy_v2,
    cuModuleLoadDataEx,
    cuModuleGetFunction,
    cuModuleUnload,
    cuFuncGetParamInfo,
    cuFuncGetAttribute,
    cuLaunchKernel,
    cuLaunchKernelEx,
    cuLaunchHostFunc,
    cuMemAlloc_v2,
    cuMemFree_v2,
    cuMemGetAddressRange_v2,
    cuMemAllocAsync,
    cuMemAllocFromPoolAsync,
    cuMemFreeAsync,
    cuDeviceGetDefaultMemPool,
    cuMemHostAlloc,
    cuMemFreeHost,
    cuMemcpyHtoDAsync_v2,
    cuMemcpyDtoHAsync_v2,
    cuMemcpyDtoDAsync_v2,
    cuMemsetD8Async,
    cuMemsetD16Async,
    cuMemsetD32Async,
    cuMemGetAllocationGranularity,
    cuMemAddressReserve,
    cuMemAddressFree,
    cuMemCreate,
    cuMemRelease,
    cuMemMap,
    cuMemUnmap,
    cuMemSetAccess,
    cuMemExportToShareableHandle,
    cuMemImportFromShareableHandle,
);

const N: usize = NAMES.len();

static CALLS: [AtomicU64; N] = [const { AtomicU64::new(0) }; N];

/// Driver calls made since the process started (never reset): the order of calls.
static SEQ: AtomicU64 = AtomicU64::new(0);
/// The position in that order of the latest call of each function (0: never called).
static LAST: [AtomicU64; N] = [const { AtomicU64::new(0) }; N];

/// Driver calls made on the host-function thread (from inside a host function), which CUDA
/// does not permit: a correct caller leaves this at 0.
static HOST_FN_CALLS: AtomicU64 = AtomicU64::new(0);

/// Driver calls made from inside a host function since the last reset.
pub(crate) fn host_fn_calls() -> u64 {
    HOST_FN_CALLS.load(Ordering::Relaxed)
}

thread_local! {
    static MINE: [Cell<u64>; N] = const { [const { Cell::new(0) }; N] };
    /// Whether this thread is the host-function thread.
    static HOST_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Counts one call of `f` (process-wide and for the calling thread), then, in the eviction
/// mode ([`evict`]), streams through the eviction buffer.
#[inline]
pub(crate) fn hit(f: F) {
    CALLS[f as usize].fetch_add(1, Ordering::Relaxed);
    LAST[f as usize].fetch_max(SEQ.fetch_add(1, Ordering::Relaxed) + 1, Ordering::Relaxed);
    if HOST_THREAD.try_with(|h| h.get()).unwrap_or(false) {
        HOST_FN_CALLS.fetch_add(1, Ordering::Relaxed);
    }
    let _ = MINE.try_with(|m| m[f as usize].set(m[f as usize].get() + 1));
    if let Some(b) = evict_buffer() {
        evict(b);
    }
}

/// The eviction mode's buffer: `XNULL_EVICT_KB` KiB (read once per process; unset, 0 or
/// unparsable: off, `None`), at most 1 GiB.
fn evict_buffer() -> Option<&'static [u64]> {
    static BUF: OnceLock<Option<Box<[u64]>>> = OnceLock::new();
    BUF.get_or_init(|| {
        let kb = std::env::var("XNULL_EVICT_KB")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&kb| kb > 0)?
            .min(1 << 20);
        // Non-zero contents, so that no page is the shared zero page.
        Some((0..kb * 1024 / 8).map(|i| i as u64 | 1).collect())
    })
    .as_deref()
}

thread_local! {
    /// Nanoseconds the calling thread spent in [`evict`] since its last reset.
    static EVICT_NS: Cell<u64> = const { Cell::new(0) };
}

/// Reads one word of every cache line of `b`, as a real driver's call pushes the caller's
/// lines out of the core's L1 and L2 caches with its own; the time it took is added to the
/// calling thread's [`evicted_ns`], which a timing subtracts.
#[inline(never)]
fn evict(b: &[u64]) {
    let t = std::time::Instant::now();
    let mut acc = 0u64;
    for line in b.chunks(8) {
        acc ^= line[0];
    }
    std::hint::black_box(acc);
    let ns = t.elapsed().as_nanos() as u64;
    let _ = EVICT_NS.try_with(|c| c.set(c.get() + ns));
}

/// Nanoseconds the calling thread spent evicting (`XNULL_EVICT_KB`) since its last reset; 0
/// when the mode is off.
pub(crate) fn evicted_ns() -> u64 {
    EVICT_NS.try_with(Cell::get).unwrap_or(0)
}

fn index(name: &str) -> Option<usize> {
    NAMES.iter().position(|n| *n == name)
}

/// Calls of `name` by every thread since the last reset; `None` for a name not exported.
pub(crate) fn calls(name: &str) -> Option<u64> {
    index(name).map(|i| CALLS[i].load(Ordering::Relaxed))
}

/// The position of the latest call of `name` in the order of every driver call made since the
/// process started (1: the first call; 0: never called); `None` for a name not exported. A
/// call's position is taken when it is counted, before its body runs.
pub(crate) fn last_call(name: &str) -> Option<u64> {
    index(name).map(|i| LAST[i].load(Ordering::Relaxed))
}

/// Calls of `name` by the calling thread since its last reset.
pub(crate) fn thread_calls(name: &str) -> Option<u64> {
    let i = index(name)?;
    MINE.try_with(|m| m[i].get()).ok()
}

/// Calls of each function still to fail (`xnull_fail_next`), and the code they return.
static FAIL_LEFT: [AtomicU64; N] = [const { AtomicU64::new(0) }; N];
static FAIL_CODE: [AtomicU32; N] = [const { AtomicU32::new(0) }; N];

/// Makes the next `n` calls of `name` (any thread) return `code` without running; `n` = 0
/// clears. `false` for a name not exported.
pub(crate) fn fail_next(name: &str, n: u64, code: u32) -> bool {
    let Some(i) = index(name) else {
        return false;
    };
    FAIL_CODE[i].store(code, Ordering::Relaxed);
    FAIL_LEFT[i].store(n, Ordering::Release);
    true
}

/// The code a call of `f` must fail with, if one is still to fail (one load otherwise).
#[inline]
pub(crate) fn injected(f: F) -> Option<u32> {
    let i = f as usize;
    if FAIL_LEFT[i].load(Ordering::Acquire) == 0 {
        return None;
    }
    FAIL_LEFT[i]
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
        .ok()
        .map(|_| FAIL_CODE[i].load(Ordering::Relaxed))
}

/// Zeroes the process-wide counters and the calling thread's, and clears injected failures.
pub(crate) fn reset() {
    for c in &CALLS {
        c.store(0, Ordering::Relaxed);
    }
    for c in &FAIL_LEFT {
        c.store(0, Ordering::Relaxed);
    }
    WAITED_NS.store(0, Ordering::Relaxed);
    HOST_FN_CALLS.store(0, Ordering::Relaxed);
    let _ = MINE.try_with(|m| m.iter().for_each(|c| c.set(0)));
    let _ = EVICT_NS.try_with(|c| c.set(0));
}

// ---- The host-function thread ----------------------------------------------------------

/// A host function with its argument, ready to run.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

struct Queue {
    tx: Mutex<(u64, Sender<(u64, Job)>)>,
}

/// Tickets of host functions that have run (all tickets up to this one).
static DONE: Mutex<u64> = Mutex::new(0);
static DONE_CV: Condvar = Condvar::new();
static DONE_FAST: AtomicU64 = AtomicU64::new(0);
/// The last ticket handed out.
static ISSUED: AtomicU64 = AtomicU64::new(0);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn queue() -> &'static Queue {
    static Q: OnceLock<Queue> = OnceLock::new();
    Q.get_or_init(|| {
        let (tx, rx) = channel::<(u64, Job)>();
        std::thread::Builder::new()
            .name("xnull-host-fn".into())
            .spawn(move || {
                HOST_THREAD.with(|h| h.set(true));
                for (ticket, job) in rx {
                    // A panic here would be the null driver's own bug: never unwind further.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    *lock(&DONE) = ticket;
                    DONE_FAST.store(ticket, Ordering::Release);
                    DONE_CV.notify_all();
                }
            })
            .expect("start the null driver's host-function thread");
        Queue {
            tx: Mutex::new((0, tx)),
        }
    })
}

/// Queues `job` behind every host function queued before; returns its ticket.
pub(crate) fn enqueue(job: Job) -> Result<u64, ()> {
    let q = queue();
    let mut g = lock(&q.tx);
    let ticket = g.0 + 1;
    g.1.send((ticket, job)).map_err(|_| ())?;
    g.0 = ticket;
    ISSUED.store(ticket, Ordering::Release);
    Ok(ticket)
}

/// The last ticket handed out (every host function queued so far).
pub(crate) fn issued() -> u64 {
    ISSUED.load(Ordering::Acquire)
}

/// Whether the host function of `ticket` (and every one before it) has run.
pub(crate) fn done(ticket: u64) -> bool {
    DONE_FAST.load(Ordering::Acquire) >= ticket
}

/// `CUDA_ERROR_NOT_PERMITTED`: a wait from inside a host function (it would wait for itself).
pub(crate) const NOT_PERMITTED: u32 = 800;

/// Waits until the host function of `ticket` (and every one before it) has run.
pub(crate) fn wait(ticket: u64) -> Result<(), u32> {
    if done(ticket) {
        return Ok(());
    }
    if HOST_THREAD.with(|h| h.get()) {
        return Err(NOT_PERMITTED);
    }
    let t = std::time::Instant::now();
    let mut g = lock(&DONE);
    while *g < ticket {
        g = DONE_CV.wait(g).unwrap_or_else(|e| e.into_inner());
    }
    drop(g);
    let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
    WAITED_NS.fetch_add(ns, Ordering::Relaxed);
    Ok(())
}

/// Nanoseconds callers spent blocked in [`wait`] (all threads) since the last reset.
static WAITED_NS: AtomicU64 = AtomicU64::new(0);

/// Nanoseconds callers spent waiting for host functions since the last reset.
pub(crate) fn waited_ns() -> u64 {
    WAITED_NS.load(Ordering::Relaxed)
}

// ---- Allocations ------------------------------------------------------------------------

/// Live allocations by base address: `len` (bytes asked for).
#[derive(Default)]
pub(crate) struct Allocations {
    map: Mutex<BTreeMap<u64, usize>>,
}

impl Allocations {
    pub(crate) fn insert(&self, base: u64, len: usize) {
        lock(&self.map).insert(base, len);
    }

    /// Removes the allocation starting at `base`, returning its length.
    pub(crate) fn remove(&self, base: u64) -> Option<usize> {
        lock(&self.map).remove(&base)
    }

    /// The allocation `(base, len)` holding `[p, p + n)`, if one does.
    pub(crate) fn containing(&self, p: u64, n: usize) -> Option<(u64, usize)> {
        let g = lock(&self.map);
        let (&base, &len) = g.range(..=p).next_back()?;
        let end = base.checked_add(len as u64)?;
        let want = p.checked_add(n as u64)?;
        (p < end.max(base + 1) && want <= end).then_some((base, len))
    }
}

/// Device memory (host heap memory standing in for it).
pub(crate) static DEVICE_MEM: OnceLock<Allocations> = OnceLock::new();
/// Page-locked host memory (`cuMemHostAlloc`, plain heap memory here).
pub(crate) static HOST_MEM: OnceLock<Allocations> = OnceLock::new();

/// The device-memory table.
pub(crate) fn device_mem() -> &'static Allocations {
    DEVICE_MEM.get_or_init(Allocations::default)
}

/// The page-locked memory table.
pub(crate) fn host_mem() -> &'static Allocations {
    HOST_MEM.get_or_init(Allocations::default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_found_inside_allocations_only() {
        let a = Allocations::default();
        a.insert(1000, 100);
        assert_eq!(a.containing(1000, 100), Some((1000, 100)));
        assert_eq!(a.containing(1050, 50), Some((1000, 100)));
        assert_eq!(a.containing(1050, 51), None);
        assert_eq!(a.containing(999, 1), None);
        assert_eq!(a.remove(1000), Some(100));
        assert_eq!(a.containing(1000, 1), None);
    }

    #[test]
    fn host_functions_run_in_order_and_waits_see_them() {
        let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
        let mut last = 0;
        for i in 0..5 {
            let s = std::sync::Arc::clone(&seen);
            last = enqueue(Box::new(move || lock(&s).push(i))).unwrap();
        }
        wait(last).unwrap();
        assert!(done(last));
        assert_eq!(*lock(&seen), vec![0, 1, 2, 3, 4]);
    }

    /// Serialises the tests that reset the counters (a reset clears injected failures).
    static SERIAL: Mutex<()> = Mutex::new(());

    #[test]
    fn injected_failures_count_down() {
        let _g = lock(&SERIAL);
        assert!(!fail_next("cuNothing", 1, 2));
        assert!(fail_next("cuStreamCreate", 2, 2));
        assert_eq!(injected(F::cuStreamCreate), Some(2));
        assert_eq!(injected(F::cuEventCreate), None, "another function failed");
        assert_eq!(injected(F::cuStreamCreate), Some(2));
        assert_eq!(injected(F::cuStreamCreate), None, "a third call failed");
        assert!(fail_next("cuStreamCreate", 5, 2));
        assert!(fail_next("cuStreamCreate", 0, 2));
        assert_eq!(injected(F::cuStreamCreate), None, "n = 0 did not clear");
    }

    #[test]
    fn counters_count_per_name() {
        let _g = lock(&SERIAL);
        reset();
        hit(F::cuInit);
        hit(F::cuInit);
        assert_eq!(thread_calls("cuInit"), Some(2));
        assert!(calls("cuInit").unwrap() >= 2);
        assert_eq!(calls("cuNothing"), None);
    }

    /// The latest call of each function has its place in the order of all calls, across a
    /// reset (which leaves the order alone).
    #[test]
    fn last_call_orders_functions() {
        let _g = lock(&SERIAL);
        assert_eq!(last_call("cuNothing"), None);
        hit(F::cuMemFree_v2);
        hit(F::cuDevicePrimaryCtxRelease_v2);
        let (free, release) = (
            last_call("cuMemFree_v2"),
            last_call("cuDevicePrimaryCtxRelease_v2"),
        );
        assert!(free.unwrap() > 0);
        assert!(free < release, "{free:?} {release:?}");
        reset();
        hit(F::cuMemFree_v2);
        assert!(
            last_call("cuMemFree_v2") > release,
            "a reset restarted the order"
        );
    }
}
