//! The backend traits (static dispatch, in the style of wgpu-hal's `Api`).
//!
//! A [`Backend`] names its [`DeviceImpl`], [`StreamImpl`], [`EventImpl`], [`GraphImpl`],
//! [`BufferImpl`], [`ModuleImpl`] and [`FunctionImpl`] types;
//! each of those names its backend back, so a CUDA event on an Ascend stream does not compile.
//! Generic code is written once over `B: Backend` (the conformance suite in `tests/`, the CLI's
//! demo); run-time choice goes through the facade's `dispatch!` macro.
//!
//! # Threads
//! Every type here is `Send + Sync`: any call works from any thread, and backends bind the
//! vendor context to the calling thread themselves. The one exception is the inside of a
//! stream-blocking host callback, where every call returns
//! [`Error::NotPermitted`].
//!
//! # Layout
//! [`Backend`] lives here; each handle's trait has a file of its own, re-exported at this path:
//! `device` ([`DeviceImpl`], under the checked [`Device`]), `stream` ([`StreamImpl`]: what a backend implements for its stream,
//! with no checks; users call [`Stream`], the checked layer in `crate::api` implemented over
//! it), `event` ([`EventImpl`], [`GraphImpl`]: likewise under the checked [`Event`] and [`Graph`]), `buffer`
//! ([`BufferImpl`] under [`Buffer`], [`ALLOC_GRANULE`]), `module` ([`ModuleImpl`] under
//! [`Module`], [`FunctionImpl`] under [`Function`]). Their value types and
//! helpers live in private submodules too: `types` ([`BackendKind`], [`Capabilities`],
//! [`DeviceInfo`], the descriptions, [`Status`]), `kernel` ([`Kernel`], [`lcg_reference`]),
//! `readback` ([`Readback`]), `borrowed` ([`Borrowed`]) and `checks` ([`check_range`],
//! [`check_timeout`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::callback::BoxedCallback;

use crate::completion::Completion;
use crate::devinfo::MemoryInfo;
use crate::hostmem::{PinnedAllocDesc, PinnedAllocation, PinnedBuffer};
use crate::launch::LaunchAttrs;
use crate::module::{KernelArg, LaunchConfig, ModuleSource, ParamKind};
use crate::raw::RawBuffer;
use crate::view::{BufferView, MemsetPattern};
use crate::{
    Allocator, CaptureCell, CaptureMode, Error, EventFlags, FlagReport, FlagTable, Result,
    StreamAttr, StreamAttrValue, StreamFlags,
};

mod borrowed;
mod buffer;
mod checks;
mod device;
mod event;
mod kernel;
mod module;
mod readback;
mod stream;
mod types;

#[allow(unused_imports)]
use crate::api::{Buffer, Device, Event, Function, FunctionName, Graph, Module, Stream};
pub use borrowed::Borrowed;
pub use buffer::{alloc_size, BufferImpl, ALLOC_GRANULE};
pub(crate) use checks::check_buffer_device;
pub use checks::{check_range, check_timeout};
pub use device::DeviceImpl;
pub use event::{EventImpl, GraphImpl};
pub use kernel::{lcg_reference, Kernel};
pub use module::{FunctionImpl, ModuleImpl};
pub use readback::{Readback, ReadbackFill};
pub use stream::{launch_without_attrs, FenceAnchor, StreamImpl};
pub use types::{
    BackendKind, Capabilities, CreationReport, DeviceInfo, EventDesc, Ownership, Status, StreamDesc,
};

/// The device type of backend `B`.
pub type DeviceOf<B> = <B as Backend>::Device;
/// The stream type of backend `B`.
pub type StreamOf<B> = <B as Backend>::Stream;
/// The event type of backend `B`.
pub type EventOf<B> = <B as Backend>::Event;
/// The graph type of backend `B`.
pub type GraphOf<B> = <B as Backend>::Graph;
/// The buffer type of backend `B`.
pub type BufferOf<B> = <B as Backend>::Buffer;
/// The module type of backend `B`.
pub type ModuleOf<B> = <B as Backend>::Module;
/// The function type of backend `B`.
pub type FunctionOf<B> = <B as Backend>::Function;

/// A backend: a family of device, stream, event, graph and buffer types.
pub trait Backend: Sized + Send + Sync + 'static {
    /// Which backend this is.
    const KIND: BackendKind;
    /// Its device.
    type Device: DeviceImpl<B = Self> + crate::vmm::VirtualMemory;
    /// Its stream: what the backend implements ([`StreamImpl`]); users call the checked
    /// [`Stream`], implemented for it by core.
    type Stream: StreamImpl<B = Self>;
    /// Its event.
    type Event: EventImpl<B = Self>;
    /// Its replayable graph.
    type Graph: GraphImpl<B = Self>;
    /// Its device buffer (users call the checked [`Buffer`]).
    type Buffer: BufferImpl<B = Self>;
    /// Its loaded module of kernels (users call the checked [`Module`]).
    type Module: ModuleImpl<B = Self>;
    /// Its kernel function (users call the checked [`Function`]).
    type Function: FunctionImpl<B = Self>;

    /// Whether the backend can be used here; never panics.
    ///
    /// # Errors
    /// [`Error::NotAvailable`] with the reason (library missing, no device, ...).
    fn availability() -> Result<()>;

    /// Whether [`Backend::availability`] is `Ok`.
    fn is_available() -> bool {
        Self::availability().is_ok()
    }

    /// How many devices there are.
    ///
    /// # Errors
    /// [`Error::NotAvailable`] or a vendor error.
    fn device_count() -> Result<usize>;

    /// Opens a device by ordinal.
    ///
    /// # Errors
    /// [`Error::NotAvailable`], [`Error::InvalidArgument`] for a bad ordinal, or a vendor
    /// error.
    fn open(ordinal: usize) -> Result<Self::Device>;

    /// The backend's flag translation table.
    fn flag_table() -> &'static FlagTable;
}
