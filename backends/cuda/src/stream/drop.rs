//! Releasing a [`CudaStream`]: `cuStreamDestroy` of an owned handle (never blocking) and the
//! deferred release, behind the stream's work, of what that work still uses.

use std::sync::{Arc, Mutex};

use xstream_core::callback::{dispatch, in_callback, CallbackSlot, PanicSlot};

use super::{lock, CudaStream, StreamHandle};
use crate::device::track_pending;
use crate::ffi::{self, CuStream};
use crate::memory::Keep;
use crate::CudaDevice;

impl Drop for StreamHandle {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        if self.inner.get().is_some_and(|i| Arc::strong_count(i) > 1) {
            // Somebody still holds the cudarc wrapper handed out by `cudarc_stream()`: never
            // destroy a handle that is still reachable. The stream is leaked (documented).
            tracing::warn!(stream = ?self.raw, "cudarc wrapper still shared; CUstream not destroyed");
            return;
        }
        let (raw, dev) = (self.raw, self.dev.clone());
        let destroy = move || {
            ffi::ensure_relaxed_capture_mode();
            if ffi::bind(dev.shared.raw_ctx).is_ok() {
                // Non-blocking: the driver releases the stream after its work (row 8).
                if let Err(c) = ffi::stream_destroy(raw) {
                    tracing::debug!(code = c, "cuStreamDestroy failed");
                }
            }
        };
        if in_callback() {
            dispatch(Box::new(destroy));
        } else {
            // On the caller's thread: do not switch its capture mode.
            if ffi::bind(self.dev.shared.raw_ctx).is_ok() {
                if let Err(c) = ffi::stream_destroy(self.raw) {
                    tracing::debug!(code = c, "cuStreamDestroy failed");
                }
            }
        }
    }
}

/// Hands `v` to a host function behind the stream's current work; the host function moves it
/// to the dispatcher thread, which drops it (freeing device memory needs a driver call, which
/// is not permitted inside a host function). Returns `v` back when enqueueing failed.
pub(super) fn release_after(
    dev: &CudaDevice,
    raw: CuStream,
    v: Vec<Keep>,
) -> std::result::Result<(), Vec<Keep>> {
    if dev.shared.sticky_error().is_some() {
        // Nothing runs any more on a poisoned context.
        drop(v);
        return Ok(());
    }
    let holder = Arc::new(Mutex::new(Some(v)));
    let h2 = Arc::clone(&holder);
    let slot = CallbackSlot::new(
        Box::new(move |_r| {
            if let Some(v) = lock(&h2).take() {
                dispatch(Box::new(move || {
                    ffi::ensure_relaxed_capture_mode();
                    drop(v);
                }));
            }
        }),
        Arc::new(PanicSlot::default()),
    );
    match ffi::launch_host_func(raw, Arc::clone(&slot)) {
        Ok(()) => {
            track_pending(&dev.shared, &slot);
            Ok(())
        }
        Err(_) => Err(lock(&holder).take().unwrap_or_default()),
    }
}

impl Drop for CudaStream {
    fn drop(&mut self) {
        tracing::debug!(stream = ?self.handle.raw, name = self.name.as_deref(), ownership = ?self.ownership, "cuda stream dropped");
        let dev = self.dev.clone();
        let handle = Arc::clone(&self.handle);
        let state = Arc::clone(&self.state);
        let release = move || {
            if ffi::bind(dev.shared.raw_ctx).is_err() {
                return;
            }
            if state.capture.is_capturing() {
                let (_, g) = ffi::stream_end_capture(handle.raw);
                if !g.is_null() {
                    let _ = ffi::graph_destroy(g);
                }
                let _ = state.capture.end();
                lock(&state.capture_keep).clear();
            }
            let mut v = std::mem::take(&mut *lock(&state.keep));
            v.extend(state.modules.take());
            if !v.is_empty() {
                if let Err(v) = release_after(&dev, handle.raw, v) {
                    // Work may still use these buffers: never free them early.
                    tracing::warn!(n = v.len(), "could not defer buffer release; leaking");
                    std::mem::forget(v);
                }
            }
            drop(handle);
        };
        if in_callback() {
            dispatch(Box::new(move || {
                ffi::ensure_relaxed_capture_mode();
                release();
            }));
        } else {
            release();
        }
    }
}
