//! Interprocess events on CUDA: [`IpcEvent`] through `cuIpcGetEventHandle` /
//! `cuIpcOpenEventHandle`. The handle's payload is the driver's 64-byte `CUipcEventHandle`.
//!
//! Driver rules kept: only an event created with `CU_EVENT_INTERPROCESS |
//! CU_EVENT_DISABLE_TIMING` exports (the portable `INTERPROCESS` flag sets both); an opened
//! event is destroyed with `cuEventDestroy` like any other. xstream treats exported and opened
//! events as recorded (another process may record them), so queries always ask the driver.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use xstream_core::{
    BackendKind, Error, EventFlags, IpcEvent, IpcEventHandle, Result, TranslationPolicy,
};

use super::{EventHandle, RecordState};
use crate::conv::CUDA_FLAGS;
use crate::ffi::{self, IPC_EVENT_HANDLE_SIZE};
use crate::{CudaDevice, CudaEvent};

impl IpcEvent for CudaEvent {
    fn export_ipc(&self) -> Result<IpcEventHandle> {
        if !self.flags.contains(EventFlags::INTERPROCESS) {
            return Err(Error::invalid(
                "a CUDA event created without EventFlags::INTERPROCESS cannot be exported \
                 (cuIpcGetEventHandle needs CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING)",
            ));
        }
        self.dev.shared.enter()?;
        let bytes = self
            .dev
            .shared
            .check("cuIpcGetEventHandle", ffi::ipc_get_event_handle(self.raw()))?;
        // Another process may record it from now on: never answer from xstream's bookkeeping.
        self.recorded.store(true, Ordering::Release);
        IpcEventHandle::new(BackendKind::Cuda, self.dev.shared.info.ordinal, &bytes)
    }

    fn open_ipc(dev: &CudaDevice, handle: &IpcEventHandle) -> Result<Self> {
        handle.check_for(BackendKind::Cuda, dev.shared.info.ordinal)?;
        let bytes: &[u8; IPC_EVENT_HANDLE_SIZE] = handle.payload().try_into().map_err(|_| {
            Error::invalid(format!(
                "a CUDA IPC event handle carries {IPC_EVENT_HANDLE_SIZE} bytes, this one {}",
                handle.payload().len()
            ))
        })?;
        dev.shared.enter()?;
        let raw = dev
            .shared
            .check("cuIpcOpenEventHandle", ffi::ipc_open_event_handle(bytes))?;
        let t = CUDA_FLAGS.event_to_native(EventFlags::INTERPROCESS, TranslationPolicy::Strict)?;
        let (flags, _) = CUDA_FLAGS.event_from_native(t.native);
        Ok(Self {
            dev: dev.clone(),
            handle: Arc::new(EventHandle {
                raw,
                dev: dev.clone(),
                foreign: None,
            }),
            flags,
            report: t.report,
            recorded: AtomicBool::new(true),
            captured: AtomicBool::new(false),
            state: Mutex::new(RecordState::default()),
        })
    }
}
