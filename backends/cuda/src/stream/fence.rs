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

use std::sync::Arc;

use xstream_core::{Error, FenceAnchor, Result};

use super::{CudaStream, StreamHandle, StreamState};
use crate::{CudaBackend, CudaEvent};

/// A page-locked buffer's hold on the stream of its last copies.
pub(crate) struct CudaFenceAnchor {
    handle: Arc<StreamHandle>,
    state: Arc<StreamState>,
}

impl CudaFenceAnchor {
    /// An anchor on `s` for `event`, or `None` when `event` is of another context (the fence
    /// is then recorded behind each copy, which reports the mismatch as before).
    pub(super) fn new(s: &CudaStream, event: &CudaEvent) -> Option<Self> {
        event.same_context(&s.handle.dev).then(|| Self {
            handle: Arc::clone(&s.handle),
            state: Arc::clone(&s.state),
        })
    }
}

impl FenceAnchor<CudaBackend> for CudaFenceAnchor {
    fn record(&self, event: &CudaEvent) -> Result<()> {
        if self.state.capture.is_capturing() {
            // A record now would be a node of the graph, not a mark behind the copies.
            return Err(Error::unsupported(
                xstream_core::BackendKind::Cuda,
                "waiting for copies of a page-locked buffer whose stream has begun a capture \
                 since (end the capture first)",
            ));
        }
        event.record_on(&self.handle.dev, &self.handle, &self.state)
    }
}
