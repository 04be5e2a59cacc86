//! `CUresult` → [`xstream_core::Error`].
//!
//! Every code of the CUDA 13.0 headers has a row in [`CODES`]: its name and its
//! [`ErrorKind`]. The codes of kind [`ErrorKind::DeviceLost`] are the *sticky* ones (the context
//! is poisoned; only a new process recovers: driver behaviour in docs/semantics.md). The
//! classification follows wgpu-hal's `map_*_err`, but keeps the code: a failed call is
//! [`Error::Native`] with the API, the code, its name and its kind, never a string.
//!
//! | code(s) | xstream error |
//! |---|---|
//! | `STREAM_CAPTURE_*`, `CAPTURED_EVENT`, `ILLEGAL_STATE` from a begin-capture | [`Error::Capture`] naming the API |
//! | everything else, `OUT_OF_MEMORY` (2), `NOT_READY` (600), `NOT_PERMITTED` (800) and `NOT_SUPPORTED` (801) included | [`Error::Native`], classified by [`CODES`] |

use xstream_core::{BackendKind, CaptureErrorKind, Error, ErrorKind, NativeError};

use crate::ffi::Code;

/// One row of the table: code, name, kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeInfo {
    /// The numeric `CUresult`.
    pub code: u32,
    /// Its symbolic name.
    pub name: &'static str,
    /// What it means ([`ErrorKind::DeviceLost`] for the sticky codes).
    pub kind: ErrorKind,
}

impl CodeInfo {
    /// Whether the code poisons the context (kind [`ErrorKind::DeviceLost`]).
    pub fn sticky(&self) -> bool {
        self.kind == ErrorKind::DeviceLost
    }
}

const fn row(code: u32, name: &'static str, kind: ErrorKind) -> CodeInfo {
    CodeInfo { code, name, kind }
}

use ErrorKind::{
    Capture, DeviceLost, InvalidValue, NotAvailable, NotPermitted, NotReady, Other, OutOfMemory,
    ResourceExhausted, Timeout, Unsupported,
};

/// Every `CUresult` of the CUDA 13.0 headers (cudarc `cuda-13000`), sorted by code.
pub static CODES: &[CodeInfo] = &[
    row(0, "CUDA_SUCCESS", Other),
    row(1, "CUDA_ERROR_INVALID_VALUE", InvalidValue),
    row(2, "CUDA_ERROR_OUT_OF_MEMORY", OutOfMemory),
    row(3, "CUDA_ERROR_NOT_INITIALIZED", NotAvailable),
    row(4, "CUDA_ERROR_DEINITIALIZED", NotAvailable),
    row(5, "CUDA_ERROR_PROFILER_DISABLED", Other),
    row(6, "CUDA_ERROR_PROFILER_NOT_INITIALIZED", Other),
    row(7, "CUDA_ERROR_PROFILER_ALREADY_STARTED", Other),
    row(8, "CUDA_ERROR_PROFILER_ALREADY_STOPPED", Other),
    row(34, "CUDA_ERROR_STUB_LIBRARY", NotAvailable),
    row(36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", Unsupported),
    row(46, "CUDA_ERROR_DEVICE_UNAVAILABLE", NotAvailable),
    row(100, "CUDA_ERROR_NO_DEVICE", NotAvailable),
    row(101, "CUDA_ERROR_INVALID_DEVICE", InvalidValue),
    row(102, "CUDA_ERROR_DEVICE_NOT_LICENSED", NotAvailable),
    row(200, "CUDA_ERROR_INVALID_IMAGE", InvalidValue),
    row(201, "CUDA_ERROR_INVALID_CONTEXT", InvalidValue),
    row(202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", Other),
    row(205, "CUDA_ERROR_MAP_FAILED", Other),
    row(206, "CUDA_ERROR_UNMAP_FAILED", Other),
    row(207, "CUDA_ERROR_ARRAY_IS_MAPPED", Other),
    row(208, "CUDA_ERROR_ALREADY_MAPPED", Other),
    row(209, "CUDA_ERROR_NO_BINARY_FOR_GPU", Unsupported),
    row(210, "CUDA_ERROR_ALREADY_ACQUIRED", Other),
    row(211, "CUDA_ERROR_NOT_MAPPED", Other),
    row(212, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY", Other),
    row(213, "CUDA_ERROR_NOT_MAPPED_AS_POINTER", Other),
    row(214, "CUDA_ERROR_ECC_UNCORRECTABLE", DeviceLost),
    row(215, "CUDA_ERROR_UNSUPPORTED_LIMIT", Unsupported),
    row(216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE", Other),
    row(217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", Unsupported),
    row(218, "CUDA_ERROR_INVALID_PTX", InvalidValue),
    row(219, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT", InvalidValue),
    row(220, "CUDA_ERROR_NVLINK_UNCORRECTABLE", DeviceLost),
    row(221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", NotAvailable),
    row(222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", Unsupported),
    row(223, "CUDA_ERROR_JIT_COMPILATION_DISABLED", NotPermitted),
    row(224, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY", Unsupported),
    row(225, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC", Unsupported),
    row(226, "CUDA_ERROR_CONTAINED", DeviceLost),
    row(300, "CUDA_ERROR_INVALID_SOURCE", InvalidValue),
    row(301, "CUDA_ERROR_FILE_NOT_FOUND", InvalidValue),
    row(302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", Other),
    row(303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", Other),
    row(304, "CUDA_ERROR_OPERATING_SYSTEM", Other),
    row(400, "CUDA_ERROR_INVALID_HANDLE", InvalidValue),
    row(401, "CUDA_ERROR_ILLEGAL_STATE", Other),
    row(402, "CUDA_ERROR_LOSSY_QUERY", Other),
    row(500, "CUDA_ERROR_NOT_FOUND", InvalidValue),
    row(600, "CUDA_ERROR_NOT_READY", NotReady),
    row(700, "CUDA_ERROR_ILLEGAL_ADDRESS", DeviceLost),
    row(701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", ResourceExhausted),
    row(702, "CUDA_ERROR_LAUNCH_TIMEOUT", DeviceLost),
    row(
        703,
        "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING",
        InvalidValue,
    ),
    row(704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", Other),
    row(705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", Other),
    row(708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", Other),
    row(709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", InvalidValue),
    row(710, "CUDA_ERROR_ASSERT", DeviceLost),
    row(711, "CUDA_ERROR_TOO_MANY_PEERS", ResourceExhausted),
    row(712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", Other),
    row(713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", Other),
    row(714, "CUDA_ERROR_HARDWARE_STACK_ERROR", DeviceLost),
    row(715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", DeviceLost),
    row(716, "CUDA_ERROR_MISALIGNED_ADDRESS", DeviceLost),
    row(717, "CUDA_ERROR_INVALID_ADDRESS_SPACE", DeviceLost),
    row(718, "CUDA_ERROR_INVALID_PC", DeviceLost),
    row(719, "CUDA_ERROR_LAUNCH_FAILED", DeviceLost),
    row(720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", InvalidValue),
    row(721, "CUDA_ERROR_TENSOR_MEMORY_LEAK", Other),
    row(800, "CUDA_ERROR_NOT_PERMITTED", NotPermitted),
    row(801, "CUDA_ERROR_NOT_SUPPORTED", Unsupported),
    row(802, "CUDA_ERROR_SYSTEM_NOT_READY", NotAvailable),
    row(803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", NotAvailable),
    row(
        804,
        "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        Unsupported,
    ),
    row(805, "CUDA_ERROR_MPS_CONNECTION_FAILED", Other),
    row(806, "CUDA_ERROR_MPS_RPC_FAILURE", Other),
    row(807, "CUDA_ERROR_MPS_SERVER_NOT_READY", Other),
    row(808, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED", ResourceExhausted),
    row(
        809,
        "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED",
        ResourceExhausted,
    ),
    row(810, "CUDA_ERROR_MPS_CLIENT_TERMINATED", Other),
    row(811, "CUDA_ERROR_CDP_NOT_SUPPORTED", Unsupported),
    row(812, "CUDA_ERROR_CDP_VERSION_MISMATCH", Other),
    row(900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", Capture),
    row(901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", Capture),
    row(902, "CUDA_ERROR_STREAM_CAPTURE_MERGE", Capture),
    row(903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", Capture),
    row(904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", Capture),
    row(905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", Capture),
    row(906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", Capture),
    row(907, "CUDA_ERROR_CAPTURED_EVENT", Capture),
    row(908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", Capture),
    row(909, "CUDA_ERROR_TIMEOUT", Timeout),
    row(910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", Other),
    row(911, "CUDA_ERROR_EXTERNAL_DEVICE", DeviceLost),
    row(912, "CUDA_ERROR_INVALID_CLUSTER_SIZE", InvalidValue),
    row(913, "CUDA_ERROR_FUNCTION_NOT_LOADED", Other),
    row(914, "CUDA_ERROR_INVALID_RESOURCE_TYPE", InvalidValue),
    row(
        915,
        "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION",
        InvalidValue,
    ),
    row(916, "CUDA_ERROR_KEY_ROTATION", Other),
    row(917, "CUDA_ERROR_STREAM_DETACHED", Other),
    row(999, "CUDA_ERROR_UNKNOWN", Other),
];

/// The row of a code; unknown codes (a newer driver) get the name `CUDA_ERROR_<unlisted>`.
pub fn code_info(code: u32) -> CodeInfo {
    match CODES.binary_search_by_key(&code, |r| r.code) {
        Ok(i) => CODES[i],
        Err(_) => row(code, "CUDA_ERROR_<unlisted>", Other),
    }
}

/// The capture kind of a code, if it is a capture error. `api` disambiguates
/// `CUDA_ERROR_ILLEGAL_STATE`, which means "already capturing" only for a begin-capture.
pub fn capture_kind(api: &str, code: u32) -> Option<CaptureErrorKind> {
    Some(match code {
        900 => CaptureErrorKind::Unsupported,
        901 => CaptureErrorKind::Invalidated,
        // MERGE: two independent captures would be joined; IMPLICIT: an implicit dependency
        // on the legacy stream; ISOLATION: a dependency on work outside the capture.
        902 | 905 | 906 => CaptureErrorKind::Isolation,
        903 => CaptureErrorKind::NotCapturing,
        // UNJOINED: a forked stream was not joined back; no graph was produced. The core has
        // no dedicated kind (see the crate docs); the capture is lost like an invalidation.
        904 => CaptureErrorKind::Invalidated,
        907 => CaptureErrorKind::Unsupported,
        908 => CaptureErrorKind::WrongThread,
        401 if api.starts_with("cuStreamBeginCapture") => CaptureErrorKind::AlreadyCapturing,
        _ => return None,
    })
}

/// The [`NativeError`] of a code.
pub fn native(api: &'static str, code: u32) -> NativeError {
    let info = code_info(code);
    NativeError::new(
        BackendKind::Cuda,
        api,
        i64::from(code),
        info.name,
        info.kind,
    )
}

/// Maps a failed call of `api` to an xstream error (see the module docs for the table).
pub fn map(api: &'static str, code: Code) -> Error {
    if let Some(kind) = capture_kind(api, code) {
        tracing::debug!(api, code, name = code_info(code).name, "CUDA capture error");
        return Error::Capture { op: api, kind };
    }
    Error::Native(native(api, code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_unique_and_complete_for_the_reference_codes() {
        assert!(CODES.windows(2).all(|w| w[0].code < w[1].code));
        // Every code the CUDA Driver API reference names for the stream, event and graph calls.
        for name in [
            "CUDA_SUCCESS",
            "CUDA_ERROR_DEINITIALIZED",
            "CUDA_ERROR_NOT_INITIALIZED",
            "CUDA_ERROR_INVALID_CONTEXT",
            "CUDA_ERROR_INVALID_HANDLE",
            "CUDA_ERROR_NOT_SUPPORTED",
            "CUDA_ERROR_INVALID_VALUE",
            "CUDA_ERROR_OUT_OF_MEMORY",
            "CUDA_ERROR_NOT_READY",
            "CUDA_ERROR_NOT_PERMITTED",
            "CUDA_ERROR_ILLEGAL_ADDRESS",
            "CUDA_ERROR_STUB_LIBRARY",
            "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
            "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
            "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
            "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
            "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
            "CUDA_ERROR_CAPTURED_EVENT",
            "CUDA_ERROR_ILLEGAL_STATE",
            "CUDA_ERROR_LOSSY_QUERY",
        ] {
            assert!(CODES.iter().any(|r| r.name == name), "{name} missing");
        }
    }

    #[test]
    fn sticky_set() {
        for c in [700, 719, 715, 716, 718, 714, 717, 214, 702] {
            assert!(code_info(c).sticky(), "{c}");
            let e = map("cuStreamSynchronize", c);
            assert!(e.is_sticky(), "{c}");
            let n = e.native().unwrap();
            assert_eq!(n.code, i64::from(c));
            assert_eq!(n.backend, BackendKind::Cuda);
        }
        for c in [1, 2, 400, 600, 800, 900] {
            assert!(!map("x", c).is_sticky(), "{c}");
        }
        let e = map("cuStreamSynchronize", 700);
        assert!(e.to_string().contains("CUDA_ERROR_ILLEGAL_ADDRESS"));
        assert!(e.to_string().contains("700"));
    }

    #[test]
    fn every_row_keeps_its_code_name_and_kind() {
        for r in CODES.iter().filter(|r| r.code != 0) {
            let e = map("cuStreamSynchronize", r.code);
            if r.kind == ErrorKind::Capture {
                // A capture code from a capture call is a typed capture error naming the API.
                assert!(
                    matches!(
                        e,
                        Error::Capture {
                            op: "cuStreamSynchronize",
                            ..
                        }
                    ),
                    "{}: {e:?}",
                    r.name
                );
                continue;
            }
            let n = e.native().unwrap_or_else(|| panic!("{}: {e:?}", r.name));
            assert_eq!(
                (n.backend, n.code, n.name, n.kind, n.sticky),
                (
                    BackendKind::Cuda,
                    i64::from(r.code),
                    r.name,
                    r.kind,
                    r.sticky()
                )
            );
            assert_eq!(e.kind(), r.kind, "{}", r.name);
            assert_eq!(e.is_sticky(), r.kind == ErrorKind::DeviceLost, "{}", r.name);
        }
    }

    #[test]
    fn classes() {
        // The codes callers branch on keep their number: the kind says what they mean.
        for (api, code, kind) in [
            ("cuMemAlloc", 2, ErrorKind::OutOfMemory),
            ("cuStreamQuery", 600, ErrorKind::NotReady),
            ("cuCtxSetCurrent", 800, ErrorKind::NotPermitted),
            ("cuStreamQuery", 801, ErrorKind::Unsupported),
            ("cuStreamCreate", 1, ErrorKind::InvalidValue),
            ("cuLaunchKernel", 701, ErrorKind::ResourceExhausted),
            ("cuInit", 100, ErrorKind::NotAvailable),
        ] {
            let e = map(api, code);
            assert_eq!(e.kind(), kind, "{code}");
            let n = e.native().expect("a vendor code stays native");
            assert_eq!((n.api, n.code), (api, i64::from(code)));
            assert!(e.to_string().contains(&code.to_string()), "{e}");
        }
        assert!(map("cuMemAlloc", 2).is_out_of_memory());
        assert!(map("cuEventElapsedTime_v2", 600).is_not_ready());
        let k = |api, c| match map(api, c) {
            Error::Capture { kind, .. } => Some(kind),
            _ => None,
        };
        assert_eq!(k("cuStreamQuery", 900), Some(CaptureErrorKind::Unsupported));
        assert_eq!(
            k("cuStreamEndCapture", 901),
            Some(CaptureErrorKind::Invalidated)
        );
        assert_eq!(
            k("cuStreamWaitEvent", 905),
            Some(CaptureErrorKind::Isolation)
        );
        assert_eq!(k("cuStreamQuery", 906), Some(CaptureErrorKind::Isolation));
        assert_eq!(
            k("cuStreamEndCapture", 904),
            Some(CaptureErrorKind::Invalidated)
        );
        assert_eq!(k("cuEventQuery", 907), Some(CaptureErrorKind::Unsupported));
        assert_eq!(
            k("cuStreamEndCapture", 908),
            Some(CaptureErrorKind::WrongThread)
        );
        assert_eq!(
            k("cuStreamBeginCapture", 401),
            Some(CaptureErrorKind::AlreadyCapturing)
        );
        assert_eq!(k("cuGraphLaunch", 401), None);
        match map("cuStreamCreate", 400) {
            Error::Native(n) => {
                assert_eq!(n.name, "CUDA_ERROR_INVALID_HANDLE");
                assert!(!n.sticky);
            }
            e => panic!("{e:?}"),
        }
        assert_eq!(code_info(12345).name, "CUDA_ERROR_<unlisted>");
        assert_eq!(map("x", 12345).kind(), ErrorKind::Other);
    }
}
