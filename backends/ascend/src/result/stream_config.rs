//! Stream creation through the configuration API (`aclrtCreateStreamConfigHandle`,
//! `aclrtSetStreamConfigOpt`, `aclrtCreateStreamV2`, `aclrtDestroyStreamConfigHandle`).

use std::ffi::c_void;

use xstream_core::Result;

use super::{check, opt};
use crate::sys::{consts, AclFns, RawStream};

/// Creates a stream with `priority` and native `flag`: through `aclrtCreateStreamV2` when the
/// runtime exports the configuration API, else through `aclrtCreateStreamWithConfig`.
pub(crate) fn create(t: &AclFns, priority: u32, flag: u32) -> Result<RawStream> {
    if !crate::loader::has_group(t, &crate::loader::STREAM_CONFIG) {
        return super::stream::create_with_config(t, priority, flag);
    }
    let new = opt(
        t.aclrtCreateStreamConfigHandle,
        "aclrtCreateStreamConfigHandle",
    )?;
    let set = opt(t.aclrtSetStreamConfigOpt, "aclrtSetStreamConfigOpt")?;
    let v2 = opt(t.aclrtCreateStreamV2, "aclrtCreateStreamV2")?;
    let free = opt(
        t.aclrtDestroyStreamConfigHandle,
        "aclrtDestroyStreamConfigHandle",
    )?;
    // SAFETY: no arguments; returns a handle or NULL.
    let h = unsafe { new() };
    if h.is_null() {
        return Err(xstream_core::Error::OutOfMemory {
            backend: xstream_core::BackendKind::Ascend,
            detail: "aclrtCreateStreamConfigHandle returned NULL".into(),
        });
    }
    let put = |attr: i32, v: &u32| -> Result<()> {
        let p: *const u32 = v;
        // SAFETY: `h` is the live handle; `p` points to a live u32 of the size passed.
        let code = unsafe { set(h, attr, p.cast::<c_void>(), std::mem::size_of::<u32>()) };
        check(t, "aclrtSetStreamConfigOpt", code)
    };
    let made = put(consts::ACL_RT_STREAM_PRIORITY, &priority)
        .and_then(|()| put(consts::ACL_RT_STREAM_FLAG, &flag))
        .and_then(|()| {
            let mut s: *mut c_void = std::ptr::null_mut();
            // SAFETY: out-pointer to a live local; `h` is the live handle.
            let code = unsafe { v2(&mut s, h) };
            check(t, "aclrtCreateStreamV2", code).map(|()| RawStream(s))
        });
    // SAFETY: `h` came from aclrtCreateStreamConfigHandle and is destroyed once.
    let code = unsafe { free(h) };
    let freed = check(t, "aclrtDestroyStreamConfigHandle", code);
    let s = made?;
    freed.map(|()| s)
}
