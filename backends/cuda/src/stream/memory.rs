//! Data movement on a [`CudaStream`] (memset, write, read, device copies, copies to and from
//! page-locked host memory) and the keep-alive list holding what queued work uses.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use xstream_core::{check_range, MemsetPattern, Readback, Result};

use super::drop::release_after;
use super::{lock, CudaStream};
use crate::ffi;
use crate::memory::Keep;
use crate::CudaBuffer;

/// Keep-alive entries above which a stream hands its list to a host function.
const KEEP_FLUSH: usize = 256;

impl CudaStream {
    pub(crate) fn keep(&self, k: Keep) {
        self.keep_all([Some(k)]);
    }

    /// Keeps a device buffer (when it needs keeping, [`CudaBuffer::keep_for`]) and the
    /// page-locked host span of the same copy: both entries under one lock.
    pub(crate) fn keep_copy(&self, b: &CudaBuffer, span: xstream_core::HostSpan) {
        self.check_ordered_in_capture(b);
        self.keep_all([b.keep_for(&self.handle), Some(Keep::Host(span))]);
    }

    /// Pushes the entries given under one lock; hands the list to a host function once it
    /// holds `KEEP_FLUSH` entries or more.
    fn keep_all<const N: usize>(&self, ks: [Option<Keep>; N]) {
        if self.state.capture.is_capturing() {
            lock(&self.state.capture_keep).extend(ks.into_iter().flatten());
            return;
        }
        let flush = {
            let mut g = lock(&self.state.keep);
            g.extend(ks.into_iter().flatten());
            // The list that stays is allocated at its full size once per flush: one allocation
            // per `KEEP_FLUSH` entries instead of the regrowth from empty (about seven), which
            // the bench counted as 0.043 allocations per launch with a buffer argument.
            let v = (g.len() >= KEEP_FLUSH)
                .then(|| std::mem::replace(&mut *g, Vec::with_capacity(KEEP_FLUSH + 1)));
            self.state.keep_len.store(g.len(), Ordering::Release);
            v
        };
        if let Some(v) = flush {
            if let Err((v, _)) = release_after(&self.handle.dev, self.raw(), v) {
                let mut g = lock(&self.state.keep);
                g.extend(v);
                self.state.keep_len.store(g.len(), Ordering::Release);
            }
        }
    }

    /// Keeps a buffer used by work just enqueued (see [`CudaBuffer::keep_for`]).
    pub(crate) fn keep_buf(&self, b: &CudaBuffer) {
        self.check_ordered_in_capture(b);
        if let Some(k) = b.keep_for(&self.handle) {
            self.keep(k);
        }
    }

    /// A stream-ordered buffer used in a capture invalidates it: a graph could replay after
    /// the stream-ordered free.
    fn check_ordered_in_capture(&self, b: &CudaBuffer) {
        if b.is_stream_ordered() && self.state.capture.is_capturing() {
            tracing::warn!("stream-ordered buffer used in a capture: capture invalidated");
            self.state.capture.invalidate();
        }
    }

    /// Drops keep-alive entries older than `n` (their work completed).
    pub(super) fn completed_up_to(&self, n: usize) {
        if n == 0 {
            return;
        }
        let done: Vec<Keep> = {
            let mut g = lock(&self.state.keep);
            let n = n.min(g.len());
            let done = g.drain(..n).collect();
            self.state.keep_len.store(g.len(), Ordering::Release);
            done
        };
        drop(done);
    }

    /// Entries in the keep list now (no lock).
    pub(super) fn keep_len(&self) -> usize {
        self.state.keep_len.load(Ordering::Acquire)
    }
}

impl CudaStream {
    /// Zeroes the whole allocation under a new plain buffer (`size` bytes: its length rounded up
    /// to the granule) on this stream, for `Device::alloc_zeroed_on`; no host wait.
    pub(crate) fn memset_whole(&self, buf: &CudaBuffer, size: usize) -> Result<()> {
        self.enter()?;
        self.gate_enqueue("alloc_zeroed_on")?;
        self.check(
            "cuMemsetD8Async",
            ffi::memset_d8_async(buf.ptr(), 0, size, self.raw()),
        )?;
        self.keep_buf(buf);
        Ok(())
    }
}

pub(super) fn memset(
    s: &CudaStream,
    buf: &CudaBuffer,
    offset: usize,
    len: usize,
    value: u8,
) -> Result<()> {
    check_range("memset", buf.len_bytes(), offset, len)?;
    memset_pattern(s, buf, offset, len, MemsetPattern::U8(value))
}

/// `memset`, `memset16`, `memset32`: `cuMemsetD8Async` / `D16` / `D32` (the element alignment
/// was checked by `Stream::memset_pattern`; the driver checks it again). Zero bytes: no-op.
pub(super) fn memset_pattern(
    s: &CudaStream,
    buf: &CudaBuffer,
    offset: usize,
    len: usize,
    value: MemsetPattern,
) -> Result<()> {
    check_range("memset", buf.len_bytes(), offset, len)?;
    value.check(offset, len)?;
    s.enter()?;
    if len == 0 {
        return Ok(());
    }
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
pub(super) fn write_bytes_now(
    s: &CudaStream,
    dst: &CudaBuffer,
    offset: usize,
    src: &[u8],
) -> Result<()> {
    check_range("write_from_blocking", dst.len_bytes(), offset, src.len())?;
    s.enter()?;
    if src.is_empty() {
        return Ok(());
    }
    sync_copy_allowed(s, "write_from_blocking")?;
    // SAFETY: the range was checked against `dst` above, whose allocation lives while it is
    // borrowed; `src` is not captured (`sync_copy_allowed`) and the synchronize below
    // completes the copy before the borrow of `src` ends.
    #[allow(unsafe_code)]
    let r = unsafe { ffi::memcpy_htod_async(dst.ptr() + offset as u64, src, s.raw()) };
    s.check("cuMemcpyHtoDAsync", r)?;
    s.check("cuStreamSynchronize", ffi::stream_synchronize(s.raw()))
}

/// `Stream::read_into_blocking`: `cuMemcpyDtoHAsync` into the caller's slice, then
/// `cuStreamSynchronize`. No heap allocation.
pub(super) fn read_bytes_now(
    s: &CudaStream,
    src: &CudaBuffer,
    offset: usize,
    dst: &mut [u8],
) -> Result<()> {
    check_range("read_into_blocking", src.len_bytes(), offset, dst.len())?;
    s.enter()?;
    if dst.is_empty() {
        return Ok(());
    }
    sync_copy_allowed(s, "read_into_blocking")?;
    // SAFETY: the range was checked against `src` above, whose allocation lives while it is
    // borrowed. `dst` stays mutably borrowed until the synchronize below has completed the
    // copy; should the synchronize fail, the error is sticky (the context is poisoned and
    // runs nothing more), so the device never writes `dst` after this returns.
    #[allow(unsafe_code)]
    let r = unsafe { ffi::memcpy_dtoh_async(dst, src.ptr() + offset as u64, s.raw()) };
    s.check("cuMemcpyDtoHAsync", r)?;
    s.check("cuStreamSynchronize", ffi::stream_synchronize(s.raw()))
}

/// The synchronous typed copies need a stream that runs its work now: refused inside a
/// capture (the capture is invalidated, as for `read`) and on a persistent stream.
fn sync_copy_allowed(s: &CudaStream, op: &'static str) -> Result<()> {
    s.gate(op)?;
    if s.state.persistent {
        return Err(xstream_core::Error::unsupported(
            xstream_core::BackendKind::Cuda,
            format!("{op} on a persistent stream"),
        ));
    }
    Ok(())
}

pub(super) fn write(s: &CudaStream, dst: &CudaBuffer, offset: usize, data: Vec<u8>) -> Result<()> {
    check_range("write", dst.len_bytes(), offset, data.len())?;
    s.enter()?;
    if data.is_empty() {
        return Ok(());
    }
    s.gate_enqueue("write")?;
    // `data` is pageable: CUDA stages it before cuMemcpyHtoDAsync returns, so it may be
    // dropped afterwards; a captured copy reads it at every replay, so the graph keeps it.
    // SAFETY: the range was checked against `dst` above, which the stream keeps until the
    // copy completed (`keep_buf`); `data` is pageable, staged before the call returns, and
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

pub(super) fn read(
    s: &CudaStream,
    src: &CudaBuffer,
    offset: usize,
    len: usize,
) -> Result<Readback> {
    check_range("read", src.len_bytes(), offset, len)?;
    s.enter()?;
    // Delivered by a one-shot host function: not replayable, so refused during capture.
    s.gate("read")?;
    let mut host = vec![0u8; len].into_boxed_slice();
    // SAFETY: the range was checked against `src` above, which the stream keeps until the
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

pub(super) fn copy(
    s: &CudaStream,
    src: &CudaBuffer,
    src_offset: usize,
    dst: &CudaBuffer,
    dst_offset: usize,
    len: usize,
) -> Result<()> {
    check_range("copy source", src.len_bytes(), src_offset, len)?;
    check_range("copy destination", dst.len_bytes(), dst_offset, len)?;
    s.enter()?;
    if len == 0 {
        return Ok(());
    }
    s.gate_enqueue("copy")?;
    s.check(
        "cuMemcpyDtoDAsync",
        ffi::memcpy_dtod_async(
            dst.ptr() + dst_offset as u64,
            src.ptr() + src_offset as u64,
            len,
            s.raw(),
        ),
    )?;
    s.keep_buf(src);
    s.keep_buf(dst);
    Ok(())
}

/// `Stream::copy_peer` (see `crate::peer`): buffers of the stream's device take the ordinary
/// copy; otherwise the other device must be an enabled peer.
pub(super) fn copy_peer(
    s: &CudaStream,
    src: &CudaBuffer,
    src_offset: usize,
    dst: &CudaBuffer,
    dst_offset: usize,
    len: usize,
) -> Result<()> {
    check_range("copy_peer source", src.len_bytes(), src_offset, len)?;
    check_range("copy_peer destination", dst.len_bytes(), dst_offset, len)?;
    let me = &s.handle.dev;
    let src_mine = src.check_device("copy_peer", me).is_ok();
    let dst_mine = dst.check_device("copy_peer", me).is_ok();
    let other_ord = match (src_mine, dst_mine) {
        (true, true) => return copy(s, src, src_offset, dst, dst_offset, len),
        (true, false) => dst.dev().shared.info.ordinal,
        (false, true) => src.dev().shared.info.ordinal,
        (false, false) => {
            return Err(xstream_core::Error::WrongDevice(format!(
                "copy_peer: neither buffer (devices {} and {}) belongs to the stream's CUDA \
                 device {}",
                src.dev().shared.info.ordinal,
                dst.dev().shared.info.ordinal,
                me.shared.info.ordinal
            )))
        }
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
    s.enter()?;
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

pub(super) fn enqueue_copy_to_device(
    s: &CudaStream,
    src: xstream_core::HostSpan,
    dst: &CudaBuffer,
    dst_offset: usize,
) -> Result<()> {
    check_range("copy_to_device", dst.len_bytes(), dst_offset, src.len())?;
    s.enter()?;
    s.gate_enqueue("copy_to_device")?;
    // SAFETY: the range was checked against `dst` above, which the stream keeps
    // (`keep_copy`); the span's page-locked memory goes on the stream's keep list with it, and
    // its `HostBuffer` fence keeps host code out until the copy completed.
    #[allow(unsafe_code)]
    let r = unsafe { ffi::memcpy_htod_async_span(dst.ptr() + dst_offset as u64, &src, s.raw()) };
    s.check("cuMemcpyHtoDAsync", r)?;
    s.keep_copy(dst, src);
    Ok(())
}

pub(super) fn enqueue_copy_to_host(
    s: &CudaStream,
    src: &CudaBuffer,
    src_offset: usize,
    dst: xstream_core::HostSpan,
) -> Result<()> {
    check_range("copy_to_host", src.len_bytes(), src_offset, dst.len())?;
    s.enter()?;
    s.gate_enqueue("copy_to_host")?;
    // SAFETY: as in `enqueue_copy_to_device`: range checked, `src` kept, the span kept and
    // fenced from host code until the copy completed.
    #[allow(unsafe_code)]
    let r = unsafe { ffi::memcpy_dtoh_async_span(&dst, src.ptr() + src_offset as u64, s.raw()) };
    s.check("cuMemcpyDtoHAsync", r)?;
    s.keep_copy(src, dst);
    Ok(())
}
