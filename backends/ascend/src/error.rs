//! ACL error codes: the [`AclError`] newtype, its name table, and the mapping to xstream's
//! [`Error`] that keeps the code, its name and the vendor message.

use xstream_core::{BackendKind, CaptureErrorKind, Error, NativeError};

/// An `aclError` value other than `ACL_SUCCESS`, kept as the vendor reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AclError(pub i32);

/// `(code, name, sticky)` for every code xstream knows (the CANN AscendCL API reference's return-code list, plus the
/// device-fault codes of `rt_error_codes.h`).
pub const CODES: &[(i32, &str, bool)] = &[
    (100_000, "ACL_ERROR_INVALID_PARAM", false),
    (100_001, "ACL_ERROR_UNINITIALIZE", false),
    (100_002, "ACL_ERROR_REPEAT_INITIALIZE", false),
    (100_033, "ACL_ERROR_REPEAT_SUBSCRIBE", false),
    (100_034, "ACL_ERROR_STREAM_NOT_SUBSCRIBE", false),
    (100_035, "ACL_ERROR_THREAD_NOT_SUBSCRIBE", false),
    (100_036, "ACL_ERROR_WAIT_CALLBACK_TIMEOUT", false),
    (100_037, "ACL_ERROR_REPEAT_FINALIZE", false),
    (200_000, "ACL_ERROR_BAD_ALLOC", false),
    (107_000, "ACL_ERROR_RT_PARAM_INVALID", false),
    (107_001, "ACL_ERROR_RT_INVALID_DEVICEID", false),
    (107_002, "ACL_ERROR_RT_CONTEXT_NULL", false),
    (107_003, "ACL_ERROR_RT_STREAM_CONTEXT", false),
    (107_006, "ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID", false),
    (107_008, "ACL_ERROR_RT_ADDR_UNALIGNED", false),
    (107_011, "ACL_ERROR_RT_STREAM_SUBSCRIBE", false),
    (107_012, "ACL_ERROR_RT_THREAD_SUBSCRIBE", false),
    (107_015, "ACL_ERROR_RT_STREAM_NO_CB_REG", false),
    (107_019, "ACL_ERROR_RT_WAIT_TIMEOUT", false),
    (107_020, "ACL_ERROR_RT_TASK_TIMEOUT", false),
    (107_023, "ACL_ERROR_RT_STREAM_ABORT", false),
    (107_027, "ACL_ERROR_RT_STREAM_CAPTURED", false),
    (107_028, "ACL_ERROR_RT_EVENT_CAPTURED", false),
    (107_029, "ACL_ERROR_RT_STREAM_NOT_CAPTURED", false),
    (107_030, "ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT", false),
    (107_031, "ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT", false),
    (107_036, "ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED", false),
    (107_038, "ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD", false),
    (207_000, "ACL_ERROR_RT_FEATURE_NOT_SUPPORT", false),
    (207_001, "ACL_ERROR_RT_MEMORY_ALLOCATION", false),
    (207_003, "ACL_ERROR_RT_AICORE_OVER_FLOW", false),
    (207_005, "ACL_ERROR_RT_RESOURCE_ALLOC_FAIL", false),
    (207_007, "ACL_ERROR_RT_NO_EVENT_RESOURCE", false),
    (207_008, "ACL_ERROR_RT_NO_STREAM_RESOURCE", false),
    (207_016, "ACL_ERROR_RT_AIVEC_OVER_FLOW", false),
    (207_017, "ACL_ERROR_RT_OVER_FLOW", false),
    (507_000, "ACL_ERROR_RT_INTERNAL_ERROR", false),
    (507_001, "ACL_ERROR_RT_TS_ERROR", true),
    (507_002, "ACL_ERROR_RT_STREAM_TASK_FULL", false),
    (507_004, "ACL_ERROR_RT_STREAM_NOT_COMPLETE", false),
    (507_006, "ACL_ERROR_RT_EVENT_NOT_COMPLETE", false),
    (507_010, "ACL_ERROR_RT_LOST_HEARTBEAT", true),
    (507_011, "ACL_ERROR_RT_MODEL_EXECUTE", true),
    (507_012, "ACL_ERROR_RT_REPORT_TIMEOUT", false),
    (507_013, "ACL_ERROR_RT_SYS_DMA", true),
    (507_014, "ACL_ERROR_RT_AICORE_TIMEOUT", true),
    (507_015, "ACL_ERROR_RT_AICORE_EXCEPTION", true),
    (507_016, "ACL_ERROR_RT_AICORE_TRAP_EXCEPTION", true),
    (507_017, "ACL_ERROR_RT_AICPU_TIMEOUT", true),
    (507_018, "ACL_ERROR_RT_AICPU_EXCEPTION", true),
    (507_033, "ACL_ERROR_RT_DEV_SETUP_ERROR", true),
    (507_034, "ACL_ERROR_RT_VECTOR_CORE_TIMEOUT", true),
    (507_035, "ACL_ERROR_RT_VECTOR_CORE_EXCEPTION", true),
    (507_036, "ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION", true),
    (507_046, "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT", false),
    (507_047, "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT", false),
    (507_053, "ACL_ERROR_RT_DEVICE_MEM_ERROR", true),
    (507_899, "ACL_ERROR_RT_DRV_INTERNAL_ERROR", true),
    (507_903, "ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED", false),
    (507_904, "ACL_ERROR_RT_COMM_OP_RETRY_FAIL", true),
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

    /// Whether the code reports a device fault that poisons the context.
    pub fn is_sticky(self) -> bool {
        CODES.iter().any(|c| c.0 == self.0 && c.2)
    }

    /// The native error record (no message).
    pub fn native(self, api: &'static str, message: Option<String>) -> NativeError {
        NativeError {
            backend: BackendKind::Ascend,
            api,
            code: i64::from(self.0),
            name: self.name(),
            sticky: self.is_sticky(),
            message,
        }
    }
}

impl std::fmt::Display for AclError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

impl std::error::Error for AclError {}

/// Maps an ACL code returned by `api` to xstream's [`Error`], keeping the code, its name and
/// `message` (the `aclGetRecentErrMsg` text) where the error stays a [`NativeError`].
///
/// | codes | xstream error |
/// |---|---|
/// | 207005, 207007, 207008 | [`Error::ResourceExhausted`] (message names the code) |
/// | 507046, 507047 | [`Error::Timeout`] (the caller fills the duration via [`with_timeout`]) |
/// | 107027 / 107028 / 107029 / 107031 / 107036 / 107038 / 507903 | [`Error::Capture`] |
/// | 107002, 107003 | [`Error::WrongDevice`] naming the context rule and the code |
/// | 200000, 207001 | [`Error::OutOfMemory`] |
/// | 207000 | [`Error::Unsupported`] (naming the API and the code) |
/// | 507010, 507033, 507899 | [`Error::DeviceLost`] |
/// | everything else | [`Error::Native`] (sticky for device faults) |
pub fn map_error(api: &'static str, code: i32, message: Option<String>) -> Error {
    let e = AclError(code);
    let with_code = |what: &str| format!("{what} ({api}: {} {code})", e.name());
    let capture = |kind| Error::Capture { op: api, kind };
    match code {
        207_007 => Error::ResourceExhausted {
            backend: BackendKind::Ascend,
            detail: with_code("no event resource left on the device"),
        },
        207_008 => Error::ResourceExhausted {
            backend: BackendKind::Ascend,
            detail: with_code("stream limit of the device reached"),
        },
        // The runtime's answer to the driver's DRV_ERROR_NO_RESOURCES (`errcode_manage.cc`).
        207_005 => Error::ResourceExhausted {
            backend: BackendKind::Ascend,
            detail: with_code("the driver has no resource left"),
        },
        507_046 | 507_047 => Error::Timeout(std::time::Duration::ZERO),
        107_027 | 107_028 => capture(CaptureErrorKind::Unsupported),
        107_029 => capture(CaptureErrorKind::NotCapturing),
        107_031 => capture(CaptureErrorKind::NotCapturable),
        107_036 => capture(CaptureErrorKind::Isolation),
        107_038 => capture(CaptureErrorKind::WrongThread),
        507_903 => capture(CaptureErrorKind::Invalidated),
        107_002 => Error::WrongDevice(with_code("no ACL context is current on the calling thread")),
        107_003 => Error::WrongDevice(with_code(
            "the stream or event belongs to another context than the current one",
        )),
        200_000 | 207_001 => Error::OutOfMemory {
            backend: BackendKind::Ascend,
            detail: with_code("allocation failed"),
        },
        207_000 => Error::Unsupported {
            backend: BackendKind::Ascend,
            what: with_code("this feature on this chip"),
        },
        507_010 | 507_033 | 507_899 => Error::DeviceLost(e.native(api, message)),
        _ => Error::Native(e.native(api, message)),
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
    fn every_code_maps_and_keeps_its_name() {
        for &(code, name, sticky) in CODES {
            assert_eq!(AclError(code).name(), name);
            let e = map_error("aclrtX", code, Some("msg".into()));
            if let Some(n) = e.native() {
                assert_eq!(n.code, i64::from(code));
                assert_eq!(n.name, name);
                assert_eq!(n.sticky, sticky);
                assert_eq!(n.message.as_deref(), Some("msg"));
            } else {
                let s = e.to_string();
                assert!(
                    matches!(e, Error::Timeout(_) | Error::Capture { .. }) || s.contains(name),
                    "{code}: {s}"
                );
            }
        }
    }

    #[test]
    fn classes() {
        assert!(matches!(
            map_error("a", 207_008, None),
            Error::ResourceExhausted { .. }
        ));
        assert!(matches!(
            map_error("a", 207_007, None),
            Error::ResourceExhausted { .. }
        ));
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
        assert!(matches!(
            map_error("a", 107_002, None),
            Error::WrongDevice(_)
        ));
        assert!(matches!(
            map_error("a", 107_003, None),
            Error::WrongDevice(_)
        ));
        assert!(matches!(
            map_error("a", 200_000, None),
            Error::OutOfMemory { .. }
        ));
        assert!(map_error("a", 507_035, None).is_sticky());
        assert!(!map_error("a", 507_000, None).is_sticky());
        assert!(map_error("a", 507_010, None).is_sticky());
        assert_eq!(AclError(42).name(), "ACL_ERROR_UNKNOWN");
        assert!(matches!(
            with_timeout(map_error("a", 507_046, None), std::time::Duration::from_millis(3)),
            Error::Timeout(d) if d.as_millis() == 3
        ));
    }
}
