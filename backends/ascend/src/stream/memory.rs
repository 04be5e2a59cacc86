//! Data movement on an [`AscendStream`] (memset, write, read, device copies, copies to and
//! from page-locked host memory) and the host memory queued copies still use ([`InFlight`],
//! released by a callback behind the copy).

use std::sync::Arc;
use xstream_core::sync::lock;

use xstream_core::{Readback, Result};

use super::{AscendStream, Keep, StreamState};
use crate::device::AscendBuffer;
use crate::result;
use crate::sys::consts;

/// Host memory a queued copy may still read or write. Only the callback the runtime runs after
/// the copy frees it; dropped any other way (that callback's launch failed, so nobody can say
/// when the copy is done) it moves to the stream's orphans, released after the stream is
/// synchronized and destroyed, never under the runtime's feet.
struct InFlight<T: Send + Sync + 'static>(Option<(T, Arc<StreamState>)>);

impl<T: Send + Sync + 'static> InFlight<T> {
    fn new(v: T, state: &Arc<StreamState>) -> Self {
        Self(Some((v, Arc::clone(state))))
    }

    fn take(mut self) -> T {
        match self.0.take() {
            Some((v, _)) => v,
            None => unreachable!("an InFlight value is taken once"),
        }
    }
}

impl<T: Send + Sync + 'static> Drop for InFlight<T> {
    fn drop(&mut self) {
        if let Some((v, state)) = self.0.take() {
            state
                .orphans
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Box::new(v));
        }
    }
}

impl AscendStream {
    /// Keeps `k` alive until the stream got past this point (graph keep-alive in capture).
    pub(super) fn keep_until_done(&self, k: Keep) -> Result<()> {
        if self.state.capture.is_capturing() {
            // The write itself was counted as the node; this only keeps its memory alive.
            self.state.kept(k);
            Ok(())
        } else {
            let k = InFlight::new(k, &self.state);
            self.launch_report(Box::new(move |_| drop(k.take())), false)
        }
    }
}

/// A byte memset: one `aclrtMemsetAsync`.
fn memset_bytes(
    s: &AscendStream,
    buf: &AscendBuffer,
    offset: usize,
    len: usize,
    value: u8,
) -> Result<()> {
    s.enter("memset")?;
    s.note_use(buf)?;
    let d = &s.device.inner;
    result::memory::memset_async(d.t, buf.inner.ptr, offset, len, value, s.state.raw)?;
    s.state.enqueued(Some(Box::new(Arc::clone(&buf.inner))));
    Ok(())
}

pub(super) fn write(
    s: &AscendStream,
    dst: &AscendBuffer,
    offset: usize,
    data: Vec<u8>,
) -> Result<()> {
    s.enter("write")?;
    s.note_use(dst)?;
    let d = &s.device.inner;
    if s.state.capture.is_capturing() {
        // ACL: host memory in a captured asynchronous copy must be page-locked. Stage the
        // bytes in `aclrtMallocHost` memory, which the graph keeps for its replays.
        let stage = result::memory::PinnedAlloc::new(d.t, d.ordinal, data.len())?;
        stage.fill(&data);
        result::memory::memcpy(
            d.t,
            result::memory::at(dst.inner.ptr, offset),
            xstream_core::PinnedAllocation::as_ptr(&stage)
                .cast_const()
                .cast(),
            data.len(),
            consts::ACL_MEMCPY_HOST_TO_DEVICE,
            s.state.raw,
        )?;
        s.state.enqueued(Some(Box::new(Arc::clone(&dst.inner))));
        return s.keep_until_done(Box::new((stage, Arc::clone(&dst.inner))));
    }
    // `data` (moved into the keep-alive below) and the buffer stay alive until the copy ran.
    result::memory::memcpy(
        d.t,
        result::memory::at(dst.inner.ptr, offset),
        data.as_ptr().cast(),
        data.len(),
        consts::ACL_MEMCPY_HOST_TO_DEVICE,
        s.state.raw,
    )?;
    s.state.enqueued(Some(Box::new(Arc::clone(&dst.inner))));
    s.keep_until_done(Box::new((data, Arc::clone(&dst.inner))))
}

/// `copy_to_device` (`to_device`) or `copy_to_host`: one `aclrtMemcpyAsync` between the
/// page-locked span and `buf` at `offset`; both stay alive until the copy ran.
pub(super) fn copy_pinned(
    s: &AscendStream,
    span: xstream_core::PinnedSpan,
    buf: &AscendBuffer,
    offset: usize,
    to_device: bool,
) -> Result<()> {
    s.enter(if to_device {
        "copy_to_device"
    } else {
        "copy_to_host"
    })?;
    s.note_use(buf)?;
    let host: *mut std::ffi::c_void = span.as_ptr().cast();
    let dev = result::memory::at(buf.inner.ptr, offset);
    let (dst, src, kind) = if to_device {
        (dev, host, consts::ACL_MEMCPY_HOST_TO_DEVICE)
    } else {
        (host, dev, consts::ACL_MEMCPY_DEVICE_TO_HOST)
    };
    let t = s.device.inner.t;
    result::memory::memcpy(t, dst, src, span.len(), kind, s.state.raw)?;
    s.state.enqueued(Some(Box::new(Arc::clone(&buf.inner))));
    s.keep_until_done(Box::new((span, Arc::clone(&buf.inner))))
}

pub(super) fn read(
    s: &AscendStream,
    src: &AscendBuffer,
    offset: usize,
    len: usize,
) -> Result<Readback> {
    s.device.inner.bind()?;
    s.note_use(src)?;
    let (rb, fill) = Readback::new();
    let mut host = vec![0u8; len];
    let d = &s.device.inner;
    if len > 0 {
        result::memory::memcpy(
            d.t,
            host.as_mut_ptr().cast(),
            result::memory::at(src.inner.ptr, offset),
            len,
            consts::ACL_MEMCPY_DEVICE_TO_HOST,
            s.state.raw,
        )?;
    }
    let keep = Arc::clone(&src.inner);
    let host = InFlight::new(host, &s.state);
    s.launch_report(
        Box::new(move |r| {
            drop(keep);
            fill.fill(r.map(|_| host.take()));
        }),
        false,
    )?;
    Ok(rb)
}

pub(super) fn copy(
    s: &AscendStream,
    src: &AscendBuffer,
    src_offset: usize,
    dst: &AscendBuffer,
    dst_offset: usize,
    len: usize,
) -> Result<()> {
    s.enter("copy")?;
    s.note_use(src)?;
    s.note_use(dst)?;
    enqueue_device_copy(s, src, src_offset, dst, dst_offset, len)
}

/// `Stream::copy_peer` (see `crate::peer`): buffers of the stream's device take the ordinary
/// copy; otherwise the other device must be an enabled peer, and the copy is one
/// `aclrtMemcpyAsync` (device to device) on this stream.
pub(super) fn copy_peer(
    s: &AscendStream,
    src: &AscendBuffer,
    src_offset: usize,
    dst: &AscendBuffer,
    dst_offset: usize,
    len: usize,
) -> Result<()> {
    let mine = s.device.inner.ordinal;
    let (so, d_o) = (
        src.inner.device.inner.ordinal,
        dst.inner.device.inner.ordinal,
    );
    let (local, foreign, other) = match (
        src.inner.device.same(&s.device),
        dst.inner.device.same(&s.device),
    ) {
        (true, true) => return copy(s, src, src_offset, dst, dst_offset, len),
        (true, false) => (src, dst, d_o),
        // The checked layer saw that one of them is of this stream's device.
        (false, _) => (dst, src, so),
    };
    if other == mine || !crate::peer::enabled(&s.device, other) {
        return Err(xstream_core::Error::NotPermitted(
            "copy_peer: the stream's device has not enabled peer access to the other \
             buffer's device (Device::enable_peer_access)",
        ));
    }
    if foreign.inner.ordered.is_some() {
        // Its block cache orders reuse with events on its own device's streams only; a use
        // from this device could not hold the reuse back.
        return Err(xstream_core::Error::unsupported(
            xstream_core::BackendKind::Ascend,
            "copy_peer with a stream-ordered buffer (alloc_async) of the other device; use \
             Device::alloc for buffers shared across devices",
        ));
    }
    s.enter("copy_peer")?;
    s.note_use(local)?;
    enqueue_device_copy(s, src, src_offset, dst, dst_offset, len)
}

/// `alloc_async`: a cached block this stream may use now, else `aclrtMalloc` (emulated stream
/// order, see `crate::blocks`).
pub(super) fn alloc_async(s: &AscendStream, len: usize) -> Result<AscendBuffer> {
    s.state.capture.gate("alloc_async")?;
    let d = &s.device.inner;
    d.bind()?;
    let oom = || xstream_core::Error::OutOfMemory {
        backend: xstream_core::BackendKind::Ascend,
        detail: format!("{len} bytes is more than any address space holds"),
    };
    // A zero-length buffer holds the smallest block (a valid, unique address).
    let class = crate::blocks::size_class(len.max(1))
        .filter(|&c| c <= isize::MAX as usize)
        .ok_or_else(oom)?;
    let cache = &d.blocks;
    let ptr = match cache.take(d.t, class, s.state.key) {
        Some(p) => p,
        None => malloc_retry(d, class)?,
    };
    cache.enforce_threshold(d.t);
    Ok(AscendBuffer {
        inner: Arc::new(crate::device::BufInner {
            device: s.device.clone(),
            ptr,
            len,
            ordered: Some(crate::blocks::Ordered::new(class, &s.state)),
            leaked: std::sync::atomic::AtomicBool::new(false),
            mapped: None,
        }),
    })
}

/// `aclrtMalloc`; on out-of-memory frees the completed cached blocks and tries again, then
/// (blocks still cached) synchronizes the device, frees them all and tries a last time.
fn malloc_retry(d: &crate::device::DeviceInner, class: usize) -> Result<crate::sys::DevPtr> {
    let policy = consts::ACL_MEM_MALLOC_HUGE_FIRST;
    let is_oom = |r: &Result<_>| r.as_ref().is_err_and(xstream_core::Error::is_out_of_memory);
    let r = result::memory::malloc(d.t, class, policy);
    if !is_oom(&r) {
        return r;
    }
    if d.blocks.trim(d.t, 0) > 0 {
        let r = result::memory::malloc(d.t, class, policy);
        if !is_oom(&r) {
            return r;
        }
    }
    if d.blocks.cached() == 0 {
        return r;
    }
    result::device::synchronize(d.t).map_err(|e| d.observe(e))?;
    d.blocks.trim(d.t, 0);
    result::memory::malloc(d.t, class, policy)
}

/// `free_async`: records the release events (this stream and every other stream that used the
/// buffer) and drops the handle; the last handle puts the block into the device's cache.
pub(super) fn free_async(s: &AscendStream, buf: AscendBuffer) -> Result<()> {
    let Some(o) = &buf.inner.ordered else {
        // A plain buffer: its lifetime rule applies (freed after the device's work).
        return Ok(());
    };
    // No free node can be recorded into an ACL capture.
    s.state.capture.gate("free_async")?;
    if o.freed.swap(true, std::sync::atomic::Ordering::AcqRel) {
        return Err(xstream_core::Error::invalid(
            "free_async: the buffer was already freed (through a clone)",
        ));
    }
    let d = &s.device.inner;
    d.bind()?;
    s.state.touch();
    let cache = &d.blocks;
    if let Ok(rel) = o.record_release(d.t, cache, &s.state) {
        *lock(&o.release) = Some(rel);
    }
    drop(buf);
    cache.enforce_threshold(d.t);
    Ok(())
}

/// One `aclrtMemcpyAsync` device to device on `s`, keeping both buffers alive until it ran
/// (the checks are the caller's).
fn enqueue_device_copy(
    s: &AscendStream,
    src: &AscendBuffer,
    src_offset: usize,
    dst: &AscendBuffer,
    dst_offset: usize,
    len: usize,
) -> Result<()> {
    let d = &s.device.inner;
    result::memory::memcpy(
        d.t,
        result::memory::at(dst.inner.ptr, dst_offset),
        result::memory::at(src.inner.ptr, src_offset),
        len,
        consts::ACL_MEMCPY_DEVICE_TO_DEVICE,
        s.state.raw,
    )?;
    s.state.enqueued(Some(Box::new((
        Arc::clone(&src.inner),
        Arc::clone(&dst.inner),
    ))));
    Ok(())
}

/// Bytes of the pattern staged on the host by [`memset_pattern`] before it doubles them on
/// the device.
const PATTERN_STAGE: usize = 4096;

/// `memset`, `memset16`, `memset32`, `memset64` (the wider ones emulated: ACL's
/// `aclrtMemsetAsync` sets bytes only). A pattern whose bytes are all equal is one byte
/// memset; any other is one staged write of up to [`PATTERN_STAGE`] bytes of the pattern, then
/// device-to-device copies doubling the filled prefix, all on this stream (so in stream order,
/// and capturable like the copies they are).
pub(super) fn memset(
    s: &AscendStream,
    buf: &AscendBuffer,
    offset: usize,
    len: usize,
    value: xstream_core::MemsetPattern,
) -> Result<()> {
    if let Some(b) = value.as_byte() {
        return memset_bytes(s, buf, offset, len, b);
    }
    let first = len.min(PATTERN_STAGE);
    let mut stage = vec![0u8; first];
    value.fill(&mut stage);
    write(s, buf, offset, stage)?;
    let mut have = first;
    while have < len {
        let n = have.min(len - have);
        copy(s, buf, offset, buf, offset + have, n)?;
        have += n;
    }
    Ok(())
}

/// `Stream::write_from_blocking`: one `aclrtMemcpyAsync` host to device from the caller's slice on
/// this stream, then a wait for the stream, so the slice is free again when this returns. No
/// staging and no heap allocation.
pub(super) fn write_from_blocking(
    s: &AscendStream,
    dst: &AscendBuffer,
    offset: usize,
    src: &[u8],
) -> Result<()> {
    s.note_use(dst)?;
    sync_copy_allowed(s, "write_from_blocking")?;
    s.enter("write_from_blocking")?;
    result::memory::memcpy(
        s.device.inner.t,
        result::memory::at(dst.inner.ptr, offset),
        src.as_ptr().cast(),
        src.len(),
        consts::ACL_MEMCPY_HOST_TO_DEVICE,
        s.state.raw,
    )?;
    s.wait_all()
}

/// `Stream::read_into_blocking`: one `aclrtMemcpyAsync` device to host into the caller's slice, then a
/// wait for the stream. No heap allocation.
pub(super) fn read_into_blocking(
    s: &AscendStream,
    src: &AscendBuffer,
    offset: usize,
    dst: &mut [u8],
) -> Result<()> {
    s.note_use(src)?;
    sync_copy_allowed(s, "read_into_blocking")?;
    s.enter("read_into_blocking")?;
    result::memory::memcpy(
        s.device.inner.t,
        dst.as_mut_ptr().cast(),
        result::memory::at(src.inner.ptr, offset).cast_const(),
        dst.len(),
        consts::ACL_MEMCPY_DEVICE_TO_HOST,
        s.state.raw,
    )?;
    s.wait_all()
}

/// The synchronous typed copies need a stream that runs its tasks now: refused on a
/// persistent stream.
fn sync_copy_allowed(s: &AscendStream, op: &'static str) -> Result<()> {
    if s.persistent {
        return Err(xstream_core::Error::unsupported(
            xstream_core::BackendKind::Ascend,
            format!("{op} on a persistent stream (its tasks run only when a model executes)"),
        ));
    }
    Ok(())
}
