//! Loader: bad paths, non-ACL libraries, the real simulator.
mod common;

use xstream_ascend::loader::{load_error, try_load};
use xstream_ascend::{AscendBackend, LoadError};
use xstream_core::{Backend, Error};

#[test]
fn bad_paths_listed_in_error() {
    let places = vec![
        "/no/such/dir/libascendcl.so".to_string(),
        "/also/missing.so".to_string(),
    ];
    let e = try_load(&places).err().unwrap();
    let xe = load_error(&e);
    let s = xe.to_string();
    assert!(matches!(xe, Error::NotAvailable { .. }), "{xe:?}");
    assert!(
        s.contains("/no/such/dir/libascendcl.so") && s.contains("/also/missing.so"),
        "{s}"
    );
}

#[test]
fn non_acl_library_is_missing_symbol() {
    let e = try_load(&["libc.so.6".to_string()]).err().unwrap();
    assert!(
        matches!(
            e,
            LoadError::MissingSymbol {
                symbol: "aclInit",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(matches!(
        load_error(&e),
        Error::MissingSymbol {
            symbol: "aclInit",
            ..
        }
    ));
}

#[test]
fn simulator_really_dlopens() {
    if !common::in_sim_process() {
        return;
    }
    let p = common::setup();
    AscendBackend::availability().unwrap();
    assert!(AscendBackend::is_available());
    assert_eq!(AscendBackend::device_count().unwrap(), 2);
    let fns = AscendBackend::fns().unwrap();
    assert_eq!(fns.library, p.to_string_lossy());
    let opt = AscendBackend::optional_symbols().unwrap();
    for s in [
        "aclrtCreateStreamWithConfig",
        "aclrtLaunchKernelWithConfig",
        "aclmdlRICaptureBegin",
    ] {
        assert!(opt.contains(&s), "{s} missing from {opt:?}");
    }
    assert!(AscendBackend::open(7).is_err());
}
