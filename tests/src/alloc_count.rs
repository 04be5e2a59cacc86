//! A counting global allocator for the allocation tests and benches: every allocation,
//! zeroed allocation and reallocation made **on the calling thread** is counted, and every call
//! is forwarded to [`System`]. A test binary installs it with
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: xstream_conformance::alloc_count::CountingAlloc =
//!     xstream_conformance::alloc_count::CountingAlloc;
//! ```
//!
//! and reads [`allocs`] before and after the code it measures (or calls [`allocations_during`]).
//! Without the allocator installed the count stays 0, so a test must install it.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

/// Counts the calling thread's heap allocations; forwards every call to [`System`].
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAlloc;

fn bump() {
    // `try_with`: the counter may already be gone while a thread is being torn down.
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every call is forwarded unchanged to `System`; counting touches only a
// const-initialised thread-local `Cell` without destructor, which never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        bump();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        bump();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        bump();
        // SAFETY: as above.
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
}

/// The calling thread's allocations so far (0 unless [`CountingAlloc`] is the binary's global
/// allocator).
pub fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

/// The allocations the calling thread made while `f` ran.
pub fn allocations_during(f: impl FnOnce()) -> u64 {
    let before = allocs();
    f();
    allocs() - before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static GLOBAL: CountingAlloc = CountingAlloc;

    /// The counter sees this thread's allocations and nothing when nothing allocates.
    #[test]
    fn counts_this_threads_allocations() {
        assert_eq!(
            allocations_during(|| {
                std::hint::black_box(1 + 1);
            }),
            0
        );
        let n = allocations_during(|| {
            let mut v = std::hint::black_box(Vec::<u8>::with_capacity(4));
            v.extend_from_slice(&[0; 64]);
            drop(v);
        });
        assert_eq!(n, 2, "one allocation and one reallocation");
        let other = allocations_during(|| {
            std::thread::spawn(|| {
                for i in 0..100u8 {
                    drop(std::hint::black_box(vec![i; 16]));
                }
            })
            .join()
            .unwrap();
        });
        // The spawn itself allocates a few times here; the other thread's 100 are not counted.
        assert!(
            other < 100,
            "another thread's allocations were counted ({other})"
        );
    }
}
