//! ACL error codes: the [`AclError`] newtype, its table (name and [`ErrorKind`]), and the
//! mapping to xstream's [`Error`] that keeps the code, its name, its kind and the vendor
//! message.

use xstream_core::{BackendKind, CaptureErrorKind, Error, ErrorKind, NativeError};

use ErrorKind::{
    Capture, DeviceLost, InvalidValue, NotAvailable, NotReady, Other, OutOfMemory,
    ResourceExhausted, Timeout, Unsupported, WrongDevice,
};

/// An `aclError` value other than `ACL_SUCCESS`, kept as the vendor reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AclError(pub i32);

/// `(code, name, kind)` for every code xstream knows (the CANN AscendCL API reference's
/// return-code list, plus the device-fault codes of `rt_error_codes.h`). The device faults that
/// poison the context are of kind [`ErrorKind::DeviceLost`] (sticky).
pub const CODES: &[(i32, &str, ErrorKind)] = &[
    (100_000, "ACL_ERROR_INVALID_PARAM", InvalidValue),
    (100_001, "ACL_ERROR_UNINITIALIZE", NotAvailable),
    (100_002, "ACL_ERROR_REPEAT_INITIALIZE", Other),
    (100_033, "ACL_ERROR_REPEAT_SUBSCRIBE", Other),
    (100_034, "ACL_ERROR_STREAM_NOT_SUBSCRIBE", Other),
    (100_035, "ACL_ERROR_THREAD_NOT_SUBSCRIBE", Other),
    (100_036, "ACL_ERROR_WAIT_CALLBACK_TIMEOUT", Timeout),
    (100_037, "ACL_ERROR_REPEAT_FINALIZE", Other),
    (200_000, "ACL_ERROR_BAD_ALLOC", OutOfMemory),
    (107_000, "ACL_ERROR_RT_PARAM_INVALID", InvalidValue),
    (107_001, "ACL_ERROR_RT_INVALID_DEVICEID", InvalidValue),
    (107_002, "ACL_ERROR_RT_CONTEXT_NULL", WrongDevice),
    (107_003, "ACL_ERROR_RT_STREAM_CONTEXT", WrongDevice),
    (107_006, "ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID", Other),
    (107_008, "ACL_ERROR_RT_ADDR_UNALIGNED", InvalidValue),
    (107_011, "ACL_ERROR_RT_STREAM_SUBSCRIBE", Other),
    (107_012, "ACL_ERROR_RT_THREAD_SUBSCRIBE", Other),
    (107_015, "ACL_ERROR_RT_STREAM_NO_CB_REG", Other),
    (107_019, "ACL_ERROR_RT_WAIT_TIMEOUT", Timeout),
    (107_020, "ACL_ERROR_RT_TASK_TIMEOUT", Timeout),
    (107_023, "ACL_ERROR_RT_STREAM_ABORT", Other),
    (107_027, "ACL_ERROR_RT_STREAM_CAPTURED", Capture),
    (107_028, "ACL_ERROR_RT_EVENT_CAPTURED", Capture),
    (107_029, "ACL_ERROR_RT_STREAM_NOT_CAPTURED", Capture),
    (
        107_030,
        "ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT",
        Unsupported,
    ),
    (107_031, "ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT", Capture),
    (107_036, "ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED", Capture),
    (107_038, "ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD", Capture),
    (207_000, "ACL_ERROR_RT_FEATURE_NOT_SUPPORT", Unsupported),
    (207_001, "ACL_ERROR_RT_MEMORY_ALLOCATION", OutOfMemory),
    (207_003, "ACL_ERROR_RT_AICORE_OVER_FLOW", Other),
    (
        207_005,
        "ACL_ERROR_RT_RESOURCE_ALLOC_FAIL",
        ResourceExhausted,
    ),
    (207_007, "ACL_ERROR_RT_NO_EVENT_RESOURCE", ResourceExhausted),
    (
        207_008,
        "ACL_ERROR_RT_NO_STREAM_RESOURCE",
        ResourceExhausted,
    ),
    (207_016, "ACL_ERROR_RT_AIVEC_OVER_FLOW", Other),
    (207_017, "ACL_ERROR_RT_OVER_FLOW", Other),
    (507_000, "ACL_ERROR_RT_INTERNAL_ERROR", Other),
    (507_001, "ACL_ERROR_RT_TS_ERROR", DeviceLost),
    // A full task queue, not the stream limit: stream creation does not retry after it.
    (507_002, "ACL_ERROR_RT_STREAM_TASK_FULL", Other),
    (507_004, "ACL_ERROR_RT_STREAM_NOT_COMPLETE", NotReady),
    (507_006, "ACL_ERROR_RT_EVENT_NOT_COMPLETE", NotReady),
    (507_010, "ACL_ERROR_RT_LOST_HEARTBEAT", DeviceLost),
    (507_011, "ACL_ERROR_RT_MODEL_EXECUTE", DeviceLost),
    (507_012, "ACL_ERROR_RT_REPORT_TIMEOUT", Timeout),
    (507_013, "ACL_ERROR_RT_SYS_DMA", DeviceLost),
    (507_014, "ACL_ERROR_RT_AICORE_TIMEOUT", DeviceLost),
    (507_015, "ACL_ERROR_RT_AICORE_EXCEPTION", DeviceLost),
    (507_016, "ACL_ERROR_RT_AICORE_TRAP_EXCEPTION", DeviceLost),
    (507_017, "ACL_ERROR_RT_AICPU_TIMEOUT", DeviceLost),
    (507_018, "ACL_ERROR_RT_AICPU_EXCEPTION", DeviceLost),
    (507_033, "ACL_ERROR_RT_DEV_SETUP_ERROR", DeviceLost),
    (507_034, "ACL_ERROR_RT_VECTOR_CORE_TIMEOUT", DeviceLost),
    (507_035, "ACL_ERROR_RT_VECTOR_CORE_EXCEPTION", DeviceLost),
    (
        507_036,
        "ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION",
        DeviceLost,
    ),
    (507_046, "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT", Timeout),
    (507_047, "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT", Timeout),
    (507_053, "ACL_ERROR_RT_DEVICE_MEM_ERROR", DeviceLost),
    (507_899, "ACL_ERROR_RT_DRV_INTERNAL_ERROR", DeviceLost),
    (507_903, "ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED", Capture),
    (507_904, "ACL_ERROR_RT_COMM_OP_RETRY_FAIL", DeviceLost),
];

impl AclError {
    /// The symbolic name (`"ACL_ERROR_UNKNOWN"` for codes outside [`CODES`]).
    pub fn name(self) -> &'static str {
        CODES
            .iter()
            .find(|c| c.0 == self.0)
            .map(|c| c.1)
            .unwrap_or("ACL_ERROR_UNKNOWN")
    }

    /// What the code means (`ErrorKind::Other` for codes outside [`CODES`]).
    pub fn kind(self) -> ErrorKind {
        CODES.iter().find(|c| c.0 == self.0).map_or(Other, |c| c.2)
    }

    /// Whether the code reports a device fault that poisons the context (kind
    /// [`ErrorKind::DeviceLost`]).
    pub fn is_sticky(self) -> bool {
        self.kind() == DeviceLost
    }

    /// The native error record, with the vendor's message when there is one.
    pub fn native(self, api: &'static str, message: Option<String>) -> NativeError {
        NativeError::new(
            BackendKind::Ascend,
            api,
            i64::from(self.0),
            self.name(),
            self.kind(),
        )
        .with_message(message)
    }
}

impl std::fmt::Display for AclError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

impl std::error::Error for AclError {}

/// Maps an ACL code returned by `api` to xstream's [`Error`], keeping the code, its name, its
/// kind ([`CODES`]) and `message` (the `aclGetRecentErrMsg` text).
///
/// | codes | xstream error |
/// |---|---|
/// | 507046, 507047 | [`Error::Timeout`] (the caller fills the duration via [`with_timeout`]) |
/// | 107027 / 107028 / 107029 / 107031 / 107036 / 107038 / 507903 | [`Error::Capture`] naming the API |
/// | everything else | [`Error::Native`] of the table's kind: 200000, 207001 `OutOfMemory`; 207005, 207007, 207008 `ResourceExhausted`; 107002, 107003 `WrongDevice`; 207000 `Unsupported`; device faults `DeviceLost` (sticky); ... |
pub fn map_error(api: &'static str, code: i32, message: Option<String>) -> Error {
    let capture = |kind| Error::Capture { op: api, kind };
    match code {
        507_046 | 507_047 => Error::Timeout(std::time::Duration::ZERO),
        107_027 | 107_028 => capture(CaptureErrorKind::Unsupported),
        107_029 => capture(CaptureErrorKind::NotCapturing),
        107_031 => capture(CaptureErrorKind::NotCapturable),
        107_036 => capture(CaptureErrorKind::Isolation),
        107_038 => capture(CaptureErrorKind::WrongThread),
        507_903 => capture(CaptureErrorKind::Invalidated),
        _ => Error::Native(AclError(code).native(api, message)),
    }
}

/// Replaces the zero duration of a mapped timeout with the real one.
pub fn with_timeout(e: Error, d: std::time::Duration) -> Error {
    match e {
        Error::Timeout(_) => Error::Timeout(d),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_maps_and_keeps_its_number_name_and_kind() {
        let mut codes: Vec<i32> = CODES.iter().map(|c| c.0).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), CODES.len(), "a code listed twice");
        for &(code, name, kind) in CODES {
            assert_eq!(AclError(code).name(), name);
            let e = map_error("aclrtX", code, Some("msg".into()));
            match &e {
                Error::Timeout(_) => assert_eq!(kind, Timeout, "{name}"),
                Error::Capture { op, .. } => {
                    assert_eq!((kind, *op), (Capture, "aclrtX"), "{name}");
                }
                _ => {
                    let n = e.native().unwrap_or_else(|| panic!("{name}: {e:?}"));
                    assert_eq!(
                        (n.backend, n.code, n.name, n.kind),
                        (BackendKind::Ascend, i64::from(code), name, kind)
                    );
                    assert_eq!(n.sticky, kind == DeviceLost, "{name}");
                    assert_eq!(n.message.as_deref(), Some("msg"));
                    assert_eq!(e.kind(), kind, "{name}");
                }
            }
        }
    }

    #[test]
    fn classes() {
        for (code, kind) in [
            (207_008, ResourceExhausted),
            (207_007, ResourceExhausted),
            (207_005, ResourceExhausted),
            (107_002, WrongDevice),
            (107_003, WrongDevice),
            (200_000, OutOfMemory),
            (207_001, OutOfMemory),
            (207_000, Unsupported),
            (507_010, DeviceLost),
            (507_033, DeviceLost),
            (507_899, DeviceLost),
            (507_004, NotReady),
            (107_000, InvalidValue),
        ] {
            let e = map_error("a", code, None);
            assert_eq!(e.kind(), kind, "{code}");
            assert_eq!(e.native().map(|n| n.code), Some(i64::from(code)));
        }
        assert!(matches!(map_error("a", 507_046, None), Error::Timeout(_)));
        assert!(matches!(map_error("a", 507_047, None), Error::Timeout(_)));
        for c in [
            107_027, 107_028, 107_029, 107_031, 107_036, 107_038, 507_903,
        ] {
            assert!(
                matches!(map_error("a", c, None), Error::Capture { .. }),
                "{c}"
            );
        }
        assert!(matches!(
            map_error("a", 507_903, None),
            Error::Capture {
                kind: CaptureErrorKind::Invalidated,
                ..
            }
        ));
        assert!(map_error("a", 507_035, None).is_sticky());
        assert!(!map_error("a", 507_000, None).is_sticky());
        assert!(map_error("a", 507_010, None).is_device_lost());
        assert_eq!(AclError(42).name(), "ACL_ERROR_UNKNOWN");
        assert_eq!(map_error("a", 42, None).kind(), Other);
        assert!(matches!(
            with_timeout(map_error("a", 507_046, None), std::time::Duration::from_millis(3)),
            Error::Timeout(d) if d.as_millis() == 3
        ));
    }
}
