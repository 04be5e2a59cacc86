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

use xstream_core::backend_hooks::{HookToken, StreamHooks};
use xstream_core::callback::{ensure_not_in_callback, CallbackSlot, HostCallback};
use xstream_core::{
    check_timeout, Allocator, Borrowed, CaptureErrorKind, CaptureMode, CaptureStatus,
    CreationReport, Error, Kernel, Ownership, Readback, Result, Status, Stream, StreamAttr,
    StreamAttrValue, StreamFlags, WaitCondition,
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

impl Stream for HostStream {
    type B = HostBackend;
    type Raw = u64;

    fn device(&self) -> &HostDevice {
        &self.device
    }

    fn id(&self) -> u64 {
        self.queue.id
    }

    fn name(&self) -> Option<&str> {
        self.queue.name.as_deref()
    }

    fn flags(&self) -> StreamFlags {
        self.queue.flags
    }

    fn priority(&self) -> i32 {
        self.queue.attrs().priority
    }

    fn report(&self) -> &CreationReport {
        &self.queue.report
    }

    fn ownership(&self) -> Ownership {
        self.ownership
    }

    fn query(&self) -> Result<Status> {
        ensure_not_in_callback()?;
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

    fn synchronize(&self) -> Result<()> {
        ensure_not_in_callback()?;
        self.sync(None)
    }

    fn synchronize_timeout(&self, timeout: Duration) -> Result<()> {
        ensure_not_in_callback()?;
        check_timeout(timeout)?;
        self.sync(Some(timeout))
    }

    fn wait_event(&self, event: &HostEvent) -> Result<()> {
        ensure_not_in_callback()?;
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

    fn enqueue_callback(&self, f: HostCallback) -> Result<()> {
        ensure_not_in_callback()?;
        self.device.shared().check()?;
        if self.queue.capture.is_capturing() {
            // An exactly-once callback cannot be replayed: refused, capture invalidated.
            self.queue.capture.gate("host_callback")?;
        }
        tracing::trace!(stream = self.queue.id, name = ?self.queue.name, "enqueue host callback");
        let slot = CallbackSlot::new(f, Arc::clone(&self.queue.panics));
        self.queue.push(Op::Callback(Arc::clone(&slot)))?;
        // Tracked after the push, so a failed enqueue drops the callback without calling it;
        // a fault in between is harmless (the worker fires the slot with the sticky error).
        self.device.shared().pending.track(&slot);
        Ok(())
    }

    fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        capture::begin_capture(self, mode)
    }

    fn end_capture(&self) -> Result<HostGraph> {
        capture::end_capture(self)
    }

    fn capture_status(&self) -> CaptureStatus {
        self.queue.capture.status()
    }

    fn attribute(&self, attr: StreamAttr) -> Result<StreamAttrValue> {
        attribute::attribute(self, attr)
    }

    fn set_attribute(&self, value: StreamAttrValue) -> Result<()> {
        attribute::set_attribute(self, value)
    }

    fn copy_attributes_from(&self, src: &Self) -> Result<()> {
        attribute::copy_attributes_from(self, src)
    }

    fn set_allocator(&self, allocator: Option<Arc<dyn Allocator>>) -> Result<()> {
        attribute::set_allocator(self, allocator)
    }

    fn allocator(&self) -> Result<Option<Arc<dyn Allocator>>> {
        attribute::allocator(self)
    }

    fn copy_peer(
        &self,
        src: &HostDeviceBuffer,
        src_offset: usize,
        dst: &HostDeviceBuffer,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        memory::copy_peer(self, src, src_offset, dst, dst_offset, len)
    }

    // ---- Stream memory operations (`stream::memop`) ----

    fn as_raw(&self) -> u64 {
        self.queue.id
    }

    // The trait declares this `unsafe` for vendor handles; on the host a raw handle is only an
    // id looked up in the device's registry, so nothing here relies on the caller's promise.
    #[allow(unsafe_code)]
    unsafe fn borrow_raw<'a>(device: &HostDevice, raw: u64) -> Result<Borrowed<'a, Self>> {
        ensure_not_in_callback()?;
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

    // --- ordering and allocation without host sync ---

    // --- end of ordering and allocation without host sync ---
}

// The hooks behind the user-facing methods of `Stream` (called by xstream-core only,
// after its checks).
impl xstream_core::__private::Sealed for HostStream {}

impl StreamHooks for HostStream {
    fn enqueue_copy_to_device(
        &self,
        _token: HookToken,
        src: xstream_core::HostSpan,
        dst: &HostDeviceBuffer,
        dst_offset: usize,
    ) -> Result<()> {
        memory::enqueue_copy_to_device(self, src, dst, dst_offset)
    }

    fn enqueue_copy_to_host(
        &self,
        _token: HookToken,
        src: &HostDeviceBuffer,
        src_offset: usize,
        dst: xstream_core::HostSpan,
    ) -> Result<()> {
        memory::enqueue_copy_to_host(self, src, src_offset, dst)
    }

    fn enqueue_memset_pattern(
        &self,
        _token: HookToken,
        buf: &HostDeviceBuffer,
        offset: usize,
        len: usize,
        value: xstream_core::MemsetPattern,
    ) -> Result<()> {
        memory::memset(self, buf, offset, len, value)
    }

    fn write_bytes_now(
        &self,
        _token: HookToken,
        dst: &HostDeviceBuffer,
        offset: usize,
        src: &[u8],
    ) -> Result<()> {
        memory::write_bytes_now(self, dst, offset, src)
    }

    fn read_bytes_now(
        &self,
        _token: HookToken,
        src: &HostDeviceBuffer,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<()> {
        memory::read_bytes_now(self, src, offset, dst)
    }

    fn enqueue_memset(
        &self,
        _token: HookToken,
        buf: &HostDeviceBuffer,
        offset: usize,
        len: usize,
        value: u8,
    ) -> Result<()> {
        memory::memset(
            self,
            buf,
            offset,
            len,
            xstream_core::MemsetPattern::U8(value),
        )
    }

    fn enqueue_write(
        &self,
        _token: HookToken,
        dst: &HostDeviceBuffer,
        offset: usize,
        data: Vec<u8>,
    ) -> Result<()> {
        memory::write(self, dst, offset, data)
    }

    fn enqueue_read(
        &self,
        _token: HookToken,
        src: &HostDeviceBuffer,
        offset: usize,
        len: usize,
    ) -> Result<Readback> {
        memory::read(self, src, offset, len)
    }

    fn enqueue_copy(
        &self,
        _token: HookToken,
        src: &HostDeviceBuffer,
        src_offset: usize,
        dst: &HostDeviceBuffer,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        memory::copy(self, src, src_offset, dst, dst_offset, len)
    }

    fn enqueue_free(&self, _token: HookToken, buf: HostDeviceBuffer) -> Result<()> {
        drop(buf);
        Ok(())
    }

    fn enqueue_builtin(
        &self,
        _token: HookToken,
        kernel: Kernel<'_, HostDeviceBuffer>,
    ) -> Result<()> {
        ensure_not_in_callback()?;
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

    fn enqueue_kernel(
        &self,
        _token: HookToken,
        f: &HostFunction,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, HostDeviceBuffer>],
    ) -> Result<()> {
        ensure_not_in_callback()?;
        let launch = kernel::prepare(self, f, cfg, args)?;
        self.submit("launch_kernel", Node::Kernel(Arc::new(launch)))
    }

    fn enqueue_wait_value32(
        &self,
        _token: HookToken,
        buf: &HostDeviceBuffer,
        offset: usize,
        value: u32,
        cond: WaitCondition,
    ) -> Result<()> {
        ensure_not_in_callback()?;
        let n = memop::node("wait_value32", buf, offset, 4, value.into(), Some(cond))?;
        self.submit("wait_value32", n)
    }

    fn enqueue_wait_value64(
        &self,
        _token: HookToken,
        buf: &HostDeviceBuffer,
        offset: usize,
        value: u64,
        cond: WaitCondition,
    ) -> Result<()> {
        ensure_not_in_callback()?;
        let n = memop::node("wait_value64", buf, offset, 8, value, Some(cond))?;
        self.submit("wait_value64", n)
    }

    fn enqueue_write_value32(
        &self,
        _token: HookToken,
        buf: &HostDeviceBuffer,
        offset: usize,
        value: u32,
    ) -> Result<()> {
        ensure_not_in_callback()?;
        let n = memop::node("write_value32", buf, offset, 4, value.into(), None)?;
        self.submit("write_value32", n)
    }

    fn enqueue_write_value64(
        &self,
        _token: HookToken,
        buf: &HostDeviceBuffer,
        offset: usize,
        value: u64,
    ) -> Result<()> {
        ensure_not_in_callback()?;
        let n = memop::node("write_value64", buf, offset, 8, value, None)?;
        self.submit("write_value64", n)
    }

    fn enqueue_reduce(
        &self,
        _token: HookToken,
        dst: &HostDeviceBuffer,
        dst_offset: usize,
        src: &HostDeviceBuffer,
        src_offset: usize,
        len: usize,
        r: xstream_core::Reduction,
    ) -> Result<()> {
        reduce::enqueue(self, dst, dst_offset, src, src_offset, len, r)
    }

    /// Holds the buffer's bytes until this stream's work enqueued so far ran: a stream-blocking
    /// callback that owns a reference to them (the host backend frees a buffer's bytes when
    /// the last reference goes, so no free can run ahead of the marked work). Refused during
    /// capture, like every callback.
    fn enqueue_record_use(&self, _token: HookToken, buf: &HostDeviceBuffer) -> Result<()> {
        ensure_not_in_callback()?;
        let keep = Arc::clone(&buf.inner);
        self.enqueue_callback(Box::new(move |_| drop(keep)))
    }
}
