//! Host callbacks on a [`CudaStream`]: `cuLaunchHostFunc` slots (tracked by the device for
//! the fault path) and the status-carrying `cuStreamAddCallback`.

use std::sync::Arc;

use xstream_core::callback::{BoxedCallback, CallbackSlot};
use xstream_core::Result;

use super::CudaStream;
use crate::device::track_pending;
use crate::error;
use crate::ffi;

impl CudaStream {
    /// Enqueues a host function firing a slot holding `f` (no capture gate: callers gate).
    /// The slot comes from the device's pending list: a fired one reused when the list has
    /// one (no allocation), tracked once the driver accepted it.
    pub(crate) fn enqueue_slot(&self, f: BoxedCallback) -> Result<()> {
        let shared = &self.handle.dev.shared;
        if let Some(e) = shared.sticky_error() {
            return Err(e);
        }
        let slot = shared.pending.slot(f, self.state.panics.get());
        self.check(
            "cuLaunchHostFunc",
            ffi::launch_host_func(self.raw(), Arc::clone(&slot)),
        )?;
        track_pending(shared, &slot);
        Ok(())
    }

    /// `cuStreamAddCallback`: a status-carrying callback. Unlike host functions, CUDA runs it
    /// exactly once **even after a device fault**, with the error (driver behaviour in docs/semantics.md): `f`
    /// gets `Ok(())` or the mapped error. It blocks later work on the stream while it runs;
    /// xstream calls inside return [`Error::NotPermitted`](xstream_core::Error::NotPermitted); a panic is caught and reported by
    /// the next `synchronize`. Not capturable: refused during capture (capture invalidated).
    ///
    /// # Errors
    /// Capture errors; vendor errors (then `f` is dropped without being called).
    pub fn add_status_callback<F>(&self, f: F) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
    {
        self.enter()?;
        self.gate("add_status_callback")?;
        let slot = CallbackSlot::new(Box::new(f), self.state.panics.slot());
        let s2 = Arc::clone(&slot);
        let shared = Arc::clone(&self.handle.dev.shared);
        let r = ffi::stream_add_callback(
            self.raw(),
            Box::new(move |code| {
                let status = if code == 0 {
                    Ok(())
                } else {
                    let e = error::map("cuStreamAddCallback", code);
                    if e.is_sticky() {
                        // No driver calls here: records the error, fails the other pending
                        // callbacks.
                        shared.poison(&e);
                    }
                    Err(e)
                };
                s2.fire(status);
                // This runs on the driver's callback thread, where driver calls are not
                // permitted; if this was the last reference to the device's state (the device
                // and its streams already dropped), its teardown calls the driver (sentinel
                // stream, pooled events, modules, the context's release): on the dispatcher.
                crate::stream::dispatch_driver_job(move || drop(shared));
            }),
        );
        self.check("cuStreamAddCallback", r)?;
        track_pending(&self.handle.dev.shared, &slot);
        Ok(())
    }
}
