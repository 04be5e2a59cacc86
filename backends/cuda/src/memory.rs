//! Device memory: [`CudaBuffer`], [`CudaManagedBuffer`] and the stream-ordered
//! [`CudaAsyncAllocator`].
//!
//! # Buffer lifetime
//! A buffer's allocation lives in an `Arc`. Every enqueue that touches it (memset, copies,
//! kernels) clones that `Arc` into the stream's keep-alive list. The list is trimmed when a
//! `query`/`synchronize` observes the stream idle, and is otherwise handed to a host function
//! behind the stream's work (at stream drop, or every 256 entries); that host function moves it
//! to xstream's dispatcher thread, which drops it (`cuMemFree` is not allowed inside a host
//! function). So dropping a `CudaBuffer` never frees memory that queued work still uses; the
//! `cuMemFree` happens when the last user is known complete. A captured graph keeps its
//! buffers, and hands them to the stream at each launch. After a device fault, host functions
//! never run and the memory is left to the (dead) context.
//!
//! # Allocation without host synchronization
//! [`Device::alloc`](xstream_core::Device::alloc) (`cuMemAlloc`, then `cuMemsetD8Async` of the
//! whole block on the device's internal idle stream and a `cuStreamSynchronize` of that stream)
//! waits for its own zeroing only, never for other streams' work; it stays the simple, always
//! defined choice. [`Device::alloc_uninit`](xstream_core::Device::alloc_uninit) is
//! `cuMemAlloc` alone, and [`Device::alloc_zeroed_on`](xstream_core::Device::alloc_zeroed_on)
//! enqueues the zeroing on the caller's stream with no host wait.
//! [`Stream::alloc_async`](xstream_core::Stream::alloc_async) is `cuMemAllocAsync`.
//!
//! # Use tracking
//! A stream-ordered buffer remembers every stream that used it (any number: a list, no slot
//! limit) and the streams marked with [`Stream::record_use`](xstream_core::Stream::record_use);
//! its free (`free_async` on stream F, or the drop, on its allocating stream) makes F wait for
//! each of them with one event from the context's pool (`crate::event_pool`: record on the
//! user, `cuStreamWaitEvent` on F), then enqueues `cuMemFreeAsync` on F. The host never waits
//! and the context is never synchronized. A plain buffer marked with `record_use` is kept by
//! the marked stream's keep-alive list (released once that stream's work up to the mark is
//! known complete), and its `free_async` on F makes F wait for the marked streams the same
//! way.
//!
//! # Allocation granularity
//! Every allocation xstream makes (`cuMemAlloc`, `cuMemAllocAsync`, `cuMemAllocFromPoolAsync`,
//! `cuMemAllocManaged`) asks the driver for the length rounded up to
//! [`xstream_core::ALLOC_GRANULE`] (512 bytes), so libraries that read whole words (NCCL's LL
//! kernels) stay inside the allocation; `len()` stays the requested length and every bounds
//! check uses it. [`CudaBuffer::address_range`] shows what the driver allocated. An adopted
//! cudarc slice ([`CudaBuffer::from_cudarc`]) keeps the size cudarc gave it.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use xstream_core::sync::lock;

use xstream_core::callback::in_callback;
use xstream_core::sync::UseSet;
#[allow(unused_imports)] // doc links
use xstream_core::Buffer;
use xstream_core::{
    alloc_size, Allocator, BackendKind, Block, BufferImpl, Error, RawAlloc, RawBuffer, Result,
};

use crate::ffi::{self, CuStream};
use crate::stream::StreamHandle;
use crate::{CudaBackend, CudaDevice, CudaStream};

mod ipc;

/// One device allocation; `cuMemFree` on drop (or, for an adopted cudarc slice, cudarc's
/// own release).
pub(crate) struct Alloc {
    dev: CudaDevice,
    ptr: u64,
    len: usize,
    /// An adopted cudarc slice ([`CudaBuffer::from_cudarc`]): dropping it frees the memory.
    foreign: Option<Box<dyn std::any::Any + Send + Sync>>,
    /// Streams marked with `record_use`: a `free_async` waits for them (no owner: key 0 is
    /// no handle's address).
    marked: UseSet<usize, Arc<StreamHandle>>,
    /// Not xstream's to free: handed out by `into_raw`, or borrowed (`from_raw_borrowed`).
    leaked: AtomicBool,
}

impl Alloc {
    fn new(dev: &CudaDevice, ptr: u64, len: usize) -> Self {
        Self {
            dev: dev.clone(),
            ptr,
            len,
            foreign: None,
            marked: UseSet::new(0),
            leaked: AtomicBool::new(false),
        }
    }
}

/// A stream's key in a [`UseSet`]: the address of its shared handle (never 0).
fn handle_key(s: &Arc<StreamHandle>) -> usize {
    Arc::as_ptr(s) as usize
}

impl Drop for Alloc {
    fn drop(&mut self) {
        if self.leaked.load(Ordering::Acquire) {
            // The caller owns the memory (and, for an adopted slice or an imported handle,
            // its release): neither freed nor closed here.
            if let Some(f) = self.foreign.take() {
                std::mem::forget(f);
            }
            return;
        }
        let (ptr, ctx) = (self.ptr, self.dev.shared.raw_ctx);
        let foreign = self.foreign.take();
        let free = move || match foreign {
            Some(slice) => drop(slice),
            None => {
                if ffi::bind(ctx).is_ok() {
                    // SAFETY: `ptr` is this allocation's base, owned by it alone (not leaked,
                    // not foreign) and freed only here, at the drop of its last holder; every
                    // stream that used it holds this `Alloc` on its keep list until that work
                    // completed, so no pending work uses it.
                    #[allow(unsafe_code)]
                    let r = unsafe { ffi::mem_free(ptr) };
                    if let Err(c) = r {
                        tracing::debug!(code = c, "cuMemFree failed");
                    }
                }
            }
        };
        // Dispatched (inside a host callback), the job holds the device until the free ran:
        // the last device handle dropped meanwhile on another thread must not release the
        // context under the pending free.
        crate::stream::release_now_or_dispatched(&self.dev, free);
    }
}

/// Something queued work references and that must outlive it.
pub(crate) enum Keep {
    /// A device allocation.
    Buffer(#[allow(dead_code)] Arc<Alloc>),
    /// Host bytes a captured copy reads at every replay.
    Bytes(#[allow(dead_code)] Vec<u8>),
    /// Page-locked host memory an asynchronous copy uses.
    Host(#[allow(dead_code)] xstream_core::PinnedSpan),
    /// A graph's list, kept by a launch of it.
    Shared(#[allow(dead_code)] Arc<Vec<Keep>>),
    /// A module whose kernels queued or captured work launches.
    Module(#[allow(dead_code)] Arc<crate::module::ModuleInner>),
}

/// A device buffer: zero-initialised from [`Device::alloc`](xstream_core::Device::alloc)
/// (`cuMemAlloc`), or stream-ordered from
/// [`Stream::alloc_async`](xstream_core::Stream::alloc_async) (`cuMemAllocAsync`, content
/// undefined). `Send + Sync`. See the module docs for when its memory is freed.
pub struct CudaBuffer {
    mem: Mem,
}

enum Mem {
    Plain(Arc<Alloc>),
    Ordered(Ordered),
}

/// A stream-ordered allocation: freed with `cuMemFreeAsync` on a stream, ordered after the
/// work of its owner stream (stream order) and of every other stream that used it (tracked
/// here, like PyTorch's `record_stream`).
///
/// Its device is its owner's (the handle holds the stream's one device reference), and every
/// change of its state is made through a unique reference (`free_async` takes the buffer by
/// value, the drop has it), so making and freeing one costs no atomic operation beyond the
/// owner handle's count.
pub(crate) struct Ordered {
    ptr: u64,
    len: usize,
    owner: Arc<StreamHandle>,
    /// Every other stream that used it (or was marked with `record_use`), once each, keyed by
    /// the address of its handle.
    users: UseSet<usize, Arc<StreamHandle>>,
    /// Freed (by `free_async` or drop), or handed out by `into_raw`.
    freed: bool,
}

impl Ordered {
    /// Keys its use set by its owner (made with a placeholder key where the owner was built
    /// in place).
    fn keyed(mut self) -> Self {
        self.users = UseSet::new(handle_key(&self.owner));
        self
    }

    fn note_use(&self, s: &Arc<StreamHandle>) {
        self.users.note(handle_key(s), || Arc::clone(s));
    }

    /// The device (its owner's).
    fn dev(&self) -> &CudaDevice {
        self.owner.device()
    }

    /// `cuMemFreeAsync` on `on`, after every tracked user's work. Its callers refused host
    /// callbacks already (the checked `free_async`; the drop hands the free to the dispatcher
    /// inside one), so it only binds.
    fn free_on(&mut self, on: CuStream) -> Result<()> {
        if std::mem::replace(&mut self.freed, true) {
            return Err(Error::invalid("stream-ordered buffer freed twice"));
        }
        let sh = &self.owner.device().shared;
        sh.bind()?;
        let users = self.users.take_mut();
        // One pooled event serves every user (a wait snapshots the record at call time); the
        // host never waits and the context is never synchronized, however many streams.
        sh.events.order_after(
            sh,
            on,
            users
                .iter()
                .map(|(_, h)| h.raw())
                .chain(std::iter::once(self.owner.raw())),
        )?;
        // SAFETY: `self.ptr` is this stream-ordered allocation's base, freed once (the
        // `freed` flag above); the owner's and every tracked user's work was ordered before
        // the free on `on` by the event wait just made.
        #[allow(unsafe_code)]
        let r = unsafe { ffi::mem_free_async(self.ptr, on) };
        sh.check("cuMemFreeAsync", r)
    }
}

impl Drop for Ordered {
    fn drop(&mut self) {
        if self.freed || self.dev().shared.sticky_error().is_some() {
            return;
        }
        if in_callback() {
            // No driver calls here: hand the free to the dispatcher thread.
            let o = Ordered {
                ptr: self.ptr,
                len: self.len,
                owner: Arc::clone(&self.owner),
                users: self.users.take_set(),
                freed: false,
            };
            self.freed = true;
            crate::stream::dispatch_driver_job(move || drop(o));
            return;
        }
        if let Err(e) = self.free_on(self.owner.raw()) {
            tracing::debug!(error = %e, "stream-ordered free at drop failed");
        }
    }
}

impl fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaBuffer")
            .field("ptr", &format_args!("{:#x}", self.ptr()))
            .field("len", &self.len_bytes())
            .field("stream_ordered", &matches!(self.mem, Mem::Ordered(_)))
            .finish()
    }
}

impl CudaBuffer {
    pub(crate) fn ptr(&self) -> u64 {
        match &self.mem {
            Mem::Plain(a) => a.ptr,
            Mem::Ordered(o) => o.ptr,
        }
    }
    pub(crate) fn len_bytes(&self) -> usize {
        match &self.mem {
            Mem::Plain(a) => a.len,
            Mem::Ordered(o) => o.len,
        }
    }
    pub(crate) fn dev(&self) -> &CudaDevice {
        match &self.mem {
            Mem::Plain(a) => &a.dev,
            Mem::Ordered(o) => o.dev(),
        }
    }
    /// Adopts a cudarc slice without copying (see `crate::interop`): xstream owns it from now
    /// on, and cudarc's own drop frees the memory once the last xstream user (queued work
    /// included, under the buffer lifetime rule above) is gone. Work that cudarc enqueued on
    /// the slice must be ordered before xstream's use (synchronize the cudarc stream, or make
    /// the xstream stream wait for an event recorded behind it).
    ///
    /// # Errors
    /// [`Error::WrongDevice`] for a slice of another context; [`Error::InvalidArgument`] for
    /// an empty slice. The slice is dropped (freed by cudarc) on error.
    pub fn from_cudarc<T: Send + Sync + 'static>(
        dev: &CudaDevice,
        slice: cudarc::driver::CudaSlice<T>,
    ) -> Result<Self> {
        use cudarc::driver::DevicePtr;
        dev.shared.enter()?;
        if slice.context().cu_ctx() != dev.shared.raw_ctx.0 {
            return Err(Error::WrongDevice(
                "the cudarc slice belongs to another CUDA context".into(),
            ));
        }
        let len = slice.num_bytes();
        if len == 0 {
            return Err(Error::invalid(
                "an empty cudarc slice cannot become a buffer",
            ));
        }
        let ptr = {
            let (p, _record) = slice.device_ptr(slice.stream());
            p
        };
        Ok(CudaBuffer {
            mem: Mem::Plain(Arc::new({
                let mut a = Alloc::new(dev, ptr, len);
                a.foreign = Some(Box::new(slice));
                a
            })),
        })
    }

    /// The allocation the driver holds underneath (`cuMemGetAddressRange`): its base address
    /// and size in bytes. For a buffer xstream allocated, the size is at least
    /// [`len`](Buffer::len) rounded up to [`xstream_core::ALLOC_GRANULE`] (module docs).
    ///
    /// # Errors
    /// Vendor errors (a poisoned context).
    pub fn address_range(&self) -> Result<(u64, usize)> {
        let sh = &self.dev().shared;
        sh.enter()?;
        sh.check(
            "cuMemGetAddressRange",
            ffi::mem_get_address_range(self.ptr()),
        )
    }

    /// Whether it came from `alloc_async`.
    pub fn is_stream_ordered(&self) -> bool {
        matches!(self.mem, Mem::Ordered(_))
    }
    /// What a stream must keep alive for work that uses the buffer (nothing for a
    /// stream-ordered buffer, whose free is ordered after its users instead).
    pub(crate) fn keep_for(&self, s: &Arc<StreamHandle>) -> Option<Keep> {
        match &self.mem {
            Mem::Plain(a) => Some(Keep::Buffer(Arc::clone(a))),
            Mem::Ordered(o) => {
                o.note_use(s);
                None
            }
        }
    }
    /// Refuses a buffer of another context (device) than `dev`'s.
    pub(crate) fn check_device(&self, op: &str, dev: &CudaDevice) -> Result<()> {
        let mine = self.dev();
        if mine.shared.raw_ctx != dev.shared.raw_ctx {
            return Err(Error::WrongDevice(format!(
                "{op}: the buffer belongs to CUDA device {} (context {:?}), the stream to device \
                 {} (context {:?})",
                mine.shared.info.ordinal,
                mine.shared.raw_ctx,
                dev.shared.info.ordinal,
                dev.shared.raw_ctx
            )));
        }
        Ok(())
    }
}

impl BufferImpl for CudaBuffer {
    type B = CudaBackend;
    fn device_ordinal_impl(&self) -> usize {
        self.dev().shared.info.ordinal
    }
    /// The same CUDA context (a buffer of another context on the same GPU is foreign too).
    fn belongs_to_impl(&self, device: &CudaDevice) -> bool {
        self.dev().shared.raw_ctx == device.shared.raw_ctx
    }
    fn len_impl(&self) -> usize {
        self.len_bytes()
    }
    fn device_address_impl(&self) -> u64 {
        self.ptr()
    }

    /// Marks the allocation as not xstream's (plain: the last keep-alive reference no longer
    /// calls `cuMemFree`; stream-ordered: the drop no longer enqueues `cuMemFreeAsync`, and
    /// the streams tracked as users are forgotten). An adopted cudarc slice or an imported
    /// interprocess buffer is neither freed nor closed: its owner's release (cudarc's, or
    /// `cuIpcCloseMemHandle`) is the caller's, and the cudarc handles it held are leaked.
    fn into_raw_impl(self) -> RawBuffer {
        let ordinal = self.dev().shared.info.ordinal;
        match self.mem {
            Mem::Plain(a) => {
                a.leaked.store(true, Ordering::Release);
                RawBuffer::new(BackendKind::Cuda, ordinal, a.ptr, a.len)
            }
            Mem::Ordered(mut o) => {
                o.freed = true;
                RawBuffer::new(BackendKind::Cuda, ordinal, o.ptr, o.len)
                    .with_alloc(RawAlloc::StreamOrdered)
            }
        }
    }

    /// `cuMemGetAddressRange` checks that `raw.address` starts a live allocation holding
    /// `raw.len` bytes. [`RawAlloc::Plain`] is freed with `cuMemFree` when the last work
    /// using it completed; [`RawAlloc::StreamOrdered`] with `cuMemFreeAsync` on the device's
    /// internal stream, after every stream that used it since (no host wait). Whether the
    /// memory really came from the allocator `raw.alloc` names is not checked.
    ///
    /// # Errors
    /// As [`Buffer::from_raw`]; [`Error::InvalidArgument`] when the driver knows no
    /// allocation at `raw.address`, when it is not the allocation's start, or when `raw.len`
    /// runs past its end.
    #[allow(unsafe_code)]
    unsafe fn from_raw_impl(device: &CudaDevice, raw: RawBuffer) -> Result<Self> {
        check_extent(device, &raw, true)?;
        let mem = match raw.alloc {
            RawAlloc::Plain => Mem::Plain(Arc::new(Alloc::new(device, raw.address, raw.len))),
            RawAlloc::StreamOrdered => Mem::Ordered(
                Ordered {
                    ptr: raw.address,
                    len: raw.len,
                    owner: Arc::new(StreamHandle::new(
                        device.shared.sentinel,
                        false,
                        device.clone(),
                    )),
                    users: UseSet::new(0),
                    freed: false,
                }
                .keyed(),
            ),
        };
        Ok(CudaBuffer { mem })
    }

    /// `cuMemGetAddressRange` checks that `raw.address .. + raw.len` lies in one live
    /// allocation (any offset in it); a zero address is taken for a zero length. Never
    /// freed.
    ///
    /// # Errors
    /// As [`Buffer::from_raw_borrowed`]; [`Error::InvalidArgument`] when the driver knows no
    /// allocation at `raw.address` or `raw.len` runs past its end.
    #[allow(unsafe_code)]
    unsafe fn from_raw_borrowed_impl(device: &CudaDevice, raw: RawBuffer) -> Result<Self> {
        check_extent(device, &raw, false)?;
        let a = Alloc::new(device, raw.address, raw.len);
        a.leaked.store(true, Ordering::Release);
        Ok(CudaBuffer {
            mem: Mem::Plain(Arc::new(a)),
        })
    }
}

impl CudaBuffer {
    /// A buffer of `len` mapped bytes of a virtual range at `address`
    /// ([`xstream_core::VirtualRange::buffer`]): no `cuMemFree`; `keep` (the mappings under
    /// it) is dropped where the memory would be freed, after the work using the buffer.
    pub(crate) fn mapped(
        dev: &CudaDevice,
        address: u64,
        len: usize,
        keep: Arc<dyn std::any::Any + Send + Sync>,
    ) -> Self {
        let mut a = Alloc::new(dev, address, len);
        a.foreign = Some(Box::new(keep));
        CudaBuffer {
            mem: Mem::Plain(Arc::new(a)),
        }
    }
}

/// What only CUDA can check of `from_raw` (`owned`) and `from_raw_borrowed` (the checked
/// layer has checked the descriptor's fields): the driver's allocation range.
fn check_extent(device: &CudaDevice, raw: &RawBuffer, owned: bool) -> Result<()> {
    let sh = &device.shared;
    if raw.address == 0 {
        return Ok(());
    }
    let op = if owned {
        "from_raw"
    } else {
        "from_raw_borrowed"
    };
    sh.bind()?;
    let (base, size) = ffi::mem_get_address_range(raw.address).map_err(|code| {
        Error::invalid(format!(
            "{op}: {:#x} is in no live allocation of CUDA device {} (cuMemGetAddressRange: \
             CUresult {code})",
            raw.address, sh.info.ordinal
        ))
    })?;
    if owned && base != raw.address {
        return Err(Error::invalid(format!(
            "{op}: {:#x} is {} bytes into the allocation at {base:#x}; only an allocation's \
             start can be owned",
            raw.address,
            raw.address - base
        )));
    }
    let end = base.saturating_add(size as u64);
    if raw.address + raw.len as u64 > end {
        return Err(Error::invalid(format!(
            "{op}: {} bytes at {:#x} run past the end of the {size}-byte allocation at {base:#x}",
            raw.len, raw.address
        )));
    }
    Ok(())
}

/// `cuMemAllocAsync` on `stream` (the device's current pool): a stream-ordered buffer.
pub(crate) fn alloc_ordered(stream: &CudaStream, len: usize) -> Result<CudaBuffer> {
    let dev = stream.cuda_device();
    let sh = &dev.shared;
    sh.bind()?;
    if sh.default_pool.is_none() {
        return Err(Error::unsupported(
            BackendKind::Cuda,
            "stream-ordered allocation (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 0)",
        ));
    }
    let ptr = sh.check(
        "cuMemAllocAsync",
        ffi::mem_alloc_async(rounded(len)?, stream.handle.raw()),
    )?;
    Ok(CudaBuffer {
        mem: Mem::Ordered(Ordered {
            ptr,
            len,
            owner: Arc::clone(&stream.handle),
            users: UseSet::new(handle_key(&stream.handle)),
            freed: false,
        }),
    })
}

/// `cuMemFreeAsync` of a stream-ordered buffer on `stream` (after its other users); a plain
/// buffer is dropped under its keep-alive rule, after `stream` was made to wait for the
/// streams marked with `record_use`.
pub(crate) fn free_ordered(stream: &CudaStream, mut buf: CudaBuffer) -> Result<()> {
    match &mut buf.mem {
        Mem::Plain(a) => {
            let marked = a.marked.take();
            if marked.is_empty() {
                return Ok(());
            }
            let sh = &a.dev.shared;
            sh.bind()?;
            sh.events
                .order_after(sh, stream.handle.raw(), marked.iter().map(|(_, h)| h.raw()))
        }
        Mem::Ordered(o) => o.free_on(stream.handle.raw()),
    }
}

/// `Stream::record_use`: `stream` (its work so far) uses `buf` unseen by xstream.
pub(crate) fn record_use(stream: &CudaStream, buf: &CudaBuffer) -> Result<()> {
    match &buf.mem {
        Mem::Plain(a) => {
            a.marked
                .note(handle_key(&stream.handle), || Arc::clone(&stream.handle));
            // The keep-alive list holds the memory until the marked work is known complete.
            stream.keep(Keep::Buffer(Arc::clone(a)));
        }
        Mem::Ordered(o) => o.note_use(&stream.handle),
    }
    Ok(())
}

/// See [`CudaDevice::set_pool_release_threshold`].
pub(crate) fn set_pool_release_threshold(dev: &CudaDevice, bytes: u64) -> Result<()> {
    let sh = &dev.shared;
    sh.enter()?;
    let Some(pool) = sh.default_pool else {
        return Err(Error::unsupported(
            BackendKind::Cuda,
            "stream-ordered allocation",
        ));
    };
    sh.check(
        "cuMemPoolSetAttribute",
        ffi::mem_pool_set_release_threshold(pool, bytes),
    )
}

/// The size xstream asks the driver for: `len` rounded up to the allocation granule; one
/// granule for a zero-length buffer (the driver refuses 0 bytes, and the address stays
/// valid and unique).
fn rounded(len: usize) -> Result<usize> {
    alloc_size(len.max(1)).ok_or_else(|| Error::OutOfMemory {
        backend: BackendKind::Cuda,
        detail: format!("{len} bytes is more than any address space holds"),
    })
}

/// `cuMemAlloc` of `len` rounded up to the granule: the buffer and the allocated size.
fn plain(dev: &CudaDevice, len: usize) -> Result<(CudaBuffer, usize)> {
    let size = rounded(len)?;
    let sh = &dev.shared;
    sh.bind()?;
    let ptr = sh.check("cuMemAlloc", ffi::mem_alloc(size))?;
    let buf = CudaBuffer {
        mem: Mem::Plain(Arc::new(Alloc::new(dev, ptr, len))),
    };
    Ok((buf, size))
}

/// `Device::alloc_uninit`: `cuMemAlloc` alone (no zeroing, no host wait).
pub(crate) fn alloc_uninit(dev: &CudaDevice, len: usize) -> Result<CudaBuffer> {
    plain(dev, len).map(|(b, _)| b)
}

/// `Device::alloc_zeroed_on`: `cuMemAlloc`, then the whole block zeroed on `stream`.
pub(crate) fn alloc_zeroed_on(
    dev: &CudaDevice,
    stream: &CudaStream,
    len: usize,
) -> Result<CudaBuffer> {
    if stream.cuda_device().shared.raw_ctx != dev.shared.raw_ctx {
        return Err(Error::WrongDevice(
            "alloc_zeroed_on: the stream belongs to another CUDA context".into(),
        ));
    }
    let (buf, size) = plain(dev, len)?;
    stream.memset_whole(&buf, size)?;
    Ok(buf)
}

pub(crate) fn alloc(dev: &CudaDevice, len: usize) -> Result<CudaBuffer> {
    let (buf, size) = plain(dev, len)?;
    let (sh, ptr) = (&dev.shared, buf.ptr());
    // Zero on the internal stream and wait: `cuMemsetD8` (sync) would run on the legacy stream
    // and could race with work on NON_BLOCKING streams. The whole block, slack included, so
    // a library's word-wise read past `len` sees defined bytes.
    let _g = lock(&sh.sentinel_lock);
    sh.check(
        "cuMemsetD8Async",
        ffi::memset_d8_async(ptr, 0, size, sh.sentinel),
    )?;
    sh.check("cuStreamSynchronize", ffi::stream_synchronize(sh.sentinel))?;
    Ok(buf)
}

/// Managed (unified) memory from `cuMemAllocManaged`, for
/// [`CudaStream::attach_mem_async`]. Freed on drop (the caller orders that after its work).
pub struct CudaManagedBuffer {
    alloc: Arc<Alloc>,
}

impl fmt::Debug for CudaManagedBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaManagedBuffer")
            .field("ptr", &format_args!("{:#x}", self.alloc.ptr))
            .field("len", &self.alloc.len)
            .finish()
    }
}

impl CudaManagedBuffer {
    /// The unified address (valid on host and device).
    pub fn ptr(&self) -> u64 {
        self.alloc.ptr
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.alloc.len
    }
    /// Whether it is empty (never).
    pub fn is_empty(&self) -> bool {
        self.alloc.len == 0
    }
}

pub(crate) fn alloc_managed(dev: &CudaDevice, len: usize) -> Result<CudaManagedBuffer> {
    if len == 0 {
        return Err(Error::invalid("a buffer needs at least one byte"));
    }
    let sh = &dev.shared;
    sh.enter()?;
    if !sh.managed_memory {
        return Err(Error::unsupported(
            BackendKind::Cuda,
            "managed memory on this device",
        ));
    }
    // CU_MEM_ATTACH_GLOBAL = 1.
    let ptr = sh.check(
        "cuMemAllocManaged",
        ffi::mem_alloc_managed(rounded(len)?, 0x1),
    )?;
    Ok(CudaManagedBuffer {
        alloc: Arc::new(Alloc::new(dev, ptr, len)),
    })
}

/// A stream-ordered allocator (`cuMemAllocFromPoolAsync` / `cuMemFreeAsync` on one stream,
/// from the device's default pool `cuDeviceGetDefaultMemPool`). Register it on the stream with
/// [`xstream_core::Stream::set_allocator`]. A block is usable by work enqueued on that stream
/// after the allocation; `free` is ordered after the work enqueued before it.
pub struct CudaAsyncAllocator {
    dev: CudaDevice,
    stream: Arc<StreamHandle>,
    pool: ffi::CuMemPool,
    live: Mutex<std::collections::HashSet<u64>>,
}

impl fmt::Debug for CudaAsyncAllocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaAsyncAllocator")
            .field("stream", &self.stream.raw())
            .field("live", &self.live_blocks())
            .finish()
    }
}

impl CudaAsyncAllocator {
    pub(crate) fn new(dev: &CudaDevice, stream: &CudaStream) -> Result<Arc<Self>> {
        dev.shared.enter()?;
        let Some(pool) = dev.shared.default_pool else {
            return Err(Error::unsupported(
                BackendKind::Cuda,
                "stream-ordered allocation (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 0)",
            ));
        };
        Ok(Arc::new(Self {
            dev: dev.clone(),
            stream: Arc::clone(&stream.handle),
            pool,
            live: Mutex::new(Default::default()),
        }))
    }

    fn raw_stream(&self) -> CuStream {
        self.stream.raw()
    }

    /// Blocks allocated and not yet freed.
    pub fn live_blocks(&self) -> usize {
        lock(&self.live).len()
    }
}

impl Allocator for CudaAsyncAllocator {
    fn alloc(&self, size: usize) -> Option<Block> {
        self.dev.shared.enter().ok()?;
        // Rounded up to the allocation granule like every other xstream allocation.
        let size = alloc_size(size.max(1))?;
        match ffi::mem_alloc_from_pool_async(size, self.pool, self.raw_stream()) {
            Ok(p) => {
                lock(&self.live).insert(p);
                Some(Block(p))
            }
            Err(c) => {
                let e = self.dev.shared.fail("cuMemAllocFromPoolAsync", c);
                tracing::debug!(error = %e, "stream-ordered allocation failed");
                None
            }
        }
    }

    fn free(&self, block: Block) {
        if !self
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&block.0)
        {
            tracing::warn!(
                block = block.0,
                "free of a block this allocator does not own"
            );
            return;
        }
        free_blocks_dispatched(&self.stream, vec![block.0]);
    }

    fn address(&self, block: Block) -> u64 {
        block.0
    }
}

impl Drop for CudaAsyncAllocator {
    fn drop(&mut self) {
        let live = std::mem::take(&mut *lock(&self.live));
        if !live.is_empty() {
            free_blocks_dispatched(&self.stream, live.into_iter().collect());
        }
    }
}

/// `cuMemFreeAsync` of an allocator's `blocks` on its stream `on`: now, or, inside a host
/// callback (no driver call permitted there), on the dispatcher, holding the stream handle
/// (and through it the device and its context) until the frees ran. The clone is made only
/// on that path.
fn free_blocks_dispatched(on: &Arc<StreamHandle>, blocks: Vec<u64>) {
    if in_callback() {
        let on = Arc::clone(on);
        crate::stream::dispatch_driver_job(move || free_blocks(&on, blocks));
    } else {
        free_blocks(on, blocks);
    }
}

/// `cuMemFreeAsync` of `blocks` on `on` (a failure is logged; a sticky one poisons the device).
fn free_blocks(on: &StreamHandle, blocks: Vec<u64>) {
    let sh = &on.device().shared;
    if sh.sticky_error().is_some() || sh.bind().is_err() {
        return;
    }
    for p in blocks {
        // SAFETY: a block its allocator made from its pool and handed back once (removed from
        // `live` once), or that it still held at its drop (no caller of it can enqueue work on
        // it any more); the `Allocator` contract makes the caller order every other stream's
        // use of a block before handing it back, and the allocator's stream orders the rest.
        #[allow(unsafe_code)]
        let r = unsafe { ffi::mem_free_async(p, on.raw()) };
        if let Err(c) = r {
            let e = sh.fail("cuMemFreeAsync", c);
            tracing::debug!(error = %e, "stream-ordered free of an allocator's block failed");
        }
    }
}

/// Allocates `len` bytes with `cuMemAllocAsync` from the device's current pool on `stream`
/// and returns the raw device address (for callers that want stream-ordered memory without
/// an allocator object or a buffer type; [`xstream_core::Stream::alloc_async`] gives a
/// buffer). The driver is asked for `len` rounded up to [`xstream_core::ALLOC_GRANULE`].
/// Free it with [`free_async_raw`].
///
/// # Errors
/// [`Error::Unsupported`] without memory pools; out of memory
/// ([`Error::is_out_of_memory`]: `CUDA_ERROR_OUT_OF_MEMORY` kept in [`Error::Native`]).
pub fn alloc_async_raw(stream: &CudaStream, len: usize) -> Result<u64> {
    let len = rounded(len)?;
    let sh = &stream.cuda_device().shared;
    sh.enter()?;
    if sh.default_pool.is_none() {
        return Err(Error::unsupported(
            BackendKind::Cuda,
            "stream-ordered allocation",
        ));
    }
    sh.check(
        "cuMemAllocAsync",
        ffi::mem_alloc_async(len, stream.handle.raw()),
    )
}

/// Frees memory from [`alloc_async_raw`] with `cuMemFreeAsync` on `stream`.
///
/// # Safety
/// `ptr` came from [`alloc_async_raw`] on this device and was not freed before, and every use of
/// it by work on other streams is ordered before this call on `stream` (an event recorded
/// after that work and waited on `stream`): the driver orders the free after `stream`'s own
/// work only, and memory freed under pending work may be handed out again.
///
/// # Errors
/// Vendor errors.
#[allow(unsafe_code)]
pub unsafe fn free_async_raw(stream: &CudaStream, ptr: u64) -> Result<()> {
    let sh = &stream.cuda_device().shared;
    sh.enter()?;
    // SAFETY: the caller's contract above; `stream` is alive (borrowed).
    let r = unsafe { ffi::mem_free_async(ptr, stream.handle.raw()) };
    sh.check("cuMemFreeAsync", r)
}

/// Renamed [`alloc_async_raw`] (the stream method of this name gives a buffer).
///
/// # Errors
/// As [`alloc_async_raw`].
#[deprecated(since = "0.2.0", note = "renamed `alloc_async_raw`")]
pub fn alloc_async(stream: &CudaStream, len: usize) -> Result<u64> {
    alloc_async_raw(stream, len)
}

/// Renamed [`free_async_raw`], now `unsafe`: freeing an address the caller did not allocate,
/// twice, or under pending work is undefined behaviour, which a safe function must not allow.
///
/// # Safety
/// As [`free_async_raw`].
///
/// # Errors
/// As [`free_async_raw`].
#[allow(unsafe_code)]
#[deprecated(since = "0.2.0", note = "renamed `free_async_raw`")]
pub unsafe fn free_async(stream: &CudaStream, ptr: u64) -> Result<()> {
    // SAFETY: the caller keeps `free_async_raw`'s contract.
    unsafe { free_async_raw(stream, ptr) }
}
