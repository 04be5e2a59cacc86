//! The allocator trampolines as a vendor library reaches them: the function pointers and the
//! allocator object come back from the (simulated) runtime's `aclrtAllocatorGetByStream`, and
//! each C call must reach the registered Rust [`Allocator`] with its arguments (the advise
//! callback's size and address included); a panicking allocator gives NULL, not an unwind
//! across the C boundary.
#![allow(unsafe_code)]
mod common;

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use xstream_ascend::sys::{
    aclrtAllocatorAllocAdviseFunc, aclrtAllocatorAllocFunc, aclrtAllocatorFreeFunc,
    aclrtAllocatorGetAddrFromBlockFunc,
};
use xstream_core::{Allocator, Block, Device, HeapAllocator, Stream, StreamDesc};

/// A host allocator that records every call it receives, and panics on demand.
#[derive(Default)]
struct Recording {
    inner: HeapAllocator,
    calls: Mutex<Vec<String>>,
    panic: AtomicBool,
}

impl Recording {
    fn log(&self, s: String) {
        self.calls.lock().unwrap().push(s);
    }
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
    fn maybe_panic(&self) {
        if self.panic.load(Ordering::SeqCst) {
            panic!("allocator failure on purpose");
        }
    }
}

impl Allocator for Recording {
    fn alloc(&self, size: usize) -> Option<Block> {
        self.maybe_panic();
        let b = self.inner.alloc(size)?;
        self.log(format!("alloc {size} -> {}", b.0));
        Some(b)
    }
    fn free(&self, block: Block) {
        self.log(format!("free {}", block.0));
        self.inner.free(block);
    }
    fn alloc_advise(&self, size: usize, addr: u64) -> Option<Block> {
        self.maybe_panic();
        let b = self.inner.alloc(size)?;
        self.log(format!("advise {size} at {addr:#x} -> {}", b.0));
        Some(b)
    }
    fn address(&self, block: Block) -> u64 {
        self.log(format!("address {}", block.0));
        self.inner.address(block)
    }
}

struct Registered {
    obj: *mut c_void,
    alloc: aclrtAllocatorAllocFunc,
    free: aclrtAllocatorFreeFunc,
    advise: aclrtAllocatorAllocAdviseFunc,
    addr: aclrtAllocatorGetAddrFromBlockFunc,
}

/// What the runtime hands a library that asks for the allocator of `s`.
fn get_by_stream(d: &xstream_ascend::AscendDevice, s: &xstream_ascend::AscendStream) -> Registered {
    d.bind().unwrap();
    let get = d
        .fns()
        .aclrtAllocatorGetByStream
        .expect("the simulator exports aclrtAllocatorGetByStream");
    let mut desc: *mut c_void = std::ptr::null_mut();
    let mut obj: *mut c_void = std::ptr::null_mut();
    let (mut alloc, mut free, mut advise, mut addr) = (None, None, None, None);
    // SAFETY: prototype of `aclrtAllocatorGetByStream` (CANN AscendCL API reference); every
    // out-pointer points to a live local.
    let rc = unsafe {
        get(
            s.as_raw().0,
            &mut desc,
            &mut obj,
            &mut alloc,
            &mut free,
            &mut advise,
            &mut addr,
        )
    };
    assert_eq!(rc, 0, "aclrtAllocatorGetByStream");
    assert!(!obj.is_null());
    Registered {
        obj,
        alloc: alloc.expect("alloc fn"),
        free: free.expect("free fn"),
        advise: advise.expect("advise fn"),
        addr: addr.expect("get-address fn"),
    }
}

#[test]
fn advise_and_every_trampoline_reach_the_rust_allocator_with_their_arguments() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let rec = Arc::new(Recording::default());
    s.set_allocator(Some(rec.clone())).unwrap();
    let r = get_by_stream(&d, &s);
    // SAFETY: the functions and `obj` were registered by xstream for `s`, which is alive;
    // each block is freed exactly once.
    unsafe {
        let b1 = (r.advise)(r.obj, 48, 0x2000 as *mut c_void);
        assert!(!b1.is_null());
        let b2 = (r.alloc)(r.obj, 24);
        assert!(!b2.is_null());
        assert_eq!(rec.inner.live_blocks(), 2);
        let a1 = (r.addr)(b1) as u64;
        assert_eq!(
            a1,
            rec.inner.address(Block(1)),
            "address of the advised block"
        );
        assert_ne!(a1, 0);
        (r.free)(r.obj, b1);
        (r.free)(r.obj, b2);
    }
    assert_eq!(rec.inner.live_blocks(), 0);
    assert_eq!(
        rec.calls(),
        [
            "advise 48 at 0x2000 -> 1",
            "alloc 24 -> 2",
            "address 1",
            "free 1",
            "free 2"
        ]
    );
    s.set_allocator(None).unwrap();
}

#[test]
fn a_panicking_allocator_gives_null_through_the_c_abi() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let rec = Arc::new(Recording::default());
    rec.panic.store(true, Ordering::SeqCst);
    s.set_allocator(Some(rec.clone())).unwrap();
    let r = get_by_stream(&d, &s);
    // SAFETY: as above; a NULL block is never freed.
    unsafe {
        assert!((r.alloc)(r.obj, 8).is_null());
        assert!((r.advise)(r.obj, 8, 0x1000 as *mut c_void).is_null());
        assert!((r.addr)(std::ptr::null_mut()).is_null());
    }
    assert_eq!(rec.inner.live_blocks(), 0);
    assert!(rec.calls().is_empty());
    // The allocator works again once it stops panicking.
    rec.panic.store(false, Ordering::SeqCst);
    // SAFETY: as above.
    unsafe {
        let b = (r.alloc)(r.obj, 8);
        assert!(!b.is_null());
        (r.free)(r.obj, b);
    }
    assert_eq!(rec.calls(), ["alloc 8 -> 1", "free 1"]);
    s.set_allocator(None).unwrap();
}
