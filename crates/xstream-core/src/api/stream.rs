//! The `Stream` trait: what users call on a stream, with every check of a stream operation.
//!
//! `Stream` is implemented for every backend's [`StreamImpl`] by the blanket impl below and by
//! nothing else, so no backend overrides or skips a check. Each method checks, in this order
//! and only here:
//! - **the callback gate**: inside a stream-blocking host callback every call that reaches
//!   the backend is refused ([`Error::NotPermitted`], [`ensure_not_in_callback`]);
//! - **the foreign-buffer rule**: a buffer is of this stream's device ([`Error::WrongDevice`]);
//!   [`Stream::copy_peer`] needs one of its two buffers to be;
//! - **ranges**: `offset + len` inside the buffer, as a [`BufferView`] handed to the backend;
//!   element alignment of memset patterns, reductions and value-operation words;
//! - **the zero-length rule**: a data operation of no bytes (valid offsets) is a no-op that
//!   reaches no backend (a [`Stream::read`] of no bytes still gives its [`Readback`]);
//! - **the capture gate** of operations no capture can hold (a read into host memory, a host
//!   callback, the blocking typed copies, `record_use`): refused with [`Error::Capture`], the
//!   capture invalidated ([`crate::CaptureCell::gate`]).
//!
//! Then it calls `StreamImpl::x_impl`. The backend keeps its capture state machine (begin,
//! end, what a capture records, the refusals that differ per vendor) and its sticky errors.
//!
//! # Why one file of this size
//! It is one trait: every user-facing stream operation with its documentation and its checks.
//! A trait's methods live in one block, and splitting it into several traits would change the
//! API users import; the check helpers it shares are in this file's head.

#[allow(unused_imports)]
use crate::backend::*;
use crate::callback::ensure_not_in_callback;
use crate::completion::{completion, Completion};
use crate::hostmem::PinnedBuffer;
use crate::launch::{LaunchAttrs, LaunchBuilder};
use crate::memop::ValueOp;
use crate::module::{KernelArg, LaunchConfig};
use crate::view::{BufferView, MemsetPattern};
#[allow(unused_imports)]
use crate::{
    Allocator, BoxedCallback, CaptureMode, CaptureStatus, Error, EventFlags, Function, Result,
    StreamAttr, StreamAttrValue, StreamFlags,
};
use crate::{Buffer, Device, Event};
use std::sync::Arc;
use std::time::Duration;

/// The fixed-width fills of [`Stream`] (`memset16`, `memset32`, `memset64`), written once:
/// each is [`Stream::memset_pattern`] of its width's [`MemsetPattern`] over the view, and
/// refuses a view that is not a whole number of its `$bytes`-byte elements.
macro_rules! memset_widths {
    ($($(#[$doc:meta])* fn $name:ident(value: $t:ty) = $width:ident, $bytes:literal;)*) => {$(
        $(#[$doc])*
        ///
        /// # Errors
        #[doc = concat!(
            "[`Error::InvalidArgument`] when the view's offset or length is not a multiple of ",
            $bytes,
            "; as [`Stream::memset`]."
        )]
        fn $name<'v>(
            &self,
            dst: impl Into<BufferView<'v, BufferOf<Self::B>>>,
            value: $t,
        ) -> Result<()>
        where
            Self: Sized,
        {
            self.memset_pattern(dst.into(), MemsetPattern::$width(value))
        }
    )*};
}

/// A byte range of `buf` checked against it, for the operation `op`, after the buffer was
/// checked to be of `stream`'s device.
fn span<'b, S: StreamImpl>(
    op: &str,
    stream: &S,
    buf: &'b BufferOf<S::B>,
    offset: usize,
    len: usize,
) -> Result<BufferView<'b, BufferOf<S::B>>> {
    check_buffer_device::<S::B>(op, stream, buf)?;
    check_range(op, buf.len(), offset, len)?;
    Ok(BufferView::checked(buf, offset, len))
}

/// An in-order queue of device work: the user-facing, checked operations of every backend's
/// stream (see the [module](self) for the checks and their order).
///
/// Dropping an owned stream neither blocks nor cancels: enqueued work (and its callbacks) runs
/// to completion, and resources it uses stay alive until then.
pub trait Stream: StreamImpl {
    /// Its device.
    fn device(&self) -> &DeviceOf<Self::B> {
        self.device_impl()
    }
    /// A process-unique id (the vendor's id when it has one, never a recycled address).
    fn id(&self) -> u64 {
        self.id_impl()
    }
    /// Its name, if any.
    fn name(&self) -> Option<&str> {
        self.name_impl()
    }
    /// Its effective portable flags (emulated and inherent ones included, dropped ones not).
    fn flags(&self) -> StreamFlags {
        self.flags_impl()
    }
    /// Its effective native priority.
    fn priority(&self) -> i32 {
        self.priority_impl()
    }
    /// What creation did with the request.
    fn report(&self) -> &CreationReport {
        self.report_impl()
    }
    /// Who owns the native handle.
    fn ownership(&self) -> Ownership {
        self.ownership_impl()
    }

    /// Whether all submitted work has completed.
    ///
    /// # Errors
    /// A capture error while capturing; the stream's (sticky) errors.
    fn query(&self) -> Result<Status> {
        ensure_not_in_callback()?;
        self.query_impl()
    }

    /// Blocks until all submitted work has completed, then reports a callback panic if one
    /// happened since the last synchronize.
    ///
    /// # Errors
    /// Work errors, capture errors, [`Error::CallbackPanicked`].
    fn synchronize(&self) -> Result<()> {
        ensure_not_in_callback()?;
        self.synchronize_impl(None)
    }

    /// As [`Stream::synchronize`], giving up after `timeout`.
    ///
    /// # Errors
    /// [`Error::Timeout`] when it expires (the stream stays usable);
    /// [`Error::InvalidArgument`] for a zero timeout.
    fn synchronize_timeout(&self, timeout: Duration) -> Result<()> {
        ensure_not_in_callback()?;
        check_timeout(timeout)?;
        self.synchronize_impl(Some(timeout))
    }

    /// Makes later work on this stream wait for the event's most recent record (a snapshot
    /// taken now). Waiting on a never-recorded event is a no-op.
    ///
    /// # Errors
    /// [`Error::WrongDevice`] where the vendor forbids cross-device waits; capture errors.
    fn wait_event(&self, event: &EventOf<Self::B>) -> Result<()> {
        ensure_not_in_callback()?;
        self.wait_event_impl(event)
    }

    /// Enqueues a stream-blocking host callback (see [`crate::callback`]).
    ///
    /// # Errors
    /// Refused during capture ([`Error::Capture`], capture invalidated); vendor errors. When
    /// enqueueing fails the callback is dropped without being called.
    fn enqueue_callback(&self, f: BoxedCallback) -> Result<()> {
        ensure_not_in_callback()?;
        // An exactly-once callback cannot be replayed.
        self.capture_cell_impl().gate("host_callback")?;
        self.enqueue_callback_impl(f)
    }

    /// Generic form of [`Stream::enqueue_callback`].
    ///
    /// # Errors
    /// As [`Stream::enqueue_callback`].
    fn host_callback<F>(&self, f: F) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
        Self: Sized,
    {
        self.enqueue_callback(Box::new(f))
    }

    /// Second-tier callback: runs `f` on xstream's dispatcher thread once the work before it
    /// is done. It does not hold the stream back, and it may call xstream. Panics are caught
    /// and logged.
    ///
    /// # Errors
    /// As [`Stream::enqueue_callback`].
    fn notify<F>(&self, f: F) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
        Self: Sized,
    {
        self.enqueue_callback(Box::new(move |r| {
            crate::callback::dispatch(Box::new(move || f(r)));
        }))
    }

    /// A future resolving when all work submitted so far has completed (one host callback).
    ///
    /// # Errors
    /// As [`Stream::enqueue_callback`].
    fn completed(&self) -> Result<Completion> {
        let (c, s) = completion();
        self.enqueue_callback(Box::new(move |r| s.complete(r)))?;
        Ok(c)
    }

    /// Starts recording instead of executing.
    ///
    /// # Errors
    /// Already capturing; default/borrowed streams; [`Error::Unsupported`] without
    /// [`Capabilities::CAPTURE`].
    fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        ensure_not_in_callback()?;
        self.begin_capture_impl(mode)
    }

    /// Ends the capture and returns the replayable graph.
    ///
    /// # Errors
    /// Not capturing; invalidated ([`crate::CaptureErrorKind::Invalidated`]).
    fn end_capture(&self) -> Result<GraphOf<Self::B>> {
        ensure_not_in_callback()?;
        self.end_capture_impl()
    }

    /// The capture status.
    fn capture_status(&self) -> CaptureStatus {
        self.capture_cell_impl().status()
    }

    /// Whether the stream is capturing.
    fn is_capturing(&self) -> bool {
        self.capture_status() != CaptureStatus::None
    }

    /// Reads a typed attribute.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for attributes the backend lacks.
    fn attribute(&self, attr: StreamAttr) -> Result<StreamAttrValue> {
        ensure_not_in_callback()?;
        self.attribute_impl(attr)
    }

    /// Writes a typed attribute.
    ///
    /// # Errors
    /// [`Error::Unsupported`]; [`Error::InvalidArgument`]; not on borrowed streams.
    fn set_attribute(&self, value: StreamAttrValue) -> Result<()> {
        ensure_not_in_callback()?;
        self.set_attribute_impl(value)
    }

    /// Copies every settable attribute from `src`.
    ///
    /// # Errors
    /// As [`Stream::set_attribute`].
    fn copy_attributes_from(&self, src: &Self) -> Result<()>
    where
        Self: Sized,
    {
        ensure_not_in_callback()?;
        self.copy_attributes_from_impl(src)
    }

    /// Registers (or, with `None`, unregisters) the stream's allocator.
    ///
    /// # Errors
    /// Vendor errors; not on borrowed streams.
    fn set_allocator(&self, allocator: Option<Arc<dyn Allocator>>) -> Result<()> {
        ensure_not_in_callback()?;
        self.set_allocator_impl(allocator)
    }

    /// The allocator registered on the stream.
    ///
    /// # Errors
    /// Vendor errors.
    fn allocator(&self) -> Result<Option<Arc<dyn Allocator>>> {
        ensure_not_in_callback()?;
        self.allocator_impl()
    }

    /// Enqueues: set `len` bytes at `offset` of `buf` to `value`.
    ///
    /// # Errors
    /// [`Error::WrongDevice`] for a buffer of another device (checked before anything is
    /// enqueued, as in every operation below that takes a buffer); [`Error::InvalidArgument`]
    /// out of bounds; vendor errors.
    fn memset(&self, buf: &BufferOf<Self::B>, offset: usize, len: usize, value: u8) -> Result<()> {
        ensure_not_in_callback()?;
        let dst = span("memset", self, buf, offset, len)?;
        if len == 0 {
            return Ok(());
        }
        self.memset_impl(dst, MemsetPattern::U8(value))
    }

    /// Enqueues a host-to-device copy of `data` to `offset` of `dst`. The stream keeps `data`
    /// alive until the copy is done.
    ///
    /// # Errors
    /// As [`Stream::memset`].
    fn write(&self, dst: &BufferOf<Self::B>, offset: usize, data: Vec<u8>) -> Result<()> {
        ensure_not_in_callback()?;
        let dst = span("write", self, dst, offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        self.write_impl(dst, data)
    }

    /// Enqueues a device-to-host copy; the bytes are in the [`Readback`] once the stream got
    /// past it.
    ///
    /// # Errors
    /// As [`Stream::memset`].
    fn read(&self, src: &BufferOf<Self::B>, offset: usize, len: usize) -> Result<Readback> {
        ensure_not_in_callback()?;
        let src = span("read", self, src, offset, len)?;
        // A readback is filled once; replays could not fill it again.
        self.capture_cell_impl().gate("read")?;
        self.read_impl(src)
    }

    /// Enqueues a device-to-device copy.
    ///
    /// # Errors
    /// As [`Stream::memset`].
    fn copy(
        &self,
        src: &BufferOf<Self::B>,
        src_offset: usize,
        dst: &BufferOf<Self::B>,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        ensure_not_in_callback()?;
        let src = span("copy source", self, src, src_offset, len)?;
        let dst = span("copy destination", self, dst, dst_offset, len)?;
        if len == 0 {
            return Ok(());
        }
        self.copy_impl(src, dst)
    }

    /// Enqueues an asynchronous copy of `len` bytes between buffers of two devices (one of
    /// them this stream's device), in this stream's order; both buffers are kept alive until
    /// the copy completed. The stream's device must have enabled access to the other device
    /// ([`Device::enable_peer_access`]). Buffers of one device go through [`Stream::copy`].
    /// [`Stream::copy`] itself stays a same-device copy, so a cross-device copy is always
    /// visible at the call site.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] out of bounds; [`Error::WrongDevice`] when neither buffer is of this stream's device; [`Error::NotPermitted`] when access
    /// to the other device was not enabled; [`Error::Unsupported`] without
    /// [`Capabilities::PEER_COPY`]; vendor errors.
    fn copy_peer(
        &self,
        src: &BufferOf<Self::B>,
        src_offset: usize,
        dst: &BufferOf<Self::B>,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        ensure_not_in_callback()?;
        let dev = self.device();
        if !src.belongs_to(dev) && !dst.belongs_to(dev) {
            return Err(Error::WrongDevice(format!(
                "copy_peer: neither buffer (devices {} and {}) belongs to the stream's {} device {}",
                src.device_ordinal(),
                dst.device_ordinal(),
                <Self::B as Backend>::KIND,
                dev.info().ordinal,
            )));
        }
        check_range("copy_peer source", src.len(), src_offset, len)?;
        check_range("copy_peer destination", dst.len(), dst_offset, len)?;
        if len == 0 {
            return Ok(());
        }
        self.copy_peer_impl(
            BufferView::checked(src, src_offset, len),
            BufferView::checked(dst, dst_offset, len),
        )
    }

    /// Enqueues a built-in kernel.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::KERNELS`] ([`Kernel::Random`]: without
    /// [`Capabilities::RANDOM`]); bad arguments.
    fn launch_builtin(&self, kernel: Kernel<'_, BufferOf<Self::B>>) -> Result<()> {
        ensure_not_in_callback()?;
        match &kernel {
            Kernel::Lcg { buf, .. } => check_buffer_device::<Self::B>("launch_builtin", self, buf)?,
            Kernel::Random {
                buf,
                offset,
                len,
                fill,
            } => {
                check_buffer_device::<Self::B>("launch_builtin", self, buf)?;
                crate::random::check(fill, buf.len(), *offset, *len)?;
                if *len == 0 {
                    return Ok(());
                }
            }
            _ => {}
        }
        self.launch_builtin_impl(kernel)
    }

    /// The former name of [`Stream::launch_builtin`].
    ///
    /// # Errors
    /// As [`Stream::launch_builtin`].
    #[deprecated(since = "0.2.0", note = "renamed `launch_builtin`")]
    fn launch(&self, kernel: Kernel<'_, BufferOf<Self::B>>) -> Result<()> {
        self.launch_builtin(kernel)
    }

    /// Enqueues a launch of kernel `f` with `cfg` and `args` (see [`crate::module`]); works
    /// inside a capture. Buffers are kept alive until the launch completed.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero dimension, dimensions beyond the device's
    /// limits, or (when [`Function::params`] is known) a wrong argument count or kind;
    /// [`Error::WrongDevice`] for a buffer or function of another device;
    /// [`Error::Unsupported`] without [`Capabilities::MODULES`]; vendor errors.
    fn launch_kernel(
        &self,
        f: &FunctionOf<Self::B>,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, BufferOf<Self::B>>],
    ) -> Result<()> {
        check_args_device("launch_kernel", self, args)?;
        self.launch_kernel_impl(f, cfg, args)
    }

    // --- launch builder ---

    /// A launch of `f` on this stream, assembled argument by argument (see
    /// [`crate::launch`]).
    fn launch_builder<'a>(&'a self, f: &'a FunctionOf<Self::B>) -> LaunchBuilder<'a, Self::B>
    where
        Self: Sized,
    {
        LaunchBuilder::new(self, f)
    }

    /// The checked launch of [`LaunchBuilder::launch`]: the backend checks the arguments
    /// against the parameter layout it knows (refusing a launch whose layout it cannot know)
    /// and the attributes, then enqueues.
    ///
    /// # Errors
    /// As [`Stream::launch_kernel`]; [`Error::Unsupported`] for any attribute or an unknown
    /// layout.
    fn launch_kernel_with(
        &self,
        f: &FunctionOf<Self::B>,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, BufferOf<Self::B>>],
        attrs: &LaunchAttrs,
    ) -> Result<()> {
        check_args_device("launch_kernel_with", self, args)?;
        self.launch_kernel_with_impl(f, cfg, args, attrs)
    }

    /// The former name of [`Stream::launch_kernel_with`].
    ///
    /// # Errors
    /// As [`Stream::launch_kernel_with`].
    #[deprecated(since = "0.2.0", note = "renamed `launch_kernel_with`")]
    fn enqueue_launch(
        &self,
        f: &FunctionOf<Self::B>,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, BufferOf<Self::B>>],
        attrs: &LaunchAttrs,
    ) -> Result<()> {
        self.launch_kernel_with(f, cfg, args, attrs)
    }

    /// The launch of [`LaunchBuilder::launch_unchecked`]: as [`Stream::launch_kernel_with`],
    /// passing the arguments as given where the layout is unknown.
    ///
    /// # Safety
    /// The arguments must match the kernel's parameters (count, sizes, meaning).
    ///
    /// # Errors
    /// As [`Stream::launch_kernel_with`], less the unknown layout.
    #[allow(unsafe_code)]
    unsafe fn launch_kernel_unchecked(
        &self,
        f: &FunctionOf<Self::B>,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, BufferOf<Self::B>>],
        attrs: &LaunchAttrs,
    ) -> Result<()> {
        check_args_device("launch_kernel_unchecked", self, args)?;
        // SAFETY: the caller keeps this function's contract, which is the backend's.
        unsafe { self.launch_kernel_unchecked_impl(f, cfg, args, attrs) }
    }

    /// The former name of [`Stream::launch_kernel_unchecked`].
    ///
    /// # Safety
    /// As [`Stream::launch_kernel_unchecked`].
    ///
    /// # Errors
    /// As [`Stream::launch_kernel_unchecked`].
    #[allow(unsafe_code)]
    #[deprecated(since = "0.2.0", note = "renamed `launch_kernel_unchecked`")]
    unsafe fn enqueue_launch_unchecked(
        &self,
        f: &FunctionOf<Self::B>,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, BufferOf<Self::B>>],
        attrs: &LaunchAttrs,
    ) -> Result<()> {
        // SAFETY: the caller keeps `launch_kernel_unchecked`'s contract.
        unsafe { self.launch_kernel_unchecked(f, cfg, args, attrs) }
    }

    // --- end of launch builder ---

    // ---- Data path: async copies with page-locked host memory, stream-ordered allocation
    // (see `crate::hostmem`) ----

    /// Enqueues one native asynchronous host-to-device copy of `len` bytes from `src` at
    /// `src_offset` to `dst` at `dst_offset`, with no staging. The host buffer is kept alive
    /// and fenced until the copy completed (see [`crate::hostmem`]); no heap allocation.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] out of bounds (`len == 0` is a no-op); [`Error::WrongDevice`] for
    /// a buffer of another device; [`Error::Unsupported`] inside a capture or where the
    /// backend has no page-locked copies; vendor errors.
    fn copy_to_device(
        &self,
        src: &PinnedBuffer<Self::B>,
        src_offset: usize,
        dst: &BufferOf<Self::B>,
        dst_offset: usize,
        len: usize,
    ) -> Result<()>
    where
        Self: Sized,
    {
        ensure_not_in_callback()?;
        let dst = span("copy_to_device destination", self, dst, dst_offset, len)?;
        src.fenced_copy(self, "copy_to_device", src_offset, len, |span| {
            self.copy_to_device_impl(span, dst)
        })
    }

    /// Enqueues one native asynchronous device-to-host copy into a page-locked host buffer;
    /// the bytes are readable through [`PinnedBuffer::as_slice`] (which waits for the copy).
    ///
    /// # Errors
    /// As [`Stream::copy_to_device`].
    fn copy_to_host(
        &self,
        src: &BufferOf<Self::B>,
        src_offset: usize,
        dst: &mut PinnedBuffer<Self::B>,
        dst_offset: usize,
        len: usize,
    ) -> Result<()>
    where
        Self: Sized,
    {
        ensure_not_in_callback()?;
        let src = span("copy_to_host source", self, src, src_offset, len)?;
        dst.fenced_copy(self, "copy_to_host", dst_offset, len, |span| {
            self.copy_to_host_impl(src, span)
        })
    }

    /// Allocates `len` bytes in stream order: the buffer may be used by work enqueued on this
    /// stream after this call (and on other streams once they wait for this one). Its content
    /// is undefined. The portable reference (the host backend) is an ordinary allocation,
    /// usable at once on any stream.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`]; vendor errors. (`len == 0` gives a zero-length buffer.)
    fn alloc_async(&self, len: usize) -> Result<BufferOf<Self::B>> {
        ensure_not_in_callback()?;
        self.alloc_async_impl(len)
    }

    /// Frees `buf` in stream order: after the work enqueued on this stream so far, and after
    /// the work of every other stream that used it (enqueued before this call). Taking the
    /// buffer by value makes a use after free or a double free a compile error. The portable
    /// reference drops it under the backend's buffer lifetime rule (memory freed when the last
    /// queued work using it completed).
    ///
    /// # Errors
    /// [`Error::WrongDevice`] for a buffer of another device; vendor errors.
    fn free_async(&self, buf: BufferOf<Self::B>) -> Result<()> {
        // A refused buffer is dropped here: freed under the lifetime rule, never leaked.
        ensure_not_in_callback()?;
        check_buffer_device::<Self::B>("free_async", self, &buf)?;
        self.free_async_impl(buf)
    }

    // ---- Stream memory operations (see the `memop` module for the shared rules) ----

    /// Enqueues a wait: later work of this stream starts once the little-endian `u32` at
    /// `offset` of `buf` satisfies `cond` against `value`.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::VALUE_OPS_32`];
    /// [`Error::InvalidArgument`] for a misaligned or out-of-bounds word; vendor errors.
    fn wait_value32(
        &self,
        buf: &BufferOf<Self::B>,
        offset: usize,
        value: u32,
        cond: crate::WaitCondition,
    ) -> Result<()> {
        value_op(self, buf, offset, ValueOp::Wait32(value, cond))
    }

    /// As [`Stream::wait_value32`] on a `u64` word.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::VALUE_OPS_64`]; as
    /// [`Stream::wait_value32`].
    fn wait_value64(
        &self,
        buf: &BufferOf<Self::B>,
        offset: usize,
        value: u64,
        cond: crate::WaitCondition,
    ) -> Result<()> {
        value_op(self, buf, offset, ValueOp::Wait64(value, cond))
    }

    /// Enqueues a write of the little-endian `u32` `value` at `offset` of `buf`.
    ///
    /// # Errors
    /// As [`Stream::wait_value32`].
    fn write_value32(&self, buf: &BufferOf<Self::B>, offset: usize, value: u32) -> Result<()> {
        value_op(self, buf, offset, ValueOp::Write32(value))
    }

    /// Enqueues a write of the little-endian `u64` `value` at `offset` of `buf`.
    ///
    /// # Errors
    /// As [`Stream::wait_value64`].
    fn write_value64(&self, buf: &BufferOf<Self::B>, offset: usize, value: u64) -> Result<()> {
        value_op(self, buf, offset, ValueOp::Write64(value))
    }

    // ---- end of stream memory operations ----

    /// Enqueues the built-in reduce: for each element of `r.ty` in the `len` bytes,
    /// `dst[dst_offset..][i] = r.kind(dst[..][i], src[src_offset..][i])` (see the `reduce`
    /// module for the rules every backend follows). Needs no kernel binary.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::REDUCE`] or for a kind or type the
    /// device lacks; [`Error::InvalidArgument`] for a partial-element, misaligned,
    /// out-of-bounds or partially overlapping range; [`Error::WrongDevice`]; vendor errors.
    /// A zero length (with valid offsets) is a no-op, as in every other operation.
    fn reduce(
        &self,
        dst: &BufferOf<Self::B>,
        dst_offset: usize,
        src: &BufferOf<Self::B>,
        src_offset: usize,
        len: usize,
        r: crate::Reduction,
    ) -> Result<()> {
        ensure_not_in_callback()?;
        check_buffer_device::<Self::B>("reduce (destination)", self, dst)?;
        check_buffer_device::<Self::B>("reduce (source)", self, src)?;
        crate::reduce::check(r, dst.len(), dst_offset, src.len(), src_offset, len)?;
        crate::reduce::check_overlap(
            dst.device_address().wrapping_add(dst_offset as u64),
            src.device_address().wrapping_add(src_offset as u64),
            len,
        )?;
        if len == 0 {
            return Ok(());
        }
        self.reduce_impl(
            BufferView::checked(dst, dst_offset, len),
            BufferView::checked(src, src_offset, len),
            r,
        )
    }

    // --- views and typed copies ---
    // Views (`crate::view`) are accepted by the operations below through
    // `impl Into<BufferView>` (a `&Buffer`, a `BufferView` or a `DeviceSlice`); the byte-offset
    // operations above stay. Zero-length ranges are no-ops on every backend.

    /// [`Stream::memset`] over a view.
    ///
    /// # Errors
    /// As [`Stream::memset`].
    fn memset_view<'v>(
        &self,
        dst: impl Into<BufferView<'v, BufferOf<Self::B>>>,
        value: u8,
    ) -> Result<()>
    where
        Self: Sized,
    {
        let v = dst.into();
        self.memset(v.buffer(), v.offset(), v.len(), value)
    }

    memset_widths! {
        /// Enqueues: set every 16-bit element of the view to `value` (CUDA `cuMemsetD16Async`).
        fn memset16(value: u16) = U16, 2;

        /// Enqueues: set every 32-bit element of the view to `value` (CUDA `cuMemsetD32Async`).
        fn memset32(value: u32) = U32, 4;

        /// Enqueues: set every 64-bit element of the view to `value` (the fill of `i64`, `u64`
        /// and `f64` tensors: `memset64(view, x.to_bits())`). CUDA: one `cuMemsetD32Async` when
        /// both halves are equal, else two strided `cuMemsetD2D32Async`; Ascend: emulated as
        /// [`Stream::memset32`] is; host: native.
        fn memset64(value: u64) = U64, 8;
    }

    /// Enqueues a memset of 8-, 16-, 32- or 64-bit elements over `dst` (the range must be a
    /// whole number of aligned elements).
    ///
    /// # Errors
    /// As [`Stream::memset16`].
    fn memset_pattern(
        &self,
        dst: BufferView<'_, BufferOf<Self::B>>,
        value: MemsetPattern,
    ) -> Result<()> {
        ensure_not_in_callback()?;
        let dst = span("memset", self, dst.buffer(), dst.offset(), dst.len())?;
        value.check(dst.offset(), dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        self.memset_impl(dst, value)
    }

    /// [`Stream::write`] into a view: `data` fills the view's first `data.len()` bytes.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `data` is longer than the view; as [`Stream::write`].
    fn write_view<'v>(
        &self,
        dst: impl Into<BufferView<'v, BufferOf<Self::B>>>,
        data: Vec<u8>,
    ) -> Result<()>
    where
        Self: Sized,
    {
        let v = dst.into();
        check_range("write_view", v.len(), 0, data.len())?;
        self.write(v.buffer(), v.offset(), data)
    }

    /// [`Stream::read`] of a whole view.
    ///
    /// # Errors
    /// As [`Stream::read`].
    fn read_view<'v>(&self, src: impl Into<BufferView<'v, BufferOf<Self::B>>>) -> Result<Readback>
    where
        Self: Sized,
    {
        let v = src.into();
        self.read(v.buffer(), v.offset(), v.len())
    }

    /// [`Stream::copy`] between two views of equal length (of one buffer or two).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for views of different lengths; as [`Stream::copy`].
    fn copy_view<'v>(
        &self,
        src: impl Into<BufferView<'v, BufferOf<Self::B>>>,
        dst: impl Into<BufferView<'v, BufferOf<Self::B>>>,
    ) -> Result<()>
    where
        Self: Sized,
    {
        let (s, d) = (src.into(), dst.into());
        if s.len() != d.len() {
            return Err(Error::invalid(format!(
                "copy_view: source of {} bytes, destination of {} bytes",
                s.len(),
                d.len()
            )));
        }
        self.copy(s.buffer(), s.offset(), d.buffer(), d.offset(), s.len())
    }

    /// [`Stream::reduce`] over two views of equal length: `dst = op(dst, src)` per element.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for views of different lengths; as [`Stream::reduce`].
    fn reduce_view<'v>(
        &self,
        dst: impl Into<BufferView<'v, BufferOf<Self::B>>>,
        src: impl Into<BufferView<'v, BufferOf<Self::B>>>,
        r: crate::Reduction,
    ) -> Result<()>
    where
        Self: Sized,
    {
        let (d, s) = (dst.into(), src.into());
        if s.len() != d.len() {
            return Err(Error::invalid(format!(
                "reduce_view: destination of {} bytes, source of {} bytes",
                d.len(),
                s.len()
            )));
        }
        self.reduce(d.buffer(), d.offset(), s.buffer(), s.offset(), s.len(), r)
    }

    /// Copies `src` into the first `size_of_val(src)` bytes of `dst`, in stream order, and
    /// returns once `src` may be reused: synchronous with respect to the host slice (when it
    /// returns, the stream's earlier work has run and the bytes are in device memory). No
    /// heap allocation on the host and Ascend backends (docs/semantics.md, "Typed copies").
    /// An empty `src` is a no-op.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `src` is longer than the view; refused inside a
    /// capture and inside a stream-blocking callback; the stream's errors.
    fn write_from_blocking<'v, T: bytemuck::Pod>(
        &self,
        dst: impl Into<BufferView<'v, BufferOf<Self::B>>>,
        src: &[T],
    ) -> Result<()>
    where
        Self: Sized,
    {
        ensure_not_in_callback()?;
        let v = dst.into();
        let bytes: &[u8] = bytemuck::cast_slice(src);
        check_range("write_from_blocking", v.len(), 0, bytes.len())?;
        let dst = span(
            "write_from_blocking",
            self,
            v.buffer(),
            v.offset(),
            bytes.len(),
        )?;
        if bytes.is_empty() {
            return Ok(());
        }
        self.capture_cell_impl().gate("write_from_blocking")?;
        self.write_from_blocking_impl(dst, bytes)
    }

    /// Fills `dst` from the first `size_of_val(dst)` bytes of `src`, in stream order, and
    /// returns once `dst` holds them (the stream's earlier work has run). No heap allocation
    /// on the host and Ascend backends. An empty `dst` is a no-op.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `dst` is longer than the view; as
    /// [`Stream::write_from_blocking`].
    fn read_into_blocking<'v, T: bytemuck::Pod>(
        &self,
        src: impl Into<BufferView<'v, BufferOf<Self::B>>>,
        dst: &mut [T],
    ) -> Result<()>
    where
        Self: Sized,
    {
        ensure_not_in_callback()?;
        let v = src.into();
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(dst);
        check_range("read_into_blocking", v.len(), 0, bytes.len())?;
        let src = span(
            "read_into_blocking",
            self,
            v.buffer(),
            v.offset(),
            bytes.len(),
        )?;
        if bytes.is_empty() {
            return Ok(());
        }
        self.capture_cell_impl().gate("read_into_blocking")?;
        self.read_into_blocking_impl(src, bytes)
    }

    /// Renamed [`Stream::write_from_blocking`] (the name now says that it waits).
    ///
    /// # Errors
    /// As [`Stream::write_from_blocking`].
    #[deprecated(since = "0.2.0", note = "renamed `write_from_blocking`")]
    fn write_from<'v, T: bytemuck::Pod>(
        &self,
        dst: impl Into<BufferView<'v, BufferOf<Self::B>>>,
        src: &[T],
    ) -> Result<()>
    where
        Self: Sized,
    {
        self.write_from_blocking(dst, src)
    }

    /// Renamed [`Stream::read_into_blocking`] (the name now says that it waits).
    ///
    /// # Errors
    /// As [`Stream::read_into_blocking`].
    #[deprecated(since = "0.2.0", note = "renamed `read_into_blocking`")]
    fn read_into<'v, T: bytemuck::Pod>(
        &self,
        src: impl Into<BufferView<'v, BufferOf<Self::B>>>,
        dst: &mut [T],
    ) -> Result<()>
    where
        Self: Sized,
    {
        self.read_into_blocking(src, dst)
    }

    /// [`Stream::copy_to_device`] of a whole view from `src_offset` of a page-locked host
    /// buffer: asynchronous, no staging, no heap allocation (see [`crate::hostmem`]).
    ///
    /// # Errors
    /// As [`Stream::copy_to_device`].
    fn write_from_host<'v>(
        &self,
        src: &PinnedBuffer<Self::B>,
        src_offset: usize,
        dst: impl Into<BufferView<'v, BufferOf<Self::B>>>,
    ) -> Result<()>
    where
        Self: Sized,
    {
        let v = dst.into();
        self.copy_to_device(src, src_offset, v.buffer(), v.offset(), v.len())
    }

    /// [`Stream::copy_to_host`] of a whole view to `dst_offset` of a page-locked host buffer:
    /// asynchronous; the bytes are readable through [`PinnedBuffer::as_slice`] or
    /// [`PinnedBuffer::typed`] (which wait for the copy).
    ///
    /// # Errors
    /// As [`Stream::copy_to_host`].
    fn read_into_host<'v>(
        &self,
        src: impl Into<BufferView<'v, BufferOf<Self::B>>>,
        dst: &mut PinnedBuffer<Self::B>,
        dst_offset: usize,
    ) -> Result<()>
    where
        Self: Sized,
    {
        let v = src.into();
        self.copy_to_host(v.buffer(), v.offset(), dst, dst_offset, v.len())
    }

    // --- end of views and typed copies ---

    /// The native handle.
    fn as_raw(&self) -> Self::Raw {
        self.as_raw_impl()
    }

    /// Wraps a native handle that somebody else owns.
    ///
    /// # Safety
    /// `raw` must be a valid stream of `device`'s context and stay valid for `'a`; nobody may
    /// destroy it while the returned value lives.
    ///
    /// # Errors
    /// Vendor errors while reading its properties.
    #[allow(unsafe_code)]
    unsafe fn borrow_raw<'a>(
        device: &DeviceOf<Self::B>,
        raw: Self::Raw,
    ) -> Result<Borrowed<'a, Self>>
    where
        Self: Sized,
    {
        ensure_not_in_callback()?;
        // SAFETY: the caller keeps this function's contract, which is the backend's.
        unsafe { Self::borrow_raw_impl(device, raw) }
    }

    /// Renamed [`Stream::borrow_raw`] (it borrows; [`Buffer::from_raw`] takes ownership).
    ///
    /// # Safety
    /// As [`Stream::borrow_raw`].
    ///
    /// # Errors
    /// As [`Stream::borrow_raw`].
    #[allow(unsafe_code)]
    #[deprecated(since = "0.2.0", note = "renamed `borrow_raw`")]
    unsafe fn from_raw<'a>(device: &DeviceOf<Self::B>, raw: Self::Raw) -> Result<Borrowed<'a, Self>>
    where
        Self: Sized,
    {
        // SAFETY: the caller keeps `borrow_raw`'s contract.
        unsafe { Self::borrow_raw(device, raw) }
    }

    // --- ordering and allocation without host sync ---

    /// Makes later work on this stream wait for all work enqueued on `other` so far (PyTorch's
    /// `wait_stream`): one record on `other` and one wait here, no host wait. Joining a stream
    /// with itself is a no-op. Backends use an internal event pool where they have one
    /// (docs/semantics.md); the others record a new event ([`Stream::record_event`]).
    ///
    /// # Errors
    /// [`Error::WrongDevice`] for a stream of another device (where the vendor forbids
    /// cross-device waits); capture errors as [`Stream::wait_event`] and [`Event::record`].
    fn wait_stream(&self, other: &Self) -> Result<()>
    where
        Self: Sized,
    {
        ensure_not_in_callback()?;
        if self.id() == other.id() {
            return Ok(());
        }
        self.wait_stream_impl(other)
    }

    /// Renamed [`Stream::wait_stream`] (the name says what it does: a wait, not a host join).
    ///
    /// # Errors
    /// As [`Stream::wait_stream`].
    #[deprecated(since = "0.2.0", note = "renamed `wait_stream`")]
    fn join(&self, other: &Self) -> Result<()>
    where
        Self: Sized,
    {
        self.wait_stream(other)
    }

    /// A fresh timing-disabled event recorded on this stream (behind the work enqueued so far).
    /// For events reused instead of created, record through an [`crate::EventPool`].
    ///
    /// # Errors
    /// As [`Device::create_event`] and [`Event::record`].
    fn record_event(&self) -> Result<EventOf<Self::B>> {
        let e = self
            .device()
            .create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))?;
        e.record(self)?;
        Ok(e)
    }

    /// Declares that work enqueued on this stream so far uses `buf` although xstream did not
    /// see it (work enqueued through [`Stream::as_raw`] or by another library on this stream's
    /// handle): PyTorch's `Tensor.record_stream`. The buffer's memory is then not freed or
    /// reused before that work completed: a [`Stream::free_async`] of it (on any stream) is
    /// ordered after it, and so is the release when it is dropped. Work enqueued on this
    /// stream after the call is not covered: mark after enqueueing. Marking costs no host
    /// wait; marking a stream twice is harmless. Work xstream enqueued itself is tracked
    /// without marking. The marked stream's native handle must stay valid until the buffer is
    /// freed (for a borrowed stream: its owner must not destroy it before).
    ///
    /// # Errors
    /// [`Error::WrongDevice`] for a buffer of another device; [`Error::Unsupported`] where the
    /// backend cannot track it; vendor errors.
    fn record_use(&self, buf: &BufferOf<Self::B>) -> Result<()> {
        ensure_not_in_callback()?;
        check_buffer_device::<Self::B>("record_use", self, buf)?;
        // A graph could replay the marked work after the buffer was freed.
        self.capture_cell_impl().gate("record_use")?;
        self.record_use_impl(buf)
    }

    // --- end of ordering and allocation without host sync ---
}

impl<S: StreamImpl> Stream for S {}

/// Checks that every buffer argument of a launch is of `stream`'s device.
fn check_args_device<S: StreamImpl>(
    op: &str,
    stream: &S,
    args: &[KernelArg<'_, BufferOf<S::B>>],
) -> Result<()> {
    ensure_not_in_callback()?;
    for a in args {
        match a {
            KernelArg::Buffer(b) => check_buffer_device::<S::B>(op, stream, b)?,
            KernelArg::View(v) => check_buffer_device::<S::B>(op, stream, v.buffer())?,
            _ => {}
        }
    }
    Ok(())
}

/// A stream memory operation's checks (the word at `offset` of `buf` is of `stream`'s device,
/// aligned and inside the buffer: [`crate::memop::check_word`]), then the backend's enqueue.
fn value_op<S: StreamImpl>(
    stream: &S,
    buf: &BufferOf<S::B>,
    offset: usize,
    op: ValueOp,
) -> Result<()> {
    let (name, width) = (op.name(), op.width());
    ensure_not_in_callback()?;
    check_buffer_device::<S::B>(name, stream, buf)?;
    crate::memop::check_word(name, buf.len(), offset, width)?;
    stream.value_op_impl(BufferView::checked(buf, offset, width), op)
}
