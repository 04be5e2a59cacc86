//! Creating a [`CudaStream`]: owned streams (`cuStreamCreate`,
//! `cuStreamCreateWithPriority`), the special default handles (`CU_STREAM_LEGACY`,
//! `CU_STREAM_PER_THREAD`) and the constructor every path shares.

use std::sync::{Arc, OnceLock};

use xstream_core::{
    CaptureMode, CreationReport, FlagReport, Ownership, Priority, PriorityOutcome, Result,
    StreamDesc, StreamFlags,
};

use super::{CudaStream, LazyState, StreamHandle};
use crate::conv::CUDA_FLAGS;
use crate::ffi::{self, CuStream};
use crate::flag_memo::{self, LazyCreationReport};
use crate::CudaDevice;

impl CudaStream {
    #[allow(clippy::too_many_arguments)] // private constructor; every field is distinct
    pub(super) fn build(
        handle: StreamHandle,
        name: Option<String>,
        flags: StreamFlags,
        report: LazyCreationReport,
        ownership: Ownership,
        persistent: bool,
        fast_sync: bool,
    ) -> Result<Self> {
        let handle = Arc::new(handle);
        let state = LazyState::new(persistent, fast_sync, report.priority().native);
        Ok(Self {
            native: handle.native,
            ctx: handle.dev.shared.raw_ctx,
            marked: std::sync::atomic::AtomicBool::new(false),
            handle,
            state,
            id: OnceLock::new(),
            name,
            flags,
            report,
            ownership,
        })
    }

    pub(crate) fn create(dev: &CudaDevice, desc: &StreamDesc) -> Result<Self> {
        let sh = &dev.shared;
        sh.bind()?;
        // The native bits and flags, remembered per request; the flag report is made when
        // first read (`flag_memo`).
        let t = flag_memo::stream_bits(desc.flags, desc.policy)?;
        let mut outcome = sh.info.priority_range.resolve(desc.priority, desc.policy)?;
        let raw = if desc.priority == Priority::Normal {
            sh.check("cuStreamCreate", ffi::stream_create(t.native))?
        } else {
            sh.check(
                "cuStreamCreateWithPriority",
                ffi::stream_create_with_priority(t.native, outcome.native),
            )?
        };
        let handle = StreamHandle::new(raw, true, dev.clone());
        // No read-back calls on this path: the driver clamps a priority into the range that
        // `resolve` already clamped to (driver behaviour in docs/semantics.md), and `cuStreamGetFlags` returns exactly
        // the flags passed (row 2). `native_priority()` / `native_flags()` read them back on
        // demand, and the GPU tests check that both agree with these values.
        if outcome.clamped_from.is_none() && !sh.info.priority_range.contains(outcome.native) {
            outcome.clamped_from = Some(outcome.native);
            outcome.native = sh.info.priority_range.clamp(outcome.native);
        }
        let flags = t.effective;
        let persistent = t.emulated.contains(StreamFlags::PERSISTENT);
        let s = Self::build(
            handle,
            desc.name.clone(),
            flags,
            LazyCreationReport::stream(desc.flags, desc.policy, outcome),
            Ownership::Owned,
            persistent,
            t.emulated.contains(StreamFlags::FAST_SYNC),
        )?;
        if persistent {
            s.begin_capture_inner(CaptureMode::Relaxed)?;
        }
        tracing::debug!(stream = ?raw, name = s.name.as_deref(), flags = ?s.flags, priority = s.report.priority().native, "cuda stream created");
        Ok(s)
    }

    /// A legacy default (`CU_STREAM_LEGACY`) or per-thread (`CU_STREAM_PER_THREAD`) handle.
    pub(crate) fn special(dev: &CudaDevice, raw: CuStream) -> Result<Self> {
        let (flags, priority) = Self::read_props(dev, raw)?;
        let handle = StreamHandle::new(raw, false, dev.clone());
        let s = Self::build(
            handle,
            Some(
                if raw == CuStream::LEGACY {
                    "legacy-default"
                } else {
                    "per-thread-default"
                }
                .into(),
            ),
            flags,
            LazyCreationReport::ready(Self::plain_report(priority)),
            Ownership::Default,
            false,
            false,
        )?;
        // A special handle means "of the current context": read its id now, while the
        // context is bound, rather than lazily from wherever `id()` is first called.
        let _ = xstream_core::Stream::id(&s);
        Ok(s)
    }

    pub(super) fn plain_report(priority: i32) -> CreationReport {
        CreationReport {
            flags: FlagReport::default(),
            priority: PriorityOutcome {
                requested: Priority::Native(priority),
                native: priority,
                clamped_from: None,
                collapsed_into: None,
            },
        }
    }

    pub(super) fn read_props(dev: &CudaDevice, raw: CuStream) -> Result<(StreamFlags, i32)> {
        let sh = &dev.shared;
        let nf = sh.check("cuStreamGetFlags", ffi::stream_get_flags(raw))?;
        let p = sh.check("cuStreamGetPriority", ffi::stream_get_priority(raw))?;
        Ok((CUDA_FLAGS.stream_from_native(nf).0, p))
    }
}
