//! Stream memory operations: a stream waits until a word of device memory satisfies a
//! comparison, or writes a word, in stream order.
//!
//! These are the portable form of CUDA's `cuStreamWaitValue32/64` / `cuStreamWriteValue32/64`
//! and ACL's `aclrtValueWait` / `aclrtValueWrite`. They let one stream (or the host, or another
//! device) release another through memory instead of events, e.g. a producer writes a sequence
//! number and the consumer stream waits for `>=` that number.
//!
//! Rules every backend follows:
//! * The word lives in a device buffer at `offset`; the offset must be a multiple of the width
//!   (4 or 8 bytes) and the word inside the buffer, else [`Error::InvalidArgument`].
//! * Words are little-endian, as the devices store them; the host backend stores bytes the
//!   same way, so [`Stream::write`](crate::Stream::write) of `value.to_le_bytes()` is visible
//!   to a wait.
//! * A wait blocks only its stream: later work on that stream starts after the condition held;
//!   other streams and the host keep running. A wait that never becomes true blocks the stream
//!   forever (synchronize with a timeout to detect it).
//! * [`WaitCondition::Geq`] compares as the vendors do: `(signed)(word - value) >= 0` in the
//!   width's wrapping arithmetic, so a counter that wraps keeps working.
//! * Each width is a capability: [`Capabilities::VALUE_OPS_32`](crate::Capabilities) and
//!   [`Capabilities::VALUE_OPS_64`](crate::Capabilities). A backend without it returns
//!   [`Error::Unsupported`].
//!
//! | Backend | 32-bit | 64-bit |
//! | --- | --- | --- |
//! | host | native (reference) | native (reference) |
//! | CUDA | `cuStreamWaitValue32` / `cuStreamWriteValue32` when the device reports stream memory operations | `cuStreamWaitValue64` / `cuStreamWriteValue64` when the device also reports 64-bit operations |
//! | Ascend | unsupported (ACL's value operations are 64-bit only) | `aclrtValueWait` / `aclrtValueWrite` when the runtime exports both |

use crate::{BackendKind, Error, Result};

/// When a [`wait_value`](crate::Stream::wait_value32) releases its stream. The discriminants
/// are the native values, identical in CUDA (`CU_STREAM_WAIT_VALUE_*`) and ACL
/// (`ACL_VALUE_WAIT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WaitCondition {
    /// `(signed)(word - value) >= 0` (wrapping): the word reached `value`.
    Geq = 0,
    /// `word == value`.
    Eq = 1,
    /// `(word & value) != 0`.
    And = 2,
    /// `!(word | value) != 0`.
    Nor = 3,
}

impl WaitCondition {
    /// Every condition.
    pub const ALL: [WaitCondition; 4] = [Self::Geq, Self::Eq, Self::And, Self::Nor];

    /// Whether a 32-bit `word` satisfies the condition against `value`.
    pub fn holds32(self, word: u32, value: u32) -> bool {
        match self {
            Self::Geq => word.wrapping_sub(value) as i32 >= 0,
            Self::Eq => word == value,
            Self::And => word & value != 0,
            Self::Nor => !(word | value) != 0,
        }
    }

    /// Whether a 64-bit `word` satisfies the condition against `value`.
    pub fn holds64(self, word: u64, value: u64) -> bool {
        match self {
            Self::Geq => word.wrapping_sub(value) as i64 >= 0,
            Self::Eq => word == value,
            Self::And => word & value != 0,
            Self::Nor => !(word | value) != 0,
        }
    }
}

/// One stream memory operation as the backend receives it
/// ([`StreamImpl::value_op_impl`](crate::StreamImpl::value_op_impl)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueOp {
    /// [`Stream::wait_value32`](crate::Stream::wait_value32).
    Wait32(u32, WaitCondition),
    /// [`Stream::wait_value64`](crate::Stream::wait_value64).
    Wait64(u64, WaitCondition),
    /// [`Stream::write_value32`](crate::Stream::write_value32).
    Write32(u32),
    /// [`Stream::write_value64`](crate::Stream::write_value64).
    Write64(u64),
}

impl ValueOp {
    /// The user-facing method's name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Wait32(..) => "wait_value32",
            Self::Wait64(..) => "wait_value64",
            Self::Write32(_) => "write_value32",
            Self::Write64(_) => "write_value64",
        }
    }

    /// The word's width in bytes: 4 or 8.
    pub const fn width(self) -> usize {
        match self {
            Self::Wait32(..) | Self::Write32(_) => 4,
            Self::Wait64(..) | Self::Write64(_) => 8,
        }
    }

    /// The value (widened) and, for a wait, its condition.
    pub const fn parts(self) -> (u64, Option<WaitCondition>) {
        match self {
            Self::Wait32(v, c) => (v as u64, Some(c)),
            Self::Wait64(v, c) => (v, Some(c)),
            Self::Write32(v) => (v as u64, None),
            Self::Write64(v) => (v, None),
        }
    }
}

/// Validates the word at `offset` of a `buf_len`-byte buffer for a `width`-byte operation.
///
/// # Errors
/// [`Error::InvalidArgument`] when misaligned or outside the buffer.
pub fn check_word(what: &str, buf_len: usize, offset: usize, width: usize) -> Result<()> {
    if !offset.is_multiple_of(width) {
        return Err(Error::invalid(format!(
            "{what}: offset {offset} is not a multiple of the {width}-byte word"
        )));
    }
    crate::check_range(what, buf_len, offset, width)
}

/// The error of a backend without the capability.
pub fn unsupported(backend: BackendKind, what: &str) -> Error {
    Error::unsupported(backend, format!("stream memory operation {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions() {
        assert!(WaitCondition::Geq.holds32(5, 5) && WaitCondition::Geq.holds32(6, 5));
        assert!(!WaitCondition::Geq.holds32(4, 5));
        assert!(WaitCondition::Geq.holds32(1, u32::MAX), "wrapping counter");
        assert!(WaitCondition::Geq.holds64(1, u64::MAX), "wrapping counter");
        assert!(!WaitCondition::Eq.holds64(1, 2) && WaitCondition::Eq.holds64(2, 2));
        assert!(WaitCondition::And.holds32(0b110, 0b010));
        assert!(!WaitCondition::And.holds32(0b100, 0b010));
        assert!(WaitCondition::Nor.holds64(0, 0) && !WaitCondition::Nor.holds64(u64::MAX, 0));
        let natives: Vec<u32> = WaitCondition::ALL.iter().map(|c| *c as u32).collect();
        assert_eq!(natives, [0, 1, 2, 3]);
    }

    #[test]
    fn word_checks() {
        assert!(check_word("w", 16, 8, 8).is_ok());
        assert!(check_word("w", 16, 4, 8).is_err(), "misaligned");
        assert!(check_word("w", 16, 16, 4).is_err(), "outside");
        assert!(check_word("w", 16, 12, 4).is_ok());
    }
}
