//! The conformance suite on the CUDA backend; skips (printing the reason) without a GPU.

use xstream_conformance::{print_line, run, Env};
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
    let sum = run(&env, None, print_line);
    println!("cuda: {sum:?}");
    assert_eq!(sum.failed, 0, "conformance failures on CUDA");
    assert!(sum.passed >= 20, "too few checks passed: {sum:?}");
}
