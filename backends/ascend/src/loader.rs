//! Discovery of `libascendcl.so`, the process-wide function table and `aclInit`.
//!
//! Candidates, in order: `$XSTREAM_ACL_LIBRARY` (an explicit path), then
//! `$ASCEND_HOME_PATH/lib64/libascendcl.so`, then
//! `/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so`, then the plain name
//! `libascendcl.so` (the dynamic loader's search path). The first that opens **and** has every
//! required symbol wins; a library without the ACL symbols gives [`LoadError::MissingSymbol`].
//!
//! The table is loaded once per process into a `OnceLock<Result<_, LoadError>>`; `aclInit` is
//! called once after it (`ACL_ERROR_REPEAT_INITIALIZE` counts as success). xstream never calls
//! `aclFinalize` from a destructor (a process-exit destructor could race with runtime threads);
//! call [`crate::AscendBackend::finalize`] explicitly if you need it.

use std::sync::OnceLock;

use xstream_core::{BackendKind, Error, Result};

use crate::sys::{AclFns, LoadError};

/// The environment variable naming an explicit library path.
pub const ENV_LIBRARY: &str = "XSTREAM_ACL_LIBRARY";

/// The candidate paths, in the order they are tried.
pub fn candidates() -> Vec<String> {
    let mut v = Vec::new();
    if let Ok(p) = std::env::var(ENV_LIBRARY) {
        if !p.is_empty() {
            v.push(p);
        }
    }
    if let Ok(home) = std::env::var("ASCEND_HOME_PATH") {
        if !home.is_empty() {
            v.push(format!("{home}/lib64/libascendcl.so"));
        }
    }
    cfg_if::cfg_if! {
        if #[cfg(target_os = "linux")] {
            v.push("/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so".to_string());
            v.push("libascendcl.so".to_string());
        } else {
            v.push("libascendcl.so".to_string());
        }
    }
    v
}

/// Tries `candidates` in order (no global state).
///
/// # Errors
/// [`LoadError::NotFound`] listing every place tried, or the first
/// [`LoadError::MissingSymbol`] when a library opened but is not an ACL runtime (and no later
/// candidate is).
pub fn try_load(candidates: &[String]) -> std::result::Result<AclFns, LoadError> {
    let mut tried = Vec::new();
    let mut missing = None;
    for c in candidates {
        match AclFns::open(c) {
            Ok(t) => return Ok(t),
            Err((_, e @ LoadError::MissingSymbol { .. })) => {
                tried.push((c.clone(), e.to_string()));
                missing.get_or_insert(e);
            }
            Err((why, _)) => tried.push((c.clone(), why)),
        }
    }
    Err(missing.unwrap_or(LoadError::NotFound { tried }))
}

/// Converts a [`LoadError`] to xstream's error.
pub fn load_error(e: &LoadError) -> Error {
    match e {
        LoadError::MissingSymbol { library, symbol } => Error::MissingSymbol {
            library: library.clone(),
            symbol,
        },
        LoadError::NotFound { .. } => Error::NotAvailable {
            backend: BackendKind::Ascend,
            reason: e.to_string(),
        },
    }
}

/// The process-wide table (loaded on first use, never panics).
///
/// # Errors
/// As [`try_load`], converted.
pub fn table() -> Result<&'static AclFns> {
    static T: OnceLock<std::result::Result<AclFns, LoadError>> = OnceLock::new();
    T.get_or_init(|| try_load(&candidates()))
        .as_ref()
        .map_err(load_error)
}

/// The table after a successful `aclInit` (called once per process).
///
/// # Errors
/// Load errors; `aclInit` failures.
pub fn acl() -> Result<&'static AclFns> {
    static INIT: OnceLock<std::result::Result<(), Error>> = OnceLock::new();
    let t = table()?;
    INIT.get_or_init(|| crate::result::init(t)).clone()?;
    Ok(t)
}

#[cfg(test)]
#[allow(unsafe_code)]
mod tests {
    use super::*;
    use std::ffi::{c_void, CStr};

    extern "C" fn dummy() {}

    #[test]
    fn fake_resolver_required_and_optional() {
        let addr = dummy as *const () as *mut c_void;
        // Everything but aclrtProcessReport: a required symbol is missing.
        // SAFETY: the table is never called; only presence is checked.
        let r = unsafe {
            AclFns::load_with("fake", |n: &CStr| {
                if n == c"aclrtProcessReport" {
                    std::ptr::null_mut()
                } else {
                    addr
                }
            })
        };
        assert_eq!(
            r.err(),
            Some(LoadError::MissingSymbol {
                library: "fake".into(),
                symbol: "aclrtProcessReport"
            })
        );
        // Only the required symbols: optional ones are None and reported as absent.
        // SAFETY: as above.
        let t = unsafe {
            AclFns::load_with("fake", |n: &CStr| {
                if AclFns::REQUIRED.contains(&n) {
                    addr
                } else {
                    std::ptr::null_mut()
                }
            })
        }
        .unwrap();
        assert!(t.aclrtCreateStreamWithConfig.is_none());
        assert!(t.xsimLaunchDelay.is_none());
        assert!(t.present_optional().is_empty());
    }

    #[test]
    fn not_found_lists_every_place() {
        let c = vec![
            "/nonexistent/a/libascendcl.so".to_string(),
            "/nonexistent/b.so".to_string(),
        ];
        let e = try_load(&c).err().unwrap();
        let s = e.to_string();
        assert!(
            s.contains("/nonexistent/a/libascendcl.so") && s.contains("/nonexistent/b.so"),
            "{s}"
        );
        assert!(matches!(load_error(&e), Error::NotAvailable { .. }));
    }

    #[test]
    fn candidate_order() {
        let c = candidates();
        assert_eq!(c.last().map(String::as_str), Some("libascendcl.so"));
    }
}
