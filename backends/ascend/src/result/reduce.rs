//! `aclrtReduceAsync`: the runtime's built-in reduce task.

use std::ffi::c_void;

use xstream_core::{Reduction, Result};

use super::check;
use super::opt;
use crate::sys::{AclFns, RawStream};

/// Enqueues `dst[i] = r.kind(dst[i], src[i])` over `len` bytes. The `ReduceKind`
/// discriminants are the `aclrtReduceKind` values; `ReduceType::acl` gives the `aclDataType`.
pub(crate) fn reduce_async(
    t: &AclFns,
    dst: *mut c_void,
    src: *mut c_void,
    len: usize,
    r: Reduction,
    s: RawStream,
) -> Result<()> {
    let f = opt(t.aclrtReduceAsync, "aclrtReduceAsync")?;
    // SAFETY: both ranges lie inside live device buffers of the stream's device that the
    // stream keeps alive until the task ran; `s` is a live stream of the current context; the
    // reserved last argument is NULL as the prototype requires.
    let code = unsafe {
        f(
            dst,
            src.cast_const(),
            len as u64,
            r.kind as u32,
            r.ty.acl(),
            s.0,
            std::ptr::null_mut(),
        )
    };
    check(t, "aclrtReduceAsync", code)
}
