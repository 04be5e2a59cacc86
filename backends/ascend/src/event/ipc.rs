//! Interprocess events on Ascend: [`IpcEvent`] through `aclrtIpcGetEventHandle` /
//! `aclrtIpcOpenEventHandle` (optional symbols; prototypes from the public
//! `include/external/acl/acl_rt.h`). The handle's payload is the 64-byte
//! `aclrtIpcEventHandle` (`ACL_IPC_EVENT_HANDLE_SIZE`). Only an event created with
//! `INTERPROCESS` (`aclrtCreateEventExWithFlag(ACL_EVENT_IPC)`, on a device with the
//! `INTERPROCESS_EVENTS` capability) exports; an opened event is destroyed with
//! `aclrtDestroyEvent` like any other. Exported and opened events count as recorded (another
//! process may record them), so queries always ask the runtime.
//!
//! [`IpcEvent`]: xstream_core::IpcEvent

use std::sync::atomic::Ordering;

use xstream_core::{
    BackendKind, Error, EventFlags, IpcEventHandle, IpcEventImpl, Result, TranslationPolicy,
};

use super::{AscendEvent, EventInner};
use crate::conv::ACL_FLAGS;
use crate::device::AscendDevice;
use crate::result;
use crate::sys::ACL_IPC_EVENT_HANDLE_SIZE;

impl IpcEventImpl for AscendEvent {
    fn export_ipc_impl(&self) -> Result<IpcEventHandle> {
        let d = &self.inner.device.inner;
        d.bind()?;
        let bytes = result::event::ipc_get_handle(d.t, self.inner.raw)?;
        self.inner.recorded.store(true, Ordering::Release);
        IpcEventHandle::new(BackendKind::Ascend, d.info.ordinal, &bytes)
    }

    fn open_ipc_impl(device: &AscendDevice, handle: &IpcEventHandle) -> Result<Self> {
        let d = &device.inner;
        let bytes: &[u8; ACL_IPC_EVENT_HANDLE_SIZE] =
            handle.payload().try_into().map_err(|_| {
                Error::invalid(format!(
                    "an Ascend IPC event handle carries {ACL_IPC_EVENT_HANDLE_SIZE} bytes, this one {}",
                    handle.payload().len()
                ))
            })?;
        d.bind()?;
        let raw = result::event::ipc_open_handle(d.t, bytes)?;
        let tr = ACL_FLAGS.event_to_native(EventFlags::INTERPROCESS, TranslationPolicy::Strict)?;
        Ok(Self {
            inner: EventInner::new(device, raw, true, true),
            flags: tr.effective,
            native: tr.native,
            report: tr.report,
        })
    }
}
