//! Capture (`cuStreamBeginCapture` and friends) and graphs (create, instantiate, launch,
//! destroy).

use std::ptr;

use cudarc::driver::sys;

use super::{ok, CuGraph, CuGraphExec, CuGraphNode, CuResult, CuStream};

/// `cuStreamBeginCapture` (the `_v2` symbol, which takes a mode).
pub(crate) fn stream_begin_capture(s: CuStream, mode: sys::CUstreamCaptureMode) -> CuResult<()> {
    // SAFETY: `s` live.
    ok(unsafe { sys::cuStreamBeginCapture_v2(s.0, mode) })
}

/// `cuStreamBeginCaptureToGraph` with no dependencies.
pub(crate) fn stream_begin_capture_to_graph(
    s: CuStream,
    g: CuGraph,
    mode: sys::CUstreamCaptureMode,
) -> CuResult<()> {
    // SAFETY: `s` and `g` live; zero dependencies with null arrays.
    ok(unsafe { sys::cuStreamBeginCaptureToGraph(s.0, g.0, ptr::null(), ptr::null(), 0, mode) })
}

/// `cuStreamEndCapture`. The graph may be null on failure.
pub(crate) fn stream_end_capture(s: CuStream) -> (CuResult<()>, CuGraph) {
    let mut g = ptr::null_mut();
    // SAFETY: valid out-pointer; `s` live.
    let r = ok(unsafe { sys::cuStreamEndCapture(s.0, &mut g) });
    (r, CuGraph(g))
}

/// `cuStreamIsCapturing`.
pub(crate) fn stream_is_capturing(s: CuStream) -> CuResult<sys::CUstreamCaptureStatus> {
    let mut st = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: valid out-pointer; `s` live.
    ok(unsafe { sys::cuStreamIsCapturing(s.0, &mut st) })?;
    Ok(st)
}

/// What `cuStreamGetCaptureInfo_v3` reports.
pub(crate) struct RawCaptureInfo {
    pub status: sys::CUstreamCaptureStatus,
    pub id: u64,
    pub graph: CuGraph,
    pub deps: Vec<CuGraphNode>,
}

/// `cuStreamGetCaptureInfo_v3` (edge data is not copied out).
pub(crate) fn stream_get_capture_info(s: CuStream) -> CuResult<RawCaptureInfo> {
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let mut id = 0u64;
    let mut graph = ptr::null_mut();
    let mut deps: *const sys::CUgraphNode = ptr::null();
    let mut edges: *const sys::CUgraphEdgeData = ptr::null();
    let mut n = 0usize;
    // SAFETY: all out-pointers are valid; `s` live.
    ok(unsafe {
        sys::cuStreamGetCaptureInfo_v3(
            s.0,
            &mut status,
            &mut id,
            &mut graph,
            &mut deps,
            &mut edges,
            &mut n,
        )
    })?;
    let deps = if deps.is_null() || n == 0 {
        Vec::new()
    } else {
        // SAFETY: the driver returned an array of `n` nodes, valid until the next capture
        // call on this stream; it is copied at once.
        unsafe { std::slice::from_raw_parts(deps, n) }
            .iter()
            .map(|&d| CuGraphNode(d))
            .collect()
    };
    Ok(RawCaptureInfo {
        status,
        id,
        graph: CuGraph(graph),
        deps,
    })
}

/// `cuStreamUpdateCaptureDependencies_v2` (no edge data).
pub(crate) fn stream_update_capture_dependencies(
    s: CuStream,
    nodes: &[CuGraphNode],
    flags: u32,
) -> CuResult<()> {
    let mut raw: Vec<sys::CUgraphNode> = nodes.iter().map(|n| n.0).collect();
    // SAFETY: `raw` holds `raw.len()` nodes for the duration of the call; null edge data
    // means default edges; `s` live.
    ok(unsafe {
        sys::cuStreamUpdateCaptureDependencies_v2(
            s.0,
            raw.as_mut_ptr(),
            ptr::null(),
            raw.len(),
            flags,
        )
    })
}

/// `cuGraphCreate`.
pub(crate) fn graph_create() -> CuResult<CuGraph> {
    let mut g = ptr::null_mut();
    // SAFETY: valid out-pointer.
    ok(unsafe { sys::cuGraphCreate(&mut g, 0) })?;
    Ok(CuGraph(g))
}

/// `cuGraphGetNodes` (count only).
pub(crate) fn graph_node_count(g: CuGraph) -> CuResult<usize> {
    let mut n = 0usize;
    // SAFETY: null node array asks for the count only; `g` live.
    ok(unsafe { sys::cuGraphGetNodes(g.0, ptr::null_mut(), &mut n) })?;
    Ok(n)
}

/// `cuGraphInstantiateWithFlags(flags = 0)`.
pub(crate) fn graph_instantiate(g: CuGraph) -> CuResult<CuGraphExec> {
    let mut e = ptr::null_mut();
    // SAFETY: valid out-pointer; `g` live.
    ok(unsafe { sys::cuGraphInstantiateWithFlags(&mut e, g.0, 0) })?;
    Ok(CuGraphExec(e))
}

/// `cuGraphLaunch`.
pub(crate) fn graph_launch(e: CuGraphExec, s: CuStream) -> CuResult<()> {
    // SAFETY: both live.
    ok(unsafe { sys::cuGraphLaunch(e.0, s.0) })
}

/// `cuGraphDestroy`.
pub(crate) fn graph_destroy(g: CuGraph) -> CuResult<()> {
    // SAFETY: `g` is owned and never used again.
    ok(unsafe { sys::cuGraphDestroy(g.0) })
}

/// `cuGraphExecDestroy`.
pub(crate) fn graph_exec_destroy(e: CuGraphExec) -> CuResult<()> {
    // SAFETY: `e` is owned and never used again.
    ok(unsafe { sys::cuGraphExecDestroy(e.0) })
}
