//! The ACL flag table ([`ACL_FLAGS`]): every portable stream and event flag, classified, with
//! its ACL constant. Mirrors `docs/FLAGS.md`.
//!
//! Streams: `aclrtCreateStreamWithConfig(stream, priority, flag)`; the runtime refuses
//! `ACL_STREAM_DEVICE_USE_ONLY` with any other flag (107000), which the table's rule catches
//! before the call. Events: every portable event starts from `ACL_EVENT_SYNC |
//! ACL_EVENT_TIME_LINE` (waitable, timed); `DISABLE_TIMING` clears `TIME_LINE`; the special
//! kinds (IPC, EXTERNAL, DEVICE_USE_ONLY) replace the base and must stand alone.

use xstream_core::{
    BackendKind, Combination, EventFlags, FlagRow, FlagSet, FlagTable, StreamFlags, Translation,
};

use crate::sys::consts::*;

const BASE_EVENT: u32 = ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE;

static STREAM_ROWS: &[FlagRow<StreamFlags>] = &[
    FlagRow {
        flag: StreamFlags::NON_BLOCKING,
        native_name: "(inherent)",
        translation: Translation::Native { set: 0, clear: 0 },
    },
    FlagRow {
        flag: StreamFlags::FAST_LAUNCH,
        native_name: "ACL_STREAM_FAST_LAUNCH",
        translation: Translation::Native {
            set: ACL_STREAM_FAST_LAUNCH,
            clear: 0,
        },
    },
    FlagRow {
        flag: StreamFlags::FAST_SYNC,
        native_name: "ACL_STREAM_FAST_SYNC",
        translation: Translation::Native {
            set: ACL_STREAM_FAST_SYNC,
            clear: 0,
        },
    },
    FlagRow {
        flag: StreamFlags::PERSISTENT,
        native_name: "ACL_STREAM_PERSISTENT",
        translation: Translation::Native {
            set: ACL_STREAM_PERSISTENT,
            clear: 0,
        },
    },
    FlagRow {
        flag: StreamFlags::HUGE,
        native_name: "ACL_STREAM_HUGE",
        translation: Translation::Native {
            set: ACL_STREAM_HUGE,
            clear: 0,
        },
    },
    FlagRow {
        flag: StreamFlags::CPU_SCHEDULE,
        native_name: "ACL_STREAM_CPU_SCHEDULE",
        translation: Translation::Native {
            set: ACL_STREAM_CPU_SCHEDULE,
            clear: 0,
        },
    },
    FlagRow {
        flag: StreamFlags::DEVICE_USE_ONLY,
        native_name: "ACL_STREAM_DEVICE_USE_ONLY",
        translation: Translation::Native {
            set: ACL_STREAM_DEVICE_USE_ONLY,
            clear: 0,
        },
    },
];

static EVENT_ROWS: &[FlagRow<EventFlags>] = &[
    FlagRow {
        flag: EventFlags::BLOCKING_SYNC,
        native_name: "-",
        translation: Translation::Hint(
            "ACL has no spin/block choice per event: aclrtSynchronizeEvent always waits in the \
             runtime, so the request is accepted with no effect",
        ),
    },
    FlagRow {
        flag: EventFlags::DISABLE_TIMING,
        native_name: "no ACL_EVENT_TIME_LINE",
        translation: Translation::Native {
            set: 0,
            clear: ACL_EVENT_TIME_LINE,
        },
    },
    FlagRow {
        flag: EventFlags::INTERPROCESS,
        native_name: "ACL_EVENT_IPC (aclrtCreateEventExWithFlag)",
        translation: Translation::Native {
            set: ACL_EVENT_IPC,
            clear: BASE_EVENT,
        },
    },
    FlagRow {
        flag: EventFlags::EXTERNAL,
        native_name: "ACL_EVENT_EXTERNAL (aclrtCreateEventWithFlag)",
        translation: Translation::Native {
            set: ACL_EVENT_EXTERNAL,
            clear: BASE_EVENT,
        },
    },
    FlagRow {
        flag: EventFlags::DEVICE_USE_ONLY,
        native_name: "ACL_EVENT_DEVICE_USE_ONLY (aclrtCreateEventWithFlag)",
        translation: Translation::Native {
            set: ACL_EVENT_DEVICE_USE_ONLY,
            clear: BASE_EVENT,
        },
    },
];

/// The Ascend backend's flag table.
///
/// `NON_BLOCKING` is **inherent**: ACL streams never synchronize implicitly with the default
/// stream (facts sheet 6.4), so every stream behaves as non-blocking and a blocking request
/// (no `NON_BLOCKING`) is only a hint that ACL cannot honour.
pub static ACL_FLAGS: FlagTable = FlagTable {
    backend: BackendKind::Ascend,
    stream: FlagSet {
        base: 0,
        rows: STREAM_ROWS,
        rules: &[Combination::Alone(
            StreamFlags::DEVICE_USE_ONLY,
            "ACL_STREAM_DEVICE_USE_ONLY must be the only stream flag (runtime returns 107000)",
        )],
    },
    event: FlagSet {
        base: BASE_EVENT,
        rows: EVENT_ROWS,
        rules: &[
            Combination::Alone(
                EventFlags::INTERPROCESS,
                "ACL_EVENT_IPC must stand alone (aclrtCreateEventExWithFlag)",
            ),
            Combination::Alone(
                EventFlags::EXTERNAL,
                "ACL_EVENT_EXTERNAL must stand alone (aclrtCreateEventWithFlag)",
            ),
            Combination::Alone(
                EventFlags::DEVICE_USE_ONLY,
                "ACL_EVENT_DEVICE_USE_ONLY must stand alone (aclrtCreateEventWithFlag)",
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
        assert!(matches!(
            ACL_FLAGS.stream_to_native(
                StreamFlags::DEVICE_USE_ONLY | StreamFlags::FAST_SYNC,
                TranslationPolicy::BestEffort
            ),
            Err(Error::RejectedCombination { .. })
        ));
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
        assert!(ACL_FLAGS
            .event_to_native(
                EventFlags::INTERPROCESS | EventFlags::DISABLE_TIMING,
                TranslationPolicy::Strict
            )
            .is_err());
        let (f, unknown) = ACL_FLAGS.event_from_native(0x1);
        assert_eq!(f, EventFlags::DISABLE_TIMING);
        assert_eq!(unknown, 0);
        let (f, _) = ACL_FLAGS.event_from_native(0x9);
        assert_eq!(f, EventFlags::empty());
    }
}
