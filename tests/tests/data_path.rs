//! The data path on the host backend (the reference) and on the Ascend simulator: page-locked
//! host buffers, asynchronous copies, stream-ordered allocation, and their bad inputs (the
//! demo's pipeline: `crates/xstream/tests/pipeline.rs`). (The CUDA versions are in `backends/cuda/tests/data_path.rs`.)

use xstream_core::{
    lcg_reference, Backend, Buffer, Device, Error, Kernel, PinnedAllocDesc, PinnedFlags, Stream,
    StreamDesc, TranslationPolicy,
};
use xstream_host::HostDevice;

fn host() -> HostDevice {
    HostDevice::new_isolated(0)
}

#[test]
fn host_page_locked_roundtrip_through_a_kernel() {
    let d = host();
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let mut src = d
        .alloc_pinned(
            4096,
            &PinnedAllocDesc::new().flags(PinnedFlags::PORTABLE | PinnedFlags::WRITE_COMBINED),
        )
        .unwrap();
    assert!(src.is_page_locked());
    assert_eq!(
        src.as_ptr() as usize % xstream_core::hostmem::PINNED_ALIGN,
        0
    );
    assert!(src.as_slice().unwrap().iter().all(|&b| b == 0), "zeroed");
    for (i, b) in src.as_mut_slice().unwrap().iter_mut().enumerate() {
        *b = (i % 253) as u8;
    }
    let mut dst = d.alloc_pinned(4096, &PinnedAllocDesc::new()).unwrap();
    let buf = d.alloc(4096).unwrap();
    s.launch_builtin(Kernel::Delay(std::time::Duration::from_millis(5)))
        .unwrap();
    s.copy_to_device(&src, 0, &buf, 0, 4096).unwrap();
    s.launch_builtin(Kernel::Lcg {
        buf: &buf,
        rounds: 3,
    })
    .unwrap();
    s.copy_to_host(&buf, 1024, &mut dst, 0, 3072).unwrap();
    // No synchronize: the fence makes as_slice wait for the copy.
    let mut want = src.as_slice().unwrap().to_vec();
    lcg_reference(&mut want, 3);
    let got = dst.as_slice().unwrap();
    assert_eq!(&got[..3072], &want[1024..]);
    assert!(got[3072..].iter().all(|&b| b == 0));
}

#[test]
fn host_fence_orders_uses_on_two_streams() {
    let d = host();
    let (a, b) = (
        d.create_stream(&StreamDesc::new()).unwrap(),
        d.create_stream(&StreamDesc::new()).unwrap(),
    );
    let mut h = d.alloc_pinned(64, &PinnedAllocDesc::new()).unwrap();
    h.as_mut_slice().unwrap().fill(9);
    let zeros = d.alloc(64).unwrap();
    a.launch_builtin(Kernel::Delay(std::time::Duration::from_millis(30)))
        .unwrap();
    a.copy_to_host(&zeros, 0, &mut h, 0, 64).unwrap();
    // b reads h after a's copy into it (b waits on h's fence), so it sees zeros.
    let y = d.alloc(64).unwrap();
    b.copy_to_device(&h, 0, &y, 0, 64).unwrap();
    b.synchronize().unwrap();
    assert_eq!(y.snapshot(), vec![0u8; 64]);
}

#[test]
fn host_bad_copies_are_clear_errors() {
    let d = host();
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let mut h = d.alloc_pinned(1024, &PinnedAllocDesc::new()).unwrap();
    let buf = d.alloc(512).unwrap();
    let inv = |r: xstream_core::Result<()>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(inv(s.copy_to_device(&h, 0, &buf, 0, 1024)), "device side");
    assert!(inv(s.copy_to_device(&h, 1000, &buf, 0, 100)), "host side");
    assert!(inv(s.copy_to_host(&buf, 500, &mut h, 0, 13)), "source");
    assert!(
        inv(s.copy_to_host(&buf, 0, &mut h, usize::MAX, 2)),
        "overflow"
    );
    // Zero bytes: a no-op (docs/semantics.md, zero-length buffers and copies).
    s.copy_to_device(&h, 0, &buf, 0, 0)
        .expect("empty copy is a no-op");
    // A zero-length host buffer: empty, and copies of it are no-ops.
    let mut empty = d.alloc_pinned(0, &PinnedAllocDesc::new()).unwrap();
    assert_eq!(empty.len(), 0);
    assert!(empty.is_empty() && empty.as_slice().unwrap().is_empty());
    s.copy_to_device(&empty, 0, &buf, 0, 0).unwrap();
    s.copy_to_host(&buf, 0, &mut empty, 0, 0).unwrap();
    assert!(matches!(
        s.copy_to_device(&empty, 0, &buf, 0, 1),
        Err(Error::InvalidArgument(_))
    ));
    // A device buffer of another device.
    let other = HostDevice::new_isolated(1);
    let far = other.alloc(512).unwrap();
    assert!(matches!(
        s.copy_to_device(&h, 0, &far, 0, 16),
        Err(Error::WrongDevice(_))
    ));
    assert!(matches!(
        s.copy_to_host(&far, 0, &mut h, 0, 16),
        Err(Error::WrongDevice(_))
    ));
    assert!(matches!(s.free_async(far), Err(Error::WrongDevice(_))));
    // A host buffer of another device, not PORTABLE: refused; PORTABLE: allowed.
    let h1 = other.alloc_pinned(64, &PinnedAllocDesc::new()).unwrap();
    assert!(matches!(
        s.copy_to_device(&h1, 0, &buf, 0, 16),
        Err(Error::WrongDevice(_))
    ));
    let p1 = other
        .alloc_pinned(64, &PinnedAllocDesc::new().flags(PinnedFlags::PORTABLE))
        .unwrap();
    s.copy_to_device(&p1, 0, &buf, 0, 16).unwrap();
    // Inside a capture: refused, and the capture stays usable.
    s.begin_capture(xstream_core::CaptureMode::Global).unwrap();
    assert!(matches!(
        s.copy_to_device(&h, 0, &buf, 0, 16),
        Err(Error::Unsupported { .. })
    ));
    s.end_capture().unwrap();
    s.synchronize().unwrap();
}

#[test]
fn host_stream_ordered_allocation_is_the_reference() {
    let d = host();
    let (a, b) = (
        d.create_stream(&StreamDesc::new()).unwrap(),
        d.create_stream(&StreamDesc::new()).unwrap(),
    );
    for round in 0..100u8 {
        let x = a.alloc_async(256).unwrap();
        assert_eq!(x.len(), 256);
        a.memset(&x, 0, 256, round).unwrap();
        // Used on b, freed on a: the memory stays alive until b's copy ran.
        let y = d.alloc(256).unwrap();
        b.launch_builtin(Kernel::Delay(std::time::Duration::from_micros(200)))
            .unwrap();
        a.synchronize().unwrap();
        b.copy(&x, 0, &y, 0, 256).unwrap();
        a.free_async(x).unwrap();
        b.synchronize().unwrap();
        assert!(y.snapshot().iter().all(|&v| v == round));
    }
    // Zero bytes: a zero-length buffer (docs/semantics.md).
    let empty = a.alloc_async(0).expect("zero-length buffer");
    assert_eq!(xstream_core::Buffer::len(&empty), 0);
    a.free_async(empty)
        .expect("free_async of a zero-length buffer");
}

#[test]
fn host_flag_policy_is_applied() {
    // The host table accepts every flag; a strict table that lacks one refuses it, best
    // effort drops and reports it.
    let d = host();
    let all = PinnedFlags::all();
    let h = d
        .alloc_pinned(
            16,
            &PinnedAllocDesc::new()
                .flags(all)
                .policy(TranslationPolicy::Strict),
        )
        .unwrap();
    assert_eq!(h.flags(), all);
    assert_eq!(h.report().native.len(), 3);
}

#[test]
fn ascend_sim_stages_captured_writes() {
    use xstream_ascend::AscendBackend;
    // Runs in a child process started with the simulator's environment.
    if !xstream_conformance::simulator::run_in_child(2) {
        return;
    }
    xstream_conformance::simulator::setup(2);
    let _g = xstream_conformance::simulator::global_lock();
    let d = AscendBackend::open(0).expect("simulated Ascend device");
    let s = d
        .create_stream(&StreamDesc::new().flags(xstream_core::StreamFlags::NON_BLOCKING))
        .unwrap();
    let buf = d.alloc(256).unwrap();
    // Outside a capture the pageable path works (staged by the runtime). Inside one, ACL
    // refuses a pageable host source (the simulator's `host_mem` rule, unit-tested there), so
    // `write` stages the bytes in page-locked memory that the graph keeps: the replay copies
    // them.
    s.write(&buf, 0, vec![1u8; 256]).unwrap();
    s.synchronize().unwrap();
    let sim = xstream_conformance::simulator::Controls::get();
    let before = sim.call_count("aclrtMallocHost");
    s.begin_capture(xstream_core::CaptureMode::Global).unwrap();
    s.write(&buf, 0, vec![2u8; 256]).unwrap();
    let g = s.end_capture().unwrap();
    assert_eq!(sim.call_count("aclrtMallocHost"), before + 1, "staged");
    xstream_core::Graph::replay(&g, &s).unwrap();
    let rb = s.read(&buf, 0, 256).unwrap();
    s.synchronize().unwrap();
    assert_eq!(rb.take().unwrap(), vec![2u8; 256]);
    // Page-locked buffers take the native path.
    let mut h = d.alloc_pinned(256, &PinnedAllocDesc::new()).unwrap();
    s.copy_to_host(&buf, 0, &mut h, 0, 256).unwrap();
    assert_eq!(h.as_slice().unwrap(), &[2u8; 256]);
    assert!(matches!(
        d.alloc_pinned(
            16,
            &PinnedAllocDesc::new().flags(PinnedFlags::WRITE_COMBINED)
        ),
        Err(Error::UnsupportedFlag { .. })
    ));
}
