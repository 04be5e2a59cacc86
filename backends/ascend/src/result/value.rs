//! `aclrtValueWait` / `aclrtValueWrite`: 64-bit stream memory operations.

use xstream_core::{Result, WaitCondition};

use super::check;
use super::opt;
use crate::sys::{AclFns, DevPtr, RawStream};

/// Enqueues a wait until the 64-bit word at `addr` satisfies `cond` against `value`. The
/// `WaitCondition` discriminants are the `ACL_VALUE_WAIT_*` values.
pub(crate) fn wait(
    t: &AclFns,
    addr: DevPtr,
    value: u64,
    cond: WaitCondition,
    s: RawStream,
) -> Result<()> {
    let f = opt(t.aclrtValueWait, "aclrtValueWait")?;
    // SAFETY: `addr` is an 8-byte aligned word inside a live device buffer the stream keeps
    // alive until the wait ran; `s` is a live stream of the current context.
    let code = unsafe { f(addr.0, value, cond as u32, s.0) };
    check(t, "aclrtValueWait", code)
}

/// Enqueues a write of `value` to the 64-bit word at `addr` (the flag is reserved: 0).
pub(crate) fn write(t: &AclFns, addr: DevPtr, value: u64, s: RawStream) -> Result<()> {
    let f = opt(t.aclrtValueWrite, "aclrtValueWrite")?;
    // SAFETY: as in `wait`.
    let code = unsafe { f(addr.0, value, 0, s.0) };
    check(t, "aclrtValueWrite", code)
}
