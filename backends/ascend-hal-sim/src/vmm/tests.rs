use super::*;

const G: usize = GRANULARITY;

fn dev_prop() -> MemProp {
    MemProp {
        side: MEM_DEV_SIDE,
        devid: 0,
        pg_type: 1,
        mem_type: 0,
    }
}

fn rw() -> [AccessDesc; 1] {
    [AccessDesc {
        access: 3,
        id: 0,
        side: MEM_DEV_SIDE,
    }]
}

#[test]
fn granularity_and_properties() {
    assert_eq!(granularity(&dev_prop(), 0), Ok(G));
    assert_eq!(granularity(&dev_prop(), 1), Ok(G));
    assert_eq!(granularity(&dev_prop(), 2), Err(DRV_ERROR_INVALID_VALUE));
    let numa = MemProp {
        side: MEM_HOST_NUMA_SIDE,
        ..dev_prop()
    };
    assert_eq!(granularity(&numa, 0), Err(DRV_ERROR_NOT_SUPPORT));
    let far = MemProp {
        devid: 7,
        ..dev_prop()
    };
    assert_eq!(create(G, &far, 0), Err(DRV_ERROR_INVALID_VALUE));
    let odd_type = MemProp {
        mem_type: MEM_MAX_TYPE,
        ..dev_prop()
    };
    assert_eq!(create(G, &odd_type, 0), Err(DRV_ERROR_INVALID_VALUE));
}

#[test]
fn map_copy_unmap_remap_keeps_the_bytes() {
    let r = reserve(4 * G, 0, 0, 0).expect("reserve");
    assert_eq!(r % G, 0);
    let p1 = create(G, &dev_prop(), 0).expect("create");
    let p2 = create(2 * G, &dev_prop(), 0).expect("create");
    map(r, G, 0, p1, 0).expect("map p1");
    map(r + G, 2 * G, 0, p2, 0).expect("map p2");
    map(r + 3 * G, G, 0, p1, 0).expect("map p1 again");
    set_access(r, G, &rw()).expect("set access");
    // A copy in across the two adjacent mappings, as the runtime's copies do.
    let src: Vec<u8> = (0..3 * G).map(|i| (i % 251) as u8).collect();
    assert!(memory::is_device_range(r, 3 * G));
    assert!(!memory::is_device_range(r, 4 * G + 1));
    assert!(memory::copy(r, src.as_ptr() as usize, 3 * G));
    let mut back = vec![0u8; G];
    assert!(memory::copy(back.as_mut_ptr() as usize, r + 3 * G, G));
    assert_eq!(back, src[..G], "the second mapping of p1 shows its bytes");
    // Unmapped: inaccessible to the copies, and the bytes stay in the physical memory.
    unmap(r + 3 * G).expect("unmap");
    assert_eq!(memory::find(r + 3 * G), None);
    assert_eq!(unmap(r + 3 * G), Err(DRV_ERROR_INVALID_VALUE));
    map(r + 3 * G, G, 0, p1, 0).expect("remap");
    back.fill(0);
    assert!(memory::copy(back.as_mut_ptr() as usize, r + 3 * G, G));
    assert_eq!(back, src[..G], "bytes kept across unmap and remap");
    // Released while mapped: the memory stays until its last mapping goes.
    release(p1).expect("release p1");
    assert_eq!(release(p1), Err(DRV_ERROR_INVALID_VALUE), "released twice");
    assert_eq!(
        map(r + 3 * G, G, 0, p1, 0),
        Err(DRV_ERROR_INVALID_VALUE),
        "a released handle"
    );
    assert_eq!(address_free(r), Err(DRV_ERROR_INVALID_VALUE), "mapped");
    for at in [r, r + G, r + 3 * G] {
        unmap(at).expect("unmap");
    }
    assert!(
        with(|v| !v.handles.contains_key(&p1)),
        "p1 went with its last mapping"
    );
    release(p2).expect("release p2");
    address_free(r).expect("free");
    assert_eq!(address_free(r), Err(DRV_ERROR_INVALID_VALUE), "freed twice");
}

#[test]
fn bad_input_is_refused() {
    let inv = Some(DRV_ERROR_INVALID_VALUE);
    assert_eq!(reserve(0, 0, 0, 0).err(), inv);
    assert_eq!(reserve(G + 1, 0, 0, 0).err(), inv);
    assert_eq!(
        reserve(G, 3 * G, 0, 0).err(),
        inv,
        "alignment not a power of two"
    );
    assert_eq!(reserve(G, 0, 0, 3).err(), inv, "page type past the enum");
    assert_eq!(
        reserve(G, 0, 0, 1 << 8).err(),
        inv,
        "device share without an address"
    );
    assert_eq!(reserve(G, 0, 0, 1 << 4).err(), inv, "an unknown flag bit");
    assert_eq!(
        reserve(G, 0, G + 4096, 0).err(),
        inv,
        "an unaligned address"
    );
    assert_eq!(create(0, &dev_prop(), 0).err(), inv);
    assert_eq!(create(G / 2, &dev_prop(), 0).err(), inv);
    assert_eq!(create(G, &dev_prop(), 1).err(), inv);
    let r = reserve(4 * G, 2 * G, 0, 0).expect("reserve");
    assert_eq!(r % (2 * G), 0, "the alignment asked for");
    let p = create(G, &dev_prop(), 0).unwrap();
    let p2 = create(2 * G, &dev_prop(), 0).unwrap();
    assert_eq!(map(r + G / 2, G, 0, p, 0).err(), inv, "unaligned address");
    assert_eq!(
        map(r + 4 * G, G, 0, p, 0).err(),
        inv,
        "past the reservation"
    );
    assert_eq!(
        map(r + 3 * G, 2 * G, 0, p2, 0).err(),
        inv,
        "running past the end"
    );
    assert_eq!(map(r, 2 * G, 0, p, 0).err(), inv, "longer than the handle");
    assert_eq!(map(r, G, G, p2, 0).err(), inv, "a non-zero offset");
    assert_eq!(map(r, G, 0, p, 1).err(), inv, "a flag");
    assert_eq!(map(r, G, 0, 12345, 0).err(), inv, "an unknown handle");
    assert_eq!(unmap(r).err(), inv, "nothing mapped");
    map(r + G, 2 * G, 0, p2, 0).expect("map");
    assert_eq!(map(r + G, G, 0, p, 0).err(), inv, "over a mapping");
    assert_eq!(
        map(r + 2 * G, G, 0, p, 0).err(),
        inv,
        "over its second half"
    );
    assert_eq!(map(r, 2 * G, 0, p2, 0).err(), inv, "overlapping its start");
    assert_eq!(unmap(r + 2 * G).err(), inv, "inside a mapping");
    assert_eq!(
        set_access(r + G, G, &rw()).err(),
        inv,
        "cutting the mapping"
    );
    assert_eq!(
        set_access(r, 3 * G, &rw()).err(),
        inv,
        "over an unmapped byte"
    );
    assert_eq!(set_access(r + G, 2 * G, &[]).err(), inv, "no location");
    let bad_dev = [AccessDesc { id: 7, ..rw()[0] }];
    assert_eq!(
        set_access(r + G, 2 * G, &bad_dev).err(),
        inv,
        "a device not here"
    );
    let bad_type = [AccessDesc {
        access: 2,
        ..rw()[0]
    }];
    assert_eq!(
        set_access(r + G, 2 * G, &bad_type).err(),
        inv,
        "an access type"
    );
    set_access(r + G, 2 * G, &rw()).expect("set access");
    assert_eq!(
        address_free(r + G).err(),
        inv,
        "not the reservation's start"
    );
    unmap(r + G).expect("unmap");
    release(p).unwrap();
    release(p2).unwrap();
    address_free(r).expect("free");
}

#[test]
fn a_specified_address_is_taken_or_refused() {
    // Find a free aligned place, give it back, then ask for exactly it (another test's
    // mapping may land there in between: a few tries).
    let at = (0..8)
        .find_map(|_| {
            let r = reserve(2 * G, 0, 0, 0).unwrap();
            address_free(r).unwrap();
            reserve(G, 0, r, 0).ok().inspect(|&at| assert_eq!(at, r))
        })
        .expect("reserve at a free address");
    assert_eq!(reserve(G, 0, at, 0), Err(DRV_ERROR_BUSY), "taken");
    address_free(at).unwrap();
}

#[test]
fn an_import_shows_the_exporters_bytes_and_the_whitelist_holds() {
    let inv = Some(DRV_ERROR_INVALID_VALUE);
    let p = create(G, &dev_prop(), 0).unwrap();
    assert_eq!(export(p, 1, 0).err(), inv, "handle type FABRIC");
    assert_eq!(export(p, 0, 2).err(), inv, "flags other than bit 0");
    let sh = export(p, 0, 0).expect("export");
    assert_eq!(sh >> 32, u64::from(std::process::id()));
    // Not on the whitelist (this process imports its own export: the same path as another
    // process, through /proc/<pid>/fd).
    assert_eq!(import(sh, 0).err(), inv, "not whitelisted");
    assert_eq!(set_pids(sh, &[]).err(), inv, "no pids");
    assert_eq!(
        set_pids(sh ^ (1 << 40), &[1]).err(),
        inv,
        "another process's export"
    );
    set_pids(sh, &[std::process::id() as i32]).expect("set pid");
    assert_eq!(import(sh, 9).err(), inv, "a device not emulated");
    let q = import(sh, 0).expect("import");
    assert_eq!(export(q, 0, 0).err(), inv, "an import exported again");
    // Both handles mapped: bytes written through one are read through the other.
    let r = reserve(2 * G, 0, 0, 0).unwrap();
    map(r, G, 0, p, 0).unwrap();
    map(r + G, G, 0, q, 0).unwrap();
    let src = [0xC3u8; 128];
    assert!(memory::copy(r + 64, src.as_ptr() as usize, 128));
    let mut back = [0u8; 128];
    assert!(memory::copy(back.as_mut_ptr() as usize, r + G + 64, 128));
    assert_eq!(back, src, "the import shows the exporter's bytes");
    // Released and unmapped, the export's descriptor is closed: no new import; the one
    // made keeps its bytes.
    unmap(r).unwrap();
    release(p).unwrap();
    assert_eq!(import(sh, 0).err(), inv, "the exporter's memory is gone");
    back.fill(0);
    assert!(memory::copy(back.as_mut_ptr() as usize, r + G + 64, 128));
    assert_eq!(back, src);
    unmap(r + G).unwrap();
    release(q).unwrap();
    address_free(r).unwrap();
    // The whitelist off: any process imports.
    let p2 = create(G, &dev_prop(), 0).unwrap();
    let sh2 = export(p2, 0, 0).unwrap();
    assert_eq!(set_no_whitelist(sh2, 1, 1).err(), inv, "an attribute type");
    assert_eq!(set_no_whitelist(sh2, 0, 2).err(), inv, "an enable flag");
    set_no_whitelist(sh2, 0, 1).expect("no whitelist");
    let q2 = import(sh2, 0).expect("import without a whitelist");
    release(q2).unwrap();
    set_no_whitelist(sh2, 0, 0).unwrap();
    assert_eq!(import(sh2, 0).err(), inv, "the whitelist on again");
    release(p2).unwrap();
    assert_eq!(
        import(u64::from(std::process::id()) << 32, 0).err(),
        inv,
        "stdin"
    );
}

fn host_prop() -> MemProp {
    MemProp {
        side: MEM_HOST_SIDE,
        ..dev_prop()
    }
}

/// What the runtime's IPC events ask beyond plain sharing (`core/src/event/ipc_event.cc`):
/// the feature, an export with `IPC_EVENT_P2P_NO_CHECK_FLAG`, the exporter's physical device,
/// an import as device 65 (the host side), and both processes' mappings of one page.
#[test]
fn what_ipc_events_ask_is_answered() {
    let inv = Some(DRV_ERROR_INVALID_VALUE);
    assert!(supports_feature(0, FEATURE_SVM_VMM_NORMAL_GRANULARITY));
    assert!(!supports_feature(0, FEATURE_SVM_VMM_NORMAL_GRANULARITY - 1));
    assert!(!supports_feature(
        devinfo::device_count(),
        FEATURE_SVM_VMM_NORMAL_GRANULARITY
    ));
    // The event's device page and its host-side handle page, both exported with the flag.
    let dev = create(G, &dev_prop(), 0).unwrap();
    let host = create(G, &host_prop(), 0).unwrap();
    let sh_dev = export(dev, 0, EXPORT_P2P_NO_CHECK).expect("export with the flag");
    let sh_host = export(host, 0, EXPORT_P2P_NO_CHECK).unwrap();
    assert_eq!(share_info(sh_dev), Ok(0), "the exporter's device");
    assert_eq!(
        share_info(sh_host),
        Err(DRV_ERROR_NOT_SUPPORT),
        "host memory names no device"
    );
    assert_eq!(share_info(sh_dev ^ 0xffff).err(), inv, "not an export");
    let unexported = create(G, &dev_prop(), 0).unwrap();
    let raw = with(|v| v.handles[&unexported].fd);
    assert_eq!(
        share_info((u64::from(std::process::id()) << 32) | raw as u64).err(),
        inv,
        "a memfd of ours never exported"
    );
    release(unexported).unwrap();
    for sh in [sh_dev, sh_host] {
        set_no_whitelist(sh, 0, 1).unwrap();
    }
    // The opening side: the handle page and the device page as the host (65), the device page
    // as the device; 64 is neither.
    assert_eq!(import(sh_host, IMPORT_HOST_DEVID - 1).err(), inv);
    let q_host = import(sh_host, IMPORT_HOST_DEVID).expect("import as the host");
    let q_dev_host = import(sh_dev, IMPORT_HOST_DEVID).unwrap();
    let q_dev = import(sh_dev, 0).unwrap();
    let r = reserve(4 * G, 0, 0, 0).unwrap();
    for (i, h) in [dev, q_dev_host, q_dev, host].into_iter().enumerate() {
        map(r + i * G, G, 0, h, 0).unwrap();
    }
    // A byte written through the exporter's device mapping (the record's write-value) is seen
    // through both of the opener's mappings.
    let one = [1u8];
    assert!(memory::copy(r + 17, one.as_ptr() as usize, 1));
    for at in [r + G + 17, r + 2 * G + 17] {
        let mut b = [0u8];
        assert!(memory::copy(b.as_mut_ptr() as usize, at, 1));
        assert_eq!(b, one);
    }
    for i in 0..4 {
        unmap(r + i * G).unwrap();
    }
    address_free(r).unwrap();
    for h in [q_host, q_dev_host, q_dev, dev, host] {
        release(h).unwrap();
    }
}
