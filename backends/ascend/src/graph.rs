//! [`AscendGraph`]: an `aclmdlRI` (model run instance) from stream capture
//! (`aclmdlRICaptureBegin`/`End`) or from a PERSISTENT stream (`aclmdlRIBuildBegin`,
//! `BindStream`, `EndTask`, `BuildEnd`). Replayed with `aclmdlRIExecuteAsync`; destroyed with
//! `aclmdlRIDestroy` on the reaper thread after the device's queued work completed. The graph
//! keeps alive every buffer and host array its captured work uses.

use std::any::Any;
use std::sync::Arc;

use xstream_core::{Result, Stream};

use crate::callback::reap;
use crate::device::AscendDevice;
use crate::result;
use crate::stream::{AscendStream, StreamState};
use crate::sys::RawModel;
use crate::AscendBackend;

/// A replayable ACL model run instance.
pub struct AscendGraph {
    device: AscendDevice,
    model: RawModel,
    nodes: usize,
    keep: Vec<Box<dyn Any + Send + Sync>>,
    /// The PERSISTENT stream whose tasks the model owns (kept alive with the graph).
    persistent: Option<Arc<StreamState>>,
}

impl std::fmt::Debug for AscendGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AscendGraph")
            .field("model", &self.model)
            .field("nodes", &self.nodes)
            .finish()
    }
}

impl AscendGraph {
    pub(crate) fn new(
        device: &AscendDevice,
        model: RawModel,
        nodes: usize,
        keep: Vec<Box<dyn Any + Send + Sync>>,
        persistent: Option<Arc<StreamState>>,
    ) -> Self {
        Self {
            device: device.clone(),
            model,
            nodes,
            keep,
            persistent,
        }
    }

    pub(crate) fn build_persistent(
        device: &AscendDevice,
        state: &Arc<StreamState>,
        nodes: usize,
        keep: Vec<Box<dyn Any + Send + Sync>>,
    ) -> Result<Self> {
        let t = device.inner.t;
        let m = result::model::build_begin(t)?;
        let r = result::model::bind_stream(t, m, state.raw)
            .and_then(|_| result::model::end_task(t, m, state.raw))
            .and_then(|_| result::model::build_end(t, m));
        if let Err(e) = r {
            let _ = result::model::destroy(t, m);
            return Err(e);
        }
        Ok(Self::new(device, m, nodes, keep, Some(Arc::clone(state))))
    }

    /// The raw `aclmdlRI` (ACL-only extension).
    pub fn as_raw(&self) -> RawModel {
        self.model
    }
}

impl Drop for AscendGraph {
    fn drop(&mut self) {
        let device = self.device.clone();
        let model = self.model;
        let keep = std::mem::take(&mut self.keep);
        let persistent = self.persistent.take();
        reap(Box::new(move || {
            let d = &device.inner;
            if d.bind().is_ok() {
                let _ = result::device::synchronize(d.t);
                if let Some(s) = &persistent {
                    let _ = result::model::unbind_stream(d.t, model, s.raw);
                }
                let _ = result::model::destroy(d.t, model);
            }
            drop(keep);
            drop(persistent);
        }));
    }
}

impl xstream_core::GraphImpl for AscendGraph {
    type B = AscendBackend;

    fn node_count_impl(&self) -> usize {
        self.nodes
    }

    fn replay_impl(&self, stream: &AscendStream) -> Result<()> {
        if !stream.device().same(&self.device) {
            return Err(xstream_core::Error::WrongDevice(
                "a graph replays only on streams of its own device".into(),
            ));
        }
        stream.state.capture.gate_enqueue("graph launch")?;
        stream.state.touch();
        let d = &self.device.inner;
        d.bind()?;
        result::model::execute_async(d.t, self.model, stream.state.raw)
    }
}
