//! Page-locked host memory on CUDA: `cuMemHostAlloc` with the portable flags translated
//! through [`CUDA_PINNED_FLAGS`], and `cuMemHostRegister` of memory the caller already has
//! ([`CudaDevice::register_host`]).

use std::sync::Arc;

use xstream_core::{
    translate_pinned_flags, BackendKind, Error, PinnedAllocDesc, PinnedBuffer, PinnedFlagRow,
    PinnedFlags, Result,
};

use crate::ffi::PinnedAlloc;
use crate::{CudaBackend, CudaDevice};

/// `cuMemHostAlloc` flags: every portable flag is native.
pub const CUDA_PINNED_FLAGS: &[PinnedFlagRow] = &[
    PinnedFlagRow::native(PinnedFlags::PORTABLE, 0x1), // CU_MEMHOSTALLOC_PORTABLE
    PinnedFlagRow::native(PinnedFlags::DEVICE_MAPPED, 0x2), // CU_MEMHOSTALLOC_DEVICEMAP
    PinnedFlagRow::native(PinnedFlags::WRITE_COMBINED, 0x4), // CU_MEMHOSTALLOC_WRITECOMBINED
];

/// `cuMemHostRegister` flags: write-combining cannot be applied to existing memory.
pub const CUDA_PINNED_REGISTER_FLAGS: &[PinnedFlagRow] = &[
    PinnedFlagRow::native(PinnedFlags::PORTABLE, 0x1), // CU_MEMHOSTREGISTER_PORTABLE
    PinnedFlagRow::native(PinnedFlags::DEVICE_MAPPED, 0x2), // CU_MEMHOSTREGISTER_DEVICEMAP
    PinnedFlagRow::unsupported(
        PinnedFlags::WRITE_COMBINED,
        "cuMemHostRegister cannot make existing memory write-combined",
    ),
];

/// The former name of [`CUDA_PINNED_FLAGS`].
#[deprecated(since = "0.2.0", note = "renamed `CUDA_PINNED_FLAGS`")]
pub const CUDA_HOST_MEM_FLAGS: &[PinnedFlagRow] = CUDA_PINNED_FLAGS;
/// The former name of [`CUDA_PINNED_REGISTER_FLAGS`].
#[deprecated(since = "0.2.0", note = "renamed `CUDA_PINNED_REGISTER_FLAGS`")]
pub const CUDA_HOST_REGISTER_FLAGS: &[PinnedFlagRow] = CUDA_PINNED_REGISTER_FLAGS;

/// Names the size of a failed page-locked allocation in the vendor error's message (the code
/// stays as the driver returned it).
fn oom(mut e: Error, len: usize) -> Error {
    if e.is_out_of_memory() {
        if let Some(n) = e.native_mut() {
            n.message = Some(format!("{len} bytes of page-locked host memory"));
        }
    }
    e
}

pub(crate) fn alloc_pinned(
    dev: &CudaDevice,
    len: usize,
    desc: &PinnedAllocDesc,
) -> Result<PinnedBuffer<CudaBackend>> {
    let (bits, flags, report) = translate_pinned_flags(
        BackendKind::Cuda,
        CUDA_PINNED_FLAGS,
        desc.flags,
        desc.policy,
    )?;
    if len == 0 {
        return PinnedBuffer::empty(dev, flags, report);
    }
    let sh = &dev.shared;
    sh.enter()?;
    let mem = sh
        .check(
            "cuMemHostAlloc",
            PinnedAlloc::alloc(sh.raw_ctx, &sh.ctx, sh.info.ordinal, len, bits),
        )
        .map_err(|e| oom(e, len))?;
    Ok(PinnedBuffer::from_allocation(
        dev,
        Arc::new(mem),
        flags,
        report,
    ))
}

impl CudaDevice {
    /// Page-locks memory the caller already has (`cuMemHostRegister`) and wraps it as a
    /// [`PinnedBuffer`]; the memory is unregistered and freed when the buffer (and every copy
    /// that uses it) is gone.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty vector; flag errors per the desc's policy
    /// (`WRITE_COMBINED` has no registration flag); vendor errors.
    pub fn register_host(
        &self,
        data: Vec<u8>,
        desc: &PinnedAllocDesc,
    ) -> Result<PinnedBuffer<CudaBackend>> {
        if data.is_empty() {
            return Err(Error::invalid("cannot register an empty host range"));
        }
        let (bits, flags, report) = translate_pinned_flags(
            BackendKind::Cuda,
            CUDA_PINNED_REGISTER_FLAGS,
            desc.flags,
            desc.policy,
        )?;
        let sh = &self.shared;
        sh.enter()?;
        let mem = sh.check(
            "cuMemHostRegister",
            PinnedAlloc::register(sh.raw_ctx, &sh.ctx, sh.info.ordinal, data, bits),
        )?;
        Ok(PinnedBuffer::from_allocation(
            self,
            Arc::new(mem),
            flags,
            report,
        ))
    }

    /// `cuMemHostRegister` (no flags) of `len` bytes at `p`, borrowed for a registration
    /// scope (`DeviceImpl::register_host_range_impl`).
    ///
    /// # Safety
    /// As `DeviceImpl::register_host_range_impl`.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn register_range(
        &self,
        p: *mut u8,
        len: usize,
    ) -> Result<Arc<dyn xstream_core::PinnedAllocation>> {
        if p.is_null() || len == 0 {
            return Err(Error::invalid(
                "cannot register an empty or null host range",
            ));
        }
        let sh = &self.shared;
        sh.enter()?;
        // SAFETY: forwarded from the caller.
        let r = unsafe {
            PinnedAlloc::register_borrowed(sh.raw_ctx, &sh.ctx, sh.info.ordinal, p, len, 0)
        };
        let mem = sh.check("cuMemHostRegister", r)?;
        Ok(Arc::new(mem))
    }

    /// Sets the release threshold of the device's default memory pool, which
    /// [`Stream::alloc_async`](xstream_core::Stream::alloc_async) draws from: the bytes the
    /// pool keeps reserved across synchronizations instead of returning them to the system
    /// (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`; `u64::MAX` keeps everything).
    ///
    /// # Errors
    /// [`Error::Unsupported`] without memory pools; vendor errors.
    pub fn set_pool_release_threshold(&self, bytes: u64) -> Result<()> {
        crate::memory::set_pool_release_threshold(self, bytes)
    }
}
