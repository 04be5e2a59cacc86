//! Page-locked ("pinned") host memory bound to a device, and the host side of asynchronous
//! copies. "Pinned" names this memory on every backend; `Host` in a type name is the host
//! backend (`docs/design.md`, "Names").
//!
//! A [`PinnedBuffer`] is host memory that a device's copy engines can read and write directly:
//! CUDA `cuMemHostAlloc` / `cuMemHostRegister`, ACL `aclrtMallocHost`, and on the host backend
//! an aligned heap block. Copies between it and device buffers are single native asynchronous
//! copies ([`Stream::copy_to_device`], [`Stream::copy_to_host`]), with no staging and no heap
//! allocation per copy.
//!
//! # Safety model
//! - **Lifetime.** The allocation lives in an `Arc`; every copy hands a clone (a [`PinnedSpan`])
//!   to the backend, which keeps it until the copy has completed (the same keep-alive rule as
//!   device buffers). Dropping a `PinnedBuffer` never frees memory a queued copy still uses.
//! - **Host access.** Each buffer carries a *fence*: an event that covers every copy that
//!   used it. [`PinnedBuffer::as_slice`] and [`PinnedBuffer::as_mut_slice`] wait for that
//!   event first, so the host never reads bytes a copy is still writing, nor writes bytes a
//!   copy is still reading. A copy into the buffer ([`Stream::copy_to_host`]) takes it by
//!   `&mut`, so no slice of it can be alive while the copy is enqueued.
//! - **When the fence is recorded.** Where the stream's backend gives a [`FenceAnchor`]
//!   ([`StreamImpl::fence_anchor_impl`]; CUDA), copies on the stream of the buffer's last use
//!   make no record: the event is recorded behind them through the anchor by the first host
//!   access ([`PinnedBuffer::wait_idle`] and the slices and views that call it) or the first
//!   copy on another stream, so N copies on one stream cost one record, not N. Elsewhere it is
//!   recorded behind every copy. A buffer dropped with an unrecorded fence records nothing
//!   and does not wait: its memory stays alive through the copies' spans (`Lifetime`).
//! - **Several streams.** A copy on another stream than the buffer's last one first makes its
//!   stream wait on the fence (recorded first if copies are pending), so uses of one buffer
//!   are ordered.
//!
//! Page-locked copies are refused during capture on every backend for now (the fence would be
//! recorded into the graph instead of executed); the pageable path
//! ([`Stream::write`]) keeps its own rules.
#![allow(unsafe_code)]

use crate::sync::lock;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::{
    Backend, BackendKind, Device, DeviceOf, Error, Event, EventDesc, EventFlags, EventOf,
    FenceAnchor, FlagReport, Result, Stream, StreamImpl, TranslationPolicy,
};

bitflags::bitflags! {
    /// Portable flags of page-locked host allocations (CUDA `CU_MEMHOSTALLOC_*`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct PinnedFlags: u32 {
        /// Page-locked for every context/device of the backend, not only the one it was
        /// allocated for (CUDA `CU_MEMHOSTALLOC_PORTABLE`).
        const PORTABLE = 1 << 0;
        /// Mapped into the device's address space (CUDA `CU_MEMHOSTALLOC_DEVICEMAP`).
        const DEVICE_MAPPED = 1 << 1;
        /// Write-combined: fast for the host to write and the device to read, very slow for
        /// the host to read (CUDA `CU_MEMHOSTALLOC_WRITECOMBINED`).
        const WRITE_COMBINED = 1 << 2;
    }
}

impl PinnedFlags {
    /// The name of a single flag, as in `docs/coverage.md`.
    pub fn name(self) -> &'static str {
        match self {
            f if f == Self::PORTABLE => "PORTABLE",
            f if f == Self::DEVICE_MAPPED => "DEVICE_MAPPED",
            f if f == Self::WRITE_COMBINED => "WRITE_COMBINED",
            _ => "(several flags)",
        }
    }
}

/// One row of a backend's host-memory flag table.
#[derive(Debug, Clone, Copy)]
pub struct PinnedFlagRow {
    /// The portable flag.
    pub flag: PinnedFlags,
    /// The native bit, or `None` when the backend cannot honour the flag.
    pub native: Option<u32>,
    /// Why the flag has no native bit (shown in errors and reports).
    pub reason: &'static str,
}

impl PinnedFlagRow {
    /// A flag the backend honours with the native bit(s) `bits`.
    pub const fn native(flag: PinnedFlags, bits: u32) -> Self {
        let reason = "";
        Self {
            flag,
            native: Some(bits),
            reason,
        }
    }

    /// A flag the backend cannot honour; `reason` says why.
    pub const fn unsupported(flag: PinnedFlags, reason: &'static str) -> Self {
        Self {
            flag,
            native: None,
            reason,
        }
    }
}

/// Translates host-memory flags through a backend's table under `policy`.
///
/// Returns the native bits, the effective portable flags and the report.
///
/// # Errors
/// [`Error::UnsupportedFlag`] under [`TranslationPolicy::Strict`] for a flag without a
/// native bit.
pub fn translate_pinned_flags(
    backend: BackendKind,
    table: &[PinnedFlagRow],
    flags: PinnedFlags,
    policy: TranslationPolicy,
) -> Result<(u32, PinnedFlags, FlagReport)> {
    let mut native = 0u32;
    let mut effective = PinnedFlags::empty();
    let mut report = FlagReport::default();
    for f in flags.iter() {
        let row = table.iter().find(|r| r.flag == f);
        match row.and_then(|r| r.native.map(|n| (r, n))) {
            Some((_, bits)) => {
                native |= bits;
                effective |= f;
                report.native.push(f.name());
            }
            None => {
                let reason = row.map_or("not in the backend's table", |r| r.reason);
                if policy == TranslationPolicy::Strict {
                    return Err(Error::UnsupportedFlag {
                        backend,
                        flag: f.name(),
                        reason,
                    });
                }
                report.dropped.push((f.name(), reason));
            }
        }
    }
    Ok((native, effective, report))
}

/// How to allocate a [`PinnedBuffer`].
#[derive(Debug, Clone, Copy, Default)]
pub struct PinnedAllocDesc {
    /// Portable flags.
    pub flags: PinnedFlags,
    /// What to do with flags the backend cannot honour.
    pub policy: TranslationPolicy,
}

impl PinnedAllocDesc {
    /// No flags, strict policy.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the flags.
    pub fn flags(mut self, flags: PinnedFlags) -> Self {
        self.flags = flags;
        self
    }
    /// Sets the policy.
    pub fn policy(mut self, p: TranslationPolicy) -> Self {
        self.policy = p;
        self
    }
}

/// A backend's host allocation (page-locked where the backend has such memory). Its `Drop`
/// releases the memory.
///
/// # Safety
/// [`as_ptr`](PinnedAllocation::as_ptr) must return the same non-null pointer for the whole
/// life of the value, valid for reads and writes of [`len`](PinnedAllocation::len) bytes, and
/// not used by anything else than xstream while the value lives.
pub unsafe trait PinnedAllocation: Send + Sync + fmt::Debug + 'static {
    /// The first byte.
    fn as_ptr(&self) -> *mut u8;
    /// Its length in bytes (at least one).
    fn len(&self) -> usize;
    /// Whether it is empty (never).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether the memory is page-locked (directly usable by the copy engines).
    fn page_locked(&self) -> bool;
    /// The device ordinal it is bound to.
    fn ordinal(&self) -> usize;
    /// Gives up, once no copy uses it any more, what the allocation holds of a vendor:
    /// a registration of borrowed memory ([`Device::with_registered_host`]) unregisters here,
    /// before the borrow ends (its drop does it too when this was not called). Called at most
    /// once; allocations that own their memory do nothing (the default).
    fn release(&self) {}
}

/// The host backend's allocation, and the model of page-locked memory where there is no
/// vendor: a zero-initialised, page-aligned heap block.
#[derive(Debug)]
pub struct AlignedAlloc {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
    ordinal: usize,
}

// SAFETY: the block is plain bytes owned by this value; access is synchronised by the
// PinnedBuffer fence.
unsafe impl Send for AlignedAlloc {}
// SAFETY: as above.
unsafe impl Sync for AlignedAlloc {}

/// The alignment of [`AlignedAlloc`] blocks (one page).
pub const PINNED_ALIGN: usize = 4096;

impl AlignedAlloc {
    /// Allocates `len` zeroed bytes aligned to [`PINNED_ALIGN`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `len == 0` or a size that overflows;
    /// [`Error::OutOfMemory`] when the heap refuses.
    pub fn new(backend: BackendKind, ordinal: usize, len: usize) -> Result<Self> {
        if len == 0 {
            return Err(Error::invalid("a host buffer needs at least one byte"));
        }
        let layout = std::alloc::Layout::from_size_align(len, PINNED_ALIGN)
            .map_err(|e| Error::invalid(format!("host buffer of {len} bytes: {e}")))?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(p).ok_or_else(|| Error::OutOfMemory {
            backend,
            detail: format!("{len}-byte host buffer"),
        })?;
        Ok(Self {
            ptr,
            layout,
            ordinal,
        })
    }
}

impl Drop for AlignedAlloc {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

// SAFETY: the pointer is fixed for the value's life and valid for `layout.size()` bytes.
unsafe impl PinnedAllocation for AlignedAlloc {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    fn len(&self) -> usize {
        self.layout.size()
    }
    fn page_locked(&self) -> bool {
        true
    }
    fn ordinal(&self) -> usize {
        self.ordinal
    }
}

/// The host backend's registration of borrowed memory, and the model of one where there is no
/// vendor: the caller's bytes as they are; nothing to page-lock or unregister.
#[derive(Debug)]
pub struct BorrowedPinnedRange {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    ordinal: usize,
}

// SAFETY: plain bytes the registration scope borrows exclusively; access is synchronised by
// the PinnedBuffer fence.
unsafe impl Send for BorrowedPinnedRange {}
// SAFETY: as above.
unsafe impl Sync for BorrowedPinnedRange {}

impl BorrowedPinnedRange {
    /// Wraps `len > 0` bytes at `ptr`.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes, used by nothing else, until the
    /// registration scope that made this value ended.
    pub unsafe fn new(ptr: *mut u8, len: usize, ordinal: usize) -> Result<Self> {
        let ptr = std::ptr::NonNull::new(ptr)
            .ok_or_else(|| Error::invalid("cannot register a null host address"))?;
        if len == 0 {
            return Err(Error::invalid("cannot register an empty host range"));
        }
        Ok(Self { ptr, len, ordinal })
    }
}

// SAFETY: the pointer is fixed for the value's life and valid for `len` bytes while the
// registration scope lasts (the contract of `new`).
unsafe impl PinnedAllocation for BorrowedPinnedRange {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    fn len(&self) -> usize {
        self.len
    }
    fn page_locked(&self) -> bool {
        true
    }
    fn ordinal(&self) -> usize {
        self.ordinal
    }
}

/// The caller's memory, page-locked in place for the scope of
/// [`Device::with_registered_host`]: asynchronous copies to and from device buffers with no
/// staging and no host wait ([`PinnedRegistration::upload`], [`PinnedRegistration::download`]). It
/// borrows the caller's slice exclusively for the scope (`'s`), and the scope does not end
/// before every copy that used it has completed and the memory is unregistered, so no copy
/// can outlive the borrow.
pub struct PinnedRegistration<'s, B: Backend> {
    buf: Mutex<PinnedBuffer<B>>,
    _borrow: std::marker::PhantomData<&'s mut [u8]>,
}

impl<B: Backend> fmt::Debug for PinnedRegistration<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedRegistration")
            .field("backend", &B::KIND)
            .field("len", &self.len())
            .finish()
    }
}

impl<B: Backend> PinnedRegistration<'_, B> {
    fn lock_buf(&self) -> MutexGuard<'_, PinnedBuffer<B>> {
        lock(&self.buf)
    }

    /// Its length in bytes (the registered slice's).
    pub fn len(&self) -> usize {
        self.lock_buf().len()
    }

    /// Whether it is empty (a zero-length slice: every copy of it is a no-op).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Enqueues an asynchronous copy of the view's length from `offset` (bytes) of the
    /// registered memory into `dst`, on `stream`: returns without waiting for the stream's
    /// earlier work (one native asynchronous copy; as [`Stream::write_from_host`]).
    ///
    /// # Errors
    /// As [`Stream::write_from_host`].
    pub fn upload<'v>(
        &self,
        stream: &B::Stream,
        offset: usize,
        dst: impl Into<crate::BufferView<'v, crate::BufferOf<B>>>,
    ) -> Result<()> {
        let v = dst.into();
        crate::Stream::copy_to_device(
            stream,
            &self.lock_buf(),
            offset,
            v.buffer(),
            v.offset(),
            v.len(),
        )
    }

    /// Enqueues an asynchronous copy of `src` into the registered memory at `offset` (bytes),
    /// on `stream`; the bytes are in the caller's slice once the scope has ended.
    ///
    /// # Errors
    /// As [`Stream::read_into_host`].
    pub fn download<'v>(
        &self,
        stream: &B::Stream,
        src: impl Into<crate::BufferView<'v, crate::BufferOf<B>>>,
        offset: usize,
    ) -> Result<()> {
        let v = src.into();
        crate::Stream::copy_to_host(
            stream,
            v.buffer(),
            v.offset(),
            &mut self.lock_buf(),
            offset,
            v.len(),
        )
    }
}

/// Ends a registration scope: waits for every copy that used the memory, then unregisters it.
/// Runs on the way out of the scope, also when the caller's closure panics.
struct ScopeEnd<'a, B: Backend> {
    reg: &'a PinnedRegistration<'a, B>,
    mem: Option<Arc<dyn PinnedAllocation>>,
}

impl<B: Backend> ScopeEnd<'_, B> {
    fn finish(&mut self) -> Result<()> {
        let Some(mem) = self.mem.take() else {
            return Ok(());
        };
        let waited = self.reg.lock_buf().wait_idle();
        if waited.is_err() {
            // The fence could not be waited for (a device error): wait for the whole device
            // before the memory goes back to its owner, so no copy can still touch it.
            let dev = self.reg.lock_buf().device().clone();
            let _ = dev.synchronize();
        }
        mem.release();
        waited
    }
}

impl<B: Backend> Drop for ScopeEnd<'_, B> {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            tracing::warn!(error = %e, "ending a host registration scope: the wait for its copies failed");
        }
    }
}

/// [`Device::with_registered_host`].
pub(crate) fn with_registered<B: Backend, T: bytemuck::Pod, R>(
    device: &DeviceOf<B>,
    data: &mut [T],
    f: impl FnOnce(&PinnedRegistration<'_, B>) -> R,
) -> Result<R> {
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(data);
    let (mem, buf) = if bytes.is_empty() {
        let b = PinnedBuffer::empty(device, PinnedFlags::empty(), FlagReport::default())?;
        (None, b)
    } else {
        // SAFETY: `bytes` is borrowed exclusively for this call, and the scope below does not
        // return before every copy that used it completed and the range was released.
        let mem = unsafe {
            crate::DeviceImpl::register_host_range_impl(device, bytes.as_mut_ptr(), bytes.len())
        }?;
        let b = PinnedBuffer::from_allocation(
            device,
            Arc::clone(&mem),
            PinnedFlags::empty(),
            FlagReport::default(),
        );
        (Some(mem), b)
    };
    let reg = PinnedRegistration {
        buf: Mutex::new(buf),
        _borrow: std::marker::PhantomData,
    };
    let mut end = ScopeEnd { reg: &reg, mem };
    let r = f(&reg);
    end.finish()?;
    Ok(r)
}

/// A range of a [`PinnedBuffer`] handed to a backend for one copy. It keeps the allocation
/// alive; backends hold it (or its clone) until the copy completed. Only this module makes
/// them, from a live `PinnedBuffer` whose fence covers the copy.
#[derive(Debug, Clone)]
pub struct PinnedSpan {
    mem: Arc<dyn PinnedAllocation>,
    offset: usize,
    len: usize,
}

impl PinnedSpan {
    /// The first byte of the range (for the vendor's copy call).
    pub fn as_ptr(&self) -> *mut u8 {
        self.mem.as_ptr().wrapping_add(self.offset)
    }
    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Whether the memory is page-locked.
    pub fn page_locked(&self) -> bool {
        self.mem.page_locked()
    }
    /// Copies the range into `dst` (the host backend's copy engine). `dst.len()` must equal
    /// the span's length.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] on a length mismatch.
    pub fn read_into_blocking(&self, dst: &mut [u8]) -> Result<()> {
        if dst.len() != self.len {
            return Err(Error::invalid("host span length mismatch"));
        }
        // SAFETY: offset+len is inside the allocation (checked when the span was made); the
        // fence keeps host code off the bytes while the copy is queued; `dst` is another
        // object (a device buffer's storage).
        unsafe { std::ptr::copy_nonoverlapping(self.as_ptr(), dst.as_mut_ptr(), self.len) };
        Ok(())
    }
    /// Copies `src` into the range. `src.len()` must equal the span's length.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] on a length mismatch.
    pub fn write_from_blocking(&self, src: &[u8]) -> Result<()> {
        if src.len() != self.len {
            return Err(Error::invalid("host span length mismatch"));
        }
        // SAFETY: as in `read_into_blocking`; the buffer was borrowed mutably to enqueue this copy.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.as_ptr(), self.len) };
        Ok(())
    }
}

/// A buffer's fence: the event, the stream of its last use and, where that stream's backend
/// gives a [`FenceAnchor`], whether copies were enqueued there since the event was last
/// recorded (the record then waits for the first host access or use on another stream).
struct Fence<B: Backend> {
    event: Option<EventOf<B>>,
    /// The stream of the last use (its id), 0 when none.
    stream: u64,
    /// The last use's stream, to record `event` on later; `None`: recorded behind every copy.
    anchor: Option<Arc<dyn FenceAnchor<B>>>,
    /// Copies were enqueued through `anchor`'s stream after the last record of `event`.
    pending: bool,
}

impl<B: Backend> Fence<B> {
    /// Records the event behind the copies enqueued since its last record, if any.
    fn settle(&mut self) -> Result<()> {
        if self.pending {
            if let (Some(anchor), Some(ev)) = (&self.anchor, &self.event) {
                anchor.record(ev)?;
            }
            self.pending = false;
        }
        Ok(())
    }
}

/// Page-locked ("pinned") host memory bound to a device of backend `B`. See the module docs.
pub struct PinnedBuffer<B: Backend> {
    mem: Arc<dyn PinnedAllocation>,
    /// The length users see: the allocation's, or 0 for [`PinnedBuffer::empty`].
    len: usize,
    device: DeviceOf<B>,
    flags: PinnedFlags,
    report: FlagReport,
    fence: Mutex<Fence<B>>,
}

impl<B: Backend> fmt::Debug for PinnedBuffer<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("backend", &B::KIND)
            .field("ptr", &self.mem.as_ptr())
            .field("len", &self.len)
            .field("flags", &self.flags)
            .field("page_locked", &self.mem.page_locked())
            .finish()
    }
}

impl<B: Backend> PinnedBuffer<B> {
    /// Wraps a backend allocation (backend side of [`Device::alloc_pinned`]).
    pub fn from_allocation(
        device: &DeviceOf<B>,
        mem: Arc<dyn PinnedAllocation>,
        flags: PinnedFlags,
        report: FlagReport,
    ) -> Self {
        Self {
            len: mem.len(),
            mem,
            device: device.clone(),
            flags,
            report,
            fence: Mutex::new(Fence {
                event: None,
                stream: 0,
                anchor: None,
                pending: false,
            }),
        }
    }

    /// A zero-length buffer bound to `device`: what [`Device::alloc_pinned`] gives for
    /// `len == 0` on every backend (a zero-length request is a no-op, as everywhere else). It
    /// holds no vendor memory (one heap byte keeps its address unique and non-null); every
    /// copy of it is a zero-length no-op.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when the heap refuses the one byte.
    pub fn empty(device: &DeviceOf<B>, flags: PinnedFlags, report: FlagReport) -> Result<Self> {
        let mem = AlignedAlloc::new(B::KIND, device.info().ordinal, 1)?;
        let mut b = Self::from_allocation(device, Arc::new(mem), flags, report);
        b.len = 0;
        Ok(b)
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it is empty (only a buffer of [`PinnedBuffer::empty`], what every backend's
    /// `alloc_pinned(0)` gives).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The device it is bound to.
    pub fn device(&self) -> &DeviceOf<B> {
        &self.device
    }
    /// The effective flags.
    pub fn flags(&self) -> PinnedFlags {
        self.flags
    }
    /// What allocation did with the requested flags.
    pub fn report(&self) -> &FlagReport {
        &self.report
    }
    /// Whether the memory is page-locked.
    pub fn is_page_locked(&self) -> bool {
        self.mem.page_locked()
    }
    /// The host address of the first byte.
    pub fn as_ptr(&self) -> *const u8 {
        self.mem.as_ptr()
    }

    fn lock(&self) -> MutexGuard<'_, Fence<B>> {
        crate::sync::lock(&self.fence)
    }

    /// Waits until every copy that used the buffer has completed.
    ///
    /// # Errors
    /// The copies' errors (a device fault).
    pub fn wait_idle(&self) -> Result<()> {
        // The fence's record and wait are driver calls: refused inside a host callback, as
        // `Event::synchronize` refuses them.
        crate::callback::ensure_not_in_callback()?;
        let mut g = self.lock();
        g.settle()?;
        if let Some(ev) = &g.event {
            ev.synchronize()?;
        }
        Ok(())
    }

    /// The bytes, once every copy that used the buffer has completed.
    ///
    /// # Errors
    /// As [`PinnedBuffer::wait_idle`].
    pub fn as_slice(&self) -> Result<&[u8]> {
        self.wait_idle()?;
        // SAFETY: the allocation is valid for len bytes while `self.mem` lives (PinnedAllocation
        // contract); no copy is in flight (fence waited) and none can start that writes it
        // while this shared borrow lives (copies into the buffer need `&mut self`).
        Ok(unsafe { std::slice::from_raw_parts(self.mem.as_ptr(), self.len) })
    }

    /// The bytes, writable, once every copy that used the buffer has completed.
    ///
    /// # Errors
    /// As [`PinnedBuffer::wait_idle`].
    pub fn as_mut_slice(&mut self) -> Result<&mut [u8]> {
        self.wait_idle()?;
        // SAFETY: as in `as_slice`; `&mut self` excludes every other borrow and every new
        // copy while the slice lives.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.mem.as_ptr(), self.len) })
    }

    /// The bytes as elements of `T`, once every copy that used the buffer has completed (the
    /// buffer is page-aligned, so any `T` fits when the length is a multiple of its size).
    ///
    /// # Errors
    /// As [`PinnedBuffer::wait_idle`]; [`Error::InvalidArgument`] when the length is not a
    /// whole number of elements.
    pub fn typed<T: bytemuck::Pod>(&self) -> Result<&[T]> {
        bytemuck::try_cast_slice(self.as_slice()?).map_err(|e| cast_error::<T>(self.len(), e))
    }

    /// As [`PinnedBuffer::typed`], writable.
    ///
    /// # Errors
    /// As [`PinnedBuffer::typed`].
    pub fn typed_mut<T: bytemuck::Pod>(&mut self) -> Result<&mut [T]> {
        let len = self.len();
        bytemuck::try_cast_slice_mut(self.as_mut_slice()?).map_err(|e| cast_error::<T>(len, e))
    }

    /// Checks a copy's arguments, orders it after the buffer's last use, enqueues it with
    /// `enqueue` and moves the fence behind it: at once where the stream's backend gives no
    /// [`FenceAnchor`], else on the first host access or use on another stream (a copy on the
    /// same stream as the last one makes no record).
    pub(crate) fn fenced_copy(
        &self,
        stream: &B::Stream,
        what: &str,
        offset: usize,
        len: usize,
        enqueue: impl FnOnce(PinnedSpan) -> Result<()>,
    ) -> Result<()> {
        crate::check_range(what, self.len(), offset, len)?;
        let sdev = stream.device().info().ordinal;
        if sdev != self.mem.ordinal() && !self.flags.contains(PinnedFlags::PORTABLE) {
            return Err(Error::WrongDevice(format!(
                "{what}: the host buffer is bound to device {} and is not PORTABLE, the stream \
                 is on device {sdev}",
                self.mem.ordinal()
            )));
        }
        if len == 0 {
            // A zero-length copy is a no-op (docs/semantics.md), checked like any other.
            return Ok(());
        }
        if stream.is_capturing() {
            return Err(Error::unsupported(
                B::KIND,
                format!("{what} with a page-locked host buffer inside a capture (not yet)"),
            ));
        }
        let mut guard = self.lock();
        let g = &mut *guard;
        if g.event.is_none() {
            g.event = Some(
                stream
                    .device()
                    .create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))?,
            );
        }
        let sid = stream.id();
        let span = PinnedSpan {
            mem: Arc::clone(&self.mem),
            offset,
            len,
        };
        if g.stream == sid && g.anchor.is_some() {
            // The hot path: the stream's order covers the earlier copies, and the record waits
            // for the next host access or use on another stream.
            enqueue(span)?;
            g.pending = true;
            return Ok(());
        }
        if g.stream != 0 && g.stream != sid {
            // The event must cover the old stream's copies before this stream waits on it.
            g.settle()?;
            let ev = g.event.as_ref().ok_or(Error::NotReady)?;
            stream.wait_event(ev)?;
        }
        let ev = g.event.as_ref().ok_or(Error::NotReady)?;
        let anchor = stream.fence_anchor_impl(ev);
        enqueue(span)?;
        match anchor {
            Some(a) => {
                g.anchor = Some(a);
                g.pending = true;
            }
            None => {
                g.anchor = None;
                g.pending = false;
                ev.record(stream)?;
            }
        }
        g.stream = sid;
        Ok(())
    }
}

fn cast_error<T>(len: usize, e: bytemuck::PodCastError) -> Error {
    Error::invalid(format!(
        "host buffer of {len} bytes as [{}]: {e:?}",
        std::any::type_name::<T>()
    ))
}

// ---- The former names (issue 33: `Host` names the host backend; page-locked memory is
// "pinned"). Kept one release, deprecated. ----

/// The former name of [`PinnedBuffer`].
#[deprecated(
    since = "0.2.0",
    note = "renamed `PinnedBuffer` (`Host` names the host backend)"
)]
pub type HostBuffer<B> = PinnedBuffer<B>;
/// The former name of [`PinnedFlags`].
#[deprecated(
    since = "0.2.0",
    note = "renamed `PinnedFlags` (`Host` names the host backend)"
)]
pub type HostMemFlags = PinnedFlags;
/// The former name of [`PinnedAllocDesc`].
#[deprecated(
    since = "0.2.0",
    note = "renamed `PinnedAllocDesc` (`Host` names the host backend)"
)]
pub type HostAllocDesc = PinnedAllocDesc;
/// The former name of [`PinnedFlagRow`].
#[deprecated(
    since = "0.2.0",
    note = "renamed `PinnedFlagRow` (`Host` names the host backend)"
)]
pub type HostFlagRow = PinnedFlagRow;
/// The former name of [`PinnedSpan`].
#[deprecated(
    since = "0.2.0",
    note = "renamed `PinnedSpan` (`Host` names the host backend)"
)]
pub type HostSpan = PinnedSpan;
/// The former name of [`PinnedRegistration`].
#[deprecated(since = "0.2.0", note = "renamed `PinnedRegistration`")]
pub type RegisteredHost<'s, B> = PinnedRegistration<'s, B>;
/// The former name of [`BorrowedPinnedRange`].
#[deprecated(since = "0.2.0", note = "renamed `BorrowedPinnedRange`")]
pub type BorrowedHostRange = BorrowedPinnedRange;
/// The former name of [`PINNED_ALIGN`].
#[deprecated(since = "0.2.0", note = "renamed `PINNED_ALIGN`")]
pub const HOST_ALIGN: usize = PINNED_ALIGN;
/// The former name of [`PinnedAllocation`]. A trait cannot be aliased with a warning (rustc
/// ignores `#[deprecated]` on a re-export), so this one compiles silently; it goes with the
/// other former names.
pub use self::PinnedAllocation as HostAllocation;

/// The former name of [`translate_pinned_flags`].
///
/// # Errors
/// As [`translate_pinned_flags`].
#[deprecated(since = "0.2.0", note = "renamed `translate_pinned_flags`")]
pub fn translate_host_flags(
    backend: BackendKind,
    table: &[PinnedFlagRow],
    flags: PinnedFlags,
    policy: TranslationPolicy,
) -> Result<(u32, PinnedFlags, FlagReport)> {
    translate_pinned_flags(backend, table, flags, policy)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &[PinnedFlagRow] = &[
        PinnedFlagRow::native(PinnedFlags::PORTABLE, 1),
        PinnedFlagRow::unsupported(PinnedFlags::WRITE_COMBINED, "no such memory"),
    ];

    #[test]
    fn strict_refuses_and_best_effort_drops() {
        let f = PinnedFlags::PORTABLE | PinnedFlags::WRITE_COMBINED;
        let e = translate_pinned_flags(BackendKind::Host, TABLE, f, TranslationPolicy::Strict)
            .unwrap_err();
        assert!(matches!(
            e,
            Error::UnsupportedFlag {
                flag: "WRITE_COMBINED",
                ..
            }
        ));
        let (bits, eff, rep) =
            translate_pinned_flags(BackendKind::Host, TABLE, f, TranslationPolicy::BestEffort)
                .unwrap();
        assert_eq!(bits, 1);
        assert_eq!(eff, PinnedFlags::PORTABLE);
        assert_eq!(rep.dropped, vec![("WRITE_COMBINED", "no such memory")]);
        // A flag missing from the table is refused too.
        assert!(translate_pinned_flags(
            BackendKind::Host,
            TABLE,
            PinnedFlags::DEVICE_MAPPED,
            TranslationPolicy::Strict
        )
        .is_err());
    }

    #[test]
    fn aligned_alloc_is_zeroed_page_aligned_and_refuses_zero() {
        let a = AlignedAlloc::new(BackendKind::Host, 0, 10_000).unwrap();
        assert_eq!(a.as_ptr() as usize % PINNED_ALIGN, 0);
        assert_eq!(a.len(), 10_000);
        let span = PinnedSpan {
            mem: Arc::new(a),
            offset: 9_990,
            len: 10,
        };
        let mut out = [7u8; 10];
        span.read_into_blocking(&mut out).unwrap();
        assert_eq!(out, [0u8; 10]);
        span.write_from_blocking(&[5u8; 10]).unwrap();
        span.read_into_blocking(&mut out).unwrap();
        assert_eq!(out, [5u8; 10]);
        assert!(span.read_into_blocking(&mut [0u8; 3]).is_err());
        assert!(AlignedAlloc::new(BackendKind::Host, 0, 0).is_err());
    }
}
