//! Argument validation shared by every backend.

use std::time::Duration;

use crate::{Error, Result};

/// Validates a timeout argument: zero is refused on every backend (ACL rejects 0).
///
/// # Errors
/// [`Error::InvalidArgument`].
pub fn check_timeout(timeout: Duration) -> Result<()> {
    if timeout.is_zero() {
        Err(Error::invalid(
            "a zero timeout is not allowed; use query() to poll",
        ))
    } else {
        Ok(())
    }
}

/// Validates `offset + len <= buf_len`.
///
/// # Errors
/// [`Error::InvalidArgument`].
pub fn check_range(what: &str, buf_len: usize, offset: usize, len: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= buf_len => Ok(()),
        _ => Err(Error::invalid(format!(
            "{what}: range {offset}..{offset}+{len} is outside the {buf_len}-byte buffer"
        ))),
    }
}
