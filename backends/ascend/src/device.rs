//! [`AscendDevice`] (context binding, capabilities) and [`AscendBuffer`].
//!
//! **Context binding.** ACL contexts are per thread (CANN AscendCL API reference). A device holds the
//! primary context of its ordinal (`aclrtSetDevice` + `aclrtGetCurrentContext`, released with
//! `aclrtResetDevice` when the last clone drops). Every entry point calls `DeviceInner::bind`,
//! which calls `aclrtSetCurrentContext` only when a thread-local cache says another context
//! (or none) is current. Code that switches contexts behind xstream's back on the same thread
//! must call [`AscendDevice::invalidate_thread_binding`].

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use xstream_core::sync::lock;

use xstream_core::callback::PendingCallbacks;
use xstream_core::{
    ensure_not_in_callback, BackendKind, BufferImpl, Capabilities, DeviceInfo, Error, EventDesc,
    PriorityRange, RawBuffer, Result, StreamDesc,
};
#[allow(unused_imports)] // doc links
use xstream_core::{Buffer, RawAlloc};

use crate::callback::{reap, Reporter};
use crate::event::AscendEvent;
use crate::module::AscendModule;
use crate::stream::{AscendStream, StreamState};
use crate::sys::{consts, AclFns, DevPtr, RawContext};
use crate::{result, AscendBackend};

/// What floating-point overflow gives on the device (`aclrtFloatOverflowMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaturationMode {
    /// Overflow saturates to the largest finite value (`ACL_RT_OVERFLOW_MODE_SATURATION`, 0).
    Saturation,
    /// Overflow gives inf, invalid operations NaN (`ACL_RT_OVERFLOW_MODE_INFNAN`, 1).
    InfNan,
}

/// An attribute of the installed CANN (`aclCannAttr`), from `aclGetCannAttributeList`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CannAttribute {
    /// `ACL_CANN_ATTR_INF_NAN` (0): the inf/NaN overflow mode
    /// ([`Capabilities::INF_NAN`](xstream_core::Capabilities::INF_NAN)).
    InfNan,
    /// `ACL_CANN_ATTR_BF16` (1): bfloat16 ([`Capabilities::BF16`](xstream_core::Capabilities::BF16)).
    Bf16,
    /// `ACL_CANN_ATTR_JIT_COMPILE` (2): operators compiled just in time.
    JitCompile,
    /// A value this crate does not name (a newer runtime).
    Other(i32),
}

impl CannAttribute {
    fn from_raw(v: i32) -> Self {
        match v {
            consts::ACL_CANN_ATTR_INF_NAN => Self::InfNan,
            consts::ACL_CANN_ATTR_BF16 => Self::Bf16,
            consts::ACL_CANN_ATTR_JIT_COMPILE => Self::JitCompile,
            v => Self::Other(v),
        }
    }
}

/// A device feature the runtime answers through `aclrtGetDeviceCapability`
/// (`aclrtDevFeatureType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceFeature {
    /// `ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV` (1): tasks of a captured model (AI Core
    /// and vector kernels) can be updated in place.
    TaskUpdateAicAiv,
    /// `ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV` (21): memory-queue events across devices.
    MemQueueEventCrossDevice,
}

static EPOCH: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static BOUND: Cell<(usize, u64)> = const { Cell::new((0, 0)) };
}

/// Records that `ctx` is now current on this thread.
pub(crate) fn note_bound(ctx: RawContext) {
    BOUND.with(|b| b.set((ctx.0 as usize, EPOCH.load(Ordering::Acquire))));
}

pub(crate) struct DeviceInner {
    pub(crate) t: &'static AclFns,
    pub(crate) ordinal: usize,
    pub(crate) ctx: RawContext,
    pub(crate) info: DeviceInfo,
    pub(crate) pending: PendingCallbacks,
    reporter: Mutex<Option<Reporter>>,
    pub(crate) default_state: Arc<StreamState>,
    /// Freed stream-ordered blocks and internal events (`crate::blocks`).
    pub(crate) blocks: crate::blocks::BlockCache,
    /// A context of its own (`aclrtCreateContext`), destroyed with the device, instead of the
    /// ordinal's primary context.
    isolated: bool,
    /// The builtin module's binary, loaded at open (only the simulator can), or why not.
    builtin: Result<crate::module::LoadedBuiltin>,
    /// Ordinals of the devices this one may access (`Device::enable_peer_access`).
    pub(crate) peers: Mutex<std::collections::HashSet<usize>>,
}

impl std::fmt::Debug for DeviceInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AscendDevice")
            .field("ordinal", &self.ordinal)
            .field("ctx", &self.ctx)
            .finish()
    }
}

impl DeviceInner {
    /// The builtin binary, or the error that says why this runtime has none.
    pub(crate) fn builtin(&self) -> Result<&crate::module::LoadedBuiltin> {
        self.builtin.as_ref().map_err(Clone::clone)
    }

    /// Makes this device's context current on the calling thread (cached).
    pub(crate) fn bind(&self) -> Result<()> {
        let want = (self.ctx.0 as usize, EPOCH.load(Ordering::Acquire));
        if BOUND.with(|b| b.get()) == want {
            return Ok(());
        }
        result::device::set_current_context(self.t, self.ctx)?;
        BOUND.with(|b| b.set(want));
        Ok(())
    }

    /// The report thread's id, spawning it on first use.
    pub(crate) fn reporter_tid(&self) -> Result<u64> {
        let mut g = lock(&self.reporter);
        if let Some(r) = g.as_ref() {
            return Ok(r.tid);
        }
        let r = Reporter::spawn(self.t, self.ctx, self.ordinal)?;
        let tid = r.tid;
        *g = Some(r);
        Ok(tid)
    }

    /// Fails every pending callback of the device when `e` is sticky; returns `e`.
    pub(crate) fn observe(&self, e: Error) -> Error {
        if e.is_sticky() {
            self.pending.fail_all(&e);
        }
        e
    }
}

/// `": <SoC>, <n> AI cores, <m> vector cores"` from what the runtime reports (empty when it
/// reports nothing).
fn describe_chip(soc: Option<String>, cores: Option<(u32, u32)>) -> String {
    let mut parts = Vec::new();
    if let Some(s) = soc {
        parts.push(s);
    }
    if let Some((cube, vector)) = cores {
        parts.push(format!("{cube} AI cores"));
        if vector > 0 {
            parts.push(format!("{vector} vector cores"));
        }
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(": {}", parts.join(", "))
    }
}

/// The device's `driver` string: the ACL API version (`aclrtGetVersion`), the CANN `runtime`
/// package version (`aclsysGetVersionStr` / `aclsysGetVersionNum`), the run mode
/// (`aclrtGetRunMode`) and the library, each where the runtime reports it.
fn describe_runtime(t: &AclFns, host: Option<bool>) -> String {
    let mut s = match t.version {
        Some((a, b, c)) => format!("ACL runtime {a}.{b}.{c}"),
        None => "ACL runtime".to_string(),
    };
    if let Some(p) = &t.package {
        s.push_str(&format!(", CANN {} package {}", p.package, p.text));
        if let Some(n) = p.number {
            s.push_str(&format!(" ({n})"));
        }
    }
    match host {
        Some(true) => s.push_str(", host run mode"),
        Some(false) => s.push_str(", device run mode"),
        None => {}
    }
    s.push_str(&format!(" from {}", t.library));
    s
}

impl Drop for DeviceInner {
    fn drop(&mut self) {
        // Streams hold the device, so every owned stream has been reaped (synchronized,
        // unsubscribed, destroyed). Only the default stream may still be subscribed.
        let _ = self.bind();
        let reporter = self
            .reporter
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(r) = reporter {
            let _ = result::stream::synchronize(self.t, self.default_state.raw);
            if let Some(tid) = self.default_state.take_subscription() {
                let _ = result::callback::unsubscribe(self.t, tid, self.default_state.raw);
            }
            r.stop();
        }
        // Every stream and buffer of the device is gone (they hold it); the cache's blocks
        // are free once the device is idle.
        if !self.blocks.is_empty() {
            let _ = result::device::synchronize(self.t);
            self.blocks.free_all(self.t);
        }
        self.pending
            .fail_all(&Error::CallbackCancelled("the Ascend device was dropped"));
        if let Ok(b) = &self.builtin {
            // Every stream, buffer and function holds the device: none is left, so no launch
            // of the builtin binary is still queued.
            let _ = result::kernel::unload(self.t, b.raw);
        }
        if self.isolated {
            let _ = result::device::destroy_context(self.t, self.ctx);
        } else {
            let _ = result::device::reset(self.t, self.ordinal as i32);
        }
        EPOCH.fetch_add(1, Ordering::AcqRel);
    }
}

/// An Ascend device (its primary ACL context). Cheap to clone.
#[derive(Clone, Debug)]
pub struct AscendDevice {
    pub(crate) inner: Arc<DeviceInner>,
}

fn registry() -> &'static Mutex<HashMap<usize, Weak<DeviceInner>>> {
    static R: std::sync::OnceLock<Mutex<HashMap<usize, Weak<DeviceInner>>>> =
        std::sync::OnceLock::new();
    R.get_or_init(Default::default)
}

/// Refuses an ordinal the runtime does not have.
fn check_ordinal(t: &AclFns, ordinal: usize) -> Result<()> {
    let count = result::device::count(t)? as usize;
    if ordinal >= count {
        return Err(Error::invalid(format!(
            "Ascend device {ordinal} does not exist ({count} device(s))"
        )));
    }
    Ok(())
}

impl AscendDevice {
    pub(crate) fn open(ordinal: usize) -> Result<Self> {
        ensure_not_in_callback()?;
        let t = crate::loader::acl()?;
        check_ordinal(t, ordinal)?;
        let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = reg.get(&ordinal).and_then(Weak::upgrade) {
            return Ok(Self { inner: d });
        }
        result::device::set(t, ordinal as i32)?;
        let ctx = match result::device::current_context(t) {
            Ok(c) => c,
            Err(e) => {
                let _ = result::device::reset(t, ordinal as i32);
                return Err(e);
            }
        };
        let inner = Arc::new(Self::inner(t, ordinal, ctx, false));
        reg.insert(ordinal, Arc::downgrade(&inner));
        Ok(Self { inner })
    }

    /// Opens device `ordinal` in a context of its own (`aclrtCreateContext`), not shared with
    /// [`Backend::open`](xstream_core::Backend::open): a device fault poisons only this
    /// context, so a test may fault it on purpose. The context is destroyed
    /// (`aclrtDestroyContext`) when the last clone drops. ACL-only extension.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an unknown ordinal; [`Error::Unsupported`] without
    /// `aclrtCreateContext`; vendor errors.
    pub fn new_isolated(ordinal: usize) -> Result<Self> {
        ensure_not_in_callback()?;
        let t = crate::loader::acl()?;
        check_ordinal(t, ordinal)?;
        let ctx = result::device::create_context(t, ordinal as i32)?;
        Ok(Self {
            inner: Arc::new(Self::inner(t, ordinal, ctx, true)),
        })
    }

    /// Probes the capabilities of the context `ctx` (current on this thread) and builds the
    /// device state.
    fn inner(t: &'static AclFns, ordinal: usize, ctx: RawContext, isolated: bool) -> DeviceInner {
        note_bound(ctx);
        let range = match result::device::priority_range(t) {
            Some(Ok((least, greatest))) => PriorityRange {
                least,
                greatest,
                default: 0i32.clamp(least.min(greatest), least.max(greatest)),
            },
            _ => PriorityRange::fixed(0),
        };
        let mut caps = Capabilities::empty();
        if !range.is_flat() {
            caps |= Capabilities::PRIORITY;
        }
        // Symbol-gated capabilities: a group counts only when all its symbols are exported.
        caps |= crate::loader::symbol_capabilities(t);
        if caps.contains(Capabilities::PEER_COPY) && !crate::peer::has_peer(t, ordinal) {
            caps.remove(Capabilities::PEER_COPY);
        }
        // Virtual memory: the symbols, and a granularity the runtime answers for this device.
        if caps.contains(Capabilities::VIRTUAL_MEMORY)
            && result::vmm::granularity(t, ordinal, 0).is_err()
        {
            caps.remove(Capabilities::VIRTUAL_MEMORY);
        }
        // The random-number task: the symbol, and a chip that has the task.
        if caps.contains(Capabilities::RANDOM) && !result::random::chip_has_task(t) {
            caps.remove(Capabilities::RANDOM);
        }
        if !caps.contains(Capabilities::VIRTUAL_MEMORY) {
            caps.remove(Capabilities::SHAREABLE_PHYSICAL);
        }
        // Probe IPC events honestly: the chip may refuse them (207000).
        if let Ok(e) = result::event::create_ex_with_flag(t, consts::ACL_EVENT_IPC) {
            caps |= Capabilities::INTERPROCESS_EVENTS;
            let _ = result::event::destroy(t, e);
        }
        // Numerics asked of the runtime, not assumed from the chip's name. A runtime without
        // the call, or one whose installation lacks its feature list (it answers an error
        // then), gives neither bit.
        if let Ok(true) = result::sysinfo::cann_attribute(t, consts::ACL_CANN_ATTR_BF16) {
            caps |= Capabilities::BF16;
        }
        if let Ok(true) = result::sysinfo::cann_attribute(t, consts::ACL_CANN_ATTR_INF_NAN) {
            caps |= Capabilities::INF_NAN;
        }
        // The builtin module loads only where the simulator's test-only format runs.
        let builtin = if caps.contains(Capabilities::MODULES) {
            crate::module::load_builtin(t)
        } else {
            Err(Error::unsupported(
                BackendKind::Ascend,
                format!(
                    "the builtin module: {} does not export the kernel-binary API",
                    t.library
                ),
            ))
        };
        if builtin.is_ok() {
            caps |= Capabilities::KERNELS;
        }
        let max_streams = result::device::stream_available(t).map(|n| n.saturating_add(1));
        let sim = t.xsimLaunchFault.is_some();
        let info = DeviceInfo {
            backend: BackendKind::Ascend,
            ordinal,
            name: format!(
                "Ascend NPU {ordinal}{}{}",
                describe_chip(result::sysinfo::soc_name(t), result::sysinfo::cores(t)),
                if sim {
                    " (xstream-ascend-sim CPU simulator)"
                } else {
                    ""
                }
            ),
            priority_range: range,
            capabilities: caps,
            max_streams,
            driver: describe_runtime(t, result::sysinfo::host_run_mode(t)),
            chip: result::sysinfo::soc_name(t),
            compute_capability: None,
            compute_units: result::sysinfo::ai_cores(t, ordinal as u32)
                .or_else(|| result::sysinfo::cores(t).map(|(cube, _)| cube))
                .filter(|&n| n > 0),
            total_memory: result::sysinfo::mem_info(t)
                .and_then(|r| r.ok())
                .map(|(_, total)| total),
            uuid: result::sysinfo::uuid(t, ordinal as i32).map(xstream_core::DeviceUuid),
            pci_bus_id: result::sysinfo::pci_bus_id(t, ordinal as i32),
            // `aclrtMalloc`'s documented start alignment.
            base_alignment: 64,
        };
        DeviceInner {
            t,
            ordinal,
            ctx,
            info,
            pending: PendingCallbacks::default(),
            reporter: Mutex::new(None),
            default_state: StreamState::new_default(),
            blocks: crate::blocks::BlockCache::default(),
            isolated,
            builtin,
            peers: Mutex::new(std::collections::HashSet::new()),
        }
    }

    /// The device's capabilities.
    pub(crate) fn info_caps(&self) -> Capabilities {
        self.inner.info.capabilities
    }

    /// Page-locks host memory the caller already has (`aclrtHostRegister`, type
    /// `ACL_HOST_REGISTER_MAPPED`) and wraps it as a [`xstream_core::PinnedBuffer`]; it is
    /// unregistered (`aclrtHostUnregister`) and freed when the buffer, and every copy that
    /// uses it, is gone. ACL registers only page-aligned addresses: a vector whose buffer is
    /// aligned to a 4 KiB page is registered in place; any other is moved once into a
    /// page-aligned block first (one copy at registration, none per transfer).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty vector; flag errors per the desc's policy (as
    /// [`Device::alloc_pinned`](xstream_core::Device::alloc_pinned)); [`Error::Unsupported`] when the runtime does not export
    /// `aclrtHostRegister` / `aclrtHostUnregister`; vendor errors.
    pub fn register_host(
        &self,
        data: Vec<u8>,
        desc: &xstream_core::PinnedAllocDesc,
    ) -> Result<xstream_core::PinnedBuffer<AscendBackend>> {
        ensure_not_in_callback()?;
        if data.is_empty() {
            return Err(Error::invalid("cannot register an empty host range"));
        }
        let (_, flags, report) = xstream_core::translate_pinned_flags(
            BackendKind::Ascend,
            ACL_PINNED_FLAGS,
            desc.flags,
            desc.policy,
        )?;
        self.inner.bind()?;
        let mem = result::memory::PinnedRegistered::new(self.inner.t, self.inner.ordinal, data)?;
        Ok(xstream_core::PinnedBuffer::from_allocation(
            self,
            Arc::new(mem),
            flags,
            report,
        ))
    }

    /// The ACL context handle.
    pub fn context(&self) -> RawContext {
        self.inner.ctx
    }

    /// The loaded function table (ACL-only extension; for calls xstream does not wrap).
    pub fn fns(&self) -> &'static AclFns {
        self.inner.t
    }

    /// Forgets this thread's cached context binding (call after switching ACL contexts on this
    /// thread outside xstream).
    pub fn invalidate_thread_binding() {
        BOUND.with(|b| b.set((0, 0)));
    }

    /// Makes the device's context current on the calling thread (ACL-only extension).
    ///
    /// # Errors
    /// `aclrtSetCurrentContext` errors; [`Error::NotPermitted`] inside a callback.
    pub fn bind(&self) -> Result<()> {
        ensure_not_in_callback()?;
        self.inner.bind()
    }

    /// The saturation mode (`aclrtGetDeviceSatMode`): whether floating-point overflow on the
    /// device saturates to the largest finite value or gives inf/NaN. One value for the whole
    /// process in the CANN runtime, saturation at start. ACL-only extension: the portable API
    /// has no device attributes (CUDA has no such switch).
    ///
    /// # Errors
    /// [`Error::Unsupported`] when the runtime lacks the call; its errors.
    pub fn saturation_mode(&self) -> Result<SaturationMode> {
        match result::sysinfo::sat_mode(self.inner.t)? {
            0 => Ok(SaturationMode::Saturation),
            1 => Ok(SaturationMode::InfNan),
            m => Err(Error::invalid(format!(
                "aclrtGetDeviceSatMode answered mode {m}, neither saturation (0) nor inf/NaN (1)"
            ))),
        }
    }

    /// Sets the saturation mode (`aclrtSetDeviceSatMode`) for the process. A chip with only the
    /// saturation mode (the 910, the 310P) refuses inf/NaN (207000 → [`Error::Unsupported`]).
    ///
    /// # Errors
    /// [`Error::NotPermitted`] inside a callback; [`Error::Unsupported`] when the runtime lacks
    /// the call or the chip the mode; its errors.
    pub fn set_saturation_mode(&self, mode: SaturationMode) -> Result<()> {
        ensure_not_in_callback()?;
        let m = match mode {
            SaturationMode::Saturation => 0,
            SaturationMode::InfNan => 1,
        };
        result::sysinfo::set_sat_mode(self.inner.t, m)
    }

    /// The attributes of the installed CANN (`aclGetCannAttributeList`), in the runtime's
    /// order. ACL-only extension; the portable bits they feed are
    /// [`Capabilities::BF16`](xstream_core::Capabilities::BF16) and
    /// [`Capabilities::INF_NAN`](xstream_core::Capabilities::INF_NAN).
    ///
    /// # Errors
    /// [`Error::Unsupported`] when the runtime lacks the call (runtimes before it); its
    /// errors (the runtime answers one when its installation has no feature list).
    pub fn cann_attributes(&self) -> Result<Vec<CannAttribute>> {
        Ok(result::sysinfo::cann_attribute_list(self.inner.t)?
            .into_iter()
            .map(CannAttribute::from_raw)
            .collect())
    }

    /// Whether the device has `feature` (`aclrtGetDeviceCapability`). ACL-only extension: the
    /// features it answers have no counterpart in the portable API.
    ///
    /// # Errors
    /// [`Error::NotPermitted`] inside a callback; [`Error::Unsupported`] when the runtime lacks
    /// the call; its errors.
    pub fn has_feature(&self, feature: DeviceFeature) -> Result<bool> {
        ensure_not_in_callback()?;
        self.inner.bind()?;
        let f = match feature {
            DeviceFeature::TaskUpdateAicAiv => {
                consts::ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV
            }
            DeviceFeature::MemQueueEventCrossDevice => {
                consts::ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV
            }
        };
        let v = result::sysinfo::device_capability(self.inner.t, self.inner.ordinal as i32, f)?;
        Ok(v == consts::ACL_DEV_FEATURE_SUPPORT)
    }

    /// How many callbacks of this device have not run yet.
    pub fn pending_callbacks(&self) -> usize {
        self.inner.pending.pending()
    }

    /// Sets the release threshold of the device's stream-ordered block cache: the bytes of
    /// blocks freed with `free_async` it keeps for reuse (default
    /// [`DEFAULT_RELEASE_THRESHOLD`](crate::blocks::DEFAULT_RELEASE_THRESHOLD)). Above it,
    /// `free_async` and `alloc_async` give completed blocks back with `aclrtFree`; lowering it
    /// trims the cache at once (completed blocks only). ACL-only extension (CUDA:
    /// `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`).
    ///
    /// # Errors
    /// [`Error::NotPermitted`] inside a callback; context binding errors.
    pub fn set_pool_release_threshold(&self, bytes: u64) -> Result<()> {
        ensure_not_in_callback()?;
        self.inner.bind()?;
        self.inner.blocks.set_threshold(bytes);
        self.inner.blocks.enforce_threshold(self.inner.t);
        Ok(())
    }

    /// The release threshold of the stream-ordered block cache.
    pub fn pool_release_threshold(&self) -> u64 {
        self.inner.blocks.threshold()
    }

    /// Frees (`aclrtFree`) cached stream-ordered blocks whose work has completed until at most
    /// `keep_bytes` stay cached, and destroys the internal events no cached block holds;
    /// returns the bytes freed. Blocks whose streams are still running stay cached:
    /// synchronize the device first to trim everything.
    ///
    /// # Errors
    /// [`Error::NotPermitted`] inside a callback; context binding errors.
    pub fn trim_pool(&self, keep_bytes: u64) -> Result<u64> {
        ensure_not_in_callback()?;
        self.inner.bind()?;
        Ok(self.inner.blocks.trim(self.inner.t, keep_bytes))
    }

    /// Bytes and number of freed stream-ordered blocks cached for reuse now.
    pub fn pool_cached(&self) -> (u64, usize) {
        (self.inner.blocks.cached(), self.inner.blocks.blocks())
    }

    pub(crate) fn same(&self, other: &AscendDevice) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl AscendDevice {
    /// `aclrtMalloc` of `len` rounded up to the granule, not zeroed: the buffer and the
    /// allocated size.
    pub(crate) fn alloc_plain(&self, len: usize) -> Result<(AscendBuffer, usize)> {
        let d = &self.inner;
        d.bind()?;
        if len > isize::MAX as usize {
            // No address space holds it; ACL's parameter check would call it an invalid
            // argument (100000), but for the caller it is running out of memory.
            return Err(Error::OutOfMemory {
                backend: BackendKind::Ascend,
                detail: format!("{len} bytes is more than any address space holds"),
            });
        }
        // Rounded up to the allocation granule (docs/semantics.md); `len` stays the buffer's
        // length. Cannot overflow: `len` is at most `isize::MAX`.
        // A zero-length buffer holds one granule (a valid, unique address).
        let size = xstream_core::alloc_size(len.max(1)).unwrap_or(len);
        let ptr = result::memory::malloc(d.t, size, consts::ACL_MEM_MALLOC_HUGE_FIRST)?;
        let buf = AscendBuffer {
            inner: Arc::new(BufInner {
                device: self.clone(),
                ptr,
                len,
                ordered: None,
                leaked: std::sync::atomic::AtomicBool::new(false),
                mapped: None,
            }),
        };
        Ok((buf, size))
    }
}

impl xstream_core::DeviceImpl for AscendDevice {
    type B = AscendBackend;

    fn can_access_peer_impl(&self, peer: &AscendDevice) -> Result<bool> {
        crate::peer::can_access_peer(self, peer)
    }

    fn enable_peer_access_impl(&self, peer: &AscendDevice) -> Result<()> {
        crate::peer::enable(self, peer)
    }

    fn disable_peer_access_impl(&self, peer: &AscendDevice) -> Result<()> {
        crate::peer::disable(self, peer)
    }

    // --- device info ---

    fn memory_info_impl(&self) -> Result<xstream_core::MemoryInfo> {
        let d = &self.inner;
        d.bind()?;
        match result::sysinfo::mem_info(d.t) {
            Some(r) => r.map(|(free, total)| xstream_core::MemoryInfo { free, total }),
            None => Err(Error::unsupported(
                BackendKind::Ascend,
                format!(
                    "free memory: {} does not export aclrtGetMemInfo",
                    d.t.library
                ),
            )),
        }
    }

    // --- end of device info ---

    fn info_impl(&self) -> &DeviceInfo {
        &self.inner.info
    }

    fn create_stream_impl(&self, desc: &StreamDesc) -> Result<AscendStream> {
        AscendStream::create(self, desc)
    }

    fn default_stream_impl(&self) -> Result<AscendStream> {
        Ok(AscendStream::default_of(self))
    }

    fn create_event_impl(&self, desc: &EventDesc) -> Result<AscendEvent> {
        AscendEvent::create(self, desc)
    }

    fn alloc_impl(&self, len: usize) -> Result<AscendBuffer> {
        let (buf, size) = self.alloc_plain(len)?;
        let (d, ptr) = (&self.inner, buf.inner.ptr);
        // Zero it before returning (documented cost of alloc): with the synchronous
        // `aclrtMemset` where the runtime has it, else on the default stream and wait.
        if crate::loader::has_group(d.t, &crate::loader::SYNC_MEMSET) {
            result::sysinfo::memset(d.t, ptr, size, 0).map_err(|e| d.observe(e))?;
        } else {
            let raw = d.default_state.raw;
            result::memory::memset_async(d.t, ptr, 0, size, 0, raw)?;
            result::stream::synchronize(d.t, raw).map_err(|e| d.observe(e))?;
        }
        Ok(buf)
    }

    fn alloc_pinned_impl(
        &self,
        len: usize,
        desc: &xstream_core::PinnedAllocDesc,
    ) -> Result<xstream_core::PinnedBuffer<AscendBackend>> {
        let (_, flags, report) = xstream_core::translate_pinned_flags(
            xstream_core::BackendKind::Ascend,
            ACL_PINNED_FLAGS,
            desc.flags,
            desc.policy,
        )?;
        if len == 0 {
            return xstream_core::PinnedBuffer::empty(self, flags, report);
        }
        self.inner.bind()?;
        let mem = result::memory::PinnedAlloc::new(self.inner.t, self.inner.ordinal, len)?;
        Ok(xstream_core::PinnedBuffer::from_allocation(
            self,
            Arc::new(mem),
            flags,
            report,
        ))
    }

    /// `aclrtHostRegister` of the pages holding the caller's range (the runtime takes
    /// page-aligned addresses only), unregistered at the end of the scope.
    #[allow(unsafe_code)]
    unsafe fn register_host_range_impl(
        &self,
        ptr: *mut u8,
        len: usize,
    ) -> Result<Arc<dyn xstream_core::PinnedAllocation>> {
        self.inner.bind()?;
        // SAFETY: forwarded from the caller (the contract of `DeviceImpl::register_host_range_impl`).
        let r = unsafe {
            result::memory::BorrowedRegistration::new(self.inner.t, self.inner.ordinal, ptr, len)
        }?;
        Ok(Arc::new(r))
    }

    fn load_module_impl(&self, src: &xstream_core::ModuleSource<'_>) -> Result<AscendModule> {
        match src {
            xstream_core::ModuleSource::AscendBinary(data) => AscendModule::load(self, data),
            other => Err(other.unsupported_on(BackendKind::Ascend)),
        }
    }

    fn builtin_module_impl(&self) -> Result<AscendModule> {
        AscendModule::builtin(self)
    }

    fn synchronize_impl(&self) -> Result<()> {
        let d = &self.inner;
        d.bind()?;
        result::device::synchronize(d.t).map_err(|e| d.observe(e))
    }

    // --- ordering and allocation without host sync ---

    /// `aclrtMalloc` alone: no zeroing, no stream, no host wait.
    #[allow(unsafe_code)] // the trait's contract is unsafe; the body has no unsafe code.
    unsafe fn alloc_uninit_impl(&self, len: usize) -> Result<AscendBuffer> {
        self.alloc_plain(len).map(|(b, _)| b)
    }

    /// `aclrtMalloc`, then `aclrtMemsetAsync` of the buffer's `len` bytes on `stream`
    /// (through `Stream::memset`); no host wait.
    fn alloc_zeroed_on_impl(&self, stream: &AscendStream, len: usize) -> Result<AscendBuffer> {
        let (buf, _) = self.alloc_plain(len)?;
        xstream_core::Stream::memset(stream, &buf, 0, len, 0)?;
        Ok(buf)
    }

    // --- end of ordering and allocation without host sync ---
}

mod buffer;
pub(crate) use buffer::BufInner;
#[allow(deprecated)]
pub use buffer::ACL_HOST_MEM_FLAGS;
pub use buffer::{AscendBuffer, ACL_PINNED_FLAGS};

/// Number of devices (used by the backend).
pub(crate) fn device_count() -> Result<usize> {
    ensure_not_in_callback()?;
    let t = crate::loader::acl()?;
    Ok(result::device::count(t)? as usize)
}
