//! Portable stream and event flags.
//!
//! Each flag is translated per backend through a [`FlagTable`](crate::FlagTable); see
//! `docs/FLAGS.md` for the tables.

bitflags::bitflags! {
    /// Portable stream creation flags: the union of CUDA's `CU_STREAM_*` and ACL's
    /// `ACL_STREAM_*` flags.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct StreamFlags: u32 {
        /// The stream does not synchronize implicitly with the device's default stream
        /// (CUDA `CU_STREAM_NON_BLOCKING`). Without it, a stream follows the legacy
        /// default-stream rule: it waits for the default stream and the default stream waits
        /// for it.
        const NON_BLOCKING = 1 << 0;
        /// Reserve dispatch resources at creation: slower creation, faster enqueues
        /// (ACL `ACL_STREAM_FAST_LAUNCH`).
        const FAST_LAUNCH = 1 << 1;
        /// `synchronize` polls actively instead of sleeping: lower latency, one busy core
        /// (ACL `ACL_STREAM_FAST_SYNC`).
        const FAST_SYNC = 1 << 2;
        /// Work is recorded for replay, not executed, until bound into a graph
        /// (ACL `ACL_STREAM_PERSISTENT`).
        const PERSISTENT = 1 << 3;
        /// The stream may hold more queued tasks (ACL `ACL_STREAM_HUGE`).
        const HUGE = 1 << 4;
        /// The stream carries AI-CPU scheduling tasks (ACL `ACL_STREAM_CPU_SCHEDULE`).
        const CPU_SCHEDULE = 1 << 5;
        /// The stream is used only from device code (ACL `ACL_STREAM_DEVICE_USE_ONLY`).
        const DEVICE_USE_ONLY = 1 << 6;
    }
}

bitflags::bitflags! {
    /// Portable event creation flags: the union of CUDA's `CU_EVENT_*` and ACL's
    /// `ACL_EVENT_*` flags. The empty set is a timing-enabled event that streams can wait on.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct EventFlags: u32 {
        /// `synchronize` blocks the thread instead of spinning
        /// (CUDA `CU_EVENT_BLOCKING_SYNC`).
        const BLOCKING_SYNC = 1 << 0;
        /// No timestamps: cheaper record and wait; `elapsed` fails with
        /// [`Error::TimingDisabled`](crate::Error::TimingDisabled)
        /// (CUDA `CU_EVENT_DISABLE_TIMING`; ACL: no `ACL_EVENT_TIME_LINE`).
        const DISABLE_TIMING = 1 << 1;
        /// The event can be shared with other processes (CUDA `CU_EVENT_INTERPROCESS`, ACL
        /// `ACL_EVENT_IPC`).
        const INTERPROCESS = 1 << 2;
        /// The event may be waited on from outside a capture (ACL `ACL_EVENT_EXTERNAL`).
        const EXTERNAL = 1 << 3;
        /// The event is used only from device code (ACL `ACL_EVENT_DEVICE_USE_ONLY`).
        const DEVICE_USE_ONLY = 1 << 4;
    }
}

impl StreamFlags {
    /// The name of a single flag, as in `docs/FLAGS.md`.
    pub fn name(self) -> &'static str {
        flag_name(self)
    }
}

impl EventFlags {
    /// The name of a single flag, as in `docs/FLAGS.md`.
    pub fn name(self) -> &'static str {
        flag_name(self)
    }
}

fn flag_name<F: bitflags::Flags + Copy + PartialEq>(f: F) -> &'static str {
    F::FLAGS
        .iter()
        .find(|x| *x.value() == f)
        .map(|x| x.name())
        .unwrap_or("<combination>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(StreamFlags::FAST_SYNC.name(), "FAST_SYNC");
        assert_eq!(EventFlags::DISABLE_TIMING.name(), "DISABLE_TIMING");
        assert_eq!(
            (StreamFlags::FAST_SYNC | StreamFlags::HUGE).name(),
            "<combination>"
        );
    }
}
