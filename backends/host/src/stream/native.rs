//! Host-only extensions of [`HostStream`]: native bits and the queue's counters.

use super::HostStream;

impl HostStream {
    /// The stream's native bits (see [`crate::conv`]).
    pub fn native_flags(&self) -> u32 {
        self.queue.native_flags
    }

    /// Work items enqueued for execution so far (implicit default-stream waits included).
    pub fn enqueued_count(&self) -> u64 {
        self.queue.enqueued()
    }

    /// Work items completed so far.
    pub fn completed_count(&self) -> u64 {
        self.queue.completed()
    }
}
