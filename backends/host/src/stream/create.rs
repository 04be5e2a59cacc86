//! Creating a [`HostStream`]: owned streams (a new queue registered with the device) and
//! the device's default stream.

use std::sync::Arc;

use xstream_core::{CaptureMode, CreationReport, Ownership, Result, StreamDesc, StreamFlags};

use super::HostStream;
use crate::conv::{HOST_FLAGS, HOST_PRIORITY_RANGE};
use crate::device::next_id;
use crate::worker::{Queue, QueueKind};
use crate::HostDevice;

impl HostStream {
    pub(crate) fn create(device: &HostDevice, desc: &StreamDesc) -> Result<Self> {
        let t = HOST_FLAGS.stream_to_native(desc.flags, desc.policy)?;
        let p = HOST_PRIORITY_RANGE.resolve(desc.priority, desc.policy)?;
        let kind = if t.effective.contains(StreamFlags::NON_BLOCKING) {
            QueueKind::NonBlocking
        } else {
            QueueKind::Blocking
        };
        let q = Queue::new(
            next_id(),
            desc.name.clone(),
            Arc::clone(device.shared()),
            t.effective,
            t.native,
            kind,
            CreationReport {
                flags: t.report,
                priority: p,
            },
            p.native,
        );
        device.shared().register(&q);
        tracing::debug!(stream = q.id, name = ?q.name, flags = ?q.flags, priority = p.native,
            "create host stream");
        let s = Self {
            queue: q,
            device: device.clone(),
            ownership: Ownership::Owned,
        };
        if s.queue.flags.contains(StreamFlags::PERSISTENT) {
            s.start_capture(CaptureMode::Relaxed)?;
        }
        Ok(s)
    }

    pub(crate) fn default_of(device: &HostDevice) -> Self {
        Self {
            queue: Arc::clone(device.default_queue()),
            device: device.clone(),
            ownership: Ownership::Default,
        }
    }
}
