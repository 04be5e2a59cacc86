//! A diagnostic of the slow copy from an import with two GPUs (issue 29: in GPU run 19 the
//! peer copy from the child's import ran at 37 GB/s, about 10% of the same copy in the
//! exporting process, for the raw driver and xstream alike). Run once in the child, before
//! the measured part, with two GPUs only; raw driver calls only; printed as `diag:` lines on
//! the child's standard error (which the bench's log collects), never a target.
//!
//! Three ways to copy the exporter's buffer to a buffer of device 1, each a batch of
//! [`BATCH`] copies then a synchronize, [`ROUNDS`] batches, the best batch printed:
//! - `peer from the device-0 import`: what the bench measures (`cuMemcpyPeerAsync` on a
//!   stream of device 1, the source opened by `cuIpcOpenMemHandle` in device 0's context);
//! - `same, peer access device 0 -> 1 on`: after `cuCtxEnablePeerAccess` the other way too;
//! - `device-1 import`: the handle opened again in device 1's context (lazy peer access),
//!   copied with `cuMemcpyDtoDAsync` on the same stream of device 1.

use std::time::Instant;

use cudarc::driver::sys;

use super::raw;

/// Copies per batch.
const BATCH: u32 = 8;
/// Batches per way.
const ROUNDS: u32 = 3;

fn line(s: &str) {
    eprintln!("diag: {s}");
}

/// Best GB/s over the batches of `copy` (each followed by a synchronize of `s`).
fn best(
    len: usize,
    s: sys::CUstream,
    mut copy: impl FnMut() -> Result<(), String>,
) -> Result<f64, String> {
    let mut best = 0f64;
    copy()?;
    raw::sync(s)?;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        for _ in 0..BATCH {
            copy()?;
        }
        raw::sync(s)?;
        let gbs = f64::from(BATCH) * len as f64 / t.elapsed().as_nanos().max(1) as f64;
        best = best.max(gbs);
    }
    Ok(best)
}

/// Runs the three ways (see the module docs) and prints one line each; failures are printed,
/// not returned (the diagnostic never stops the bench).
pub(crate) fn import_copies(
    ctx0: raw::Ctx,
    ctxc: raw::Ctx,
    src0: u64,
    dst: u64,
    sc: sys::CUstream,
    handle: [u8; 64],
    len: usize,
) {
    let peer = || raw::copy_peer(ctxc, dst, ctx0, src0, len, sc);
    let r = raw::bind(ctxc).and_then(|()| best(len, sc, peer));
    line(&format!("peer from the device-0 import: {}", show(r)));

    let on = raw::bind(ctx0).and_then(|()| {
        // SAFETY: both are live primary contexts of this process; `ctx0` is current.
        match unsafe { sys::cuCtxEnablePeerAccess(ctxc, 0) } {
            sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {
                Ok(())
            }
            e => Err(format!(
                "cuCtxEnablePeerAccess(device 0 -> 1) failed with {e:?}"
            )),
        }
    });
    let r = on
        .and_then(|()| raw::bind(ctxc))
        .and_then(|()| best(len, sc, peer));
    line(&format!("same, peer access device 0 -> 1 on: {}", show(r)));

    match raw::ipc_open_mem(ctxc, handle) {
        Ok(srcc) => {
            let r =
                raw::bind(ctxc).and_then(|()| best(len, sc, || raw::copy_dtod(dst, srcc, len, sc)));
            line(&format!("device-1 import (cuMemcpyDtoDAsync): {}", show(r)));
            raw::ipc_close_mem(ctxc, srcc);
        }
        Err(e) => line(&format!("device-1 import: not opened: {e}")),
    }
}

fn show(r: Result<f64, String>) -> String {
    match r {
        Ok(g) => format!("{g:.1} GB/s (best of {ROUNDS} batches of {BATCH})"),
        Err(e) => format!("failed: {e}"),
    }
}
