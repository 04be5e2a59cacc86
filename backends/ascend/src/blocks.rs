//! Stream-ordered allocation on ACL, emulated with events: the per-device block cache behind
//! [`Stream::alloc_async`](xstream_core::Stream::alloc_async) and
//! [`Stream::free_async`](xstream_core::Stream::free_async).
//!
//! The ACL runtime has no `aclrtMallocAsync` / `aclrtFreeAsync`; its memory pools
//! (`aclrtMemPoolMallocAsync`, CANN ≥ 9.1) are not used yet. Instead:
//! - `free_async` on stream S records a pooled internal event on S and one on every other stream
//!   that used the buffer (tracked per buffer), then puts the block (rounded to
//!   its size class) into the device's cache with those events;
//! - `alloc_async` on S takes a cached block of the same class that was freed on S (stream order
//!   makes it safe at once, once the other streams' events completed) or whose every event has
//!   completed (`aclrtQueryEventStatus`); otherwise it calls `aclrtMalloc`. On out-of-memory it
//!   first frees the cached blocks whose events completed, then (if blocks are still cached)
//!   synchronizes the device, frees them all and tries once more;
//! - the release threshold ([`DEFAULT_RELEASE_THRESHOLD`], settable per device) bounds the bytes
//!   kept cached: above it, `free_async` and `alloc_async` free completed blocks; an explicit
//!   trim does the same down to any size; dropping the device frees the whole cache.
//!
//! Every stream that used the buffer is tracked, however many (a list, no slot limit), and so
//! is every stream marked with [`Stream::record_use`](xstream_core::Stream::record_use) (work
//! enqueued through the raw handle). A stream-ordered buffer used inside a capture invalidates
//! the capture (a graph could replay after the free). A buffer dropped without `free_async` is
//! freed on the reaper thread in its allocating stream's order, as if `free_async` had been
//! called there (release events, then the cache). A buffer whose streams cannot take an event
//! record (dropped, capturing, force-destroyed) is released the conservative way of every
//! other buffer: `aclrtFree` on the reaper after a device synchronize.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use xstream_core::sync::UseSet;
use xstream_core::Result;

use crate::result;
use crate::stream::StreamState;
use crate::sys::{consts, AclFns, DevPtr, RawEvent};

/// The default release threshold: bytes of freed blocks a device keeps cached (256 MiB).
pub const DEFAULT_RELEASE_THRESHOLD: u64 = 256 << 20;

/// Requests up to this size round up to [`SMALL_ROUND`]; larger ones to [`LARGE_ROUND`].
const SMALL_MAX: usize = 1 << 20;
/// Small classes are multiples of the allocation granule every backend rounds to.
const SMALL_ROUND: usize = xstream_core::ALLOC_GRANULE;
const LARGE_ROUND: usize = 2 << 20;

/// The size class (the bytes actually allocated) of a request of `len` bytes, `None` when
/// rounding overflows.
pub(crate) fn size_class(len: usize) -> Option<usize> {
    let r = if len <= SMALL_MAX {
        SMALL_ROUND
    } else {
        LARGE_ROUND
    };
    len.checked_next_multiple_of(r)
}

/// Whether `e` has completed (an error counts as not completed).
fn done(t: &AclFns, e: RawEvent) -> bool {
    matches!(
        result::event::query_status(t, e),
        Ok(consts::ACL_EVENT_RECORDED_STATUS_COMPLETE)
    )
}

/// The events a `free_async` recorded: on the freeing stream (`stream`, its key) and on the
/// other streams that used the buffer.
pub(crate) struct Release {
    pub(crate) stream: u64,
    pub(crate) own: RawEvent,
    pub(crate) others: Vec<RawEvent>,
}

struct Block {
    ptr: DevPtr,
    size: usize,
    rel: Release,
}

impl Block {
    /// Whether stream `key` may use the block now.
    fn ready_for(&self, t: &AclFns, key: u64) -> bool {
        (self.rel.stream == key || done(t, self.rel.own))
            && self.rel.others.iter().all(|&e| done(t, e))
    }
}

#[derive(Default)]
struct Cache {
    classes: HashMap<usize, Vec<Block>>,
    cached: u64,
    events: Vec<RawEvent>,
}

impl Cache {
    fn recycle(&mut self, mut rel: Release) {
        self.events.push(rel.own);
        self.events.append(&mut rel.others);
    }

    /// Frees completed blocks until at most `keep` bytes stay cached; returns the bytes freed.
    fn trim(&mut self, t: &AclFns, keep: u64) -> u64 {
        let mut freed = 0u64;
        let mut events = std::mem::take(&mut self.events);
        for v in self.classes.values_mut() {
            let mut i = 0;
            while i < v.len() && self.cached > keep {
                if v[i].ready_for(t, u64::MAX) {
                    let b = v.swap_remove(i);
                    let _ = result::memory::free(t, b.ptr);
                    self.cached -= b.size as u64;
                    freed += b.size as u64;
                    events.push(b.rel.own);
                    events.extend(b.rel.others);
                } else {
                    i += 1;
                }
            }
        }
        self.events = events;
        freed
    }
}

/// A device's cache of freed stream-ordered blocks and its pool of internal events.
pub(crate) struct BlockCache {
    inner: Mutex<Cache>,
    threshold: AtomicU64,
}

impl Default for BlockCache {
    fn default() -> Self {
        Self {
            inner: Mutex::default(),
            threshold: AtomicU64::new(DEFAULT_RELEASE_THRESHOLD),
        }
    }
}

impl BlockCache {
    fn lock(&self) -> MutexGuard<'_, Cache> {
        xstream_core::sync::lock(&self.inner)
    }

    /// A cached block of `class` bytes that stream `key` may use now.
    pub(crate) fn take(&self, t: &AclFns, class: usize, key: u64) -> Option<DevPtr> {
        let mut g = self.lock();
        let v = g.classes.get_mut(&class)?;
        let i = v.iter().rposition(|b| b.ready_for(t, key))?;
        let b = v.swap_remove(i);
        g.cached -= b.size as u64;
        g.recycle(b.rel);
        Some(b.ptr)
    }

    /// Puts a freed block into the cache (no runtime call: may run on any thread).
    pub(crate) fn put(&self, ptr: DevPtr, size: usize, rel: Release) {
        let mut g = self.lock();
        g.cached += size as u64;
        g.classes
            .entry(size)
            .or_default()
            .push(Block { ptr, size, rel });
    }

    /// An internal event (from the pool, or created).
    pub(crate) fn event(&self, t: &AclFns) -> Result<RawEvent> {
        if let Some(e) = self.lock().events.pop() {
            return Ok(e);
        }
        result::event::create_with_flag(t, consts::ACL_EVENT_SYNC)
    }

    /// Gives one event back to the pool.
    pub(crate) fn give_event(&self, e: RawEvent) {
        self.lock().events.push(e);
    }

    /// Frees completed blocks while more than the threshold is cached.
    pub(crate) fn enforce_threshold(&self, t: &AclFns) {
        let keep = self.threshold.load(Ordering::Relaxed);
        let mut g = self.lock();
        if g.cached > keep {
            g.trim(t, keep);
        }
    }

    /// Frees completed blocks until at most `keep` bytes stay cached and destroys the pooled
    /// events no block holds; returns the bytes freed.
    pub(crate) fn trim(&self, t: &AclFns, keep: u64) -> u64 {
        let mut g = self.lock();
        let freed = g.trim(t, keep);
        for e in g.events.drain(..) {
            let _ = result::event::destroy(t, e);
        }
        freed
    }

    /// Bytes of freed blocks cached now.
    pub(crate) fn cached(&self) -> u64 {
        self.lock().cached
    }

    /// Blocks cached now.
    pub(crate) fn blocks(&self) -> usize {
        self.lock().classes.values().map(Vec::len).sum()
    }

    pub(crate) fn threshold(&self) -> u64 {
        self.threshold.load(Ordering::Relaxed)
    }

    pub(crate) fn set_threshold(&self, bytes: u64) {
        self.threshold.store(bytes, Ordering::Relaxed);
    }

    /// Whether no block is cached and no event pooled.
    pub(crate) fn is_empty(&self) -> bool {
        let g = self.lock();
        g.cached == 0 && g.classes.values().all(Vec::is_empty) && g.events.is_empty()
    }

    /// Frees every cached block and destroys every pooled event (device drop, after a
    /// device synchronize).
    pub(crate) fn free_all(&self, t: &AclFns) {
        let mut g = self.lock();
        let classes = std::mem::take(&mut g.classes);
        for b in classes.into_values().flatten() {
            let _ = result::memory::free(t, b.ptr);
            g.recycle(b.rel);
        }
        g.cached = 0;
        for e in g.events.drain(..) {
            let _ = result::event::destroy(t, e);
        }
    }
}

/// The stream-ordered side of a buffer from `alloc_async`: its block's size class, who used it,
/// and the events its `free_async` recorded.
pub(crate) struct Ordered {
    /// Bytes of the block (its size class).
    pub(crate) size: usize,
    /// Key of the allocating stream.
    pub(crate) owner: u64,
    owner_state: Weak<StreamState>,
    /// Every other stream that used it (or was marked), by key, once each.
    users: UseSet<u64, Weak<StreamState>>,
    /// `free_async` was called (through this handle or a clone).
    pub(crate) freed: AtomicBool,
    /// Set by `free_async` when the stream-ordered release applies.
    pub(crate) release: Mutex<Option<Release>>,
}

/// Why a free must take the conservative release.
pub(crate) struct Conservative;

impl Ordered {
    pub(crate) fn new(size: usize, owner: &Arc<StreamState>) -> Self {
        Self {
            size,
            owner: owner.key,
            owner_state: Arc::downgrade(owner),
            users: UseSet::new(owner.key),
            freed: AtomicBool::new(false),
            release: Mutex::new(None),
        }
    }

    /// Notes that stream `s` enqueued work using the buffer.
    pub(crate) fn note_use(&self, s: &Arc<StreamState>) {
        self.users.note(s.key, || Arc::downgrade(s));
    }

    /// For a buffer dropped without `free_async`: the release events of a free on its
    /// allocating stream, when that stream is still alive and can take a record (else
    /// `Err(Conservative)`). Called on the reaper thread, with the context bound.
    pub(crate) fn record_release_on_owner(
        &self,
        t: &AclFns,
        cache: &BlockCache,
    ) -> std::result::Result<Release, Conservative> {
        let Some(owner) = self.owner_state.upgrade() else {
            return Err(Conservative);
        };
        if owner.capture.is_capturing() || owner.is_gone() {
            return Err(Conservative);
        }
        let rel = self.record_release(t, cache, &owner)?;
        owner.touch();
        Ok(rel)
    }

    /// Records the release events of a free on `on`: one on `on`, one on every other stream
    /// that used the buffer. `Err(Conservative)` when that cannot be done safely (the events
    /// already taken go back to the pool).
    pub(crate) fn record_release(
        &self,
        t: &AclFns,
        cache: &BlockCache,
        on: &StreamState,
    ) -> std::result::Result<Release, Conservative> {
        let users = self.users.take();
        let owner = (self.owner != on.key).then(|| self.owner_state.clone());
        let mut others = Vec::new();
        let fail = |others: Vec<RawEvent>| {
            for e in others {
                cache.give_event(e);
            }
            Err(Conservative)
        };
        for w in users
            .into_iter()
            .filter(|(k, _)| *k != on.key)
            .map(|(_, w)| w)
            .chain(owner)
        {
            let Some(s) = w.upgrade() else {
                // Dropped: its destroy waits on the reaper, which nobody here can order after.
                return fail(others);
            };
            if s.capture.is_capturing() || s.is_gone() {
                return fail(others);
            }
            let Ok(e) = cache.event(t) else {
                return fail(others);
            };
            if result::event::record(t, e, s.raw).is_err() {
                cache.give_event(e);
                return fail(others);
            }
            s.touch();
            others.push(e);
        }
        let Ok(own) = cache.event(t) else {
            return fail(others);
        };
        if result::event::record(t, own, on.raw).is_err() {
            cache.give_event(own);
            return fail(others);
        }
        Ok(Release {
            stream: on.key,
            own,
            others,
        })
    }
}

static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

/// A process-unique key for a stream state (never reused, unlike addresses and ids).
pub(crate) fn next_key() -> u64 {
    NEXT_KEY.fetch_add(1, Ordering::Relaxed)
}
