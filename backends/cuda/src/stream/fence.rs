//! The fence anchor of page-locked buffers ([`xstream_core::FenceAnchor`]): what lets a
//! `PinnedBuffer` record its fence event behind its copies once, on host access or a change of
//! stream, instead of one `cuEventRecord` behind every copy (`xstream_core::hostmem`).
//!
//! **The stream stays valid while an anchor lives.** The anchor holds the stream's
//! [`StreamHandle`], the one owner of the native `CUstream`: `cuStreamDestroy` runs in the
//! handle's `Drop`, when its last reference goes (`drop` module), so a `CudaStream` dropped
//! while a buffer still anchors on it leaves the native stream alive, and the record later
//! goes behind the copies the stream still holds (or completed), as it would have had the
//! owner lived. The owner's drop hands its keep-alive list (the copies' device buffers and
//! host spans) to a host function behind that work, so nothing the copies use is freed early.
//!
//! **A capture begun after the copies.** Once the stream is capturing, a record on it would be
//! a node of the graph, not a mark behind the copies. So a stream that lent an anchor records
//! a mark event of its own before each capture begins ([`FenceMark`], one `cuEventRecord`
//! per begin, only on such streams); an anchor asked to record while the stream captures
//! waits on the host for that mark instead (the copies it covers are then complete, and the
//! buffer's event, whose last record came before them, is complete too). Without a mark (a
//! capture begun outside xstream's `begin_capture`) the anchor refuses (`Unsupported`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use xstream_core::{Device, Error, Event, EventDesc, EventFlags, FenceAnchor, Result};

use super::{lock, CudaStream, StreamHandle, StreamState};
use crate::{CudaBackend, CudaEvent};

/// A stream's mark of the work before its capture, for the anchors lent on it (module docs).
#[derive(Default)]
pub(crate) struct FenceMark {
    /// An anchor was lent: a buffer may have copies on the stream not yet behind its fence.
    lent: AtomicBool,
    /// Recorded before each capture begins once `lent` is set.
    event: Mutex<Option<CudaEvent>>,
}

impl CudaStream {
    /// Before a capture begins (not capturing yet): records the mark behind the stream's work
    /// when an anchor was lent on it (module docs).
    pub(super) fn mark_before_capture(&self) -> Result<()> {
        let mark = &self.state.fence_mark;
        if !mark.lent.load(Ordering::Acquire) || self.state.capture.is_capturing() {
            return Ok(());
        }
        let mut ev = lock(&mark.event);
        let ev = match &mut *ev {
            Some(ev) => ev,
            none => none.insert(
                self.handle
                    .dev
                    .create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))?,
            ),
        };
        ev.record_on(&self.handle.dev, &self.handle, &self.state)
    }
}

/// A page-locked buffer's hold on the stream of its last copies.
pub(crate) struct CudaFenceAnchor {
    handle: Arc<StreamHandle>,
    state: Arc<StreamState>,
}

impl CudaFenceAnchor {
    /// An anchor on `s` for `event`, or `None` when `event` is of another context (the fence
    /// is then recorded behind each copy, which reports the mismatch as before).
    pub(super) fn new(s: &CudaStream, event: &CudaEvent) -> Option<Self> {
        if !event.same_context(&s.handle.dev) {
            return None;
        }
        s.state.fence_mark.lent.store(true, Ordering::Release);
        Some(Self {
            handle: Arc::clone(&s.handle),
            state: Arc::clone(&s.state),
        })
    }
}

impl FenceAnchor<CudaBackend> for CudaFenceAnchor {
    fn record(&self, event: &CudaEvent) -> Result<()> {
        if self.state.capture.is_capturing() {
            // A record now would be a node of the graph: wait for the mark (module docs).
            return match &*lock(&self.state.fence_mark.event) {
                Some(mark) => mark.synchronize(),
                None => Err(Error::unsupported(
                    xstream_core::BackendKind::Cuda,
                    "waiting for copies of a page-locked buffer whose stream has begun a \
                     capture since, with no mark before it (end the capture first)",
                )),
            };
        }
        event.record_on(&self.handle.dev, &self.handle, &self.state)
    }
}
