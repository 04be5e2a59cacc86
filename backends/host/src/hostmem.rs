//! Page-locked host memory on the host backend: the reference. A "page-locked" buffer is a
//! zero-initialised, page-aligned heap block ([`xstream_core::AlignedAlloc`]); copies between
//! it and device buffers are single queued copies executed by the stream's worker.

use std::sync::Arc;

use xstream_core::{
    translate_host_flags, AlignedAlloc, BackendKind, HostAllocDesc, HostBuffer, HostFlagRow,
    HostMemFlags, Result,
};

use crate::{HostBackend, HostDevice};

/// The host backend's host-memory flag table: every flag is accepted (there is one address
/// space, so memory is portable, mapped and uncached-write-friendly by construction).
pub const HOST_MEM_FLAGS: &[HostFlagRow] = &[
    HostFlagRow {
        flag: HostMemFlags::PORTABLE,
        native: Some(1),
        reason: "",
    },
    HostFlagRow {
        flag: HostMemFlags::DEVICE_MAPPED,
        native: Some(2),
        reason: "",
    },
    HostFlagRow {
        flag: HostMemFlags::WRITE_COMBINED,
        native: Some(4),
        reason: "",
    },
];

pub(crate) fn alloc_host(
    dev: &HostDevice,
    len: usize,
    desc: &HostAllocDesc,
) -> Result<HostBuffer<HostBackend>> {
    let (_, flags, report) =
        translate_host_flags(BackendKind::Host, HOST_MEM_FLAGS, desc.flags, desc.policy)?;
    if len == 0 {
        return HostBuffer::empty(dev, flags, report);
    }
    let mem = AlignedAlloc::new(
        BackendKind::Host,
        xstream_core::Device::info(dev).ordinal,
        len,
    )?;
    Ok(HostBuffer::from_allocation(
        dev,
        Arc::new(mem),
        flags,
        report,
    ))
}
