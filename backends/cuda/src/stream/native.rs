//! CUDA-only extensions of [`CudaStream`]: cudarc interop, the native getters
//! (`cuStreamGet*`), external event waits, managed-memory attach and spin synchronize.

use std::sync::{Arc, OnceLock};

use xstream_core::{Error, Ownership, Result};

use super::{CudaStream, StreamHandle, UseMark};
use crate::conv;
use crate::ffi::{self, CuStream};
use crate::{CudaDevice, CudaEvent};

/// Where managed memory attached with [`CudaStream::attach_mem_async`] is accessible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemAttach {
    /// `CU_MEM_ATTACH_GLOBAL`: any stream of any device.
    Global,
    /// `CU_MEM_ATTACH_HOST`: the host only.
    Host,
    /// `CU_MEM_ATTACH_SINGLE`: this stream only.
    Single,
}

impl CudaStream {
    /// Wraps a cudarc stream without copying: xstream keeps the `Arc` (so the stream lives at
    /// least as long as this value) and never destroys it ([`Ownership::Borrowed`]).
    ///
    /// # Errors
    /// [`Error::WrongDevice`] when the stream belongs to another context; vendor errors.
    pub fn from_cudarc(dev: &CudaDevice, stream: Arc<cudarc::driver::CudaStream>) -> Result<Self> {
        let sh = &dev.shared;
        sh.enter()?;
        if stream.context().cu_ctx() != sh.raw_ctx.0 {
            return Err(Error::WrongDevice(
                "the cudarc stream belongs to another CUDA context".into(),
            ));
        }
        let raw = CuStream(stream.cu_stream());
        let (flags, priority) = Self::read_props(dev, raw)?;
        // Borrowed (never destroyed by xstream), and the cudarc side may have used it already.
        let handle = StreamHandle {
            native: raw,
            used: UseMark::used(),
            inner: OnceLock::from(stream),
            owned: false,
            dev: dev.clone(),
        };
        Self::build(
            handle,
            None,
            flags,
            crate::flag_memo::LazyCreationReport::ready(Self::plain_report(priority)),
            Ownership::Borrowed,
            false,
            false,
        )
    }

    /// The cudarc view of this stream, for cudarc APIs (no copy). Cloning the `Arc` is
    /// allowed; an owned xstream stream whose cudarc wrapper is still shared when it drops is
    /// not destroyed (leaked with a warning) rather than left dangling.
    pub fn cudarc_stream(&self) -> &Arc<cudarc::driver::CudaStream> {
        self.handle.inner.get_or_init(|| {
            ffi::cudarc_wrap_borrowed(&self.handle.dev.shared.ctx, self.handle.raw())
        })
    }

    /// The device.
    pub fn cuda_device(&self) -> &CudaDevice {
        &self.handle.dev
    }

    /// `cuStreamGetFlags`: the native flags (0 = `CU_STREAM_DEFAULT`, 1 = `NON_BLOCKING`).
    ///
    /// # Errors
    /// Vendor errors.
    pub fn native_flags(&self) -> Result<u32> {
        self.enter()?;
        self.check("cuStreamGetFlags", ffi::stream_get_flags(self.raw()))
    }

    /// `cuStreamGetPriority`: the effective (clamped) native priority.
    ///
    /// # Errors
    /// Vendor errors.
    pub fn native_priority(&self) -> Result<i32> {
        self.enter()?;
        self.check("cuStreamGetPriority", ffi::stream_get_priority(self.raw()))
    }

    /// `cuStreamGetId`, read now (for the per-thread stream this is the calling thread's).
    ///
    /// # Errors
    /// Vendor errors.
    pub fn native_id(&self) -> Result<u64> {
        self.enter()?;
        self.check("cuStreamGetId", ffi::stream_get_id(self.raw()))
    }

    /// `cuStreamGetDevice`: the device ordinal handle of the stream.
    ///
    /// # Errors
    /// Vendor errors.
    pub fn native_device(&self) -> Result<i32> {
        self.enter()?;
        self.check("cuStreamGetDevice", ffi::stream_get_device(self.raw()))
    }

    /// `cuStreamGetCtx`: the stream's context.
    ///
    /// # Errors
    /// Vendor errors.
    pub fn native_context(&self) -> Result<ffi::CuContext> {
        self.enter()?;
        self.check("cuStreamGetCtx", ffi::stream_get_ctx(self.raw()))
    }

    /// `cuStreamGetCtx_v2`: the stream's context and its green context address (`None` for
    /// a regular context).
    ///
    /// # Errors
    /// Vendor errors.
    pub fn native_context_v2(&self) -> Result<(ffi::CuContext, Option<usize>)> {
        self.enter()?;
        let (c, g) = self.check("cuStreamGetCtx_v2", ffi::stream_get_ctx_v2(self.raw()))?;
        Ok((c, (g != 0).then_some(g)))
    }

    /// `cuStreamWaitEvent(.., CU_EVENT_WAIT_EXTERNAL)`: during capture, waits on the event's
    /// record as an external dependency (an event-wait node) instead of a graph edge.
    ///
    /// # Errors
    /// Capture and vendor errors.
    pub fn wait_event_external(&self, event: &CudaEvent) -> Result<()> {
        self.enter()?;
        self.gate_enqueue("wait_event_external")?;
        self.check(
            "cuStreamWaitEvent",
            ffi::stream_wait_event(self.raw(), event.raw(), conv::CU_EVENT_WAIT_EXTERNAL),
        )
    }

    /// `cuStreamAttachMemAsync`: attaches managed memory to this stream (capability
    /// [`xstream_core::Capabilities::MANAGED_MEMORY`]).
    ///
    /// # Errors
    /// [`Error::Unsupported`]; bounds; vendor errors.
    pub fn attach_mem_async(&self, mem: &crate::CudaManagedBuffer, how: MemAttach) -> Result<()> {
        self.enter()?;
        if !self.handle.dev.shared.managed_memory {
            return Err(Error::unsupported(
                xstream_core::BackendKind::Cuda,
                "managed memory on this device",
            ));
        }
        self.gate_enqueue("attach_mem_async")?;
        let flags = match how {
            MemAttach::Global => 0x1,
            MemAttach::Host => 0x2,
            MemAttach::Single => 0x4,
        };
        // Length 0 means the whole allocation.
        self.check(
            "cuStreamAttachMemAsync",
            ffi::stream_attach_mem_async(self.raw(), mem.ptr(), 0, flags),
        )
    }

    /// Synchronizes by spin-polling `cuStreamQuery` (what `FAST_SYNC` streams do): ~2 µs
    /// wake-up, one busy core (driver behaviour in docs/semantics.md).
    ///
    /// # Errors
    /// As [`Stream::synchronize`](xstream_core::Stream::synchronize).
    pub fn synchronize_spin(&self) -> Result<()> {
        self.enter()?;
        if self.state.persistent {
            return self.state.panics.take();
        }
        self.gate("synchronize")?;
        let marks = self.wait_marks();
        self.spin_until_idle()?;
        self.release_up_to(marks);
        self.state.panics.take()
    }
}
