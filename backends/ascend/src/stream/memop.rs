//! Stream memory operations on Ascend: `aclrtValueWait` / `aclrtValueWrite` (64-bit only).
//!
//! Used when the runtime exports both symbols ([`Capabilities::VALUE_OPS_64`]); otherwise, and
//! for every 32-bit operation (ACL's value operations work on 64-bit words only), the calls
//! return [`Error::Unsupported`] naming the reason.

use xstream_core::{BackendKind, Capabilities, Device, Error, Result, WaitCondition};

use super::AscendStream;
use crate::result;
use crate::sys::DevPtr;

/// The error of a 32-bit operation.
pub(super) fn no_32bit(what: &str) -> Error {
    Error::unsupported(
        BackendKind::Ascend,
        format!("{what}: ACL value operations (aclrtValueWait/aclrtValueWrite) are 64-bit only"),
    )
}

/// Checks and enqueues one 64-bit operation: `Some(cond)` waits, `None` writes.
pub(super) fn value64(
    s: &AscendStream,
    what: &'static str,
    word: super::Span<'_>,
    value: u64,
    cond: Option<WaitCondition>,
) -> Result<()> {
    if !s
        .device
        .info()
        .capabilities
        .contains(Capabilities::VALUE_OPS_64)
    {
        return Err(Error::unsupported(
            BackendKind::Ascend,
            format!(
                "{what}: this libascendcl.so does not export aclrtValueWait and aclrtValueWrite"
            ),
        ));
    }
    s.enter(what)?;
    let buf = word.buffer();
    s.note_use(buf)?;
    let t = s.device.inner.t;
    let addr = DevPtr(result::memory::at(buf.inner.ptr, word.offset()));
    match cond {
        Some(c) => result::value::wait(t, addr, value, c, s.state.raw)?,
        None => result::value::write(t, addr, value, s.state.raw)?,
    }
    s.state
        .enqueued(Some(Box::new(std::sync::Arc::clone(&buf.inner))));
    Ok(())
}
