//! A stream pool: per device and priority class, streams created lazily and handed out
//! round-robin, so hot paths never pay stream creation; plus exclusive leases for callers that
//! must not share a stream (a fixed shared pool serialises unrelated work behind each other).

use crate::sync::lock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::{Backend, Device, Error, Priority, Result, StreamDesc, StreamFlags, StreamOf};

/// The priority classes a pool keeps apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PriorityClass {
    /// [`Priority::Lowest`].
    Low = 0,
    /// [`Priority::Normal`].
    Normal = 1,
    /// [`Priority::Highest`].
    High = 2,
}

impl PriorityClass {
    fn priority(self) -> Priority {
        match self {
            PriorityClass::Low => Priority::Lowest,
            PriorityClass::Normal => Priority::Normal,
            PriorityClass::High => Priority::Highest,
        }
    }
}

/// Pool sizes and stream flags.
#[derive(Debug, Clone, Copy)]
pub struct PoolConfig {
    /// Shared streams per class (`[low, normal, high]`); each at least 1.
    pub per_class: [usize; 3],
    /// Flags of every pooled stream (default `NON_BLOCKING`, as pools usually are).
    pub flags: StreamFlags,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            per_class: [4, 8, 4],
            flags: StreamFlags::NON_BLOCKING,
        }
    }
}

struct Class<B: Backend> {
    shared: Box<[OnceLock<Arc<StreamOf<B>>>]>,
    next: AtomicUsize,
    free: Arc<Mutex<Vec<StreamOf<B>>>>,
}

/// A per-device stream pool.
pub struct StreamPool<B: Backend> {
    device: B::Device,
    config: PoolConfig,
    classes: [Class<B>; 3],
    created: AtomicUsize,
}

impl<B: Backend> std::fmt::Debug for StreamPool<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamPool")
            .field("backend", &B::KIND)
            .field("config", &self.config)
            .field("created", &self.created())
            .finish()
    }
}

impl<B: Backend> StreamPool<B> {
    /// A pool over `device`. Creates no stream yet.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a class of size 0.
    pub fn new(device: B::Device, config: PoolConfig) -> Result<Self> {
        if config.per_class.contains(&0) {
            return Err(Error::invalid("every pool class needs at least one stream"));
        }
        let class = |n: usize| Class {
            shared: (0..n).map(|_| OnceLock::new()).collect(),
            next: AtomicUsize::new(0),
            free: Arc::new(Mutex::new(Vec::new())),
        };
        Ok(Self {
            device,
            config,
            classes: [
                class(config.per_class[0]),
                class(config.per_class[1]),
                class(config.per_class[2]),
            ],
            created: AtomicUsize::new(0),
        })
    }

    fn create(&self, class: PriorityClass) -> Result<StreamOf<B>> {
        let desc = StreamDesc::new()
            .flags(self.config.flags)
            .priority(class.priority())
            .policy(crate::TranslationPolicy::BestEffort)
            .name(format!("pool-{class:?}"));
        let s = self.device.create_stream(&desc)?;
        self.created.fetch_add(1, Ordering::Relaxed);
        Ok(s)
    }

    /// A shared stream of `class`, round-robin. After the first round this is an atomic
    /// increment and a load: no allocation, no lock.
    ///
    /// # Errors
    /// Stream creation errors (e.g. [`Error::ResourceExhausted`]) the first time a slot is
    /// filled.
    pub fn get(&self, class: PriorityClass) -> Result<Arc<StreamOf<B>>> {
        let c = &self.classes[class as usize];
        let i = c.next.fetch_add(1, Ordering::Relaxed) % c.shared.len();
        if let Some(s) = c.shared[i].get() {
            return Ok(Arc::clone(s));
        }
        let s = Arc::new(self.create(class)?);
        // A racing caller may have filled the slot; keep theirs, drop ours.
        Ok(Arc::clone(c.shared[i].get_or_init(|| s)))
    }

    /// An exclusive stream of `class`: nobody else gets it until the lease is dropped, when it
    /// returns to the pool (its queued work keeps running).
    ///
    /// # Errors
    /// Stream creation errors when no free stream is left.
    pub fn lease(&self, class: PriorityClass) -> Result<Lease<B>> {
        let c = &self.classes[class as usize];
        let reused = lock(&c.free).pop();
        let stream = match reused {
            Some(s) => s,
            None => self.create(class)?,
        };
        Ok(Lease {
            stream: Some(stream),
            home: Arc::clone(&c.free),
        })
    }

    /// Streams created so far (shared and leased).
    pub fn created(&self) -> usize {
        self.created.load(Ordering::Relaxed)
    }

    /// The pool's device.
    pub fn device(&self) -> &B::Device {
        &self.device
    }
}

/// An exclusively held pooled stream; returns to its pool on drop.
pub struct Lease<B: Backend> {
    stream: Option<StreamOf<B>>,
    home: Arc<Mutex<Vec<StreamOf<B>>>>,
}

impl<B: Backend> std::fmt::Debug for Lease<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("stream", &self.stream)
            .finish()
    }
}

impl<B: Backend> std::ops::Deref for Lease<B> {
    type Target = StreamOf<B>;
    fn deref(&self) -> &StreamOf<B> {
        // Present from construction until drop.
        match &self.stream {
            Some(s) => s,
            None => unreachable!("lease stream taken before drop"),
        }
    }
}

impl<B: Backend> Drop for Lease<B> {
    fn drop(&mut self) {
        if let Some(s) = self.stream.take() {
            lock(&self.home).push(s);
        }
    }
}
