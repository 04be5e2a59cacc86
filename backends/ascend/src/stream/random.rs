//! The built-in random fill on Ascend: one `aclrtRandomNumAsync` (a runtime task, no kernel
//! binary) where the runtime exports it and the chip has the task
//! ([`Capabilities::RANDOM`]). The fill's counter `offset` goes into 16 bytes of device memory
//! by a copy in stream order just before the task, so the task reads it when it runs (see
//! `counter_block` for whose block it is).

use std::sync::Arc;

use xstream_core::{BackendKind, Capabilities, Device, Error, RandomFill, Result};

use super::{memory, AscendStream};
use crate::result;
use crate::AscendBuffer;

pub(super) fn fill(
    s: &AscendStream,
    buf: &AscendBuffer,
    offset: usize,
    len: usize,
    fill: RandomFill,
) -> Result<()> {
    if !s.device.info().capabilities.contains(Capabilities::RANDOM) {
        return Err(Error::unsupported(
            BackendKind::Ascend,
            "built-in random fill: this runtime or chip has no aclrtRandomNumAsync task",
        ));
    }
    s.enter("launch")?;
    s.check_buf(buf)?;
    if len == 0 {
        return Ok(());
    }
    let counter = counter_block(s)?;
    let ctr = u128::from(fill.offset).to_le_bytes().to_vec();
    memory::write(s, &counter, 0, ctr)?;
    let d = &s.device.inner;
    let out = result::memory::at(buf.inner.ptr, offset);
    let num = fill.elements(len);
    result::random::random_num_async(d.t, &fill, num, out, counter.inner.ptr.0, s.state.raw)?;
    s.state.enqueued(Some(Box::new((
        Arc::clone(&buf.inner),
        Arc::clone(&counter.inner),
    ))));
    Ok(())
}

/// The counter block of a fill on `s`: the stream's own (made at its first fill) on an owned or
/// borrowed stream outside capture, where stream order keeps each fill's counter until its
/// task read it; a block of its own for a captured fill (the graph keeps it, and may replay
/// on another stream) and on the default stream (freed when dropped, once the device is idle).
/// Not zeroed (a synchronous memset is refused while the thread captures): the copy before the
/// task writes all 16 bytes.
fn counter_block(s: &AscendStream) -> Result<AscendBuffer> {
    if s.state.capture.is_capturing() || s.state.device.is_none() {
        return Ok(s.device.alloc_plain(16)?.0);
    }
    let mut c = s
        .state
        .random_counter
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(b) = &*c {
        return Ok(b.clone());
    }
    let b = s.device.alloc_plain(16)?.0;
    *c = Some(b.clone());
    Ok(b)
}
