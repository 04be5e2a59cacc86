//! Host devices: one shared context per ordinal (like a CUDA primary context), or isolated
//! contexts for tests that poison a device.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use xstream_core::callback::{ensure_not_in_callback, PendingCallbacks};
use xstream_core::{
    BackendKind, Capabilities, CreationReport, DeviceInfo, Error, EventDesc, FlagReport, Priority,
    PriorityOutcome, Result, StreamDesc, StreamFlags,
};

use crate::conv::{HOST_FLAGS, HOST_PRIORITY_RANGE};
use crate::worker::{Queue, QueueKind};
use crate::{HostDeviceBuffer, HostEvent, HostStream};

/// The environment variable that sets how many host devices there are (default 1).
pub const DEVICES_ENV: &str = "XSTREAM_HOST_DEVICES";

/// The largest device count [`DEVICES_ENV`] may ask for.
pub const MAX_DEVICES: usize = 64;

/// What the host backend supports (see the crate docs for what each means here).
pub const HOST_CAPABILITIES: Capabilities = Capabilities::PRIORITY
    .union(Capabilities::CAPTURE)
    .union(Capabilities::ATTRIBUTES)
    .union(Capabilities::NATIVE_TIMED_SYNC)
    .union(Capabilities::STREAM_IDS)
    .union(Capabilities::KERNELS)
    .union(Capabilities::MODULES)
    .union(if cfg!(feature = "testing") {
        Capabilities::FAULT_INJECTION
    } else {
        Capabilities::empty()
    })
    .union(Capabilities::CROSS_DEVICE_WAIT)
    .union(Capabilities::VIRTUAL_MEMORY)
    .union(Capabilities::SHAREABLE_PHYSICAL)
    .union(Capabilities::LEGACY_DEFAULT_STREAM)
    .union(Capabilities::VALUE_OPS_32)
    .union(Capabilities::VALUE_OPS_64)
    .union(Capabilities::REDUCE)
    .union(Capabilities::RANDOM)
    .union(Capabilities::PEER_COPY)
    .union(Capabilities::INTERPROCESS_EVENTS)
    .union(Capabilities::BF16)
    .union(Capabilities::INF_NAN);

/// Process-wide ids for streams and events (never recycled).
pub(crate) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

use xstream_core::sync::lock;

#[derive(Default)]
struct Registry {
    queues: HashMap<u64, Weak<Queue>>,
    prune_at: usize,
}

/// The state of one context that its queues share (kept apart from [`HostDevice`] so that
/// queues can hold it without a reference cycle through the default stream).
pub(crate) struct DeviceShared {
    pub ordinal: usize,
    fault: OnceLock<Error>,
    pub pending: PendingCallbacks,
    registry: Mutex<Registry>,
    default: OnceLock<Weak<Queue>>,
}

impl DeviceShared {
    /// The sticky error, once the device faulted.
    pub(crate) fn fault(&self) -> Option<Error> {
        self.fault.get().cloned()
    }

    /// `Err(sticky error)` once the device faulted.
    pub(crate) fn check(&self) -> Result<()> {
        match self.fault.get() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Poisons the device (the first fault wins) and fails every pending callback with the
    /// sticky error, like CUDA's status-carrying callbacks after a context fault.
    pub(crate) fn poison(&self, api: &'static str) -> Error {
        self.poison_with(api, None)
    }

    /// As [`DeviceShared::poison`], with a message (a failed host kernel's error).
    pub(crate) fn poison_with(&self, api: &'static str, message: Option<String>) -> Error {
        let err = crate::error::map(api, crate::error::HOST_DEVICE_FAULT, message);
        if self.fault.set(err.clone()).is_ok() {
            tracing::error!(device = self.ordinal, "host device fault: context poisoned");
            let failed = self.pending.fail_all(&err);
            tracing::debug!(
                failed,
                "pending host callbacks failed with the sticky error"
            );
        }
        self.fault().unwrap_or(err)
    }

    pub(crate) fn register(&self, q: &Arc<Queue>) {
        let mut r = lock(&self.registry);
        if r.queues.len() >= r.prune_at {
            r.queues.retain(|_, w| w.strong_count() > 0);
            r.prune_at = (r.queues.len() * 2).max(64);
        }
        r.queues.insert(q.id, Arc::downgrade(q));
    }

    /// A live queue by id.
    pub(crate) fn find(&self, id: u64) -> Option<Arc<Queue>> {
        lock(&self.registry).queues.get(&id).and_then(Weak::upgrade)
    }

    /// Every live queue (streams dropped with work still queued included).
    pub(crate) fn live_queues(&self) -> Vec<Arc<Queue>> {
        lock(&self.registry)
            .queues
            .values()
            .filter_map(Weak::upgrade)
            .collect()
    }

    pub(crate) fn default_queue(&self) -> Option<Arc<Queue>> {
        self.default.get().and_then(Weak::upgrade)
    }
}

struct DeviceInner {
    info: DeviceInfo,
    shared: Arc<DeviceShared>,
    default_queue: Arc<Queue>,
    /// Ordinals of the devices this one may access (`Device::enable_peer_access`).
    peers: Mutex<std::collections::HashSet<usize>>,
}

/// A host device: one context with a default stream, the sticky fault state and the
/// registry of its streams. Cheap to clone; clones share the context.
#[derive(Clone)]
pub struct HostDevice {
    inner: Arc<DeviceInner>,
}

impl std::fmt::Debug for HostDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostDevice")
            .field("name", &self.inner.info.name)
            .field("faulted", &self.inner.shared.fault().is_some())
            .finish()
    }
}

/// How many host devices [`DEVICES_ENV`] asks for.
pub(crate) fn device_count() -> Result<usize> {
    match std::env::var(DEVICES_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(1),
        Err(e) => Err(Error::invalid(format!("{DEVICES_ENV}: {e}"))),
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n <= MAX_DEVICES => Ok(n),
            _ => Err(Error::invalid(format!(
                "{DEVICES_ENV}={v:?}: expected a device count from 0 to {MAX_DEVICES}"
            ))),
        },
    }
}

/// The shared device of `ordinal` (created on first open).
pub(crate) fn open(ordinal: usize) -> Result<HostDevice> {
    ensure_not_in_callback()?;
    let n = device_count()?;
    if ordinal >= n {
        return Err(Error::invalid(format!(
            "host device {ordinal} does not exist ({n} host device(s); set {DEVICES_ENV})"
        )));
    }
    static DEVICES: OnceLock<Mutex<HashMap<usize, HostDevice>>> = OnceLock::new();
    let mut g = lock(DEVICES.get_or_init(Default::default));
    Ok(g.entry(ordinal)
        .or_insert_with(|| HostDevice::new_isolated(ordinal))
        .clone())
}

impl HostDevice {
    /// A fresh, independent context for `ordinal`: its own default stream, streams and fault
    /// state, unlike [`Backend::open`](xstream_core::Backend::open), which returns the one
    /// shared context of the ordinal. Tests that poison a device use this. The ordinal is a
    /// label here; it is not checked against the device count.
    pub fn new_isolated(ordinal: usize) -> Self {
        let shared = Arc::new(DeviceShared {
            ordinal,
            fault: OnceLock::new(),
            pending: PendingCallbacks::default(),
            registry: Mutex::new(Registry::default()),
            default: OnceLock::new(),
        });
        let (flags, native) = match HOST_FLAGS.stream_to_native(
            StreamFlags::empty(),
            xstream_core::TranslationPolicy::Strict,
        ) {
            Ok(t) => (t.effective, t.native),
            Err(_) => (StreamFlags::empty(), 0),
        };
        let report = CreationReport {
            flags: FlagReport::default(),
            priority: PriorityOutcome {
                requested: Priority::Normal,
                native: HOST_PRIORITY_RANGE.default,
                clamped_from: None,
                collapsed_into: None,
            },
        };
        let default_queue = Queue::new(
            next_id(),
            Some(format!("host-cpu-{ordinal}-default")),
            Arc::clone(&shared),
            flags,
            native,
            QueueKind::Default,
            report,
            HOST_PRIORITY_RANGE.default,
        );
        shared.register(&default_queue);
        let _ = shared.default.set(Arc::downgrade(&default_queue));
        let info = DeviceInfo {
            backend: BackendKind::Host,
            ordinal,
            name: format!("host-cpu-{ordinal}"),
            priority_range: HOST_PRIORITY_RANGE,
            capabilities: HOST_CAPABILITIES,
            max_streams: None,
            driver: format!("xstream-host {} (std threads)", env!("CARGO_PKG_VERSION")),
            chip: Some(std::env::consts::ARCH.to_string()),
            compute_capability: None,
            compute_units: std::thread::available_parallelism()
                .ok()
                .and_then(|n| u32::try_from(n.get()).ok()),
            total_memory: system_memory().ok().map(|m| m.total),
            uuid: None,
            pci_bus_id: None,
            base_alignment: crate::buffer::BASE_ALIGN,
        };
        Self {
            inner: Arc::new(DeviceInner {
                info,
                shared,
                default_queue,
                peers: Mutex::new(std::collections::HashSet::new()),
            }),
        }
    }

    /// Whether two handles are the same context.
    pub fn same_context(&self, other: &HostDevice) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The sticky error, once a `Kernel::Fault` poisoned the
    /// device.
    pub fn fault(&self) -> Option<Error> {
        self.inner.shared.fault()
    }

    /// How many stream-blocking callbacks of this device have not run yet.
    pub fn pending_callbacks(&self) -> usize {
        self.inner.shared.pending.pending()
    }

    /// Whether this device enabled access to host device `ordinal`.
    pub(crate) fn peer_enabled(&self, ordinal: usize) -> bool {
        self.inner
            .peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(&ordinal)
    }

    /// Checks that `peer` is another host device; returns its ordinal.
    fn peer_ordinal(&self, op: &str, peer: &HostDevice) -> Result<usize> {
        let (mine, theirs) = (self.inner.info.ordinal, peer.inner.info.ordinal);
        if mine == theirs {
            return Err(Error::invalid(format!(
                "{op}: host device {mine} is its own peer (same-device copies use Stream::copy)"
            )));
        }
        Ok(theirs)
    }

    pub(crate) fn shared(&self) -> &Arc<DeviceShared> {
        &self.inner.shared
    }

    pub(crate) fn default_queue(&self) -> &Arc<Queue> {
        &self.inner.default_queue
    }
}

impl xstream_core::DeviceImpl for HostDevice {
    type B = crate::HostBackend;

    // --- device info ---

    fn memory_info_impl(&self) -> Result<xstream_core::MemoryInfo> {
        system_memory()
    }

    // --- end of device info ---

    fn info_impl(&self) -> &DeviceInfo {
        &self.inner.info
    }

    fn create_stream_impl(&self, desc: &StreamDesc) -> Result<HostStream> {
        self.inner.shared.check()?;
        HostStream::create(self, desc)
    }

    fn default_stream_impl(&self) -> Result<HostStream> {
        Ok(HostStream::default_of(self))
    }

    fn create_event_impl(&self, desc: &EventDesc) -> Result<HostEvent> {
        self.inner.shared.check()?;
        HostEvent::create(self, desc)
    }

    fn alloc_impl(&self, len: usize) -> Result<HostDeviceBuffer> {
        self.inner.shared.check()?;
        HostDeviceBuffer::alloc(len, self.inner.info.ordinal)
    }

    fn alloc_pinned_impl(
        &self,
        len: usize,
        desc: &xstream_core::PinnedAllocDesc,
    ) -> Result<xstream_core::PinnedBuffer<crate::HostBackend>> {
        self.inner.shared.check()?;
        crate::hostmem::alloc_pinned(self, len, desc)
    }

    /// Nothing to page-lock on the host: the caller's bytes, as they are.
    #[allow(unsafe_code)]
    unsafe fn register_host_range_impl(
        &self,
        ptr: *mut u8,
        len: usize,
    ) -> Result<std::sync::Arc<dyn xstream_core::PinnedAllocation>> {
        self.inner.shared.check()?;
        // SAFETY: the caller keeps the contract of `DeviceImpl::register_host_range_impl`, which is
        // `BorrowedPinnedRange::new`'s.
        let r =
            unsafe { xstream_core::BorrowedPinnedRange::new(ptr, len, self.inner.info.ordinal) }?;
        Ok(std::sync::Arc::new(r))
    }

    fn can_access_peer_impl(&self, peer: &HostDevice) -> Result<bool> {
        // Host devices share one address space: every distinct pair may access each other.
        Ok(self.inner.info.ordinal != peer.inner.info.ordinal)
    }

    fn enable_peer_access_impl(&self, peer: &HostDevice) -> Result<()> {
        let theirs = self.peer_ordinal("enable_peer_access", peer)?;
        self.inner
            .peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(theirs);
        Ok(())
    }

    fn disable_peer_access_impl(&self, peer: &HostDevice) -> Result<()> {
        let theirs = self.peer_ordinal("disable_peer_access", peer)?;
        let removed = self
            .inner
            .peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&theirs);
        if !removed {
            return Err(Error::invalid(format!(
                "disable_peer_access: host device {} never enabled access to device {theirs}",
                self.inner.info.ordinal
            )));
        }
        Ok(())
    }

    fn load_module_impl(
        &self,
        src: &xstream_core::ModuleSource<'_>,
    ) -> Result<crate::HostLoadedModule> {
        self.inner.shared.check()?;
        match src {
            xstream_core::ModuleSource::Host(m) => Ok(crate::HostLoadedModule::new(
                m.clone(),
                self.inner.info.ordinal,
            )),
            other => Err(other.unsupported_on(BackendKind::Host)),
        }
    }

    fn builtin_module_impl(&self) -> Result<crate::HostLoadedModule> {
        Ok(crate::HostLoadedModule::new(
            crate::builtin_host_module().clone(),
            self.inner.info.ordinal,
        ))
    }

    fn synchronize_impl(&self) -> Result<()> {
        let _span =
            tracing::debug_span!("device_synchronize", device = self.inner.info.ordinal).entered();
        for q in self.inner.shared.live_queues() {
            q.wait_for(q.enqueued(), None, crate::conv::WaitMode::Block);
        }
        self.inner.shared.check()
    }

    /// No cheaper path: an ordinary (zeroed) allocation.
    #[allow(unsafe_code)]
    unsafe fn alloc_uninit_impl(&self, len: usize) -> Result<HostDeviceBuffer> {
        self.alloc_impl(len)
    }

    /// An ordinary allocation, then the zeroing in `stream`'s order (as the other backends,
    /// so a capture records it).
    fn alloc_zeroed_on_impl(&self, stream: &HostStream, len: usize) -> Result<HostDeviceBuffer> {
        let buf = self.alloc_impl(len)?;
        xstream_core::Stream::memset(stream, &buf, 0, len, 0)?;
        Ok(buf)
    }
}

/// The system's memory from `/proc/meminfo` (`MemTotal`, `MemAvailable`): the host device's
/// memory is the process's.
fn system_memory() -> Result<xstream_core::MemoryInfo> {
    let text = std::fs::read_to_string("/proc/meminfo").map_err(|e| {
        Error::unsupported(
            BackendKind::Host,
            format!("free memory: /proc/meminfo cannot be read ({e})"),
        )
    })?;
    xstream_core::devinfo::parse_meminfo(&text).ok_or_else(|| {
        Error::unsupported(
            BackendKind::Host,
            "free memory: /proc/meminfo has no MemTotal / MemAvailable",
        )
    })
}
