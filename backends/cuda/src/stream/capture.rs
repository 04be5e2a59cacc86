//! Stream capture on CUDA: begin/end under [`xstream_core::CaptureCell`], and the CUDA-only
//! capture extensions (`cuStreamIsCapturing`, `cuStreamGetCaptureInfo_v3`,
//! `cuStreamUpdateCaptureDependencies_v2`, `cuStreamBeginCaptureToGraph`,
//! `cuThreadExchangeStreamCaptureMode`).

use xstream_core::{CaptureErrorKind, CaptureMode, CaptureStatus, Error, Ownership, Result};

use super::{lock, CudaStream};
use crate::conv;
use crate::ffi::{self, CuGraphNode};
use crate::{error, CudaGraph};

/// What `cuStreamGetCaptureInfo_v3` reports.
#[derive(Debug, Clone)]
pub struct CaptureInfo {
    /// The capture status.
    pub status: CaptureStatus,
    /// The driver's unique capture id (0 when not capturing).
    pub id: u64,
    /// The capture's current dependency set (the nodes the next captured work will follow).
    pub dependencies: Vec<CuGraphNode>,
    /// The graph being captured into (owned by the capture; null when not capturing).
    pub graph: ffi::CuGraph,
}

/// How [`CudaStream::update_capture_dependencies`] changes the dependency set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DependencyUpdate {
    /// `CU_STREAM_ADD_CAPTURE_DEPENDENCIES`.
    Add,
    /// `CU_STREAM_SET_CAPTURE_DEPENDENCIES`.
    Set,
}

impl CudaStream {
    pub(super) fn begin_capture_inner(&self, mode: CaptureMode) -> Result<()> {
        self.mark_before_capture()?;
        self.state.capture.begin()?;
        if let Err(c) = ffi::stream_begin_capture(self.raw(), conv::map_capture_mode(mode)) {
            let _ = self.state.capture.end();
            return Err(self.handle.dev.shared.fail("cuStreamBeginCapture", c));
        }
        Ok(())
    }

    pub(super) fn capture_allowed(&self) -> Result<()> {
        match self.ownership {
            Ownership::Owned => Ok(()),
            Ownership::Default => Err(Error::Capture {
                op: "begin_capture",
                kind: CaptureErrorKind::NotCapturable,
            }),
            Ownership::Borrowed => Err(Error::NotOwned {
                kind: xstream_core::NotOwnedKind::Borrowed,
                op: "begin a capture",
            }),
        }
    }

    pub(super) fn end_capture_inner(&self) -> Result<CudaGraph> {
        if !self.state.capture.is_capturing() {
            return Err(Error::Capture {
                op: "end_capture",
                kind: CaptureErrorKind::NotCapturing,
            });
        }
        let (r, graph) = ffi::stream_end_capture(self.raw());
        let keep = std::mem::take(&mut *lock(&self.state.capture_keep));
        let cell = self.state.capture.end();
        let destroy = |g: ffi::CuGraph| {
            if !g.is_null() {
                let _ = ffi::graph_destroy(g);
            }
        };
        if let Err(c) = r {
            destroy(graph);
            let e = self.handle.dev.shared.fail("cuStreamEndCapture", c);
            return Err(match (e, cell) {
                // xstream saw the capture invalidated first: report that.
                (_, Err(e2)) => e2,
                (e, Ok(())) => e,
            });
        }
        if let Err(e) = cell {
            destroy(graph);
            return Err(e);
        }
        CudaGraph::instantiate(&self.handle.dev, graph, keep)
    }

    /// `cuStreamIsCapturing`, as the driver sees it.
    ///
    /// # Errors
    /// Vendor errors.
    pub fn native_capture_status(&self) -> Result<CaptureStatus> {
        self.enter()?;
        let s = self.check("cuStreamIsCapturing", ffi::stream_is_capturing(self.raw()))?;
        Ok(conv::capture_status_from_native(s))
    }

    /// `cuStreamGetCaptureInfo_v3` (the CUDA 13 form of `cuStreamGetCaptureInfo`).
    ///
    /// # Errors
    /// Vendor errors.
    pub fn capture_info(&self) -> Result<CaptureInfo> {
        self.enter()?;
        let i = self.check(
            "cuStreamGetCaptureInfo_v3",
            ffi::stream_get_capture_info(self.raw()),
        )?;
        Ok(CaptureInfo {
            status: conv::capture_status_from_native(i.status),
            id: i.id,
            dependencies: i.deps,
            graph: i.graph,
        })
    }

    /// `cuStreamUpdateCaptureDependencies_v2` (the CUDA 13 form; no edge data): adds to or
    /// replaces the capture's dependency set with nodes from [`CudaStream::capture_info`].
    ///
    /// # Errors
    /// [`CaptureErrorKind::NotCapturing`]; vendor errors.
    pub fn update_capture_dependencies(
        &self,
        nodes: &[CuGraphNode],
        how: DependencyUpdate,
    ) -> Result<()> {
        self.enter()?;
        if !self.state.capture.is_capturing() {
            return Err(Error::Capture {
                op: "update_capture_dependencies",
                kind: CaptureErrorKind::NotCapturing,
            });
        }
        let flags = match how {
            DependencyUpdate::Add => 0x0,
            DependencyUpdate::Set => 0x1,
        };
        self.check(
            "cuStreamUpdateCaptureDependencies_v2",
            ffi::stream_update_capture_dependencies(self.raw(), nodes, flags),
        )
    }

    /// `cuStreamBeginCaptureToGraph`: captures into a new, empty graph made with
    /// `cuGraphCreate` (no initial dependencies). End it with [`Stream::end_capture`](xstream_core::Stream::end_capture).
    ///
    /// # Errors
    /// As [`Stream::begin_capture`](xstream_core::Stream::begin_capture).
    pub fn begin_capture_to_new_graph(&self, mode: CaptureMode) -> Result<()> {
        self.enter()?;
        self.capture_allowed()?;
        self.mark_before_capture()?;
        let g = self.check("cuGraphCreate", ffi::graph_create())?;
        self.state.capture.begin()?;
        if let Err(c) =
            ffi::stream_begin_capture_to_graph(self.raw(), g, conv::map_capture_mode(mode))
        {
            let _ = self.state.capture.end();
            let _ = ffi::graph_destroy(g);
            return Err(self
                .handle
                .dev
                .shared
                .fail("cuStreamBeginCaptureToGraph", c));
        }
        Ok(())
    }
}

/// `cuThreadExchangeStreamCaptureMode`: sets the calling thread's capture interaction mode
/// and returns the previous one.
///
/// # Errors
/// Vendor errors; [`Error::NotAvailable`] when CUDA is not usable here.
pub fn exchange_thread_capture_mode(mode: CaptureMode) -> Result<CaptureMode> {
    xstream_core::ensure_not_in_callback()?;
    crate::availability_checked()?;
    let old = ffi::exchange_capture_mode(conv::map_capture_mode(mode))
        .map_err(|c| error::map("cuThreadExchangeStreamCaptureMode", c))?;
    Ok(conv::capture_mode_from_native(old))
}
