//! The type-erased path: one device, stream, event, buffer and graph type whatever the backend,
//! chosen at run time.
//!
//! [`AnyDevice`], [`AnyStream`], [`AnyEvent`], [`AnyBuffer`] and [`AnyGraph`] are enums with
//! one variant per backend compiled into this build (cargo features `host`, `cuda` /
//! `cuda-backend`, `ascend`). Each method matches on the variant and calls the backend's
//! trait method, so the operations, their errors and their semantics are those of the generic
//! traits ([`Device`], [`Stream`], [`Event`], [`Buffer`], [`Graph`]); the only new error is
//! mixing backends (a CUDA event recorded on a host stream, a host buffer copied on an Ascend
//! stream), which is [`Error::WrongBackend`] naming both backends, where the generic path does
//! not compile.
//!
//! Use it to store streams and events in a runtime without a `B: Backend` parameter (the
//! way `c10::Stream` or wgpu's dynamic types are used); keep the generic path (`B: Backend`,
//! [`crate::dispatch!`]) for the hot loops, where it costs nothing. The cost of the match is
//! measured in `benches/benches/any_dispatch.rs` (docs/performance.md).
//!
//! ```
//! use xstream::any::AnyDevice;
//! use xstream::{BackendKind, EventDesc, Status, StreamDesc};
//!
//! let dev = AnyDevice::open(BackendKind::Host, 0).unwrap();
//! let s = dev.create_stream(&StreamDesc::new()).unwrap();
//! let e = dev.create_event(&EventDesc::new()).unwrap();
//! let buf = dev.alloc(64).unwrap();
//! s.memset(&buf, 0, 64, 0xab).unwrap();
//! let back = s.read(&buf, 0, 4).unwrap();
//! e.record(&s).unwrap();
//! e.synchronize().unwrap();
//! assert_eq!(e.query().unwrap(), Status::Ready);
//! assert_eq!(back.take().unwrap(), vec![0xab; 4]);
//! ```
//!
//! Objects of the generic path convert both ways: `AnyStream::from(host_stream)`, and
//! [`AnyStream::downcast_ref`]`::<HostBackend>()` gives the typed stream back (for its raw
//! handle, or for what the erased types leave out: the built-in test kernels of
//! [`Stream::launch_builtin`]). Modules and launches have their erased types ([`AnyModule`],
//! [`AnyFunction`], [`AnyStream::launch_kernel`]).
//! Page-locked host memory has its erased type too, [`AnyPinnedBuffer`]
//! ([`AnyDevice::alloc_pinned`], [`AnyStream::copy_to_device`], [`AnyStream::copy_to_host`]).

use std::sync::Arc;
use std::time::Duration;

use crate::{
    Allocator, Backend, BackendKind, BoxedCallback, Buffer, CaptureMode, CaptureStatus, Completion,
    CreationReport, Device, DeviceInfo, Error, Event, EventDesc, EventFlags, FlagReport, Function,
    Graph, KernelArg, LaunchConfig, Module, ModuleSource, ParamKind, PinnedAllocDesc, PinnedBuffer,
    PinnedFlags, Readback, Result, Status, Stream, StreamAttr, StreamAttrValue, StreamDesc,
    StreamFlags, WaitCondition,
};

#[macro_use]
mod macros;
mod vmm;
pub use vmm::{AnyPhysicalMemory, AnyVirtualRange};

/// The error of an operation given objects of two backends.
fn mixed(op: &'static str, a: BackendKind, b: BackendKind) -> Error {
    Error::WrongBackend {
        op,
        expected: a,
        found: b,
    }
}

erased!(
    /// A device of any compiled backend (see the [module](self) documentation). Cheap to
    /// clone: clones share the device.
    AnyDevice, Device, device_of, HostDevice, CudaDevice, AscendDevice
);
erased!(
    /// A stream of any compiled backend.
    AnyStream, Stream, stream_of, HostStream, CudaStream, AscendStream
);
erased!(
    /// An event of any compiled backend.
    AnyEvent, Event, event_of, HostEvent, CudaEvent, AscendEvent
);
erased!(
    /// A device buffer of any compiled backend.
    AnyBuffer, Buffer, buffer_of, HostDeviceBuffer, CudaBuffer, AscendBuffer
);
erased!(
    /// A replayable graph of any compiled backend.
    AnyGraph, Graph, graph_of, HostGraph, CudaGraph, AscendGraph
);

erased!(
    /// A loaded module of kernels of any compiled backend ([`AnyDevice::load_module`]).
    AnyModule, Module, module_of, HostLoadedModule, CudaModule, AscendModule
);
erased!(
    /// A kernel function of any compiled backend ([`AnyModule::function`]); cheap to clone.
    AnyFunction, Function, function_of, HostFunction, CudaFunction, AscendFunction
);

impl Clone for AnyFunction {
    fn clone(&self) -> Self {
        each!(AnyFunction, self, f => f.clone().into())
    }
}

/// Page-locked host memory bound to a device of any compiled backend
/// ([`AnyDevice::alloc_pinned`]; the erased [`PinnedBuffer`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyPinnedBuffer {
    /// The host (CPU) backend's.
    #[cfg(feature = "host")]
    Host(PinnedBuffer<crate::host::HostBackend>),
    /// The CUDA backend's.
    #[cfg(feature = "cuda-backend")]
    Cuda(PinnedBuffer<crate::cuda::CudaBackend>),
    /// The Ascend backend's.
    #[cfg(feature = "ascend")]
    Ascend(PinnedBuffer<crate::ascend::AscendBackend>),
}

/// The former name of [`AnyPinnedBuffer`] (issue 33: `Host` names the host backend).
#[deprecated(
    since = "0.2.0",
    note = "renamed `AnyPinnedBuffer` (`Host` names the host backend)"
)]
pub type AnyHostBuffer = AnyPinnedBuffer;

impl<B: Erasable> From<PinnedBuffer<B>> for AnyPinnedBuffer {
    fn from(h: PinnedBuffer<B>) -> Self {
        B::wrap_pinned_buffer(h)
    }
}

impl Clone for AnyDevice {
    fn clone(&self) -> Self {
        each!(AnyDevice, self, d => d.clone().into())
    }
}

/// A backend compiled into this build, whose objects the erased types hold; implemented by
/// the facade for each of them (sealed). It lets generic code and erased code meet:
/// [`AnyDevice::downcast_ref`]`::<B>()` and friends.
///
/// Its bounds make every typed handle convert into its erased one in generic code:
/// `fn store<B: Erasable>(b: BufferOf<B>) -> AnyBuffer { b.into() }`.
pub trait Erasable:
    Backend<
        Device: Into<AnyDevice>,
        Stream: Into<AnyStream>,
        Event: Into<AnyEvent>,
        Buffer: Into<AnyBuffer>,
        Graph: Into<AnyGraph>,
        Module: Into<AnyModule>,
        Function: Into<AnyFunction>,
    > + sealed::Sealed
{
    #[doc(hidden)]
    fn device_of(d: &AnyDevice) -> Option<&Self::Device>;
    #[doc(hidden)]
    fn stream_of(s: &AnyStream) -> Option<&Self::Stream>;
    #[doc(hidden)]
    fn event_of(e: &AnyEvent) -> Option<&Self::Event>;
    #[doc(hidden)]
    fn buffer_of(b: &AnyBuffer) -> Option<&Self::Buffer>;
    #[doc(hidden)]
    fn graph_of(g: &AnyGraph) -> Option<&Self::Graph>;
    #[doc(hidden)]
    fn module_of(m: &AnyModule) -> Option<&Self::Module>;
    #[doc(hidden)]
    fn function_of(f: &AnyFunction) -> Option<&Self::Function>;
    #[doc(hidden)]
    fn pinned_buffer_of(h: &AnyPinnedBuffer) -> Option<&PinnedBuffer<Self>>;
    #[doc(hidden)]
    fn pinned_buffer_of_mut(h: &mut AnyPinnedBuffer) -> Option<&mut PinnedBuffer<Self>>;
    #[doc(hidden)]
    fn wrap_pinned_buffer(h: PinnedBuffer<Self>) -> AnyPinnedBuffer;
}

mod sealed {
    /// Only the facade implements [`super::Erasable`].
    pub trait Sealed {}
}

erasable!("host", crate::host::HostBackend, Host);
erasable!("cuda-backend", crate::cuda::CudaBackend, Cuda);
erasable!("ascend", crate::ascend::AscendBackend, Ascend);

forward! { AnyDevice: Device;
    /// Static facts ([`Device::info`]).
    fn info() -> &DeviceInfo;
    /// Creates a stream ([`Device::create_stream`]).
    fn create_stream(desc: &StreamDesc) -> Result<AnyStream>;
    /// The default stream ([`Device::default_stream`]).
    fn default_stream() -> Result<AnyStream>;
    /// Creates an event ([`Device::create_event`]).
    fn create_event(desc: &EventDesc) -> Result<AnyEvent>;
    /// Allocates a zeroed device buffer ([`Device::alloc`]).
    fn alloc(len: usize) -> Result<AnyBuffer>;
    /// Allocates page-locked host memory bound to this device ([`Device::alloc_pinned`]).
    fn alloc_pinned(len: usize, desc: &PinnedAllocDesc) -> Result<AnyPinnedBuffer>;
    /// Loads a module of kernels ([`Device::load_module`]).
    fn load_module(src: &ModuleSource<'_>) -> Result<AnyModule>;
    /// The module shipped with the crate ([`Device::builtin_module`]).
    fn builtin_module() -> Result<AnyModule>;
    /// Waits for all work on the device ([`Device::synchronize`]).
    fn synchronize() -> Result<()>;
    /// [`Device::can_access_peer`].
    fn can_access_peer(@peer: &AnyDevice) -> Result<bool>;
    /// [`Device::enable_peer_access`].
    fn enable_peer_access(@peer: &AnyDevice) -> Result<()>;
    /// [`Device::disable_peer_access`].
    fn disable_peer_access(@peer: &AnyDevice) -> Result<()>;
}

impl AnyDevice {
    /// Renamed [`AnyDevice::alloc_pinned`] (page-locked memory is "pinned"; `Host` names the
    /// host backend).
    ///
    /// # Errors
    /// As [`AnyDevice::alloc_pinned`].
    #[deprecated(since = "0.2.0", note = "renamed `alloc_pinned`")]
    #[inline]
    pub fn alloc_host(&self, len: usize, desc: &PinnedAllocDesc) -> Result<AnyPinnedBuffer> {
        self.alloc_pinned(len, desc)
    }

    /// Opens device `ordinal` of backend `kind` ([`Backend::open`]).
    ///
    /// # Errors
    /// [`Error::NotCompiled`] for a backend not compiled in; as [`Backend::open`].
    #[inline]
    pub fn open(kind: BackendKind, ordinal: usize) -> Result<Self> {
        crate::dispatch!(kind, B => B::open(ordinal).map(Self::from))
    }

    // --- ordering and allocation without host sync ---

    /// [`Device::alloc_zeroed_on`]: zeroed in `stream`'s order, no host wait. (The facade
    /// forbids unsafe code, so [`Device::alloc_uninit`] is reached through the backend's
    /// device: [`AnyDevice`] downcasts.)
    ///
    /// # Errors
    /// As [`Device::alloc_zeroed_on`]; [`Error::WrongBackend`] for a stream of another backend.
    pub fn alloc_zeroed_on(&self, stream: &AnyStream, len: usize) -> Result<AnyBuffer> {
        pair!("AnyDevice::alloc_zeroed_on", AnyDevice, self, AnyStream, stream, d, s => d.alloc_zeroed_on(s, len).map(AnyBuffer::from))
    }

    // --- end of ordering and allocation without host sync ---
}

forward! { AnyStream: Stream;
    /// [`Stream::id`].
    fn id() -> u64;
    /// [`Stream::name`].
    fn name() -> Option<&str>;
    /// [`Stream::flags`].
    fn flags() -> StreamFlags;
    /// [`Stream::priority`].
    fn priority() -> i32;
    /// [`Stream::report`].
    fn report() -> &CreationReport;
    /// [`Stream::ownership`]: whether dropping it destroys the native stream.
    fn ownership() -> crate::Ownership;
    /// [`Stream::query`].
    fn query() -> Result<Status>;
    /// [`Stream::synchronize`].
    fn synchronize() -> Result<()>;
    /// [`Stream::synchronize_timeout`].
    fn synchronize_timeout(timeout: Duration) -> Result<()>;
    /// [`Stream::wait_event`].
    fn wait_event(@event: &AnyEvent) -> Result<()>;
    /// [`Stream::enqueue_callback`].
    fn enqueue_callback(f: BoxedCallback) -> Result<()>;
    /// [`Stream::begin_capture`].
    fn begin_capture(mode: CaptureMode) -> Result<()>;
    /// [`Stream::end_capture`].
    fn end_capture() -> Result<AnyGraph>;
    /// [`Stream::capture_status`].
    fn capture_status() -> CaptureStatus;
    /// [`Stream::is_capturing`].
    fn is_capturing() -> bool;
    /// [`Stream::attribute`].
    fn attribute(attr: StreamAttr) -> Result<StreamAttrValue>;
    /// [`Stream::set_attribute`].
    fn set_attribute(value: StreamAttrValue) -> Result<()>;
    /// [`Stream::copy_attributes_from`].
    fn copy_attributes_from(@src: &AnyStream) -> Result<()>;
    /// [`Stream::set_allocator`].
    fn set_allocator(allocator: Option<Arc<dyn Allocator>>) -> Result<()>;
    /// [`Stream::allocator`].
    fn allocator() -> Result<Option<Arc<dyn Allocator>>>;
    /// [`Stream::memset`].
    fn memset(@buf: &AnyBuffer, offset: usize, len: usize, value: u8) -> Result<()>;
    /// [`Stream::write`].
    fn write(@dst: &AnyBuffer, offset: usize, data: Vec<u8>) -> Result<()>;
    /// [`Stream::read`].
    fn read(@src: &AnyBuffer, offset: usize, len: usize) -> Result<Readback>;
    /// [`Stream::alloc_async`].
    fn alloc_async(len: usize) -> Result<AnyBuffer>;
    /// [`Stream::wait_stream`]: later work here waits for the work enqueued on `other` so far.
    fn wait_stream(@other: &AnyStream) -> Result<()>;
    /// [`Stream::record_use`]: work enqueued here so far (through the raw handle) uses `buf`.
    fn record_use(@buf: &AnyBuffer) -> Result<()>;
    /// [`Stream::write_value32`].
    fn write_value32(@buf: &AnyBuffer, offset: usize, value: u32) -> Result<()>;
    /// [`Stream::write_value64`].
    fn write_value64(@buf: &AnyBuffer, offset: usize, value: u64) -> Result<()>;
}

impl AnyStream {
    /// Renamed [`AnyStream::wait_stream`].
    ///
    /// # Errors
    /// As [`AnyStream::wait_stream`].
    #[deprecated(since = "0.2.0", note = "renamed `wait_stream`")]
    pub fn join(&self, other: &AnyStream) -> Result<()> {
        self.wait_stream(other)
    }

    /// Its device ([`Stream::device`]; a clone, which shares the device).
    #[inline]
    pub fn device(&self) -> AnyDevice {
        each!(AnyStream, self, s => s.device().clone().into())
    }

    /// [`Stream::host_callback`].
    ///
    /// # Errors
    /// As [`Stream::enqueue_callback`].
    pub fn host_callback<F>(&self, f: F) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
    {
        each!(AnyStream, self, s => s.host_callback(f))
    }

    /// [`Stream::notify`].
    ///
    /// # Errors
    /// As [`Stream::enqueue_callback`].
    pub fn notify<F>(&self, f: F) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
    {
        each!(AnyStream, self, s => s.notify(f))
    }

    /// [`Stream::completed`].
    ///
    /// # Errors
    /// As [`Stream::enqueue_callback`].
    #[inline]
    pub fn completed(&self) -> Result<Completion> {
        each!(AnyStream, self, s => s.completed())
    }

    /// [`Stream::copy`].
    ///
    /// # Errors
    /// As [`Stream::copy`]; [`Error::WrongBackend`] for a buffer of another backend.
    #[inline]
    pub fn copy(
        &self,
        src: &AnyBuffer,
        src_offset: usize,
        dst: &AnyBuffer,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        let dst = self.same_buffer("AnyStream::copy", dst)?;
        pair!("AnyStream::copy", AnyStream, self, AnyBuffer, src, s, b => {
            s.copy(b, src_offset, dst.downcast_same("AnyStream::copy", s)?, dst_offset, len)
        })
    }

    /// [`Stream::copy_peer`].
    ///
    /// # Errors
    /// As [`Stream::copy_peer`]; [`Error::WrongBackend`] for a buffer of another backend.
    #[inline]
    pub fn copy_peer(
        &self,
        src: &AnyBuffer,
        src_offset: usize,
        dst: &AnyBuffer,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        let dst = self.same_buffer("AnyStream::copy_peer", dst)?;
        pair!("AnyStream::copy_peer", AnyStream, self, AnyBuffer, src, s, b => {
            s.copy_peer(b, src_offset, dst.downcast_same("AnyStream::copy_peer", s)?, dst_offset, len)
        })
    }

    /// [`Stream::copy_to_device`]: one native asynchronous copy from page-locked memory.
    ///
    /// # Errors
    /// As [`Stream::copy_to_device`]; [`Error::WrongBackend`] for a buffer of another backend.
    #[inline]
    pub fn copy_to_device(
        &self,
        src: &AnyPinnedBuffer,
        src_offset: usize,
        dst: &AnyBuffer,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        const OP: &str = "AnyStream::copy_to_device";
        if src.kind() != self.kind() {
            return Err(mixed(OP, self.kind(), src.kind()));
        }
        pair!(OP, AnyStream, self, AnyBuffer, dst, s, b => {
            s.copy_to_device(pinned_of(OP, s, src)?, src_offset, b, dst_offset, len)
        })
    }

    /// [`Stream::copy_to_host`]: one native asynchronous copy into page-locked memory.
    ///
    /// # Errors
    /// As [`Stream::copy_to_host`]; [`Error::WrongBackend`] for a buffer of another backend.
    #[inline]
    pub fn copy_to_host(
        &self,
        src: &AnyBuffer,
        src_offset: usize,
        dst: &mut AnyPinnedBuffer,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        const OP: &str = "AnyStream::copy_to_host";
        if dst.kind() != self.kind() {
            return Err(mixed(OP, self.kind(), dst.kind()));
        }
        pair!(OP, AnyStream, self, AnyBuffer, src, s, b => {
            s.copy_to_host(b, src_offset, pinned_of_mut(OP, s, dst)?, dst_offset, len)
        })
    }

    /// [`Stream::launch_kernel`]: kernel `f` with `cfg` and `args`. The arguments are
    /// converted to the backend's types first (one small vector per launch).
    ///
    /// # Errors
    /// As [`Stream::launch_kernel`]; [`Error::WrongBackend`] for a function or buffer argument
    /// of another backend.
    #[inline]
    pub fn launch_kernel(
        &self,
        f: &AnyFunction,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, AnyBuffer>],
    ) -> Result<()> {
        const OP: &str = "AnyStream::launch_kernel";
        pair!(OP, AnyStream, self, AnyFunction, f, s, func => {
            let typed = typed_args(OP, s, args)?;
            s.launch_kernel(func, cfg, &typed)
        })
    }

    // --- launch builder ---

    /// [`Stream::launch_kernel_with`] (the checked launch of the launch builder, see
    /// [`xstream_core::launch`]): arguments of every kind, with `attrs`. The arguments are
    /// converted to the backend's types first (one small vector per launch). The erased path
    /// has no unchecked launch (this crate has no `unsafe`): use the typed stream
    /// (`downcast_ref`) for one.
    ///
    /// # Errors
    /// As [`Stream::launch_kernel_with`]; [`Error::WrongBackend`] for a function or buffer
    /// argument of another backend.
    pub fn launch_kernel_with(
        &self,
        f: &AnyFunction,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, AnyBuffer>],
        attrs: &xstream_core::LaunchAttrs,
    ) -> Result<()> {
        const OP: &str = "AnyStream::launch_kernel_with";
        pair!(OP, AnyStream, self, AnyFunction, f, s, func => {
            let typed = typed_args(OP, s, args)?;
            s.launch_kernel_with(func, cfg, &typed, attrs)
        })
    }

    /// The former name of [`AnyStream::launch_kernel_with`].
    ///
    /// # Errors
    /// As [`AnyStream::launch_kernel_with`].
    #[deprecated(since = "0.2.0", note = "renamed `launch_kernel_with`")]
    pub fn launch_checked(
        &self,
        f: &AnyFunction,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, AnyBuffer>],
        attrs: &xstream_core::LaunchAttrs,
    ) -> Result<()> {
        self.launch_kernel_with(f, cfg, args, attrs)
    }

    // --- end of launch builder ---

    /// [`Stream::free_async`].
    ///
    /// # Errors
    /// As [`Stream::free_async`]; [`Error::WrongBackend`] for a buffer of another backend
    /// (the buffer is then dropped under its backend's lifetime rule).
    #[inline]
    pub fn free_async(&self, buf: AnyBuffer) -> Result<()> {
        pair!("AnyStream::free_async", AnyStream, self, AnyBuffer, buf, s, b => s.free_async(b))
    }

    // --- ordering and allocation without host sync ---

    /// [`Stream::record_event`]: a fresh event recorded here.
    ///
    /// # Errors
    /// As [`Stream::record_event`].
    pub fn record_event(&self) -> Result<AnyEvent> {
        each!(AnyStream, self, s => Stream::record_event(s).map(AnyEvent::from))
    }

    // --- end of ordering and allocation without host sync ---

    /// [`Stream::wait_value32`].
    ///
    /// # Errors
    /// As [`Stream::wait_value32`]; [`Error::WrongBackend`] for a buffer of another backend.
    #[inline]
    pub fn wait_value32(
        &self,
        buf: &AnyBuffer,
        offset: usize,
        value: u32,
        cond: WaitCondition,
    ) -> Result<()> {
        pair!("AnyStream::wait_value32", AnyStream, self, AnyBuffer, buf, s, b => s.wait_value32(b, offset, value, cond))
    }

    /// [`Stream::wait_value64`].
    ///
    /// # Errors
    /// As [`Stream::wait_value64`]; [`Error::WrongBackend`] for a buffer of another backend.
    #[inline]
    pub fn wait_value64(
        &self,
        buf: &AnyBuffer,
        offset: usize,
        value: u64,
        cond: WaitCondition,
    ) -> Result<()> {
        pair!("AnyStream::wait_value64", AnyStream, self, AnyBuffer, buf, s, b => s.wait_value64(b, offset, value, cond))
    }

    /// `dst` when it is of this stream's backend, else the mixing error.
    fn same_buffer<'a>(&self, op: &'static str, dst: &'a AnyBuffer) -> Result<&'a AnyBuffer> {
        if dst.kind() == self.kind() {
            Ok(dst)
        } else {
            Err(mixed(op, self.kind(), dst.kind()))
        }
    }
}

forward! { AnyBuffer: Buffer;
    /// [`Buffer::len`].
    fn len() -> usize;
    /// [`Buffer::is_empty`].
    fn is_empty() -> bool;
    /// [`Buffer::device_address`].
    fn device_address() -> u64;
}

impl AnyBuffer {
    /// The typed buffer of the backend of stream `_s` (the caller checked the kinds).
    fn downcast_same<S: Stream>(
        &self,
        op: &'static str,
        _s: &S,
    ) -> Result<&<S::B as Backend>::Buffer>
    where
        S::B: Erasable,
    {
        <S::B as Erasable>::buffer_of(self)
            .ok_or_else(|| mixed(op, <S::B as Backend>::KIND, self.kind()))
    }

    /// [`Buffer::into_raw`]: gives up ownership without freeing; never waits. The caller
    /// orders its free after the work already enqueued on the buffer (docs/semantics.md,
    /// "Raw buffers"). The way back, [`Buffer::from_raw`] or [`Buffer::from_raw_borrowed`],
    /// is `unsafe` and this crate forbids unsafe code: call it on the backend's buffer type
    /// with the device from [`AnyDevice::downcast_ref`], then wrap the result with
    /// `AnyBuffer::from`:
    ///
    /// ```
    /// # #[cfg(feature = "host")] {
    /// use xstream::any::{AnyBuffer, AnyDevice};
    /// use xstream::host::HostDeviceBuffer;
    /// use xstream::{BackendKind, Buffer, HostBackend};
    ///
    /// let dev = AnyDevice::open(BackendKind::Host, 0).unwrap();
    /// let raw = dev.alloc(100).unwrap().into_raw();
    /// assert_eq!((raw.len, raw.backend), (100, BackendKind::Host));
    /// let host = dev.downcast_ref::<HostBackend>().unwrap();
    /// // SAFETY: `raw` came from `into_raw`; nothing else owns or uses it.
    /// let back = unsafe { HostDeviceBuffer::from_raw(host, raw) }.unwrap();
    /// let back = AnyBuffer::from(back);
    /// assert_eq!(back.device_address(), raw.address);
    /// # }
    /// ```
    #[inline]
    pub fn into_raw(self) -> crate::RawBuffer {
        each!(AnyBuffer, self, b => b.into_raw())
    }
}

/// `args` with each buffer replaced by the typed buffer of the backend of stream `_s`.
fn typed_args<'a, S: Stream>(
    op: &'static str,
    _s: &S,
    args: &[KernelArg<'a, AnyBuffer>],
) -> Result<Vec<KernelArg<'a, <S::B as Backend>::Buffer>>>
where
    S::B: Erasable,
{
    args.iter()
        .map(|a| {
            a.map_buffer(|b| {
                <S::B as Erasable>::buffer_of(b)
                    .ok_or_else(|| mixed(op, <S::B as Backend>::KIND, b.kind()))
            })
        })
        .collect()
}

forward! { AnyModule: Module;
    /// The function called `name` ([`Module::function`]).
    fn function(name: &str) -> Result<AnyFunction>;
}

forward! { AnyFunction: Function;
    /// [`Function::name`].
    fn name() -> &str;
    /// [`Function::params`].
    fn params() -> Option<&[ParamKind]>;
}

/// The typed host buffer of the backend of stream `_s`.
fn pinned_of<'a, S: Stream>(
    op: &'static str,
    _s: &S,
    h: &'a AnyPinnedBuffer,
) -> Result<&'a PinnedBuffer<S::B>>
where
    S::B: Erasable,
{
    <S::B as Erasable>::pinned_buffer_of(h)
        .ok_or_else(|| mixed(op, <S::B as Backend>::KIND, h.kind()))
}

/// The typed host buffer of the backend of stream `_s`, mutably.
fn pinned_of_mut<'a, S: Stream>(
    op: &'static str,
    _s: &S,
    h: &'a mut AnyPinnedBuffer,
) -> Result<&'a mut PinnedBuffer<S::B>>
where
    S::B: Erasable,
{
    let kind = h.kind();
    <S::B as Erasable>::pinned_buffer_of_mut(h)
        .ok_or_else(|| mixed(op, <S::B as Backend>::KIND, kind))
}

impl AnyPinnedBuffer {
    /// Which backend it belongs to.
    #[inline]
    pub fn kind(&self) -> BackendKind {
        each!(AnyPinnedBuffer, self, h => <_ as PinnedBufferKind>::kind_of(h))
    }

    /// The typed buffer of the generic path, when it is of backend `B`.
    pub fn downcast_ref<B: Erasable>(&self) -> Option<&PinnedBuffer<B>> {
        B::pinned_buffer_of(self)
    }

    /// The typed buffer of the generic path, mutably, when it is of backend `B`.
    pub fn downcast_mut<B: Erasable>(&mut self) -> Option<&mut PinnedBuffer<B>> {
        B::pinned_buffer_of_mut(self)
    }

    /// Its device (a clone, which shares the device).
    #[inline]
    pub fn device(&self) -> AnyDevice {
        each!(AnyPinnedBuffer, self, h => h.device().clone().into())
    }

    /// [`PinnedBuffer::len`].
    #[inline]
    pub fn len(&self) -> usize {
        each!(AnyPinnedBuffer, self, h => h.len())
    }

    /// [`PinnedBuffer::is_empty`].
    #[inline]
    pub fn is_empty(&self) -> bool {
        each!(AnyPinnedBuffer, self, h => h.is_empty())
    }

    /// [`PinnedBuffer::flags`].
    #[inline]
    pub fn flags(&self) -> PinnedFlags {
        each!(AnyPinnedBuffer, self, h => h.flags())
    }

    /// [`PinnedBuffer::report`].
    #[inline]
    pub fn report(&self) -> &FlagReport {
        each!(AnyPinnedBuffer, self, h => h.report())
    }

    /// [`PinnedBuffer::is_page_locked`].
    #[inline]
    pub fn is_page_locked(&self) -> bool {
        each!(AnyPinnedBuffer, self, h => h.is_page_locked())
    }

    /// [`PinnedBuffer::wait_idle`].
    ///
    /// # Errors
    /// As [`PinnedBuffer::wait_idle`].
    #[inline]
    pub fn wait_idle(&self) -> Result<()> {
        each!(AnyPinnedBuffer, self, h => h.wait_idle())
    }

    /// [`PinnedBuffer::as_slice`] (waits for the copies that use the buffer).
    ///
    /// # Errors
    /// As [`PinnedBuffer::as_slice`].
    #[inline]
    pub fn as_slice(&self) -> Result<&[u8]> {
        each!(AnyPinnedBuffer, self, h => h.as_slice())
    }

    /// [`PinnedBuffer::as_mut_slice`] (waits for the copies that use the buffer).
    ///
    /// # Errors
    /// As [`PinnedBuffer::as_mut_slice`].
    #[inline]
    pub fn as_mut_slice(&mut self) -> Result<&mut [u8]> {
        each!(AnyPinnedBuffer, self, h => h.as_mut_slice())
    }
}

/// The backend kind of a typed host buffer.
trait PinnedBufferKind {
    fn kind_of(&self) -> BackendKind;
}

impl<B: Backend> PinnedBufferKind for PinnedBuffer<B> {
    fn kind_of(&self) -> BackendKind {
        B::KIND
    }
}

forward! { AnyEvent: Event;
    /// [`Event::flags`].
    fn flags() -> EventFlags;
    /// [`Event::report`].
    fn report() -> &FlagReport;
    /// [`Event::record`].
    fn record(@stream: &AnyStream) -> Result<()>;
    /// [`Event::query`].
    fn query() -> Result<Status>;
    /// [`Event::synchronize`].
    fn synchronize() -> Result<()>;
    /// [`Event::synchronize_timeout`].
    fn synchronize_timeout(timeout: Duration) -> Result<()>;
    /// [`Event::elapsed_ms`] from `self` (start) to `end`.
    fn elapsed_ms(@end: &AnyEvent) -> Result<f32>;
    /// [`Event::completed`].
    fn completed() -> Result<Completion>;
}

impl AnyEvent {
    /// Its device ([`Event::device`]; a clone, which shares the device).
    #[inline]
    pub fn device(&self) -> AnyDevice {
        each!(AnyEvent, self, e => e.device().clone().into())
    }
}

forward! { AnyGraph: Graph;
    /// [`Graph::node_count`].
    fn node_count() -> usize;
    /// [`Graph::replay`]: one replay on `stream`.
    fn replay(@stream: &AnyStream) -> Result<()>;
}

impl AnyGraph {
    /// The former name of [`AnyGraph::replay`].
    ///
    /// # Errors
    /// As [`AnyGraph::replay`].
    #[deprecated(since = "0.2.0", note = "renamed `replay`")]
    pub fn launch(&self, stream: &AnyStream) -> Result<()> {
        self.replay(stream)
    }
}

mod raw;
mod views;

pub use views::AnyPinnedRegistration;
#[allow(deprecated)]
pub use views::AnyRegisteredHost;
