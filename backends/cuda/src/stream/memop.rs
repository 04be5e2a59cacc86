//! Stream memory operations on CUDA: `cuStreamWaitValue32/64` and `cuStreamWriteValue32/64`
//! (the `_v2` entry points every driver this crate accepts exports).
//!
//! Capabilities come from the device: 32-bit operations are always available on the drivers
//! this crate accepts (CUDA 12 made stream memory operations available without the old
//! kernel-module switch); 64-bit ones when `CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS`
//! is non-zero. [`WaitCondition::Nor`] additionally needs
//! `CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR`; without it the wait is refused with
//! [`Error::Unsupported`] before the driver is called.

use cudarc::driver::sys;
use xstream_core::memop::ValueOp;
use xstream_core::{BackendKind, Capabilities, Device, Error, Result, WaitCondition};

use super::CudaStream;
use crate::ffi;

/// The driver call of `op`.
fn api(op: ValueOp) -> &'static str {
    match op {
        ValueOp::Wait32(..) => "cuStreamWaitValue32",
        ValueOp::Wait64(..) => "cuStreamWaitValue64",
        ValueOp::Write32(_) => "cuStreamWriteValue32",
        ValueOp::Write64(_) => "cuStreamWriteValue64",
    }
}

fn attr(dev: sys::CUdevice, a: sys::CUdevice_attribute) -> bool {
    ffi::device_attribute(dev, a).is_ok_and(|v| v > 0)
}

/// The value-operation capabilities of `dev`.
pub(crate) fn capabilities(dev: sys::CUdevice) -> Capabilities {
    use sys::CUdevice_attribute as A;
    let mut c = Capabilities::VALUE_OPS_32;
    if attr(dev, A::CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS) {
        c |= Capabilities::VALUE_OPS_64;
    }
    c
}

/// Enqueues `op` on `word` (aligned and inside its buffer: checked by xstream-core) after
/// checking that the device can.
pub(crate) fn op(s: &CudaStream, op: ValueOp, word: super::Span<'_>) -> Result<()> {
    let buf = word.buffer();
    let what = api(op);
    let cap = if op.width() == 4 {
        Capabilities::VALUE_OPS_32
    } else {
        Capabilities::VALUE_OPS_64
    };
    if !s.handle.dev.info().capabilities.contains(cap) {
        return Err(Error::unsupported(
            BackendKind::Cuda,
            format!("{what}: the device does not report {cap:?}"),
        ));
    }
    if matches!(
        op,
        ValueOp::Wait32(_, WaitCondition::Nor) | ValueOp::Wait64(_, WaitCondition::Nor)
    ) && !attr(
        s.handle.dev.cu_device(),
        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR,
    ) {
        return Err(Error::unsupported(
            BackendKind::Cuda,
            format!("{what} with NOR: CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR is 0"),
        ));
    }
    s.bind()?;
    s.gate_enqueue(what)?;
    let addr = word.device_address();
    let r = match op {
        ValueOp::Wait32(v, c) => ffi::stream_wait_value32(s.raw(), addr, v, c as u32),
        ValueOp::Wait64(v, c) => ffi::stream_wait_value64(s.raw(), addr, v, c as u32),
        ValueOp::Write32(v) => ffi::stream_write_value32(s.raw(), addr, v),
        ValueOp::Write64(v) => ffi::stream_write_value64(s.raw(), addr, v),
    };
    s.check(what, r)?;
    s.keep_buf(buf);
    Ok(())
}
