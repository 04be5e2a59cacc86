//! Stream capture on the host: the capture list (work recorded as data, replayed by a
//! [`HostGraph`]), begin and end under [`xstream_core::CaptureCell`].

use xstream_core::{CaptureErrorKind, CaptureMode, Error, Ownership, Result, StreamFlags};

use super::HostStream;
use crate::worker::CaptureRec;
use crate::HostGraph;

impl HostStream {
    pub(super) fn start_capture(&self, mode: CaptureMode) -> Result<()> {
        let mut rec = self.queue.capture_rec();
        self.queue.capture.begin()?;
        rec.nodes.clear();
        rec.mode = mode;
        rec.thread = Some(std::thread::current().id());
        rec.epoch += 1;
        Ok(())
    }

    /// Runs `f` on the capture list when the stream is capturing (`Some`), else `None`.
    pub(super) fn with_capture(
        &self,
        f: impl FnOnce(&mut CaptureRec) -> Result<()>,
    ) -> Option<Result<()>> {
        if !self.queue.capture.is_capturing() {
            return None;
        }
        let mut rec = self.queue.capture_rec();
        // Re-checked under the lock that end_capture holds.
        if !self.queue.capture.is_capturing() {
            return None;
        }
        Some(f(&mut rec))
    }
}

pub(super) fn begin_capture(s: &HostStream, mode: CaptureMode) -> Result<()> {
    match s.ownership {
        Ownership::Default => {
            return Err(Error::Capture {
                op: "begin_capture",
                kind: CaptureErrorKind::NotCapturable,
            })
        }
        Ownership::Borrowed => {
            return Err(Error::NotOwned {
                kind: xstream_core::NotOwnedKind::Borrowed,
                op: "begin_capture",
            })
        }
        Ownership::Owned => {}
    }
    s.device.shared().check()?;
    s.start_capture(mode)
}

pub(super) fn end_capture(s: &HostStream) -> Result<HostGraph> {
    let mut rec = s.queue.capture_rec();
    let me = std::thread::current().id();
    if s.queue.capture.is_capturing() && rec.mode != CaptureMode::Relaxed && rec.thread != Some(me)
    {
        return Err(Error::Capture {
            op: "end_capture",
            kind: CaptureErrorKind::WrongThread,
        });
    }
    let nodes = std::mem::take(&mut rec.nodes);
    let ended = s.queue.capture.end();
    if s.queue.flags.contains(StreamFlags::PERSISTENT) {
        // A persistent stream keeps recording: the next graph starts empty.
        if s.queue.capture.begin().is_ok() {
            rec.mode = CaptureMode::Relaxed;
            rec.thread = Some(me);
            rec.epoch += 1;
        }
    }
    drop(rec);
    ended?;
    tracing::debug!(stream = s.queue.id, nodes = nodes.len(), "capture ended");
    Ok(HostGraph::new(s.device.clone(), nodes))
}
