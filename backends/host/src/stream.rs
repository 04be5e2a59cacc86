//! Host streams: handles over a [`Queue`] executed by one worker thread.
//!
//! This file holds the type, submission, host waits and the [`Stream`] impl; each other concern
//! has its own file, named as in the other backends:
//! - `create`: owned streams and the default stream;
//! - `capture`: the capture list, begin and end;
//! - `memory`: memset, write, read, copies;
//! - `memop`: wait/write value operations (the reference of `xstream_core::memop`);
//! - `attribute`: stream attributes and the allocator slot;
//! - `native`: host-only extras (native bits, queue counters).

use std::sync::Arc;
use std::time::{Duration, Instant};

use xstream_core::callback::BoxedCallback;
use xstream_core::{
    Allocator, Borrowed, BufferView, CaptureCell, CaptureErrorKind, CaptureMode, CreationReport,
    Error, Kernel, LaunchAttrs, MemsetPattern, Ownership, Readback, Result, Status, Stream,
    StreamAttr, StreamAttrValue, StreamFlags, StreamImpl,
};

use crate::conv::map_stream_wait;
use crate::event::{Latest, RecordSlot};
use crate::worker::{Node, Op, Queue};
use crate::{HostBackend, HostDevice, HostDeviceBuffer, HostEvent, HostFunction, HostGraph};
use xstream_core::module::{
    delay_nanoseconds, lcg_launch, KernelArg, LaunchConfig, BUILTIN_DELAY, BUILTIN_LCG,
};

mod attribute;
mod capture;
mod create;
mod kernel;
pub(crate) mod memop;
mod memory;
mod native;
pub(crate) mod random;
pub(crate) mod reduce;

/// A checked byte range of a host buffer (what the checked layer hands the backend).
pub(crate) type Span<'a> = BufferView<'a, HostDeviceBuffer>;

/// A host stream: an in-order queue executed by a worker thread.
///
/// Handles: the owned stream from [`Device::create_stream`](xstream_core::Device), the
/// device's default stream ([`Ownership::Default`]) and borrowed views from
/// [`Stream::borrow_raw`] share their queue. Dropping the owned handle neither blocks nor
/// cancels: the worker keeps the queue alive until its work (callbacks included) ran.
#[derive(Debug)]
pub struct HostStream {
    queue: Arc<Queue>,
    device: HostDevice,
    ownership: Ownership,
}

impl HostStream {
    fn is_persistent_recording(&self) -> bool {
        self.queue.flags.contains(StreamFlags::PERSISTENT) && self.queue.capture.is_capturing()
    }

    fn check_owned(&self, op: &'static str) -> Result<()> {
        match self.ownership {
            Ownership::Borrowed => Err(Error::NotOwned {
                kind: xstream_core::NotOwnedKind::Borrowed,
                op,
            }),
            Ownership::Owned | Ownership::Default => Ok(()),
        }
    }

    /// Records `node` when capturing, else enqueues it for execution.
    fn submit(&self, op: &'static str, node: Node) -> Result<()> {
        self.device.shared().check()?;
        let mut node = Some(node);
        if let Some(r) = self.with_capture(|rec| {
            self.queue.capture.gate_enqueue(op)?;
            rec.nodes.extend(node.take());
            Ok(())
        }) {
            return r;
        }
        match node {
            Some(n) => self.queue.push(Op::Node(n)),
            None => Ok(()),
        }
    }

    /// Enqueues (or captures) a collective work item.
    pub(crate) fn submit_collective(&self, task: crate::collective::CollTask) -> Result<()> {
        self.submit("collective", Node::Collective(task))
    }

    /// A borrowed handle of the same queue (kept by an open collective group).
    pub(crate) fn alias(&self) -> HostStream {
        HostStream {
            queue: Arc::clone(&self.queue),
            device: self.device.clone(),
            ownership: Ownership::Borrowed,
        }
    }

    pub(crate) fn record_host_event(&self, event: &HostEvent) -> Result<()> {
        if !event.inner.device.same_context(&self.device) {
            return Err(Error::WrongDevice(format!(
                "event {} belongs to another host context than stream {}",
                event.inner.id, self.queue.id
            )));
        }
        self.device.shared().check()?;
        if event.inner.ipc.is_some() {
            // Interprocess events are not captured (their records move state other
            // processes see): refused, and the capture invalidated.
            self.queue
                .capture
                .gate("event_record (interprocess event)")?;
        }
        if let Some(r) = self.with_capture(|rec| {
            self.queue.capture.gate_enqueue("event_record")?;
            rec.nodes.push(Node::Record(Arc::clone(&event.inner)));
            event.inner.set_latest(Latest::Captured {
                queue: Arc::downgrade(&self.queue),
                epoch: rec.epoch,
            });
            Ok(())
        }) {
            return r;
        }
        let slot = RecordSlot::new(event.inner.timing());
        let shared = match &event.inner.ipc {
            Some(state) => {
                let seq = state.begin_record()?;
                slot.notify_ipc(Arc::clone(state), seq);
                Some((state, seq))
            }
            None => None,
        };
        if let Err(e) = self.queue.push(Op::Record(Arc::clone(&slot))) {
            if let Some((state, seq)) = shared {
                // Never enqueued: other processes must not wait for it forever.
                state.complete(seq, false);
            }
            return Err(e);
        }
        event.inner.set_latest(Latest::Real(slot));
        Ok(())
    }

    pub(crate) fn launch_graph(&self, nodes: &[Node]) -> Result<()> {
        self.device.shared().check()?;
        if let Some(r) = self.with_capture(|rec| {
            self.queue.capture.gate_enqueue("graph_launch")?;
            for n in nodes {
                if let Node::Record(ev) = n {
                    ev.set_latest(Latest::Captured {
                        queue: Arc::downgrade(&self.queue),
                        epoch: rec.epoch,
                    });
                }
                rec.nodes.push(n.clone());
            }
            Ok(())
        }) {
            return r;
        }
        let mut ops = Vec::with_capacity(nodes.len());
        let mut records = Vec::new();
        for n in nodes {
            match n {
                Node::Record(ev) => {
                    let s = RecordSlot::new(ev.timing());
                    records.push((Arc::clone(ev), Arc::clone(&s)));
                    ops.push(Op::Record(s));
                }
                other => ops.push(Op::Node(other.clone())),
            }
        }
        self.queue.push(Op::Graph(ops))?;
        for (ev, s) in records {
            ev.set_latest(Latest::Real(s));
        }
        Ok(())
    }

    fn sync(&self, timeout: Option<Duration>) -> Result<()> {
        let _span = tracing::debug_span!("stream_synchronize", stream = self.queue.id,
            name = ?self.queue.name)
        .entered();
        if self.is_persistent_recording() {
            return Ok(());
        }
        self.queue.capture.gate("stream_synchronize")?;
        let target = self.queue.enqueued();
        let mode = map_stream_wait(self.queue.native_flags, self.queue.attrs().sync);
        // A timeout too large for `Instant` (e.g. `Duration::MAX`) means no deadline: `now + t`
        // panicked on overflow (found by tests/tests/bad_input.rs).
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        if !self.queue.wait_for(target, deadline, mode) {
            return Err(Error::Timeout(timeout.unwrap_or_default()));
        }
        self.device.shared().check()?;
        self.queue.panics.take()
    }
}

impl Drop for HostStream {
    fn drop(&mut self) {
        if self.ownership == Ownership::Owned {
            tracing::debug!(stream = self.queue.id, name = ?self.queue.name,
                pending = self.queue.enqueued() - self.queue.completed(), "destroy host stream");
            self.queue.close();
        }
    }
}

impl StreamImpl for HostStream {
    type B = HostBackend;
    type Raw = u64;

    fn device_impl(&self) -> &HostDevice {
        &self.device
    }

    fn id_impl(&self) -> u64 {
        self.queue.id
    }

    fn name_impl(&self) -> Option<&str> {
        self.queue.name.as_deref()
    }

    fn flags_impl(&self) -> StreamFlags {
        self.queue.flags
    }

    fn priority_impl(&self) -> i32 {
        self.queue.attrs().priority
    }

    fn report_impl(&self) -> &CreationReport {
        &self.queue.report
    }

    fn ownership_impl(&self) -> Ownership {
        self.ownership
    }

    fn query_impl(&self) -> Result<Status> {
        if self.is_persistent_recording() {
            return Ok(Status::Ready);
        }
        self.queue.capture.gate("stream_query")?;
        self.device.shared().check()?;
        Ok(if self.queue.completed() >= self.queue.enqueued() {
            Status::Ready
        } else {
            Status::Pending
        })
    }

    fn synchronize_impl(&self, timeout: Option<Duration>) -> Result<()> {
        self.sync(timeout)
    }

    fn wait_event_impl(&self, event: &HostEvent) -> Result<()> {
        self.device.shared().check()?;
        if let Some(state) = &event.inner.ipc {
            self.queue.capture.gate("wait_event (interprocess event)")?;
            return match crate::ipc::wait_slot(state)? {
                Some(slot) if !slot.is_done() => self.queue.push(Op::Wait(slot)),
                _ => Ok(()),
            };
        }
        let latest = event.inner.latest();
        if let Some(r) = self.with_capture(|rec| {
            self.queue.capture.gate_enqueue("wait_event")?;
            match &latest {
                Latest::Never => Ok(()),
                Latest::Captured { queue, epoch }
                    if std::ptr::eq(queue.as_ptr(), Arc::as_ptr(&self.queue))
                        && *epoch == rec.epoch =>
                {
                    rec.nodes.push(Node::WaitLocal);
                    Ok(())
                }
                // A record made outside this capture (CUDA: STREAM_CAPTURE_ISOLATION).
                Latest::Real(_) | Latest::Captured { .. } => {
                    self.queue.capture.invalidate();
                    Err(Error::Capture {
                        op: "wait_event",
                        kind: CaptureErrorKind::Isolation,
                    })
                }
            }
        }) {
            return r;
        }
        match latest {
            Latest::Never => Ok(()),
            // Already complete: nothing to wait for.
            Latest::Real(slot) if slot.is_done() => Ok(()),
            Latest::Real(slot) => self.queue.push(Op::Wait(slot)),
            captured @ Latest::Captured { .. } => match captured.active_capture() {
                // Joining another stream into a capture (CUDA's fork) is not supported here:
                // refuse and break that capture rather than wait on a graph node.
                Some(q) => {
                    q.capture.invalidate();
                    Err(Error::Capture {
                        op: "wait_event",
                        kind: CaptureErrorKind::Unsupported,
                    })
                }
                None => Ok(()),
            },
        }
    }

    fn enqueue_callback_impl(&self, f: BoxedCallback) -> Result<()> {
        self.device.shared().check()?;
        tracing::trace!(stream = self.queue.id, name = ?self.queue.name, "enqueue host callback");
        // A fired slot of the device's pending list reused when it has one (no allocation).
        let slot = self.device.shared().pending.slot(f, &self.queue.panics);
        self.queue.push(Op::Callback(Arc::clone(&slot)))?;
        // Tracked after the push, so a failed enqueue drops the callback without calling it;
        // a fault in between is harmless (the worker fires the slot with the sticky error).
        self.device.shared().pending.track(&slot);
        Ok(())
    }

    fn begin_capture_impl(&self, mode: CaptureMode) -> Result<()> {
        capture::begin_capture(self, mode)
    }

    fn end_capture_impl(&self) -> Result<HostGraph> {
        capture::end_capture(self)
    }

    fn capture_cell_impl(&self) -> &CaptureCell {
        &self.queue.capture
    }

    fn attribute_impl(&self, attr: StreamAttr) -> Result<StreamAttrValue> {
        attribute::attribute(self, attr)
    }

    fn set_attribute_impl(&self, value: StreamAttrValue) -> Result<()> {
        attribute::set_attribute(self, value)
    }

    fn copy_attributes_from_impl(&self, src: &Self) -> Result<()> {
        attribute::copy_attributes_from(self, src)
    }

    fn set_allocator_impl(&self, allocator: Option<Arc<dyn Allocator>>) -> Result<()> {
        attribute::set_allocator(self, allocator)
    }

    fn allocator_impl(&self) -> Result<Option<Arc<dyn Allocator>>> {
        attribute::allocator(self)
    }

    fn copy_peer_impl(&self, src: Span<'_>, dst: Span<'_>) -> Result<()> {
        memory::copy_peer(self, src, dst)
    }

    fn as_raw_impl(&self) -> u64 {
        self.queue.id
    }

    fn fence_anchor_impl(
        &self,
        _event: &crate::HostEvent,
    ) -> Option<std::sync::Arc<dyn xstream_core::FenceAnchor<Self::B>>> {
        // No anchor: a page-locked buffer records its fence behind each copy.
        None
    }

    // The trait declares this `unsafe` for vendor handles; on the host a raw handle is only an
    // id looked up in the device's registry, so nothing here relies on the caller's promise.
    #[allow(unsafe_code)]
    unsafe fn borrow_raw_impl<'a>(device: &HostDevice, raw: u64) -> Result<Borrowed<'a, Self>> {
        match device.shared().find(raw) {
            Some(queue) => Ok(Borrowed::new(Self {
                queue,
                device: device.clone(),
                ownership: Ownership::Borrowed,
            })),
            None => Err(Error::invalid(format!(
                "no live stream with id {raw} on {}",
                xstream_core::Device::info(device).name
            ))),
        }
    }

    fn wait_stream_impl(&self, other: &Self) -> Result<()> {
        let e = other.record_event()?;
        self.wait_event_impl(&e)
    }

    fn copy_to_device_impl(&self, src: xstream_core::PinnedSpan, dst: Span<'_>) -> Result<()> {
        memory::copy_to_device(self, src, dst)
    }

    fn copy_to_host_impl(&self, src: Span<'_>, dst: xstream_core::PinnedSpan) -> Result<()> {
        memory::copy_to_host(self, src, dst)
    }

    fn write_from_blocking_impl(&self, dst: Span<'_>, src: &[u8]) -> Result<()> {
        memory::write_from_blocking(self, dst, src)
    }

    fn read_into_blocking_impl(&self, src: Span<'_>, dst: &mut [u8]) -> Result<()> {
        memory::read_into_blocking(self, src, dst)
    }

    fn memset_impl(&self, dst: Span<'_>, value: MemsetPattern) -> Result<()> {
        memory::memset(self, dst, value)
    }

    fn write_impl(&self, dst: Span<'_>, data: Vec<u8>) -> Result<()> {
        memory::write(self, dst, data)
    }

    fn read_impl(&self, src: Span<'_>) -> Result<Readback> {
        memory::read(self, src)
    }

    fn copy_impl(&self, src: Span<'_>, dst: Span<'_>) -> Result<()> {
        memory::copy(self, src, dst)
    }

    /// An ordinary allocation, usable at once on any stream (the portable reference).
    fn alloc_async_impl(&self, len: usize) -> Result<HostDeviceBuffer> {
        xstream_core::Device::alloc(&self.device, len)
    }

    /// Dropped under the buffer lifetime rule: its bytes go when the last queued work using
    /// them ran.
    fn free_async_impl(&self, buf: HostDeviceBuffer) -> Result<()> {
        drop(buf);
        Ok(())
    }

    fn launch_builtin_impl(&self, kernel: Kernel<'_, HostDeviceBuffer>) -> Result<()> {
        let ordinal = xstream_core::Device::info(&self.device).ordinal;
        let builtin = |name: &str| crate::module::builtin_function(name, ordinal);
        match kernel {
            Kernel::Delay(d) => self.launch_kernel(
                &builtin(BUILTIN_DELAY)?,
                &LaunchConfig::single(),
                &[KernelArg::U64(delay_nanoseconds(d))],
            ),
            Kernel::Lcg { buf, rounds } => {
                let (words, cfg) = lcg_launch(buf.inner_len())?;
                self.launch_kernel(
                    &builtin(BUILTIN_LCG)?,
                    &cfg,
                    &[
                        KernelArg::Buffer(buf),
                        KernelArg::U32(words),
                        KernelArg::U32(rounds),
                    ],
                )
            }
            Kernel::Random {
                buf,
                offset,
                len,
                fill,
            } => random::enqueue(self, buf, offset, len, fill),
            #[cfg(feature = "testing")]
            Kernel::Fault => self.submit("launch", Node::Fault),
            // xstream-core's test kernels, turned on by another crate of the build.
            #[cfg(not(feature = "testing"))]
            #[allow(unreachable_patterns)]
            _ => Err(xstream_core::Error::unsupported(
                xstream_core::BackendKind::Host,
                "test-only kernels (xstream-host's `testing` feature is off)",
            )),
        }
    }

    fn launch_kernel_impl(
        &self,
        f: &HostFunction,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, HostDeviceBuffer>],
    ) -> Result<()> {
        let launch = kernel::prepare(self, f, cfg, args)?;
        self.submit("launch_kernel", Node::Kernel(Arc::new(launch)))
    }

    fn launch_kernel_with_impl(
        &self,
        f: &HostFunction,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, HostDeviceBuffer>],
        attrs: &LaunchAttrs,
    ) -> Result<()> {
        xstream_core::backend::launch_without_attrs(self, f, cfg, args, attrs)
    }

    // The trait declares this `unsafe` for vendor kernels; a host kernel checks its arguments
    // itself, so nothing here relies on the caller's promise.
    #[allow(unsafe_code)]
    unsafe fn launch_kernel_unchecked_impl(
        &self,
        f: &HostFunction,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, HostDeviceBuffer>],
        attrs: &LaunchAttrs,
    ) -> Result<()> {
        attrs.refuse_all(xstream_core::BackendKind::Host)?;
        self.launch_kernel_impl(f, cfg, args)
    }

    fn value_op_impl(&self, word: Span<'_>, op: xstream_core::memop::ValueOp) -> Result<()> {
        let (value, cond) = op.parts();
        self.submit(op.name(), memop::node(word, value, cond))
    }

    fn reduce_impl(&self, dst: Span<'_>, src: Span<'_>, r: xstream_core::Reduction) -> Result<()> {
        reduce::enqueue(self, dst, src, r)
    }

    /// Holds the buffer's bytes until this stream's work enqueued so far ran: a stream-blocking
    /// callback that owns a reference to them (the host backend frees a buffer's bytes when
    /// the last reference goes, so no free can run ahead of the marked work).
    fn record_use_impl(&self, buf: &HostDeviceBuffer) -> Result<()> {
        let keep = Arc::clone(&buf.inner);
        self.enqueue_callback_impl(Box::new(move |_| drop(keep)))
    }
}
