//! The type-erased path (`xstream::any`) against the generic one: the same operations give
//! the same results and the same errors, on the host backend and on the Ascend backend over
//! the ACL runtime simulator (a test double of `libascendcl.so`, not hardware); objects of two
//! backends mixed give `Error::WrongBackend` naming both. (Built with the `host` feature, the
//! default.)
#![cfg(feature = "host")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use xstream::any::{AnyDevice, AnyEvent, AnyStream};
use xstream::{
    Backend, BackendKind, CaptureMode, Device, Error, Event, EventDesc, EventFlags,
    PinnedAllocDesc, Status, Stream, StreamDesc,
};

/// Every erased operation on `dev`, checked by its result.
fn exercise(dev: &AnyDevice, kind: BackendKind) {
    assert_eq!(dev.kind(), kind);
    let s = dev.create_stream(&StreamDesc::new()).expect("stream");
    assert_eq!(s.kind(), kind);
    assert_eq!(s.device().kind(), kind);
    assert!(s.id() > 0);
    let t = dev
        .create_event(&EventDesc::new().flags(EventFlags::empty()))
        .expect("timing event");
    let u = dev.create_event(&EventDesc::new()).expect("event");

    // Data: write, copy, memset, read back.
    let a = dev.alloc(64).expect("alloc");
    let b = dev.alloc(64).expect("alloc");
    assert_eq!((a.len(), a.is_empty(), a.kind()), (64, false, kind));
    t.record(&s).expect("record start");
    s.write(&a, 0, (0u8..64).collect()).expect("write");
    s.copy(&a, 0, &b, 0, 64).expect("copy");
    s.memset(&b, 0, 8, 0xee).expect("memset");
    let back = s.read(&b, 0, 64).expect("read");
    u.record(&s).expect("record end");
    let other = dev.create_stream(&StreamDesc::new()).expect("stream");
    other.wait_event(&u).expect("wait_event");
    let ran = Arc::new(AtomicBool::new(false));
    let r = Arc::clone(&ran);
    other
        .host_callback(move |res| r.store(res.is_ok(), Ordering::SeqCst))
        .expect("host_callback");
    other.synchronize().expect("synchronize");
    assert!(
        ran.load(Ordering::SeqCst),
        "the callback ran after the event"
    );
    assert_eq!(u.query().expect("query"), Status::Ready);
    assert_eq!(s.query().expect("query"), Status::Ready);
    let mut want: Vec<u8> = (0u8..64).collect();
    want[..8].fill(0xee);
    assert_eq!(back.take().expect("readback"), want);
    let ms = t.elapsed_ms(&u).expect("elapsed");
    assert!(ms >= 0.0, "{ms}");

    // Capture and replay (where the backend captures).
    if dev
        .info()
        .capabilities
        .contains(xstream::Capabilities::CAPTURE)
    {
        let c = dev.create_stream(&StreamDesc::new()).expect("stream");
        c.begin_capture(CaptureMode::Global).expect("begin");
        assert!(c.is_capturing());
        c.memset(&a, 0, 4, 7).expect("captured memset");
        let g = c.end_capture().expect("end");
        assert!(!c.is_capturing());
        assert!(g.node_count() >= 1);
        g.replay(&s).expect("replay");
        let r = s.read(&a, 0, 4).expect("read");
        s.synchronize().expect("sync");
        assert_eq!(r.take().expect("readback"), vec![7; 4]);
    }

    // The same errors as the generic path.
    assert!(matches!(
        s.memset(&a, 60, 8, 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.synchronize_timeout(Duration::ZERO),
        Err(Error::InvalidArgument(_))
    ));
    let never = dev.create_event(&EventDesc::new()).expect("event");
    assert!(matches!(never.elapsed_ms(&u), Err(Error::EventNotRecorded)));
    assert_eq!(dev.alloc(0).expect("zero-length buffer").len(), 0);
    let f = s.alloc_async(32).expect("alloc_async");
    s.free_async(f).expect("free_async");

    // The data path: page-locked host memory, one native copy each way.
    let mut h = dev
        .alloc_pinned(32, &PinnedAllocDesc::new())
        .expect("alloc_pinned");
    assert_eq!((h.kind(), h.len()), (kind, 32));
    h.as_mut_slice().expect("host slice").fill(5);
    let d = dev.alloc(32).expect("alloc");
    s.copy_to_device(&h, 0, &d, 0, 32).expect("copy_to_device");
    s.memset(&d, 0, 4, 6).expect("memset");
    s.copy_to_host(&d, 0, &mut h, 0, 32).expect("copy_to_host");
    let mut want = [5u8; 32];
    want[..4].fill(6);
    assert_eq!(h.as_slice().expect("waits for the copy"), &want[..]);
    assert!(matches!(
        s.copy_to_device(&h, 16, &d, 0, 32),
        Err(Error::InvalidArgument(_))
    ));
    dev.synchronize().expect("device synchronize");
    exercise_views(dev, &s);
}

/// Views, typed slices, fills of every width, typed copies, the built-in reduce and raw
/// buffers through the erased path, each checked by its bytes.
fn exercise_views(dev: &AnyDevice, s: &AnyStream) {
    use xstream::{ReduceKind, ReduceType, Reduction};
    let buf = dev.alloc(64).expect("alloc");
    let all = buf.typed::<u32>().expect("typed");
    assert_eq!(all.len(), 16);
    let mut model = [0u32; 16];
    s.write_from_blocking(&buf, &model)
        .expect("write_from_blocking");
    s.memset32(all.slice(0..2).unwrap(), 0xdead_beef)
        .expect("memset32");
    model[..2].fill(0xdead_beef);
    s.memset16(buf.view().slice(8..12).unwrap(), 0x0102)
        .expect("memset16");
    model[2] = 0x0102_0102;
    s.memset_view(buf.view().slice(12..14).unwrap(), 0x7f)
        .expect("memset_view");
    model[3] = 0x7f7f;
    s.memset64(all.slice(4..8).unwrap(), 0x0000_0005_0000_0004)
        .expect("memset64");
    model[4..8].copy_from_slice(&[4, 5, 4, 5]);
    s.copy_view(all.slice(0..2).unwrap(), all.slice(14..16).unwrap())
        .expect("copy_view");
    model[14..16].fill(0xdead_beef);
    s.write_view(all.slice(8..9).unwrap(), 9u32.to_le_bytes().to_vec())
        .expect("write_view");
    model[8] = 9;
    let mut back = [0u32; 16];
    s.read_into_blocking(&buf, &mut back)
        .expect("read_into_blocking");
    assert_eq!(back, model);
    let rb = s.read_view(all.slice(4..6).unwrap()).expect("read_view");
    s.synchronize().unwrap();
    assert_eq!(
        rb.take().unwrap(),
        [4u32, 5]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<_>>()
    );
    // Misaligned and mixed-up ranges: the generic path's errors.
    assert!(matches!(
        s.memset64(buf.view().slice(4..12).unwrap(), 1),
        Err(Error::InvalidArgument(_))
    ));
    // The built-in reduce where the device has it.
    if dev
        .info()
        .capabilities
        .contains(xstream::Capabilities::REDUCE)
    {
        let a = dev.alloc(16).unwrap();
        let b = dev.alloc(16).unwrap();
        s.write_from_blocking(&a, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
        s.write_from_blocking(&b, &[0.5f32; 4]).unwrap();
        let r = Reduction::new(ReduceKind::Sum, ReduceType::F32);
        s.reduce(&a, 0, &b, 0, 8, r).expect("reduce");
        s.reduce_view(
            a.view().slice(8..16).unwrap(),
            b.view().slice(0..8).unwrap(),
            r,
        )
        .expect("reduce_view");
        s.reduce(&a, 0, &b, 0, 0, r)
            .expect("zero-length reduce is a no-op");
        let mut got = [0f32; 4];
        s.read_into_blocking(&a, &mut got).unwrap();
        assert_eq!(got, [1.5, 2.5, 3.5, 4.5]);
    }
    // Raw round trip through the erased path.
    let raw = buf.into_raw();
    // SAFETY: `raw` came from `into_raw` of a buffer of `dev`; nothing else owns it, and the
    // stream's work on it completed (read_into_blocking waited).
    let back_buf = unsafe { xstream::any::AnyBuffer::from_raw(dev, raw) }.expect("from_raw");
    assert_eq!(back_buf.device_address(), raw.address);
    assert!(back_buf.belongs_to(dev));
    let mut again = [0u32; 16];
    s.read_into_blocking(&back_buf, &mut again).unwrap();
    assert_eq!(again, model);
    // The caller's memory registered for a scope: upload, then download into another slice.
    // Each slice alone on its pages: ACL registers whole pages, and a page shared with other
    // page-locked memory (the `h` above) is refused by the runtime (docs/semantics.md).
    let mut store = Vec::new();
    let user = page_alone(&mut store, 100);
    user.fill(7);
    let dst = dev.alloc(200).unwrap();
    dev.with_registered_host(user, |reg| reg.upload(s, 0, &dst))
        .expect("with_registered_host")
        .expect("upload");
    let mut store2 = Vec::new();
    let user2 = page_alone(&mut store2, 100);
    dev.with_registered_host(user2, |reg| {
        assert_eq!(reg.kind(), dev.kind());
        reg.download(s, &dst, 0)
    })
    .expect("with_registered_host")
    .expect("download");
    assert_eq!(user2, &[7u16; 100][..]);
    // Zero-length page-locked memory: an empty buffer.
    let h = dev
        .alloc_pinned(0, &PinnedAllocDesc::new())
        .expect("alloc_pinned(0)");
    assert!(h.is_empty());
    assert!(
        dev.memory_info().is_ok() || matches!(dev.memory_info(), Err(Error::Unsupported { .. }))
    );
}

/// `n` zeroed `u16`s in `store`, starting on a page boundary, with the rest of their last page
/// in `store` too: no other allocation shares their pages.
fn page_alone(store: &mut Vec<u8>, n: usize) -> &mut [u16] {
    const PAGE: usize = 4096;
    *store = vec![0u8; n * 2 + 2 * PAGE];
    let off = store.as_ptr().align_offset(PAGE);
    xstream::bytemuck::cast_slice_mut(&mut store[off..off + n * 2])
}

/// Typed handles convert into erased ones in code generic over the backend.
fn erase<B: xstream::any::Erasable>(b: xstream::BufferOf<B>) -> xstream::any::AnyBuffer {
    b.into()
}

#[test]
fn generic_into_erased_on_host() {
    let d = xstream::HostBackend::open(0).unwrap();
    let b = erase::<xstream::HostBackend>(d.alloc(8).unwrap());
    assert_eq!((b.kind(), b.len()), (BackendKind::Host, 8));
}

/// The generic path's answer to the same bad inputs, for one backend: the erased path must
/// give the same error kinds.
fn generic_errors<B: Backend>(dev: &B::Device) -> [String; 2] {
    let s = dev.create_stream(&StreamDesc::new()).unwrap();
    let a = dev.alloc(64).unwrap();
    let e1 = s.memset(&a, 60, 8, 0).unwrap_err();
    let ev = dev.create_event(&EventDesc::new()).unwrap();
    let end = dev.create_event(&EventDesc::new()).unwrap();
    end.record(&s).unwrap();
    s.synchronize().unwrap();
    let e2 = ev.elapsed_ms(&end).unwrap_err();
    [e1.to_string(), e2.to_string()]
}

fn erased_errors(dev: &AnyDevice) -> [String; 2] {
    let s = dev.create_stream(&StreamDesc::new()).unwrap();
    let a = dev.alloc(64).unwrap();
    let e1 = s.memset(&a, 60, 8, 0).unwrap_err();
    let ev = dev.create_event(&EventDesc::new()).unwrap();
    let end = dev.create_event(&EventDesc::new()).unwrap();
    end.record(&s).unwrap();
    s.synchronize().unwrap();
    let e2 = ev.elapsed_ms(&end).unwrap_err();
    [e1.to_string(), e2.to_string()]
}

#[test]
fn erased_path_on_host() {
    let dev = AnyDevice::open(BackendKind::Host, 0).expect("host device");
    exercise(&dev, BackendKind::Host);
    let typed = xstream::HostBackend::open(0).unwrap();
    assert_eq!(
        erased_errors(&dev),
        generic_errors::<xstream::HostBackend>(&typed)
    );
}

#[test]
fn erased_module_launch_on_host() {
    use xstream::{HostModule, KernelArg, LaunchConfig, ModuleSource, ParamKind};
    let dev = AnyDevice::open(BackendKind::Host, 0).unwrap();
    let m = dev
        .load_module(&ModuleSource::Host(HostModule::new().with_kernel(
            "fill",
            &[ParamKind::Buffer, ParamKind::U32],
            |_, args| {
                let v = args[1].u32()?;
                args[0].buffer()?.fill(v as u8);
                Ok(())
            },
        )))
        .expect("load_module");
    let f = m.function("fill").expect("function");
    assert_eq!(f.name(), "fill");
    assert_eq!(f.params(), Some(&[ParamKind::Buffer, ParamKind::U32][..]));
    let s = dev.create_stream(&StreamDesc::new()).unwrap();
    let b = dev.alloc(16).unwrap();
    s.launch_kernel(
        &f,
        &LaunchConfig::single(),
        &[KernelArg::Buffer(&b), KernelArg::U32(42)],
    )
    .expect("launch");
    let r = s.read(&b, 0, 16).unwrap();
    s.synchronize().unwrap();
    assert_eq!(r.take().unwrap(), vec![42; 16]);
    // The generic path's argument check, through the erased one.
    assert!(matches!(
        s.launch_kernel(&f.clone(), &LaunchConfig::single(), &[KernelArg::U32(1)]),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(m.function("nope"), Err(Error::InvalidArgument(_))));
}

#[test]
fn erased_launch_with_struct_and_narrow_scalars_on_host() {
    use xstream::module::{echo_record, BUILTIN_ECHO, ECHO_RECORD_BYTES};
    use xstream::{KernelArg, LaunchAttrs, LaunchConfig};
    let dev = AnyDevice::open(BackendKind::Host, 0).unwrap();
    let f = dev
        .builtin_module()
        .unwrap()
        .function(BUILTIN_ECHO)
        .unwrap();
    let s = dev.create_stream(&StreamDesc::new()).unwrap();
    let b = dev.alloc(64).unwrap();
    let mut st = [0u8; 16];
    st[..3].copy_from_slice(&[0x34, 0x12, 0xfb]);
    st[8..].copy_from_slice(&2.5f64.to_le_bytes());
    let args = [
        KernelArg::Buffer(&b),
        KernelArg::Bytes(&st),
        KernelArg::I8(-3),
        KernelArg::U16(0xBEEF),
        KernelArg::I64(-1),
        KernelArg::F32(1.5),
    ];
    s.launch_kernel_with(&f, &LaunchConfig::single(), &args, &LaunchAttrs::default())
        .expect("launch_kernel_with");
    let r = s.read(&b, 0, ECHO_RECORD_BYTES).unwrap();
    s.synchronize().unwrap();
    assert_eq!(
        r.take().unwrap(),
        echo_record(&st, -3, 0xBEEF, -1, 1.5).to_vec()
    );
    let coop = LaunchAttrs {
        cooperative: true,
        cluster: None,
    };
    assert!(matches!(
        s.launch_kernel_with(&f, &LaunchConfig::single(), &args, &coop),
        Err(Error::Unsupported { .. })
    ));
}

#[test]
fn conversions_both_ways_on_host() {
    let typed = xstream::HostBackend::open(0).unwrap();
    let s = typed.create_stream(&StreamDesc::new()).unwrap();
    let id = s.id();
    let any = AnyStream::from(s);
    let back = any
        .downcast_ref::<xstream::HostBackend>()
        .expect("a host stream");
    assert_eq!(back.id(), id);
    let dev = AnyDevice::from(typed.clone());
    assert_eq!(dev.info().name, typed.info().name);
    let e = AnyEvent::from(typed.create_event(&EventDesc::new()).unwrap());
    assert!(e.downcast_ref::<xstream::HostBackend>().is_some());
}

#[test]
fn uncompiled_backend_is_not_compiled_error() {
    for k in BackendKind::ALL {
        if !xstream::is_compiled(k) {
            assert!(matches!(AnyDevice::open(k, 0), Err(Error::NotCompiled(x)) if x == k));
        }
    }
}

#[test]
fn dispatch_else_arm_takes_any_type() {
    #[derive(Debug, PartialEq)]
    enum Mine {
        Missing(BackendKind),
    }
    for k in BackendKind::ALL {
        let r: Result<BackendKind, Mine> =
            xstream::dispatch!(k, B => Ok(B::KIND), else other => Err(Mine::Missing(other)));
        if xstream::is_compiled(k) {
            assert_eq!(r, Ok(k));
        } else {
            assert_eq!(r, Err(Mine::Missing(k)));
        }
        let n: u32 = xstream::dispatch!(k, B => B::KIND as u32 + 1, else _ => 0);
        assert_eq!(n == 0, !xstream::is_compiled(k));
    }
}

#[cfg(feature = "ascend")]
mod simulator {
    use super::*;
    use xstream_conformance::simulator;

    #[test]
    fn erased_path_on_ascend_simulator() {
        if !simulator::run_in_child(1) {
            return;
        }
        simulator::setup(1);
        let dev = AnyDevice::open(BackendKind::Ascend, 0).expect("simulated Ascend device");
        exercise(&dev, BackendKind::Ascend);
        let typed = xstream::AscendBackend::open(0).unwrap();
        assert_eq!(
            erased_errors(&dev),
            generic_errors::<xstream::AscendBackend>(&typed)
        );
    }

    #[test]
    fn mixing_backends_is_a_clear_error() {
        if !simulator::run_in_child(1) {
            return;
        }
        simulator::setup(1);
        let host = AnyDevice::open(BackendKind::Host, 0).unwrap();
        let npu = AnyDevice::open(BackendKind::Ascend, 0).expect("simulated Ascend device");
        let hs = host.create_stream(&StreamDesc::new()).unwrap();
        let ns = npu.create_stream(&StreamDesc::new()).unwrap();
        let ne = npu.create_event(&EventDesc::new()).unwrap();
        let hb = host.alloc(16).unwrap();
        let nb = npu.alloc(16).unwrap();
        let mixed = |r: xstream::Result<()>, what: &str| match r {
            Err(e @ Error::WrongBackend { .. }) => {
                let m = e.to_string();
                assert!(m.contains("host") && m.contains("ascend"), "{what}: {m}");
                assert_eq!(e.kind(), xstream::ErrorKind::WrongBackend, "{what}");
            }
            other => panic!("{what}: expected WrongBackend, got {other:?}"),
        };
        mixed(ne.record(&hs), "record");
        mixed(hs.wait_event(&ne), "wait_event");
        mixed(ns.memset(&hb, 0, 16, 1), "memset");
        mixed(hs.copy(&hb, 0, &nb, 0, 16), "copy (dst)");
        mixed(hs.copy(&nb, 0, &hb, 0, 16), "copy (src)");
        mixed(hs.read(&nb, 0, 4).map(drop), "read");
        let hh = host.alloc_pinned(16, &PinnedAllocDesc::new()).unwrap();
        let mut nh = npu.alloc_pinned(16, &PinnedAllocDesc::new()).unwrap();
        mixed(
            ns.copy_to_device(&hh, 0, &nb, 0, 16),
            "copy_to_device (host side)",
        );
        mixed(
            ns.copy_to_device(&nh, 0, &hb, 0, 16),
            "copy_to_device (device side)",
        );
        mixed(
            hs.copy_to_host(&hb, 0, &mut nh, 0, 16),
            "copy_to_host (host side)",
        );
        assert!(nh.downcast_mut::<xstream::AscendBackend>().is_some());
        assert!(hh.downcast_ref::<xstream::AscendBackend>().is_none());
        let hf = host
            .builtin_module()
            .and_then(|m| m.function("xstream_lcg"))
            .expect("the host builtin module");
        mixed(
            ns.launch_kernel(&hf, &xstream::LaunchConfig::single(), &[]),
            "launch_kernel (function)",
        );
        mixed(
            hs.launch_kernel(
                &hf,
                &xstream::LaunchConfig::single(),
                &[xstream::KernelArg::Buffer(&nb)],
            ),
            "launch_kernel (buffer argument)",
        );
        mixed(hs.free_async(nb), "free_async");
        mixed(host.can_access_peer(&npu).map(drop), "can_access_peer");
        let he = host.create_event(&EventDesc::new()).unwrap();
        mixed(he.elapsed_ms(&ne).map(drop), "elapsed_ms");
        assert!(ne.downcast_ref::<xstream::HostBackend>().is_none());
        // Both streams still work after the refusals.
        hs.synchronize().unwrap();
        ns.synchronize().unwrap();
    }
}

#[cfg(not(feature = "ascend"))]
#[test]
fn erased_path_on_ascend_simulator() {
    xstream_conformance::report_skip(
        "erased_path_on_ascend_simulator",
        &"the `ascend` feature is off (run with `--features ascend`, as `cargo test --workspace` does)",
    );
}

#[test]
fn erased_random_fill_matches_the_generic_path_on_host() {
    use xstream::{Distribution, Kernel, RandomFill, RandomType};
    let fill = RandomFill::new(
        Distribution::Normal {
            mean: 1.0,
            std: 0.5,
        },
        RandomType::BF16,
        3,
    )
    .at(9);
    let dev = AnyDevice::open(BackendKind::Host, 0).unwrap();
    assert!(dev
        .info()
        .capabilities
        .contains(xstream::Capabilities::RANDOM));
    let s = dev.create_stream(&StreamDesc::new()).unwrap();
    let b = dev.alloc(64).unwrap();
    s.launch_builtin(Kernel::Random {
        buf: &b,
        offset: 8,
        len: 48,
        fill,
    })
    .expect("erased random fill");
    let r = s.read(&b, 0, 64).unwrap();
    s.synchronize().unwrap();
    let mut want = vec![0u8; 64];
    xstream::random::fill(&fill, &mut want[8..56]);
    assert_eq!(r.take().unwrap(), want);
    // The check of xstream-core, through the erased path: a misaligned bf16 range.
    assert!(matches!(
        s.launch_builtin(Kernel::Random {
            buf: &b,
            offset: 1,
            len: 2,
            fill,
        }),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn erased_physical_memory_exports_and_the_exporter_cannot_import() {
    let dev = AnyDevice::open(BackendKind::Host, 0).unwrap();
    let g = dev.granularity().unwrap().minimum;
    let p = dev.create_physical(g).unwrap();
    let h = p.export_shareable().unwrap();
    assert_eq!(
        (h.backend(), h.size(), h.device()),
        (BackendKind::Host, g, 0)
    );
    assert!(!h.needs_fd());
    let e = dev.import_physical(&h).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}
