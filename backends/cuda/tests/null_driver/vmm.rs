//! Virtual memory over the null driver.

use super::*;

/// Virtual memory over the driver: one driver call per operation, bad input refused before
/// any driver call (the checks live in xstream-core), bytes through a mapped range, and the
/// deferred releases of a range dropped while a buffer of it lives.
pub(crate) fn virtual_memory(null: &Null, dev: &xstream_cuda::CudaDevice, s: &CudaStream) {
    use xstream_core::{Error, VirtualMemory};
    const VMM: [&str; 7] = [
        "cuMemAddressReserve",
        "cuMemAddressFree",
        "cuMemCreate",
        "cuMemRelease",
        "cuMemMap",
        "cuMemUnmap",
        "cuMemSetAccess",
    ];
    let counts = |null: &Null| VMM.map(|f| null.calls(f));
    assert!(
        dev.info()
            .capabilities
            .contains(xstream_core::Capabilities::VIRTUAL_MEMORY),
        "the null driver reports VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED"
    );
    null.reset();
    let g = dev.granularity().expect("granularity").minimum;
    assert_eq!(g, 2 << 20);
    assert_eq!(null.calls("cuMemGetAllocationGranularity"), 2);
    let range = dev.reserve(4 * g).expect("reserve");
    let p = dev.create_physical(g).expect("create_physical");
    assert_eq!(counts(null), [1, 0, 1, 0, 0, 0, 0]);
    null.reset();
    let invalid = |r: xstream_core::Result<()>, what: &str| {
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{what}: {r:?}")
    };
    invalid(dev.reserve(g + 1).map(drop), "unaligned reserve");
    invalid(dev.create_physical(g / 2).map(drop), "unaligned create");
    invalid(range.map(g / 2, &p), "unaligned map");
    invalid(range.map(4 * g, &p), "map past the end");
    invalid(range.unmap(0), "unmap of nothing");
    invalid(range.set_access(0, g, dev), "access over nothing");
    assert_eq!(counts(null), [0; 7], "bad input reached the driver");
    range.map(0, &p).expect("map");
    invalid(range.map(0, &p), "map over a mapping");
    invalid(range.buffer(0, g).map(drop), "buffer before access");
    range.set_access(0, g, dev).expect("set_access");
    assert_eq!(counts(null), [0, 0, 0, 0, 1, 0, 1]);
    let b = range.buffer(0, g).expect("buffer");
    assert_eq!(b.device_address(), range.address());
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 13 % 251) as u8).collect();
    s.write_from_blocking(&b, &data)
        .expect("write into the mapped range");
    let mut back = vec![0u8; 4096];
    s.read_into_blocking(b.view().slice(0..4096).expect("view"), &mut back[..])
        .expect("read back");
    assert_eq!(back, data, "bytes through the mapped range");
    invalid(range.unmap(0), "unmap while a buffer uses it");
    assert_eq!(null.calls("cuMemUnmap"), 0);
    drop(b);
    s.synchronize().expect("synchronize");
    range.unmap(0).expect("unmap after the buffer");
    assert_eq!(null.calls("cuMemUnmap"), 1);
    // A range and its handle dropped while a buffer of it lives: nothing is released until
    // the buffer goes, then each release once.
    range.map(g, &p).expect("map again");
    range.set_access(g, g, dev).expect("set_access");
    let b = range.buffer(g, g).expect("buffer");
    null.reset();
    drop(range);
    drop(p);
    assert_eq!(counts(null), [0; 7], "a drop released what a buffer uses");
    drop(b);
    let guard = Duration::from_secs(10);
    assert_eq!(wait_calls(null, "cuMemUnmap", 1, guard), 1);
    assert_eq!(wait_calls(null, "cuMemRelease", 1, guard), 1);
    assert_eq!(wait_calls(null, "cuMemAddressFree", 1, guard), 1);
    println!("virtual memory: one driver call per operation; bad input never reaches the driver");
}
