//! The `StreamImpl` trait: what a backend implements for its stream.

#[allow(unused_imports)]
use super::*;

use crate::hostmem::PinnedSpan;

/// A byte range of a buffer of backend `B`, checked against the buffer.
type Span<'a, B> = BufferView<'a, BufferOf<B>>;

/// The backend's stream: an in-order queue of device work.
///
/// Every method is required and does **no** checks of its own: users call the checked layer,
/// [`Stream`] (`crate::api::stream`), which is implemented for every `StreamImpl` by a blanket
/// impl (so a backend can neither override nor skip a check) and which has, before it calls a
/// method here, refused calls from inside a stream-blocking host callback, checked that every
/// buffer is of this stream's device (the peer copy excepted), checked every range against its
/// buffer (the [`BufferView`]s below are in range by construction), checked element and word
/// alignment, and answered zero-length requests itself. `x_impl` is the backend's side of the
/// user-facing `Stream::x`; the docs of `Stream::x` say what it does and which errors it gives.
/// It has also refused, through [`StreamImpl::capture_cell_impl`], the operations no capture
/// can hold (reads into host memory, host callbacks, the blocking typed copies, `record_use`).
/// What stays with the backend: its capture state machine (begin, end, what a capture
/// records, the refusals that differ per vendor), its sticky errors, and the lifetime of what
/// the enqueued work uses.
pub trait StreamImpl: Sized + Send + Sync + fmt::Debug + 'static {
    /// The backend.
    type B: Backend<Stream = Self>;
    /// The native handle type (`CUstream`, `aclrtStream`, ...).
    type Raw: Copy + fmt::Debug;

    // --- what the stream is ---

    /// [`Stream::device`].
    fn device_impl(&self) -> &DeviceOf<Self::B>;
    /// [`Stream::id`].
    fn id_impl(&self) -> u64;
    /// [`Stream::name`].
    fn name_impl(&self) -> Option<&str>;
    /// [`Stream::flags`].
    fn flags_impl(&self) -> StreamFlags;
    /// [`Stream::priority`].
    fn priority_impl(&self) -> i32;
    /// [`Stream::report`].
    fn report_impl(&self) -> &CreationReport;
    /// [`Stream::ownership`].
    fn ownership_impl(&self) -> Ownership;
    /// The stream's capture state ([`Stream::capture_status`]); the checked layer refuses
    /// through it the operations a capture cannot hold (it invalidates the capture).
    fn capture_cell_impl(&self) -> &CaptureCell;
    /// [`Stream::as_raw`].
    fn as_raw_impl(&self) -> Self::Raw;

    /// A [`FenceAnchor`] on this stream for `event` (a page-locked buffer's fence, of this
    /// stream's device), or `None` when the backend has none or cannot record `event` on this
    /// stream. With an anchor, a page-locked buffer records its fence only when
    /// it is needed (host access, a copy on another stream) instead of behind every copy
    /// (`crate::hostmem`); with `None` the fence is recorded behind every copy. Called once per
    /// change of stream of a buffer, never per copy; the stream is not capturing.
    fn fence_anchor_impl(&self, event: &EventOf<Self::B>) -> Option<Arc<dyn FenceAnchor<Self::B>>>;

    /// [`Stream::borrow_raw`].
    ///
    /// # Safety
    /// As [`Stream::borrow_raw`].
    #[allow(unsafe_code)]
    unsafe fn borrow_raw_impl<'a>(
        device: &DeviceOf<Self::B>,
        raw: Self::Raw,
    ) -> Result<Borrowed<'a, Self>>
    where
        Self: Sized;

    // --- host waits, ordering, callbacks ---

    /// [`Stream::query`].
    fn query_impl(&self) -> Result<Status>;

    /// [`Stream::synchronize`] (`timeout: None`) and [`Stream::synchronize_timeout`] (a
    /// non-zero timeout).
    fn synchronize_impl(&self, timeout: Option<Duration>) -> Result<()>;

    /// [`Stream::wait_event`].
    fn wait_event_impl(&self, event: &EventOf<Self::B>) -> Result<()>;

    /// [`Stream::wait_stream`]: `other` is another stream (not this one).
    fn wait_stream_impl(&self, other: &Self) -> Result<()>
    where
        Self: Sized;

    /// [`Stream::enqueue_callback`]; not capturing.
    fn enqueue_callback_impl(&self, f: BoxedCallback) -> Result<()>;

    // --- capture ---

    /// [`Stream::begin_capture`].
    fn begin_capture_impl(&self, mode: CaptureMode) -> Result<()>;

    /// [`Stream::end_capture`].
    fn end_capture_impl(&self) -> Result<GraphOf<Self::B>>;

    // --- attributes and allocator ---

    /// [`Stream::attribute`].
    fn attribute_impl(&self, attr: StreamAttr) -> Result<StreamAttrValue>;

    /// [`Stream::set_attribute`].
    fn set_attribute_impl(&self, value: StreamAttrValue) -> Result<()>;

    /// [`Stream::copy_attributes_from`].
    fn copy_attributes_from_impl(&self, src: &Self) -> Result<()>
    where
        Self: Sized;

    /// [`Stream::set_allocator`].
    fn set_allocator_impl(&self, allocator: Option<Arc<dyn Allocator>>) -> Result<()>;

    /// [`Stream::allocator`].
    fn allocator_impl(&self) -> Result<Option<Arc<dyn Allocator>>>;

    // --- data movement: every range is in its buffer, no length is zero ---

    /// [`Stream::memset`] and [`Stream::memset_pattern`]: the range is a whole number of
    /// aligned elements of the pattern.
    fn memset_impl(&self, dst: Span<'_, Self::B>, value: MemsetPattern) -> Result<()>;

    /// [`Stream::write`]: `dst` is as long as `data`.
    fn write_impl(&self, dst: Span<'_, Self::B>, data: Vec<u8>) -> Result<()>;

    /// [`Stream::read`] (the one data operation that may be of zero bytes: it still gives a
    /// [`Readback`]); not capturing.
    fn read_impl(&self, src: Span<'_, Self::B>) -> Result<Readback>;

    /// [`Stream::copy`]: both ranges are of one length.
    fn copy_impl(&self, src: Span<'_, Self::B>, dst: Span<'_, Self::B>) -> Result<()>;

    /// [`Stream::copy_peer`]: both ranges are of one length and at least one buffer is of
    /// this stream's device; whether access to the other device was enabled is the
    /// backend's to check.
    fn copy_peer_impl(&self, src: Span<'_, Self::B>, dst: Span<'_, Self::B>) -> Result<()>;

    /// [`Stream::copy_to_device`]: the host range is fenced; `dst` is as long as `src`. The
    /// backend keeps both alive until the copy completed.
    fn copy_to_device_impl(&self, src: PinnedSpan, dst: Span<'_, Self::B>) -> Result<()>;

    /// [`Stream::copy_to_host`]; as [`StreamImpl::copy_to_device_impl`].
    fn copy_to_host_impl(&self, src: Span<'_, Self::B>, dst: PinnedSpan) -> Result<()>;

    /// [`Stream::write_from_blocking`]: copy `src` into `dst` (of its length) in stream
    /// order and return once `src` may be reused; not capturing.
    fn write_from_blocking_impl(&self, dst: Span<'_, Self::B>, src: &[u8]) -> Result<()>;

    /// [`Stream::read_into_blocking`]: fill `dst` from `src` (of its length) in stream order
    /// and return once it is filled; not capturing.
    fn read_into_blocking_impl(&self, src: Span<'_, Self::B>, dst: &mut [u8]) -> Result<()>;

    /// [`Stream::reduce`]: both ranges of one non-zero length, whole aligned elements, not
    /// partially overlapping.
    fn reduce_impl(
        &self,
        dst: Span<'_, Self::B>,
        src: Span<'_, Self::B>,
        r: crate::Reduction,
    ) -> Result<()>;

    // --- stream memory operations: `word` is one aligned word of the operation's width ---

    /// [`Stream::wait_value32`], [`Stream::wait_value64`], [`Stream::write_value32`] and
    /// [`Stream::write_value64`].
    fn value_op_impl(&self, word: Span<'_, Self::B>, op: crate::memop::ValueOp) -> Result<()>;

    // --- stream-ordered allocation: the buffer is of this stream's device ---

    /// [`Stream::alloc_async`].
    fn alloc_async_impl(&self, len: usize) -> Result<BufferOf<Self::B>>;

    /// [`Stream::free_async`].
    fn free_async_impl(&self, buf: BufferOf<Self::B>) -> Result<()>;

    /// [`Stream::record_use`]; not capturing.
    fn record_use_impl(&self, buf: &BufferOf<Self::B>) -> Result<()>;

    // --- launches: every buffer argument is of this stream's device ---

    /// [`Stream::launch_builtin`]: the buffer of a kernel is of this device; a random fill's range,
    /// alignment and parameters are checked, and it is not empty.
    fn launch_builtin_impl(&self, kernel: Kernel<'_, BufferOf<Self::B>>) -> Result<()>;

    /// [`Stream::launch_kernel`].
    fn launch_kernel_impl(
        &self,
        f: &FunctionOf<Self::B>,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, BufferOf<Self::B>>],
    ) -> Result<()>;

    /// [`Stream::launch_kernel_with`] (the launch builder's checked launch): the backend checks
    /// the arguments against the parameter layout it knows, refusing a launch whose layout it
    /// cannot know, and the attributes.
    fn launch_kernel_with_impl(
        &self,
        f: &FunctionOf<Self::B>,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, BufferOf<Self::B>>],
        attrs: &LaunchAttrs,
    ) -> Result<()>;

    /// [`Stream::launch_kernel_unchecked`]: as [`StreamImpl::launch_kernel_with_impl`], passing
    /// the arguments as given where the layout is unknown.
    ///
    /// # Safety
    /// As [`Stream::launch_kernel_unchecked`].
    #[allow(unsafe_code)]
    unsafe fn launch_kernel_unchecked_impl(
        &self,
        f: &FunctionOf<Self::B>,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, BufferOf<Self::B>>],
        attrs: &LaunchAttrs,
    ) -> Result<()>;
}

/// What a page-locked buffer keeps of the stream of its last copies so that it can record its
/// fence event behind them later ([`StreamImpl::fence_anchor_impl`], `crate::hostmem`).
///
/// An anchor keeps the native stream alive while it is held (also after the stream's owner
/// was dropped, whose work the native stream still runs), and may be used from any thread.
/// Core calls [`FenceAnchor::record`] only outside host callbacks.
pub trait FenceAnchor<B: Backend>: Send + Sync + 'static {
    /// Records `event` (the one the anchor was made for) behind all work enqueued so far on the
    /// anchor's stream, as [`Event::record`] on that stream would. Where the stream has begun a
    /// capture since (a record there would be a graph node, not a mark behind the work), it
    /// instead waits on the host until the work enqueued before the capture completed, or
    /// refuses.
    ///
    /// # Errors
    /// The backend's record or wait errors; [`Error::Unsupported`] for a capture it cannot
    /// see past.
    fn record(&self, event: &EventOf<B>) -> Result<()>;
}

/// The launch builder's checked launch for a backend that takes no launch attribute and
/// checks arguments only against a known parameter layout (the host backend): refuses any
/// attribute and an unknown layout, then launches.
///
/// # Errors
/// As [`Stream::launch_kernel_with`].
pub fn launch_without_attrs<S: StreamImpl>(
    s: &S,
    f: &FunctionOf<S::B>,
    cfg: &LaunchConfig,
    args: &[KernelArg<'_, BufferOf<S::B>>],
    attrs: &LaunchAttrs,
) -> Result<()> {
    attrs.refuse_all(<S::B as Backend>::KIND)?;
    if f.params().is_none() {
        return Err(Error::unsupported(
            <S::B as Backend>::KIND,
            format!(
                "a checked launch of `{}`: its parameter layout is unknown (declare it, or use the unsafe unchecked launch)",
                f.name()
            ),
        ));
    }
    s.launch_kernel_impl(f, cfg, args)
}
