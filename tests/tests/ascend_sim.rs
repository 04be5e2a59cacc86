//! The conformance suite on the Ascend backend, over the ACL runtime simulator (a test double
//! of `libascendcl.so`, built by this workspace and loaded with dlopen). This is not hardware
//! verification.

use xstream_ascend::AscendBackend;
use xstream_conformance::{print_line, run, Env};
use xstream_core::Backend;

#[test]
fn conformance_on_ascend_simulator() {
    xstream_conformance::simulator::setup(2);
    AscendBackend::availability().expect("the simulator must load through dlopen");
    let env = Env::<AscendBackend> {
        device: AscendBackend::open(0).expect("simulated Ascend device"),
        // A context of its own: the deliberate fault of `callback_error_after_fault` poisons
        // only that context.
        isolated: Some(|| xstream_ascend::AscendDevice::new_isolated(0)),
    };
    let sum = run(&env, None, print_line);
    println!("ascend (simulator): {sum:?}");
    assert_eq!(
        sum.failed, 0,
        "conformance failures on the Ascend simulator"
    );
    assert!(sum.passed >= 20, "too few checks passed: {sum:?}");
    let fault = run(&env, Some("callback_error_after_fault"), print_line);
    assert_eq!(
        (fault.passed, fault.skipped),
        (1, 0),
        "callback_error_after_fault must run on the simulator"
    );
}
