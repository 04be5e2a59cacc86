//! Page-locked host memory on the host backend: the reference. A "page-locked" buffer is a
//! zero-initialised, page-aligned heap block ([`xstream_core::AlignedAlloc`]); copies between
//! it and device buffers are single queued copies executed by the stream's worker.

use std::sync::Arc;

use xstream_core::{
    translate_pinned_flags, AlignedAlloc, BackendKind, PinnedAllocDesc, PinnedBuffer,
    PinnedFlagRow, PinnedFlags, Result,
};

use crate::{HostBackend, HostDevice};

/// The host backend's host-memory flag table: every flag is accepted (there is one address
/// space, so memory is portable, mapped and uncached-write-friendly by construction).
pub const HOST_PINNED_FLAGS: &[PinnedFlagRow] = &[
    PinnedFlagRow::native(PinnedFlags::PORTABLE, 1),
    PinnedFlagRow::native(PinnedFlags::DEVICE_MAPPED, 2),
    PinnedFlagRow::native(PinnedFlags::WRITE_COMBINED, 4),
];

/// The former name of [`HOST_PINNED_FLAGS`].
#[deprecated(since = "0.2.0", note = "renamed `HOST_PINNED_FLAGS`")]
pub const HOST_MEM_FLAGS: &[PinnedFlagRow] = HOST_PINNED_FLAGS;

pub(crate) fn alloc_pinned(
    dev: &HostDevice,
    len: usize,
    desc: &PinnedAllocDesc,
) -> Result<PinnedBuffer<HostBackend>> {
    let (_, flags, report) = translate_pinned_flags(
        BackendKind::Host,
        HOST_PINNED_FLAGS,
        desc.flags,
        desc.policy,
    )?;
    if len == 0 {
        return PinnedBuffer::empty(dev, flags, report);
    }
    let mem = AlignedAlloc::new(
        BackendKind::Host,
        xstream_core::Device::info(dev).ordinal,
        len,
    )?;
    Ok(PinnedBuffer::from_allocation(
        dev,
        Arc::new(mem),
        flags,
        report,
    ))
}
