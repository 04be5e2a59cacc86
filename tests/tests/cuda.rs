//! The conformance suite on the CUDA backend; skips (printing the reason) without a GPU.

use xstream_conformance::{assert_conforms, report_line, run, Env};
use xstream_core::Backend;
use xstream_cuda::CudaBackend;

#[test]
fn conformance_on_cuda() {
    if let Err(e) = CudaBackend::availability() {
        xstream_conformance::report_skip("conformance_on_cuda", &e);
        return;
    }
    let env = Env::<CudaBackend> {
        device: CudaBackend::open(0).expect("CUDA device 0"),
        isolated: None,
    };
    let sum = run(&env, None, report_line);
    assert_conforms::<CudaBackend>("cuda", &sum);
}
