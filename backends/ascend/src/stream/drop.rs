//! Releasing an [`AscendStream`]: dropping never blocks; the last handle of a native stream
//! hands it to the reaper thread (synchronize, unsubscribe, unregister the allocator,
//! destroy, then free the orphaned host memory).

use std::sync::atomic::Ordering;

use super::StreamState;
use crate::callback::{self, reap};
use crate::device::AscendDevice;
use crate::result;

impl Drop for StreamState {
    fn drop(&mut self) {
        if let Some((ordinal, native, id)) = self.forget_id.take() {
            super::create::forget_id(ordinal, native, id);
        }
        let Some(device) = self.device.take() else {
            return;
        };
        tracing::debug!(stream = ?self.raw, owned = self.owned, "acl stream released to the reaper");
        if self.gone.load(Ordering::Acquire) {
            return;
        }
        let raw = self.raw;
        let owned = self.owned;
        let sub = self.take_subscription();
        let alloc = self
            .alloc
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let capturing = self.capture.is_capturing();
        let orphans = std::mem::take(self.orphans.get_mut().unwrap_or_else(|e| e.into_inner()));
        let counter = self
            .random_counter
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        reap(Box::new(move || {
            let d = &device.inner;
            // One failed call here would leak the stream for good (found by the fault sweep,
            // tests/tests/fault_sweep.rs): bind again from scratch before giving up.
            if d.bind().is_err() {
                AscendDevice::invalidate_thread_binding();
                if d.bind().is_err() {
                    // The stream may still run copies into the orphaned memory: never free it.
                    std::mem::forget(orphans);
                    return;
                }
            }
            if capturing && owned {
                let (_, m) = result::model::capture_end(d.t, raw);
                if !m.0.is_null() {
                    let _ = result::model::destroy(d.t, m);
                }
            }
            let _ = result::stream::synchronize(d.t, raw);
            if let Some(tid) = sub {
                let _ = result::callback::unsubscribe(d.t, tid, raw);
            }
            if let Some((obj, _a)) = alloc {
                let _ = result::allocator::unregister(d.t, raw);
                callback::alloc_obj_free(obj);
            }
            if owned && result::stream::destroy(d.t, raw).is_err() {
                // Retry once (transient failure), then force (leaks nothing either way).
                if result::stream::destroy(d.t, raw).is_err() {
                    let _ = result::stream::destroy_force(d.t, raw);
                }
            }
            // The stream is synchronized and destroyed: no copy can touch these any more.
            drop(orphans);
            // Nor any random-number task this block: freed here, without the device-wide
            // wait a dropped buffer would take.
            if let Some(c) = counter {
                c.inner.leaked.store(true, Ordering::Release);
                let _ = result::memory::free(d.t, c.inner.ptr);
            }
        }));
    }
}
