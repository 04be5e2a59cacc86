//! Core simulator state: contexts, streams, events, workers, capture, faults and configuration.

use crate::codes::*;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::{c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// A failed call: ACL code plus message for `aclGetRecentErrMsg`.
pub(crate) struct AclErr {
    pub(crate) code: i32,
    pub(crate) msg: String,
}

/// Result type of every call body.
pub(crate) type R<T = ()> = Result<T, AclErr>;

/// Builds an error result.
pub(crate) fn err<T>(code: i32, msg: impl Into<String>) -> R<T> {
    Err(AclErr {
        code,
        msg: msg.into(),
    })
}

/// Locks a mutex, ignoring poisoning (user callbacks never run under our locks, but be robust).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn wait_for<'a, T>(cv: &Condvar, g: MutexGuard<'a, T>, d: Duration) -> MutexGuard<'a, T> {
    match cv.wait_timeout(g, d) {
        Ok((g, _)) => g,
        Err(e) => e.into_inner().0,
    }
}

/// Polling slice used by interruptible waits.
const SLICE: Duration = Duration::from_millis(5);

// ---------------------------------------------------------------------------------------------
// Thread-local state and error reporting
// ---------------------------------------------------------------------------------------------

thread_local! {
    static CURRENT: RefCell<Option<Arc<Context>>> = const { RefCell::new(None) };
    static LAST_ERR: Cell<i32> = const { Cell::new(0) };
    static ERR_MSG: RefCell<Option<String>> = const { RefCell::new(None) };
    static MSG_OUT: RefCell<Option<CString>> = const { RefCell::new(None) };
    static CAP_MODE: Cell<i32> = const { Cell::new(ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) };
}

/// `pthread_self()` of the calling thread as the `u64` ACL uses for thread ids.
pub(crate) fn self_tid() -> u64 {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as u64 }
}

fn set_error(name: &str, e: &AclErr) {
    let _ = LAST_ERR.try_with(|c| c.set(e.code));
    let _ = ERR_MSG.try_with(|m| {
        *m.borrow_mut() = Some(format!("EE{}: {name}: {} (xsim)", e.code, e.msg));
    });
}

/// Runs an exported call body: counts it, applies injected faults, optionally checks `aclInit`,
/// converts errors and panics into ACL codes and records the thread's last error/message.
pub(crate) fn ffi(name: &'static str, need_init: bool, f: impl FnOnce() -> R) -> i32 {
    let r = catch_unwind(AssertUnwindSafe(|| {
        if let Some(code) = fault_hit(name) {
            return err(code, "injected fault (XSIM_FAULTS)");
        }
        if need_init && !INITED.load(SeqCst) {
            return err(ACL_ERROR_UNINITIALIZE, "aclInit has not been called");
        }
        f()
    }));
    match r {
        Ok(Ok(())) => ACL_SUCCESS,
        Ok(Err(e)) => {
            set_error(name, &e);
            e.code
        }
        Err(_) => {
            set_error(
                name,
                &AclErr {
                    code: ACL_ERROR_RT_INTERNAL_ERROR,
                    msg: "internal panic caught at the FFI boundary".into(),
                },
            );
            ACL_ERROR_RT_INTERNAL_ERROR
        }
    }
}

/// Drains the thread's recent error message; the returned pointer stays valid until the next call.
pub(crate) fn take_err_msg() -> *const libc::c_char {
    let msg = ERR_MSG.try_with(|m| m.borrow_mut().take()).ok().flatten();
    match msg {
        None => std::ptr::null(),
        Some(s) => {
            let c = CString::new(s.replace('\0', " ")).unwrap_or_default();
            let p = c.as_ptr();
            let _ = MSG_OUT.try_with(|o| *o.borrow_mut() = Some(c));
            p
        }
    }
}

/// Returns (and optionally clears) the thread's last error code.
pub(crate) fn last_error(clear: bool) -> i32 {
    LAST_ERR
        .try_with(|c| {
            let v = c.get();
            if clear {
                c.set(0);
            }
            v
        })
        .unwrap_or(0)
}

/// Thread capture-interaction mode (`aclmdlRICaptureThreadExchangeMode`).
pub(crate) fn exchange_cap_mode(new: i32) -> i32 {
    CAP_MODE.with(|c| c.replace(new))
}

// ---------------------------------------------------------------------------------------------
// Init, configuration
// ---------------------------------------------------------------------------------------------

/// Whether `aclInit` is in effect.
pub(crate) static INITED: AtomicBool = AtomicBool::new(false);
/// `aclInit` reference count.
pub(crate) static INIT_COUNT: Mutex<u64> = Mutex::new(0);

/// Simulated product.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Product {
    A2,
    P310,
    T910,
}

static PRODUCT_OVERRIDE: AtomicU8 = AtomicU8::new(0);
static LIMIT_STREAMS: AtomicU32 = AtomicU32::new(0);
static LIMIT_EVENTS: AtomicU32 = AtomicU32::new(0);

fn env_u32(name: &str) -> Option<u32> {
    std::env::var(name).ok()?.trim().parse().ok()
}

pub(crate) fn parse_product(s: &str) -> Option<Product> {
    match s.trim().to_ascii_lowercase().as_str() {
        "a2" | "a3" | "910b" | "910c" | "950" | "" => Some(Product::A2),
        "310p" => Some(Product::P310),
        "910" => Some(Product::T910),
        _ => None,
    }
}

/// Sets (Some) or clears (None) the programmatic product override.
pub(crate) fn set_product(p: Option<Product>) {
    let v = match p {
        None => 0,
        Some(Product::A2) => 1,
        Some(Product::P310) => 2,
        Some(Product::T910) => 3,
    };
    PRODUCT_OVERRIDE.store(v, SeqCst);
}

pub(crate) fn product() -> Product {
    static ENV: OnceLock<Product> = OnceLock::new();
    match PRODUCT_OVERRIDE.load(SeqCst) {
        1 => Product::A2,
        2 => Product::P310,
        3 => Product::T910,
        _ => *ENV.get_or_init(|| {
            std::env::var("XSIM_PRODUCT")
                .ok()
                .and_then(|s| parse_product(&s))
                .unwrap_or(Product::A2)
        }),
    }
}

/// Programmatic limit override (0 = back to env / product default).
pub(crate) fn set_limits(streams: u32, events: u32) {
    LIMIT_STREAMS.store(streams, SeqCst);
    LIMIT_EVENTS.store(events, SeqCst);
}

pub(crate) fn max_streams() -> u32 {
    static ENV: OnceLock<Option<u32>> = OnceLock::new();
    let o = LIMIT_STREAMS.load(SeqCst);
    if o != 0 {
        return o;
    }
    if let Some(v) = *ENV.get_or_init(|| env_u32("XSIM_MAX_STREAMS")) {
        return v;
    }
    match product() {
        Product::A2 => 1984,
        Product::P310 => 1024,
        Product::T910 => 2048,
    }
}

pub(crate) fn max_events() -> u32 {
    static ENV: OnceLock<Option<u32>> = OnceLock::new();
    let o = LIMIT_EVENTS.load(SeqCst);
    if o != 0 {
        return o;
    }
    if let Some(v) = *ENV.get_or_init(|| env_u32("XSIM_MAX_EVENTS")) {
        return v;
    }
    match product() {
        Product::A2 => 65536,
        Product::P310 => 1023,
        Product::T910 => 65535,
    }
}

pub(crate) fn device_count() -> u32 {
    static ENV: OnceLock<u32> = OnceLock::new();
    *ENV.get_or_init(|| env_u32("XSIM_DEVICES").unwrap_or(1).max(1))
}

/// Nanoseconds since the simulated device "booted" (first use of the library).
pub(crate) fn now_ns() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

// ---------------------------------------------------------------------------------------------
// Fault injection and call counting
// ---------------------------------------------------------------------------------------------

struct Rule {
    sym: String,
    nth: Option<u64>,
    code: i32,
    seen: u64,
}

#[derive(Default)]
struct Faults {
    rules: Vec<Rule>,
    counts: HashMap<String, u64>,
}

fn faults() -> &'static Mutex<Faults> {
    static F: OnceLock<Mutex<Faults>> = OnceLock::new();
    F.get_or_init(|| {
        let f = Mutex::new(Faults::default());
        if let Ok(spec) = std::env::var("XSIM_FAULTS") {
            // Bad entries in the environment are ignored (there is nobody to report them to).
            let mut g = lock(&f);
            let _ = apply_spec(&mut g, &spec);
        }
        f
    })
}

/// Global poison code (from `poison:CODE`), consulted by every context.
static GLOBAL_POISON: AtomicI32 = AtomicI32::new(0);
static HANGS: Mutex<Vec<i32>> = Mutex::new(Vec::new());
static HANG_CV: Condvar = Condvar::new();

fn apply_spec(f: &mut Faults, spec: &str) -> R {
    let mut rules = Vec::new();
    let mut hangs = Vec::new();
    let mut poison = None;
    for entry in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let parts: Vec<&str> = entry.split(':').map(str::trim).collect();
        let bad = || AclErr {
            code: ACL_ERROR_INVALID_PARAM,
            msg: format!("bad fault entry '{entry}'"),
        };
        match parts.as_slice() {
            ["hang", id] => hangs.push(id.parse::<i32>().map_err(|_| bad())?),
            ["poison", code] => poison = Some(code.parse::<i32>().map_err(|_| bad())?),
            [sym, n, code] => {
                let nth = if *n == "*" {
                    None
                } else {
                    match n.parse::<u64>() {
                        Ok(v) if v >= 1 => Some(v),
                        _ => return Err(bad()),
                    }
                };
                let code = code.parse::<i32>().map_err(|_| bad())?;
                rules.push(Rule {
                    sym: sym.to_string(),
                    nth,
                    code,
                    seen: 0,
                });
            }
            _ => return Err(bad()),
        }
    }
    f.rules = rules;
    if !hangs.is_empty() {
        lock(&HANGS).extend(hangs);
    }
    if let Some(p) = poison {
        GLOBAL_POISON.store(p, SeqCst);
    }
    Ok(())
}

/// Replaces the fault rules with `spec` (see README for the grammar).
pub(crate) fn set_faults(spec: &str) -> R {
    let mut g = lock(faults());
    apply_spec(&mut g, spec)
}

/// Counts a call of `name` and returns the injected code if a rule fires.
pub(crate) fn fault_hit(name: &str) -> Option<i32> {
    let mut g = lock(faults());
    *g.counts.entry(name.to_string()).or_insert(0) += 1;
    let mut hit = None;
    for r in g.rules.iter_mut().filter(|r| r.sym == name) {
        r.seen += 1;
        if hit.is_none() && r.nth.map_or(true, |n| n == r.seen) {
            hit = Some(r.code);
        }
    }
    hit
}

/// Counts a call without applying faults (for xsim helpers).
pub(crate) fn count_call(name: &str) {
    let mut g = lock(faults());
    *g.counts.entry(name.to_string()).or_insert(0) += 1;
}

pub(crate) fn call_count(name: &str) -> u64 {
    lock(faults()).counts.get(name).copied().unwrap_or(0)
}

/// Clears rules, counters, hangs and poison.
pub(crate) fn reset_faults() {
    {
        let mut g = lock(faults());
        g.rules.clear();
        g.counts.clear();
    }
    GLOBAL_POISON.store(0, SeqCst);
    release_hangs();
    let ctxs: Vec<Arc<Context>> = lock(reg()).ctxs.values().cloned().collect();
    for c in ctxs {
        c.poison.store(0, SeqCst);
    }
}

pub(crate) fn release_hangs() {
    lock(&HANGS).clear();
    HANG_CV.notify_all();
}

// ---------------------------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------------------------

/// Threads the simulator runs (stream workers and per-context host-func threads).
pub(crate) static LIVE_THREADS: AtomicU64 = AtomicU64::new(0);
static NEXT_STREAM_ID: AtomicI32 = AtomicI32::new(1);
static NEXT_EVENT_ID: AtomicU32 = AtomicU32::new(1);
static NEXT_SEQ: AtomicU64 = AtomicU64::new(1);

/// A report delivered to a host thread.
pub(crate) struct Report {
    pub(crate) f: unsafe extern "C" fn(*mut c_void),
    pub(crate) data: usize,
    pub(crate) done: Option<Arc<Done>>,
}

/// Completion flag of a blocking callback.
#[derive(Default)]
pub(crate) struct Done {
    m: Mutex<bool>,
    cv: Condvar,
}

impl Report {
    /// Runs the callback (catching panics) and signals completion.
    pub(crate) fn run(self) {
        let (f, data) = (self.f, self.data);
        // SAFETY: the user registered `f` as an aclrtCallback/aclrtHostFunc taking `data`.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe { f(data as *mut c_void) }));
        if let Some(d) = self.done {
            *lock(&d.m) = true;
            d.cv.notify_all();
        }
    }
}

#[derive(Default)]
pub(crate) struct HfState {
    queue: VecDeque<Report>,
    thread: bool,
    stop: bool,
}

/// A context (primary per device, or user-created).
pub(crate) struct Context {
    pub(crate) device: i32,
    pub(crate) primary: bool,
    pub(crate) poison: AtomicI32,
    pub(crate) destroyed: AtomicBool,
    pub(crate) default_stream: Mutex<Option<Arc<Stream>>>,
    hf: Mutex<HfState>,
    hf_cv: Condvar,
}

impl Context {
    /// Sticky error code of the context (0 = healthy).
    pub(crate) fn poisoned(&self) -> i32 {
        let own = self.poison.load(SeqCst);
        if own != 0 {
            own
        } else {
            GLOBAL_POISON.load(SeqCst)
        }
    }
    pub(crate) fn check_poison(&self) -> R {
        match self.poisoned() {
            0 => Ok(()),
            c => err(c, "context poisoned by an earlier device fault"),
        }
    }
    pub(crate) fn default_stream(&self) -> R<Arc<Stream>> {
        lock(&self.default_stream)
            .clone()
            .map_or_else(|| err(ACL_ERROR_RT_CONTEXT_NULL, "context destroyed"), Ok)
    }
    /// Makes sure the per-context host-func thread runs.
    pub(crate) fn ensure_hf_thread(self: &Arc<Self>) -> R {
        let mut g = lock(&self.hf);
        if g.thread {
            return Ok(());
        }
        let me = self.clone();
        LIVE_THREADS.fetch_add(1, SeqCst);
        g.thread = true;
        g.stop = false;
        let r = std::thread::Builder::new()
            .name("xsim-hostfunc".into())
            .spawn(move || me.hf_loop());
        if r.is_err() {
            g.thread = false;
            LIVE_THREADS.fetch_sub(1, SeqCst);
            return err(ACL_ERROR_RT_INTERNAL_ERROR, "cannot spawn host-func thread");
        }
        Ok(())
    }
    fn hf_loop(self: Arc<Self>) {
        loop {
            let mut g = lock(&self.hf);
            while g.queue.is_empty() && !g.stop {
                g = wait_for(&self.hf_cv, g, Duration::from_millis(100));
            }
            let Some(rep) = g.queue.pop_front() else {
                g.thread = false;
                LIVE_THREADS.fetch_sub(1, SeqCst);
                self.hf_cv.notify_all();
                return;
            };
            drop(g);
            rep.run();
        }
    }
    fn hf_submit(&self, rep: Report) {
        let mut g = lock(&self.hf);
        if !g.thread {
            drop(g);
            rep.run();
            return;
        }
        g.queue.push_back(rep);
        self.hf_cv.notify_all();
    }
    fn stop_hf(&self) {
        let mut g = lock(&self.hf);
        g.stop = true;
        self.hf_cv.notify_all();
        let deadline = Instant::now() + Duration::from_secs(5);
        while g.thread && Instant::now() < deadline {
            g = wait_for(&self.hf_cv, g, SLICE);
        }
    }
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
    fn instantiate(&self) -> Task {
        match self {
            Task::Record { ev, .. } => {
                let mut g = lock(&ev.st);
                g.record_gen += 1;
                let gen = g.record_gen;
                g.pending.insert(gen);
                g.recorded = true;
                Task::Record {
                    ev: ev.clone(),
                    gen: g.record_gen,
                }
            }
            Task::Wait { ev, .. } => Task::Wait {
                ev: ev.clone(),
                target: lock(&ev.st).record_gen,
            },
            t => t.clone(),
        }
    }
    /// Called for work dropped by abort/force destroy: complete records so that nobody hangs.
    fn discard(self) {
        if let Task::Record { ev, gen } = self {
            ev.complete(gen);
        }
    }
}

/// Event kind (which creator made it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum EvKind {
    Default,
    Legacy,
    Ex,
}

#[derive(Default)]
pub(crate) struct EvState {
    pub(crate) record_gen: u64,
    /// Records enqueued and not yet complete. Records on different streams may complete out
    /// of order, so a wait targets one record, not "the highest completed".
    pub(crate) pending: std::collections::BTreeSet<u64>,
    /// The record whose completion time `ts_ns` holds.
    pub(crate) ts_gen: u64,
    pub(crate) recorded: bool,
    pub(crate) ts_ns: Option<u64>,
    pub(crate) capture: Option<Arc<Capture>>,
}

impl EvState {
    /// Whether the most recent record has completed (true before any record).
    pub(crate) fn latest_done(&self) -> bool {
        !self.pending.contains(&self.record_gen)
    }
}

/// An event.
pub(crate) struct Event {
    pub(crate) id: u32,
    pub(crate) flags: u32,
    pub(crate) kind: EvKind,
    pub(crate) ctx: Arc<Context>,
    pub(crate) st: Mutex<EvState>,
    pub(crate) cv: Condvar,
}

impl Event {
    pub(crate) fn complete(&self, gen: u64) {
        let mut g = lock(&self.st);
        g.pending.remove(&gen);
        if gen >= g.ts_gen {
            g.ts_gen = gen;
            g.ts_ns = Some(now_ns());
        }
        self.cv.notify_all();
    }
    pub(crate) fn is_complete(&self) -> bool {
        lock(&self.st).latest_done()
    }
    pub(crate) fn has_timeline(&self) -> bool {
        self.kind == EvKind::Default || self.flags & ACL_EVENT_TIME_LINE != 0
    }
    /// The active capture this event was recorded in, if any.
    pub(crate) fn active_capture(&self) -> Option<Arc<Capture>> {
        let g = lock(&self.st);
        g.capture.clone().filter(|c| lock(&c.st).active)
    }
}

#[derive(Default)]
pub(crate) struct SState {
    pub(crate) queue: VecDeque<Task>,
    pub(crate) worker: bool,
    pub(crate) epoch: u64,
    pub(crate) destroyed: bool,
    pub(crate) capture: Option<Arc<Capture>>,
    pub(crate) sub_tid: Option<u64>,
    pub(crate) hostfunc: bool,
    pub(crate) failure_mode: Option<u64>,
    pub(crate) attrs: [u32; 5],
    pub(crate) persistent: Vec<(u64, Task)>,
    pub(crate) bound_ri: Option<usize>,
}

/// A stream.
pub(crate) struct Stream {
    pub(crate) id: i32,
    pub(crate) ctx: Arc<Context>,
    pub(crate) flags: u32,
    pub(crate) is_default: bool,
    pub(crate) priority: AtomicU32,
    pub(crate) st: Mutex<SState>,
    pub(crate) cv: Condvar,
    /// Tasks this stream's worker has started (the simulator's task id of the last one).
    pub(crate) tasks_run: AtomicU32,
}

impl Stream {
    pub(crate) fn handle(self: &Arc<Self>) -> *mut c_void {
        Arc::as_ptr(self) as *mut c_void
    }
    /// Streams whose synchronize returns at once and whose query is meaningless.
    pub(crate) fn sync_noop(&self) -> bool {
        self.flags & (ACL_STREAM_PERSISTENT | ACL_STREAM_DEVICE_USE_ONLY | ACL_STREAM_CPU_SCHEDULE)
            != 0
    }
    /// The capture this stream takes part in, if active.
    pub(crate) fn capture(&self) -> Option<Arc<Capture>> {
        lock(&self.st)
            .capture
            .clone()
            .filter(|c| lock(&c.st).active)
    }

    /// Enqueues (or records) a task template.
    pub(crate) fn push(self: &Arc<Self>, t: Task) -> R {
        let mut g = lock(&self.st);
        if let Some(cap) = g.capture.clone() {
            drop(g);
            let mut ri = lock(&cap.ri.st);
            if let Task::Record { ev, .. } = &t {
                let mut e = lock(&ev.st);
                e.capture = Some(cap.clone());
                e.recorded = true;
            }
            ri.tasks.push(t);
            return Ok(());
        }
        if g.destroyed {
            return err(ACL_ERROR_INVALID_PARAM, "stream destroyed");
        }
        if self.flags & ACL_STREAM_PERSISTENT != 0 {
            g.persistent.push((NEXT_SEQ.fetch_add(1, SeqCst), t));
            return Ok(());
        }
        let t = t.instantiate();
        if let Task::Record { ev, .. } = &t {
            lock(&ev.st).capture = None;
        }
        g.queue.push_back(t);
        self.ensure_worker(&mut g)
    }

    /// Enqueues several already-instantiable templates atomically (model execution).
    pub(crate) fn push_all(self: &Arc<Self>, ts: &[Task]) -> R {
        for t in ts {
            self.push(t.clone())?;
        }
        Ok(())
    }

    fn ensure_worker(self: &Arc<Self>, g: &mut SState) -> R {
        if g.worker {
            return Ok(());
        }
        g.worker = true;
        LIVE_THREADS.fetch_add(1, SeqCst);
        let me = self.clone();
        let r = std::thread::Builder::new()
            .name(format!("xsim-stream-{}", self.id))
            .stack_size(256 * 1024)
            .spawn(move || me.worker_loop());
        if r.is_err() {
            g.worker = false;
            LIVE_THREADS.fetch_sub(1, SeqCst);
            for t in g.queue.drain(..) {
                t.discard();
            }
            return err(ACL_ERROR_RT_INTERNAL_ERROR, "cannot spawn stream worker");
        }
        Ok(())
    }

    fn worker_loop(self: Arc<Self>) {
        loop {
            let (task, epoch) = {
                let mut g = lock(&self.st);
                match g.queue.pop_front() {
                    Some(t) => (t, g.epoch),
                    None => {
                        g.worker = false;
                        LIVE_THREADS.fetch_sub(1, SeqCst);
                        self.cv.notify_all();
                        return;
                    }
                }
            };
            // A panic inside a task must not kill the worker silently: treat as a fault.
            let r = catch_unwind(AssertUnwindSafe(|| self.run(task, epoch)));
            if r.is_err() {
                self.ctx.poison.store(ACL_ERROR_RT_INTERNAL_ERROR, SeqCst);
            }
            self.hang_point(epoch);
            self.cv.notify_all();
        }
    }

    pub(crate) fn cancelled(&self, epoch: u64) -> bool {
        let g = lock(&self.st);
        g.epoch != epoch
    }

    fn hang_point(&self, epoch: u64) {
        let mut h = lock(&HANGS);
        while h.contains(&self.id) {
            if self.cancelled(epoch) {
                return;
            }
            h = wait_for(&HANG_CV, h, SLICE);
        }
    }

    fn run(&self, t: Task, epoch: u64) {
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
            Task::Delay(us) if !poisoned => {
                let end = Instant::now() + Duration::from_micros(us);
                loop {
                    let now = Instant::now();
                    if now >= end || self.cancelled(epoch) {
                        break;
                    }
                    std::thread::sleep((end - now).min(SLICE));
                }
            }
            Task::Lcg { ptr, words, rounds } if !poisoned => {
                // SAFETY: the caller of xsimLaunchLcg promised `words` u32s at `ptr` stay valid.
                let s = unsafe { std::slice::from_raw_parts_mut(ptr as *mut u32, words) };
                for x in s {
                    let mut v = *x;
                    for _ in 0..rounds {
                        v = v.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    }
                    *x = v;
                }
            }
            Task::Fault(code) if !poisoned => {
                // Report before poisoning, so a synchronize that sees the code can rely on the
                // exception callback having run.
                crate::exception::raise(self, code);
                self.ctx.poison.store(code, SeqCst);
            }
            Task::Ext(x) if !poisoned => x.run(self, epoch),
            _ => {}
        }
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

    /// Waits until the stream has no queued or running work.
    pub(crate) fn wait_idle(&self, deadline: Option<Instant>, timeout_code: i32) -> R {
        let mut g = lock(&self.st);
        let epoch = g.epoch;
        while g.worker {
            if g.epoch != epoch {
                return err(
                    ACL_ERROR_RT_STREAM_ABORT,
                    "stream aborted during synchronize",
                );
            }
            self.ctx.check_poison()?;
            let mut slice = Duration::from_millis(50);
            if let Some(d) = deadline {
                let now = Instant::now();
                if now >= d {
                    return err(timeout_code, "synchronize timed out");
                }
                slice = slice.min(d - now);
            }
            g = wait_for(&self.cv, g, slice);
        }
        if g.epoch != epoch {
            return err(
                ACL_ERROR_RT_STREAM_ABORT,
                "stream aborted during synchronize",
            );
        }
        drop(g);
        self.ctx.check_poison()
    }

    /// Drops queued work and cancels waits of the running task.
    pub(crate) fn abort(&self) {
        let dropped: Vec<Task> = {
            let mut g = lock(&self.st);
            g.epoch += 1;
            g.queue.drain(..).collect()
        };
        for t in dropped {
            t.discard();
        }
        self.cv.notify_all();
        HANG_CV.notify_all();
    }

    /// Waits (bounded) until the worker has exited.
    pub(crate) fn wait_worker_exit(&self, limit: Duration) {
        let end = Instant::now() + limit;
        let mut g = lock(&self.st);
        while g.worker && Instant::now() < end {
            g = wait_for(&self.cv, g, SLICE);
        }
    }
}

/// Delivers a report to a subscribed thread; runs it inline when the thread is gone.
/// Returns false when it ran inline.
fn deliver_report(tid: u64, rep: Report) -> bool {
    let mut subs = lock(subs());
    if let Some(e) = subs.get_mut(&tid) {
        e.pending.push_back(rep);
        SUBS_CV.notify_all();
        true
    } else {
        drop(subs);
        rep.run();
        false
    }
}

// ---------------------------------------------------------------------------------------------
// Report subscriptions
// ---------------------------------------------------------------------------------------------

/// A thread subscribed with `aclrtSubscribeReport`.
pub(crate) struct Sub {
    pub(crate) device: i32,
    pub(crate) streams: HashSet<usize>,
    pub(crate) pending: VecDeque<Report>,
}

/// Subscriptions by thread id.
pub(crate) fn subs() -> &'static Mutex<HashMap<u64, Sub>> {
    static S: OnceLock<Mutex<HashMap<u64, Sub>>> = OnceLock::new();
    S.get_or_init(|| Mutex::new(HashMap::new()))
}
/// Signalled when a report is queued.
pub(crate) static SUBS_CV: Condvar = Condvar::new();

/// Removes `stream` from `tid`'s subscription; drops the entry when it has nothing left.
pub(crate) fn unsubscribe(tid: u64, stream: usize) {
    let mut map = lock(subs());
    if let Some(e) = map.get_mut(&tid) {
        e.streams.remove(&stream);
        if e.streams.is_empty() && e.pending.is_empty() {
            map.remove(&tid);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Capture / model run instances
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
pub(crate) struct RiState {
    pub(crate) tasks: Vec<Task>,
    pub(crate) built: bool,
    pub(crate) bound: Vec<Arc<Stream>>,
}

/// An `aclmdlRI`.
#[derive(Default)]
pub(crate) struct Ri {
    pub(crate) st: Mutex<RiState>,
}

#[derive(Default)]
pub(crate) struct CapState {
    pub(crate) active: bool,
    pub(crate) invalidated: bool,
    pub(crate) joined: Vec<Arc<Stream>>,
}

/// An active (or ended) capture.
pub(crate) struct Capture {
    pub(crate) origin: usize,
    pub(crate) mode: i32,
    pub(crate) thread: u64,
    pub(crate) ri: Arc<Ri>,
    pub(crate) st: Mutex<CapState>,
}

impl Capture {
    pub(crate) fn invalidate(&self) {
        lock(&self.st).invalidated = true;
    }
}

/// Active captures.
pub(crate) static CAPTURES: Mutex<Vec<Arc<Capture>>> = Mutex::new(Vec::new());

/// Captures that forbid unsafe calls (default stream, device sync) on the calling thread.
/// Simplification: only the capturing thread is affected (unless it switched to RELAXED).
pub(crate) fn captures_affecting_me() -> Vec<Arc<Capture>> {
    let me = self_tid();
    let mode = CAP_MODE.with(|c| c.get());
    if mode == ACL_MODEL_RI_CAPTURE_MODE_RELAXED {
        return Vec::new();
    }
    lock(&CAPTURES)
        .iter()
        .filter(|c| c.thread == me && c.mode != ACL_MODEL_RI_CAPTURE_MODE_RELAXED)
        .cloned()
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Registry
// ---------------------------------------------------------------------------------------------

/// Every live handle, by address.
#[derive(Default)]
pub(crate) struct Reg {
    pub(crate) streams: HashMap<usize, Arc<Stream>>,
    pub(crate) events: HashMap<usize, Arc<Event>>,
    pub(crate) ctxs: HashMap<usize, Arc<Context>>,
    pub(crate) ris: HashMap<usize, Arc<Ri>>,
    pub(crate) primary: HashMap<i32, (Arc<Context>, u64)>,
    pub(crate) stream_count: HashMap<i32, u32>,
    pub(crate) event_count: HashMap<i32, u32>,
}

pub(crate) fn reg() -> &'static Mutex<Reg> {
    static REG: OnceLock<Mutex<Reg>> = OnceLock::new();
    REG.get_or_init(|| Mutex::new(Reg::default()))
}

/// The calling thread's current context.
pub(crate) fn cur_ctx() -> R<Arc<Context>> {
    let c = CURRENT.with(|c| c.borrow().clone());
    match c {
        Some(c) if !c.destroyed.load(SeqCst) => Ok(c),
        _ => err(
            ACL_ERROR_RT_CONTEXT_NULL,
            "no current context on this thread",
        ),
    }
}

pub(crate) fn set_cur_ctx(c: Option<Arc<Context>>) {
    CURRENT.with(|cur| *cur.borrow_mut() = c);
}

fn clear_cur_if(ctx: &Arc<Context>) {
    CURRENT.with(|cur| {
        let mut b = cur.borrow_mut();
        if b.as_ref().is_some_and(|c| Arc::ptr_eq(c, ctx)) {
            *b = None;
        }
    });
}

/// Creates a stream on `ctx` (checks the per-device limit unless hidden).
pub(crate) fn new_stream(
    ctx: &Arc<Context>,
    flags: u32,
    priority: u32,
    is_default: bool,
    hidden: bool,
) -> R<Arc<Stream>> {
    let mut r = lock(reg());
    if !hidden {
        let n = r.stream_count.entry(ctx.device).or_insert(0);
        if *n >= max_streams() {
            return err(ACL_ERROR_RT_NO_STREAM_RESOURCE, "stream limit reached");
        }
        *n += 1;
    }
    let s = Arc::new(Stream {
        id: NEXT_STREAM_ID.fetch_add(1, SeqCst),
        ctx: ctx.clone(),
        flags,
        is_default,
        priority: AtomicU32::new(priority),
        st: Mutex::new(SState::default()),
        cv: Condvar::new(),
        tasks_run: AtomicU32::new(0),
    });
    if !hidden {
        r.streams.insert(Arc::as_ptr(&s) as usize, s.clone());
    }
    Ok(s)
}

/// Removes a stream from the registry and marks it destroyed (work must already be handled).
pub(crate) fn retire_stream(s: &Arc<Stream>) {
    crate::hostfunc::forget_stream(s.id);
    let key = Arc::as_ptr(s) as usize;
    let tid = {
        let mut g = lock(&s.st);
        g.destroyed = true;
        g.sub_tid.take()
    };
    if let Some(tid) = tid {
        unsubscribe(tid, key);
    }
    let mut r = lock(reg());
    if r.streams.remove(&key).is_some() {
        if let Some(n) = r.stream_count.get_mut(&s.ctx.device) {
            *n = n.saturating_sub(1);
        }
    }
}

/// Force-destroys a stream: drops its work and retires it.
pub(crate) fn force_destroy_stream(s: &Arc<Stream>) {
    s.abort();
    retire_stream(s);
    s.wait_worker_exit(Duration::from_secs(2));
}

/// Creates a context with its default stream.
pub(crate) fn new_context(device: i32, primary: bool) -> R<Arc<Context>> {
    let ctx = Arc::new(Context {
        device,
        primary,
        poison: AtomicI32::new(0),
        destroyed: AtomicBool::new(false),
        default_stream: Mutex::new(None),
        hf: Mutex::new(HfState::default()),
        hf_cv: Condvar::new(),
    });
    let ds = new_stream(&ctx, 0, 0, true, false)?;
    *lock(&ctx.default_stream) = Some(ds);
    lock(reg())
        .ctxs
        .insert(Arc::as_ptr(&ctx) as usize, ctx.clone());
    Ok(ctx)
}

/// Destroys a context: drops work on all its streams, stops its host-func thread.
pub(crate) fn destroy_context(ctx: &Arc<Context>) {
    ctx.destroyed.store(true, SeqCst);
    let streams: Vec<Arc<Stream>> = {
        let mut r = lock(reg());
        r.ctxs.remove(&(Arc::as_ptr(ctx) as usize));
        r.streams
            .values()
            .filter(|s| Arc::ptr_eq(&s.ctx, ctx))
            .cloned()
            .collect()
    };
    for s in &streams {
        force_destroy_stream(s);
    }
    lock(&ctx.default_stream).take();
    ctx.stop_hf();
    clear_cur_if(ctx);
}

/// Validates a device id.
pub(crate) fn check_device(d: i32) -> R {
    if d < 0 || d as u32 >= device_count() {
        return err(
            ACL_ERROR_RT_INVALID_DEVICEID,
            format!("invalid device id {d}"),
        );
    }
    Ok(())
}

/// Looks up a stream handle; NULL means the current context's default stream.
pub(crate) fn stream_of(h: *mut c_void) -> R<Arc<Stream>> {
    if h.is_null() {
        return cur_ctx()?.default_stream();
    }
    lock(reg())
        .streams
        .get(&(h as usize))
        .cloned()
        .map_or_else(|| err(ACL_ERROR_INVALID_PARAM, "unknown stream handle"), Ok)
}

pub(crate) fn event_of(h: *mut c_void) -> R<Arc<Event>> {
    if h.is_null() {
        return err(ACL_ERROR_INVALID_PARAM, "event is NULL");
    }
    lock(reg())
        .events
        .get(&(h as usize))
        .cloned()
        .map_or_else(|| err(ACL_ERROR_INVALID_PARAM, "unknown event handle"), Ok)
}

pub(crate) fn ri_of(h: *mut c_void) -> R<Arc<Ri>> {
    if h.is_null() {
        return err(ACL_ERROR_INVALID_PARAM, "modelRI is NULL");
    }
    lock(reg()).ris.get(&(h as usize)).cloned().map_or_else(
        || err(ACL_ERROR_INVALID_PARAM, "unknown modelRI handle"),
        Ok,
    )
}

/// Rejects use of a default stream by a thread inside capture (invalidating the capture).
pub(crate) fn check_default_in_capture(s: &Stream) -> R {
    if s.is_default {
        let caps = captures_affecting_me();
        if !caps.is_empty() {
            for c in caps {
                c.invalidate();
            }
            return err(
                ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT,
                "default stream used during capture",
            );
        }
    }
    Ok(())
}

/// Resolves a stream for an enqueue-type call: needs the stream's context to be current,
/// a healthy context and no default-stream use inside capture.
pub(crate) fn enqueue_stream(h: *mut c_void) -> R<Arc<Stream>> {
    let ctx = cur_ctx()?;
    let s = stream_of(h)?;
    if !Arc::ptr_eq(&s.ctx, &ctx) {
        return err(
            ACL_ERROR_RT_STREAM_CONTEXT,
            "stream does not belong to the current context",
        );
    }
    check_default_in_capture(&s)?;
    s.ctx.check_poison()?;
    Ok(s)
}

/// Converts an ACL timeout (ms, -1 forever) into a deadline; 0 or < -1 → `bad`.
pub(crate) fn deadline(timeout: i32, bad: i32) -> R<Option<Instant>> {
    match timeout {
        -1 => Ok(None),
        t if t > 0 => Ok(Some(Instant::now() + Duration::from_millis(t as u64))),
        _ => err(bad, format!("invalid timeout {timeout}")),
    }
}

/// Number of streams / events per device (for available-number queries).
pub(crate) fn counts(device: i32) -> (u32, u32) {
    let r = lock(reg());
    (
        r.stream_count.get(&device).copied().unwrap_or(0),
        r.event_count.get(&device).copied().unwrap_or(0),
    )
}

/// Registers a new event (checks the per-device limit).
pub(crate) fn new_event(ctx: &Arc<Context>, flags: u32, kind: EvKind) -> R<Arc<Event>> {
    let mut r = lock(reg());
    let n = r.event_count.entry(ctx.device).or_insert(0);
    if *n >= max_events() {
        return err(ACL_ERROR_RT_NO_EVENT_RESOURCE, "event limit reached");
    }
    *n += 1;
    let e = Arc::new(Event {
        id: NEXT_EVENT_ID.fetch_add(1, SeqCst),
        flags,
        kind,
        ctx: ctx.clone(),
        st: Mutex::new(EvState::default()),
        cv: Condvar::new(),
    });
    r.events.insert(Arc::as_ptr(&e) as usize, e.clone());
    Ok(e)
}

/// Live (explicit, non-default) streams and live events.
pub(crate) fn live_counts() -> (u64, u64) {
    let r = lock(reg());
    (
        r.streams.values().filter(|s| !s.is_default).count() as u64,
        r.events.len() as u64,
    )
}
