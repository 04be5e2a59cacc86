//! `aclrtGetVersion`: the ACL API version the loaded runtime reports.

use crate::sys::AclFns;

/// `(major, minor, patch)` when the runtime exports `aclrtGetVersion` and the call succeeds.
pub(crate) fn query(t: &AclFns) -> Option<(i32, i32, i32)> {
    let f = t.aclrtGetVersion?;
    let (mut a, mut b, mut c) = (0i32, 0i32, 0i32);
    // SAFETY: three out-pointers to live locals; the prototype is
    // `aclError aclrtGetVersion(int32_t*, int32_t*, int32_t*)`.
    let code = unsafe { f(&mut a, &mut b, &mut c) };
    (code == 0).then_some((a, b, c))
}
