//! CUDA modules, kernels and cudarc interop. Every test skips (prints `SKIP: <test>: <reason>`
//! and passes) when no CUDA device is available; run with `--test-threads=1` on the GPU
//! machine (the allocation count is per thread, but launches share the device).
#![allow(unsafe_code)]

use xstream_conformance::modules::FILL_PTX;
use xstream_core::module::{lcg_launch, BUILTIN_LCG};
use xstream_core::{
    lcg_reference, Backend, CaptureMode, Device, Error, Event, EventFlags, Function, Graph, Kernel,
    KernelArg, LaunchConfig, Module, ModuleSource, ParamKind, Stream, StreamDesc, StreamFlags,
};
use xstream_cuda::{CudaBackend, CudaBuffer, CudaDevice, CudaEvent, CudaStream};

#[global_allocator]
static GLOBAL: xstream_conformance::alloc_count::CountingAlloc =
    xstream_conformance::alloc_count::CountingAlloc;

fn device(test: &str) -> Option<CudaDevice> {
    if let Err(e) = CudaBackend::availability() {
        xstream_conformance::report_skip(test, &e);
        return None;
    }
    match CudaBackend::open(0) {
        Ok(d) => Some(d),
        Err(e) => panic!("{test}: CUDA is available but open(0) failed: {e}"),
    }
}

fn nb() -> StreamDesc {
    StreamDesc::new().flags(StreamFlags::NON_BLOCKING)
}

fn read(s: &CudaStream, b: &CudaBuffer) -> Vec<u8> {
    let rb = s.read(b, 0, xstream_core::Buffer::len(b)).unwrap();
    s.synchronize().unwrap();
    rb.take().unwrap()
}

fn fill_args(b: &CudaBuffer, words: u32, v: u32) -> [KernelArg<'_, CudaBuffer>; 3] {
    [
        KernelArg::Buffer(b),
        KernelArg::U32(words),
        KernelArg::U32(v),
    ]
}

#[test]
fn builtin_module_equals_kernel_enum_and_reference() {
    let Some(d) = device("builtin_module_equals_kernel_enum_and_reference") else {
        return;
    };
    let f = d.builtin_module().unwrap().function(BUILTIN_LCG).unwrap();
    assert_eq!(f.param_sizes(), Some(&[8usize, 4, 4][..]));
    assert_eq!(f.params().map(<[ParamKind]>::len), Some(3));
    let s = d.create_stream(&nb()).unwrap();
    let n = 1 << 20;
    let data: Vec<u8> = (0..n).map(|i| (i % 249) as u8).collect();
    let (a, b) = (d.alloc(n).unwrap(), d.alloc(n).unwrap());
    s.write(&a, 0, data.clone()).unwrap();
    s.write(&b, 0, data.clone()).unwrap();
    let (words, cfg) = lcg_launch(n).unwrap();
    s.launch_kernel(
        &f,
        &cfg,
        &[
            KernelArg::Buffer(&a),
            KernelArg::U32(words),
            KernelArg::U32(3),
        ],
    )
    .unwrap();
    s.launch_builtin(Kernel::Lcg { buf: &b, rounds: 3 })
        .unwrap();
    let mut want = data;
    lcg_reference(&mut want, 3);
    assert!(
        read(&s, &a) == want,
        "module launch differs from the reference"
    );
    assert!(
        read(&s, &b) == want,
        "Kernel::Lcg differs from the reference"
    );
}

#[test]
fn user_ptx_fills_and_sizes_are_checked() {
    let Some(d) = device("user_ptx_fills_and_sizes_are_checked") else {
        return;
    };
    let m = d.load_module(&ModuleSource::Ptx(FILL_PTX)).unwrap();
    let f = m.function("xs_fill").unwrap();
    assert_eq!(f.param_sizes(), Some(&[8usize, 4, 4][..]));
    assert_eq!(f.params(), None, "PTX does not declare kinds");
    let s = d.create_stream(&nb()).unwrap();
    let b = d.alloc(4 * 1000).unwrap();
    // A u64 where the kernel has 4 bytes: refused from the driver's layout.
    let e = s
        .launch_kernel(
            &f,
            &LaunchConfig::for_items(1000, 256),
            &[
                KernelArg::Buffer(&b),
                KernelArg::U64(1000),
                KernelArg::U32(7),
            ],
        )
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("argument 1")),
        "{e}"
    );
    // Declared kinds must match the layout; then kinds are checked too.
    assert!(f
        .with_params(&[ParamKind::Buffer, ParamKind::U64, ParamKind::U32])
        .is_err());
    let typed = f
        .with_params(&[ParamKind::Buffer, ParamKind::U32, ParamKind::U32])
        .unwrap();
    let e = s
        .launch_kernel(
            &typed,
            &LaunchConfig::for_items(1000, 256),
            &[
                KernelArg::Buffer(&b),
                KernelArg::F32(1.0),
                KernelArg::U32(7),
            ],
        )
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("expected u32")),
        "{e}"
    );
    s.launch_kernel(
        &typed,
        &LaunchConfig::for_items(1000, 256),
        &fill_args(&b, 1000, 7),
    )
    .unwrap();
    assert!(read(&s, &b).chunks(4).all(|w| w == 7u32.to_le_bytes()));
}

#[test]
fn malformed_code_and_limits_are_clear_errors() {
    let Some(d) = device("malformed_code_and_limits_are_clear_errors") else {
        return;
    };
    match d.load_module(&ModuleSource::Ptx(
        ".version 8.0\n.target sm_70\nthis is not ptx\n",
    )) {
        Err(Error::Native(n)) => {
            assert_eq!(n.api, "cuModuleLoadDataEx");
            let msg = n.message.clone().unwrap_or_default();
            eprintln!("malformed PTX: {} ({}): {msg}", n.name, n.code);
            assert!(!msg.is_empty());
        }
        other => panic!("malformed PTX: {other:?}"),
    }
    assert!(matches!(
        d.load_module(&ModuleSource::Ptx("a\0b")),
        Err(Error::InvalidArgument(_))
    ));
    for bytes in [
        &b"garbage"[..],
        b"\x7fELF\x02\x01",
        b".version 8.0 .target sm_90",
    ] {
        assert!(matches!(
            d.load_module(&ModuleSource::CudaBinary(bytes)),
            Err(Error::InvalidArgument(_))
        ));
    }
    let m = d.load_module(&ModuleSource::Ptx(FILL_PTX)).unwrap();
    assert!(matches!(m.function("nope"), Err(Error::InvalidArgument(s)) if s.contains("nope")));
    let f = m.function("xs_fill").unwrap();
    let lim = *f.launch_limits();
    let s = d.create_stream(&nb()).unwrap();
    let b = d.alloc(64).unwrap();
    for cfg in [
        LaunchConfig::linear(1, lim.max_threads_per_block + 1),
        LaunchConfig::new([1, lim.max_grid[1] + 1, 1], [1, 1, 1]),
        LaunchConfig::new([1, 1, 1], [1, 1, lim.max_block[2] + 1]),
        LaunchConfig::single().with_shared_mem(lim.max_shared_mem_bytes + 1),
        LaunchConfig::linear(0, 1),
    ] {
        let e = s
            .launch_kernel(&f, &cfg, &fill_args(&b, 16, 1))
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{cfg:?}: {e}");
    }
    // Nothing was enqueued: the stream is healthy.
    s.launch_kernel(&f, &LaunchConfig::single(), &fill_args(&b, 1, 9))
        .unwrap();
    assert_eq!(&read(&s, &b)[..4], &9u32.to_le_bytes());
}

#[test]
fn captured_launch_keeps_its_module_for_the_graph() {
    let Some(d) = device("captured_launch_keeps_its_module_for_the_graph") else {
        return;
    };
    let s = d.create_stream(&nb()).unwrap();
    let b = d.alloc(4 * 256).unwrap();
    let g = {
        let m = d.load_module(&ModuleSource::Ptx(FILL_PTX)).unwrap();
        let f = m.function("xs_fill").unwrap();
        s.begin_capture(CaptureMode::ThreadLocal).unwrap();
        s.launch_kernel(
            &f,
            &LaunchConfig::for_items(256, 64),
            &fill_args(&b, 256, 3),
        )
        .unwrap();
        s.end_capture().unwrap()
        // The module and function handles drop here: the graph keeps the module.
    };
    assert!(
        read(&s, &b).iter().all(|&x| x == 0),
        "captured launch ran early"
    );
    g.replay(&s).unwrap();
    assert!(read(&s, &b).chunks(4).all(|w| w == 3u32.to_le_bytes()));
}

#[test]
fn modules_unload_after_their_launches_complete() {
    let Some(d) = device("modules_unload_after_their_launches_complete") else {
        return;
    };
    let s = d.create_stream(&nb()).unwrap();
    let b = d.alloc(4 * 1024).unwrap();
    for round in 0..20u32 {
        let m = d.load_module(&ModuleSource::Ptx(FILL_PTX)).unwrap();
        let f = m.function("xs_fill").unwrap();
        s.launch_builtin(Kernel::Delay(std::time::Duration::from_micros(200)))
            .unwrap();
        s.launch_kernel(
            &f,
            &LaunchConfig::for_items(1024, 128),
            &fill_args(&b, 1024, round),
        )
        .unwrap();
        // Dropped while the launch is queued: the stream keeps the module until it ran.
        drop((m, f));
        assert!(
            read(&s, &b).chunks(4).all(|w| w == round.to_le_bytes()),
            "round {round}"
        );
    }
}

#[test]
fn launches_allocate_nothing_after_the_first() {
    let Some(d) = device("launches_allocate_nothing_after_the_first") else {
        return;
    };
    let s = d.create_stream(&nb()).unwrap();
    let delay = d
        .builtin_module()
        .unwrap()
        .function("xstream_delay")
        .unwrap();
    let m = d.load_module(&ModuleSource::Ptx(FILL_PTX)).unwrap();
    let fill = m.function("xs_fill").unwrap();
    let b = d.alloc(64).unwrap();
    let count = |f: &dyn Fn()| {
        f();
        let before = xstream_conformance::alloc_count::allocs();
        for _ in 0..1000 {
            f();
        }
        xstream_conformance::alloc_count::allocs() - before
    };
    let a = count(&|| {
        s.launch_kernel(&delay, &LaunchConfig::single(), &[KernelArg::U64(0)])
            .unwrap()
    });
    let k = count(&|| {
        s.launch_builtin(Kernel::Delay(std::time::Duration::ZERO))
            .unwrap()
    });
    // A user module (tracked per stream) with a scalar-only argument list.
    let u = count(&|| {
        s.launch_kernel(
            &fill,
            &LaunchConfig::single(),
            &[
                KernelArg::U64(xstream_core::Buffer::device_address(&b)),
                KernelArg::U32(0),
                KernelArg::U32(0),
            ],
        )
        .unwrap()
    });
    s.synchronize().unwrap();
    eprintln!("allocations per 1000 launches: builtin {a}, Kernel::Delay {k}, user module {u}");
    assert_eq!((a, k, u), (0, 0, 0));
}

#[test]
fn cudarc_slice_and_event_are_adopted_without_copy() {
    let Some(d) = device("cudarc_slice_and_event_are_adopted_without_copy") else {
        return;
    };
    let ctx = d.cudarc_context().clone();
    let cs = ctx.new_stream().unwrap();
    let slice = cs.alloc_zeros::<u32>(256).unwrap();
    cs.synchronize().unwrap();
    let addr = {
        use cudarc::driver::DevicePtr;
        let (p, _r) = slice.device_ptr(&cs);
        p
    };
    let buf = CudaBuffer::from_cudarc(&d, slice).unwrap();
    assert_eq!(
        xstream_core::Buffer::device_address(&buf),
        addr,
        "same memory, no copy"
    );
    let s = CudaStream::from_cudarc(&d, cs.clone()).unwrap();
    let f = d
        .load_module(&ModuleSource::Ptx(FILL_PTX))
        .unwrap()
        .function("xs_fill")
        .unwrap();
    s.launch_kernel(
        &f,
        &LaunchConfig::for_items(256, 64),
        &fill_args(&buf, 256, 11),
    )
    .unwrap();
    let ev = CudaEvent::from_cudarc(&d, ctx.new_event(None).unwrap(), EventFlags::DISABLE_TIMING)
        .unwrap();
    ev.record(&s).unwrap();
    ev.synchronize().unwrap();
    assert!(read(&s, &buf).chunks(4).all(|w| w == 11u32.to_le_bytes()));
    // xstream owns both now; dropping them hands the memory and the event back to cudarc's
    // own release.
    drop((buf, ev));
    s.synchronize().unwrap();
}

#[test]
fn buffer_or_function_of_another_gpu_is_wrong_device() {
    let Some(d0) = device("buffer_or_function_of_another_gpu_is_wrong_device") else {
        return;
    };
    if CudaBackend::device_count().unwrap_or(0) < 2 {
        xstream_conformance::report_skip(
            "buffer_or_function_of_another_gpu_is_wrong_device",
            &"needs two CUDA devices",
        );
        return;
    }
    let d1 = CudaBackend::open(1).unwrap();
    let s0 = d0.create_stream(&nb()).unwrap();
    let f0 = d0
        .load_module(&ModuleSource::Ptx(FILL_PTX))
        .unwrap()
        .function("xs_fill")
        .unwrap();
    let f1 = d1
        .load_module(&ModuleSource::Ptx(FILL_PTX))
        .unwrap()
        .function("xs_fill")
        .unwrap();
    let (b0, b1) = (d0.alloc(64).unwrap(), d1.alloc(64).unwrap());
    let cfg = LaunchConfig::for_items(16, 16);
    let e = s0
        .launch_kernel(&f0, &cfg, &fill_args(&b1, 16, 1))
        .unwrap_err();
    assert!(matches!(e, Error::WrongDevice(_)), "{e}");
    let e = s0
        .launch_kernel(&f1, &cfg, &fill_args(&b0, 16, 1))
        .unwrap_err();
    assert!(matches!(e, Error::WrongDevice(_)), "{e}");
    s0.launch_kernel(&f0, &cfg, &fill_args(&b0, 16, 1)).unwrap();
    assert!(read(&s0, &b0).chunks(4).all(|w| w == 1u32.to_le_bytes()));
}

/// The builtin echo kernel through the launch builder: plain, cooperative, and (on compute
/// capability 9.0 and later) in clusters of two blocks; each writes the reference record. A
/// launch through the builder allocates nothing between two hand-offs of the stream's
/// keep-alive list, and only the hand-off's allocations when it crosses one.
#[test]
fn launch_builder_attributes_and_allocations() {
    use xstream_conformance::modules::EchoStruct;
    use xstream_core::launch::ByValue;
    use xstream_core::module::{echo_record, BUILTIN_ECHO, ECHO_RECORD_BYTES};
    let Some(d) = device("launch_builder_attributes_and_allocations") else {
        return;
    };
    let s = d.create_stream(&nb()).unwrap();
    let echo = d.builtin_module().unwrap().function(BUILTIN_ECHO).unwrap();
    let st = EchoStruct {
        a: 0x1234,
        b: -5,
        pad: [0; 5],
        c: 6.25,
    };
    let mut sb = [0u8; 16];
    sb[0..2].copy_from_slice(&st.a.to_le_bytes());
    sb[2] = st.b.to_le_bytes()[0];
    sb[8..16].copy_from_slice(&st.c.to_le_bytes());
    let want = echo_record(&sb, -9, 0xABCD, -77, 0.5);
    let cluster_ok = d
        .info()
        .compute_capability
        .is_some_and(|(major, _)| major >= 9);
    let mut cases: Vec<(&str, LaunchConfig, bool, Option<[u32; 3]>)> = vec![
        ("plain", LaunchConfig::single(), false, None),
        ("cooperative", LaunchConfig::linear(2, 32), true, None),
    ];
    if cluster_ok {
        cases.push((
            "cluster",
            LaunchConfig::linear(2, 32),
            false,
            Some([2, 1, 1]),
        ));
    } else {
        eprintln!("SKIP: launch_builder_attributes_and_allocations (cluster case): compute capability below 9.0");
    }
    for (what, cfg, coop, cluster) in cases {
        let b = d.alloc(64).unwrap();
        let mut l = s.launch_builder(&echo);
        l.config(cfg).cooperative(coop);
        if let Some(c) = cluster {
            l.cluster(c);
        }
        l.arg(&b)
            .arg(ByValue(&st))
            .arg(-9i8)
            .arg(0xABCDu16)
            .arg(-77i64)
            .arg(0.5f32);
        l.launch().unwrap_or_else(|e| panic!("{what}: {e}"));
        let got = read(&s, &b);
        assert_eq!(
            &got[..ECHO_RECORD_BYTES],
            &want[..],
            "{what}: echoed record"
        );
    }
    let b = d.alloc(64).unwrap();
    let mut l = s.launch_builder(&echo);
    l.arg(&b)
        .arg(ByValue(&st))
        .arg(-9i8)
        .arg(0xABCDu16)
        .arg(-77i64)
        .arg(0.5f32);
    // The buffer argument puts one entry per launch on the stream's keep-alive list, which is
    // handed over on the stream's side stream every `KEEP_FLUSH` entries (stream/keep.rs; a
    // synchronize trims it). Warm up through two hand-offs, so the list in place is the one
    // allocated at full size and the side stream exists, and synchronize once (the list is
    // empty, its capacity kept). Then, with no synchronize: `KEEP_FLUSH - 1` launches fill the
    // list to one short of a hand-off and must allocate nothing; the next `4 * KEEP_FLUSH`
    // launches cross exactly four hand-offs, each 5 fixed allocations plus at most 4 that
    // depend on other threads (see `expect_hand_overs` in null_driver/checks.rs).
    const KEEP_FLUSH: usize = 256;
    for _ in 0..2 * KEEP_FLUSH {
        l.launch().unwrap();
    }
    s.synchronize().unwrap();
    let counted = |n: usize| {
        let before = xstream_conformance::alloc_count::allocs();
        for _ in 0..n {
            l.launch().unwrap();
        }
        xstream_conformance::alloc_count::allocs() - before
    };
    let filling = counted(KEEP_FLUSH - 1);
    let crossing = counted(4 * KEEP_FLUSH);
    s.synchronize().unwrap();
    eprintln!(
        "builder launches (6 args, a buffer, struct by value): {} launches filling the keep list: \
         {filling} allocations; {} launches crossing 4 hand-offs: {crossing} allocations",
        KEEP_FLUSH - 1,
        4 * KEEP_FLUSH
    );
    assert_eq!(filling, 0, "launches below a keep-list hand-off allocated");
    assert!(
        (20..=36).contains(&crossing),
        "4 keep-list hand-offs: {crossing} allocations, expected 20 fixed plus at most 16"
    );
}
