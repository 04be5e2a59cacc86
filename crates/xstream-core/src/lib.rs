//! # xstream-core
//!
//! The portable semantics of xstream: one Stream / Event / host-callback model over NVIDIA
//! GPUs (CUDA driver), Huawei Ascend NPUs (ACL runtime) and CPU threads (the reference).
//!
//! This crate holds no vendor code. Its only `unsafe` blocks are in [`hostmem`] (the aligned
//! host allocation and the byte views of page-locked host buffers); two `unsafe fn`s are
//! declared: [`Stream::borrow_raw`] and [`Device::alloc_uninit`], whose contracts the caller must
//! uphold. It defines:
//!
//! | module | what |
//! |---|---|
//! | [`backend`] | what a backend implements: the [`Backend`] family of traits (static dispatch; [`DeviceImpl`], [`StreamImpl`], [`EventImpl`] and [`GraphImpl`] have no checks); their value types, the built-in kernels, readbacks and borrowed handles in its submodules |
//! | [`api`] | what users call: the checked [`Device`], [`Stream`], [`Event`] and [`Graph`] over every backend's [`DeviceImpl`], [`StreamImpl`], [`EventImpl`] and [`GraphImpl`] (every check of their operations, once) |
//! | [`flags`] / [`translate`] | portable flags and per-backend translation tables, as data |
//! | [`priority`] | ordered portable priorities mapped through native ranges, never clamped silently |
//! | [`capture`] | the one capture state machine every backend follows |
//! | [`collective`] | the portable communicator (all-reduce, ... send/recv) enqueued on streams, its bootstrap |
//! | [`callback`] | the exactly-once host callback contract, panic capture, the dispatcher |
//! | [`completion`] | executor-agnostic futures for stream and event completion |
//! | [`pool`] | per-device stream pools with round-robin sharing and exclusive leases |
//! | [`allocator`] | per-stream allocators |
//! | [`hostmem`] | page-locked host buffers and the host side of asynchronous copies |
//! | [`attr`] | typed stream attributes |
//! | [`memop`] | stream memory operations (wait on / write a word of device memory) |
//! | [`random`] | the built-in random fill (counter-based, no kernel binary; `Kernel::Random`) |
//! | [`reduce`] | the built-in reduce operation (`dst = op(dst, src)` per element, no kernel binary) |
//! | [`devinfo`] | device facts: chip, compute units, memory, UUID, PCI bus id |
//! | [`launch`] | the launch builder: arguments of every width, structs by value, checked and unchecked launches, launch attributes |
//! | [`module`] | modules and kernels: sources, launch configurations, typed arguments, host kernels |
//! | [`vmm`] | virtual memory: reserve address space, map physical memory into it, use it as a buffer |
//! | [`vmm_share`] | physical memory of [`vmm`] shared with another process |
//! | [`view`] | views of device buffers: byte ranges ([`BufferView`]) and typed slices ([`DeviceSlice`]), memset patterns |
//! | [`event_pool`] | a bounded pool of reusable ordering events ([`EventPool`]) |
//! | [`error`] | the one error type, keeping vendor codes |
//! | [`reaper`] | the backends' teardown thread ([`reaper::Reaper`]): order, panics, exit flush and parking, once |
//! | [`sync`] | [`sync::lock`] (poison-tolerant), [`sync::wait_with_backoff`] (bounded polling wait); privately the `std` or loom primitives of the callback slot and futures |
//!
//! Design choices:
//! - **Static dispatch.** Generic code over `B: Backend` costs nothing at run time and mixing
//!   backends' objects does not compile. The facade crate adds run-time choice on top.
//! - **Nothing silent.** Flags a backend cannot honour are refused under
//!   [`TranslationPolicy::Strict`] or listed in the [`FlagReport`] under best effort;
//!   clamped priorities are reported; callbacks the vendor drops are failed by xstream.
//! - **Errors keep the vendor's code** ([`NativeError`]) and say whether they are sticky.
// No unsafe code, except the declarations of `Stream::borrow_raw`, `Device::alloc_uninit`,
// `Buffer::from_raw`, `Buffer::from_raw_borrowed`,
// `Stream::launch_kernel_unchecked` (and their backend sides in `StreamImpl`) and `LaunchBuilder::launch_unchecked`, whose contracts are
// unsafe (and the default `alloc_zeroed_on`, which calls `alloc_uninit`),
// and the `hostmem` module (which allows it locally).
#![deny(unsafe_code)]

pub mod allocator;
pub mod api;
pub mod attr;
pub mod backend;
pub mod callback;
pub mod capture;
pub mod collective;
pub mod completion;
pub mod devinfo;
pub mod error;
pub mod event_pool;
pub mod flags;
pub mod hostmem;
pub mod ipc;
pub mod launch;
pub mod memop;
pub mod module;
pub mod pool;
pub mod priority;
pub mod random;
pub mod raw;
pub mod reaper;
pub mod reduce;
pub mod sync;
pub mod translate;
pub mod view;
pub mod vmm;
pub mod vmm_share;

#[allow(deprecated)]
pub use allocator::HostAllocator;
pub use allocator::{Allocator, AllocatorSlot, Block, HeapAllocator};
pub use api::{Buffer, Device, Event, Function, FunctionName, Graph, Module, Stream};
pub use attr::{
    AccessPolicyWindow, AccessProperty, FailureMode, StreamAttr, StreamAttrValue, SyncPolicy,
};
pub use backend::FenceAnchor;
pub use backend::{
    alloc_size, check_range, check_timeout, lcg_reference, Backend, BackendKind, Borrowed,
    BufferImpl, BufferOf, Capabilities, CreationReport, DeviceImpl, DeviceInfo, DeviceOf,
    EventDesc, EventImpl, EventOf, FunctionImpl, FunctionOf, GraphImpl, GraphOf, Kernel,
    ModuleImpl, ModuleOf, Ownership, Readback, ReadbackFill, Status, StreamDesc, StreamImpl,
    StreamOf, ALLOC_GRANULE,
};
#[allow(deprecated)]
pub use callback::HostCallback;
pub use callback::{ensure_not_in_callback, BoxedCallback};
pub use capture::{CaptureCell, CaptureMode, CaptureStatus};
pub use collective::{
    CollectiveBackend, CollectiveErrorKind, CollectiveKind, CollectiveSupport, CommOf,
    Communicator, DataType, ReduceOp, UniqueId,
};
pub use completion::{block_on, Completion};
pub use devinfo::{DeviceUuid, MemoryInfo};
pub use error::{CaptureErrorKind, Error, ErrorKind, NativeError, NotOwnedKind, Result};
pub use event_pool::EventPool;
pub use flags::{EventFlags, StreamFlags};
#[allow(deprecated)]
pub use hostmem::{
    translate_host_flags, BorrowedHostRange, HostAllocDesc, HostAllocation, HostBuffer,
    HostFlagRow, HostMemFlags, HostSpan, RegisteredHost,
};
pub use hostmem::{
    translate_pinned_flags, AlignedAlloc, BorrowedPinnedRange, PinnedAllocDesc, PinnedAllocation,
    PinnedBuffer, PinnedFlagRow, PinnedFlags, PinnedRegistration, PinnedSpan,
};
pub use ipc::{IpcBuffer, IpcBufferImpl, IpcEvent, IpcEventHandle, IpcEventImpl, IpcMemHandle};
pub use launch::{ByValue, KernelParam, LaunchAttrs, LaunchBuilder, RawBytes};
pub use memop::WaitCondition;
pub use module::{
    check_arg_sizes, check_args, ArgValue, HostArg, HostKernel, HostKernelFn, HostModule,
    KernelArg, LaunchConfig, LaunchLimits, ModuleSource, ParamKind,
};
pub use pool::{Lease, PoolConfig, PriorityClass, StreamPool};
pub use priority::{Priority, PriorityOutcome, PriorityRange};
pub use random::{Distribution, RandomFill, RandomType};
pub use raw::{RawAlloc, RawBuffer};
pub use reduce::{ReduceKind, ReduceType, Reduction};
pub use translate::{
    Combination, FlagReport, FlagRow, FlagSet, FlagTable, Translated, Translation,
    TranslationPolicy,
};
pub use view::{BufferView, DeviceSlice, MemsetPattern, Viewable};
pub use vmm::{Granularity, PhysicalMemory, VirtualMemory, VirtualRange};
pub use vmm_share::{ShareableHandle, ShareablePayload};

/// The `bytemuck` crate xstream's API is written against ([`ByValue`], typed copies and
/// slices take `bytemuck::Pod` types): use this one to derive `Pod` for your kernel argument
/// structs and element types, so the versions always match.
pub use bytemuck;
/// The `half` crate whose `f16` / `bf16` xstream's kernel arguments and element types accept:
/// use this one, so the versions always match.
pub use half;
