//! [`EventPool`]: a bounded pool of reusable ordering events of one device.
//!
//! Each dependency between two streams needs an event: record it behind the producer's work,
//! make the consumer wait for it. Creating and destroying one per dependency is a vendor call
//! each way; a pool keeps the events and hands them out again.
//!
//! # When an event may go back
//! A wait takes a snapshot of the event's record at call time ([`Stream::wait_event`]; the
//! conformance check `wait_takes_snapshot` proves it on every backend), so an event may be
//! given back as soon as the last `wait_event` on it was called, before the recorded work
//! completed: re-recording it later does not move the waits already enqueued. An event that
//! is still queried, synchronized or awaited (its [`Event::completed`] future) must be kept
//! until that is done.
//!
//! # Threads
//! `EventPool<B>` is `Send + Sync` (every backend's events are): [`EventPool::get`] and
//! [`EventPool::put`] may be called from any thread at the same time; the pool's lock is held
//! only to push or pop, never across a vendor call. [`EventPool::get`] creates events, which
//! is refused inside a stream-blocking host callback ([`Error::NotPermitted`]), like every
//! xstream call there; [`EventPool::put`] makes no vendor call and works anywhere.
//!
//! # Bounds
//! At most [`EventPool::capacity`] events are kept; an event given back to a full pool is
//! dropped (destroyed under its backend's rules). Events handed out are not counted: the pool
//! never refuses [`EventPool::get`] for lack of pooled events, it creates one.

use std::fmt;
use std::sync::{Mutex, OnceLock};

use crate::{
    Backend, Device, DeviceOf, Error, Event, EventDesc, EventFlags, EventOf, Result, Stream,
    StreamOf,
};

/// A bounded pool of timing-disabled events of one device (see the module docs).
pub struct EventPool<B: Backend> {
    device: DeviceOf<B>,
    capacity: usize,
    free: Mutex<Vec<EventOf<B>>>,
    /// The flags of the events this pool creates (known after the first creation); only
    /// events with exactly these flags are taken back.
    flags: OnceLock<EventFlags>,
}

impl<B: Backend> fmt::Debug for EventPool<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventPool")
            .field("device", &self.device.info().ordinal)
            .field("capacity", &self.capacity)
            .field("pooled", &self.len())
            .finish()
    }
}

impl<B: Backend> EventPool<B> {
    /// A pool of `device`'s events keeping at most `capacity` of them.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `capacity == 0`.
    pub fn new(device: &DeviceOf<B>, capacity: usize) -> Result<Self> {
        if capacity == 0 {
            return Err(Error::invalid(
                "an event pool needs a capacity of at least 1",
            ));
        }
        Ok(Self {
            device: device.clone(),
            capacity,
            free: Mutex::new(Vec::new()),
            flags: OnceLock::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<EventOf<B>>> {
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The pool's device.
    pub fn device(&self) -> &DeviceOf<B> {
        &self.device
    }

    /// How many events the pool keeps at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many events are pooled now (ready to be handed out without a vendor call).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no event is pooled now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An event: a pooled one, or a new timing-disabled event of the pool's device. A pooled
    /// event may still carry an old record; record it before waiting on it.
    ///
    /// # Errors
    /// As [`Device::create_event`] (inside a stream-blocking callback:
    /// [`Error::NotPermitted`]).
    pub fn get(&self) -> Result<EventOf<B>> {
        if let Some(e) = self.lock().pop() {
            return Ok(e);
        }
        let e = self
            .device
            .create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))?;
        let _ = self.flags.set(e.flags());
        Ok(e)
    }

    /// Gives `event` back. Returns whether the pool kept it: it drops an event when it is full,
    /// when the event belongs to another device, or when its flags differ from those of the
    /// events the pool creates (a timing event, an interprocess one). See the module docs for
    /// when an event may go back.
    pub fn put(&self, event: EventOf<B>) -> bool {
        let same_device = event.device().info().ordinal == self.device.info().ordinal;
        let same_flags = self.flags.get() == Some(&event.flags());
        if !same_device || !same_flags {
            return false;
        }
        let mut g = self.lock();
        if g.len() >= self.capacity {
            return false;
        }
        g.push(event);
        true
    }

    /// An event from the pool recorded on `stream` (behind the work enqueued on it so far).
    /// On error the event goes back to the pool.
    ///
    /// # Errors
    /// As [`EventPool::get`] and [`Event::record`].
    pub fn record(&self, stream: &StreamOf<B>) -> Result<EventOf<B>> {
        let e = self.get()?;
        match e.record(stream) {
            Ok(()) => Ok(e),
            Err(err) => {
                self.put(e);
                Err(err)
            }
        }
    }

    /// Makes `waiter` wait for the work enqueued on `other` so far (as [`Stream::wait_stream`]),
    /// through a pooled event, which goes back to the pool at once (the wait took its
    /// snapshot).
    ///
    /// # Errors
    /// As [`EventPool::record`] and [`Stream::wait_event`].
    pub fn wait_stream(&self, waiter: &StreamOf<B>, other: &StreamOf<B>) -> Result<()> {
        let e = self.record(other)?;
        let r = waiter.wait_event(&e);
        self.put(e);
        r
    }

    /// Renamed [`EventPool::wait_stream`].
    ///
    /// # Errors
    /// As [`EventPool::wait_stream`].
    #[deprecated(since = "0.2.0", note = "renamed `wait_stream`")]
    pub fn join(&self, waiter: &StreamOf<B>, other: &StreamOf<B>) -> Result<()> {
        self.wait_stream(waiter, other)
    }
}

/// `EventPool<B>` is `Send + Sync` for every backend: checked when this generic function is
/// compiled, for any `B`.
#[allow(dead_code)]
fn pool_is_send_sync<B: Backend>() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<EventPool<B>>();
}
