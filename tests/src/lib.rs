//! # xstream conformance suite
//!
//! One set of behavioural checks, written once against the `xstream_core` traits and run on
//! every backend: by `cargo test` (host, the Ascend simulator, CUDA when a GPU is present) and
//! by `xstream conform --backend B` on a user's own machine.
//!
//! Each check returns [`Outcome::Pass`] with a short detail, [`Outcome::Skip`] with the reason
//! (a capability the device lacks), or an error string saying what broke.
//!
//! ## Modules
//! - `lib.rs` (this file): the check types, shared helpers, the list of checks ([`checks`]),
//!   the skip list ([`may_skip`]) and the runner ([`run`]).
//! - `flags`: flag translation tables, strict / best-effort policy, priority mapping.
//! - `streams`: stream identity and argument checking.
//! - `devinfo`: device facts (memory, compute units, UUID) consistent and stable.
//! - `data`: the built-in compute kernel against its host reference.
//! - `ordering`: event waits across streams, query, the default-stream rule.
//! - [`ordered_use`]: join, record_event, the event pool, allocation without host
//!   synchronization, use tracking by many streams, `record_use` (with a raw-handle copy:
//!   [`ordered_use::record_use_with_raw_copy`]).
//! - `timeouts`: synchronize with a timeout.
//! - `events`: event timing and never-recorded events.
//! - `callbacks`: host callbacks (order, panics, re-entrancy, faults, stream drop).
//! - `capture`: stream capture and replay.
//! - `pool`: futures, the stream pool, host allocators.
//! - [`modules`]: modules and kernels (the builtin module, capture, a user kernel, bad launches).
//! - `memop`: stream memory operations (wait on / write a value).
//! - `reduce`: the built-in reduce (`dst = op(dst, src)` per element) against a typed reference.
//! - `random`: the built-in random fill (statistics with fixed seeds, determinism, bad input).
//! - `peer`: copies between devices (peer access).
//! - `registered`: uploads and downloads of the caller's memory registered in place.
//! - `foreign`: the foreign-buffer rule (every buffer operation refuses another device's buffer).
//! - `raw`: raw buffers (`into_raw`, `from_raw`, `from_raw_borrowed`): round trip, every
//!   stream operation on the taken-back buffer, frees observed, bad descriptors refused.
//! - `vmm`: virtual memory (reserve, map, unmap, access, buffers of mapped bytes, bad input).
//! - `views`: buffer views and typed slices, typed copies, 16/32-bit memsets, zero-length
//!   buffers, aliasing of kernel arguments.
//! - [`collectives`]: the collective checks, generic over `CollectiveBackend` (run by
//!   [`collectives::run_collectives`], and per rank by [`collectives::rank_conformance`]).
//! - [`child`]: this test binary started again as a child process (the interprocess tests).
//! - [`simulator`]: locating the ACL runtime simulator, its test processes and controls.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use xstream_core::{
    Backend, BackendKind, Buffer, Capabilities, Device, Stream, StreamDesc, StreamFlags,
};

/// What a passing or skipped check reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The behaviour was observed; a short detail.
    Pass(String),
    /// The check does not apply; the reason.
    Skip(String),
}

/// The result of one check: `Err` says what broke.
pub type CheckResult = Result<Outcome, String>;

/// Where the checks run.
pub struct Env<B: Backend> {
    /// The device under test.
    pub device: B::Device,
    /// Makes a device whose context a check may poison (a deliberate fault), when the backend
    /// can isolate one within the process.
    pub isolated: Option<fn() -> xstream_core::Result<B::Device>>,
}

/// One named check.
pub struct Check<B: Backend> {
    /// Short name, unique.
    pub name: &'static str,
    /// What it proves.
    pub about: &'static str,
    /// The check.
    pub run: fn(&Env<B>) -> CheckResult,
}

/// Counts of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Checks that passed.
    pub passed: usize,
    /// Checks that failed.
    pub failed: usize,
    /// Checks that were skipped (each listed by [`may_skip`]; an unlisted skip is a failure).
    pub skipped: usize,
    /// Checks listed by [`may_skip`] that passed anyway (counted in `passed` too).
    pub listed_passed: usize,
}

trait Ctx<T> {
    fn ctx(self, what: &str) -> Result<T, String>;
}

impl<T> Ctx<T> for xstream_core::Result<T> {
    fn ctx(self, what: &str) -> Result<T, String> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

fn pass(s: impl Into<String>) -> CheckResult {
    Ok(Outcome::Pass(s.into()))
}

fn need<B: Backend>(env: &Env<B>, cap: Capabilities, why: &str) -> Option<Outcome> {
    if env.device.info().capabilities.contains(cap) {
        None
    } else {
        Some(Outcome::Skip(format!(
            "device lacks capability {cap:?} ({why})"
        )))
    }
}

macro_rules! need {
    ($env:expr, $cap:expr, $why:expr) => {
        if let Some(o) = $crate::need($env, $cap, $why) {
            return Ok(o);
        }
    };
}

// The families of checks; each check is one function that [`checks`] lists.
pub mod alloc_count;
mod callbacks;
mod capture;
pub mod child;
pub mod collectives;
mod data;
mod devinfo;
mod events;
mod flags;
mod foreign;
pub mod limits;
mod memop;
pub mod modules;
pub mod ordered_use;
mod ordering;
mod peer;
mod pool;
mod random;
mod raw;
mod reduce;
pub mod reference;
mod registered;
pub mod simulator;
mod streams;
mod timeouts;
mod views;
mod vmm;
pub mod vmm_share;

pub use flags::{check_portable_kinds, kind_of, portable_kinds, Kind};

fn nb() -> StreamDesc {
    StreamDesc::new().flags(StreamFlags::NON_BLOCKING)
}

/// How long a [`Gate`] holds its stream at most (a guard against hangs, never a timing
/// bound: a check fails when the gate gave up instead of being opened).
const GATE_LIMIT: Duration = Duration::from_secs(10);

/// A host callback that holds its stream until [`Gate::open`]: the work queued behind it
/// stays pending whatever the load of the machine, so checks observe ordering, not time.
struct Gate {
    tx: std::sync::mpsc::Sender<()>,
    released: Arc<Mutex<Option<bool>>>,
}

impl Gate {
    /// Enqueues the holding callback on `s`.
    fn hold<B: Backend>(s: &B::Stream) -> Result<Gate, String> {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let released = Arc::new(Mutex::new(None));
        let r2 = released.clone();
        s.host_callback(move |_| {
            let opened = rx.recv_timeout(GATE_LIMIT).is_ok();
            *r2.lock().unwrap() = Some(opened);
        })
        .ctx("gate callback")?;
        Ok(Gate { tx, released })
    }

    /// Lets the stream go on.
    fn open(&self) {
        let _ = self.tx.send(());
    }

    /// Whether the gate already stopped holding its stream without being opened.
    fn gave_up(&self) -> bool {
        *self.released.lock().unwrap() == Some(false)
    }

    /// Whether the gate ran and was opened by [`Gate::open`] (not given up after
    /// [`GATE_LIMIT`]); call after the stream synchronized.
    fn released(&self) -> bool {
        *self.released.lock().unwrap() == Some(true)
    }
}

fn read_all<B: Backend>(s: &B::Stream, buf: &B::Buffer) -> Result<Vec<u8>, String> {
    let rb = s.read(buf, 0, buf.len()).ctx("read")?;
    s.synchronize().ctx("synchronize after read")?;
    rb.take().ctx("readback")
}

/// Every check, in a stable order.
pub fn checks<B: Backend>() -> Vec<Check<B>> {
    macro_rules! c {
        ($family:ident :: $name:ident, $about:expr) => {
            Check {
                name: stringify!($name),
                about: $about,
                run: $family::$name::<B>,
            }
        };
    }
    vec![
        c!(flags::flag_table_total, "every portable flag has exactly one translation row"),
        c!(flags::flag_policy, "strict refuses unsupported flags by name and vendor-rejected combinations up front; best effort creates anyway and reports what it dropped"),
        c!(flags::priority_mapping, "portable priorities map through the native range; clamps are reported, strict refuses"),
        c!(flags::priority_attribute, "set_attribute(Priority) outside the device range is refused on every backend (never clamped silently); in range it is applied and read back"),
        c!(streams::stream_ids_unique, "stream ids are unique and never reused"),
        c!(streams::bad_input, "invalid arguments give clear errors"),
        c!(data::lcg_kernel, "the built-in compute kernel matches the host reference"),
        c!(data::stream_ordered_alloc, "a buffer freed with free_async keeps its bytes for another stream's queued work"),
        c!(ordering::ordering_across_streams, "an event wait orders work across streams (buffer contents)"),
        c!(ordering::wait_takes_snapshot, "a wait binds to the record current at call time"),
        c!(ordering::query_pending_then_ready, "query reports Pending, then Ready after synchronize"),
        c!(timeouts::sync_timeout_recovers, "synchronize with timeout expires with Timeout and the stream stays usable"),
        c!(events::event_timing, "elapsed time is sane; disabled timing and unrecorded events are distinct errors"),
        c!(events::never_recorded_event, "a never-recorded event is complete and waiting on it is a no-op"),
        c!(callbacks::callbacks_once_in_order, "callbacks run exactly once, in stream order, with Ok"),
        c!(callbacks::callback_panic_surfaces, "a panicking callback is reported once by the next synchronize"),
        c!(callbacks::callback_not_permitted, "xstream calls inside a stream-blocking callback return NotPermitted"),
        c!(callbacks::notify_may_call_xstream, "second-tier callbacks run off the stream and may call xstream"),
        c!(callbacks::callback_error_after_fault, "after a device fault, pending callbacks run once with the sticky error"),
        c!(callbacks::stream_drop_does_not_cancel, "dropping a stream neither blocks nor cancels its work and callbacks"),
        c!(ordering::default_stream_rule, "blocking streams synchronize with the default stream; non-blocking ones do not"),
        c!(capture::capture_defers_and_replays, "captured work runs only on replay; replaying twice equals running twice"),
        c!(capture::capture_gates, "query/sync/callbacks during capture are refused and invalidate the capture"),
        c!(pool::futures_resolve, "stream and event futures resolve; dropping a pending one is harmless"),
        c!(pool::pool_round_robin_and_lease, "the pool hands out streams round-robin and leases exclusively"),
        c!(pool::allocator_lookup, "a registered allocator is found from its stream"),
        c!(modules::module_builtin_lcg, "the builtin module's xstream_lcg matches the host reference; a function outlives its module handle"),
        c!(modules::module_launch_in_capture, "a kernel launched during capture runs only on replay; two replays equal twice the rounds"),
        c!(modules::module_user_kernel, "a user module of the backend's own kind loads and its kernel fills exactly its words"),
        c!(modules::module_bad_input, "missing function, wrong argument count or kind, zero dimensions and a foreign source are clear errors"),
        c!(modules::launch_builder_widths, "the launch builder passes a struct by value and i8/u16/i64/f32 scalars intact (the builtin echo kernel)"),
        c!(devinfo::device_info_consistent, "device facts are consistent (free <= total, counts > 0 where reported) and the UUID / PCI id are stable across two opens"),
        c!(modules::launch_builder_unchecked, "a user kernel through the builder: the checked launch runs where the layout is known; where it is not, it is refused and the unsafe unchecked launch runs"),
        c!(modules::launch_builder_bad_args, "the launch builder refuses a wrong count, a wrong width, a wrong struct size and attributes the backend lacks"),
        Check {
            name: "value_wait_write",
            about: "a memory wait blocks only its stream until a write releases it (32/64-bit, GEQ across a wrap)",
            run: memop::value_wait_write::<B>,
        },
        c!(reduce::reduce_builtin, "the built-in reduce matches a typed reference for every kind and type the device has, refuses bad ranges and replays from a capture"),
        c!(random::random_fill, "the built-in random fill: every distribution and element type within range/mean/variance bounds, deterministic per seed and offset, bad parameters and ranges refused, a captured fill replays"),
        c!(views::views_and_typed_copies, "views and typed slices slice, split and refuse misaligned or out-of-range ranges; memset/16/32, write, read, copy and typed copies (synchronous and page-locked) work through views; a kernel on a view touches only the view"),
        c!(views::fill64, "64-bit fills (memset64) set every element with distinct or equal halves, refuse misaligned and partial ranges, and are no-ops at zero length"),
        c!(views::zero_length, "zero-length buffers are allowed and distinct; zero-length memsets and copies are no-ops"),
        c!(views::kernel_aliasing, "a buffer passed twice to a kernel (out = a + a, a = a + b, views of one buffer) gives the reference result"),
        c!(peer::peer_copy, "with peer access enabled bytes move both ways between devices in stream order; without it, out of bounds or with foreign buffers the copy is refused"),
        // --- ordering and allocation without host sync ---
        c!(ordered_use::join_orders, "Stream::wait_stream orders the joining stream after the work enqueued on the other"),
        c!(ordered_use::record_event_orders, "Stream::record_event returns a recorded event that orders a wait"),
        c!(ordered_use::event_pool_bounded, "the event pool is bounded, refuses foreign flags, reuses its events, and a pooled join orders work"),
        c!(ordered_use::alloc_without_host_sync, "alloc_zeroed_on zeroes in its stream's order without a host wait; alloc_uninit holds what is written"),
        c!(ordered_use::many_stream_users, "a stream-ordered buffer used by six held streams keeps its bytes for them; free_async does not wait on the host"),
        c!(raw::raw_round_trip, "into_raw then from_raw keeps the bytes and works in every stream operation (views, copies, memset, a kernel argument); a borrowed alias never frees, the owner's drop frees; bad descriptors (another backend or device, a zero address) are refused"),
        c!(registered::registered_host_copies, "the caller's own memory registered for a scope uploads without waiting for the stream's earlier work and downloads into the caller's slice"),
        c!(foreign::foreign_buffers, "every stream operation that takes a buffer refuses one of another device with WrongDevice before it reaches the vendor; the foreign bytes stay unchanged and the stream keeps working"),
        c!(ordered_use::record_use_no_host_wait, "record_use on plain and stream-ordered buffers, and the frees after it, never wait on the host"),
        c!(vmm::vmm_map_unmap, "virtual memory: physical memory mapped into a reserved range works as a buffer (copies, memset, a kernel; two mappings under one buffer; one handle mapped twice shows the same bytes); unmap is refused while a buffer uses the mapping and a remap keeps the bytes; drops behind queued work are deferred"),
        c!(vmm::vmm_bad_input, "virtual memory: zero or unaligned sizes and offsets, mappings past the end or over a mapping, unmap of nothing, access or buffers over holes or before access, release with mappings and a handle of another device are clear errors; without the capability every call is Unsupported"),
        c!(limits::resource_limits, "streams, then events, are created until the device refuses with ResourceExhausted (or a cap where none is documented); every 128th stream works, copies round-trip after the drop and the same number of streams can be created again"),
    ]
}

/// When a listed check may skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipWhen {
    /// Always on this backend.
    Always,
    /// Only on a device that lacks this capability (the check needs it).
    Lacks(Capabilities),
}

/// A check that may skip on a backend, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaySkip {
    /// The check's name.
    pub check: &'static str,
    /// When it may skip.
    pub when: SkipWhen,
    /// Why.
    pub reason: &'static str,
}

const fn lacks(check: &'static str, cap: Capabilities, reason: &'static str) -> MaySkip {
    MaySkip {
        check,
        when: SkipWhen::Lacks(cap),
        reason,
    }
}

const CUDA_KERNELS: &str = "the built-in kernels are PTX loaded at open; a driver that cannot \
                            load them leaves the device without KERNELS";
const ACL_KERNELS: &str = "the built-in kernels run through the builtin module, a binary in the \
                           ACL runtime simulator's test-only format; a real CANN runtime refuses \
                           it (the device lacks KERNELS)";
const ACL_CAPTURE: &str = "the aclmdlRICapture* functions are optional: runtimes without them \
                           leave the device without CAPTURE";

const CUDA_MODULES: &str = "the builtin module is PTX loaded at open; a driver that cannot load \
                            it leaves the device without MODULES";
const ACL_MODULES: &str = "the builtin module and the suite's Ascend user kernel are binaries in \
                           the ACL runtime simulator's test-only format; a real CANN runtime \
                           refuses them (the device lacks KERNELS)";

static CUDA_MAY_SKIP: [MaySkip; 15] = [
    lacks(
        "vmm_map_unmap",
        Capabilities::VIRTUAL_MEMORY,
        "a device without CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED (the null \
         driver among them) has no virtual memory",
    ),
    MaySkip {
        check: "foreign_buffers",
        when: SkipWhen::Always,
        reason: "a buffer of another device needs a second GPU (the check runs where the \
                 machine has two)",
    },
    lacks("kernel_aliasing", Capabilities::MODULES, CUDA_MODULES),
    lacks("reduce_builtin", Capabilities::REDUCE, CUDA_MODULES),
    lacks(
        "random_fill",
        Capabilities::RANDOM,
        "the builtin module has no random-number kernel yet: the CUDA backend answers \
         Kernel::Random with Unsupported",
    ),
    lacks("peer_copy", Capabilities::PEER_COPY, PEER_ONE_DEVICE),
    MaySkip {
        check: "callback_error_after_fault",
        when: SkipWhen::Always,
        reason: "a device fault poisons the CUDA context for the whole process; covered by the \
                 CUDA backend's child-process fault tests",
    },
    lacks("lcg_kernel", Capabilities::KERNELS, CUDA_KERNELS),
    lacks("module_builtin_lcg", Capabilities::MODULES, CUDA_MODULES),
    lacks(
        "module_launch_in_capture",
        Capabilities::MODULES,
        CUDA_MODULES,
    ),
    lacks("module_user_kernel", Capabilities::MODULES, CUDA_MODULES),
    lacks("module_bad_input", Capabilities::MODULES, CUDA_MODULES),
    lacks("launch_builder_widths", Capabilities::MODULES, CUDA_MODULES),
    lacks(
        "launch_builder_bad_args",
        Capabilities::MODULES,
        CUDA_MODULES,
    ),
    lacks(
        "launch_builder_unchecked",
        Capabilities::MODULES,
        CUDA_MODULES,
    ),
];

static ASCEND_MAY_SKIP: [MaySkip; 18] = [
    lacks(
        "vmm_map_unmap",
        Capabilities::VIRTUAL_MEMORY,
        "the ACL virtual memory functions are optional: a runtime without them (or one that \
         refuses the granularity at open) leaves the device without VIRTUAL_MEMORY",
    ),
    lacks("kernel_aliasing", Capabilities::KERNELS, ACL_MODULES),
    lacks(
        "reduce_builtin",
        Capabilities::REDUCE,
        "aclrtReduceAsync is optional: a runtime without it leaves the device without REDUCE",
    ),
    lacks(
        "random_fill",
        Capabilities::RANDOM,
        "aclrtRandomNumAsync is optional and an Atlas A2/A3 task: a runtime without it, or a \
         chip without the task (Atlas training and inference products), leaves the device \
         without RANDOM",
    ),
    lacks("peer_copy", Capabilities::PEER_COPY, PEER_ONE_DEVICE),
    // The check needs a deliberate device fault (the simulator's `Kernel::Fault`); it runs in
    // a context of its own (`AscendDevice::new_isolated`), so it runs wherever faults can be
    // injected.
    lacks(
        "callback_error_after_fault",
        Capabilities::FAULT_INJECTION,
        "a deliberate device fault needs the simulator's fault kernel; a real CANN runtime has \
         no way to inject one",
    ),
    lacks(
        "callback_error_after_fault",
        Capabilities::KERNELS,
        ACL_KERNELS,
    ),
    lacks("lcg_kernel", Capabilities::KERNELS, ACL_KERNELS),
    lacks(
        "capture_defers_and_replays",
        Capabilities::CAPTURE,
        ACL_CAPTURE,
    ),
    lacks("capture_gates", Capabilities::CAPTURE, ACL_CAPTURE),
    lacks("module_builtin_lcg", Capabilities::KERNELS, ACL_MODULES),
    lacks(
        "module_launch_in_capture",
        Capabilities::KERNELS,
        ACL_MODULES,
    ),
    lacks(
        "module_launch_in_capture",
        Capabilities::CAPTURE,
        ACL_CAPTURE,
    ),
    lacks("module_user_kernel", Capabilities::KERNELS, ACL_MODULES),
    lacks("module_bad_input", Capabilities::KERNELS, ACL_MODULES),
    lacks("launch_builder_widths", Capabilities::KERNELS, ACL_MODULES),
    lacks(
        "launch_builder_bad_args",
        Capabilities::KERNELS,
        ACL_MODULES,
    ),
    lacks(
        "launch_builder_unchecked",
        Capabilities::KERNELS,
        ACL_MODULES,
    ),
];

const PEER_ONE_DEVICE: &str = "a copy between devices needs two devices; the device has no peer \
                               (one device, or none it can access), so it lacks PEER_COPY";

/// The host reference skips only where it has a single device.
static HOST_MAY_SKIP: [MaySkip; 2] = [
    MaySkip {
        check: "peer_copy",
        when: SkipWhen::Always,
        reason: "there is one host device unless XSTREAM_HOST_DEVICES asks for more; the host \
                 conformance test runs this check again in a child process with two",
    },
    MaySkip {
        check: "foreign_buffers",
        when: SkipWhen::Always,
        reason: "there is one host device unless XSTREAM_HOST_DEVICES asks for more; the host \
                 conformance test runs this check again in a child process with two",
    },
];

/// The checks that may skip on backend `kind`, each with when and why. Every other check must
/// pass (the host backend, the reference, lists only the check that needs two devices).
pub fn may_skip(kind: BackendKind) -> &'static [MaySkip] {
    match kind {
        BackendKind::Host => &HOST_MAY_SKIP,
        BackendKind::Cuda => &CUDA_MAY_SKIP,
        BackendKind::Ascend => &ASCEND_MAY_SKIP,
    }
}

/// The entry that lets `check` skip on a device with capabilities `caps`, if any.
fn allowed_skip(kind: BackendKind, check: &str, caps: Capabilities) -> Option<&'static MaySkip> {
    may_skip(kind).iter().find(|m| {
        m.check == check
            && match m.when {
                SkipWhen::Always => true,
                SkipWhen::Lacks(c) => !caps.contains(c),
            }
    })
}

/// Judges one result against [`may_skip`]: a skip that is not listed (or whose condition
/// does not hold on this device) becomes a failure; a listed skip reports the listed reason;
/// a listed check that passed says so.
fn judge(kind: BackendKind, check: &str, caps: Capabilities, r: CheckResult) -> CheckResult {
    let listed = allowed_skip(kind, check, caps);
    match (r, listed) {
        (Ok(Outcome::Skip(d)), Some(m)) => Ok(Outcome::Skip(format!("{} [{d}]", m.reason))),
        (Ok(Outcome::Skip(d)), None) => Err(format!(
            "skipped ({d}), but {check} is not listed as allowed to skip on {kind} with this \
             device's capabilities"
        )),
        (Ok(Outcome::Pass(d)), Some(m)) => Ok(Outcome::Pass(format!(
            "{d} (listed as may-skip on {kind}: {}; it passed)",
            m.reason
        ))),
        (r, _) => r,
    }
}

/// Runs the checks whose name contains `filter` (all when `None`), judging each against
/// [`may_skip`] for `B` (an unlisted skip counts as a failure), and reporting it.
pub fn run<B: Backend>(
    env: &Env<B>,
    filter: Option<&str>,
    mut report: impl FnMut(&Check<B>, &CheckResult, Duration),
) -> Summary {
    let mut sum = Summary::default();
    let caps = env.device.info().capabilities;
    for c in checks::<B>() {
        if let Some(f) = filter {
            if !c.name.contains(f) {
                continue;
            }
        }
        let t = Instant::now();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (c.run)(env)))
            .unwrap_or_else(|p| {
                Err(format!(
                    "check panicked: {}",
                    xstream_core::callback::panic_message(&*p)
                ))
            });
        let r = judge(B::KIND, c.name, caps, r);
        match &r {
            Ok(Outcome::Pass(d)) => {
                sum.passed += 1;
                if d.contains("listed as may-skip") {
                    sum.listed_passed += 1;
                }
            }
            Ok(Outcome::Skip(_)) => sum.skipped += 1,
            Err(_) => sum.failed += 1,
        }
        report(&c, &r, t.elapsed());
    }
    sum
}

/// What a test asserts of a full run: no failure (so every skip was listed) and every check
/// accounted for. Prints each listed skip and each listed check that passed where the test
/// output shows it.
///
/// # Panics
/// When the run failed a check.
pub fn assert_conforms<B: Backend>(what: &str, sum: &Summary) {
    println!("{what}: {sum:?}");
    assert_eq!(
        sum.failed, 0,
        "{what}: conformance failures (see the FAIL lines above)"
    );
    assert_eq!(
        sum.passed + sum.skipped,
        checks::<B>().len(),
        "{what}: checks not accounted for"
    );
}

/// `base` multiplied by `XSTREAM_TEST_TIMEOUT_SCALE` (a whole number, default 1): the timeouts
/// a test gives the code under test (never timing bounds of a check), lengthened for slow
/// harnesses. `scripts/valgrind.sh` sets the scale, since memcheck runs one thread at a time and
/// many times slower.
pub fn harness_timeout(base: Duration) -> Duration {
    let scale = std::env::var("XSTREAM_TEST_TIMEOUT_SCALE")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1);
    base * scale
}

/// Reports a test that skipped because its hardware is absent: `SKIP: <test>: <reason>`,
/// written straight to the process's stderr so that `cargo test`'s output capture does not
/// hide it (a skipped test must never look like a silent pass).
pub fn report_skip(test: &str, reason: &dyn std::fmt::Display) {
    report_skip_line(&format!("SKIP: {test}: {reason}"));
}

/// Writes `line` and a newline straight to the process's stderr, past `cargo test`'s capture.
fn report_skip_line(line: &str) {
    use std::io::Write as _;
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("{line}\n").as_bytes());
}

/// Prints one line per check (`PASS`/`SKIP`/`FAIL name: detail`), the form used by tests and
/// the CLI.
pub fn print_line<B: Backend>(c: &Check<B>, r: &CheckResult, took: Duration) {
    let ms = took.as_secs_f64() * 1e3;
    match r {
        Ok(Outcome::Pass(d)) => println!("PASS {:<30} {ms:>8.1} ms  {d}", c.name),
        Ok(Outcome::Skip(d)) => println!("SKIP {:<30} {ms:>8.1} ms  {d}", c.name),
        Err(e) => println!("FAIL {:<30} {ms:>8.1} ms  {e}", c.name),
    }
}

/// As [`print_line`], and also writes each skip, and each listed check that passed, straight
/// to stderr (past `cargo test`'s capture): the form used by the tests.
pub fn report_line<B: Backend>(c: &Check<B>, r: &CheckResult, took: Duration) {
    print_line(c, r, took);
    match r {
        Ok(Outcome::Skip(d)) => report_skip_line(&format!("SKIP: {}: {d}", c.name)),
        Ok(Outcome::Pass(d)) if d.contains("listed as may-skip") => {
            report_skip_line(&format!("PASS (listed as may-skip): {}: {d}", c.name))
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_skip_names_a_check() {
        let names: Vec<_> = checks::<xstream_host::HostBackend>()
            .iter()
            .map(|c| c.name)
            .collect();
        for kind in [BackendKind::Host, BackendKind::Cuda, BackendKind::Ascend] {
            for m in may_skip(kind) {
                assert!(names.contains(&m.check), "{kind}: no check {}", m.check);
            }
        }
    }

    #[test]
    fn unlisted_skip_fails_listed_skip_gives_reason() {
        let skip = || Ok(Outcome::Skip("why".into()));
        let caps = Capabilities::all();
        assert!(judge(BackendKind::Host, "lcg_kernel", caps, skip()).is_err());
        // Listed only when the device lacks KERNELS.
        assert!(judge(BackendKind::Ascend, "lcg_kernel", caps, skip()).is_err());
        let no_kernels = caps - Capabilities::KERNELS;
        match judge(BackendKind::Ascend, "lcg_kernel", no_kernels, skip()) {
            Ok(Outcome::Skip(d)) => assert!(d.contains("simulator") && d.contains("why"), "{d}"),
            other => panic!("{other:?}"),
        }
        match judge(
            BackendKind::Cuda,
            "callback_error_after_fault",
            caps,
            Ok(Outcome::Pass("ok".into())),
        ) {
            Ok(Outcome::Pass(d)) => assert!(d.contains("listed as may-skip"), "{d}"),
            other => panic!("{other:?}"),
        }
        assert!(judge(BackendKind::Host, "lcg_kernel", caps, Err("broke".into())).is_err());
    }
}
