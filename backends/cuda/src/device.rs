//! [`CudaDevice`]: one device's primary context, its pending callbacks and its sticky state.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cudarc::driver::sys;
use xstream_core::callback::{ensure_not_in_callback, in_callback, CallbackSlot, PendingCallbacks};
use xstream_core::completion::poll_until;
use xstream_core::module::{LaunchLimits, ModuleSource, BUILTIN_DELAY, BUILTIN_LCG};
use xstream_core::{
    BackendKind, Capabilities, DeviceInfo, Error, EventDesc, Module, PriorityRange, Result,
    StreamDesc,
};

use crate::ffi::{self, CuContext, CuFunction, CuMemPool, CuStream};
use crate::module::{CudaFunction, CudaModule};
use crate::{error, CudaBackend, CudaBuffer, CudaEvent, CudaStream};

/// The builtin module (hand-written PTX, loaded once per device) and its kernels.
#[derive(Debug)]
pub(crate) struct Kernels {
    pub module: CudaModule,
    pub delay: CudaFunction,
    pub lcg: CudaFunction,
    /// `xs_fault` (a test facility, outside the builtin module's documented kernels).
    #[cfg_attr(not(feature = "testing"), allow(dead_code))] // used by `Kernel::Fault` only
    pub fault: CuFunction,
    /// The built-in reduce's kernels, in [`xstream_core::ReduceType::ALL`] order (f32, s32,
    /// s16, s8, f16, bf16, s64).
    pub reduce: [CudaFunction; 7],
}

/// State shared by a device and every object made from it.
pub(crate) struct Shared {
    pub ctx: Arc<cudarc::driver::CudaContext>,
    pub raw_ctx: CuContext,
    pub cu_device: sys::CUdevice,
    pub info: DeviceInfo,
    /// Callbacks the driver has not run yet (failed by xstream after a fault).
    pub pending: PendingCallbacks,
    /// Whether a watcher is registered with the shared poller.
    watching: AtomicBool,
    /// The first sticky error seen (the context is poisoned).
    pub sticky: OnceLock<Error>,
    /// An idle internal stream: the watcher queries it to learn about faults, and zeroing of
    /// new buffers runs on it.
    pub sentinel: CuStream,
    pub kernels: std::result::Result<Kernels, String>,
    /// The device's launch limits (`cuDeviceGetAttribute`).
    pub limits: LaunchLimits,
    pub default_pool: Option<CuMemPool>,
    pub managed_memory: bool,
    /// Serialises buffer zeroing on the sentinel stream.
    pub sentinel_lock: Mutex<()>,
    /// Pooled ordering events (joins, stream-ordered frees): see `crate::event_pool`.
    pub events: crate::event_pool::RawEventPool,
    /// Ordinals of the devices whose memory this context may access
    /// (`Device::enable_peer_access`).
    pub peers: Mutex<std::collections::HashSet<usize>>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaDevice")
            .field("ordinal", &self.info.ordinal)
            .field("name", &self.info.name)
            .field("context", &self.raw_ctx)
            .field("sticky", &self.sticky.get().is_some())
            .finish()
    }
}

impl Shared {
    /// Binds the context to the calling thread (cached per thread), for the paths that only
    /// the checked layer (`xstream_core::api`) reaches: it has refused calls inside a
    /// stream-blocking callback already.
    pub fn bind(&self) -> Result<()> {
        ffi::bind(self.raw_ctx).map_err(|c| self.fail("cuCtxSetCurrent", c))
    }

    /// Refuses calls inside a stream-blocking callback, then binds: the gate stays here for
    /// the entry points the checked layer does not reach (CUDA-only extensions, collectives,
    /// virtual memory, allocators, drops, `Backend::open`).
    pub fn enter(&self) -> Result<()> {
        ensure_not_in_callback()?;
        self.bind()
    }

    /// Maps a failed call; a sticky error poisons the device and fails pending callbacks.
    pub fn fail(&self, api: &'static str, code: ffi::Code) -> Error {
        let e = error::map(api, code);
        if e.is_sticky() {
            self.poison(&e);
        }
        e
    }

    /// Maps a wrapper result.
    pub fn check<T>(&self, api: &'static str, r: ffi::CuResult<T>) -> Result<T> {
        r.map_err(|c| self.fail(api, c))
    }

    /// Records the sticky error and fails every pending callback with it (CUDA never runs
    /// host functions after a fault: driver behaviour in docs/semantics.md).
    pub fn poison(&self, e: &Error) {
        if self.sticky.set(e.clone()).is_ok() {
            tracing::error!(error = %e, "CUDA context poisoned; failing pending callbacks");
        }
        let n = self.pending.fail_all(e);
        if n > 0 {
            tracing::warn!(
                failed = n,
                "failed pending host callbacks after a sticky error"
            );
        }
    }

    /// The sticky error, if the context is poisoned.
    pub fn sticky_error(&self) -> Option<Error> {
        self.sticky.get().cloned()
    }

    pub fn kernels(&self) -> Result<&Kernels> {
        self.kernels
            .as_ref()
            .map_err(|e| Error::unsupported(BackendKind::Cuda, format!("built-in kernels: {e}")))
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let (raw_ctx, sentinel, events) = (self.raw_ctx, self.sentinel, self.events.take_all());
        if in_callback() {
            // The last reference went with a host callback's closure, on the driver's
            // callback thread, which must not call the driver: the teardown runs on the
            // dispatcher, and with it the release of the built-in module and of the context
            // (both call the driver), after the sentinel and the events are gone.
            let kernels = std::mem::replace(&mut self.kernels, Err(String::new()));
            let ctx = Arc::clone(&self.ctx);
            crate::stream::dispatch_driver_job(move || {
                teardown(raw_ctx, sentinel, events);
                drop(kernels);
                drop(ctx);
            });
            return;
        }
        teardown(raw_ctx, sentinel, events);
    }
}

/// A device state's driver teardown: its pooled events and its sentinel stream, in its context.
fn teardown(raw_ctx: CuContext, sentinel: CuStream, events: Vec<ffi::CuEvent>) {
    if ffi::bind(raw_ctx).is_err() {
        return;
    }
    for e in events {
        let _ = ffi::event_destroy(e);
    }
    let _ = ffi::stream_destroy(sentinel);
}

/// How often the fault watcher queries the driver while callbacks are pending: the delay
/// after which a fault is noticed even if nobody calls xstream (the driver itself takes
/// 100-150 ms to report one, driver behaviour in docs/semantics.md).
const WATCH_PERIOD: Duration = Duration::from_millis(1);
/// How long the watcher stays registered after the last pending callback ran.
const WATCH_LINGER: Duration = Duration::from_millis(50);

/// Tracks `slot` as pending and makes sure a watcher polls for faults while anything is
/// pending (see the crate docs, "Callback failure path").
pub(crate) fn track_pending(shared: &Arc<Shared>, slot: &Arc<CallbackSlot>) {
    shared.pending.track(slot);
    // A load first: while the watcher runs (a steady stream of callbacks), the enqueuing
    // thread only reads the flag, never writes its cache line (a load that sees `true` is
    // ordered as a swap that reads `true` would be).
    if shared.watching.load(Ordering::SeqCst) || shared.watching.swap(true, Ordering::SeqCst) {
        return;
    }
    // Dropped with the watcher on the poller thread: never during the process exit.
    let s = crate::stream::BackgroundHeld::new(Arc::clone(shared));
    // The check runs on the shared poller thread every 10-200 µs; it does real work (a driver
    // query, a look at the front of the pending list) at most once per `WATCH_PERIOD`, so it neither
    // competes with the driver's callback thread nor costs the enqueuing thread anything. It
    // stays registered for `WATCH_LINGER` after the last callback ran, so a steady stream of
    // callbacks registers it once instead of once per callback.
    let mut last = Instant::now();
    let mut idle_since: Option<Instant> = None;
    let watcher = poll_until(Box::new(move || {
        if let Some(e) = s.sticky_error() {
            s.pending.fail_all(&e);
        } else if last.elapsed() >= WATCH_PERIOD {
            last = Instant::now();
            // No driver call once the process exit began (the driver tears itself down next):
            // the watcher ends; callbacks still pending then are the exit's.
            let Some(_call) = crate::stream::BackgroundCall::begin() else {
                s.watching.store(false, Ordering::SeqCst);
                return Some(Ok(()));
            };
            // The poller is xstream's thread: never let its queries break a user's capture
            // (a driver call itself the first time on the thread, so after `begin`).
            ffi::ensure_relaxed_capture_mode();
            match ffi::stream_query(s.sentinel) {
                Ok(()) | Err(ffi::NOT_READY) => {}
                Err(code) => {
                    let e = error::map("cuStreamQuery", code);
                    if e.is_sticky() {
                        s.poison(&e);
                    }
                }
            }
        } else {
            return None;
        }
        if s.pending.any_pending() {
            idle_since = None;
            return None;
        }
        let idle = *idle_since.get_or_insert_with(Instant::now);
        if idle.elapsed() < WATCH_LINGER {
            return None;
        }
        s.watching.store(false, Ordering::SeqCst);
        // A slot tracked between the count and the store did not start a watcher: re-arm.
        if !s.pending.any_pending() || s.watching.swap(true, Ordering::SeqCst) {
            Some(Ok(()))
        } else {
            None
        }
    }));
    drop(watcher);
}

const PTX_BODY: &str = r#"
.address_size 64

.visible .entry xstream_delay(.param .u64 xstream_delay_ns)
{
    .reg .pred %p<2>;
    .reg .u64 %rd<6>;
    ld.param.u64 %rd1, [xstream_delay_ns];
    mov.u64 %rd2, %globaltimer;
XS_DELAY_LOOP:
    mov.u64 %rd3, %globaltimer;
    sub.u64 %rd4, %rd3, %rd2;
    setp.lt.u64 %p1, %rd4, %rd1;
    @%p1 bra XS_DELAY_LOOP;
    ret;
}

.visible .entry xstream_lcg(.param .u64 xstream_lcg_data, .param .u32 xstream_lcg_words, .param .u32 xstream_lcg_rounds)
{
    .reg .pred %p<3>;
    .reg .u32 %r<10>;
    .reg .u64 %rd<10>;
    ld.param.u64 %rd1, [xstream_lcg_data];
    ld.param.u32 %r8, [xstream_lcg_words];
    cvt.u64.u32 %rd2, %r8;
    ld.param.u32 %r1, [xstream_lcg_rounds];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %nctaid.x;
    cvt.u64.u32 %rd3, %r2;
    mul.wide.u32 %rd4, %r4, %r3;
    add.u64 %rd3, %rd3, %rd4;
    mul.wide.u32 %rd5, %r5, %r3;
XS_LCG_OUTER:
    setp.ge.u64 %p1, %rd3, %rd2;
    @%p1 bra XS_LCG_DONE;
    shl.b64 %rd6, %rd3, 2;
    add.u64 %rd7, %rd1, %rd6;
    ld.global.u32 %r6, [%rd7];
    mov.u32 %r7, 0;
XS_LCG_INNER:
    setp.ge.u32 %p2, %r7, %r1;
    @%p2 bra XS_LCG_STORE;
    mad.lo.u32 %r6, %r6, 1664525, 1013904223;
    add.u32 %r7, %r7, 1;
    bra XS_LCG_INNER;
XS_LCG_STORE:
    st.global.u32 [%rd7], %r6;
    add.u64 %rd3, %rd3, %rd5;
    bra XS_LCG_OUTER;
XS_LCG_DONE:
    ret;
}

.visible .entry xstream_echo_params(.param .u64 xstream_echo_out, .param .align 8 .b8 xstream_echo_s[16], .param .u8 xstream_echo_x, .param .u16 xstream_echo_y, .param .u64 xstream_echo_z, .param .f32 xstream_echo_w)
{
    .reg .b16 %rs<5>;
    .reg .b64 %rd<4>;
    .reg .f32 %f<2>;
    ld.param.u64 %rd1, [xstream_echo_out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u16 %rs1, [xstream_echo_s];
    ld.param.u8 %rs2, [xstream_echo_s+2];
    ld.param.u64 %rd2, [xstream_echo_s+8];
    ld.param.u8 %rs3, [xstream_echo_x];
    ld.param.u16 %rs4, [xstream_echo_y];
    ld.param.u64 %rd3, [xstream_echo_z];
    ld.param.f32 %f1, [xstream_echo_w];
    st.global.u16 [%rd1], %rs1;
    st.global.u8 [%rd1+2], %rs2;
    st.global.u64 [%rd1+8], %rd2;
    st.global.u8 [%rd1+16], %rs3;
    st.global.u16 [%rd1+18], %rs4;
    st.global.u64 [%rd1+24], %rd3;
    st.global.f32 [%rd1+32], %f1;
    ret;
}

.visible .entry xs_fault()
{
    .reg .u32 %r<2>;
    .reg .u64 %rd<2>;
    mov.u64 %rd1, 0;
    mov.u32 %r1, 1;
    st.global.u32 [%rd1], %r1;
    ret;
}
"#;

/// One kernel of the built-in reduce: `name(dst, dst_offset, src, src_offset, n, kind)` over
/// `n` elements of `1 << shift` bytes, a grid-stride loop doing `dst[i] = kind(dst[i], src[i])`
/// with `kind` the `aclrtReduceKind` value (10 sum, 11 max, 12 min). `decl` declares the
/// registers `body` uses; `body` combines the element at `%rd10` (destination) with the one at
/// `%rd11` (source) and stores it at `%rd10`, with `%p2` set for max and `%p3` for min.
fn reduce_kernel(name: &str, shift: u32, decl: &str, body: &str) -> String {
    format!(
        r#"
.visible .entry {name}(.param .u64 {name}_dst, .param .u64 {name}_doff, .param .u64 {name}_src, .param .u64 {name}_soff, .param .u64 {name}_n, .param .u32 {name}_kind)
{{
    .reg .pred %p<4>;
    .reg .u32 %r<6>;
    .reg .u64 %rd<12>;
{decl}
    ld.param.u64 %rd1, [{name}_dst];
    ld.param.u64 %rd2, [{name}_doff];
    add.u64 %rd1, %rd1, %rd2;
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u64 %rd3, [{name}_src];
    ld.param.u64 %rd4, [{name}_soff];
    add.u64 %rd3, %rd3, %rd4;
    cvta.to.global.u64 %rd3, %rd3;
    ld.param.u64 %rd5, [{name}_n];
    ld.param.u32 %r1, [{name}_kind];
    setp.eq.u32 %p2, %r1, 11;
    setp.eq.u32 %p3, %r1, 12;
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %nctaid.x;
    cvt.u64.u32 %rd6, %r2;
    mul.wide.u32 %rd7, %r4, %r3;
    add.u64 %rd6, %rd6, %rd7;
    mul.wide.u32 %rd8, %r5, %r3;
{name}_loop:
    setp.ge.u64 %p1, %rd6, %rd5;
    @%p1 bra {name}_done;
    shl.b64 %rd9, %rd6, {shift};
    add.u64 %rd10, %rd1, %rd9;
    add.u64 %rd11, %rd3, %rd9;
{body}
    add.u64 %rd6, %rd6, %rd8;
    bra {name}_loop;
{name}_done:
    ret;
}}
"#
    )
}

/// A reduce kernel over a type the device computes on directly: `mem` is the element type in
/// memory, `reg` the register type it is computed in (8-bit integers are sign-extended to 16
/// bits; the store keeps the low 8 bits, so sums wrap like the wider ones).
fn reduce_kernel_ptx(name: &str, mem: &str, reg: &str, add: &str, shift: u32) -> String {
    let decl = format!("    .reg .{reg} %v<4>;");
    let body = format!(
        "    ld.global.{mem} %v1, [%rd10];
    ld.global.{mem} %v2, [%rd11];
    {add} %v3, %v1, %v2;
    @%p2 max.{reg} %v3, %v1, %v2;
    @%p3 min.{reg} %v3, %v1, %v2;
    st.global.{mem} [%rd10], %v3;"
    );
    reduce_kernel(name, shift, &decl, &body)
}

/// A reduce kernel over a 16-bit float (`bf16 == false`: binary16, converted with `cvt`;
/// `bf16 == true`: bfloat16, widened by a shift and rounded to nearest even with integer
/// arithmetic, NaNs kept quiet, so no instruction newer than the module's target is needed),
/// combined in `f32` (correctly rounded: see `xstream_core::reduce::ReduceType::F16`).
fn reduce_kernel_half_ptx(name: &str, bf16: bool) -> String {
    let decl = "    .reg .b16 %h<4>;
    .reg .b32 %b<8>;
    .reg .f32 %f<4>;
    .reg .pred %q<2>;";
    let (widen, narrow) = if bf16 {
        (
            "    cvt.u32.u16 %b1, %h1;
    shl.b32 %b1, %b1, 16;
    mov.b32 %f1, %b1;
    cvt.u32.u16 %b2, %h2;
    shl.b32 %b2, %b2, 16;
    mov.b32 %f2, %b2;",
            "    mov.b32 %b3, %f3;
    shr.u32 %b4, %b3, 16;
    and.b32 %b4, %b4, 1;
    add.u32 %b4, %b4, 32767;
    add.u32 %b5, %b3, %b4;
    shr.u32 %b5, %b5, 16;
    shr.u32 %b6, %b3, 16;
    or.b32 %b6, %b6, 64;
    setp.nan.f32 %q1, %f3, %f3;
    selp.b32 %b5, %b6, %b5, %q1;
    cvt.u16.u32 %h3, %b5;",
        )
    } else {
        (
            "    cvt.f32.f16 %f1, %h1;
    cvt.f32.f16 %f2, %h2;",
            "    cvt.rn.f16.f32 %h3, %f3;",
        )
    };
    let body = format!(
        "    ld.global.b16 %h1, [%rd10];
    ld.global.b16 %h2, [%rd11];
{widen}
    add.rn.f32 %f3, %f1, %f2;
    @%p2 max.f32 %f3, %f1, %f2;
    @%p3 min.f32 %f3, %f1, %f2;
{narrow}
    st.global.b16 [%rd10], %h3;"
    );
    reduce_kernel(name, 1, decl, &body)
}

/// The names of the built-in reduce's kernels, in [`xstream_core::ReduceType::ALL`] order.
pub(crate) const REDUCE_KERNELS: [&str; 7] = [
    "xstream_reduce_f32",
    "xstream_reduce_s32",
    "xstream_reduce_s16",
    "xstream_reduce_s8",
    "xstream_reduce_f16",
    "xstream_reduce_bf16",
    "xstream_reduce_s64",
];

/// The PTX module text for a target (`"sm_70"`, `"sm_90"`).
pub fn ptx_source(target: &str) -> String {
    let reduce = [
        reduce_kernel_ptx(REDUCE_KERNELS[0], "f32", "f32", "add.rn.f32", 2),
        reduce_kernel_ptx(REDUCE_KERNELS[1], "s32", "s32", "add.s32", 2),
        reduce_kernel_ptx(REDUCE_KERNELS[2], "s16", "s16", "add.s16", 1),
        reduce_kernel_ptx(REDUCE_KERNELS[3], "s8", "s16", "add.s16", 0),
        reduce_kernel_half_ptx(REDUCE_KERNELS[4], false),
        reduce_kernel_half_ptx(REDUCE_KERNELS[5], true),
        reduce_kernel_ptx(REDUCE_KERNELS[6], "s64", "s64", "add.s64", 3),
    ]
    .concat();
    format!(".version 8.0\n.target {target}\n{PTX_BODY}{reduce}")
}

fn load_kernels(
    ctx: &Arc<cudarc::driver::CudaContext>,
    raw_ctx: CuContext,
    ordinal: usize,
    limits: LaunchLimits,
) -> std::result::Result<Kernels, String> {
    let mut last = String::new();
    // sm_70 PTX runs (JIT) on every Volta+ GPU; sm_90 is the target known to load on H100/H200.
    for target in ["sm_70", "sm_90"] {
        let src = ptx_source(target);
        match crate::module::load(
            ctx,
            raw_ctx,
            ordinal,
            limits,
            &ModuleSource::Ptx(&src),
            true,
        ) {
            Ok(module) => {
                let get = |n: &str| module.function(n).map_err(|e| format!("{n}: {e}"));
                let fault = ffi::module_get_function(module.raw(), c"xs_fault").map_err(|c| {
                    format!(
                        "cuModuleGetFunction(xs_fault) = {}",
                        error::code_info(c).name
                    )
                })?;
                return Ok(Kernels {
                    delay: get(BUILTIN_DELAY)?,
                    lcg: get(BUILTIN_LCG)?,
                    fault,
                    reduce: [
                        get(REDUCE_KERNELS[0])?,
                        get(REDUCE_KERNELS[1])?,
                        get(REDUCE_KERNELS[2])?,
                        get(REDUCE_KERNELS[3])?,
                        get(REDUCE_KERNELS[4])?,
                        get(REDUCE_KERNELS[5])?,
                        get(REDUCE_KERNELS[6])?,
                    ],
                    module,
                });
            }
            Err(e) => {
                last = format!("builtin module ({target}): {e}");
                tracing::debug!("{last}");
            }
        }
    }
    Err(last)
}

/// A CUDA device with its primary context (cudarc's [`cudarc::driver::CudaContext`]). Cheap
/// to clone; clones share the device. `Send + Sync`: any thread may use it, each call binds
/// the context to the calling thread (a per-thread cache avoids redundant `cuCtxSetCurrent`).
#[derive(Clone)]
pub struct CudaDevice {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.fmt(f)
    }
}

impl CudaDevice {
    pub(crate) fn open(ordinal: usize) -> Result<Self> {
        let count = ffi::device_count().map_err(|c| error::map("cuDeviceGetCount", c))?;
        if ordinal >= count.max(0) as usize {
            return Err(Error::invalid(format!(
                "CUDA device ordinal {ordinal} is out of range ({count} device(s))"
            )));
        }
        let ctx = cudarc::driver::CudaContext::new(ordinal)
            .map_err(|e| error::map("cuDevicePrimaryCtxRetain", e.0 as u32))?;
        let raw_ctx = CuContext(ctx.cu_ctx());
        ffi::forget_bound_context();
        ffi::bind(raw_ctx).map_err(|c| error::map("cuCtxSetCurrent", c))?;
        let cu_device = ctx.cu_device();
        let attr = |a| {
            ffi::device_attribute(cu_device, a).map_err(|c| error::map("cuDeviceGetAttribute", c))
        };
        use sys::CUdevice_attribute as A;
        let pools = attr(A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)? > 0;
        let managed = attr(A::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)? > 0;
        let major = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        let (least, greatest) = ffi::ctx_stream_priority_range()
            .map_err(|c| error::map("cuCtxGetStreamPriorityRange", c))?;
        let driver = ffi::driver_version().unwrap_or(0);
        let default_pool = if pools {
            ffi::device_default_mem_pool(cu_device).ok()
        } else {
            None
        };
        let sentinel = ffi::stream_create(crate::conv::CU_STREAM_NON_BLOCKING)
            .map_err(|c| error::map("cuStreamCreate", c))?;
        let limits = crate::module::device_limits(cu_device)
            .map_err(|c| error::map("cuDeviceGetAttribute", c))?;
        let kernels = load_kernels(&ctx, raw_ctx, ordinal, limits);
        let mut caps = Capabilities::CAPTURE
            | Capabilities::ATTRIBUTES
            | Capabilities::INTERPROCESS_EVENTS
            | Capabilities::STREAM_IDS
            | Capabilities::LEGACY_DEFAULT_STREAM
            | Capabilities::INF_NAN;
        // bfloat16 arithmetic in hardware from compute capability 8.0.
        if major >= 8 {
            caps |= Capabilities::BF16;
        }
        if least != greatest {
            caps |= Capabilities::PRIORITY;
        }
        if pools {
            caps |= Capabilities::STREAM_ORDERED_ALLOC;
        }
        if managed {
            caps |= Capabilities::MANAGED_MEMORY;
        }
        if kernels.is_ok() {
            caps |= Capabilities::KERNELS | Capabilities::MODULES | Capabilities::REDUCE;
            if cfg!(feature = "testing") {
                caps |= Capabilities::FAULT_INJECTION;
            }
        } else if let Err(e) = &kernels {
            tracing::warn!(error = %e, "built-in kernels unavailable");
        }
        if count > 1 {
            caps |= Capabilities::CROSS_DEVICE_WAIT;
        }
        caps |= crate::stream::memop::capabilities(cu_device);
        if attr(A::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED).unwrap_or(0) > 0 {
            caps |= Capabilities::VIRTUAL_MEMORY;
            if cfg!(unix)
                && attr(A::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)
                    .unwrap_or(0)
                    > 0
            {
                caps |= Capabilities::SHAREABLE_PHYSICAL;
            }
        }
        if crate::peer::has_peer(cu_device, ordinal, count) {
            caps |= Capabilities::PEER_COPY;
        }
        let name = ctx
            .name()
            .unwrap_or_else(|_| format!("CUDA device {ordinal}"));
        let info = DeviceInfo {
            backend: BackendKind::Cuda,
            ordinal,
            name: format!("{name} (sm_{major}{minor})"),
            priority_range: PriorityRange {
                least,
                greatest,
                default: 0,
            },
            capabilities: caps,
            max_streams: None,
            driver: format!(
                "CUDA driver {}.{} ({driver})",
                driver / 1000,
                (driver % 1000) / 10
            ),
            chip: Some(format!("sm_{major}{minor}")),
            compute_capability: Some((major.max(0) as u32, minor.max(0) as u32)),
            compute_units: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .ok()
                .and_then(|n| u32::try_from(n).ok()),
            total_memory: ffi::device_total_mem(cu_device).ok(),
            // `cuDeviceGetUuid_v2` appeared in CUDA 11.4.
            uuid: (driver >= 11040)
                .then(|| ffi::device_uuid(cu_device).ok())
                .flatten()
                .map(xstream_core::DeviceUuid),
            pci_bus_id: ffi::device_pci_bus_id(cu_device).ok(),
            // `cuMemAlloc`'s documented alignment (`cuMemAllocAsync` pools keep it).
            base_alignment: 256,
        };
        Ok(Self {
            shared: Arc::new(Shared {
                ctx,
                raw_ctx,
                cu_device,
                info,
                pending: PendingCallbacks::default(),
                watching: AtomicBool::new(false),
                sticky: OnceLock::new(),
                sentinel,
                kernels,
                limits,
                default_pool,
                managed_memory: managed,
                sentinel_lock: Mutex::new(()),
                events: Default::default(),
                peers: Mutex::new(std::collections::HashSet::new()),
            }),
        })
    }

    /// The cudarc context (the device's primary context) for interop.
    pub fn cudarc_context(&self) -> &Arc<cudarc::driver::CudaContext> {
        &self.shared.ctx
    }

    /// The raw primary context.
    pub fn raw_context(&self) -> CuContext {
        self.shared.raw_ctx
    }

    /// The `CUdevice` ordinal handle.
    pub fn cu_device(&self) -> i32 {
        self.shared.cu_device
    }

    /// The sticky error that poisoned this device's context, if any (only a new process
    /// recovers: driver behaviour in docs/semantics.md).
    pub fn sticky_error(&self) -> Option<Error> {
        self.shared.sticky_error()
    }

    /// Callbacks enqueued on this device that have not run (or been failed) yet.
    pub fn pending_callbacks(&self) -> usize {
        self.shared.pending.pending()
    }

    /// Makes the next call on this thread re-bind the context with `cuCtxSetCurrent`: call it
    /// after switching contexts on this thread through another library (the per-thread cache
    /// only sees xstream's own switches).
    pub fn rebind_thread(&self) -> Result<()> {
        ffi::forget_bound_context();
        self.shared.enter()
    }

    /// The calling thread's per-thread default stream (`CU_STREAM_PER_THREAD`). CUDA-only.
    /// The handle means "the per-thread stream of whichever thread uses it": use the value on
    /// the thread that made it.
    ///
    /// # Errors
    /// Vendor errors while reading its properties.
    pub fn per_thread_stream(&self) -> Result<CudaStream> {
        self.shared.enter()?;
        CudaStream::special(self, CuStream::PER_THREAD)
    }

    /// Allocates managed (unified) memory (`cuMemAllocManaged`, `CU_MEM_ATTACH_GLOBAL`), for
    /// [`CudaStream::attach_mem_async`]. Capability [`Capabilities::MANAGED_MEMORY`].
    ///
    /// # Errors
    /// [`Error::Unsupported`] without managed memory; out of memory
    /// ([`Error::is_out_of_memory`]: `CUDA_ERROR_OUT_OF_MEMORY` kept in [`Error::Native`]).
    pub fn alloc_managed(&self, len: usize) -> Result<crate::CudaManagedBuffer> {
        crate::memory::alloc_managed(self, len)
    }

    /// A stream-ordered allocator over `stream` and the device's default memory pool.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::STREAM_ORDERED_ALLOC`].
    pub fn async_allocator(&self, stream: &CudaStream) -> Result<Arc<crate::CudaAsyncAllocator>> {
        crate::memory::CudaAsyncAllocator::new(self, stream)
    }
}

impl xstream_core::DeviceImpl for CudaDevice {
    type B = CudaBackend;

    fn can_access_peer_impl(&self, peer: &CudaDevice) -> Result<bool> {
        crate::peer::can_access_peer(self, peer)
    }

    fn enable_peer_access_impl(&self, peer: &CudaDevice) -> Result<()> {
        crate::peer::enable(self, peer)
    }

    fn disable_peer_access_impl(&self, peer: &CudaDevice) -> Result<()> {
        crate::peer::disable(self, peer)
    }

    // --- device info ---

    fn memory_info_impl(&self) -> Result<xstream_core::MemoryInfo> {
        self.shared.bind()?;
        let (free, total) = ffi::mem_get_info().map_err(|c| error::map("cuMemGetInfo", c))?;
        Ok(xstream_core::MemoryInfo { free, total })
    }

    // --- end of device info ---

    fn info_impl(&self) -> &DeviceInfo {
        &self.shared.info
    }

    fn create_stream_impl(&self, desc: &StreamDesc) -> Result<CudaStream> {
        CudaStream::create(self, desc)
    }

    fn default_stream_impl(&self) -> Result<CudaStream> {
        self.shared.bind()?;
        CudaStream::special(self, CuStream::LEGACY)
    }

    fn create_event_impl(&self, desc: &EventDesc) -> Result<CudaEvent> {
        CudaEvent::create(self, desc)
    }

    fn alloc_impl(&self, len: usize) -> Result<CudaBuffer> {
        crate::memory::alloc(self, len)
    }

    fn alloc_pinned_impl(
        &self,
        len: usize,
        desc: &xstream_core::PinnedAllocDesc,
    ) -> Result<xstream_core::PinnedBuffer<CudaBackend>> {
        crate::hostmem::alloc_pinned(self, len, desc)
    }

    /// `cuMemHostRegister` of the caller's range, unregistered at the end of the scope.
    #[allow(unsafe_code)]
    unsafe fn register_host_range_impl(
        &self,
        ptr: *mut u8,
        len: usize,
    ) -> Result<std::sync::Arc<dyn xstream_core::PinnedAllocation>> {
        // SAFETY: forwarded from the caller (the contract of `DeviceImpl::register_host_range_impl`).
        unsafe { self.register_range(ptr, len) }
    }

    fn load_module_impl(&self, src: &ModuleSource<'_>) -> Result<CudaModule> {
        self.load_module_impl(src)
    }

    fn builtin_module_impl(&self) -> Result<CudaModule> {
        Ok(self.shared.kernels()?.module.clone())
    }

    fn synchronize_impl(&self) -> Result<()> {
        self.shared.bind()?;
        self.shared
            .check("cuCtxSynchronize", ffi::ctx_synchronize())
    }

    // --- ordering and allocation without host sync ---

    /// `cuMemAlloc` alone: no zeroing, no stream, no host wait (see `crate::memory`).
    #[allow(unsafe_code)] // the trait's contract is unsafe; the body has no unsafe code.
    unsafe fn alloc_uninit_impl(&self, len: usize) -> Result<CudaBuffer> {
        crate::memory::alloc_uninit(self, len)
    }

    /// `cuMemAlloc`, then `cuMemsetD8Async` of the whole allocation (granule slack included)
    /// on `stream`; no host wait.
    fn alloc_zeroed_on_impl(&self, stream: &CudaStream, len: usize) -> Result<CudaBuffer> {
        crate::memory::alloc_zeroed_on(self, stream, len)
    }

    // --- end of ordering and allocation without host sync ---
}
