//! The built-in reduce on host buffers: the reference of `xstream_core::reduce`, run on the
//! stream's worker as a node (so a capture records it like a copy).

use std::sync::Arc;

use xstream_core::{Reduction, Result};

use crate::buffer::BufInner;
use crate::worker::Node;
use crate::HostStream;

/// One queued reduce.
#[derive(Debug, Clone)]
pub(crate) struct ReduceOp {
    dst: Arc<BufInner>,
    dst_offset: usize,
    src: Arc<BufInner>,
    src_offset: usize,
    len: usize,
    r: Reduction,
}

/// Enqueues the node (xstream-core checked the devices, the range, the element alignment and
/// the overlap; a zero length never gets here).
pub(super) fn enqueue(
    s: &HostStream,
    dst: super::Span<'_>,
    src: super::Span<'_>,
    r: Reduction,
) -> Result<()> {
    s.submit(
        "reduce",
        Node::Reduce(ReduceOp {
            dst: Arc::clone(&dst.buffer().inner),
            dst_offset: dst.offset(),
            src: Arc::clone(&src.buffer().inner),
            src_offset: src.offset(),
            len: dst.len(),
            r,
        }),
    )
}

impl ReduceOp {
    /// Runs the operation (on the stream's worker).
    pub(crate) fn run(&self) {
        let (d_o, so, len) = (self.dst_offset, self.src_offset, self.len);
        if Arc::ptr_eq(&self.dst, &self.src) {
            // Same buffer: the ranges are identical or disjoint (checked at enqueue).
            let mut g = self.dst.lock();
            if d_o + len > g.len() || so + len > g.len() {
                return;
            }
            let src: Vec<u8> = g[so..so + len].to_vec();
            xstream_core::reduce::apply(self.r, &mut g[d_o..d_o + len], &src);
            return;
        }
        // Two locks in address order, as copies take them.
        let (s, mut d);
        if self.src.addr() < self.dst.addr() {
            s = self.src.lock();
            d = self.dst.lock();
        } else {
            d = self.dst.lock();
            s = self.src.lock();
        }
        if let (Some(from), Some(to)) = (s.get(so..so + len), d.get_mut(d_o..d_o + len)) {
            xstream_core::reduce::apply(self.r, to, from);
        }
    }
}
