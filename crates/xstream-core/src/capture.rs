//! The capture state machine every backend follows.
//!
//! ```text
//!        begin            illegal op
//! None ---------> Active -----------> Invalidated
//!   ^               |                     |
//!   |  end (graph)  |    end (error)      |
//!   +---------------+---------------------+
//! ```
//! While a stream is `Active`, it records instead of executing: query, synchronize and
//! exactly-once host callbacks on it are refused with [`Error::Capture`] and invalidate the
//! capture (CUDA's rule), so `end_capture` then fails with [`CaptureErrorKind::Invalidated`]
//! and the stream is usable again at once.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::{CaptureErrorKind, Error, Result};

/// How a capture interacts with unsafe calls made by other threads (CUDA's
/// `CUstreamCaptureMode`, ACL's `aclmdlRICaptureMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CaptureMode {
    /// Unsafe calls from any thread invalidate the capture.
    #[default]
    Global,
    /// Unsafe calls from the capturing thread invalidate the capture.
    ThreadLocal,
    /// No call is refused because of the capture (except on the captured stream itself).
    Relaxed,
}

/// A stream's capture status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureStatus {
    /// Not capturing: work executes.
    None,
    /// Capturing: work is recorded.
    Active,
    /// Capturing, but an illegal operation broke the capture; `end_capture` will fail.
    Invalidated,
}

const NONE: u8 = 0;
const ACTIVE: u8 = 1;
const INVALIDATED: u8 = 2;

/// The lock-free capture state of one stream.
#[derive(Debug, Default)]
pub struct CaptureCell(AtomicU8);

impl CaptureCell {
    /// A stream that is not capturing.
    pub const fn new() -> Self {
        Self(AtomicU8::new(NONE))
    }

    /// The current status.
    pub fn status(&self) -> CaptureStatus {
        match self.0.load(Ordering::Acquire) {
            NONE => CaptureStatus::None,
            ACTIVE => CaptureStatus::Active,
            _ => CaptureStatus::Invalidated,
        }
    }

    /// Whether work enqueued now is recorded rather than executed.
    #[inline]
    pub fn is_capturing(&self) -> bool {
        self.0.load(Ordering::Acquire) != NONE
    }

    /// `None -> Active`.
    ///
    /// # Errors
    /// [`CaptureErrorKind::AlreadyCapturing`] when a capture is under way (it stays valid).
    pub fn begin(&self) -> Result<()> {
        self.0
            .compare_exchange(NONE, ACTIVE, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(|_| Error::Capture {
                op: "begin_capture",
                kind: CaptureErrorKind::AlreadyCapturing,
            })
    }

    /// Ends the capture: back to `None` in every case.
    ///
    /// # Errors
    /// [`CaptureErrorKind::NotCapturing`] or [`CaptureErrorKind::Invalidated`].
    pub fn end(&self) -> Result<()> {
        match self.0.swap(NONE, Ordering::AcqRel) {
            ACTIVE => Ok(()),
            NONE => Err(Error::Capture {
                op: "end_capture",
                kind: CaptureErrorKind::NotCapturing,
            }),
            _ => Err(Error::Capture {
                op: "end_capture",
                kind: CaptureErrorKind::Invalidated,
            }),
        }
    }

    /// Marks the capture invalidated (if one is under way).
    pub fn invalidate(&self) {
        let _ = self
            .0
            .compare_exchange(ACTIVE, INVALIDATED, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Gates an operation that is illegal during capture: `Ok` when not capturing; otherwise
    /// invalidates the capture and returns [`CaptureErrorKind::Unsupported`] (or
    /// [`CaptureErrorKind::Invalidated`] when it already was).
    ///
    /// # Errors
    /// As described.
    #[inline]
    pub fn gate(&self, op: &'static str) -> Result<()> {
        match self.0.load(Ordering::Acquire) {
            NONE => Ok(()),
            ACTIVE => {
                self.invalidate();
                Err(Error::Capture {
                    op,
                    kind: CaptureErrorKind::Unsupported,
                })
            }
            _ => Err(Error::Capture {
                op,
                kind: CaptureErrorKind::Invalidated,
            }),
        }
    }

    /// Gates an operation that is recorded during capture: `Ok` unless the capture is
    /// invalidated, in which case enqueues fail like CUDA's (`CAPTURE_INVALIDATED`).
    ///
    /// # Errors
    /// [`CaptureErrorKind::Invalidated`].
    #[inline]
    pub fn gate_enqueue(&self, op: &'static str) -> Result<()> {
        if self.0.load(Ordering::Acquire) == INVALIDATED {
            Err(Error::Capture {
                op,
                kind: CaptureErrorKind::Invalidated,
            })
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_machine() {
        let c = CaptureCell::new();
        assert!(c.gate("sync").is_ok());
        assert!(c.end().is_err());
        c.begin().unwrap();
        assert!(matches!(
            c.begin(),
            Err(Error::Capture {
                kind: CaptureErrorKind::AlreadyCapturing,
                ..
            })
        ));
        assert_eq!(c.status(), CaptureStatus::Active);
        c.end().unwrap();
        c.begin().unwrap();
        assert!(c.gate_enqueue("memset").is_ok());
        assert!(c.gate("synchronize").is_err());
        assert_eq!(c.status(), CaptureStatus::Invalidated);
        assert!(c.gate_enqueue("memset").is_err());
        assert!(matches!(
            c.end(),
            Err(Error::Capture {
                kind: CaptureErrorKind::Invalidated,
                ..
            })
        ));
        assert_eq!(c.status(), CaptureStatus::None);
        assert!(c.gate("synchronize").is_ok());
    }
}
