//! Interprocess buffers on CUDA: [`IpcBuffer`] for [`CudaBuffer`] through `cuIpcGetMemHandle`
//! / `cuIpcOpenMemHandle` (lazy peer access) / `cuIpcCloseMemHandle`. The handle's payload
//! is the driver's 64-byte `CUipcMemHandle`; its header carries the range.
//!
//! Only buffers from [`Device::alloc`](xstream_core::Device::alloc) (`cuMemAlloc`, whose
//! pointer is the allocation's base) export; stream-ordered buffers, adopted cudarc slices
//! and imports are refused. An import is an allocation of this crate whose release is
//! `cuIpcCloseMemHandle` (under the buffer lifetime rule: after the last queued work using
//! it); the exporter's `cuMemFree` frees the memory. The driver refuses opening a handle in
//! the exporting process. The import's length is the handle's: the driver does not say how
//! long the exporter's allocation is, so the range is the exporter's word.
//!
//! [`IpcBuffer`]: xstream_core::IpcBuffer

use std::sync::Arc;

use xstream_core::{BackendKind, Error, IpcBufferImpl, IpcMemHandle, Result};

use super::{Alloc, CudaBuffer, Mem};
use crate::ffi::{self, IPC_EVENT_HANDLE_SIZE};
use crate::CudaDevice;

/// An opened allocation: `cuIpcCloseMemHandle` of its base on drop.
struct Imported {
    base: u64,
    /// Keeps the context alive until the close ran.
    dev: CudaDevice,
}

impl Drop for Imported {
    fn drop(&mut self) {
        let (ctx, base) = (self.dev.shared.raw_ctx, self.base);
        let close = move || {
            if ffi::bind(ctx).is_ok() {
                if let Err(c) = ffi::ipc_close_mem_handle(base) {
                    tracing::debug!(code = c, "cuIpcCloseMemHandle failed");
                }
            }
        };
        crate::stream::release_now_or_dispatched(&self.dev, close);
    }
}

impl IpcBufferImpl for CudaBuffer {
    fn export_ipc_range_impl(
        &self,
        offset: usize,
        len: usize,
        _pids: Option<&[u32]>,
    ) -> Result<IpcMemHandle> {
        let a =
            match &self.mem {
                Mem::Plain(a) if a.foreign.is_none() => a,
                Mem::Plain(_) => {
                    return Err(Error::invalid(
                        "an adopted cudarc slice or an imported buffer cannot be exported: \
                     export a buffer of Device::alloc",
                    ))
                }
                Mem::Ordered(_) => return Err(Error::invalid(
                    "a stream-ordered buffer cannot be exported (pool export is not supported): \
                     export a buffer of Device::alloc",
                )),
            };
        a.dev.shared.bind()?;
        let bytes = a
            .dev
            .shared
            .check("cuIpcGetMemHandle", ffi::ipc_get_mem_handle(a.ptr))?;
        IpcMemHandle::new(
            BackendKind::Cuda,
            a.dev.shared.info.ordinal,
            offset,
            len,
            &bytes,
        )
    }

    fn open_ipc_impl(device: &CudaDevice, handle: &IpcMemHandle) -> Result<Self> {
        let bytes: &[u8; IPC_EVENT_HANDLE_SIZE] = handle.payload().try_into().map_err(|_| {
            Error::invalid(format!(
                "a CUDA IPC memory handle carries {IPC_EVENT_HANDLE_SIZE} bytes, this one {}",
                handle.payload().len()
            ))
        })?;
        device.shared.bind()?;
        let base = device
            .shared
            .check("cuIpcOpenMemHandle", ffi::ipc_open_mem_handle(bytes))?;
        let ptr = base.checked_add(handle.offset() as u64).ok_or_else(|| {
            Error::invalid("the handle's offset overflows the device address space")
        })?;
        Ok(CudaBuffer {
            mem: Mem::Plain(Arc::new({
                let mut a = Alloc::new(device, ptr, handle.len());
                a.foreign = Some(Box::new(Imported {
                    base,
                    dev: device.clone(),
                }));
                a
            })),
        })
    }
}
