//! Pure translation tables between portable and CUDA values (wgpu-hal `conv.rs` style).
//!
//! [`CUDA_FLAGS`] classifies every portable flag; `docs/FLAGS.md` mirrors it.
//! `INTERPROCESS` sets `CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING` (0x6): CUDA requires
//! timing to be disabled on interprocess events, so asking for `INTERPROCESS` gives an event
//! whose effective flags also contain `DISABLE_TIMING` (read back from the native bits).

use cudarc::driver::sys;
use xstream_core::{
    AccessPolicyWindow, AccessProperty, BackendKind, CaptureMode, CaptureStatus, EventFlags,
    FlagRow, FlagSet, FlagTable, StreamFlags, SyncPolicy,
};

/// `CU_STREAM_NON_BLOCKING`.
pub const CU_STREAM_NON_BLOCKING: u32 = 0x1;
/// `CU_EVENT_BLOCKING_SYNC`.
pub const CU_EVENT_BLOCKING_SYNC: u32 = 0x1;
/// `CU_EVENT_DISABLE_TIMING`.
pub const CU_EVENT_DISABLE_TIMING: u32 = 0x2;
/// `CU_EVENT_INTERPROCESS`.
pub const CU_EVENT_INTERPROCESS: u32 = 0x4;
/// `CU_EVENT_WAIT_EXTERNAL` (a `cuStreamWaitEvent` flag).
pub const CU_EVENT_WAIT_EXTERNAL: u32 = 0x1;

static STREAM_ROWS: &[FlagRow<StreamFlags>] = &[
    FlagRow::native(
        StreamFlags::NON_BLOCKING,
        "CU_STREAM_NON_BLOCKING",
        CU_STREAM_NON_BLOCKING,
        0,
    ),
    FlagRow::hint(
        StreamFlags::FAST_LAUNCH,
        "-",
        "CUDA streams need no dispatch-resource reservation; enqueues are already fast",
    ),
    FlagRow::emulated(
        StreamFlags::FAST_SYNC,
        "cuStreamQuery",
        "synchronize spin-polls cuStreamQuery instead of calling cuStreamSynchronize",
    ),
    FlagRow::emulated(
        StreamFlags::PERSISTENT,
        "cuStreamBeginCapture_v2(RELAXED)",
        "a RELAXED capture is begun at creation (and again after each end_capture)",
    ),
    FlagRow::hint(
        StreamFlags::HUGE,
        "-",
        "CUDA stream queues have no per-stream task limit to raise",
    ),
    FlagRow::unsupported(
        StreamFlags::CPU_SCHEDULE,
        "-",
        "CUDA has no AI-CPU scheduling streams",
    ),
    FlagRow::unsupported(
        StreamFlags::DEVICE_USE_ONLY,
        "-",
        "CUDA driver streams are host objects; device-side streams need CDP",
    ),
];

static EVENT_ROWS: &[FlagRow<EventFlags>] = &[
    FlagRow::native(
        EventFlags::BLOCKING_SYNC,
        "CU_EVENT_BLOCKING_SYNC",
        CU_EVENT_BLOCKING_SYNC,
        0,
    ),
    FlagRow::native(
        EventFlags::DISABLE_TIMING,
        "CU_EVENT_DISABLE_TIMING",
        CU_EVENT_DISABLE_TIMING,
        0,
    ),
    FlagRow::native(
        EventFlags::INTERPROCESS,
        "CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING",
        CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING,
        0,
    ),
    FlagRow::hint(
        EventFlags::EXTERNAL,
        "CU_EVENT_WAIT_EXTERNAL (per wait)",
        "CUDA takes EXTERNAL per call: CudaStream::wait_event_external during capture",
    ),
    FlagRow::unsupported(
        EventFlags::DEVICE_USE_ONLY,
        "-",
        "CUDA events are host objects",
    ),
];

/// The CUDA backend's flag translation table.
pub static CUDA_FLAGS: FlagTable = FlagTable {
    backend: BackendKind::Cuda,
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

/// Portable capture mode → `CUstreamCaptureMode`.
pub fn map_capture_mode(m: CaptureMode) -> sys::CUstreamCaptureMode {
    match m {
        CaptureMode::Global => sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL,
        CaptureMode::ThreadLocal => sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        CaptureMode::Relaxed => sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
    }
}

/// `CUstreamCaptureMode` → portable capture mode.
pub fn capture_mode_from_native(m: sys::CUstreamCaptureMode) -> CaptureMode {
    match m {
        sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL => CaptureMode::Global,
        sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL => CaptureMode::ThreadLocal,
        sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED => CaptureMode::Relaxed,
    }
}

/// `CUstreamCaptureStatus` → portable status.
pub fn capture_status_from_native(s: sys::CUstreamCaptureStatus) -> CaptureStatus {
    match s {
        sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE => CaptureStatus::None,
        sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE => CaptureStatus::Active,
        sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_INVALIDATED => {
            CaptureStatus::Invalidated
        }
    }
}

/// Portable sync policy → `CUsynchronizationPolicy`.
pub fn map_sync_policy(p: SyncPolicy) -> sys::CUsynchronizationPolicy {
    match p {
        SyncPolicy::Auto => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_AUTO,
        SyncPolicy::Spin => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_SPIN,
        SyncPolicy::Yield => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_YIELD,
        SyncPolicy::BlockingSync => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_BLOCKING_SYNC,
    }
}

/// `CUsynchronizationPolicy` → portable sync policy.
pub fn sync_policy_from_native(p: sys::CUsynchronizationPolicy) -> SyncPolicy {
    match p {
        sys::CUsynchronizationPolicy::CU_SYNC_POLICY_AUTO => SyncPolicy::Auto,
        sys::CUsynchronizationPolicy::CU_SYNC_POLICY_SPIN => SyncPolicy::Spin,
        sys::CUsynchronizationPolicy::CU_SYNC_POLICY_YIELD => SyncPolicy::Yield,
        sys::CUsynchronizationPolicy::CU_SYNC_POLICY_BLOCKING_SYNC => SyncPolicy::BlockingSync,
    }
}

/// Portable access property → `CUaccessProperty`.
pub fn map_access_property(p: AccessProperty) -> sys::CUaccessProperty {
    match p {
        AccessProperty::Normal => sys::CUaccessProperty::CU_ACCESS_PROPERTY_NORMAL,
        AccessProperty::Streaming => sys::CUaccessProperty::CU_ACCESS_PROPERTY_STREAMING,
        AccessProperty::Persisting => sys::CUaccessProperty::CU_ACCESS_PROPERTY_PERSISTING,
    }
}

/// `CUaccessProperty` → portable access property.
pub fn access_property_from_native(p: sys::CUaccessProperty) -> AccessProperty {
    match p {
        sys::CUaccessProperty::CU_ACCESS_PROPERTY_NORMAL => AccessProperty::Normal,
        sys::CUaccessProperty::CU_ACCESS_PROPERTY_STREAMING => AccessProperty::Streaming,
        sys::CUaccessProperty::CU_ACCESS_PROPERTY_PERSISTING => AccessProperty::Persisting,
    }
}

/// Portable access-policy window → `CUaccessPolicyWindow`.
pub fn map_access_policy_window(w: &AccessPolicyWindow) -> sys::CUaccessPolicyWindow {
    sys::CUaccessPolicyWindow {
        base_ptr: w.base as usize as *mut std::ffi::c_void,
        num_bytes: w.bytes,
        hitRatio: w.hit_ratio,
        hitProp: map_access_property(w.hit),
        missProp: map_access_property(w.miss),
    }
}

/// `CUaccessPolicyWindow` → portable access-policy window.
pub fn access_policy_window_from_native(w: &sys::CUaccessPolicyWindow) -> AccessPolicyWindow {
    AccessPolicyWindow {
        base: w.base_ptr as usize as u64,
        bytes: w.num_bytes,
        hit_ratio: w.hitRatio,
        hit: access_property_from_native(w.hitProp),
        miss: access_property_from_native(w.missProp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xstream_core::{Error, TranslationPolicy};

    #[test]
    fn table_is_total() {
        CUDA_FLAGS.check_total().unwrap();
        assert!(CUDA_FLAGS.to_markdown().contains("CU_STREAM_NON_BLOCKING"));
    }

    #[test]
    fn stream_flags() {
        let t = CUDA_FLAGS
            .stream_to_native(StreamFlags::NON_BLOCKING, TranslationPolicy::Strict)
            .unwrap();
        assert_eq!(t.native, 0x1);
        assert!(t.report.is_exact());
        let t = CUDA_FLAGS
            .stream_to_native(
                StreamFlags::FAST_SYNC | StreamFlags::PERSISTENT | StreamFlags::FAST_LAUNCH,
                TranslationPolicy::Strict,
            )
            .unwrap();
        assert_eq!(t.native, 0);
        assert_eq!(t.emulated, StreamFlags::FAST_SYNC | StreamFlags::PERSISTENT);
        assert_eq!(t.report.hints.len(), 1);
        for f in [StreamFlags::CPU_SCHEDULE, StreamFlags::DEVICE_USE_ONLY] {
            assert!(matches!(
                CUDA_FLAGS.stream_to_native(f, TranslationPolicy::Strict),
                Err(Error::UnsupportedFlag { .. })
            ));
            let t = CUDA_FLAGS
                .stream_to_native(f, TranslationPolicy::BestEffort)
                .unwrap();
            assert_eq!(t.report.dropped.len(), 1);
            assert!(!t.effective.contains(f));
        }
        assert_eq!(
            CUDA_FLAGS.stream_from_native(0x1),
            (StreamFlags::NON_BLOCKING, 0)
        );
        assert_eq!(
            CUDA_FLAGS.stream_from_native(0x0),
            (StreamFlags::empty(), 0)
        );
        assert_eq!(CUDA_FLAGS.stream_from_native(0x8).1, 0x8);
    }

    #[test]
    fn event_flags() {
        let t = CUDA_FLAGS
            .event_to_native(
                EventFlags::BLOCKING_SYNC | EventFlags::DISABLE_TIMING,
                TranslationPolicy::Strict,
            )
            .unwrap();
        assert_eq!(t.native, 0x3);
        let t = CUDA_FLAGS
            .event_to_native(EventFlags::INTERPROCESS, TranslationPolicy::Strict)
            .unwrap();
        assert_eq!(t.native, 0x6);
        let (back, unknown) = CUDA_FLAGS.event_from_native(0x6);
        assert_eq!(back, EventFlags::INTERPROCESS | EventFlags::DISABLE_TIMING);
        assert_eq!(unknown, 0);
        assert_eq!(
            CUDA_FLAGS.event_from_native(0x2).0,
            EventFlags::DISABLE_TIMING
        );
        let t = CUDA_FLAGS
            .event_to_native(EventFlags::EXTERNAL, TranslationPolicy::Strict)
            .unwrap();
        assert_eq!(t.native, 0);
        assert_eq!(t.report.hints.len(), 1);
        assert!(CUDA_FLAGS
            .event_to_native(EventFlags::DEVICE_USE_ONLY, TranslationPolicy::Strict)
            .is_err());
    }

    #[test]
    fn enums_round_trip() {
        for m in [
            CaptureMode::Global,
            CaptureMode::ThreadLocal,
            CaptureMode::Relaxed,
        ] {
            assert_eq!(capture_mode_from_native(map_capture_mode(m)), m);
        }
        for p in [
            SyncPolicy::Auto,
            SyncPolicy::Spin,
            SyncPolicy::Yield,
            SyncPolicy::BlockingSync,
        ] {
            assert_eq!(sync_policy_from_native(map_sync_policy(p)), p);
        }
        let w = AccessPolicyWindow {
            base: 0x1000,
            bytes: 4096,
            hit_ratio: 0.5,
            hit: AccessProperty::Persisting,
            miss: AccessProperty::Streaming,
        };
        assert_eq!(
            access_policy_window_from_native(&map_access_policy_window(&w)),
            w
        );
    }
}
