//! Kernel launches on an ACL stream: the checks before anything is queued, the mapping of a
//! [`LaunchConfig`] to ACL's launch, and the argument list.
//!
//! ACL launches have one dimension, `numBlocks` (the number of AI Core blocks): xstream passes
//! the product of the grid's dimensions (it must fit in `u32`). ACL has no threads per block,
//! so `cfg.block` is checked (no zero dimension) but not passed: an Ascend kernel's in-core
//! parallelism is fixed by the kernel itself. `shared_mem_bytes` becomes the launch attribute
//! `ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE` (the dynamic unified-buffer size, the on-core
//! memory) when non-zero. Each argument is appended as its little-endian value (a buffer as its
//! 8-byte device address, a by-value block as its bytes, `aclrtKernelArgsAppend` with its
//! size). ACL has no cooperative launch and no clusters: those attributes are refused
//! ([`Error::Unsupported`]). ACL cannot report a kernel's parameters, so the builder's checked
//! launch needs declared kinds (the builtin module's, or `AscendFunction::with_params`).

use std::sync::Arc;

use xstream_core::launch::{LaunchAttrs, INLINE_ARGS};
use xstream_core::module::{check_args, ArgValue, KernelArg, LaunchConfig};
use xstream_core::{BackendKind, Error, Function, Result};

use super::AscendStream;
use crate::device::AscendBuffer;
use crate::module::{AscendFunction, Owner};
use crate::result;

/// How a launch treats a function whose parameters are unknown (ACL never reports them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Layout {
    /// `Stream::launch_kernel`: arguments pass unchecked, as with the vendor API.
    Lenient,
    /// The builder's checked launch: refused ([`Error::Unsupported`]).
    Required,
}

/// Checks and enqueues a launch of `f` on `s`.
pub(super) fn launch(
    s: &AscendStream,
    f: &AscendFunction,
    cfg: &LaunchConfig,
    args: &[KernelArg<'_, AscendBuffer>],
) -> Result<()> {
    launch_ex(s, f, cfg, args, &LaunchAttrs::default(), Layout::Lenient)
}

/// As [`launch`], with launch attributes (none exists on ACL: any is refused) and the
/// treatment of an unknown layout.
pub(super) fn launch_ex(
    s: &AscendStream,
    f: &AscendFunction,
    cfg: &LaunchConfig,
    args: &[KernelArg<'_, AscendBuffer>],
    attrs: &LaunchAttrs,
    layout: Layout,
) -> Result<()> {
    attrs.refuse_all(BackendKind::Ascend)?;
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
    match f.params() {
        Some(p) => check_args(f.name(), p, args)?,
        None if layout == Layout::Required => {
            return Err(Error::unsupported(
                BackendKind::Ascend,
                format!(
                    "a checked launch of `{}`: ACL cannot report a kernel's parameter layout; declare it with AscendFunction::with_params, or use the unsafe unchecked launch",
                    f.name()
                ),
            ))
        }
        None => {}
    }
    let mut bufs = Vec::new();
    let mut inline = [ArgValue::Borrowed(&[]); INLINE_ARGS];
    let mut heap = Vec::new();
    let params: &mut [ArgValue<'_>] = if args.len() <= INLINE_ARGS {
        &mut inline[..args.len()]
    } else {
        heap.resize(args.len(), ArgValue::Borrowed(&[]));
        &mut heap
    };
    for (p, a) in params.iter_mut().zip(args) {
        if let Some(b) = a.buffer() {
            s.note_use(b)?;
            bufs.push(Arc::clone(&b.inner));
        }
        *p = a.value(|b| b.inner.ptr.0 as u64);
    }
    s.enter("launch_kernel")?;
    let d = &s.device.inner;
    result::kernel::launch(
        d.t,
        f.raw,
        blocks,
        s.state.raw,
        params,
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
