//! The ACL flag table ([`ACL_FLAGS`]): every portable stream and event flag, classified, with
//! its ACL constant. Mirrors `docs/FLAGS.md`.
//!
//! Streams: `aclrtCreateStreamWithConfig(stream, priority, flag)`; the runtime refuses
//! `ACL_STREAM_DEVICE_USE_ONLY` with any other flag bit (107000), which the table's rule catches
//! before the call. Events: every portable event starts from `ACL_EVENT_SYNC |
//! ACL_EVENT_TIME_LINE` (waitable, timed); `DISABLE_TIMING` clears `TIME_LINE`; the special
//! kinds (IPC, EXTERNAL, DEVICE_USE_ONLY) replace the base and their bit must stand alone.
//!
//! The rules are checked on the native bits: portable flags without an ACL bit
//! (`NON_BLOCKING`, inherent; `BLOCKING_SYNC`, a hint; `DISABLE_TIMING` next to a special
//! kind, whose base it clears anyway) may accompany a lone flag.

use xstream_core::{
    BackendKind, Combination, EventFlags, FlagRow, FlagSet, FlagTable, StreamFlags,
};

use crate::sys::consts::*;

const BASE_EVENT: u32 = ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE;

static STREAM_ROWS: &[FlagRow<StreamFlags>] = &[
    FlagRow::native(StreamFlags::NON_BLOCKING, "(inherent)", 0, 0),
    FlagRow::native(
        StreamFlags::FAST_LAUNCH,
        "ACL_STREAM_FAST_LAUNCH",
        ACL_STREAM_FAST_LAUNCH,
        0,
    ),
    FlagRow::native(
        StreamFlags::FAST_SYNC,
        "ACL_STREAM_FAST_SYNC",
        ACL_STREAM_FAST_SYNC,
        0,
    ),
    FlagRow::native(
        StreamFlags::PERSISTENT,
        "ACL_STREAM_PERSISTENT",
        ACL_STREAM_PERSISTENT,
        0,
    ),
    FlagRow::native(StreamFlags::HUGE, "ACL_STREAM_HUGE", ACL_STREAM_HUGE, 0),
    FlagRow::native(
        StreamFlags::CPU_SCHEDULE,
        "ACL_STREAM_CPU_SCHEDULE (host synchronize/query wait on an internal event)",
        ACL_STREAM_CPU_SCHEDULE,
        0,
    ),
    FlagRow::native(
        StreamFlags::DEVICE_USE_ONLY,
        "ACL_STREAM_DEVICE_USE_ONLY (host synchronize/query wait on an internal event)",
        ACL_STREAM_DEVICE_USE_ONLY,
        0,
    ),
];

static EVENT_ROWS: &[FlagRow<EventFlags>] = &[
    FlagRow::hint(
        EventFlags::BLOCKING_SYNC,
        "-",
        "ACL has no spin/block choice per event: aclrtSynchronizeEvent always waits in the \
             runtime, so the request is accepted with no effect",
    ),
    FlagRow::native(
        EventFlags::DISABLE_TIMING,
        "no ACL_EVENT_TIME_LINE",
        0,
        ACL_EVENT_TIME_LINE,
    ),
    FlagRow::native(
        EventFlags::INTERPROCESS,
        "ACL_EVENT_IPC (aclrtCreateEventExWithFlag; only on devices with INTERPROCESS_EVENTS)",
        ACL_EVENT_IPC,
        BASE_EVENT,
    ),
    FlagRow::native(
        EventFlags::EXTERNAL,
        "ACL_EVENT_EXTERNAL (aclrtCreateEventWithFlag)",
        ACL_EVENT_EXTERNAL,
        BASE_EVENT,
    ),
    FlagRow::native(
        EventFlags::DEVICE_USE_ONLY,
        "ACL_EVENT_DEVICE_USE_ONLY (aclrtCreateEventWithFlag)",
        ACL_EVENT_DEVICE_USE_ONLY,
        BASE_EVENT,
    ),
];

/// The Ascend backend's flag table.
///
/// `NON_BLOCKING` is **inherent**: ACL streams never synchronize implicitly with the default
/// stream, so every stream behaves as non-blocking; a blocking request (no `NON_BLOCKING`)
/// cannot be honoured and is listed among the creation report's hints (so `is_exact()` is
/// false).
pub static ACL_FLAGS: FlagTable = FlagTable {
    backend: BackendKind::Ascend,
    stream: FlagSet {
        base: 0,
        rows: STREAM_ROWS,
        rules: &[Combination::Alone(
            StreamFlags::DEVICE_USE_ONLY,
            "the runtime refuses ACL_STREAM_DEVICE_USE_ONLY with any other flag bit (107000)",
        )],
    },
    event: FlagSet {
        base: BASE_EVENT,
        rows: EVENT_ROWS,
        rules: &[
            Combination::Alone(
                EventFlags::INTERPROCESS,
                "aclrtCreateEventExWithFlag takes ACL_EVENT_IPC only alone",
            ),
            Combination::Alone(
                EventFlags::EXTERNAL,
                "aclrtCreateEventWithFlag takes ACL_EVENT_EXTERNAL only alone",
            ),
            Combination::Alone(
                EventFlags::DEVICE_USE_ONLY,
                "aclrtCreateEventWithFlag takes ACL_EVENT_DEVICE_USE_ONLY only alone",
            ),
        ],
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use xstream_core::{Error, TranslationPolicy};

    #[test]
    fn total() {
        ACL_FLAGS.check_total().unwrap();
        assert!(ACL_FLAGS.to_markdown().contains("ACL_STREAM_FAST_SYNC"));
    }

    #[test]
    fn stream_bits_and_reverse() {
        for (f, bit) in [
            (StreamFlags::FAST_LAUNCH, 0x1),
            (StreamFlags::FAST_SYNC, 0x2),
            (StreamFlags::PERSISTENT, 0x4),
            (StreamFlags::HUGE, 0x8),
            (StreamFlags::CPU_SCHEDULE, 0x10),
            (StreamFlags::DEVICE_USE_ONLY, 0x20),
        ] {
            let t = ACL_FLAGS
                .stream_to_native(f, TranslationPolicy::Strict)
                .unwrap();
            assert_eq!(t.native, bit);
            assert!(t.effective.contains(StreamFlags::NON_BLOCKING | f));
            let (back, unknown) = ACL_FLAGS.stream_from_native(bit);
            assert_eq!(back, f | StreamFlags::NON_BLOCKING);
            assert_eq!(unknown, 0);
        }
        let t = ACL_FLAGS
            .stream_to_native(
                StreamFlags::FAST_LAUNCH | StreamFlags::FAST_SYNC,
                TranslationPolicy::Strict,
            )
            .unwrap();
        assert_eq!(t.native, 0x3);
        // The rule is on native bits: NON_BLOCKING is inherent (no bit), so it may accompany
        // DEVICE_USE_ONLY; FAST_SYNC has a bit: strict refuses, best effort drops it.
        let t = ACL_FLAGS
            .stream_to_native(
                StreamFlags::DEVICE_USE_ONLY | StreamFlags::NON_BLOCKING,
                TranslationPolicy::Strict,
            )
            .unwrap();
        assert_eq!(t.native, 0x20);
        let (own, _) = ACL_FLAGS.stream_from_native(t.native);
        assert_eq!(
            ACL_FLAGS
                .stream_to_native(own, TranslationPolicy::Strict)
                .unwrap()
                .native,
            0x20,
            "a DEVICE_USE_ONLY stream's own flags() create a stream"
        );
        for extra in [
            StreamFlags::FAST_SYNC,
            StreamFlags::FAST_LAUNCH,
            StreamFlags::HUGE,
        ] {
            assert!(matches!(
                ACL_FLAGS.stream_to_native(
                    StreamFlags::DEVICE_USE_ONLY | extra,
                    TranslationPolicy::Strict
                ),
                Err(Error::RejectedCombination { .. })
            ));
            let t = ACL_FLAGS
                .stream_to_native(
                    StreamFlags::DEVICE_USE_ONLY | extra,
                    TranslationPolicy::BestEffort,
                )
                .unwrap();
            assert_eq!(t.native, 0x20);
            assert_eq!(t.report.dropped.len(), 1);
            assert_eq!(t.report.dropped[0].0, extra.iter_names().next().unwrap().0);
            assert!(!t.effective.contains(extra));
        }
        assert_eq!(ACL_FLAGS.stream_from_native(0x100).1, 0x100);
    }

    #[test]
    fn event_bits() {
        let n = |f| {
            ACL_FLAGS
                .event_to_native(f, TranslationPolicy::Strict)
                .unwrap()
                .native
        };
        assert_eq!(n(EventFlags::empty()), 0x9);
        assert_eq!(n(EventFlags::DISABLE_TIMING), 0x1);
        assert_eq!(n(EventFlags::INTERPROCESS), 0x40);
        assert_eq!(n(EventFlags::EXTERNAL), 0x20);
        assert_eq!(n(EventFlags::DEVICE_USE_ONLY), 0x10);
        assert_eq!(n(EventFlags::BLOCKING_SYNC), 0x9);
        // Each of these is a lone native flag: the portable companions carry no bit.
        for (f, bit) in [
            (EventFlags::INTERPROCESS | EventFlags::DISABLE_TIMING, 0x40),
            (EventFlags::INTERPROCESS | EventFlags::BLOCKING_SYNC, 0x40),
            (EventFlags::EXTERNAL | EventFlags::DISABLE_TIMING, 0x20),
            (EventFlags::EXTERNAL | EventFlags::BLOCKING_SYNC, 0x20),
            (
                EventFlags::DEVICE_USE_ONLY | EventFlags::DISABLE_TIMING,
                0x10,
            ),
        ] {
            assert_eq!(n(f), bit, "{f:?}");
        }
        assert!(matches!(
            ACL_FLAGS.event_to_native(
                EventFlags::INTERPROCESS | EventFlags::EXTERNAL,
                TranslationPolicy::Strict
            ),
            Err(Error::RejectedCombination { .. })
        ));
        let t = ACL_FLAGS
            .event_to_native(
                EventFlags::INTERPROCESS | EventFlags::EXTERNAL,
                TranslationPolicy::BestEffort,
            )
            .unwrap();
        assert_eq!(t.native, 0x40);
        assert_eq!(t.report.dropped[0].0, "EXTERNAL");
        let (f, unknown) = ACL_FLAGS.event_from_native(0x1);
        assert_eq!(f, EventFlags::DISABLE_TIMING);
        assert_eq!(unknown, 0);
        let (f, _) = ACL_FLAGS.event_from_native(0x9);
        assert_eq!(f, EventFlags::empty());
    }
}
