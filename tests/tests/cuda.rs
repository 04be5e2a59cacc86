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

/// A native device-to-device copy through the stream's raw handle (`cuMemcpyDtoDAsync`),
/// unseen by xstream: the raw path of the `record_use` check.
fn cuda_raw_copy(
    s: &xstream_cuda::CudaStream,
    src: u64,
    dst: u64,
    len: usize,
) -> xstream_core::Result<()> {
    use xstream_core::Stream;
    use xstream_cuda::cudarc::driver::sys;
    // SAFETY: `src` and `dst` are device addresses of live buffers of at least `len` bytes
    // (the check keeps both alive until the stream synchronized); the stream's handle is live
    // and its context is bound on this thread (the check's xstream calls bound it).
    let rc = unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, len, s.as_raw().as_ptr()) };
    if rc == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(xstream_core::Error::invalid(format!(
            "cuMemcpyDtoDAsync failed: {rc:?}"
        )))
    }
}

/// `record_use` with work enqueued through the raw handle (PyTorch's `record_stream`): marked,
/// the freed memory is not reused before the raw copy ran. Unmarked, the driver's pool
/// usually hands the memory to the freeing stream's next allocation at once; the outcome is
/// printed, not asserted (the pool's reuse is the driver's choice).
#[test]
fn record_use_covers_raw_handle_work_on_cuda() {
    use xstream_conformance::ordered_use::{record_use_with_raw_copy, RawUse};
    if let Err(e) = CudaBackend::availability() {
        xstream_conformance::report_skip("record_use_covers_raw_handle_work_on_cuda", &e);
        return;
    }
    let env = Env::<CudaBackend> {
        device: CudaBackend::open(0).expect("CUDA device 0"),
        isolated: None,
    };
    assert_eq!(
        record_use_with_raw_copy(&env, cuda_raw_copy, true),
        Ok(RawUse::Kept)
    );
    let unmarked = record_use_with_raw_copy(&env, cuda_raw_copy, false);
    println!(
        "record_use check without the marking: {unmarked:?} (Reused = the check fails without it)"
    );
}
