//! `CUresult` → [`xstream_core::Error`].
//!
//! Every code of the CUDA 13.0 headers has a row in [`CODES`]: its name and whether it is
//! *sticky* (the context is poisoned; only a new process recovers: driver behaviour in docs/semantics.md). The
//! classification follows wgpu-hal's `map_*_err`, but keeps the code:
//!
//! | code(s) | xstream error |
//! |---|---|
//! | `CUDA_ERROR_OUT_OF_MEMORY` | [`Error::OutOfMemory`] (detail names the API, code and number) |
//! | `CUDA_ERROR_NOT_PERMITTED` | [`Error::NotPermitted`] |
//! | `CUDA_ERROR_NOT_READY` | [`Error::NotReady`] |
//! | `CUDA_ERROR_NOT_SUPPORTED` | [`Error::Unsupported`] |
//! | `STREAM_CAPTURE_*`, `CAPTURED_EVENT`, `ILLEGAL_STATE` from a begin-capture | [`Error::Capture`] |
//! | sticky codes (`ILLEGAL_ADDRESS`, `LAUNCH_FAILED`, ...) | [`Error::Native`] with `sticky: true` |
//! | everything else | [`Error::Native`] |

use xstream_core::{BackendKind, CaptureErrorKind, Error, NativeError};

use crate::ffi::Code;

/// One row of the table: code, name, sticky.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeInfo {
    /// The numeric `CUresult`.
    pub code: u32,
    /// Its symbolic name.
    pub name: &'static str,
    /// Whether it poisons the context.
    pub sticky: bool,
}

const fn row(code: u32, name: &'static str, sticky: bool) -> CodeInfo {
    CodeInfo { code, name, sticky }
}

/// Every `CUresult` of the CUDA 13.0 headers (cudarc `cuda-13000`), sorted by code.
pub static CODES: &[CodeInfo] = &[
    row(0, "CUDA_SUCCESS", false),
    row(1, "CUDA_ERROR_INVALID_VALUE", false),
    row(2, "CUDA_ERROR_OUT_OF_MEMORY", false),
    row(3, "CUDA_ERROR_NOT_INITIALIZED", false),
    row(4, "CUDA_ERROR_DEINITIALIZED", false),
    row(5, "CUDA_ERROR_PROFILER_DISABLED", false),
    row(6, "CUDA_ERROR_PROFILER_NOT_INITIALIZED", false),
    row(7, "CUDA_ERROR_PROFILER_ALREADY_STARTED", false),
    row(8, "CUDA_ERROR_PROFILER_ALREADY_STOPPED", false),
    row(34, "CUDA_ERROR_STUB_LIBRARY", false),
    row(36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", false),
    row(46, "CUDA_ERROR_DEVICE_UNAVAILABLE", false),
    row(100, "CUDA_ERROR_NO_DEVICE", false),
    row(101, "CUDA_ERROR_INVALID_DEVICE", false),
    row(102, "CUDA_ERROR_DEVICE_NOT_LICENSED", false),
    row(200, "CUDA_ERROR_INVALID_IMAGE", false),
    row(201, "CUDA_ERROR_INVALID_CONTEXT", false),
    row(202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", false),
    row(205, "CUDA_ERROR_MAP_FAILED", false),
    row(206, "CUDA_ERROR_UNMAP_FAILED", false),
    row(207, "CUDA_ERROR_ARRAY_IS_MAPPED", false),
    row(208, "CUDA_ERROR_ALREADY_MAPPED", false),
    row(209, "CUDA_ERROR_NO_BINARY_FOR_GPU", false),
    row(210, "CUDA_ERROR_ALREADY_ACQUIRED", false),
    row(211, "CUDA_ERROR_NOT_MAPPED", false),
    row(212, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY", false),
    row(213, "CUDA_ERROR_NOT_MAPPED_AS_POINTER", false),
    row(214, "CUDA_ERROR_ECC_UNCORRECTABLE", true),
    row(215, "CUDA_ERROR_UNSUPPORTED_LIMIT", false),
    row(216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE", false),
    row(217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", false),
    row(218, "CUDA_ERROR_INVALID_PTX", false),
    row(219, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT", false),
    row(220, "CUDA_ERROR_NVLINK_UNCORRECTABLE", true),
    row(221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", false),
    row(222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", false),
    row(223, "CUDA_ERROR_JIT_COMPILATION_DISABLED", false),
    row(224, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY", false),
    row(225, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC", false),
    row(226, "CUDA_ERROR_CONTAINED", true),
    row(300, "CUDA_ERROR_INVALID_SOURCE", false),
    row(301, "CUDA_ERROR_FILE_NOT_FOUND", false),
    row(302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", false),
    row(303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", false),
    row(304, "CUDA_ERROR_OPERATING_SYSTEM", false),
    row(400, "CUDA_ERROR_INVALID_HANDLE", false),
    row(401, "CUDA_ERROR_ILLEGAL_STATE", false),
    row(402, "CUDA_ERROR_LOSSY_QUERY", false),
    row(500, "CUDA_ERROR_NOT_FOUND", false),
    row(600, "CUDA_ERROR_NOT_READY", false),
    row(700, "CUDA_ERROR_ILLEGAL_ADDRESS", true),
    row(701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", false),
    row(702, "CUDA_ERROR_LAUNCH_TIMEOUT", true),
    row(703, "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING", false),
    row(704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", false),
    row(705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", false),
    row(708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", false),
    row(709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", false),
    row(710, "CUDA_ERROR_ASSERT", true),
    row(711, "CUDA_ERROR_TOO_MANY_PEERS", false),
    row(712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", false),
    row(713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", false),
    row(714, "CUDA_ERROR_HARDWARE_STACK_ERROR", true),
    row(715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", true),
    row(716, "CUDA_ERROR_MISALIGNED_ADDRESS", true),
    row(717, "CUDA_ERROR_INVALID_ADDRESS_SPACE", true),
    row(718, "CUDA_ERROR_INVALID_PC", true),
    row(719, "CUDA_ERROR_LAUNCH_FAILED", true),
    row(720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", false),
    row(721, "CUDA_ERROR_TENSOR_MEMORY_LEAK", false),
    row(800, "CUDA_ERROR_NOT_PERMITTED", false),
    row(801, "CUDA_ERROR_NOT_SUPPORTED", false),
    row(802, "CUDA_ERROR_SYSTEM_NOT_READY", false),
    row(803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", false),
    row(804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", false),
    row(805, "CUDA_ERROR_MPS_CONNECTION_FAILED", false),
    row(806, "CUDA_ERROR_MPS_RPC_FAILURE", false),
    row(807, "CUDA_ERROR_MPS_SERVER_NOT_READY", false),
    row(808, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED", false),
    row(809, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED", false),
    row(810, "CUDA_ERROR_MPS_CLIENT_TERMINATED", false),
    row(811, "CUDA_ERROR_CDP_NOT_SUPPORTED", false),
    row(812, "CUDA_ERROR_CDP_VERSION_MISMATCH", false),
    row(900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", false),
    row(901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", false),
    row(902, "CUDA_ERROR_STREAM_CAPTURE_MERGE", false),
    row(903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", false),
    row(904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", false),
    row(905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", false),
    row(906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", false),
    row(907, "CUDA_ERROR_CAPTURED_EVENT", false),
    row(908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", false),
    row(909, "CUDA_ERROR_TIMEOUT", false),
    row(910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", false),
    row(911, "CUDA_ERROR_EXTERNAL_DEVICE", true),
    row(912, "CUDA_ERROR_INVALID_CLUSTER_SIZE", false),
    row(913, "CUDA_ERROR_FUNCTION_NOT_LOADED", false),
    row(914, "CUDA_ERROR_INVALID_RESOURCE_TYPE", false),
    row(915, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION", false),
    row(916, "CUDA_ERROR_KEY_ROTATION", false),
    row(917, "CUDA_ERROR_STREAM_DETACHED", false),
    row(999, "CUDA_ERROR_UNKNOWN", false),
];

/// The row of a code; unknown codes (a newer driver) get the name `CUDA_ERROR_<unlisted>`.
pub fn code_info(code: u32) -> CodeInfo {
    match CODES.binary_search_by_key(&code, |r| r.code) {
        Ok(i) => CODES[i],
        Err(_) => row(code, "CUDA_ERROR_<unlisted>", false),
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
    NativeError {
        backend: BackendKind::Cuda,
        api,
        code: i64::from(code),
        name: info.name,
        sticky: info.sticky,
        message: None,
    }
}

/// Maps a failed call of `api` to an xstream error (see the module docs for the table).
pub fn map(api: &'static str, code: Code) -> Error {
    if let Some(kind) = capture_kind(api, code) {
        tracing::debug!(api, code, name = code_info(code).name, "CUDA capture error");
        return Error::Capture { op: api, kind };
    }
    match code {
        2 => Error::OutOfMemory {
            backend: BackendKind::Cuda,
            detail: format!("{api} failed with CUDA_ERROR_OUT_OF_MEMORY (2)"),
        },
        600 => Error::NotReady,
        800 => Error::NotPermitted(
            "the CUDA driver refused the call (CUDA_ERROR_NOT_PERMITTED, 800), e.g. from inside a host function",
        ),
        801 => Error::Unsupported {
            backend: BackendKind::Cuda,
            what: format!("{api} on this device/driver (CUDA_ERROR_NOT_SUPPORTED, 801)"),
        },
        _ => Error::Native(native(api, code)),
    }
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
            assert!(code_info(c).sticky, "{c}");
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
    fn classes() {
        assert!(matches!(map("cuMemAlloc", 2), Error::OutOfMemory { .. }));
        assert!(matches!(
            map("cuCtxSetCurrent", 800),
            Error::NotPermitted(_)
        ));
        assert!(matches!(map("cuStreamQuery", 600), Error::NotReady));
        assert!(matches!(
            map("cuStreamQuery", 801),
            Error::Unsupported { .. }
        ));
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
    }
}
