//! Allocation granularity on the host backend: the heap block under a buffer is rounded up to
//! `ALLOC_GRANULE`, while `len()` and every bounds check stay at the requested length.

mod common;

use common::{dev, nb};
use xstream_core::{alloc_size, Buffer, Device, Error, Stream, ALLOC_GRANULE};

/// An f16 buffer of 1031 elements: the odd size NCCL over-read on CUDA (issue 21).
const ODD: usize = 2062;

#[test]
fn odd_buffer_keeps_its_len_over_a_rounded_block() {
    let d = dev();
    let b = d.alloc(ODD).unwrap();
    assert_eq!(b.len(), ODD);
    assert_eq!(alloc_size(ODD), Some(2560));
    assert_eq!(b.allocated_len(), 2560);
    assert_eq!(b.allocated_len() % ALLOC_GRANULE, 0);
    // A one-byte buffer takes a whole granule; an exact multiple takes nothing more.
    assert_eq!(d.alloc(1).unwrap().allocated_len(), ALLOC_GRANULE);
    assert_eq!(d.alloc(1024).unwrap().allocated_len(), 1024);
    // The whole buffer (and only it) is what xstream reads back.
    assert_eq!(b.snapshot().len(), ODD);
    assert_eq!(alloc_size(usize::MAX), None);
}

#[test]
fn bounds_checks_use_len_not_the_rounded_block() {
    let d = dev();
    let s = nb(&d);
    let a = d.alloc(ODD).unwrap();
    let b = d.alloc(ODD).unwrap();
    s.write(&a, 0, vec![7; ODD]).unwrap();
    s.copy(&a, 0, &b, 0, ODD).unwrap();
    let whole = s.read(&b, 0, ODD).unwrap();
    // One byte past `len` is refused although the block underneath has room for it.
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
    assert!(matches!(
        s.memset(&a, 1, ODD, 0),
        Err(Error::InvalidArgument(_))
    ));
    s.synchronize().unwrap();
    assert_eq!(whole.take().unwrap(), vec![7; ODD]);
    // Stream-ordered buffers come from the same allocation path.
    let o = s.alloc_async(ODD).unwrap();
    assert_eq!(o.len(), ODD);
    assert_eq!(o.allocated_len(), 2560);
    assert!(matches!(
        s.copy(&a, 0, &o, 0, ODD + 1),
        Err(Error::InvalidArgument(_))
    ));
    s.free_async(o).unwrap();
    s.synchronize().unwrap();
}
