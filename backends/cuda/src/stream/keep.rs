//! The keep-alive list of a [`CudaStream`]: what queued work uses (device buffers of launches
//! and copies, page-locked host spans of copies, launched graphs' lists) stays alive until
//! that work completed.
//!
//! **Marks.** Every enqueue that must keep something pushes a [`Keep`] after enqueueing its
//! work; entries are numbered in push order. A wait takes the number past the newest entry
//! ([`CudaStream::keep_mark`]) before it waits; once it observed the stream's completion
//! (synchronize, an idle query, a drop that finds the stream idle) every entry numbered below
//! that mark is complete and is released ([`CudaStream::completed_up_to`]). Numbers, not list
//! lengths: an entry pushed after the mark by another thread (after a hand-over emptied the
//! list) is never taken for one the wait covered.
//!
//! **Hand-over behind an event.** Once the list holds [`keep_flush`] entries, the enqueuing
//! thread records a pooled event (`CU_EVENT_DISABLE_TIMING`, the context's
//! [`RawEventPool`](crate::event_pool::RawEventPool)) on the stream right after the work that
//! used them and parks the list with it as a pending batch. At each hand-over it first
//! queries the oldest pending batches' events (`cuEventQuery`, which never waits) and drops
//! those that completed, in order, stopping at the first that has not; their events go back
//! to the pool. Nothing runs on the stream for this: a host function (`cuLaunchHostFunc`,
//! the hand-over before this one) stalls the stream until a host thread ran it, which held
//! page-locked 4 KiB copies at 76–81% of raw's rate on an H100 and at 94–98% once the
//! hand-over was moved out of the batch (GPU run 26, docs/hot-paths-gpu.md). The queries and
//! the drops run with the thread's capture mode exchanged to RELAXED and back: from a thread
//! in GLOBAL mode a `cuEventQuery` (or the `cuMemFree` of a released buffer) would invalidate
//! another thread's GLOBAL capture (driver behaviour; xstream's own threads are RELAXED for
//! the same reason, `ffi::ensure_relaxed_capture_mode`). Should the switch fail, no query is
//! made (the batches wait for the next hand-over or a wait). Dropping a released batch runs the `cuMemFree` of a buffer whose last holder
//! it was on the enqueuing thread, as a synchronize would.
//!
//! **Fallback.** With [`PENDING_MAX`] batches still pending, when no event can be had or
//! recorded, or on a poisoned context, the batch goes to a host function behind the work
//! (`release_after` in `drop`, the earlier hand-over), which never loses an entry; if even
//! that cannot be enqueued the entries go back to the front of the list (numbered no lower
//! than they were, so no wait releases them early) and the next push tries again. A
//! `cuEventQuery` error other than not-ready counts as not complete: the batch stays until
//! a wait covers it or the stream drops (logged).
//!
//! **Waits and drop.** A wait's release also drops the pending batches its mark covers (after
//! a synchronize, all). A stream's drop takes the list and every pending batch together
//! ([`Keeps::take_all`]) and hands them to the reaper as it did the list alone (`drop`
//! module); their events go back to the pool there. Capture is untouched: during a capture
//! entries go to the capture's own list, which moves into the graph.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::drop::release_after;
use super::{lock, CudaStream};
use crate::event_pool::RawEventPool;
use crate::ffi::{self, CuEvent};
use crate::memory::Keep;
use crate::CudaBuffer;

/// Keep-alive entries at which a stream hands its list over, by default.
const KEEP_FLUSH: usize = 256;

/// Pending batches at most; a hand-over beyond them takes the host-function fallback. With
/// the default [`KEEP_FLUSH`] that is 2048 entries the host may run ahead of the device with
/// events alone, one pooled event per batch (8 streams this far ahead fill the context's
/// pool of 64). A queue this long means the device is far behind the host, where a host
/// function behind the work costs the stream nothing it is not already waiting for, and it
/// bounds how long completed work's memory waits for the next hand-over to be released.
pub(crate) const PENDING_MAX: usize = 8;

/// The hand-over threshold in use: [`KEEP_FLUSH`], or `XSTREAM_CUDA_KEEP_FLUSH` (entries, read
/// once per process, kept within 16 ..= 1 << 20; an unparsable value leaves the default). A
/// larger value makes fewer hand-overs (event records and queries) and holds the buffers of
/// completed work longer (until the stream's next synchronize or a later hand-over); a
/// diagnostic and tuning setting, see docs/hot-paths.md.
fn keep_flush() -> usize {
    static FLUSH: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *FLUSH.get_or_init(|| {
        std::env::var("XSTREAM_CUDA_KEEP_FLUSH")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .map_or(KEEP_FLUSH, |n| n.clamp(16, 1 << 20))
    })
}

/// A stream's keep-alive entries: the list being filled and the batches handed over behind
/// an event (module docs).
#[derive(Default)]
pub(crate) struct Keeps {
    list: Mutex<List>,
    /// The number past the newest entry (the mark a wait takes), readable without the lock.
    end: AtomicU64,
    /// `List::first`, readable without the lock.
    first: AtomicU64,
    /// Batches handed over behind an event, oldest first.
    pending: Mutex<VecDeque<Batch>>,
    /// `pending.len()`, readable without the lock.
    pending_len: AtomicUsize,
}

/// The entries not yet handed over.
#[derive(Default)]
struct List {
    v: Vec<Keep>,
    /// The number of `v[0]`: entries numbered below it were released or handed over.
    first: u64,
}

/// Entries handed over behind `event`.
struct Batch {
    event: CuEvent,
    /// The number past its newest entry.
    end: u64,
    keeps: Vec<Keep>,
}

impl Keeps {
    /// Whether any entry is held (listed or pending).
    pub(crate) fn held(&self) -> bool {
        self.end.load(Ordering::Acquire) != self.first.load(Ordering::Acquire)
            || self.pending_len.load(Ordering::Acquire) != 0
    }

    /// Batches pending behind an event.
    pub(crate) fn pending(&self) -> usize {
        self.pending_len.load(Ordering::Acquire)
    }

    /// Takes every entry, listed and pending, for release behind the stream's work (its
    /// drop); the pending batches' events go back to `events` (the context must be bound).
    pub(crate) fn take_all(&self, events: &RawEventPool) -> Vec<Keep> {
        let mut v = {
            let mut g = lock(&self.list);
            g.first += g.v.len() as u64;
            self.first.store(g.first, Ordering::Release);
            std::mem::take(&mut g.v)
        };
        let batches = std::mem::take(&mut *lock(&self.pending));
        self.pending_len.store(0, Ordering::Release);
        for b in batches {
            // The record may still be pending: a pooled event is recorded afresh before use.
            events.put(b.event);
            v.extend(b.keeps);
        }
        v
    }

    /// Pops the oldest pending batch if `done` says it may be released.
    fn pop_if(&self, done: impl FnOnce(&Batch) -> bool) -> Option<Batch> {
        if self.pending_len.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut q = lock(&self.pending);
        if !done(q.front()?) {
            return None;
        }
        let b = q.pop_front();
        self.pending_len.store(q.len(), Ordering::Release);
        b
    }
}

impl CudaStream {
    pub(crate) fn keep(&self, k: Keep) {
        self.keep_all([Some(k)]);
    }

    /// Keeps a device buffer (when it needs keeping, [`CudaBuffer::keep_for`]) and the
    /// page-locked host span of the same copy: both entries under one lock.
    pub(crate) fn keep_copy(&self, b: &CudaBuffer, span: xstream_core::PinnedSpan) {
        self.check_ordered_in_capture(b);
        self.keep_all([b.keep_for(&self.handle), Some(Keep::Host(span))]);
    }

    /// Keeps a buffer used by work just enqueued (see [`CudaBuffer::keep_for`]).
    pub(crate) fn keep_buf(&self, b: &CudaBuffer) {
        self.check_ordered_in_capture(b);
        if let Some(k) = b.keep_for(&self.handle) {
            self.keep(k);
        }
    }

    /// A stream-ordered buffer used in a capture invalidates it: a graph could replay after
    /// the stream-ordered free.
    fn check_ordered_in_capture(&self, b: &CudaBuffer) {
        if b.is_stream_ordered() && self.state.capture.is_capturing() {
            tracing::warn!("stream-ordered buffer used in a capture: capture invalidated");
            self.state.capture.invalidate();
        }
    }

    /// Pushes the entries given under one lock; hands the list over (module docs) once it
    /// holds [`keep_flush`] entries or more.
    fn keep_all<const N: usize>(&self, ks: [Option<Keep>; N]) {
        if self.state.capture.is_capturing() {
            lock(&self.state.capture_keep).extend(ks.into_iter().flatten());
            return;
        }
        let k = &self.state.keep;
        let batch = {
            let mut g = lock(&k.list);
            g.v.extend(ks.into_iter().flatten());
            // The list that stays is allocated at its full size once per hand-over: one
            // allocation per `KEEP_FLUSH` entries instead of the regrowth from empty (about
            // seven), which the bench counted as 0.043 allocations per launch with a buffer
            // argument.
            let flush = keep_flush();
            let batch = (g.v.len() >= flush).then(|| {
                let v = std::mem::replace(&mut g.v, Vec::with_capacity(flush + 1));
                g.first += v.len() as u64;
                self.state.keep.first.store(g.first, Ordering::Release);
                (v, g.first)
            });
            k.end.store(g.first + g.v.len() as u64, Ordering::Release);
            batch
        };
        if let Some((v, end)) = batch {
            self.hand_over(v, end);
        }
    }

    /// Releases the completed pending batches, then parks `v` (numbered below `end`) behind a
    /// new event, or takes the fallback (module docs).
    fn hand_over(&self, v: Vec<Keep>, end: u64) {
        self.release_finished();
        let Err(v) = self.park(v, end) else {
            return;
        };
        if let Err((v, _)) = release_after(&self.handle.dev, self.raw(), v) {
            // Back to the front, renumbered just below the list's first entry: at or above
            // their own numbers (the list's first only grows past `end`), so no wait
            // releases them before it covered them; the next push hands them over again.
            let k = &self.state.keep;
            let mut g = lock(&k.list);
            g.first -= v.len() as u64;
            k.first.store(g.first, Ordering::Release);
            g.v.splice(0..0, v);
        }
    }

    /// Drops the oldest pending batches whose event completed, in order, up to the first that
    /// has not; never waits. Under RELAXED capture mode (module docs).
    fn release_finished(&self) {
        if self.state.keep.pending() == 0 {
            return;
        }
        let Some(relaxed) = ffi::RelaxedCapture::enter() else {
            return;
        };
        let events = &self.handle.dev.shared.events;
        while let Some(b) = self.state.keep.pop_if(|b| self.event_done(b.event)) {
            events.put(b.event);
            drop(b.keeps);
        }
        drop(relaxed);
    }

    /// One `cuEventQuery` of a pending batch's event: complete or not (an error other than
    /// not-ready counts as not complete: the batch waits for a wait or the drop).
    fn event_done(&self, e: CuEvent) -> bool {
        match ffi::event_query(e) {
            Ok(()) => true,
            Err(ffi::NOT_READY) => false,
            Err(code) => {
                let err = self.handle.dev.shared.fail("cuEventQuery", code);
                tracing::warn!(error = %err, "a keep-alive batch's event could not be queried; its entries stay until the stream's next synchronize or drop");
                false
            }
        }
    }

    /// Parks `v` behind a pooled event recorded now, unless the fallback applies (module
    /// docs): then `v` comes back.
    fn park(&self, v: Vec<Keep>, end: u64) -> Result<(), Vec<Keep>> {
        let sh = &self.handle.dev.shared;
        if sh.sticky_error().is_some() {
            // `release_after` drops at once: nothing runs any more on a poisoned context.
            return Err(v);
        }
        let k = &self.state.keep;
        let mut q = lock(&k.pending);
        if q.len() >= PENDING_MAX {
            tracing::trace!(
                pending = q.len(),
                "keep-alive batches all pending: host-function hand-over"
            );
            return Err(v);
        }
        let ev = match sh.events.get(sh) {
            Ok(ev) => ev,
            Err(e) => {
                tracing::debug!(error = %e, "no event for the keep-alive hand-over: host function instead");
                return Err(v);
            }
        };
        if let Err(e) = sh.check("cuEventRecord", ffi::event_record(ev, self.raw())) {
            sh.events.put(ev);
            tracing::debug!(error = %e, "keep-alive event not recorded: host function instead");
            return Err(v);
        }
        if q.capacity() == 0 {
            q.reserve_exact(PENDING_MAX);
        }
        q.push_back(Batch {
            event: ev,
            end,
            keeps: v,
        });
        k.pending_len.store(q.len(), Ordering::Release);
        Ok(())
    }

    /// Releases every entry numbered below `mark` (its work completed): listed ones and
    /// pending batches, oldest first.
    pub(super) fn completed_up_to(&self, mark: u64) {
        let k = &self.state.keep;
        if mark <= k.first.load(Ordering::Acquire) && k.pending() == 0 {
            return;
        }
        let done: Vec<Keep> = {
            let mut g = lock(&k.list);
            let n = mark.saturating_sub(g.first).min(g.v.len() as u64) as usize;
            g.first += n as u64;
            k.first.store(g.first, Ordering::Release);
            g.v.drain(..n).collect()
        };
        drop(done);
        let events = &self.handle.dev.shared.events;
        while let Some(b) = k.pop_if(|b| b.end <= mark) {
            events.put(b.event);
            drop(b.keeps);
        }
    }

    /// The mark a wait takes before waiting (module docs; no lock).
    pub(super) fn keep_mark(&self) -> u64 {
        self.state.keep.end.load(Ordering::Acquire)
    }
}
