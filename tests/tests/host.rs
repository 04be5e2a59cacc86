//! The conformance suite on the host backend (always available).

use xstream_conformance::{print_line, run, Env};
use xstream_core::Backend;
use xstream_host::{HostBackend, HostDevice};

#[test]
fn conformance_on_host() {
    let env = Env::<HostBackend> {
        device: HostBackend::open(0).expect("host device"),
        isolated: Some(|| Ok(HostDevice::new_isolated(0))),
    };
    let sum = run(&env, None, print_line);
    println!("host: {sum:?}");
    assert_eq!(
        sum.failed, 0,
        "conformance failures on host (see PASS/FAIL lines above)"
    );
    assert!(sum.passed >= 20, "too few checks passed: {sum:?}");
}
