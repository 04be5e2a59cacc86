//! Host registration on the simulator (`aclrtHostRegister` / `aclrtHostUnregister`): a
//! registered range is page-locked (captured asynchronous copies accept it, a pageable one is
//! refused), round trips through the portable async copies, is unregistered when the buffer
//! goes, and bad input is refused.
mod common;

use xstream_core::{
    CaptureMode, Device, Error, Graph as _, PinnedAllocDesc, PinnedFlags, Stream, StreamDesc,
    TranslationPolicy,
};

#[test]
fn registered_memory_round_trips_and_is_unregistered_on_drop() {
    if !common::in_sim_process() {
        return;
    }
    let _g = common::global_lock();
    let sim = common::Sim::get();
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let before = sim.call_count("aclrtHostUnregister");
    let data: Vec<u8> = (0..5000u32).map(|i| (i % 253) as u8).collect();
    let h = d
        .register_host(data.clone(), &PinnedAllocDesc::new())
        .unwrap();
    assert!(h.is_page_locked());
    assert_eq!(
        h.as_ptr() as usize % 4096,
        0,
        "registered address is page-aligned"
    );
    let buf = d.alloc(5000).unwrap();
    s.copy_to_device(&h, 0, &buf, 0, 5000).unwrap();
    let mut back = d
        .register_host(vec![0; 5000], &PinnedAllocDesc::new())
        .unwrap();
    s.copy_to_host(&buf, 0, &mut back, 0, 5000).unwrap();
    assert_eq!(back.as_slice().unwrap(), &data[..]);
    drop((h, back));
    s.synchronize().unwrap();
    assert_eq!(sim.call_count("aclrtHostUnregister"), before + 2);
}

/// The runtime's capture rule: a captured host-to-device `aclrtMemcpyAsync` needs page-locked
/// host memory; a registered range qualifies, a pageable vector does not (107000, the
/// runtime's `RT_ERROR_INVALID_VALUE`).
#[test]
fn captured_copy_accepts_a_registered_range() {
    if !common::in_sim_process() {
        return;
    }
    // Peer access and registrations are process-wide: tests sharing a process (valgrind)
    // take turns.
    let _g = common::global_lock();
    let d = common::device(0);
    let t = d.fns();
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let buf = d.alloc(64).unwrap();
    let h = d
        .register_host(vec![7; 64], &PinnedAllocDesc::new())
        .unwrap();
    let pageable = [1u8; 64];
    let raw_h2d = |src: *const u8| {
        // SAFETY: `buf` and the source hold 64 live bytes until the graph below has run; the
        // stream is live and its context current.
        unsafe {
            (t.aclrtMemcpyAsync)(
                xstream_core::Buffer::device_address(&buf) as *mut std::ffi::c_void,
                64,
                src.cast(),
                64,
                1,
                s.as_raw().0,
            )
        }
    };
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    d.bind().unwrap();
    assert_eq!(raw_h2d(pageable.as_ptr()), 107_000, "pageable source");
    assert_eq!(raw_h2d(h.as_ptr()), 0, "registered source");
    let g = s.end_capture().unwrap();
    // Recorded, not run: the buffer is still zero until the graph runs.
    let before = s.read(&buf, 0, 64).unwrap();
    s.synchronize().unwrap();
    assert_eq!(before.take().unwrap(), vec![0; 64]);
    g.replay(&s).unwrap();
    let rb = s.read(&buf, 0, 64).unwrap();
    s.synchronize().unwrap();
    assert_eq!(rb.take().unwrap(), vec![7; 64]);
}

#[test]
fn bad_registrations_are_clear_errors() {
    if !common::in_sim_process() {
        return;
    }
    let _g = common::global_lock();
    let sim = common::Sim::get();
    let d = common::device(0);
    assert!(matches!(
        d.register_host(Vec::new(), &PinnedAllocDesc::new()),
        Err(Error::InvalidArgument(_))
    ));
    let strict = PinnedAllocDesc::new()
        .flags(PinnedFlags::WRITE_COMBINED)
        .policy(TranslationPolicy::Strict);
    assert!(d.register_host(vec![1; 16], &strict).is_err());
    // The runtime's own checks, through the raw symbols.
    let t = d.fns();
    let (reg, unreg) = (t.aclrtHostRegister.unwrap(), t.aclrtHostUnregister.unwrap());
    let h = d
        .register_host(vec![0; 8192], &PinnedAllocDesc::new())
        .unwrap();
    let mut dev = std::ptr::null_mut();
    let p = h.as_ptr() as *mut std::ffi::c_void;
    // SAFETY: `p` is a live registered range of 8192 bytes; `dev` a live out-parameter.
    unsafe {
        assert_eq!(reg(p, 4096, 0, &mut dev), 100_000, "overlap");
        assert_eq!(
            reg(p.cast::<u8>().add(1).cast(), 16, 0, &mut dev),
            100_000,
            "unaligned"
        );
        assert_eq!(reg(p, 0, 0, &mut dev), 100_000, "empty");
        assert_eq!(reg(p, 16, 3, &mut dev), 100_000, "unknown type");
        assert_eq!(
            unreg(p.cast::<u8>().add(4096).cast()),
            100_000,
            "not a range start"
        );
    }
    drop(h);
    // An injected failure: the error names the call, nothing is left registered.
    assert_eq!(sim.set_faults("aclrtHostRegister:1:507000"), 0);
    let e = d
        .register_host(vec![3; 4096], &PinnedAllocDesc::new())
        .unwrap_err();
    assert!(e.to_string().contains("aclrtHostRegister"), "{e}");
    sim.set_faults("");
    let h = d
        .register_host(vec![3; 4096], &PinnedAllocDesc::new())
        .unwrap();
    assert_eq!(h.as_slice().unwrap(), &[3u8; 4096][..]);
}
