//! The one error type of xstream.
//!
//! Every fallible call returns [`Result`]. Vendor codes are never flattened into strings: every
//! failed vendor call becomes [`Error::Native`], whose [`NativeError`] keeps the backend, the
//! API that failed, the numeric code and its symbolic name, whether the vendor considers the
//! error *sticky* (the context is poisoned and only a new process recovers), and an
//! [`ErrorKind`] that classifies the code. The two exceptions are typed xstream conditions the
//! vendor reports with a code: a broken capture rule ([`Error::Capture`], naming the API) and an
//! expired timed wait ([`Error::Timeout`]).
//!
//! Callers classify an error with [`Error::kind`], which answers the same for xstream's own
//! checks (say [`Error::OutOfMemory`] from the host backend) and for a vendor's code (say
//! `CUDA_ERROR_OUT_OF_MEMORY`, 2), so a match on the kind covers every backend.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::collective::CollectiveErrorKind;
use crate::BackendKind;

/// `Result` with xstream's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What kind of failure an [`Error`] is, the same whether xstream found it or a vendor code
/// reported it (see [`Error::kind`]). Each backend's code table gives every code it lists one
/// of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Memory (host or device) is exhausted.
    OutOfMemory,
    /// A resource other than memory is exhausted (streams, events, threads, launch resources).
    ResourceExhausted,
    /// The work is not complete yet.
    NotReady,
    /// The device faulted or was lost: the context is poisoned and only a new process
    /// recovers. Errors of this kind are always sticky ([`Error::is_sticky`]), and every sticky
    /// error is of this kind.
    DeviceLost,
    /// The call is not permitted here (inside a stream-blocking host callback, by the driver's
    /// policy, on a borrowed or default stream).
    NotPermitted,
    /// A bad argument, handle or state given by the caller.
    InvalidValue,
    /// The backend, device or driver cannot do this.
    Unsupported,
    /// Objects of two devices or contexts were mixed, or no context is current.
    WrongDevice,
    /// Objects of two backends were mixed.
    WrongBackend,
    /// A timed wait expired.
    Timeout,
    /// A capture rule was broken.
    Capture,
    /// The backend cannot be used: not compiled in, library or device missing, not
    /// initialized.
    NotAvailable,
    /// A host callback panicked or was cancelled.
    Callback,
    /// A collective operation failed.
    Collective,
    /// Anything else (a vendor code without a better class, a foreign library's error).
    Other,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::OutOfMemory => "out of memory",
            Self::ResourceExhausted => "resource exhausted",
            Self::NotReady => "not ready",
            Self::DeviceLost => "device lost",
            Self::NotPermitted => "not permitted",
            Self::InvalidValue => "invalid value",
            Self::Unsupported => "unsupported",
            Self::WrongDevice => "wrong device",
            Self::WrongBackend => "wrong backend",
            Self::Timeout => "timed out",
            Self::Capture => "capture error",
            Self::NotAvailable => "not available",
            Self::Callback => "callback failed",
            Self::Collective => "collective failed",
            Self::Other => "error",
        })
    }
}

/// A vendor error code, kept as the vendor reported it.
///
/// Build one with [`NativeError::new`], which keeps [`sticky`](NativeError::sticky) and
/// [`kind`](NativeError::kind) consistent: sticky exactly when the kind is
/// [`ErrorKind::DeviceLost`].
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
    /// What the code means, from the backend's code table.
    pub kind: ErrorKind,
    /// The error poisons the context: every later call on it fails. True exactly when `kind`
    /// is [`ErrorKind::DeviceLost`].
    pub sticky: bool,
    /// A message the vendor attached (e.g. `aclGetRecentErrMsg`), when there was one.
    pub message: Option<String>,
}

impl NativeError {
    /// A vendor code of `backend` returned by `api`, classified as `kind` (sticky when `kind`
    /// is [`ErrorKind::DeviceLost`]), without a message.
    pub fn new(
        backend: BackendKind,
        api: &'static str,
        code: i64,
        name: &'static str,
        kind: ErrorKind,
    ) -> Self {
        NativeError {
            backend,
            api,
            code,
            name,
            kind,
            sticky: kind == ErrorKind::DeviceLost,
            message: None,
        }
    }

    /// The same error with the vendor's message attached.
    #[must_use]
    pub fn with_message(mut self, message: Option<String>) -> Self {
        self.message = message;
        self
    }
}

impl fmt::Display for NativeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} failed with {} ({}; {})",
            self.api, self.name, self.code, self.kind
        )?;
        if self.sticky {
            f.write_str(" [sticky: context poisoned]")?;
        }
        if let Some(m) = &self.message {
            write!(f, ": {m}")?;
        }
        Ok(())
    }
}

/// Which kind of stream refused an operation reserved to owned streams ([`Error::NotOwned`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotOwnedKind {
    /// A stream borrowed from a raw handle (`Stream::borrow_raw`).
    Borrowed,
    /// The vendor's default (legacy or per-thread) stream.
    Default,
}

impl fmt::Display for NotOwnedKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Borrowed => "borrowed",
            Self::Default => "default",
        })
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
    /// Bad input from the caller, found by xstream before any vendor call.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Memory (host or device) is exhausted, found by xstream itself (a refused reservation,
    /// a size no allocation can have). A vendor's out-of-memory code is an [`Error::Native`] of
    /// kind [`ErrorKind::OutOfMemory`]; [`Error::is_out_of_memory`] answers for both.
    #[error("{backend} backend is out of memory: {detail}")]
    OutOfMemory {
        /// Which backend.
        backend: BackendKind,
        /// What was being allocated.
        detail: String,
    },
    /// A resource pool (streams, events, threads) is exhausted, found by xstream itself. A
    /// vendor's code for it is an [`Error::Native`] of kind [`ErrorKind::ResourceExhausted`].
    #[error("{backend} backend resource exhausted: {detail}")]
    ResourceExhausted {
        /// Which backend.
        backend: BackendKind,
        /// Which resource and the limit.
        detail: String,
    },
    /// A timed wait expired. The stream or event is still usable.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The call is not permitted here, e.g. an xstream call from inside a stream-blocking host
    /// callback (xstream's own rule; a vendor's refusal is an [`Error::Native`] of kind
    /// [`ErrorKind::NotPermitted`]).
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
    /// The work is not complete yet, found by xstream itself (a vendor's not-ready code is an
    /// [`Error::Native`] of kind [`ErrorKind::NotReady`]; [`Error::is_not_ready`] answers for
    /// both).
    #[error("work not complete yet")]
    NotReady,
    /// The operation is not allowed on a borrowed or default stream.
    #[error("a {kind} stream cannot {op}")]
    NotOwned {
        /// Which kind of stream it is.
        kind: NotOwnedKind,
        /// What was refused.
        op: &'static str,
    },
    /// Objects of two different devices (or contexts) of one backend were mixed.
    #[error("wrong device: {0}")]
    WrongDevice(String),
    /// Objects of two different backends were mixed (the erased handles of the `xstream`
    /// facade, a raw descriptor of another backend).
    #[error(
        "{op}: the {expected} backend's object was given the {found} backend's object (backends do not mix)"
    )]
    WrongBackend {
        /// The operation that was refused.
        op: &'static str,
        /// The backend of the object the operation was called on.
        expected: BackendKind,
        /// The backend of the object it was given.
        found: BackendKind,
    },
    /// A vendor call failed: the code, its name, its class ([`NativeError::kind`]) and whether
    /// it is sticky. A device fault or loss is this variant with kind
    /// [`ErrorKind::DeviceLost`] (always sticky).
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
    /// What kind of failure this is, the same for xstream's own checks and for vendor codes
    /// (an [`Error::Native`] answers its [`NativeError::kind`]). Match on this rather than on
    /// variants to classify an error portably.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NotAvailable { .. }
            | Error::NotCompiled(_)
            | Error::Load { .. }
            | Error::MissingSymbol { .. } => ErrorKind::NotAvailable,
            Error::Unsupported { .. } | Error::UnsupportedFlag { .. } => ErrorKind::Unsupported,
            Error::RejectedCombination { .. }
            | Error::InvalidArgument(_)
            | Error::TimingDisabled
            | Error::EventNotRecorded => ErrorKind::InvalidValue,
            Error::OutOfMemory { .. } => ErrorKind::OutOfMemory,
            Error::ResourceExhausted { .. } => ErrorKind::ResourceExhausted,
            Error::Timeout(_) => ErrorKind::Timeout,
            Error::NotPermitted(_) | Error::NotOwned { .. } => ErrorKind::NotPermitted,
            Error::Capture { .. } => ErrorKind::Capture,
            Error::CallbackPanicked(_) | Error::CallbackCancelled(_) => ErrorKind::Callback,
            Error::NotReady => ErrorKind::NotReady,
            Error::WrongDevice(_) => ErrorKind::WrongDevice,
            Error::WrongBackend { .. } => ErrorKind::WrongBackend,
            Error::Native(n) => n.kind,
            Error::External { .. } => ErrorKind::Other,
            Error::Collective { .. } => ErrorKind::Collective,
        }
    }

    /// Whether the error poisons the device context (only a new process recovers): a
    /// [`NativeError`] of kind [`ErrorKind::DeviceLost`].
    pub fn is_sticky(&self) -> bool {
        match self {
            Error::Native(n) => n.sticky,
            _ => false,
        }
    }

    /// Whether memory ran out: [`Error::OutOfMemory`] or a vendor code of that kind.
    pub fn is_out_of_memory(&self) -> bool {
        self.kind() == ErrorKind::OutOfMemory
    }

    /// Whether the work is not complete yet: [`Error::NotReady`] or a vendor code of that
    /// kind.
    pub fn is_not_ready(&self) -> bool {
        self.kind() == ErrorKind::NotReady
    }

    /// Whether the device faulted or was lost (a sticky vendor error).
    pub fn is_device_lost(&self) -> bool {
        self.kind() == ErrorKind::DeviceLost
    }

    /// Whether the backend cannot do this: [`Error::Unsupported`],
    /// [`Error::UnsupportedFlag`] or a vendor code of that kind.
    pub fn is_unsupported(&self) -> bool {
        self.kind() == ErrorKind::Unsupported
    }

    /// The vendor's native error, when there is one.
    pub fn native(&self) -> Option<&NativeError> {
        match self {
            Error::Native(n) => Some(n),
            _ => None,
        }
    }

    /// The vendor's native error, mutable (to attach a message), when there is one.
    pub fn native_mut(&mut self) -> Option<&mut NativeError> {
        match self {
            Error::Native(n) => Some(n),
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

    fn native(kind: ErrorKind) -> NativeError {
        NativeError::new(
            BackendKind::Cuda,
            "cuStreamSynchronize",
            700,
            "CUDA_ERROR_ILLEGAL_ADDRESS",
            kind,
        )
    }

    #[test]
    fn display_keeps_code_and_name() {
        let e = Error::Native(native(ErrorKind::DeviceLost));
        let s = e.to_string();
        assert!(s.contains("cuStreamSynchronize"), "{s}");
        assert!(s.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{s}");
        assert!(s.contains("700"), "{s}");
        assert!(e.is_sticky());
        assert_eq!(e.native().unwrap().code, 700);
        assert!(s.contains("device lost"), "{s}");
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
    fn stickiness_follows_the_kind() {
        for kind in [
            ErrorKind::OutOfMemory,
            ErrorKind::NotReady,
            ErrorKind::NotPermitted,
            ErrorKind::InvalidValue,
            ErrorKind::Other,
        ] {
            let e = Error::Native(native(kind));
            assert!(!e.is_sticky(), "{kind:?}");
            assert_eq!(e.kind(), kind);
        }
        let lost = Error::Native(native(ErrorKind::DeviceLost));
        assert!(lost.is_sticky() && lost.is_device_lost());
        assert!(!Error::Timeout(Duration::from_millis(1)).is_sticky());
        assert!(Error::NotCompiled(BackendKind::Ascend)
            .to_string()
            .contains("`ascend`"));
    }

    #[test]
    fn own_conditions_and_vendor_codes_share_a_kind() {
        let oom = Error::OutOfMemory {
            backend: BackendKind::Host,
            detail: "1 TiB".into(),
        };
        let vendor_oom = Error::Native(native(ErrorKind::OutOfMemory));
        assert!(oom.is_out_of_memory() && vendor_oom.is_out_of_memory());
        assert!(!vendor_oom.is_not_ready());
        assert!(Error::NotReady.is_not_ready());
        assert!(Error::Native(native(ErrorKind::NotReady)).is_not_ready());
        assert!(Error::unsupported(BackendKind::Host, "x").is_unsupported());
        assert_eq!(
            Error::NotOwned {
                kind: NotOwnedKind::Default,
                op: "set_priority"
            }
            .to_string(),
            "a default stream cannot set_priority"
        );
        let wb = Error::WrongBackend {
            op: "wait_event",
            expected: BackendKind::Host,
            found: BackendKind::Cuda,
        };
        assert_eq!(wb.kind(), ErrorKind::WrongBackend);
        assert_ne!(wb.kind(), Error::WrongDevice("d".into()).kind());
        // The code, not a string, is what a native error keeps.
        let mut e = vendor_oom;
        e.native_mut().unwrap().message = Some("m".into());
        assert_eq!(e.native().unwrap().code, 700);
        assert!(e.to_string().ends_with(": m"), "{e}");
    }
}
