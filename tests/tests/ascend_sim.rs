//! The conformance suite on the Ascend backend, over the ACL runtime simulator (a test double
//! of `libascendcl.so`, built by this workspace and loaded with dlopen). This is not hardware
//! verification.

use xstream_ascend::AscendBackend;
use xstream_conformance::{assert_conforms, report_line, run, Env};
use xstream_core::Backend;

#[test]
fn conformance_on_ascend_simulator() {
    if !xstream_conformance::simulator::run_in_child(2) {
        return;
    }
    xstream_conformance::simulator::setup(2);
    AscendBackend::availability().expect("the simulator must load through dlopen");
    let env = Env::<AscendBackend> {
        device: AscendBackend::open(0).expect("simulated Ascend device"),
        // A context of its own: the deliberate fault of `callback_error_after_fault` poisons
        // only that context.
        isolated: Some(|| xstream_ascend::AscendDevice::new_isolated(0)),
    };
    let sum = run(&env, None, report_line);
    assert_conforms::<AscendBackend>("ascend (simulator)", &sum);
    let fault = run(&env, Some("callback_error_after_fault"), report_line);
    assert_eq!(
        (fault.passed, fault.skipped),
        (1, 0),
        "callback_error_after_fault must run on the simulator"
    );
}
