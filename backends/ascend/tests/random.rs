//! The built-in random fill (`Kernel::Random`) on the Ascend backend over the ACL runtime
//! simulator (a test double): `aclrtRandomNumAsync` with the counter written in stream order,
//! the capability probed per chip, and a capture replay.

mod common;

use xstream_core::{
    Capabilities, CaptureMode, Device, Distribution, Graph, Kernel, RandomFill, RandomType, Stream,
    StreamDesc,
};

fn uniform() -> RandomFill {
    RandomFill::new(
        Distribution::Uniform { min: 2.0, max: 4.0 },
        RandomType::F32,
        99,
    )
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn fills_follow_the_counter_in_stream_order() {
    if !common::in_sim_process() {
        return;
    }
    let _g = common::global_lock();
    let dev = common::device(0);
    assert!(dev.info().capabilities.contains(Capabilities::RANDOM));
    let s = dev.create_stream(&StreamDesc::new()).unwrap();
    let buf = dev.alloc(1024).unwrap();
    let f = uniform();
    // Three fills queued back to back: offsets 0, 0 and 4 (16 elements later).
    for (at, off) in [(0, 0), (256, 0), (512, 4)] {
        s.launch_builtin(Kernel::Random {
            buf: &buf,
            offset: at,
            len: 256,
            fill: f.at(off),
        })
        .unwrap();
    }
    let rb = s.read(&buf, 0, 768).unwrap();
    s.synchronize().unwrap();
    let v = f32s(&rb.take().unwrap());
    assert!(v.iter().all(|x| (2.0..=4.0).contains(x)), "{v:?}");
    assert_eq!(v[..64], v[64..128], "same seed and offset");
    assert_eq!(v[16..64], v[128..176], "offset 4 starts 16 elements later");
    // The simulator runs the reference generator: the bytes match it here (not a portable
    // promise: real hardware converts its own way).
    let mut want = vec![0u8; 256];
    xstream_core::random::fill(&f, &mut want);
    assert_eq!(f32s(&want), v[..64]);
}

#[test]
fn a_captured_fill_replays_with_its_counter() {
    if !common::in_sim_process() {
        return;
    }
    let _g = common::global_lock();
    let dev = common::device(0);
    if !dev.info().capabilities.contains(Capabilities::CAPTURE) {
        eprintln!("SKIP: the simulated runtime has no capture");
        return;
    }
    let s = dev.create_stream(&StreamDesc::new()).unwrap();
    let buf = dev.alloc(64).unwrap();
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    s.launch_builtin(Kernel::Random {
        buf: &buf,
        offset: 0,
        len: 64,
        fill: uniform().at(3),
    })
    .unwrap();
    let g = s.end_capture().unwrap();
    let rb = s.read(&buf, 0, 64).unwrap();
    s.synchronize().unwrap();
    assert!(
        rb.take().unwrap().iter().all(|b| *b == 0),
        "captured, not run"
    );
    g.replay(&s).unwrap();
    let rb = s.read(&buf, 0, 64).unwrap();
    s.synchronize().unwrap();
    let mut want = vec![0u8; 64];
    xstream_core::random::fill(&uniform().at(3), &mut want);
    assert_eq!(rb.take().unwrap(), want);
}

#[test]
fn chips_without_the_task_leave_the_capability_unset() {
    if !common::in_sim_process() {
        return;
    }
    let _g = common::global_lock();
    common::each_product(&["a2", "910", "310p"], |product, d| {
        let has = product == "a2";
        assert_eq!(
            d.info().capabilities.contains(Capabilities::RANDOM),
            has,
            "{product}"
        );
        let s = d.create_stream(&StreamDesc::new()).unwrap();
        let b = d.alloc(16).unwrap();
        let r = s.launch_builtin(Kernel::Random {
            buf: &b,
            offset: 0,
            len: 16,
            fill: uniform(),
        });
        assert_eq!(r.is_ok(), has, "{product}: {r:?}");
        if !has {
            assert!(r.unwrap_err().is_unsupported(), "{product}");
        }
        s.synchronize().unwrap();
    });
}

#[test]
fn the_default_stream_fills_with_a_block_of_its_own() {
    if !common::in_sim_process() {
        return;
    }
    let _g = common::global_lock();
    let dev = common::device(0);
    let d = dev.default_stream().unwrap();
    let buf = dev.alloc(128).unwrap();
    for off in [7, 9] {
        d.launch_builtin(Kernel::Random {
            buf: &buf,
            offset: 0,
            len: 128,
            fill: uniform().at(off),
        })
        .unwrap();
        let rb = d.read(&buf, 0, 128).unwrap();
        d.synchronize().unwrap();
        let mut want = vec![0u8; 128];
        xstream_core::random::fill(&uniform().at(off), &mut want);
        assert_eq!(rb.take().unwrap(), want, "offset {off}");
    }
}

#[test]
fn fills_from_two_threads_on_one_stream_keep_their_counters() {
    if !common::in_sim_process() {
        return;
    }
    let _g = common::global_lock();
    let dev = common::device(0);
    let s = dev.create_stream(&StreamDesc::new()).unwrap();
    // Each thread queues 200 fills at its own offsets without waiting in between; each fill
    // must read the counter its own copy wrote.
    let queued: Vec<Vec<(u64, xstream_ascend::AscendBuffer)>> = std::thread::scope(|t| {
        let hs: Vec<_> = [0u64, 1000]
            .into_iter()
            .map(|base| {
                let (dev, s) = (&dev, &s);
                t.spawn(move || {
                    (0..200u64)
                        .map(|i| {
                            let buf = dev.alloc(16).unwrap();
                            s.launch_builtin(Kernel::Random {
                                buf: &buf,
                                offset: 0,
                                len: 16,
                                fill: uniform().at(base + i),
                            })
                            .unwrap();
                            (base + i, buf)
                        })
                        .collect()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    s.synchronize().unwrap();
    for (off, buf) in queued.iter().flatten() {
        let rb = s.read(buf, 0, 16).unwrap();
        s.synchronize().unwrap();
        let mut want = vec![0u8; 16];
        xstream_core::random::fill(&uniform().at(*off), &mut want);
        assert_eq!(rb.take().unwrap(), want, "offset {off}");
    }
}
