//! The built-in random fill on Ascend: one `aclrtRandomNumAsync` (a runtime task, no kernel
//! binary) where the runtime exports it and the chip has the task
//! ([`Capabilities::RANDOM`]). The fill's counter `offset` goes into 16 bytes of device memory
//! by a copy in stream order just before the task, so the task reads it when it runs: the
//! stream's own block (made at its first fill, freed by the reaper after the stream), or, for a
//! captured fill and on the default stream, a block of the fill's own.

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
    s.note_use(buf)?;
    if s.state.capture.is_capturing() || s.state.device.is_none() {
        // A block of its own: a graph keeps it (and may replay on another stream); on the
        // default stream it is freed when dropped, once the device is idle. Not zeroed (a
        // synchronous memset is refused while the thread captures): the copy writes all 16
        // bytes.
        return enqueue(s, buf, offset, len, &fill, &s.device.alloc_plain(16)?.0);
    }
    // The stream's own block, made at its first fill. The lock is held from the counter's copy
    // to the task, so a fill enqueued by another thread on this stream cannot rewrite the
    // counter in between; stream order keeps it until the task read it.
    let mut c = s
        .state
        .random_counter
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if c.is_none() {
        *c = Some(s.device.alloc_plain(16)?.0);
    }
    match &*c {
        Some(block) => enqueue(s, buf, offset, len, &fill, block),
        None => Err(Error::invalid("random fill: no counter block")),
    }
}

/// The counter's copy into `counter`, then the task.
fn enqueue(
    s: &AscendStream,
    buf: &AscendBuffer,
    offset: usize,
    len: usize,
    fill: &RandomFill,
    counter: &AscendBuffer,
) -> Result<()> {
    let ctr = u128::from(fill.offset).to_le_bytes().to_vec();
    memory::write(s, counter, 0, ctr)?;
    let d = &s.device.inner;
    let out = result::memory::at(buf.inner.ptr, offset);
    let num = fill.elements(len);
    result::random::random_num_async(d.t, fill, num, out, counter.inner.ptr.0, s.state.raw)?;
    s.state.enqueued(Some(Box::new((
        Arc::clone(&buf.inner),
        Arc::clone(&counter.inner),
    ))));
    Ok(())
}
