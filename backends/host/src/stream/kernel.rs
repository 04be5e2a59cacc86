//! Kernel launches: the checks every launch passes before it is queued (see
//! `xstream_core::module`), and the queued form of its arguments.

use std::sync::Arc;

use xstream_core::module::{check_args, KernelArg, LaunchConfig, LaunchLimits};
use xstream_core::{Error, Function, Result};

use super::HostStream;
use crate::module::{KernelLaunch, QueuedArg};
use crate::{HostDeviceBuffer, HostFunction};

/// Checks a launch (dimensions, function device, arguments, buffer devices) and builds its
/// queued form. A buffer may be passed several times (see `crate::module`, aliasing).
pub(super) fn prepare(
    s: &HostStream,
    f: &HostFunction,
    cfg: &LaunchConfig,
    args: &[KernelArg<'_, HostDeviceBuffer>],
) -> Result<KernelLaunch> {
    LaunchLimits::UNLIMITED.check(cfg)?;
    let mine = xstream_core::Device::info(&s.device).ordinal;
    if f.ordinal != mine {
        return Err(Error::WrongDevice(format!(
            "launch_kernel: function `{}` was loaded on host device {}, the stream is on device {mine}",
            f.name(),
            f.ordinal
        )));
    }
    check_args(f.name(), f.kernel.params(), args)?;
    let mut queued = Vec::with_capacity(args.len());
    for a in args {
        queued.push(match *a {
            KernelArg::Buffer(b) => QueuedArg::Buffer {
                buf: Arc::clone(&b.inner),
                offset: 0,
                len: b.inner_len(),
            },
            KernelArg::View(v) => QueuedArg::Buffer {
                buf: Arc::clone(&v.buffer().inner),
                offset: v.offset(),
                len: v.len(),
            },
            KernelArg::U32(v) => QueuedArg::U32(v),
            KernelArg::I32(v) => QueuedArg::I32(v),
            KernelArg::U64(v) => QueuedArg::U64(v),
            KernelArg::I64(v) => QueuedArg::I64(v),
            KernelArg::F32(v) => QueuedArg::F32(v),
            KernelArg::F64(v) => QueuedArg::F64(v),
            KernelArg::I8(v) => QueuedArg::I8(v),
            KernelArg::U8(v) => QueuedArg::U8(v),
            KernelArg::I16(v) => QueuedArg::I16(v),
            KernelArg::U16(v) => QueuedArg::U16(v),
            KernelArg::F16(v) => QueuedArg::F16(v),
            KernelArg::BF16(v) => QueuedArg::BF16(v),
            KernelArg::Bytes(b) => QueuedArg::Bytes(crate::module::QueuedBytes::new(b)),
        });
    }
    Ok(KernelLaunch {
        function: f.clone(),
        cfg: *cfg,
        args: queued,
    })
}
