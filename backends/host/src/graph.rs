//! Replayable graphs of captured host work.

use std::sync::Arc;

use xstream_core::{Error, Result, Stream};

use crate::worker::Node;
use crate::{HostBackend, HostDevice, HostStream};

/// The work captured on a host stream, replayable any number of times.
///
/// Nodes are data (memsets, writes with their bytes, copies, kernels, event records, local
/// waits); a launch clones them into one work item of the target stream. Event records are
/// bound to a fresh record of the event at each launch, so `event.synchronize()` after a
/// launch waits for that launch.
#[derive(Debug, Clone)]
pub struct HostGraph {
    device: HostDevice,
    nodes: Arc<[Node]>,
}

impl HostGraph {
    pub(crate) fn new(device: HostDevice, nodes: Vec<Node>) -> Self {
        Self {
            device,
            nodes: nodes.into(),
        }
    }
}

impl xstream_core::GraphImpl for HostGraph {
    type B = HostBackend;

    fn node_count_impl(&self) -> usize {
        self.nodes.len()
    }

    fn replay_impl(&self, stream: &HostStream) -> Result<()> {
        if !stream.device().same_context(&self.device) {
            return Err(Error::WrongDevice(format!(
                "a graph captured on {:?} cannot launch on a stream of {:?}",
                self.device,
                stream.device()
            )));
        }
        stream.launch_graph(&self.nodes)
    }
}
