//! Buffers, copies, kernels, the per-stream allocator registry.
mod common;

use std::sync::Arc;

use xstream_core::{Allocator, Buffer, Device, Error, HeapAllocator, Kernel, Stream, StreamDesc};

#[test]
fn write_read_copy_memset_lcg() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let a = d.alloc(8).unwrap();
    let b = d.alloc(8).unwrap();
    assert_eq!(a.len(), 8);
    assert_ne!(a.device_address(), 0);
    let empty = d.alloc(0).unwrap();
    assert_eq!(empty.len(), 0);
    assert_ne!(empty.device_address(), 0);
    let zero = s.read(&a, 0, 8).unwrap();
    s.write(&a, 0, vec![1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    s.copy(&a, 0, &b, 0, 8).unwrap();
    s.memset(&b, 4, 4, 9).unwrap();
    s.launch_builtin(Kernel::Lcg { buf: &a, rounds: 2 })
        .unwrap();
    let ra = s.read(&a, 0, 8).unwrap();
    let rb = s.read(&b, 0, 8).unwrap();
    assert!(matches!(s.read(&a, 4, 8), Err(Error::InvalidArgument(_))));
    s.synchronize().unwrap();
    assert_eq!(zero.take().unwrap(), vec![0; 8]);
    let mut want = vec![1, 2, 3, 4, 5, 6, 7, 8];
    xstream_core::lcg_reference(&mut want, 2);
    assert_eq!(ra.take().unwrap(), want);
    assert_eq!(rb.take().unwrap(), vec![1, 2, 3, 4, 9, 9, 9, 9]);
    drop(a);
    let other = common::device(1).alloc(8).unwrap();
    assert!(matches!(
        s.copy(&other, 0, &b, 0, 8),
        Err(Error::WrongDevice(_))
    ));
}

/// Zero lengths are no error at the portable level (`Stream::memset` / `write` / `copy` /
/// `read` only refuse out-of-bounds ranges) and change nothing: the backend answers a
/// zero-length memset, write or copy without calling ACL (docs/semantics.md, zero-length
/// buffers and operations).
#[test]
fn zero_lengths_succeed_and_change_nothing() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let a = d.alloc(8).unwrap();
    let b = d.alloc(8).unwrap();
    s.write(&a, 0, vec![1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    s.memset(&a, 0, 0, 9).unwrap();
    s.memset(&a, 8, 0, 9).unwrap();
    s.write(&a, 8, Vec::new()).unwrap();
    s.copy(&a, 8, &b, 8, 0).unwrap();
    let empty = s.read(&a, 8, 0).unwrap();
    assert!(matches!(
        s.memset(&a, 9, 0, 9),
        Err(Error::InvalidArgument(_))
    ));
    let ra = s.read(&a, 0, 8).unwrap();
    let rb = s.read(&b, 0, 8).unwrap();
    s.synchronize().unwrap();
    assert_eq!(empty.take().unwrap(), Vec::<u8>::new());
    assert_eq!(ra.take().unwrap(), vec![1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(rb.take().unwrap(), vec![0; 8]);
}

#[test]
fn allocator_register_get_unregister() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    assert!(s.allocator().unwrap().is_none());
    let h = HeapAllocator::new();
    let a: Arc<dyn Allocator> = h.clone();
    s.set_allocator(Some(a.clone())).unwrap();
    let got = s.allocator().unwrap().expect("registered");
    assert!(Arc::ptr_eq(&got, &a));
    let blk = got.alloc(32).unwrap();
    assert_eq!(h.live_blocks(), 1);
    got.free(blk);
    s.set_allocator(Some(HeapAllocator::new())).unwrap();
    assert!(!Arc::ptr_eq(&s.allocator().unwrap().unwrap(), &a));
    s.set_allocator(None).unwrap();
    assert!(s.allocator().unwrap().is_none());
    let def = d.default_stream().unwrap();
    assert!(matches!(
        def.set_allocator(Some(a)),
        Err(Error::NotOwned { .. })
    ));
}

#[test]
fn alloc_rounds_to_the_granule_and_bounds_use_len() {
    if !common::in_sim_process() {
        return;
    }
    // An f16 buffer of 1031 elements: the odd size NCCL over-read on CUDA (issue 21).
    const ODD: usize = 2062;
    let sim = common::Sim::get();
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let a = d.alloc(ODD).unwrap();
    let b = d.alloc(ODD).unwrap();
    assert_eq!(a.len(), ODD);
    // xstream asks aclrtMalloc for the length rounded up to the granule; the simulator then
    // aligns and pads it like the runtime (2560 + 32).
    let p = a.device_address();
    assert_eq!(sim.alloc_requested(p), 2560);
    assert_eq!(
        sim.alloc_requested(p) % xstream_core::ALLOC_GRANULE as u64,
        0
    );
    assert_eq!(sim.alloc_size(p), 2592);
    // Bounds checks use `len`, not the rounded block.
    s.write(&a, 0, vec![5; ODD]).unwrap();
    s.copy(&a, 0, &b, 0, ODD).unwrap();
    let whole = s.read(&b, 0, ODD).unwrap();
    assert!(matches!(
        s.copy(&a, 0, &b, 0, ODD + 1),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.read(&a, 0, ODD + 1),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.write(&a, ODD, vec![1]),
        Err(Error::InvalidArgument(_))
    ));
    s.synchronize().unwrap();
    assert_eq!(whole.take().unwrap(), vec![5; ODD]);
    // A stream-ordered buffer: its size class is a multiple of the granule too.
    let o = s.alloc_async(ODD).unwrap();
    assert_eq!(o.len(), ODD);
    let q = o.device_address();
    assert_eq!(
        sim.alloc_requested(q) % xstream_core::ALLOC_GRANULE as u64,
        0
    );
    assert!(sim.alloc_requested(q) >= 2560);
    assert!(matches!(
        s.copy(&a, 0, &o, 0, ODD + 1),
        Err(Error::InvalidArgument(_))
    ));
    s.free_async(o).unwrap();
    s.synchronize().unwrap();
}
