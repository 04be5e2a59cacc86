//! Stream capture on ACL (`aclmdlRICaptureBegin` / `aclmdlRICaptureEnd` under
//! [`xstream_core::CaptureCell`]; PERSISTENT streams record continuously) and the ACL-only
//! capture extension (`aclmdlRICaptureGetInfo`).

use xstream_core::{
    ensure_not_in_callback, CaptureErrorKind, CaptureMode, CaptureStatus, Error, Ownership, Result,
};

use super::AscendStream;
use crate::graph::AscendGraph;
use crate::result;
use crate::sys::consts;

impl AscendStream {
    /// The runtime's own view of the capture (`aclmdlRICaptureGetInfo`): status and the model
    /// being built. ACL-only extension.
    ///
    /// # Errors
    /// Vendor errors; [`Error::Unsupported`] without the symbol.
    pub fn native_capture_info(&self) -> Result<(CaptureStatus, crate::sys::RawModel)> {
        ensure_not_in_callback()?;
        let d = &self.device.inner;
        d.bind()?;
        let (st, m) = result::model::capture_info(d.t, self.state.raw)?;
        let st = match st {
            consts::ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE => CaptureStatus::Active,
            consts::ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED => CaptureStatus::Invalidated,
            _ => CaptureStatus::None,
        };
        Ok((st, m))
    }
}

pub(super) fn begin_capture(s: &AscendStream, mode: CaptureMode) -> Result<()> {
    match s.ownership {
        Ownership::Owned => {}
        _ => {
            return Err(Error::Capture {
                op: "begin_capture",
                kind: CaptureErrorKind::NotCapturable,
            })
        }
    }
    let d = &s.device.inner;
    result::opt(d.t.aclmdlRICaptureBegin, "aclmdlRICaptureBegin")?;
    s.state.capture.begin()?;
    let m = match mode {
        CaptureMode::Global => consts::ACL_MODEL_RI_CAPTURE_MODE_GLOBAL,
        CaptureMode::ThreadLocal => consts::ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL,
        CaptureMode::Relaxed => consts::ACL_MODEL_RI_CAPTURE_MODE_RELAXED,
    };
    let r = d
        .bind()
        .and_then(|_| result::model::capture_begin(d.t, s.state.raw, m));
    if let Err(e) = r {
        let _ = s.state.capture.end();
        return Err(e);
    }
    s.state.take_capture();
    Ok(())
}

pub(super) fn end_capture(s: &AscendStream) -> Result<AscendGraph> {
    let d = &s.device.inner;
    d.bind()?;
    if s.persistent {
        s.state.capture.end()?;
        let (nodes, keep) = s.state.take_capture();
        let r = AscendGraph::build_persistent(&s.device, &s.state, nodes, keep);
        // The stream keeps recording (it stays PERSISTENT).
        let _ = s.state.capture.begin();
        return r;
    }
    let cell = s.state.capture.end();
    if matches!(
        cell,
        Err(Error::Capture {
            kind: CaptureErrorKind::NotCapturing,
            ..
        })
    ) {
        return Err(cell.unwrap_err());
    }
    let (nodes, keep) = s.state.take_capture();
    let (r, model) = result::model::capture_end(d.t, s.state.raw);
    let destroy = |m: crate::sys::RawModel| {
        if !m.0.is_null() {
            let _ = result::model::destroy(d.t, m);
        }
    };
    if let Err(e) = cell {
        destroy(model);
        return Err(e);
    }
    if let Err(e) = r {
        destroy(model);
        // The call itself may have failed with the runtime still capturing: end once more
        // so the stream is usable at once and can be destroyed (a leak found by the fault
        // sweep). Outside a capture this is a harmless `STREAM_NOT_CAPTURED`.
        let (_, again) = result::model::capture_end(d.t, s.state.raw);
        destroy(again);
        return Err(match e {
            Error::Capture { .. } => Error::Capture {
                op: "end_capture",
                kind: CaptureErrorKind::Invalidated,
            },
            other => other,
        });
    }
    Ok(AscendGraph::new(&s.device, model, nodes, keep, None))
}
