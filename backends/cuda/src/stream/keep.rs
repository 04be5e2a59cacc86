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
//! **Hand-over on a side stream.** Once the list holds [`keep_flush`] entries, the enqueuing
//! thread hands it over: it records a pooled event E (`CU_EVENT_DISABLE_TIMING`, the
//! context's [`RawEventPool`](crate::event_pool::RawEventPool)) on the stream right after the
//! work that used the entries, and on the stream's private **side stream** enqueues a wait
//! for E (`cuStreamWaitEvent`) and then the host function of [`release_after`], which moves
//! the list to the backend's reaper thread, where it is dropped. E goes back to the pool right
//! after the wait is enqueued: a wait takes the record current at call time, so re-recording
//! E for its next user moves no wait already enqueued (`event_pool` module docs). So:
//! - the stream itself runs nothing for the hand-over and never waits for the side stream. A
//!   host function on the stream itself (the hand-over before this one, now the fallback)
//!   stalls it until a host thread ran the function, which held page-locked 4 KiB copies at
//!   76–81% of raw's rate on an H100 and at 94–98% once the hand-over was moved out of the
//!   batch (GPU run 26, docs/hot-paths-gpu.md);
//! - the entries are released as soon as the device passed E, whether or not the stream is
//!   used again (nothing waits for a later call to look at them);
//! - the `cuMemFree` of a buffer whose last holder was the list runs on the reaper thread,
//!   never on the enqueuing thread: `cuMemFree` waits for the whole device (docs/semantics.md,
//!   "a blocked wait can stall calls that synchronize the whole device"), so a launch that
//!   triggers a hand-over never waits for other streams' work, nor for a stream held by a
//!   host callback or a value wait that the same thread would release later;
//! - the enqueuing thread makes no query, so its capture mode needs no exchange: what
//!   invalidates another thread's GLOBAL capture from any thread is queries, synchronizes and
//!   `cuMemAlloc` (checked against the project's CUDA driver facts sheet,
//!   `cuda-driver-semantics.md` row 9, "Other threads", measured on a GPU), and
//!   `cuEventRecord`, `cuStreamWaitEvent` and `cuLaunchHostFunc` on streams that are not
//!   capturing are not among those calls (the hand-over never runs on a capturing stream: its
//!   entries then go to the capture's own list). The side stream's `cuStreamCreate` (once per
//!   stream) was not measured there either way;
//! - a stream that never hands over has no side stream: it is created at its first hand-over
//!   (`CU_STREAM_NON_BLOCKING`, so it never waits for the legacy default stream) and
//!   destroyed when the stream is dropped, on the reaper with the stream's own teardown
//!   (`drop` module); `cuStreamDestroy` returns at once and the driver still runs the side
//!   stream's queued waits and host functions.
//!
//! **Fallback.** When the side stream cannot be created, no event can be had, or a record,
//! wait or host-function launch there fails, the list goes to a host function on the stream
//! itself, behind the work ([`release_after`], the earlier hand-over), which never loses an
//! entry nor frees under pending work; if even that cannot be enqueued the entries go back to
//! the front of the list (numbered no lower than they were, so no wait releases them early)
//! and the next push tries again. A later hand-over tries the side stream again.
//!
//! **Waits and drop.** A wait's release drops the listed entries its mark covers; batches
//! already handed over are the side stream's. A stream's drop takes the list
//! ([`Keeps::take_all`]) and hands it to the reaper (`drop` module), which also destroys the
//! side stream ([`Keeps::take_side`]). Capture is untouched: during a capture entries go to
//! the capture's own list, which moves into the graph.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::drop::release_after;
use super::{lock, CudaStream};
use crate::conv::CU_STREAM_NON_BLOCKING;
use crate::ffi::{self, CuStream};
use crate::memory::Keep;
use crate::CudaBuffer;

/// Keep-alive entries at which a stream hands its list over, by default.
const KEEP_FLUSH: usize = 256;

/// The hand-over threshold in use: [`KEEP_FLUSH`], or `XSTREAM_CUDA_KEEP_FLUSH` (entries, read
/// once per process, kept within 16 ..= 1 << 20; an unparsable value leaves the default). A
/// larger value makes fewer hand-overs (three driver calls each) and holds the buffers of
/// completed work longer (until the stream's next synchronize or hand-over); a diagnostic and
/// tuning setting, see docs/hot-paths.md.
fn keep_flush() -> usize {
    static FLUSH: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *FLUSH.get_or_init(|| {
        std::env::var("XSTREAM_CUDA_KEEP_FLUSH")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .map_or(KEEP_FLUSH, |n| n.clamp(16, 1 << 20))
    })
}

/// A stream's keep-alive entries: the list being filled, and the side stream its hand-overs
/// go to (module docs).
/// `repr(C)`: the two marks every wait reads first (`StreamState`'s first cache line).
#[derive(Default)]
#[repr(C)]
pub(crate) struct Keeps {
    /// The number past the newest entry (the mark a wait takes), readable without the lock.
    end: AtomicU64,
    /// `List::first`, readable without the lock.
    first: AtomicU64,
    list: Mutex<List>,
    /// The side stream, once a hand-over created it.
    side: Mutex<Option<CuStream>>,
}

/// The entries not yet handed over.
#[derive(Default)]
struct List {
    v: Vec<Keep>,
    /// The number of `v[0]`: entries numbered below it were released or handed over.
    first: u64,
}

impl Keeps {
    /// Whether any entry is listed (entries handed over are the side stream's).
    pub(crate) fn held(&self) -> bool {
        self.end.load(Ordering::Acquire) != self.first.load(Ordering::Acquire)
    }

    /// Takes every listed entry, for release behind the stream's work (its drop).
    pub(crate) fn take_all(&self) -> Vec<Keep> {
        let mut g = lock(&self.list);
        g.first += g.v.len() as u64;
        self.first.store(g.first, Ordering::Release);
        std::mem::take(&mut g.v)
    }

    /// Takes the side stream for its destruction (the stream's drop); `None` when no
    /// hand-over made one.
    pub(crate) fn take_side(&self) -> Option<CuStream> {
        lock(&self.side).take()
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
                v
            });
            k.end.store(g.first + g.v.len() as u64, Ordering::Release);
            batch
        };
        if let Some(v) = batch {
            self.hand_over(v);
        }
    }

    /// Hands `v` over on the side stream, or takes the fallback (module docs).
    fn hand_over(&self, v: Vec<Keep>) {
        let Err(v) = self.release_on_side(v) else {
            return;
        };
        if let Err((v, _)) = release_after(&self.handle.dev, self.raw(), v) {
            // Back to the front, renumbered just below the list's first entry: at or above
            // their own numbers (the list's first only grows past them), so no wait releases
            // them before it covered them; the next push hands them over again.
            let k = &self.state.keep;
            let mut g = lock(&k.list);
            g.first -= v.len() as u64;
            k.first.store(g.first, Ordering::Release);
            g.v.splice(0..0, v);
        }
    }

    /// Releases `v` behind the work enqueued so far through the side stream: a pooled event
    /// recorded here and waited for there, then the host function of [`release_after`] there
    /// (module docs). `v` comes back when the fallback applies.
    fn release_on_side(&self, v: Vec<Keep>) -> Result<(), Vec<Keep>> {
        let dev = &self.handle.dev;
        let sh = &dev.shared;
        if sh.sticky_error().is_some() {
            // `release_after` drops at once: nothing runs any more on a poisoned context.
            return Err(v);
        }
        let Some(side) = self.side_stream() else {
            return Err(v);
        };
        if let Err(e) = sh.events.order_after(sh, side, [self.raw()]) {
            tracing::debug!(error = %e, "keep-alive hand-over: no event ordering the side stream; host function on the stream instead");
            return Err(v);
        }
        release_after(dev, side, v).map_err(|(v, code)| {
            tracing::debug!(code, "keep-alive hand-over: cuLaunchHostFunc on the side stream failed; host function on the stream instead");
            v
        })
    }

    /// The side stream, created at the first hand-over (`CU_STREAM_NON_BLOCKING`; the context
    /// is bound by the enqueue); `None` when the driver refused (the hand-over falls back, and
    /// the next one tries again).
    fn side_stream(&self) -> Option<CuStream> {
        let mut g = lock(&self.state.keep.side);
        if let Some(s) = *g {
            return Some(s);
        }
        match ffi::stream_create(CU_STREAM_NON_BLOCKING) {
            Ok(s) => {
                *g = Some(s);
                Some(s)
            }
            Err(code) => {
                let e = self.handle.dev.shared.fail("cuStreamCreate", code);
                tracing::debug!(error = %e, "keep-alive hand-over: no side stream; host function on the stream instead");
                None
            }
        }
    }

    /// Releases every listed entry numbered below `mark` (its work completed).
    pub(super) fn completed_up_to(&self, mark: u64) {
        let k = &self.state.keep;
        if mark <= k.first.load(Ordering::Acquire) {
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
    }

    /// The mark a wait takes before waiting (module docs; no lock).
    pub(super) fn keep_mark(&self) -> u64 {
        self.state.keep.end.load(Ordering::Acquire)
    }
}
