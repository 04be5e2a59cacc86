//! The one error type of xstream.
//!
//! Every fallible call returns [`Result`]. Vendor codes are never flattened into strings: a
//! [`NativeError`] keeps the backend, the API that failed, the numeric code and its symbolic
//! name, and whether the vendor considers the error *sticky* (the context is poisoned and only a
//! new process recovers).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::collective::CollectiveErrorKind;
use crate::BackendKind;

/// `Result` with xstream's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A vendor error code, kept as the vendor reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeError {
    /// The backend whose API failed.
    pub backend: BackendKind,
    /// The vendor function that returned the code, e.g. `"cuStreamSynchronize"`.
    pub api: &'static str,
    /// The numeric code (`CUresult`, `aclError`, ...).
    pub code: i64,
    /// The code's symbolic name, e.g. `"CUDA_ERROR_ILLEGAL_ADDRESS"`.
    pub name: &'static str,
    /// The error poisons the context: every later call on it fails.
    pub sticky: bool,
    /// A message the vendor attached (e.g. `aclGetRecentErrMsg`), when there was one.
    pub message: Option<String>,
}

impl fmt::Display for NativeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed with {} ({})", self.api, self.name, self.code)?;
        if self.sticky {
            f.write_str(" [sticky: context poisoned]")?;
        }
        if let Some(m) = &self.message {
            write!(f, ": {m}")?;
        }
        Ok(())
    }
}

/// Why a capture-related call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureErrorKind {
    /// `begin_capture` on a stream that is already capturing.
    AlreadyCapturing,
    /// `end_capture` (or a capture-only call) on a stream that is not capturing.
    NotCapturing,
    /// The operation is not allowed while the stream is capturing; the capture is now
    /// invalidated.
    Unsupported,
    /// The capture was invalidated by an earlier illegal operation; no graph was produced.
    Invalidated,
    /// The operation would create a dependency on work outside the capture.
    Isolation,
    /// The stream cannot be captured at all (e.g. a default stream).
    NotCapturable,
    /// `end_capture` from a thread other than the one that began it (modes other than
    /// relaxed).
    WrongThread,
}

impl fmt::Display for CaptureErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::AlreadyCapturing => "stream is already capturing",
            Self::NotCapturing => "stream is not capturing",
            Self::Unsupported => "operation not permitted during capture (capture invalidated)",
            Self::Invalidated => "capture was invalidated by an earlier illegal operation",
            Self::Isolation => "dependency on work outside the capture (capture invalidated)",
            Self::NotCapturable => "this stream cannot be captured",
            Self::WrongThread => "capture must end on the thread that began it",
        })
    }
}

/// Every error xstream reports.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The backend cannot be used on this machine (library or device missing).
    #[error("{backend} backend is not available: {reason}")]
    NotAvailable {
        /// Which backend.
        backend: BackendKind,
        /// Why, in words (every place searched, the loader's message, ...).
        reason: String,
    },
    /// The backend was not compiled into this build (cargo feature off).
    #[error("{0} backend is not compiled in (enable the `{feat}` cargo feature)", feat = .0.feature())]
    NotCompiled(BackendKind),
    /// A vendor library could not be loaded.
    #[error("cannot load {library}: {source}")]
    Load {
        /// The library name or path tried.
        library: String,
        /// The loader's error.
        #[source]
        source: Arc<dyn std::error::Error + Send + Sync>,
    },
    /// A vendor library lacks a symbol xstream requires.
    #[error("{library} lacks the required symbol `{symbol}`")]
    MissingSymbol {
        /// The library.
        library: String,
        /// The missing symbol.
        symbol: &'static str,
    },
    /// The backend cannot do this (feature, attribute, or operation).
    #[error("{backend} backend does not support {what}")]
    Unsupported {
        /// Which backend.
        backend: BackendKind,
        /// What was asked.
        what: String,
    },
    /// A portable flag that the backend cannot express, refused under
    /// [`TranslationPolicy::Strict`](crate::TranslationPolicy::Strict).
    #[error("{backend} backend cannot honour flag {flag}: {reason}")]
    UnsupportedFlag {
        /// Which backend.
        backend: BackendKind,
        /// The portable flag's name.
        flag: &'static str,
        /// Why the backend cannot honour it.
        reason: &'static str,
    },
    /// A flag combination the vendor rejects, refused before calling it.
    #[error("{backend} backend rejects the flag combination {flags}: {reason}")]
    RejectedCombination {
        /// Which backend.
        backend: BackendKind,
        /// The flags, as written by `bitflags`.
        flags: String,
        /// The vendor's rule.
        reason: &'static str,
    },
    /// Bad input from the caller.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Memory (host or device) is exhausted.
    #[error("{backend} backend is out of memory: {detail}")]
    OutOfMemory {
        /// Which backend.
        backend: BackendKind,
        /// What was being allocated.
        detail: String,
    },
    /// A vendor resource pool (streams, events) is exhausted.
    #[error("{backend} backend resource exhausted: {detail}")]
    ResourceExhausted {
        /// Which backend.
        backend: BackendKind,
        /// Which resource and the limit.
        detail: String,
    },
    /// The device faulted or was lost; the context is unusable. Always sticky.
    #[error("device lost: {0}")]
    DeviceLost(NativeError),
    /// A timed wait expired. The stream or event is still usable.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The call is not permitted here, e.g. an xstream call from inside a stream-blocking host
    /// callback.
    #[error("not permitted: {0}")]
    NotPermitted(&'static str),
    /// A capture rule was broken.
    #[error("capture error in {op}: {kind}")]
    Capture {
        /// The operation that broke it.
        op: &'static str,
        /// What went wrong.
        kind: CaptureErrorKind,
    },
    /// A host callback enqueued on this stream panicked; reported once, at the next
    /// synchronize.
    #[error("a host callback panicked: {0}")]
    CallbackPanicked(String),
    /// A host callback could not run because its stream or device went away first.
    #[error("callback cancelled: {0}")]
    CallbackCancelled(&'static str),
    /// Elapsed time was asked of an event created with `DISABLE_TIMING`.
    #[error("event timing is disabled (created with DISABLE_TIMING)")]
    TimingDisabled,
    /// The event was never recorded.
    #[error("event was never recorded")]
    EventNotRecorded,
    /// The work is not complete yet.
    #[error("work not complete yet")]
    NotReady,
    /// The operation is not allowed on a borrowed or default stream.
    #[error("a {kind} stream cannot {op}")]
    NotOwned {
        /// `"borrowed"` or `"default"`.
        kind: &'static str,
        /// What was refused.
        op: &'static str,
    },
    /// Objects of two different devices (or contexts) were mixed.
    #[error("wrong device: {0}")]
    WrongDevice(String),
    /// Any other vendor error, with its code.
    #[error("{0}")]
    Native(NativeError),
    /// An error of a foreign library that xstream or the program calls beside the vendor
    /// runtime (cudarc, a vendor operator library, a runtime's own code), kept whole as the
    /// [`source`](std::error::Error::source) so that callers can downcast it.
    #[error("{what}: {source}")]
    External {
        /// What failed, in words (the library and the call).
        what: String,
        /// The foreign error.
        #[source]
        source: Arc<dyn std::error::Error + Send + Sync>,
    },
    /// A collective operation (or a communicator's creation) failed: aborted, a peer timed
    /// out. Bad or disagreeing arguments are [`Error::InvalidArgument`]; vendor codes come
    /// as [`Error::Native`] instead.
    #[error("collective {op} failed: {kind}: {detail}")]
    Collective {
        /// The operation (`"all_reduce"`, `"init_rank"`, `"bootstrap"`, ...).
        op: &'static str,
        /// What went wrong.
        kind: CollectiveErrorKind,
        /// Details in words (ranks, sequence number, waited time, ...).
        detail: String,
    },
}

impl Error {
    /// Whether the error poisons the device context (only a new process recovers).
    pub fn is_sticky(&self) -> bool {
        match self {
            Error::DeviceLost(_) => true,
            Error::Native(n) => n.sticky,
            _ => false,
        }
    }

    /// The vendor's native error, when there is one.
    pub fn native(&self) -> Option<&NativeError> {
        match self {
            Error::DeviceLost(n) | Error::Native(n) => Some(n),
            _ => None,
        }
    }

    /// Shorthand for [`Error::Unsupported`].
    pub fn unsupported(backend: BackendKind, what: impl Into<String>) -> Self {
        Error::Unsupported {
            backend,
            what: what.into(),
        }
    }

    /// The kind of a [`Error::Collective`], when it is one.
    pub fn collective_kind(&self) -> Option<CollectiveErrorKind> {
        match self {
            Error::Collective { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    /// Shorthand for [`Error::InvalidArgument`].
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }

    /// Shorthand for [`Error::External`]: `source` (a foreign library's error) kept whole,
    /// with `what` (the library and the call) in front of its message.
    pub fn external(
        what: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::External {
            what: what.into(),
            source: Arc::new(source),
        }
    }

    /// The foreign error of an [`Error::External`], as a `T` when it is one.
    pub fn external_source<T: std::error::Error + 'static>(&self) -> Option<&T> {
        match self {
            Error::External { source, .. } => source.downcast_ref::<T>(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn native(sticky: bool) -> NativeError {
        NativeError {
            backend: BackendKind::Cuda,
            api: "cuStreamSynchronize",
            code: 700,
            name: "CUDA_ERROR_ILLEGAL_ADDRESS",
            sticky,
            message: None,
        }
    }

    #[test]
    fn display_keeps_code_and_name() {
        let e = Error::Native(native(true));
        let s = e.to_string();
        assert!(s.contains("cuStreamSynchronize"), "{s}");
        assert!(s.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{s}");
        assert!(s.contains("700"), "{s}");
        assert!(e.is_sticky());
        assert_eq!(e.native().unwrap().code, 700);
    }

    #[test]
    fn external_keeps_the_foreign_error() {
        #[derive(Debug, thiserror::Error, PartialEq)]
        #[error("op library failed with status {0}")]
        struct OpError(i32);

        let e = Error::external("oplib::matmul", OpError(7));
        assert_eq!(
            e.to_string(),
            "oplib::matmul: op library failed with status 7"
        );
        assert_eq!(e.external_source::<OpError>(), Some(&OpError(7)));
        assert!(e.external_source::<std::io::Error>().is_none());
        let src = std::error::Error::source(&e).expect("the source is kept");
        assert_eq!(src.to_string(), "op library failed with status 7");
        assert!(!e.is_sticky());
        assert!(e.native().is_none());
        // Clones share the source.
        assert_eq!(e.clone().external_source::<OpError>(), Some(&OpError(7)));
    }

    #[test]
    fn stickiness() {
        assert!(!Error::Native(native(false)).is_sticky());
        assert!(Error::DeviceLost(native(false)).is_sticky());
        assert!(!Error::Timeout(Duration::from_millis(1)).is_sticky());
        assert!(Error::NotCompiled(BackendKind::Ascend)
            .to_string()
            .contains("`ascend`"));
    }
}
