//! Per-stream allocators (ACL `aclrtAllocatorRegister` / `aclrtAllocatorGetByStream`).
//!
//! A runtime registers an [`Allocator`] on a stream; kernels and libraries working on that
//! stream look it up with [`Stream::allocator`](crate::Stream::allocator) and allocate from it.
//! On ACL the allocator is really registered with the runtime through `extern "C"`
//! trampolines; elsewhere xstream keeps the registry.

use crate::sync::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// An opaque block handle returned by an [`Allocator`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Block(pub u64);

/// A user allocator. Implementations must be thread-safe; xstream never calls one from inside
/// a stream-blocking callback.
pub trait Allocator: Send + Sync + 'static {
    /// Allocates `size` bytes; `None` when out of memory.
    fn alloc(&self, size: usize) -> Option<Block>;
    /// Frees a block returned by this allocator.
    fn free(&self, block: Block);
    /// Allocates `size` bytes, preferably at `addr`. The default ignores the advice.
    fn alloc_advise(&self, size: usize, addr: u64) -> Option<Block> {
        let _ = addr;
        self.alloc(size)
    }
    /// The device address of a block.
    fn address(&self, block: Block) -> u64;
}

/// A simple allocator over host memory: blocks are heap buffers, addresses their pointers.
/// Useful as a default and in tests.
#[derive(Debug, Default)]
pub struct HeapAllocator {
    live: Mutex<HashMap<u64, Box<[u8]>>>,
    next: std::sync::atomic::AtomicU64,
}

/// The former name of [`HeapAllocator`] (issue 33: `Host` names the host backend).
#[deprecated(
    since = "0.2.0",
    note = "renamed `HeapAllocator` (`Host` names the host backend)"
)]
pub type HostAllocator = HeapAllocator;

impl HeapAllocator {
    /// An empty allocator.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Blocks currently allocated.
    pub fn live_blocks(&self) -> usize {
        lock(&self.live).len()
    }
}

impl Allocator for HeapAllocator {
    fn alloc(&self, size: usize) -> Option<Block> {
        let mem = vec![0u8; size.max(1)].into_boxed_slice();
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        lock(&self.live).insert(id, mem);
        Some(Block(id))
    }

    fn free(&self, block: Block) {
        lock(&self.live).remove(&block.0);
    }

    fn address(&self, block: Block) -> u64 {
        lock(&self.live)
            .get(&block.0)
            .map(|m| m.as_ptr() as u64)
            .unwrap_or(0)
    }
}

/// A slot holding a stream's registered allocator (for backends without a vendor registry).
#[derive(Default)]
pub struct AllocatorSlot(Mutex<Option<Arc<dyn Allocator>>>);

impl std::fmt::Debug for AllocatorSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AllocatorSlot")
            .field(&self.get().is_some())
            .finish()
    }
}

impl AllocatorSlot {
    /// Registers (or replaces) the allocator.
    pub fn set(&self, a: Option<Arc<dyn Allocator>>) {
        *lock(&self.0) = a;
    }

    /// The registered allocator.
    pub fn get(&self) -> Option<Arc<dyn Allocator>> {
        lock(&self.0).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_allocator_round_trip() {
        let a = HeapAllocator::new();
        let b = a.alloc(64).unwrap();
        assert_ne!(a.address(b), 0);
        assert_eq!(a.live_blocks(), 1);
        let c = a.alloc_advise(8, 0x1000).unwrap();
        assert_ne!(b, c);
        a.free(b);
        a.free(c);
        assert_eq!(a.live_blocks(), 0);
        assert_eq!(a.address(b), 0);
        let slot = AllocatorSlot::default();
        assert!(slot.get().is_none());
        slot.set(Some(a));
        assert!(slot.get().is_some());
    }
}
