//! Value types of the backend traits: backend kinds, capability bits, device facts, stream and
//! event descriptions, creation reports, ownership and status.

use std::fmt;

use crate::{
    Error, EventFlags, FlagReport, Priority, PriorityOutcome, PriorityRange, Result, StreamFlags,
    TranslationPolicy,
};

/// The backends xstream knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BackendKind {
    /// CPU threads: the reference implementation.
    Host,
    /// NVIDIA GPUs through the CUDA driver API.
    Cuda,
    /// Huawei Ascend NPUs through the ACL runtime.
    Ascend,
}

impl BackendKind {
    /// Every kind, in preference order for automatic choice (accelerators first).
    pub const ALL: [BackendKind; 3] = [BackendKind::Cuda, BackendKind::Ascend, BackendKind::Host];

    /// Lower-case name, as used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Host => "host",
            BackendKind::Cuda => "cuda",
            BackendKind::Ascend => "ascend",
        }
    }

    /// The cargo feature that compiles the backend in.
    pub fn feature(self) -> &'static str {
        self.name()
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for BackendKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "host" | "cpu" => Ok(BackendKind::Host),
            "cuda" | "nvidia" => Ok(BackendKind::Cuda),
            "ascend" | "acl" | "npu" => Ok(BackendKind::Ascend),
            other => Err(Error::invalid(format!(
                "unknown backend `{other}` (expected host, cuda or ascend)"
            ))),
        }
    }
}

bitflags::bitflags! {
    /// What a device supports beyond the portable minimum.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Capabilities: u32 {
        /// More than one stream priority level.
        const PRIORITY = 1 << 0;
        /// Stream capture to a replayable graph.
        const CAPTURE = 1 << 1;
        /// Typed stream attributes (get/set/copy).
        const ATTRIBUTES = 1 << 2;
        /// A vendor call for synchronize-with-timeout (otherwise emulated by polling).
        const NATIVE_TIMED_SYNC = 1 << 3;
        /// Stream-ordered allocation (memory pools).
        const STREAM_ORDERED_ALLOC = 1 << 4;
        /// Managed (unified) memory attachable to streams.
        const MANAGED_MEMORY = 1 << 5;
        /// Interprocess events.
        const INTERPROCESS_EVENTS = 1 << 6;
        /// A vendor registry of per-stream allocators.
        const ALLOCATOR_REGISTRY = 1 << 7;
        /// Vendor stream ids.
        const STREAM_IDS = 1 << 8;
        /// The built-in kernels of [`Kernel`].
        const KERNELS = 1 << 9;
        /// `Kernel::Fault` (a deliberate device fault, for tests; it exists with the
        /// `testing` feature, and a backend reports this only with its own `testing`).
        const FAULT_INJECTION = 1 << 10;
        /// Streams may wait on events of other devices.
        const CROSS_DEVICE_WAIT = 1 << 11;
        /// The legacy default-stream rule (blocking streams synchronize with the default
        /// stream).
        const LEGACY_DEFAULT_STREAM = 1 << 12;
        /// Modules of user kernels: [`Device::load_module`](crate::Device::load_module),
        /// [`Device::builtin_module`](crate::Device::builtin_module),
        /// [`Stream::launch_kernel`](crate::Stream::launch_kernel).
        const MODULES = 1 << 13;
        /// Asynchronous copies between devices of one backend
        /// ([`Stream::copy_peer`](crate::Stream::copy_peer), after
        /// [`Device::enable_peer_access`](crate::Device::enable_peer_access)).
        const PEER_COPY = 1 << 14;
        /// 32-bit stream memory operations ([`Stream::wait_value32`], [`Stream::write_value32`]).
        const VALUE_OPS_32 = 1 << 20;
        /// 64-bit stream memory operations ([`Stream::wait_value64`], [`Stream::write_value64`]).
        const VALUE_OPS_64 = 1 << 21;
        /// The built-in reduce operation ([`Stream::reduce`]; see the `reduce` module).
        const REDUCE = 1 << 22;
        /// bfloat16 is a data type of the device's compute stack (its kernels and built-ins):
        /// compute capability 8.0 and later on CUDA; the CANN attribute `BF16`
        /// (`aclGetCannAttribute`) on Ascend; always on the host backend (in software).
        const BF16 = 1 << 25;
        /// Floating-point overflow can give inf/NaN (IEEE behaviour) rather than saturating:
        /// always on CUDA and the host backend; the CANN attribute `INF_NAN` on Ascend (a chip
        /// without it saturates).
        const INF_NAN = 1 << 26;
        /// Virtual memory: reserved address ranges, physical memory mapped into them
        /// (see the `vmm` module).
        const VIRTUAL_MEMORY = 1 << 27;
        /// The built-in random fill ([`Kernel::Random`]; see the `random` module).
        const RANDOM = 1 << 28;
        /// Physical memory of the virtual memory API can be shared with another process
        /// ([`PhysicalMemory::export_shareable`](crate::PhysicalMemory::export_shareable),
        /// [`VirtualMemory::import_physical`](crate::VirtualMemory::import_physical); see the
        /// `vmm_share` module). Implies `VIRTUAL_MEMORY`.
        const SHAREABLE_PHYSICAL = 1 << 29;
    }
}

/// Static facts about one device.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    /// Its backend.
    pub backend: BackendKind,
    /// Its ordinal within the backend.
    pub ordinal: usize,
    /// Its name.
    pub name: String,
    /// Its native priority range.
    pub priority_range: PriorityRange,
    /// What it supports.
    pub capabilities: Capabilities,
    /// How many streams it can hold, when the vendor documents a limit.
    pub max_streams: Option<u32>,
    /// Driver or runtime version, in the vendor's words.
    pub driver: String,
    /// The chip: `sm_90` (CUDA), the SoC name (Ascend), the CPU architecture (host); see
    /// [`crate::devinfo`].
    pub chip: Option<String>,
    /// Compute capability `(major, minor)` (CUDA only).
    pub compute_capability: Option<(u32, u32)>,
    /// Compute units: multiprocessors (CUDA), AI Cores (Ascend), logical CPUs (host).
    pub compute_units: Option<u32>,
    /// Total memory in bytes (free memory: [`Device::memory_info`](crate::Device::memory_info)).
    pub total_memory: Option<u64>,
    /// The device's UUID, where the vendor has one.
    pub uuid: Option<crate::devinfo::DeviceUuid>,
    /// The PCI bus id (`domain:bus:device.function`), where the vendor has one.
    pub pci_bus_id: Option<String>,
    /// The alignment, in bytes, of the first byte of every buffer from [`Device::alloc`](crate::Device::alloc)
    /// and [`Stream::alloc_async`](crate::Stream::alloc_async) (what vector loads and vendor operator libraries rely on):
    /// the vendor's guarantee, 256 on CUDA (`cuMemAlloc`), 64 on Ascend (`aclrtMalloc`'s
    /// documented start alignment), 256 on the host backend (which aligns its blocks so).
    /// Buffers wrapped with `from_raw_borrowed` have whatever alignment their owner gave.
    pub base_alignment: usize,
}

/// How to create a stream.
#[derive(Debug, Clone, Default)]
pub struct StreamDesc {
    /// Portable flags.
    pub flags: StreamFlags,
    /// Portable priority.
    pub priority: Priority,
    /// What to do with flags the backend cannot honour.
    pub policy: TranslationPolicy,
    /// A name shown in traces and, where the vendor allows, in profilers.
    pub name: Option<String>,
}

impl StreamDesc {
    /// A default, blocking, normal-priority, strict stream.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the flags.
    pub fn flags(mut self, flags: StreamFlags) -> Self {
        self.flags = flags;
        self
    }
    /// Sets the priority.
    pub fn priority(mut self, p: Priority) -> Self {
        self.priority = p;
        self
    }
    /// Sets the policy.
    pub fn policy(mut self, p: TranslationPolicy) -> Self {
        self.policy = p;
        self
    }
    /// Sets the name.
    pub fn name(mut self, n: impl Into<String>) -> Self {
        self.name = Some(n.into());
        self
    }
}

/// How to create an event.
#[derive(Debug, Clone, Copy, Default)]
pub struct EventDesc {
    /// Portable flags.
    pub flags: EventFlags,
    /// What to do with flags the backend cannot honour.
    pub policy: TranslationPolicy,
}

impl EventDesc {
    /// A timing-enabled event, strict policy.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the flags.
    pub fn flags(mut self, flags: EventFlags) -> Self {
        self.flags = flags;
        self
    }
    /// Sets the policy.
    pub fn policy(mut self, p: TranslationPolicy) -> Self {
        self.policy = p;
        self
    }
}

/// What stream creation did with the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreationReport {
    /// Flag translation.
    pub flags: FlagReport,
    /// Priority mapping (with the clamp, if any).
    pub priority: PriorityOutcome,
}

/// Who owns a stream's native handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ownership {
    /// xstream created it and destroys it on drop (deferred until its work completes).
    Owned,
    /// Somebody else owns it (built with `from_raw`); never destroyed by xstream.
    Borrowed,
    /// The device's default stream; never destroyed.
    Default,
}

/// Whether submitted work has finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Everything submitted so far has completed.
    Ready,
    /// Some work is still pending.
    Pending,
}
