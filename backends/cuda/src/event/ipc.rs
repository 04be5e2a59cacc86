//! Interprocess events on CUDA: [`IpcEvent`] through `cuIpcGetEventHandle` /
//! `cuIpcOpenEventHandle`. The handle's payload is the driver's 64-byte `CUipcEventHandle`.
//!
//! Driver rules kept: only an event created with `CU_EVENT_INTERPROCESS |
//! CU_EVENT_DISABLE_TIMING` exports (the portable `INTERPROCESS` flag sets both); an opened
//! event is destroyed with `cuEventDestroy` like any other. xstream treats exported and opened
//! events as recorded (another process may record them), so queries always ask the driver.
//!
//! **A wait from another device goes through a bridge.** `cuStreamWaitEvent` of a stream of
//! one device on an interprocess event opened in another device's context killed the process
//! with SIGSEGV inside the driver (a read at address 0x68; driver 580.159.04, 2 × H100, the
//! raw driver and xstream alike: `scripts/gpu/issue29-diag.sh`, docs/gpu-runs/
//! 2026-11-27-2xh100-run19a/). So [`wait_across`] makes that wait in the event's own context,
//! on a stream kept for the event (its bridge), records a pooled ordinary event behind it
//! there, and makes the waiting stream wait for that one: a same-context wait on the
//! interprocess event and a cross-device wait on an ordinary event, two waits the driver runs
//! (the one-GPU `gpu_ipc` configuration and the `cross_device_wait_orders_work` test). Each
//! event has its own bridge, so waits on different events never queue behind each other.
//!
//! [`IpcEvent`]: xstream_core::IpcEvent

use std::sync::atomic::Ordering;

use xstream_core::{
    BackendKind, Error, EventFlags, IpcEventHandle, IpcEventImpl, Result, TranslationPolicy,
};

use crate::conv::CUDA_FLAGS;
use crate::ffi::{self, IPC_EVENT_HANDLE_SIZE};
use crate::flag_memo::LazyReport;
use crate::{CudaDevice, CudaEvent, CudaStream};

/// Whether a wait of a stream of context `waiter` on `event` must go through [`wait_across`]:
/// an interprocess event (exported or opened) of another context.
pub(crate) fn needs_bridge(event: &CudaEvent, waiter: ffi::CuContext) -> bool {
    event.flags.contains(EventFlags::INTERPROCESS) && event.dev.shared.raw_ctx != waiter
}

/// Makes `stream` wait for the record of `event` current now, through the event's bridge
/// stream in the event's context (module docs). On success the stream's context is bound.
pub(crate) fn wait_across(stream: &CudaStream, event: &CudaEvent) -> Result<()> {
    let esh = &event.dev.shared;
    let ssh = &stream.cuda_device().shared;
    if stream.state.capture.is_capturing() {
        return Err(Error::unsupported(
            BackendKind::Cuda,
            "a wait on an interprocess event of another device during a capture (the wait \
             goes through a stream of the event's device, outside the capture)",
        ));
    }
    esh.check("cuCtxSetCurrent", ffi::bind(esh.raw_ctx))?;
    let bridge = match event.bridge.get() {
        Some(&s) => s,
        None => {
            let s = esh.check(
                "cuStreamCreate",
                ffi::stream_create(crate::conv::CU_STREAM_NON_BLOCKING),
            )?;
            match event.bridge.set(s) {
                Ok(()) => s,
                Err(s) => {
                    // Another thread made one first: keep that one.
                    let _ = ffi::stream_destroy(s);
                    *event.bridge.get().unwrap_or(&s)
                }
            }
        }
    };
    // The same-context wait snapshots the interprocess event's current record; the pooled
    // event recorded behind it carries that point to the other device.
    esh.check(
        "cuStreamWaitEvent",
        ffi::stream_wait_event(bridge, event.raw(), 0),
    )?;
    let relay = esh.events.get(esh)?;
    let recorded = esh.check("cuEventRecord", ffi::event_record(relay, bridge));
    let waited = recorded.and_then(|()| {
        ssh.check("cuCtxSetCurrent", ffi::bind(ssh.raw_ctx))?;
        ssh.check(
            "cuStreamWaitEvent",
            ffi::stream_wait_event(xstream_core::Stream::as_raw(stream), relay, 0),
        )
    });
    // The wait took its snapshot: the relay may go back (the pool's rule).
    if ffi::bind(esh.raw_ctx).is_ok() {
        esh.events.put(relay);
    }
    ssh.check("cuCtxSetCurrent", ffi::bind(ssh.raw_ctx))?;
    waited
}

impl IpcEventImpl for CudaEvent {
    fn export_ipc_impl(&self) -> Result<IpcEventHandle> {
        self.dev.shared.bind()?;
        let bytes = self
            .dev
            .shared
            .check("cuIpcGetEventHandle", ffi::ipc_get_event_handle(self.raw()))?;
        // Another process may record it from now on: never answer from xstream's bookkeeping.
        self.recorded.store(true, Ordering::Release);
        IpcEventHandle::new(BackendKind::Cuda, self.dev.shared.info.ordinal, &bytes)
    }

    fn open_ipc_impl(dev: &CudaDevice, handle: &IpcEventHandle) -> Result<Self> {
        let bytes: &[u8; IPC_EVENT_HANDLE_SIZE] = handle.payload().try_into().map_err(|_| {
            Error::invalid(format!(
                "a CUDA IPC event handle carries {IPC_EVENT_HANDLE_SIZE} bytes, this one {}",
                handle.payload().len()
            ))
        })?;
        dev.shared.bind()?;
        let raw = dev
            .shared
            .check("cuIpcOpenEventHandle", ffi::ipc_open_event_handle(bytes))?;
        let t = CUDA_FLAGS.event_to_native(EventFlags::INTERPROCESS, TranslationPolicy::Strict)?;
        let (flags, _) = CUDA_FLAGS.event_from_native(t.native);
        let ev = Self::plain(raw, dev, flags, LazyReport::ready(t.report));
        ev.recorded.store(true, Ordering::Release);
        Ok(ev)
    }
}
