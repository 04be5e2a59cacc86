//! The host backend's translation tables, as data (STYLE.md section 3).
//!
//! The host backend has no vendor, so its "native" bits are its own: the bits a [`HostStream`]
//! or [`HostEvent`] stores and reports through `native_flags()`. Everything else here is a pure
//! function of its arguments.
//!
//! | object | native bit | meaning |
//! |---|---|---|
//! | stream | [`STREAM_NON_BLOCKING`] | the stream is outside the legacy default-stream rule |
//! | stream | [`STREAM_SPIN_SYNC`] | `synchronize` spins instead of sleeping |
//! | event | [`EVENT_BLOCKING_SYNC`] | `synchronize` blocks on a condvar at once |
//! | event | [`EVENT_DISABLE_TIMING`] | records take no timestamp |
//! | event | [`EVENT_INTERPROCESS`] | the event's state is shared with other processes ([`crate::ipc`]) |
//!
//! [`HostStream`]: crate::HostStream
//! [`HostEvent`]: crate::HostEvent

use xstream_core::{
    BackendKind, EventFlags, FlagRow, FlagSet, FlagTable, PriorityRange, StreamFlags, SyncPolicy,
    Translation,
};

/// Native stream bit: not part of the legacy default-stream rule.
pub const STREAM_NON_BLOCKING: u32 = 0x1;
/// Native stream bit: `synchronize` spins (with `spin_loop`) instead of sleeping.
pub const STREAM_SPIN_SYNC: u32 = 0x2;
/// Native event bit: `synchronize` blocks on a condvar at once, without the initial spin.
pub const EVENT_BLOCKING_SYNC: u32 = 0x1;
/// Native event bit: records take no timestamp.
pub const EVENT_DISABLE_TIMING: u32 = 0x2;
/// Native event bit: the event's state is shared with other processes (a file of `/dev/shm`,
/// see [`crate::ipc`]); set with [`EVENT_DISABLE_TIMING`], as CUDA requires of its
/// interprocess events.
pub const EVENT_INTERPROCESS: u32 = 0x4;

/// The host priority range: CUDA's scale (lower is more urgent). Priorities are recorded and
/// reported; the worker threads are scheduled by the OS, which does not see them.
pub const HOST_PRIORITY_RANGE: PriorityRange = PriorityRange {
    least: 0,
    greatest: -5,
    default: 0,
};

static STREAM_ROWS: &[FlagRow<StreamFlags>] = &[
    FlagRow::native(
        StreamFlags::NON_BLOCKING,
        "HOST_STREAM_NON_BLOCKING",
        STREAM_NON_BLOCKING,
        0,
    ),
    FlagRow::hint(
        StreamFlags::FAST_LAUNCH,
        "-",
        "an enqueue is a push onto an in-memory queue; there are no dispatch resources to reserve",
    ),
    FlagRow::native(
        StreamFlags::FAST_SYNC,
        "HOST_STREAM_SPIN_SYNC",
        STREAM_SPIN_SYNC,
        0,
    ),
    FlagRow::emulated(
        StreamFlags::PERSISTENT,
        "-",
        "recorded from creation (a relaxed capture begun by create_stream); query/synchronize \
             return at once; end_capture yields the graph and recording starts again",
    ),
    FlagRow::hint(StreamFlags::HUGE, "-", "the host queue is unbounded"),
    FlagRow {
        flag: StreamFlags::CPU_SCHEDULE,
        native_name: "-",
        // Inherent rather than a hint: every host stream *is* scheduled on a CPU thread, so
        // the behaviour the flag asks for is always present and is reported back on every
        // stream (portable code that requires it sees that it has it).
        translation: Translation::Native { set: 0, clear: 0 },
    },
    FlagRow::unsupported(
        StreamFlags::DEVICE_USE_ONLY,
        "-",
        "the host backend has no device-side code that could own a stream",
    ),
];

static EVENT_ROWS: &[FlagRow<EventFlags>] = &[
    FlagRow::native(
        EventFlags::BLOCKING_SYNC,
        "HOST_EVENT_BLOCKING_SYNC",
        EVENT_BLOCKING_SYNC,
        0,
    ),
    FlagRow::native(
        EventFlags::DISABLE_TIMING,
        "HOST_EVENT_DISABLE_TIMING",
        EVENT_DISABLE_TIMING,
        0,
    ),
    FlagRow::native(
        EventFlags::INTERPROCESS,
        "HOST_EVENT_INTERPROCESS | HOST_EVENT_DISABLE_TIMING",
        EVENT_INTERPROCESS | EVENT_DISABLE_TIMING,
        0,
    ),
    FlagRow::hint(
        EventFlags::EXTERNAL,
        "-",
        "any host event may be waited on from outside a capture; nothing to mark",
    ),
    FlagRow::unsupported(
        EventFlags::DEVICE_USE_ONLY,
        "-",
        "the host backend has no device-side code that could own an event",
    ),
];

/// The host backend's flag table (also [`Backend::flag_table`](xstream_core::Backend)).
pub static HOST_FLAGS: FlagTable = FlagTable {
    backend: BackendKind::Host,
    stream: FlagSet {
        base: 0,
        rows: STREAM_ROWS,
        rules: &[],
    },
    event: FlagSet {
        base: 0,
        rows: EVENT_ROWS,
        rules: &[],
    },
};

/// How a thread waits for a stream or an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitMode {
    /// Busy-poll with `std::hint::spin_loop`.
    Spin,
    /// Poll, yielding the core between polls.
    Yield,
    /// Spin briefly (a few microseconds), then block on a condvar.
    SpinThenBlock,
    /// Block on a condvar at once.
    Block,
}

/// How `synchronize` waits on a stream with these native bits and this sync-policy attribute.
pub fn map_stream_wait(native: u32, policy: SyncPolicy) -> WaitMode {
    match policy {
        SyncPolicy::Spin => WaitMode::Spin,
        SyncPolicy::Yield => WaitMode::Yield,
        SyncPolicy::BlockingSync => WaitMode::Block,
        SyncPolicy::Auto if native & STREAM_SPIN_SYNC != 0 => WaitMode::Spin,
        SyncPolicy::Auto => WaitMode::Block,
    }
}

/// How `synchronize` waits on an event with these native bits: `BLOCKING_SYNC` blocks at
/// once; the default spins briefly, then blocks (CUDA's default spins for good; a host thread
/// that spins for a long wait would starve the worker it waits for on a small machine).
pub fn map_event_wait(native: u32) -> WaitMode {
    if native & EVENT_BLOCKING_SYNC != 0 {
        WaitMode::Block
    } else {
        WaitMode::SpinThenBlock
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xstream_core::TranslationPolicy;

    #[test]
    fn table_is_total() {
        HOST_FLAGS.check_total().unwrap();
        assert_eq!(HOST_FLAGS.backend, BackendKind::Host);
    }

    #[test]
    fn stream_round_trip() {
        let t = HOST_FLAGS
            .stream_to_native(
                StreamFlags::NON_BLOCKING | StreamFlags::FAST_SYNC,
                TranslationPolicy::Strict,
            )
            .unwrap();
        assert_eq!(t.native, STREAM_NON_BLOCKING | STREAM_SPIN_SYNC);
        let (back, unknown) = HOST_FLAGS.stream_from_native(t.native);
        assert_eq!(unknown, 0);
        // CPU_SCHEDULE is inherent, so it comes back on every stream.
        assert_eq!(back, t.effective);
        assert_eq!(
            back,
            StreamFlags::NON_BLOCKING | StreamFlags::FAST_SYNC | StreamFlags::CPU_SCHEDULE
        );
        let (_, unknown) = HOST_FLAGS.stream_from_native(0x80);
        assert_eq!(unknown, 0x80);
    }

    #[test]
    fn event_round_trip_and_refusals() {
        let t = HOST_FLAGS
            .event_to_native(
                EventFlags::BLOCKING_SYNC | EventFlags::DISABLE_TIMING,
                TranslationPolicy::Strict,
            )
            .unwrap();
        assert_eq!(t.native, EVENT_BLOCKING_SYNC | EVENT_DISABLE_TIMING);
        assert_eq!(HOST_FLAGS.event_from_native(t.native), (t.effective, 0));
        let t = HOST_FLAGS
            .event_to_native(EventFlags::INTERPROCESS, TranslationPolicy::Strict)
            .unwrap();
        assert_eq!(t.native, EVENT_INTERPROCESS | EVENT_DISABLE_TIMING);
        assert_eq!(
            HOST_FLAGS.event_from_native(t.native).0,
            EventFlags::INTERPROCESS | EventFlags::DISABLE_TIMING
        );
        let t = HOST_FLAGS
            .stream_to_native(
                StreamFlags::all() - StreamFlags::DEVICE_USE_ONLY,
                TranslationPolicy::Strict,
            )
            .unwrap();
        assert_eq!(t.emulated, StreamFlags::PERSISTENT);
        assert_eq!(t.report.hints.len(), 2);
        let t = HOST_FLAGS
            .stream_to_native(StreamFlags::DEVICE_USE_ONLY, TranslationPolicy::BestEffort)
            .unwrap();
        assert_eq!(t.report.dropped.len(), 1);
        assert!(!t.effective.contains(StreamFlags::DEVICE_USE_ONLY));
    }

    #[test]
    fn wait_modes() {
        assert_eq!(map_stream_wait(0, SyncPolicy::Auto), WaitMode::Block);
        assert_eq!(
            map_stream_wait(STREAM_SPIN_SYNC, SyncPolicy::Auto),
            WaitMode::Spin
        );
        assert_eq!(
            map_stream_wait(STREAM_SPIN_SYNC, SyncPolicy::BlockingSync),
            WaitMode::Block
        );
        assert_eq!(map_stream_wait(0, SyncPolicy::Yield), WaitMode::Yield);
        assert_eq!(map_event_wait(EVENT_BLOCKING_SYNC), WaitMode::Block);
        assert_eq!(map_event_wait(0), WaitMode::SpinThenBlock);
    }
}
