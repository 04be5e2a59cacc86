//! ACL error mapping: any code, any message. Properties: never a panic; the mapped error
//! displays; a kept native error carries the code; a code outside the table is not sticky
//! and is named `ACL_ERROR_UNKNOWN`; a native error's kind and stickiness are the table's; `with_timeout` only changes timeouts.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xstream_ascend::error::{with_timeout, CODES};
use xstream_ascend::{map_error, AclError};

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let code = i32::from_le_bytes([data[0], data[1], data[2], data[3]]);
    let msg = String::from_utf8_lossy(&data[4..]).into_owned();
    let e = map_error("aclrtFuzz", code, Some(msg));
    assert!(!e.to_string().is_empty());
    let a = AclError(code);
    if let Some(n) = e.native() {
        assert_eq!(n.code, i64::from(code));
        assert_eq!(n.kind, a.kind());
        assert_eq!(n.sticky, a.is_sticky());
    }
    if !CODES.iter().any(|c| c.0 == code) {
        assert_eq!(a.name(), "ACL_ERROR_UNKNOWN");
        assert!(!a.is_sticky());
    }
    let t = with_timeout(e.clone(), std::time::Duration::from_millis(5));
    assert_eq!(
        std::mem::discriminant(&t),
        std::mem::discriminant(&e),
        "with_timeout changed the kind"
    );
});
