//! Stream tasks of the vendor areas that live in their own modules (value wait / write). A
//! module implements [`ExtTask`] and pushes `Task::Ext(Arc<..>)`; the stream worker runs it in
//! order like any other task, skips it once the context is poisoned, and keeps it in captures
//! and persistent streams.

use crate::stream::Stream;

/// A task a stream worker runs in order.
pub(crate) trait ExtTask: Send + Sync {
    /// Runs the task on `stream`'s worker. Long waits must return once
    /// `stream.cancelled(epoch)` (abort / force destroy) or the context is poisoned.
    fn run(&self, stream: &Stream, epoch: u64);
}
