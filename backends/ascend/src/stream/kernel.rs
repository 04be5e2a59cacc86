//! Kernel launches on an ACL stream: the checks before anything is queued, the mapping of a
//! [`LaunchConfig`] to ACL's launch, and the argument list.
//!
//! ACL launches have one dimension, `numBlocks` (the number of AI Core blocks): xstream passes
//! the product of the grid's dimensions (it must fit in `u32`). ACL has no threads per block,
//! so `cfg.block` is checked (no zero dimension) but not passed: an Ascend kernel's in-core
//! parallelism is fixed by the kernel itself. `shared_mem_bytes` becomes the launch attribute
//! `ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE` (the dynamic unified-buffer size, the on-core
//! memory) when non-zero. Each argument is appended as its little-endian value (a buffer as its
//! 8-byte device address).

use std::sync::Arc;

use xstream_core::module::{check_args, KernelArg, LaunchConfig};
use xstream_core::{Error, Function, Result};

use super::AscendStream;
use crate::device::AscendBuffer;
use crate::module::{AscendFunction, Owner};
use crate::result;

/// Checks and enqueues a launch of `f` on `s`.
pub(super) fn launch(
    s: &AscendStream,
    f: &AscendFunction,
    cfg: &LaunchConfig,
    args: &[KernelArg<'_, AscendBuffer>],
) -> Result<()> {
    cfg.check_nonzero()?;
    let blocks = u32::try_from(cfg.blocks()).map_err(|_| {
        Error::invalid(format!(
            "launch grid {:?} has {} blocks; an ACL launch takes at most u32::MAX (numBlocks)",
            cfg.grid,
            cfg.blocks()
        ))
    })?;
    if !f.device().same(&s.device) {
        return Err(Error::WrongDevice(format!(
            "launch_kernel: function `{}` was loaded on Ascend device {}, the stream is on device {}",
            f.name(),
            f.device().inner.ordinal,
            s.device.inner.ordinal
        )));
    }
    if let Some(p) = f.params() {
        check_args(f.name(), p, args)?;
    }
    let mut bufs = Vec::new();
    let mut params = Vec::with_capacity(args.len());
    for a in args {
        if let Some(b) = a.buffer() {
            s.check_buf(b)?;
            bufs.push(Arc::clone(&b.inner));
        }
        params.push((a.to_bits(|b| b.inner.ptr.0 as u64), a.kind().size()));
    }
    s.enter("launch_kernel")?;
    let d = &s.device.inner;
    result::kernel::launch(
        d.t,
        f.raw,
        blocks,
        s.state.raw,
        &params,
        cfg.shared_mem_bytes,
    )
    .map_err(|e| d.observe(e))?;
    // A capture keeps the binary and the buffers for the graph; outside capture, buffers and
    // modules are released only after the device's work is done (reaper).
    let module = match &f.owner {
        Owner::Module(m) => Some(Arc::clone(m)),
        Owner::Device(_) => None,
    };
    s.state.enqueued(Some(Box::new((module, bufs))));
    Ok(())
}
