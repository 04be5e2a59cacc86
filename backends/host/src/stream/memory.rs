//! Data movement on a [`HostStream`]: memset, write, read, buffer copies, copies to and
//! from page-locked host memory, all enqueued as work items. xstream-core's checked layer has
//! checked every range, the devices and the callback gate, and answered zero lengths.

use std::sync::Arc;

use xstream_core::{Error, MemsetPattern, Readback, Result};

use super::{HostStream, Span};
use crate::worker::{Node, Op};

pub(super) fn memset(s: &HostStream, dst: Span<'_>, value: MemsetPattern) -> Result<()> {
    s.submit(
        "memset",
        Node::Memset {
            buf: Arc::clone(&dst.buffer().inner),
            offset: dst.offset(),
            len: dst.len(),
            value,
        },
    )
}

pub(super) fn write(s: &HostStream, dst: Span<'_>, data: Vec<u8>) -> Result<()> {
    s.submit(
        "write",
        Node::Write {
            dst: Arc::clone(&dst.buffer().inner),
            offset: dst.offset(),
            data: Arc::new(data),
        },
    )
}

pub(super) fn read(s: &HostStream, src: Span<'_>) -> Result<Readback> {
    s.device.shared().check()?;
    let (rb, fill) = Readback::new();
    s.queue.push(Op::Read {
        src: Arc::clone(&src.buffer().inner),
        offset: src.offset(),
        len: src.len(),
        fill,
    })?;
    Ok(rb)
}

pub(super) fn copy(s: &HostStream, src: Span<'_>, dst: Span<'_>) -> Result<()> {
    s.submit(
        "copy",
        Node::Copy {
            src: Arc::clone(&src.buffer().inner),
            src_offset: src.offset(),
            dst: Arc::clone(&dst.buffer().inner),
            dst_offset: dst.offset(),
            len: src.len(),
        },
    )
}

/// A copy between buffers of two host devices: the stream's device (which owns one of them)
/// must have enabled access to the other's device.
pub(super) fn copy_peer(s: &HostStream, src: Span<'_>, dst: Span<'_>) -> Result<()> {
    let mine = xstream_core::Device::info(&s.device).ordinal;
    let (so, d_o) = (src.buffer().inner.ordinal(), dst.buffer().inner.ordinal());
    let other = if so == mine { d_o } else { so };
    if other != mine && !s.device.peer_enabled(other) {
        return Err(xstream_core::Error::NotPermitted(
            "copy_peer: the stream's device has not enabled peer access to the other \
             buffer's device (Device::enable_peer_access)",
        ));
    }
    copy(s, src, dst)
}

pub(super) fn copy_to_device(
    s: &HostStream,
    src: xstream_core::PinnedSpan,
    dst: Span<'_>,
) -> Result<()> {
    s.submit(
        "copy_to_device",
        Node::FromPinned {
            src,
            dst: Arc::clone(&dst.buffer().inner),
            offset: dst.offset(),
        },
    )
}

pub(super) fn copy_to_host(
    s: &HostStream,
    src: Span<'_>,
    dst: xstream_core::PinnedSpan,
) -> Result<()> {
    s.submit(
        "copy_to_host",
        Node::ToPinned {
            src: Arc::clone(&src.buffer().inner),
            offset: src.offset(),
            dst,
        },
    )
}

/// Waits until the stream's work enqueued so far has run, for the synchronous typed copies;
/// reports the device's sticky error. No heap allocation.
fn drain(s: &HostStream, op: &'static str) -> Result<()> {
    s.device.shared().check()?;
    let target = s.queue.enqueued();
    let mode = crate::conv::map_stream_wait(s.queue.native_flags, s.queue.attrs().sync);
    if !s.queue.wait_for(target, None, mode) {
        return Err(Error::invalid(format!(
            "{op}: the stream's work did not complete"
        )));
    }
    s.device.shared().check()
}

/// `Stream::write_from_blocking` on the host: after the stream's earlier work, the bytes are
/// copied on the calling thread under the buffer's lock (no staging, no allocation).
pub(super) fn write_from_blocking(s: &HostStream, dst: Span<'_>, src: &[u8]) -> Result<()> {
    drain(s, "write_from_blocking")?;
    let mut g = dst.buffer().inner.lock();
    let to = g.get_mut(dst.offset()..dst.offset() + dst.len());
    to.ok_or_else(|| Error::invalid("write_from_blocking: range outside the buffer"))?
        .copy_from_slice(src);
    Ok(())
}

/// `Stream::read_into_blocking` on the host: after the stream's earlier work, the bytes are
/// copied on the calling thread under the buffer's lock.
pub(super) fn read_into_blocking(s: &HostStream, src: Span<'_>, dst: &mut [u8]) -> Result<()> {
    drain(s, "read_into_blocking")?;
    let g = src.buffer().inner.lock();
    let from = g.get(src.offset()..src.offset() + src.len());
    dst.copy_from_slice(
        from.ok_or_else(|| Error::invalid("read_into_blocking: range outside the buffer"))?,
    );
    Ok(())
}
