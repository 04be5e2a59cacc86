//! The built-in random fill on Ascend: one `aclrtRandomNumAsync` (a runtime task, no kernel
//! binary) where the runtime exports it and the chip has the task
//! ([`Capabilities::RANDOM`]). The fill's counter `offset` goes into 16 bytes of device memory
//! by a copy in stream order just before the task, so the task reads it when it runs; that
//! block is stream-ordered memory given back behind the task (in a capture: a plain buffer
//! the graph keeps).

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
    let capturing = s.state.capture.is_capturing();
    let counter = if capturing {
        // Not zeroed (a synchronous memset is refused while the thread captures): the copy
        // below writes all 16 bytes.
        s.device.alloc_plain(16)?.0
    } else {
        memory::alloc_async(s, 16)?
    };
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
    if !capturing {
        memory::free_async(s, counter)?;
    }
    Ok(())
}
