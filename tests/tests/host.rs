//! The conformance suite on the host backend (always available).

use xstream_conformance::{assert_conforms, report_line, run, Env};
use xstream_core::Backend;
use xstream_host::{HostBackend, HostDevice};

#[test]
fn conformance_on_host() {
    let env = Env::<HostBackend> {
        device: HostBackend::open(0).expect("host device"),
        isolated: Some(|| Ok(HostDevice::new_isolated(0))),
    };
    let sum = run(&env, None, report_line);
    assert_conforms::<HostBackend>("host", &sum);
}
