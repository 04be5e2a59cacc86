//! [`CudaGraph`]: a captured graph, instantiated once and replayed with `cuGraphLaunch`.

use std::fmt;
use std::sync::Arc;

use xstream_core::{Error, Result, Stream};

use crate::ffi::{self, CuGraph, CuGraphExec};
use crate::memory::Keep;
use crate::{CudaBackend, CudaDevice, CudaStream};

/// An instantiated CUDA graph (`cuGraphInstantiateWithFlags`). It keeps alive every buffer (and
/// written host bytes) its nodes reference; each launch hands that list to the stream, so
/// dropping the graph while a replay is queued is safe.
pub struct CudaGraph {
    dev: CudaDevice,
    graph: CuGraph,
    exec: CuGraphExec,
    nodes: usize,
    keep: Arc<Vec<Keep>>,
}

impl fmt::Debug for CudaGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaGraph")
            .field("graph", &self.graph)
            .field("nodes", &self.nodes)
            .finish()
    }
}

impl CudaGraph {
    pub(crate) fn instantiate(dev: &CudaDevice, graph: CuGraph, keep: Vec<Keep>) -> Result<Self> {
        let sh = &dev.shared;
        let nodes = match ffi::graph_node_count(graph) {
            Ok(n) => n,
            Err(c) => {
                let _ = ffi::graph_destroy(graph);
                return Err(sh.fail("cuGraphGetNodes", c));
            }
        };
        let exec = match ffi::graph_instantiate(graph) {
            Ok(e) => e,
            Err(c) => {
                let _ = ffi::graph_destroy(graph);
                return Err(sh.fail("cuGraphInstantiateWithFlags", c));
            }
        };
        Ok(Self {
            dev: dev.clone(),
            graph,
            exec,
            nodes,
            keep: Arc::new(keep),
        })
    }

    /// The raw (uninstantiated) graph.
    pub fn raw_graph(&self) -> CuGraph {
        self.graph
    }

    /// The raw executable graph.
    pub fn raw_exec(&self) -> CuGraphExec {
        self.exec
    }
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        let (exec, graph, ctx) = (self.exec, self.graph, self.dev.shared.raw_ctx);
        // Dispatched, holds the device (and its context) until the destroy ran.
        crate::stream::release_now_or_dispatched(&self.dev, move || {
            if ffi::bind(ctx).is_ok() {
                let _ = ffi::graph_exec_destroy(exec);
                let _ = ffi::graph_destroy(graph);
            }
        });
    }
}

impl xstream_core::GraphImpl for CudaGraph {
    type B = CudaBackend;

    fn node_count_impl(&self) -> usize {
        self.nodes
    }

    fn replay_impl(&self, stream: &CudaStream) -> Result<()> {
        self.dev.shared.bind()?;
        if stream.cuda_device().shared.raw_ctx != self.dev.shared.raw_ctx {
            return Err(Error::WrongDevice(
                "a graph can only be launched on a stream of its own device".into(),
            ));
        }
        stream.state.capture.gate_enqueue("graph launch")?;
        if let Err(c) = ffi::graph_launch(self.exec, stream.as_raw()) {
            let e = self.dev.shared.fail("cuGraphLaunch", c);
            if matches!(e, Error::Capture { .. }) {
                stream.state.capture.invalidate();
            }
            return Err(e);
        }
        if !self.keep.is_empty() {
            stream.keep(Keep::Shared(Arc::clone(&self.keep)));
        }
        Ok(())
    }
}
