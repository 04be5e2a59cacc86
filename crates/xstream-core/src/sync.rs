//! Synchronization helpers shared by the backends, written once here:
//!
//! - [`lock`]: a poison-tolerant `Mutex::lock`.
//! - [`wait_with_backoff`] and [`Backoff`]: a bounded polling wait whose sleeps double up to a
//!   cap (the emulated timed synchronize of a backend whose vendor has none).
//! - [`UseSet`]: the streams other than its owner that used a stream-ordered buffer, each once
//!   (what its free must be ordered after), for the CUDA and Ascend backends alike.
//!
//! The crate-private re-exports are the primitives of the callback slot and the completion
//! future: `std`'s, or loom's when built with `--cfg loom` so `tests/loom.rs` can model-check
//! those protocols.

use std::time::{Duration, Instant};

#[cfg(loom)]
pub(crate) use loom::sync::{atomic::AtomicBool, Arc, Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::{atomic::AtomicBool, Arc, Mutex, MutexGuard};

/// Locks `m`, taking the data even when another thread panicked while holding it.
///
/// xstream's locks guard bookkeeping that every critical section leaves consistent before it
/// can panic (a user callback runs outside them), so a poisoned lock carries nothing half
/// written; refusing it would turn one panic into a failure of every later call, including
/// drops, which must never panic.
pub fn lock<T: ?Sized>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The streams, other than the owner, that used a stream-ordered buffer, each kept once under
/// its key: what the buffer's free must be ordered after (PyTorch's `record_stream` set).
///
/// `K` identifies a stream (a backend's stream key, or the address of its shared handle), `T`
/// is what the backend keeps of it (a strong or weak reference). The set is taken whole by the
/// free ([`UseSet::take`]); noting a use is a lock and a scan, and the owner is never noted.
#[derive(Debug)]
pub struct UseSet<K, T> {
    owner: K,
    users: std::sync::Mutex<Vec<(K, T)>>,
}

impl<K: PartialEq + Copy, T> UseSet<K, T> {
    /// An empty set for a buffer allocated on the stream `owner`.
    pub fn new(owner: K) -> Self {
        Self {
            owner,
            users: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The owner's key.
    pub fn owner(&self) -> K {
        self.owner
    }

    /// Notes that the stream `key` used the buffer: `keep` makes what is kept of it, called
    /// only the first time (never for the owner). Returns whether it was new.
    pub fn note(&self, key: K, keep: impl FnOnce() -> T) -> bool {
        if key == self.owner {
            return false;
        }
        let mut g = lock(&self.users);
        if g.iter().any(|(k, _)| *k == key) {
            return false;
        }
        g.push((key, keep()));
        true
    }

    /// Takes every noted stream, leaving the set empty.
    pub fn take(&self) -> Vec<(K, T)> {
        std::mem::take(&mut *lock(&self.users))
    }

    /// [`UseSet::take`] through a unique reference: no lock is taken (the free of a buffer it
    /// owns).
    pub fn take_mut(&mut self) -> Vec<(K, T)> {
        let users = self.users.get_mut().unwrap_or_else(|e| e.into_inner());
        std::mem::take(users)
    }

    /// A new set with the same owner and the noted streams moved into it (this one is left
    /// empty): a free handed to another thread takes its users along.
    pub fn take_set(&self) -> Self {
        Self {
            owner: self.owner,
            users: std::sync::Mutex::new(self.take()),
        }
    }
}

/// The sleeps of [`wait_with_backoff`]: the first is `first`, each next one twice the last, up
/// to `max`. With `spin` the wait spins (`std::hint::spin_loop`) instead of sleeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first sleep.
    pub first: Duration,
    /// The longest sleep.
    pub max: Duration,
    /// Spin between polls instead of sleeping (one busy core, the shortest wake-up).
    pub spin: bool,
}

impl Backoff {
    /// Sleeps from `first`, doubling up to `max`.
    pub const fn new(first: Duration, max: Duration) -> Self {
        Backoff {
            first,
            max,
            spin: false,
        }
    }

    /// The same, spinning instead of sleeping when `spin`.
    #[must_use]
    pub const fn spinning(self, spin: bool) -> Self {
        Backoff { spin, ..self }
    }

    /// The sleeps in order (endless; the wait stops taking them at its deadline).
    pub fn naps(&self) -> impl Iterator<Item = Duration> {
        let max = self.max;
        std::iter::successors(Some(self.first.min(max)), move |n| {
            Some(n.saturating_mul(2).min(max))
        })
    }
}

/// Polls `ready` until it answers `Ok(true)` or `timeout` has passed, sleeping between polls
/// as `backoff` says (never past the deadline). `ready` runs at least once, also for a zero
/// timeout.
///
/// # Errors
/// The first error `ready` returns, at once.
///
/// Returns `Ok(true)` when ready, `Ok(false)` when the timeout passed first.
pub fn wait_with_backoff<E>(
    timeout: Duration,
    backoff: Backoff,
    mut ready: impl FnMut() -> Result<bool, E>,
) -> Result<bool, E> {
    let start = Instant::now();
    let mut naps = backoff.naps();
    loop {
        if ready()? {
            return Ok(true);
        }
        let elapsed = start.elapsed();
        if elapsed >= timeout {
            return Ok(false);
        }
        if backoff.spin {
            std::hint::spin_loop();
        } else {
            let nap = naps.next().unwrap_or(backoff.max);
            std::thread::sleep(nap.min(timeout - elapsed));
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_use_set_keeps_each_other_stream_once_and_is_taken_whole() {
        let set = UseSet::new(1u64);
        let mut made = 0;
        assert!(!set.note(1, || unreachable!("the owner is never kept")));
        assert!(set.note(2, || {
            made += 1;
            "two"
        }));
        assert!(!set.note(2, || unreachable!("a second use of stream 2 keeps nothing")));
        assert!(set.note(3, || "three"));
        assert_eq!(made, 1);
        let moved = set.take_set();
        assert_eq!(moved.owner(), 1);
        assert!(set.take().is_empty(), "take_set leaves the set empty");
        assert_eq!(moved.take(), vec![(2, "two"), (3, "three")]);
        assert!(moved.take().is_empty(), "take leaves the set empty");
        let mut set = UseSet::new(1u64);
        assert!(set.note(4, || "four"));
        assert_eq!(set.take_mut(), vec![(4, "four")]);
        assert!(set.take_mut().is_empty(), "take_mut leaves the set empty");
        assert!(set.note(4, || "again"), "a taken user is new again");
    }

    #[test]
    fn lock_takes_a_poisoned_mutex() {
        let m = std::sync::Arc::new(std::sync::Mutex::new(1));
        let m2 = std::sync::Arc::clone(&m);
        let r = std::thread::spawn(move || {
            let mut g = m2.lock().unwrap();
            *g = 2;
            panic!("poison it");
        })
        .join();
        assert!(r.is_err());
        assert!(m.is_poisoned());
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 3);
    }

    #[test]
    fn naps_double_up_to_the_cap() {
        let b = Backoff::new(Duration::from_micros(20), Duration::from_micros(100));
        let naps: Vec<u128> = b.naps().take(6).map(|d| d.as_micros()).collect();
        assert_eq!(naps, [20, 40, 80, 100, 100, 100]);
        let capped = Backoff::new(Duration::from_millis(5), Duration::from_millis(1));
        assert_eq!(capped.naps().next(), Some(Duration::from_millis(1)));
    }

    #[test]
    fn wait_polls_until_ready_and_reports_errors_and_timeouts() {
        let b = Backoff::new(Duration::from_micros(1), Duration::from_micros(4));
        // Ready at the third poll.
        let mut polls = 0;
        let r: Result<bool, ()> = wait_with_backoff(Duration::from_secs(60), b, || {
            polls += 1;
            Ok(polls == 3)
        });
        assert_eq!((r, polls), (Ok(true), 3));
        // An error stops the wait at once.
        let mut polls = 0;
        let r = wait_with_backoff(Duration::from_secs(60), b.spinning(true), || {
            polls += 1;
            if polls == 2 {
                Err("query failed")
            } else {
                Ok(false)
            }
        });
        assert_eq!((r, polls), (Err("query failed"), 2));
        // Never ready: the wait ends at its deadline; a zero timeout still polls once.
        let mut polls = 0;
        let r: Result<bool, ()> = wait_with_backoff(Duration::ZERO, b, || {
            polls += 1;
            Ok(false)
        });
        assert_eq!((r, polls), (Ok(false), 1));
        let r: Result<bool, ()> = wait_with_backoff(Duration::from_millis(2), b, || Ok(false));
        assert_eq!(r, Ok(false));
    }
}
