//! # xstream-host
//!
//! The CPU backend of xstream: the default, available everywhere, and the **reference
//! implementation** of the portable semantics (`docs/semantics.md`). Every rule of the
//! contract is implemented for real here, so the conformance suite has a backend to hold the
//! vendors to.
//!
//! | layer | file | what |
//! |---|---|---|
//! | backend | `lib.rs` | [`HostBackend`]: availability, device count, open, flag table |
//! | tables | [`conv`] | [`HOST_FLAGS`] as pure data; wait-mode mapping |
//! | errors | [`error`] | the code table: the simulated device fault as a sticky native error |
//! | device | `device.rs` | [`HostDevice`]: shared per-ordinal context, sticky fault, stream registry |
//! | stream | `stream.rs`, `stream/` | [`HostStream`]: enqueue, default-stream rule; `stream/`: create, capture, memory, memop, attribute, native |
//! | worker | `worker.rs` | the queue, the work items (data), the worker thread |
//! | event | `event.rs` | [`HostEvent`]: one record slot per record, snapshot waits, timing |
//! | graph | `graph.rs` | [`HostGraph`]: captured work replayed any number of times |
//! | memory | `buffer.rs` | [`HostDeviceBuffer`]: zero-initialised heap bytes |
//! | host memory | `hostmem.rs` | page-locked host memory (the reference), [`HOST_PINNED_FLAGS`] |
//! | collectives | `collective.rs`, `collective/` | [`HostComm`]: the reference communicator (rendezvous by sequence number, send/recv mailboxes, reductions) |
//!
//! # Design choices
//! - **One worker thread per stream**, spawned by the first enqueue and exiting when the queue
//!   is drained and the owning handle dropped, or after 20 ms idle. Idle streams hold no
//!   thread; dropping a stream never blocks and never cancels (the worker holds the queue).
//! - **Work is data**: an enum of memset / write / read / copy / kernel / record / wait /
//!   callback / graph replay / implicit default-stream wait. Captured work is the same data,
//!   cloned into a [`HostGraph`].
//! - **Cheap bookkeeping**: an `enqueued` ticket counter and a `completed` counter per queue
//!   (atomics written under the queue mutex, one condvar). `query` compares them;
//!   `synchronize` waits for the ticket current at call time (condvar, or a spin for
//!   `FAST_SYNC` and the `Spin`/`Yield` sync policies).
//! - **Events** keep one slot per record (status, timestamp, future wakers); waits snapshot
//!   the slot at call time. `completed()` futures are resolved directly by the worker that
//!   completes the record (no polling). Default event sync spins 20 µs, then blocks;
//!   `BLOCKING_SYNC` blocks at once.
//! - **Legacy default stream** (emulated, the reference): new work on a blocking stream first
//!   waits for the default stream's work enqueued before it; new default-stream work waits
//!   for every blocking stream's earlier work; `NON_BLOCKING` streams skip both. The waits are
//!   ordinary work items, so they cost nothing when the other side is idle.
//! - **Priorities** use CUDA's scale (least 0, greatest -5, default 0). They are resolved,
//!   recorded and reported; scheduling of the worker threads is left to the OS.
//! - **Faults**: `Kernel::Fault` (feature `testing`) poisons the device like a CUDA
//!   illegal address: every later op on every stream of the device is skipped, pending
//!   callbacks fire once with `Native(HOST_DEVICE_FAULT, 700, kind DeviceLost, sticky)`
//!   ([`error::CODES`]), and later calls
//!   return that error at once. [`HostDevice::new_isolated`] gives a context a test may poison.
//! - **Capture**: per stream, through `xstream_core::CaptureCell`. Record and wait on events
//!   are captured (a wait on a record made outside the capture is `Capture { Isolation }`);
//!   callbacks, reads, `query` and `synchronize` are refused and invalidate the capture.
//!   Cross-stream capture (CUDA's fork/join) is not supported: a non-capturing stream
//!   waiting on an event recorded inside a live capture is refused and breaks that capture.
//!   The capture mode is recorded; non-relaxed captures must end on the thread that began
//!   them.
//! - **`PERSISTENT`** (emulated): the stream begins a relaxed capture at creation; `query` is
//!   `Ready` and `synchronize` `Ok` at once (nothing executes); `end_capture` returns the graph
//!   and recording starts again at once, so the stream stays persistent.
//! - **Failure mode**: the only run-time failure of host work is the sticky device fault,
//!   after which every op of the context is skipped anyway; so `Continue` and `Stop` behave
//!   the same here. The attribute is stored and reported.
//! - **Little `unsafe` code.** The crate is `deny(unsafe_code)` rather than `forbid` because
//!   the backend traits' `unsafe fn`s (`StreamImpl::borrow_raw_impl`,
//!   `StreamImpl::launch_kernel_unchecked_impl`, `DeviceImpl::alloc_uninit_impl`,
//!   `DeviceImpl::register_host_range_impl`, `Buffer::from_raw`) must be implemented as
//!   `unsafe fn`s, which the lint counts (and `forbid` cannot be allowed locally). Their host
//!   bodies are safe (a raw stream handle is an id looked up in the device's registry, a host
//!   kernel checks its arguments, the allocation is zeroed), but for the one call that wraps
//!   the caller's registered range, with its `// SAFETY:` comment.
#![deny(unsafe_code)]

mod buffer;
mod collective;
pub mod conv;
mod device;
pub mod error;
mod event;
mod graph;
mod hostmem;
pub mod ipc;
pub mod ipc_mem;
mod module;
mod stream;
pub mod vmm;
mod worker;

use xstream_core::{Backend, BackendKind, FlagTable, Result};

pub use buffer::{HostDeviceBuffer, BASE_ALIGN};
pub use collective::HostComm;
pub use conv::{HOST_FLAGS, HOST_PRIORITY_RANGE};
pub use device::{HostDevice, DEVICES_ENV, HOST_CAPABILITIES, MAX_DEVICES};
pub use event::HostEvent;
pub use graph::HostGraph;
#[allow(deprecated)]
pub use hostmem::HOST_MEM_FLAGS;
pub use hostmem::HOST_PINNED_FLAGS;
pub use module::{builtin_host_module, HostFunction, HostLoadedModule};
pub use stream::HostStream;

/// The former name of [`HostDeviceBuffer`], renamed so that it no longer shares its name with
/// the page-locked buffer of every backend (now [`xstream_core::PinnedBuffer`]).
#[doc(hidden)]
#[deprecated(since = "0.1.0", note = "renamed to `HostDeviceBuffer`")]
pub type HostBuffer = HostDeviceBuffer;

/// The host backend: CPU threads.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostBackend;

impl Backend for HostBackend {
    const KIND: BackendKind = BackendKind::Host;
    type Device = HostDevice;
    type Stream = HostStream;
    type Event = HostEvent;
    type Graph = HostGraph;
    type Buffer = HostDeviceBuffer;
    type Module = HostLoadedModule;
    type Function = HostFunction;

    /// Always available.
    fn availability() -> Result<()> {
        Ok(())
    }

    /// 1, or the value of [`DEVICES_ENV`] (0 to [`MAX_DEVICES`]).
    fn device_count() -> Result<usize> {
        device::device_count()
    }

    /// The shared context of `ordinal`: every open of one ordinal returns the same state.
    fn open(ordinal: usize) -> Result<HostDevice> {
        device::open(ordinal)
    }

    fn flag_table() -> &'static FlagTable {
        &HOST_FLAGS
    }
}
