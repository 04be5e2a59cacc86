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

/// Sharing physical memory: physical memory is created exportable, an export is one
/// `cuMemExportToShareableHandle` giving a descriptor that crosses a socket
/// (`xstream_cuda::fdpass`), an import of the received handle is one
/// `cuMemImportFromShareableHandle`, and the refusals (the exporting process, a handle
/// without its descriptor) reach no driver call. (Between two processes: `tests/vmm_share.rs`
/// on a GPU; the null driver's handles share no bytes.)
pub(crate) fn sharing(null: &Null, dev: &xstream_cuda::CudaDevice) {
    use xstream_core::{Capabilities, Error, ShareableHandle, VirtualMemory};
    let caps = dev.info().capabilities;
    assert!(
        caps.contains(Capabilities::SHAREABLE_PHYSICAL),
        "the null driver reports HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED"
    );
    let g = dev.granularity().expect("granularity").minimum;
    let p = dev.create_physical(g).expect("create_physical");
    null.reset();
    let h = p.export_shareable().expect("export");
    assert_eq!(null.calls("cuMemExportToShareableHandle"), 1);
    assert!(h.needs_fd() && h.fd().is_some() && h.size() == g);
    // The exporting process imports nothing: no driver call.
    let e = dev.import_physical(&h).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    // Bytes without the descriptor are refused when parsed.
    assert!(ShareableHandle::from_bytes(h.as_bytes()).is_err());
    assert_eq!(null.calls("cuMemImportFromShareableHandle"), 0);
    // Across a socket, then the backend's import hook (the portable import refuses this
    // process, so the hook is called directly to count the driver's part).
    let (a, b) = std::os::unix::net::UnixStream::pair().expect("socketpair");
    xstream_cuda::fdpass::send_handle(&a, &h).expect("send");
    let got = xstream_cuda::fdpass::recv_handle(&b).expect("receive");
    let raw = dev
        .raw_import(&got)
        .expect("import of the received descriptor");
    assert_eq!(null.calls("cuMemImportFromShareableHandle"), 1);
    null.reset();
    drop(raw);
    drop(p);
    assert_eq!(null.calls("cuMemRelease"), 2, "the import and the original");
    println!("sharing: one driver call to export, one to import; refusals reach no driver");
}

/// The CPU-cost row of `gpu_ops`' virtual-memory row: `VirtualRange::map` + `set_access` +
/// `unmap` of one granule against `cuMemMap` + `cuMemSetAccess` + `cuMemUnmap` into the same
/// double (its own reservation and handle).
pub(crate) fn map_cycle_timing(
    null: &Null,
    dev: &xstream_cuda::CudaDevice,
    reps: usize,
    n: usize,
) -> (String, [f64; 3]) {
    use xstream_core::VirtualMemory;
    let g = dev.granularity().expect("granularity").minimum;
    let range = dev.reserve(g).expect("reserve");
    let phys = dev.create_physical(g).expect("create_physical");
    // SAFETY: a plain C struct: all zeros is a valid value, the fields below are set.
    let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    let (mut h, mut va) = (0u64, 0u64);
    // SAFETY: valid out-pointers and property; the context is current on this thread.
    ck(
        unsafe { sys::cuMemCreate(&mut h, g, &prop, 0) },
        "cuMemCreate",
    );
    // SAFETY: as above.
    ck(
        unsafe { sys::cuMemAddressReserve(&mut va, g, g, 0, 0) },
        "cuMemAddressReserve",
    );
    let desc = sys::CUmemAccessDesc {
        location: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: 0,
        },
        flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    let row = compare(
        null,
        reps,
        n,
        |n| {
            timed(n, || {
                range.map(0, &phys).unwrap();
                range.set_access(0, g, dev).unwrap();
                range.unmap(0).unwrap();
            })
        },
        |n| {
            timed(n, || {
                // SAFETY: `va..va + g` is this row's reservation, unmapped between calls;
                // `h` is a live handle of `g` bytes; one valid descriptor.
                unsafe {
                    ck(sys::cuMemMap(va, g, 0, h, 0), "cuMemMap");
                    ck(sys::cuMemSetAccess(va, g, &desc, 1), "cuMemSetAccess");
                    ck(sys::cuMemUnmap(va, g), "cuMemUnmap");
                }
            })
        },
    );
    // SAFETY: nothing is mapped in the reservation; the handle is released once.
    unsafe {
        ck(sys::cuMemAddressFree(va, g), "cuMemAddressFree");
        ck(sys::cuMemRelease(h), "cuMemRelease");
    }
    (
        "vmm: map + set_access + unmap of one granule vs cuMemMap + cuMemSetAccess + cuMemUnmap"
            .to_string(),
        row,
    )
}
