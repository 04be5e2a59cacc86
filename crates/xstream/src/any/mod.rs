//! The type-erased path: one device, stream, event, buffer and graph type whatever the backend,
//! chosen at run time.
//!
//! [`AnyDevice`], [`AnyStream`], [`AnyEvent`], [`AnyBuffer`] and [`AnyGraph`] are enums with
//! one variant per backend compiled into this build (cargo features `host`, `cuda` /
//! `cuda-backend`, `ascend`). Each method matches on the variant and calls the backend's
//! trait method, so the operations, their errors and their semantics are those of the generic
//! traits ([`Device`], [`Stream`], [`Event`], [`Buffer`], [`Graph`]); the only new error is
//! mixing backends (a CUDA event recorded on a host stream, a host buffer copied on an Ascend
//! stream), which is [`Error::WrongDevice`] naming both backends, where the generic path does
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
//! [`Stream::launch`]). Modules and launches have their erased types ([`AnyModule`],
//! [`AnyFunction`], [`AnyStream::launch_kernel`]).
//! Page-locked host memory has its erased type too, [`AnyHostBuffer`]
//! ([`AnyDevice::alloc_host`], [`AnyStream::copy_to_device`], [`AnyStream::copy_to_host`]).

use std::sync::Arc;
use std::time::Duration;

use crate::{
    Allocator, Backend, BackendKind, Buffer, CaptureMode, CaptureStatus, Completion,
    CreationReport, Device, DeviceInfo, Error, Event, EventDesc, EventFlags, FlagReport, Function,
    Graph, HostAllocDesc, HostBuffer, HostCallback, HostMemFlags, KernelArg, LaunchConfig, Module,
    ModuleSource, ParamKind, Readback, Result, Status, Stream, StreamAttr, StreamAttrValue,
    StreamDesc, StreamFlags, WaitCondition,
};

/// Runs `$e` with `$x` bound to the inner value of `$v`, a value (or reference) of the erased
/// enum `$ty`, whatever its variant.
macro_rules! each {
    ($ty:ident, $v:expr, $x:ident => $e:expr) => {
        match $v {
            #[cfg(feature = "host")]
            $ty::Host($x) => $e,
            #[cfg(feature = "cuda-backend")]
            $ty::Cuda($x) => $e,
            #[cfg(feature = "ascend")]
            $ty::Ascend($x) => $e,
        }
    };
}

/// Runs `$e` with `$x` and `$y` bound to the inner values of `$a` (an `$ta`) and `$b` (a
/// `$tb`) when both are of one backend; else returns the mixing error for operation `$op`.
macro_rules! pair {
    ($op:expr, $ta:ident, $a:expr, $tb:ident, $b:expr, $x:ident, $y:ident => $e:expr) => {
        #[allow(unreachable_patterns)]
        match ($a, $b) {
            #[cfg(feature = "host")]
            ($ta::Host($x), $tb::Host($y)) => $e,
            #[cfg(feature = "cuda-backend")]
            ($ta::Cuda($x), $tb::Cuda($y)) => $e,
            #[cfg(feature = "ascend")]
            ($ta::Ascend($x), $tb::Ascend($y)) => $e,
            (a, b) => Err(mixed($op, a.kind(), b.kind())),
        }
    };
}

/// The error of an operation given objects of two backends.
fn mixed(op: &str, a: BackendKind, b: BackendKind) -> Error {
    Error::WrongDevice(format!(
        "{op}: the {a} backend's object was given the {b} backend's object (backends do not mix)"
    ))
}

/// The `kind` method of an erased enum (variants `Host`, `Cuda`, `Ascend`).
macro_rules! kind_fn {
    () => {
        /// Which backend it belongs to.
        pub fn kind(&self) -> BackendKind {
            match self {
                #[cfg(feature = "host")]
                Self::Host(_) => BackendKind::Host,
                #[cfg(feature = "cuda-backend")]
                Self::Cuda(_) => BackendKind::Cuda,
                #[cfg(feature = "ascend")]
                Self::Ascend(_) => BackendKind::Ascend,
            }
        }
    };
}

/// Defines an erased enum over the compiled backends, with `kind`, `From` and `downcast`.
macro_rules! erased {
    ($(#[$m:meta])* $name:ident, $assoc:ident, $get:ident, $h:ident, $c:ident, $a:ident) => {
        $(#[$m])*
        #[derive(Debug)]
        #[non_exhaustive]
        pub enum $name {
            /// The host (CPU) backend's.
            #[cfg(feature = "host")]
            Host(crate::host::$h),
            /// The CUDA backend's.
            #[cfg(feature = "cuda-backend")]
            Cuda(crate::cuda::$c),
            /// The Ascend backend's.
            #[cfg(feature = "ascend")]
            Ascend(crate::ascend::$a),
        }

        impl $name {
            kind_fn!();

            /// The typed object of the generic path, when it is of backend `B`.
            pub fn downcast_ref<B: Erasable>(&self) -> Option<&<B as Backend>::$assoc> {
                B::$get(self)
            }
        }

        #[cfg(feature = "host")]
        impl From<crate::host::$h> for $name {
            fn from(x: crate::host::$h) -> Self {
                Self::Host(x)
            }
        }

        #[cfg(feature = "cuda-backend")]
        impl From<crate::cuda::$c> for $name {
            fn from(x: crate::cuda::$c) -> Self {
                Self::Cuda(x)
            }
        }

        #[cfg(feature = "ascend")]
        impl From<crate::ascend::$a> for $name {
            fn from(x: crate::ascend::$a) -> Self {
                Self::Ascend(x)
            }
        }
    };
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
/// ([`AnyDevice::alloc_host`]; the erased [`HostBuffer`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyHostBuffer {
    /// The host (CPU) backend's.
    #[cfg(feature = "host")]
    Host(HostBuffer<crate::host::HostBackend>),
    /// The CUDA backend's.
    #[cfg(feature = "cuda-backend")]
    Cuda(HostBuffer<crate::cuda::CudaBackend>),
    /// The Ascend backend's.
    #[cfg(feature = "ascend")]
    Ascend(HostBuffer<crate::ascend::AscendBackend>),
}

impl<B: Erasable> From<HostBuffer<B>> for AnyHostBuffer {
    fn from(h: HostBuffer<B>) -> Self {
        B::wrap_host_buffer(h)
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
    fn host_buffer_of(h: &AnyHostBuffer) -> Option<&HostBuffer<Self>>;
    #[doc(hidden)]
    fn host_buffer_of_mut(h: &mut AnyHostBuffer) -> Option<&mut HostBuffer<Self>>;
    #[doc(hidden)]
    fn wrap_host_buffer(h: HostBuffer<Self>) -> AnyHostBuffer;
}

mod sealed {
    /// Only the facade implements [`super::Erasable`].
    pub trait Sealed {}
}

macro_rules! erasable {
    ($feat:literal, $B:ty, $v:ident) => {
        #[cfg(feature = $feat)]
        impl sealed::Sealed for $B {}
        #[cfg(feature = $feat)]
        impl Erasable for $B {
            fn device_of(d: &AnyDevice) -> Option<&Self::Device> {
                #[allow(unreachable_patterns)]
                match d {
                    AnyDevice::$v(x) => Some(x),
                    _ => None,
                }
            }
            fn stream_of(s: &AnyStream) -> Option<&Self::Stream> {
                #[allow(unreachable_patterns)]
                match s {
                    AnyStream::$v(x) => Some(x),
                    _ => None,
                }
            }
            fn event_of(e: &AnyEvent) -> Option<&Self::Event> {
                #[allow(unreachable_patterns)]
                match e {
                    AnyEvent::$v(x) => Some(x),
                    _ => None,
                }
            }
            fn buffer_of(b: &AnyBuffer) -> Option<&Self::Buffer> {
                #[allow(unreachable_patterns)]
                match b {
                    AnyBuffer::$v(x) => Some(x),
                    _ => None,
                }
            }
            fn graph_of(g: &AnyGraph) -> Option<&Self::Graph> {
                #[allow(unreachable_patterns)]
                match g {
                    AnyGraph::$v(x) => Some(x),
                    _ => None,
                }
            }
            fn module_of(m: &AnyModule) -> Option<&Self::Module> {
                #[allow(unreachable_patterns)]
                match m {
                    AnyModule::$v(x) => Some(x),
                    _ => None,
                }
            }
            fn function_of(f: &AnyFunction) -> Option<&Self::Function> {
                #[allow(unreachable_patterns)]
                match f {
                    AnyFunction::$v(x) => Some(x),
                    _ => None,
                }
            }
            fn host_buffer_of(h: &AnyHostBuffer) -> Option<&HostBuffer<Self>> {
                #[allow(unreachable_patterns)]
                match h {
                    AnyHostBuffer::$v(x) => Some(x),
                    _ => None,
                }
            }
            fn host_buffer_of_mut(h: &mut AnyHostBuffer) -> Option<&mut HostBuffer<Self>> {
                #[allow(unreachable_patterns)]
                match h {
                    AnyHostBuffer::$v(x) => Some(x),
                    _ => None,
                }
            }
            fn wrap_host_buffer(h: HostBuffer<Self>) -> AnyHostBuffer {
                AnyHostBuffer::$v(h)
            }
        }
    };
}

erasable!("host", crate::host::HostBackend, Host);
erasable!("cuda-backend", crate::cuda::CudaBackend, Cuda);
erasable!("ascend", crate::ascend::AscendBackend, Ascend);

impl AnyDevice {
    /// Opens device `ordinal` of backend `kind` ([`Backend::open`]).
    ///
    /// # Errors
    /// [`Error::NotCompiled`] for a backend not compiled in; as [`Backend::open`].
    #[inline]
    pub fn open(kind: BackendKind, ordinal: usize) -> Result<Self> {
        crate::dispatch!(kind, B => B::open(ordinal).map(Self::from))
    }

    /// Static facts ([`Device::info`]).
    #[inline]
    pub fn info(&self) -> &DeviceInfo {
        each!(AnyDevice, self, d => d.info())
    }

    /// Creates a stream ([`Device::create_stream`]).
    ///
    /// # Errors
    /// As [`Device::create_stream`].
    #[inline]
    pub fn create_stream(&self, desc: &StreamDesc) -> Result<AnyStream> {
        each!(AnyDevice, self, d => d.create_stream(desc).map(AnyStream::from))
    }

    /// The default stream ([`Device::default_stream`]).
    ///
    /// # Errors
    /// As [`Device::default_stream`].
    #[inline]
    pub fn default_stream(&self) -> Result<AnyStream> {
        each!(AnyDevice, self, d => d.default_stream().map(AnyStream::from))
    }

    /// Creates an event ([`Device::create_event`]).
    ///
    /// # Errors
    /// As [`Device::create_event`].
    #[inline]
    pub fn create_event(&self, desc: &EventDesc) -> Result<AnyEvent> {
        each!(AnyDevice, self, d => d.create_event(desc).map(AnyEvent::from))
    }

    /// Allocates a zeroed device buffer ([`Device::alloc`]).
    ///
    /// # Errors
    /// As [`Device::alloc`].
    #[inline]
    pub fn alloc(&self, len: usize) -> Result<AnyBuffer> {
        each!(AnyDevice, self, d => d.alloc(len).map(AnyBuffer::from))
    }

    // --- ordering and allocation without host sync ---

    /// [`Device::alloc_zeroed_on`]: zeroed in `stream`'s order, no host wait. (The facade
    /// forbids unsafe code, so [`Device::alloc_uninit`] is reached through the backend's
    /// device: [`AnyDevice`] downcasts.)
    ///
    /// # Errors
    /// As [`Device::alloc_zeroed_on`]; [`Error::WrongDevice`] for a stream of another backend.
    pub fn alloc_zeroed_on(&self, stream: &AnyStream, len: usize) -> Result<AnyBuffer> {
        pair!("AnyDevice::alloc_zeroed_on", AnyDevice, self, AnyStream, stream, d, s => d.alloc_zeroed_on(s, len).map(AnyBuffer::from))
    }

    // --- end of ordering and allocation without host sync ---

    /// Allocates page-locked host memory bound to this device ([`Device::alloc_host`]).
    ///
    /// # Errors
    /// As [`Device::alloc_host`].
    #[inline]
    pub fn alloc_host(&self, len: usize, desc: &HostAllocDesc) -> Result<AnyHostBuffer> {
        each!(AnyDevice, self, d => d.alloc_host(len, desc).map(AnyHostBuffer::from))
    }

    /// Loads a module of kernels ([`Device::load_module`]).
    ///
    /// # Errors
    /// As [`Device::load_module`].
    #[inline]
    pub fn load_module(&self, src: &ModuleSource<'_>) -> Result<AnyModule> {
        each!(AnyDevice, self, d => d.load_module(src).map(AnyModule::from))
    }

    /// The module shipped with the crate ([`Device::builtin_module`]).
    ///
    /// # Errors
    /// As [`Device::builtin_module`].
    #[inline]
    pub fn builtin_module(&self) -> Result<AnyModule> {
        each!(AnyDevice, self, d => d.builtin_module().map(AnyModule::from))
    }

    /// Waits for all work on the device ([`Device::synchronize`]).
    ///
    /// # Errors
    /// As [`Device::synchronize`].
    #[inline]
    pub fn synchronize(&self) -> Result<()> {
        each!(AnyDevice, self, d => d.synchronize())
    }

    /// [`Device::can_access_peer`].
    ///
    /// # Errors
    /// As [`Device::can_access_peer`]; [`Error::WrongDevice`] for a device of another backend.
    #[inline]
    pub fn can_access_peer(&self, peer: &AnyDevice) -> Result<bool> {
        pair!("AnyDevice::can_access_peer", AnyDevice, self, AnyDevice, peer, d, p => d.can_access_peer(p))
    }

    /// [`Device::enable_peer_access`].
    ///
    /// # Errors
    /// As [`Device::enable_peer_access`]; [`Error::WrongDevice`] for a device of another
    /// backend.
    #[inline]
    pub fn enable_peer_access(&self, peer: &AnyDevice) -> Result<()> {
        pair!("AnyDevice::enable_peer_access", AnyDevice, self, AnyDevice, peer, d, p => d.enable_peer_access(p))
    }

    /// [`Device::disable_peer_access`].
    ///
    /// # Errors
    /// As [`Device::disable_peer_access`]; [`Error::WrongDevice`] for a device of another
    /// backend.
    #[inline]
    pub fn disable_peer_access(&self, peer: &AnyDevice) -> Result<()> {
        pair!("AnyDevice::disable_peer_access", AnyDevice, self, AnyDevice, peer, d, p => d.disable_peer_access(p))
    }
}

impl AnyStream {
    /// Its device ([`Stream::device`]; a clone, which shares the device).
    #[inline]
    pub fn device(&self) -> AnyDevice {
        each!(AnyStream, self, s => s.device().clone().into())
    }

    /// [`Stream::id`].
    #[inline]
    pub fn id(&self) -> u64 {
        each!(AnyStream, self, s => s.id())
    }

    /// [`Stream::name`].
    #[inline]
    pub fn name(&self) -> Option<&str> {
        each!(AnyStream, self, s => s.name())
    }

    /// [`Stream::flags`].
    #[inline]
    pub fn flags(&self) -> StreamFlags {
        each!(AnyStream, self, s => s.flags())
    }

    /// [`Stream::priority`].
    #[inline]
    pub fn priority(&self) -> i32 {
        each!(AnyStream, self, s => s.priority())
    }

    /// [`Stream::report`].
    #[inline]
    pub fn report(&self) -> &CreationReport {
        each!(AnyStream, self, s => s.report())
    }

    /// [`Stream::ownership`]: whether dropping it destroys the native stream.
    #[inline]
    pub fn ownership(&self) -> crate::Ownership {
        each!(AnyStream, self, s => s.ownership())
    }

    /// [`Stream::query`].
    ///
    /// # Errors
    /// As [`Stream::query`].
    #[inline]
    pub fn query(&self) -> Result<Status> {
        each!(AnyStream, self, s => s.query())
    }

    /// [`Stream::synchronize`].
    ///
    /// # Errors
    /// As [`Stream::synchronize`].
    #[inline]
    pub fn synchronize(&self) -> Result<()> {
        each!(AnyStream, self, s => s.synchronize())
    }

    /// [`Stream::synchronize_timeout`].
    ///
    /// # Errors
    /// As [`Stream::synchronize_timeout`].
    #[inline]
    pub fn synchronize_timeout(&self, timeout: Duration) -> Result<()> {
        each!(AnyStream, self, s => s.synchronize_timeout(timeout))
    }

    /// [`Stream::wait_event`].
    ///
    /// # Errors
    /// As [`Stream::wait_event`]; [`Error::WrongDevice`] for an event of another backend.
    #[inline]
    pub fn wait_event(&self, event: &AnyEvent) -> Result<()> {
        pair!("AnyStream::wait_event", AnyStream, self, AnyEvent, event, s, e => s.wait_event(e))
    }

    /// [`Stream::enqueue_callback`].
    ///
    /// # Errors
    /// As [`Stream::enqueue_callback`].
    #[inline]
    pub fn enqueue_callback(&self, f: HostCallback) -> Result<()> {
        each!(AnyStream, self, s => s.enqueue_callback(f))
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

    /// [`Stream::begin_capture`].
    ///
    /// # Errors
    /// As [`Stream::begin_capture`].
    #[inline]
    pub fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        each!(AnyStream, self, s => s.begin_capture(mode))
    }

    /// [`Stream::end_capture`].
    ///
    /// # Errors
    /// As [`Stream::end_capture`].
    #[inline]
    pub fn end_capture(&self) -> Result<AnyGraph> {
        each!(AnyStream, self, s => s.end_capture().map(AnyGraph::from))
    }

    /// [`Stream::capture_status`].
    #[inline]
    pub fn capture_status(&self) -> CaptureStatus {
        each!(AnyStream, self, s => s.capture_status())
    }

    /// [`Stream::is_capturing`].
    #[inline]
    pub fn is_capturing(&self) -> bool {
        each!(AnyStream, self, s => s.is_capturing())
    }

    /// [`Stream::attribute`].
    ///
    /// # Errors
    /// As [`Stream::attribute`].
    #[inline]
    pub fn attribute(&self, attr: StreamAttr) -> Result<StreamAttrValue> {
        each!(AnyStream, self, s => s.attribute(attr))
    }

    /// [`Stream::set_attribute`].
    ///
    /// # Errors
    /// As [`Stream::set_attribute`].
    #[inline]
    pub fn set_attribute(&self, value: StreamAttrValue) -> Result<()> {
        each!(AnyStream, self, s => s.set_attribute(value))
    }

    /// [`Stream::copy_attributes_from`].
    ///
    /// # Errors
    /// As [`Stream::copy_attributes_from`]; [`Error::WrongDevice`] for a stream of another
    /// backend.
    #[inline]
    pub fn copy_attributes_from(&self, src: &AnyStream) -> Result<()> {
        pair!("AnyStream::copy_attributes_from", AnyStream, self, AnyStream, src, s, o => s.copy_attributes_from(o))
    }

    /// [`Stream::set_allocator`].
    ///
    /// # Errors
    /// As [`Stream::set_allocator`].
    #[inline]
    pub fn set_allocator(&self, allocator: Option<Arc<dyn Allocator>>) -> Result<()> {
        each!(AnyStream, self, s => s.set_allocator(allocator))
    }

    /// [`Stream::allocator`].
    ///
    /// # Errors
    /// As [`Stream::allocator`].
    #[inline]
    pub fn allocator(&self) -> Result<Option<Arc<dyn Allocator>>> {
        each!(AnyStream, self, s => s.allocator())
    }

    /// [`Stream::memset`].
    ///
    /// # Errors
    /// As [`Stream::memset`]; [`Error::WrongDevice`] for a buffer of another backend.
    #[inline]
    pub fn memset(&self, buf: &AnyBuffer, offset: usize, len: usize, value: u8) -> Result<()> {
        pair!("AnyStream::memset", AnyStream, self, AnyBuffer, buf, s, b => s.memset(b, offset, len, value))
    }

    /// [`Stream::write`].
    ///
    /// # Errors
    /// As [`Stream::write`]; [`Error::WrongDevice`] for a buffer of another backend.
    #[inline]
    pub fn write(&self, dst: &AnyBuffer, offset: usize, data: Vec<u8>) -> Result<()> {
        pair!("AnyStream::write", AnyStream, self, AnyBuffer, dst, s, b => s.write(b, offset, data))
    }

    /// [`Stream::read`].
    ///
    /// # Errors
    /// As [`Stream::read`]; [`Error::WrongDevice`] for a buffer of another backend.
    #[inline]
    pub fn read(&self, src: &AnyBuffer, offset: usize, len: usize) -> Result<Readback> {
        pair!("AnyStream::read", AnyStream, self, AnyBuffer, src, s, b => s.read(b, offset, len))
    }

    /// [`Stream::copy`].
    ///
    /// # Errors
    /// As [`Stream::copy`]; [`Error::WrongDevice`] for a buffer of another backend.
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
    /// As [`Stream::copy_peer`]; [`Error::WrongDevice`] for a buffer of another backend.
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
    /// As [`Stream::copy_to_device`]; [`Error::WrongDevice`] for a buffer of another backend.
    #[inline]
    pub fn copy_to_device(
        &self,
        src: &AnyHostBuffer,
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
            s.copy_to_device(host_of(OP, s, src)?, src_offset, b, dst_offset, len)
        })
    }

    /// [`Stream::copy_to_host`]: one native asynchronous copy into page-locked memory.
    ///
    /// # Errors
    /// As [`Stream::copy_to_host`]; [`Error::WrongDevice`] for a buffer of another backend.
    #[inline]
    pub fn copy_to_host(
        &self,
        src: &AnyBuffer,
        src_offset: usize,
        dst: &mut AnyHostBuffer,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        const OP: &str = "AnyStream::copy_to_host";
        if dst.kind() != self.kind() {
            return Err(mixed(OP, self.kind(), dst.kind()));
        }
        pair!(OP, AnyStream, self, AnyBuffer, src, s, b => {
            s.copy_to_host(b, src_offset, host_of_mut(OP, s, dst)?, dst_offset, len)
        })
    }

    /// [`Stream::launch_kernel`]: kernel `f` with `cfg` and `args`. The arguments are
    /// converted to the backend's types first (one small vector per launch).
    ///
    /// # Errors
    /// As [`Stream::launch_kernel`]; [`Error::WrongDevice`] for a function or buffer argument
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

    /// [`Stream::enqueue_launch`] (the checked launch of the launch builder, see
    /// [`xstream_core::launch`]): arguments of every kind, with `attrs`. The arguments are
    /// converted to the backend's types first (one small vector per launch). The erased path
    /// has no unchecked launch (this crate has no `unsafe`): use the typed stream
    /// (`downcast_ref`) for one.
    ///
    /// # Errors
    /// As [`Stream::enqueue_launch`]; [`Error::WrongDevice`] for a function or buffer
    /// argument of another backend.
    pub fn launch_checked(
        &self,
        f: &AnyFunction,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, AnyBuffer>],
        attrs: &xstream_core::LaunchAttrs,
    ) -> Result<()> {
        const OP: &str = "AnyStream::launch_checked";
        pair!(OP, AnyStream, self, AnyFunction, f, s, func => {
            let typed = typed_args(OP, s, args)?;
            s.enqueue_launch(func, cfg, &typed, attrs)
        })
    }

    // --- end of launch builder ---

    /// [`Stream::alloc_async`].
    ///
    /// # Errors
    /// As [`Stream::alloc_async`].
    #[inline]
    pub fn alloc_async(&self, len: usize) -> Result<AnyBuffer> {
        each!(AnyStream, self, s => s.alloc_async(len).map(AnyBuffer::from))
    }

    /// [`Stream::free_async`].
    ///
    /// # Errors
    /// As [`Stream::free_async`]; [`Error::WrongDevice`] for a buffer of another backend
    /// (the buffer is then dropped under its backend's lifetime rule).
    #[inline]
    pub fn free_async(&self, buf: AnyBuffer) -> Result<()> {
        pair!("AnyStream::free_async", AnyStream, self, AnyBuffer, buf, s, b => s.free_async(b))
    }

    // --- ordering and allocation without host sync ---

    /// [`Stream::join`]: later work here waits for the work enqueued on `other` so far.
    ///
    /// # Errors
    /// As [`Stream::join`]; [`Error::WrongDevice`] for a stream of another backend.
    pub fn join(&self, other: &AnyStream) -> Result<()> {
        pair!("AnyStream::join", AnyStream, self, AnyStream, other, s, o => s.join(o))
    }

    /// [`Stream::record_event`]: a fresh event recorded here.
    ///
    /// # Errors
    /// As [`Stream::record_event`].
    pub fn record_event(&self) -> Result<AnyEvent> {
        each!(AnyStream, self, s => Stream::record_event(s).map(AnyEvent::from))
    }

    /// [`Stream::record_use`]: work enqueued here so far (through the raw handle) uses `buf`.
    ///
    /// # Errors
    /// As [`Stream::record_use`]; [`Error::WrongDevice`] for a buffer of another backend.
    pub fn record_use(&self, buf: &AnyBuffer) -> Result<()> {
        pair!("AnyStream::record_use", AnyStream, self, AnyBuffer, buf, s, b => s.record_use(b))
    }

    // --- end of ordering and allocation without host sync ---

    /// [`Stream::wait_value32`].
    ///
    /// # Errors
    /// As [`Stream::wait_value32`]; [`Error::WrongDevice`] for a buffer of another backend.
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
    /// As [`Stream::wait_value64`]; [`Error::WrongDevice`] for a buffer of another backend.
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

    /// [`Stream::write_value32`].
    ///
    /// # Errors
    /// As [`Stream::write_value32`]; [`Error::WrongDevice`] for a buffer of another backend.
    #[inline]
    pub fn write_value32(&self, buf: &AnyBuffer, offset: usize, value: u32) -> Result<()> {
        pair!("AnyStream::write_value32", AnyStream, self, AnyBuffer, buf, s, b => s.write_value32(b, offset, value))
    }

    /// [`Stream::write_value64`].
    ///
    /// # Errors
    /// As [`Stream::write_value64`]; [`Error::WrongDevice`] for a buffer of another backend.
    #[inline]
    pub fn write_value64(&self, buf: &AnyBuffer, offset: usize, value: u64) -> Result<()> {
        pair!("AnyStream::write_value64", AnyStream, self, AnyBuffer, buf, s, b => s.write_value64(b, offset, value))
    }

    /// `dst` when it is of this stream's backend, else the mixing error.
    fn same_buffer<'a>(&self, op: &str, dst: &'a AnyBuffer) -> Result<&'a AnyBuffer> {
        if dst.kind() == self.kind() {
            Ok(dst)
        } else {
            Err(mixed(op, self.kind(), dst.kind()))
        }
    }
}

impl AnyBuffer {
    /// The typed buffer of the backend of stream `_s` (the caller checked the kinds).
    fn downcast_same<S: Stream>(&self, op: &str, _s: &S) -> Result<&<S::B as Backend>::Buffer>
    where
        S::B: Erasable,
    {
        <S::B as Erasable>::buffer_of(self)
            .ok_or_else(|| mixed(op, <S::B as Backend>::KIND, self.kind()))
    }

    /// [`Buffer::len`].
    #[inline]
    pub fn len(&self) -> usize {
        each!(AnyBuffer, self, b => b.len())
    }

    /// [`Buffer::is_empty`].
    #[inline]
    pub fn is_empty(&self) -> bool {
        each!(AnyBuffer, self, b => b.is_empty())
    }

    /// [`Buffer::device_address`].
    #[inline]
    pub fn device_address(&self) -> u64 {
        each!(AnyBuffer, self, b => b.device_address())
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
    op: &str,
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

impl AnyModule {
    /// The function called `name` ([`Module::function`]).
    ///
    /// # Errors
    /// As [`Module::function`].
    #[inline]
    pub fn function(&self, name: &str) -> Result<AnyFunction> {
        each!(AnyModule, self, m => m.function(name).map(AnyFunction::from))
    }
}

impl AnyFunction {
    /// [`Function::name`].
    #[inline]
    pub fn name(&self) -> &str {
        each!(AnyFunction, self, f => f.name())
    }

    /// [`Function::params`].
    #[inline]
    pub fn params(&self) -> Option<&[ParamKind]> {
        each!(AnyFunction, self, f => f.params())
    }
}

/// The typed host buffer of the backend of stream `_s`.
fn host_of<'a, S: Stream>(op: &str, _s: &S, h: &'a AnyHostBuffer) -> Result<&'a HostBuffer<S::B>>
where
    S::B: Erasable,
{
    <S::B as Erasable>::host_buffer_of(h)
        .ok_or_else(|| mixed(op, <S::B as Backend>::KIND, h.kind()))
}

/// The typed host buffer of the backend of stream `_s`, mutably.
fn host_of_mut<'a, S: Stream>(
    op: &str,
    _s: &S,
    h: &'a mut AnyHostBuffer,
) -> Result<&'a mut HostBuffer<S::B>>
where
    S::B: Erasable,
{
    let kind = h.kind();
    <S::B as Erasable>::host_buffer_of_mut(h)
        .ok_or_else(|| mixed(op, <S::B as Backend>::KIND, kind))
}

impl AnyHostBuffer {
    /// Which backend it belongs to.
    #[inline]
    pub fn kind(&self) -> BackendKind {
        each!(AnyHostBuffer, self, h => <_ as HostBufferKind>::kind_of(h))
    }

    /// The typed buffer of the generic path, when it is of backend `B`.
    pub fn downcast_ref<B: Erasable>(&self) -> Option<&HostBuffer<B>> {
        B::host_buffer_of(self)
    }

    /// The typed buffer of the generic path, mutably, when it is of backend `B`.
    pub fn downcast_mut<B: Erasable>(&mut self) -> Option<&mut HostBuffer<B>> {
        B::host_buffer_of_mut(self)
    }

    /// Its device (a clone, which shares the device).
    #[inline]
    pub fn device(&self) -> AnyDevice {
        each!(AnyHostBuffer, self, h => h.device().clone().into())
    }

    /// [`HostBuffer::len`].
    #[inline]
    pub fn len(&self) -> usize {
        each!(AnyHostBuffer, self, h => h.len())
    }

    /// [`HostBuffer::is_empty`].
    #[inline]
    pub fn is_empty(&self) -> bool {
        each!(AnyHostBuffer, self, h => h.is_empty())
    }

    /// [`HostBuffer::flags`].
    #[inline]
    pub fn flags(&self) -> HostMemFlags {
        each!(AnyHostBuffer, self, h => h.flags())
    }

    /// [`HostBuffer::report`].
    #[inline]
    pub fn report(&self) -> &FlagReport {
        each!(AnyHostBuffer, self, h => h.report())
    }

    /// [`HostBuffer::is_page_locked`].
    #[inline]
    pub fn is_page_locked(&self) -> bool {
        each!(AnyHostBuffer, self, h => h.is_page_locked())
    }

    /// [`HostBuffer::wait_idle`].
    ///
    /// # Errors
    /// As [`HostBuffer::wait_idle`].
    #[inline]
    pub fn wait_idle(&self) -> Result<()> {
        each!(AnyHostBuffer, self, h => h.wait_idle())
    }

    /// [`HostBuffer::as_slice`] (waits for the copies that use the buffer).
    ///
    /// # Errors
    /// As [`HostBuffer::as_slice`].
    #[inline]
    pub fn as_slice(&self) -> Result<&[u8]> {
        each!(AnyHostBuffer, self, h => h.as_slice())
    }

    /// [`HostBuffer::as_mut_slice`] (waits for the copies that use the buffer).
    ///
    /// # Errors
    /// As [`HostBuffer::as_mut_slice`].
    #[inline]
    pub fn as_mut_slice(&mut self) -> Result<&mut [u8]> {
        each!(AnyHostBuffer, self, h => h.as_mut_slice())
    }
}

/// The backend kind of a typed host buffer.
trait HostBufferKind {
    fn kind_of(&self) -> BackendKind;
}

impl<B: Backend> HostBufferKind for HostBuffer<B> {
    fn kind_of(&self) -> BackendKind {
        B::KIND
    }
}

impl AnyEvent {
    /// Its device ([`Event::device`]; a clone, which shares the device).
    #[inline]
    pub fn device(&self) -> AnyDevice {
        each!(AnyEvent, self, e => e.device().clone().into())
    }

    /// [`Event::flags`].
    #[inline]
    pub fn flags(&self) -> EventFlags {
        each!(AnyEvent, self, e => e.flags())
    }

    /// [`Event::report`].
    #[inline]
    pub fn report(&self) -> &FlagReport {
        each!(AnyEvent, self, e => e.report())
    }

    /// [`Event::record`].
    ///
    /// # Errors
    /// As [`Event::record`]; [`Error::WrongDevice`] for a stream of another backend.
    #[inline]
    pub fn record(&self, stream: &AnyStream) -> Result<()> {
        pair!("AnyEvent::record", AnyEvent, self, AnyStream, stream, e, s => e.record(s))
    }

    /// [`Event::query`].
    ///
    /// # Errors
    /// As [`Event::query`].
    #[inline]
    pub fn query(&self) -> Result<Status> {
        each!(AnyEvent, self, e => e.query())
    }

    /// [`Event::synchronize`].
    ///
    /// # Errors
    /// As [`Event::synchronize`].
    #[inline]
    pub fn synchronize(&self) -> Result<()> {
        each!(AnyEvent, self, e => e.synchronize())
    }

    /// [`Event::synchronize_timeout`].
    ///
    /// # Errors
    /// As [`Event::synchronize_timeout`].
    #[inline]
    pub fn synchronize_timeout(&self, timeout: Duration) -> Result<()> {
        each!(AnyEvent, self, e => e.synchronize_timeout(timeout))
    }

    /// [`Event::elapsed_ms`] from `self` (start) to `end`.
    ///
    /// # Errors
    /// As [`Event::elapsed_ms`]; [`Error::WrongDevice`] for an event of another backend.
    #[inline]
    pub fn elapsed_ms(&self, end: &AnyEvent) -> Result<f32> {
        pair!("AnyEvent::elapsed_ms", AnyEvent, self, AnyEvent, end, a, b => a.elapsed_ms(b))
    }

    /// [`Event::completed`].
    ///
    /// # Errors
    /// As [`Event::completed`].
    #[inline]
    pub fn completed(&self) -> Result<Completion> {
        each!(AnyEvent, self, e => e.completed())
    }
}

impl AnyGraph {
    /// [`Graph::node_count`].
    #[inline]
    pub fn node_count(&self) -> usize {
        each!(AnyGraph, self, g => g.node_count())
    }

    /// [`Graph::launch`]: one replay on `stream`.
    ///
    /// # Errors
    /// As [`Graph::launch`]; [`Error::WrongDevice`] for a stream of another backend.
    #[inline]
    pub fn launch(&self, stream: &AnyStream) -> Result<()> {
        pair!("AnyGraph::launch", AnyGraph, self, AnyStream, stream, g, s => g.launch(s))
    }
}

mod raw;
mod views;
mod vmm;

pub use views::AnyRegisteredHost;
pub use vmm::{AnyPhysicalMemory, AnyVirtualRange};
