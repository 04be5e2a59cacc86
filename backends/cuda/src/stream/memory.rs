//! Data movement on a [`CudaStream`] (memset, write, read, device copies, copies to and from
//! page-locked host memory); what the work uses goes on the keep-alive list (`keep`).

use std::sync::{Arc, Mutex};

use xstream_core::{MemsetPattern, Readback, Result};

use super::{lock, CudaStream, Span};
use crate::ffi;
use crate::memory::Keep;
use crate::CudaBuffer;

impl CudaStream {
    /// Zeroes the whole allocation under a new plain buffer (`size` bytes: its length rounded up
    /// to the granule) on this stream, for `Device::alloc_zeroed_on`; no host wait.
    pub(crate) fn memset_whole(&self, buf: &CudaBuffer, size: usize) -> Result<()> {
        self.bind()?;
        self.gate_enqueue("alloc_zeroed_on")?;
        self.check(
            "cuMemsetD8Async",
            ffi::memset_d8_async(buf.ptr(), 0, size, self.raw()),
        )?;
        self.keep_buf(buf);
        Ok(())
    }
}

/// `memset`, `memset16`, `memset32`, `memset64`: `cuMemsetD8Async` / `D16` / `D32` (the
/// element alignment was checked by `Stream::memset_pattern`; the driver checks it again).
pub(super) fn memset(s: &CudaStream, dst: Span<'_>, value: MemsetPattern) -> Result<()> {
    let (buf, offset, len) = (dst.buffer(), dst.offset(), dst.len());
    s.bind()?;
    s.gate_enqueue("memset")?;
    let p = buf.ptr() + offset as u64;
    let r = match value {
        MemsetPattern::U8(v) => ("cuMemsetD8Async", ffi::memset_d8_async(p, v, len, s.raw())),
        MemsetPattern::U16(v) => (
            "cuMemsetD16Async",
            ffi::memset_d16_async(p, v, len / 2, s.raw()),
        ),
        MemsetPattern::U32(v) => (
            "cuMemsetD32Async",
            ffi::memset_d32_async(p, v, len / 4, s.raw()),
        ),
        // Both halves equal: one 32-bit memset. Else the low and the high halves as two
        // columns of one 32-bit element each, rows 8 bytes apart (the driver has no 64-bit
        // memset).
        MemsetPattern::U64(v) if (v as u32) == ((v >> 32) as u32) => (
            "cuMemsetD32Async",
            ffi::memset_d32_async(p, v as u32, len / 4, s.raw()),
        ),
        MemsetPattern::U64(v) => {
            let rows = len / 8;
            match ffi::memset_d2d32_async(p, 8, v as u32, 1, rows, s.raw()) {
                Ok(()) => (
                    "cuMemsetD2D32Async",
                    ffi::memset_d2d32_async(p + 4, 8, (v >> 32) as u32, 1, rows, s.raw()),
                ),
                Err(e) => ("cuMemsetD2D32Async", Err(e)),
            }
        }
    };
    s.check(r.0, r.1)?;
    s.keep_buf(buf);
    Ok(())
}

/// `Stream::write_from_blocking`: `cuMemcpyHtoDAsync` from the caller's (pageable) slice, then
/// `cuStreamSynchronize`, so the slice is free again when this returns. No heap allocation.
pub(super) fn write_from_blocking(s: &CudaStream, span: Span<'_>, src: &[u8]) -> Result<()> {
    let (dst, offset) = (span.buffer(), span.offset());
    s.bind()?;
    sync_copy_allowed(s, "write_from_blocking")?;
    // SAFETY: the range is a `Span`, checked against `dst` (as long as `src`), whose
    // allocation lives while it is borrowed; `src` is not captured (`sync_copy_allowed`) and the synchronize below
    // completes the copy before the borrow of `src` ends.
    #[allow(unsafe_code)]
    let r = unsafe { ffi::memcpy_htod_async(dst.ptr() + offset as u64, src, s.raw()) };
    s.check("cuMemcpyHtoDAsync", r)?;
    s.check("cuStreamSynchronize", ffi::stream_synchronize(s.raw()))
}

/// `Stream::read_into_blocking`: `cuMemcpyDtoHAsync` into the caller's slice, then
/// `cuStreamSynchronize`. No heap allocation.
pub(super) fn read_into_blocking(s: &CudaStream, span: Span<'_>, dst: &mut [u8]) -> Result<()> {
    let (src, offset) = (span.buffer(), span.offset());
    s.bind()?;
    sync_copy_allowed(s, "read_into_blocking")?;
    // SAFETY: the range is a `Span`, checked against `src` (as long as `dst`), whose
    // allocation lives while it is borrowed. `dst` stays mutably borrowed until the synchronize below has completed the
    // copy; should the synchronize fail, the error is sticky (the context is poisoned and
    // runs nothing more), so the device never writes `dst` after this returns.
    #[allow(unsafe_code)]
    let r = unsafe { ffi::memcpy_dtoh_async(dst, src.ptr() + offset as u64, s.raw()) };
    s.check("cuMemcpyDtoHAsync", r)?;
    s.check("cuStreamSynchronize", ffi::stream_synchronize(s.raw()))
}

/// The synchronous typed copies need a stream that runs its work now: refused on a
/// persistent stream.
fn sync_copy_allowed(s: &CudaStream, op: &'static str) -> Result<()> {
    if s.state.persistent {
        return Err(xstream_core::Error::unsupported(
            xstream_core::BackendKind::Cuda,
            format!("{op} on a persistent stream"),
        ));
    }
    Ok(())
}

pub(super) fn write(s: &CudaStream, span: Span<'_>, data: Vec<u8>) -> Result<()> {
    let (dst, offset) = (span.buffer(), span.offset());
    s.bind()?;
    s.gate_enqueue("write")?;
    // `data` is pageable: CUDA stages it before cuMemcpyHtoDAsync returns, so it may be
    // dropped afterwards; a captured copy reads it at every replay, so the graph keeps it.
    // SAFETY: the range is a `Span`, checked against `dst` (as long as `data`), which the
    // stream keeps until the copy completed (`keep_buf`); `data` is pageable, staged before the call returns, and
    // during a capture kept with the stream (and the graph) below.
    #[allow(unsafe_code)]
    let r = unsafe { ffi::memcpy_htod_async(dst.ptr() + offset as u64, &data, s.raw()) };
    s.check("cuMemcpyHtoDAsync", r)?;
    s.keep_buf(dst);
    if s.state.capture.is_capturing() {
        s.keep(Keep::Bytes(data));
    }
    Ok(())
}

pub(super) fn read(s: &CudaStream, span: Span<'_>) -> Result<Readback> {
    let (src, offset, len) = (span.buffer(), span.offset(), span.len());
    s.bind()?;
    let mut host = vec![0u8; len].into_boxed_slice();
    // SAFETY: the range is a `Span`, checked against `src`, which the stream keeps until the
    // copy completed (`keep_buf`). `host` is a boxed slice: its heap bytes do not move when
    // the box moves into the holder below, nothing reads them before the host function
    // behind the copy takes them, and if that host function cannot be enqueued they are
    // leaked, never freed under the pending copy.
    #[allow(unsafe_code)]
    let r = unsafe { ffi::memcpy_dtoh_async(&mut host, src.ptr() + offset as u64, s.raw()) };
    s.check("cuMemcpyDtoHAsync", r)?;
    s.keep_buf(src);
    let (rb, fill) = Readback::new();
    let holder = Arc::new(Mutex::new(Some(host)));
    let h2 = Arc::clone(&holder);
    let r = s.enqueue_slot(Box::new(move |r| {
        let bytes = lock(&h2).take();
        fill.fill(r.map(|()| bytes.map(|b| b.into_vec()).unwrap_or_default()));
    }));
    if let Err(e) = r {
        // The copy may still be in flight: never free its destination.
        if let Some(b) = lock(&holder).take() {
            std::mem::forget(b);
        }
        return Err(e);
    }
    Ok(rb)
}

pub(super) fn copy(s: &CudaStream, src: Span<'_>, dst: Span<'_>) -> Result<()> {
    s.bind()?;
    s.gate_enqueue("copy")?;
    s.check(
        "cuMemcpyDtoDAsync",
        ffi::memcpy_dtod_async(
            dst.device_address(),
            src.device_address(),
            src.len(),
            s.raw(),
        ),
    )?;
    s.keep_buf(src.buffer());
    s.keep_buf(dst.buffer());
    Ok(())
}

/// `Stream::copy_peer` (see `crate::peer`): buffers of the stream's device take the ordinary
/// copy; otherwise the other device must be an enabled peer.
pub(super) fn copy_peer(s: &CudaStream, src_span: Span<'_>, dst_span: Span<'_>) -> Result<()> {
    let (src, src_offset, len) = (src_span.buffer(), src_span.offset(), src_span.len());
    let (dst, dst_offset) = (dst_span.buffer(), dst_span.offset());
    let me = &s.handle.dev;
    let src_mine = src.check_device("copy_peer", me).is_ok();
    let dst_mine = dst.check_device("copy_peer", me).is_ok();
    // The checked layer saw that one of them is of this stream's device.
    let other_ord = match (src_mine, dst_mine) {
        (true, true) => return copy(s, src_span, dst_span),
        (true, false) => dst.dev().shared.info.ordinal,
        (false, _) => src.dev().shared.info.ordinal,
    };
    let foreign = if src_mine { dst } else { src };
    if foreign.is_stream_ordered() {
        // Its cross-stream tracking orders the free with its own device's streams only.
        return Err(xstream_core::Error::unsupported(
            xstream_core::BackendKind::Cuda,
            "copy_peer with a stream-ordered buffer (alloc_async) of the other device; use \
             Device::alloc for buffers shared across devices",
        ));
    }
    if !crate::peer::enabled(me, other_ord) {
        return Err(xstream_core::Error::NotPermitted(
            "copy_peer: the stream's device has not enabled peer access to the other \
             buffer's device (Device::enable_peer_access)",
        ));
    }
    s.bind()?;
    s.gate_enqueue("copy_peer")?;
    s.check(
        "cuMemcpyPeerAsync",
        ffi::memcpy_peer_async(
            dst.ptr() + dst_offset as u64,
            dst.dev().shared.raw_ctx,
            src.ptr() + src_offset as u64,
            src.dev().shared.raw_ctx,
            len,
            s.raw(),
        ),
    )?;
    s.keep_buf(src);
    s.keep_buf(dst);
    Ok(())
}

pub(super) fn copy_to_device(
    s: &CudaStream,
    src: xstream_core::PinnedSpan,
    span: Span<'_>,
) -> Result<()> {
    let (dst, dst_offset) = (span.buffer(), span.offset());
    s.bind()?;
    s.gate_enqueue("copy_to_device")?;
    // SAFETY: the range is a `Span`, checked against `dst` (as long as `src`), which the
    // stream keeps
    // (`keep_copy`); the span's page-locked memory goes on the stream's keep list with it, and
    // its `PinnedBuffer` fence keeps host code out until the copy completed.
    #[allow(unsafe_code)]
    let r = unsafe { ffi::memcpy_htod_async_span(dst.ptr() + dst_offset as u64, &src, s.raw()) };
    s.check("cuMemcpyHtoDAsync", r)?;
    s.keep_copy(dst, src);
    Ok(())
}

pub(super) fn copy_to_host(
    s: &CudaStream,
    span: Span<'_>,
    dst: xstream_core::PinnedSpan,
) -> Result<()> {
    let (src, src_offset) = (span.buffer(), span.offset());
    s.bind()?;
    s.gate_enqueue("copy_to_host")?;
    // SAFETY: as in `copy_to_device`: the range is a checked `Span`, `src` kept, the span kept and
    // fenced from host code until the copy completed.
    #[allow(unsafe_code)]
    let r = unsafe { ffi::memcpy_dtoh_async_span(&dst, src.ptr() + src_offset as u64, s.raw()) };
    s.check("cuMemcpyDtoHAsync", r)?;
    s.keep_copy(src, dst);
    Ok(())
}
