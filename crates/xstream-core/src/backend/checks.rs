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

/// The foreign-buffer rule (docs/semantics.md, "One device per buffer"): a buffer is used
/// only on streams of the device it belongs to; copies between devices go through
/// [`Stream::copy_peer`](crate::Stream::copy_peer). Checked by the user-facing stream
/// operations before anything reaches the backend.
///
/// # Errors
/// [`Error::WrongDevice`] naming the operation, the buffer's device and the stream's.
pub(crate) fn check_buffer_device<B: crate::Backend>(
    op: &str,
    stream: &crate::StreamOf<B>,
    buf: &crate::BufferOf<B>,
) -> Result<()> {
    use crate::{Buffer, Device, Stream};
    if buf.belongs_to(stream.device()) {
        return Ok(());
    }
    Err(Error::WrongDevice(format!(
        "{op}: the buffer belongs to {} device {}, the stream to device {} (a buffer is used \
         only on streams of its own device; copy between devices with copy_peer)",
        B::KIND,
        buf.device_ordinal(),
        stream.device().info().ordinal,
    )))
}
