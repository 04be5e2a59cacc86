//! Data movement on a [`HostStream`]: memset, write, read, buffer copies, copies to and
//! from page-locked host memory, all enqueued as work items.

use std::sync::Arc;

use xstream_core::callback::ensure_not_in_callback;
use xstream_core::{check_range, Error, MemsetPattern, Readback, Result};

use super::HostStream;
use crate::worker::{Node, Op};
use crate::HostDeviceBuffer;

pub(super) fn memset(
    s: &HostStream,
    buf: &HostDeviceBuffer,
    offset: usize,
    len: usize,
    value: MemsetPattern,
) -> Result<()> {
    ensure_not_in_callback()?;
    check_range("memset", buf.inner_len(), offset, len)?;
    value.check(offset, len)?;
    if len == 0 {
        return Ok(());
    }
    s.submit(
        "memset",
        Node::Memset {
            buf: Arc::clone(&buf.inner),
            offset,
            len,
            value,
        },
    )
}

pub(super) fn write(
    s: &HostStream,
    dst: &HostDeviceBuffer,
    offset: usize,
    data: Vec<u8>,
) -> Result<()> {
    ensure_not_in_callback()?;
    check_range("write", dst.inner_len(), offset, data.len())?;
    if data.is_empty() {
        return Ok(());
    }
    s.submit(
        "write",
        Node::Write {
            dst: Arc::clone(&dst.inner),
            offset,
            data: Arc::new(data),
        },
    )
}

pub(super) fn read(
    s: &HostStream,
    src: &HostDeviceBuffer,
    offset: usize,
    len: usize,
) -> Result<Readback> {
    ensure_not_in_callback()?;
    check_range("read", src.inner_len(), offset, len)?;
    s.device.shared().check()?;
    // A Readback is filled once and cannot be refilled by replays, so a read is not
    // capturable (CUDA likewise refuses pageable device-to-host copies in a capture).
    s.queue.capture.gate("read")?;
    let (rb, fill) = Readback::new();
    s.queue.push(Op::Read {
        src: Arc::clone(&src.inner),
        offset,
        len,
        fill,
    })?;
    Ok(rb)
}

pub(super) fn copy(
    s: &HostStream,
    src: &HostDeviceBuffer,
    src_offset: usize,
    dst: &HostDeviceBuffer,
    dst_offset: usize,
    len: usize,
) -> Result<()> {
    ensure_not_in_callback()?;
    check_range("copy source", src.inner_len(), src_offset, len)?;
    check_range("copy destination", dst.inner_len(), dst_offset, len)?;
    if len == 0 {
        return Ok(());
    }
    s.submit(
        "copy",
        Node::Copy {
            src: Arc::clone(&src.inner),
            src_offset,
            dst: Arc::clone(&dst.inner),
            dst_offset,
            len,
        },
    )
}

/// A copy between buffers of two host devices: the stream's device must own one of them and
/// have enabled access to the other's device.
pub(super) fn copy_peer(
    s: &HostStream,
    src: &HostDeviceBuffer,
    src_offset: usize,
    dst: &HostDeviceBuffer,
    dst_offset: usize,
    len: usize,
) -> Result<()> {
    ensure_not_in_callback()?;
    check_range("copy_peer source", src.inner_len(), src_offset, len)?;
    check_range("copy_peer destination", dst.inner_len(), dst_offset, len)?;
    let mine = xstream_core::Device::info(&s.device).ordinal;
    let (so, d_o) = (src.inner.ordinal(), dst.inner.ordinal());
    let other = match (so == mine, d_o == mine) {
        (true, true) => return copy(s, src, src_offset, dst, dst_offset, len),
        (true, false) => d_o,
        (false, true) => so,
        (false, false) => {
            return Err(xstream_core::Error::WrongDevice(format!(
                "copy_peer: neither buffer (devices {so} and {d_o}) belongs to the stream's \
                 host device {mine}"
            )))
        }
    };
    if !s.device.peer_enabled(other) {
        return Err(xstream_core::Error::NotPermitted(
            "copy_peer: the stream's device has not enabled peer access to the other \
             buffer's device (Device::enable_peer_access)",
        ));
    }
    copy(s, src, src_offset, dst, dst_offset, len)
}

pub(super) fn enqueue_copy_to_device(
    s: &HostStream,
    src: xstream_core::HostSpan,
    dst: &HostDeviceBuffer,
    dst_offset: usize,
) -> Result<()> {
    ensure_not_in_callback()?;
    check_range("copy_to_device", dst.inner_len(), dst_offset, src.len())?;
    s.submit(
        "copy_to_device",
        Node::FromHost {
            src,
            dst: Arc::clone(&dst.inner),
            offset: dst_offset,
        },
    )
}

pub(super) fn enqueue_copy_to_host(
    s: &HostStream,
    src: &HostDeviceBuffer,
    src_offset: usize,
    dst: xstream_core::HostSpan,
) -> Result<()> {
    ensure_not_in_callback()?;
    check_range("copy_to_host", src.inner_len(), src_offset, dst.len())?;
    s.submit(
        "copy_to_host",
        Node::ToHost {
            src: Arc::clone(&src.inner),
            offset: src_offset,
            dst,
        },
    )
}

/// Waits until the stream's work enqueued so far has run, for the synchronous typed copies:
/// refused in a capture and inside a callback; reports the device's sticky error. No heap
/// allocation.
fn drain(s: &HostStream, op: &'static str) -> Result<()> {
    ensure_not_in_callback()?;
    s.device.shared().check()?;
    s.queue.capture.gate(op)?;
    let target = s.queue.enqueued();
    let mode = crate::conv::map_stream_wait(s.queue.native_flags, s.queue.attrs().sync);
    if !s.queue.wait_for(target, None, mode) {
        return Err(Error::invalid(format!(
            "{op}: the stream's work did not complete"
        )));
    }
    s.device.shared().check()
}

/// `Stream::write_from_blocking` on the host: after the stream's earlier work, the bytes are copied on
/// the calling thread under the buffer's lock (no staging, no allocation).
pub(super) fn write_bytes_now(
    s: &HostStream,
    dst: &HostDeviceBuffer,
    offset: usize,
    src: &[u8],
) -> Result<()> {
    ensure_not_in_callback()?;
    check_range("write_from_blocking", dst.inner_len(), offset, src.len())?;
    if src.is_empty() {
        return Ok(());
    }
    drain(s, "write_from_blocking")?;
    match dst.inner.lock().get_mut(offset..offset + src.len()) {
        Some(d) => d.copy_from_slice(src),
        None => {
            return Err(Error::invalid(
                "write_from_blocking: range outside the buffer",
            ))
        }
    }
    Ok(())
}

/// `Stream::read_into_blocking` on the host: after the stream's earlier work, the bytes are copied on
/// the calling thread under the buffer's lock.
pub(super) fn read_bytes_now(
    s: &HostStream,
    src: &HostDeviceBuffer,
    offset: usize,
    dst: &mut [u8],
) -> Result<()> {
    ensure_not_in_callback()?;
    check_range("read_into_blocking", src.inner_len(), offset, dst.len())?;
    if dst.is_empty() {
        return Ok(());
    }
    drain(s, "read_into_blocking")?;
    match src.inner.lock().get(offset..offset + dst.len()) {
        Some(b) => dst.copy_from_slice(b),
        None => {
            return Err(Error::invalid(
                "read_into_blocking: range outside the buffer",
            ))
        }
    }
    Ok(())
}
