//! The context's internal pool of ordering events (`CU_EVENT_DISABLE_TIMING`), used by
//! [`Stream::wait_stream`](xstream_core::Stream::wait_stream) and by the stream-ordered free of a buffer
//! (one record on each stream that used it, one wait on the freeing stream).
//!
//! An event goes back to the pool right after the last `cuStreamWaitEvent` on it: the wait
//! takes the record current at call time (driver behaviour in docs/semantics.md; the
//! conformance check `wait_takes_snapshot`), so re-recording it for the next user does not move
//! the waits already enqueued. At most [`CAPACITY`] events are kept; more are destroyed. The
//! pool is destroyed with the device's shared state.
//!
//! Why not core's [`EventPool`](xstream_core::EventPool) of `CudaEvent`s: this pool lives in
//! the context's `Shared`, and every `CudaEvent` holds a `CudaDevice` (an `Arc` of that
//! `Shared`), so pooled `CudaEvent`s would keep `Shared` alive for ever (a cycle) and add a
//! device reference and a record-state lock per event. Its
//! users are internal (joins, stream-ordered frees, also from drops and the dispatcher thread,
//! interprocess relays) with the context already bound, and `order_after` records one event on
//! several streams in a row: a bare `CUevent` under the context's lifetime is all they need,
//! without the checked layer's event creation (flag translation, report) and record
//! bookkeeping. Core's pool serves users' generic code over any backend.

use std::sync::Mutex;

use xstream_core::Result;

use crate::device::Shared;
use crate::ffi::{self, CuEvent, CuStream};

/// Events kept at most per context.
pub(crate) const CAPACITY: usize = 64;

/// `CU_EVENT_DISABLE_TIMING`.
const DISABLE_TIMING: u32 = 0x2;

/// A context's pooled events (see the module docs).
#[derive(Default)]
pub(crate) struct RawEventPool {
    free: Mutex<Vec<CuEvent>>,
}

impl RawEventPool {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<CuEvent>> {
        xstream_core::sync::lock(&self.free)
    }

    /// A pooled event, or a new one (`cuEventCreate`). The context must be bound.
    pub(crate) fn get(&self, sh: &Shared) -> Result<CuEvent> {
        if let Some(e) = self.lock().pop() {
            return Ok(e);
        }
        sh.check("cuEventCreate", ffi::event_create(DISABLE_TIMING))
    }

    /// Gives `e` back (destroyed when the pool is full). The context must be bound.
    pub(crate) fn put(&self, e: CuEvent) {
        let mut g = self.lock();
        if g.len() < CAPACITY {
            g.push(e);
            return;
        }
        drop(g);
        let _ = ffi::event_destroy(e);
    }

    /// Makes `waiter` wait for the work enqueued on each of `producers` so far: one pooled
    /// event recorded on each producer in turn and waited for on `waiter` (a wait takes its
    /// snapshot, so one event serves them all), then given back. No host wait.
    pub(crate) fn order_after(
        &self,
        sh: &Shared,
        waiter: CuStream,
        producers: impl IntoIterator<Item = CuStream>,
    ) -> Result<()> {
        let mut producers = producers.into_iter().filter(|&p| p != waiter).peekable();
        if producers.peek().is_none() {
            return Ok(());
        }
        let ev = self.get(sh)?;
        let mut r = Ok(());
        for p in producers {
            r = sh
                .check("cuEventRecord", ffi::event_record(ev, p))
                .and_then(|()| {
                    sh.check("cuStreamWaitEvent", ffi::stream_wait_event(waiter, ev, 0))
                });
            if r.is_err() {
                break;
            }
        }
        self.put(ev);
        r
    }

    /// Destroys every pooled event (the context is being torn down; it must be bound).
    /// Takes every pooled event (to destroy: the device state's teardown).
    pub(crate) fn take_all(&self) -> Vec<CuEvent> {
        std::mem::take(&mut *self.lock())
    }
}
