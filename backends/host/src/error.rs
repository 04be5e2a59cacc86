//! The host backend's code table: the codes it reports as [`Error::Native`], the same way the
//! vendor backends report theirs (`backends/cuda/src/error.rs`, `backends/ascend/src/error.rs`).
//!
//! The host backend calls no vendor runtime, so its table is short: the simulated device fault
//! (`Kernel::Fault`, feature `testing`, or a failed host kernel), which poisons the device like
//! CUDA's `CUDA_ERROR_ILLEGAL_ADDRESS` and keeps that code's number. Everything else the host
//! backend refuses is one of xstream's own conditions (`InvalidArgument`, `OutOfMemory`, ...).

use xstream_core::{BackendKind, Error, ErrorKind, NativeError};

/// The simulated device fault: the context is poisoned (sticky).
pub const HOST_DEVICE_FAULT: i64 = 700;

/// `(code, name, kind)` for every code the host backend reports.
pub const CODES: &[(i64, &str, ErrorKind)] = &[(
    HOST_DEVICE_FAULT,
    "HOST_DEVICE_FAULT",
    ErrorKind::DeviceLost,
)];

/// The error of `code` (a row of [`CODES`]) reported by `api`, with `message`. A code outside
/// the table is kept with the name `HOST_ERROR_UNKNOWN` and kind [`ErrorKind::Other`].
pub fn map(api: &'static str, code: i64, message: Option<String>) -> Error {
    let (name, kind) = CODES
        .iter()
        .find(|r| r.0 == code)
        .map_or(("HOST_ERROR_UNKNOWN", ErrorKind::Other), |r| (r.1, r.2));
    Error::Native(NativeError::new(BackendKind::Host, api, code, name, kind).with_message(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_keeps_its_number_name_and_kind() {
        for &(code, name, kind) in CODES {
            let e = map("kernel", code, Some("m".into()));
            let n = e.native().expect("a host code stays native");
            assert_eq!(
                (n.backend, n.code, n.name, n.kind),
                (BackendKind::Host, code, name, kind)
            );
            assert_eq!(n.message.as_deref(), Some("m"));
            assert_eq!(e.is_sticky(), kind == ErrorKind::DeviceLost, "{name}");
            assert_eq!(e.kind(), kind);
        }
        let fault = map("kernel", HOST_DEVICE_FAULT, None);
        assert!(fault.is_device_lost() && fault.is_sticky());
        let other = map("kernel", 1, None);
        assert_eq!(other.native().unwrap().name, "HOST_ERROR_UNKNOWN");
        assert!(!other.is_sticky());
    }
}
