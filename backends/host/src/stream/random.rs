//! The built-in random fill on host buffers: the reference of `xstream_core::random`, run on
//! the stream's worker as a node (so a capture records it like a copy).

use std::sync::Arc;

use xstream_core::{RandomFill, Result};

use crate::buffer::BufInner;
use crate::worker::Node;
use crate::{HostDeviceBuffer, HostStream};

/// One queued fill.
#[derive(Debug, Clone)]
pub(crate) struct RandomOp {
    buf: Arc<BufInner>,
    offset: usize,
    len: usize,
    fill: RandomFill,
}

/// Enqueues the node (xstream-core checked the device, the range, the alignment and the
/// parameters, and answered a zero length).
pub(super) fn enqueue(
    s: &HostStream,
    buf: &HostDeviceBuffer,
    offset: usize,
    len: usize,
    fill: RandomFill,
) -> Result<()> {
    s.submit(
        "launch",
        Node::Random(RandomOp {
            buf: Arc::clone(&buf.inner),
            offset,
            len,
            fill,
        }),
    )
}

impl RandomOp {
    /// Runs the fill (on the stream's worker).
    pub(crate) fn run(&self) {
        if let Some(out) = self.buf.lock().get_mut(self.offset..self.offset + self.len) {
            xstream_core::random::fill(&self.fill, out);
        }
    }
}
