//! Host modules: kernels as Rust functions, stream order, device checks, aliasing, and kernel
//! failures as device faults.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use xstream_core::{
    Buffer, BufferView, Device, Error, Function, HostModule, KernelArg, LaunchConfig, Module,
    ModuleSource, ParamKind, Stream, StreamDesc,
};
use xstream_host::{builtin_host_module, HostDevice};

fn module(dev: &HostDevice, m: HostModule) -> xstream_host::HostLoadedModule {
    dev.load_module(&ModuleSource::Host(m))
        .expect("load_module")
}

#[test]
fn kernels_see_config_and_arguments_in_stream_order() {
    let dev = HostDevice::new_isolated(0);
    let order = Arc::new(AtomicU32::new(0));
    let o2 = Arc::clone(&order);
    let m = module(
        &dev,
        HostModule::new().with_kernel(
            "stamp",
            &[ParamKind::Buffer, ParamKind::I64, ParamKind::F64],
            move |cfg, args| {
                let seq = o2.fetch_add(1, Ordering::SeqCst);
                let i = args[1].i64()?;
                let x = args[2].f64()?;
                let b = args[0].buffer()?;
                b[..4].copy_from_slice(&seq.to_le_bytes());
                b[4..8].copy_from_slice(&(cfg.blocks() as u32).to_le_bytes());
                b[8..16].copy_from_slice(&i.to_le_bytes());
                b[16..24].copy_from_slice(&x.to_le_bytes());
                Ok(())
            },
        ),
    );
    let f = m.function("stamp").unwrap();
    assert_eq!(
        f.params(),
        Some(&[ParamKind::Buffer, ParamKind::I64, ParamKind::F64][..])
    );
    let s = dev.create_stream(&StreamDesc::new()).unwrap();
    let (a, b) = (dev.alloc(24).unwrap(), dev.alloc(24).unwrap());
    let cfg = LaunchConfig::new([2, 3, 1], [4, 1, 1]);
    for (buf, i) in [(&a, -5i64), (&b, 7)] {
        s.launch_kernel(
            &f,
            &cfg,
            &[
                KernelArg::Buffer(buf),
                KernelArg::I64(i),
                KernelArg::F64(0.5),
            ],
        )
        .unwrap();
    }
    s.synchronize().unwrap();
    let (a, b) = (a.snapshot(), b.snapshot());
    assert_eq!(&a[..4], &0u32.to_le_bytes(), "first launch ran first");
    assert_eq!(&b[..4], &1u32.to_le_bytes());
    assert_eq!(&a[4..8], &6u32.to_le_bytes(), "the kernel sees the config");
    assert_eq!(&a[8..16], &(-5i64).to_le_bytes());
    assert_eq!(&b[16..24], &0.5f64.to_le_bytes());
}

#[test]
fn buffer_or_function_of_another_device_is_wrong_device() {
    let d0 = HostDevice::new_isolated(0);
    let d1 = HostDevice::new_isolated(1);
    let f0 = d0
        .builtin_module()
        .unwrap()
        .function("xstream_lcg")
        .unwrap();
    let f1 = d1
        .builtin_module()
        .unwrap()
        .function("xstream_lcg")
        .unwrap();
    let s0 = d0.create_stream(&StreamDesc::new()).unwrap();
    let b1 = d1.alloc(16).unwrap();
    let b0 = d0.alloc(16).unwrap();
    let cfg = LaunchConfig::single();
    let args = |b| [KernelArg::Buffer(b), KernelArg::U32(4), KernelArg::U32(1)];
    assert!(matches!(
        s0.launch_kernel(&f0, &cfg, &args(&b1)),
        Err(Error::WrongDevice(_))
    ));
    assert!(matches!(
        s0.launch_kernel(&f1, &cfg, &args(&b0)),
        Err(Error::WrongDevice(_))
    ));
    s0.launch_kernel(&f0, &cfg, &args(&b0)).unwrap();
    s0.synchronize().unwrap();
}

/// A buffer passed twice (or as overlapping views): each argument sees the bytes as they were
/// when the kernel started, and the bytes each one changed are written back (docs/semantics.md,
/// "Views and aliasing").
#[test]
fn the_same_buffer_twice_is_merged() {
    let dev = HostDevice::new_isolated(0);
    let m = module(
        &dev,
        HostModule::new().with_kernel("two", &[ParamKind::Buffer, ParamKind::Buffer], |_, args| {
            // Reads through the first, writes through both: byte 0 via the first argument,
            // byte 1 via the second.
            let x = args[0].buffer()?[0];
            args[0].buffer()?[0] = x + 1;
            args[1].buffer()?[1] = x + 10;
            Ok(())
        }),
    );
    let f = m.function("two").unwrap();
    let s = dev.create_stream(&StreamDesc::new()).unwrap();
    let a = dev.alloc(8).unwrap();
    s.write(&a, 0, vec![5; 8]).unwrap();
    let cfg = LaunchConfig::single();
    s.launch_kernel(&f, &cfg, &[KernelArg::Buffer(&a), KernelArg::Buffer(&a)])
        .unwrap();
    s.synchronize().unwrap();
    assert_eq!(a.snapshot(), vec![6, 15, 5, 5, 5, 5, 5, 5]);
    // Overlapping views of one buffer merge the same way; disjoint ones get the bytes in place.
    let v = BufferView::range(&a, 0, 4).unwrap();
    let w = BufferView::range(&a, 0, 8).unwrap();
    s.launch_kernel(&f, &cfg, &[KernelArg::View(v), KernelArg::View(w)])
        .unwrap();
    let (lo, hi) = a.view().split_at(4).unwrap();
    s.launch_kernel(&f, &cfg, &[KernelArg::View(hi), KernelArg::View(lo)])
        .unwrap();
    s.synchronize().unwrap();
    // Second launch: x = 6 → a[0] = 7, a[1] = 16. Third: x = a[4] = 5 → a[4] = 6, a[1] = 15.
    assert_eq!(a.snapshot(), vec![7, 15, 5, 5, 6, 5, 5, 5]);
}

#[test]
fn a_failing_or_panicking_kernel_is_a_device_fault() {
    for panics in [false, true] {
        let dev = HostDevice::new_isolated(0);
        let m = module(
            &dev,
            HostModule::new().with_kernel("bad", &[], move |_, _| {
                if panics {
                    panic!("kernel bug");
                }
                Err(Error::invalid("kernel says no"))
            }),
        );
        let s = dev.create_stream(&StreamDesc::new()).unwrap();
        s.launch_kernel(&m.function("bad").unwrap(), &LaunchConfig::single(), &[])
            .unwrap();
        let e = s.synchronize().unwrap_err();
        assert!(e.is_sticky(), "{e}");
        let msg = e
            .native()
            .and_then(|n| n.message.clone())
            .unwrap_or_default();
        let want = if panics {
            "kernel bug"
        } else {
            "kernel says no"
        };
        assert!(msg.contains("`bad`") && msg.contains(want), "{msg}");
        assert!(dev.fault().is_some());
    }
}

#[test]
fn builtin_lcg_with_too_many_words_faults_instead_of_overrunning() {
    let dev = HostDevice::new_isolated(0);
    let f = dev
        .builtin_module()
        .unwrap()
        .function("xstream_lcg")
        .unwrap();
    let s = dev.create_stream(&StreamDesc::new()).unwrap();
    let b = dev.alloc(16).unwrap();
    s.launch_kernel(
        &f,
        &LaunchConfig::single(),
        &[KernelArg::Buffer(&b), KernelArg::U32(5), KernelArg::U32(1)],
    )
    .unwrap();
    let e = s.synchronize().unwrap_err();
    assert!(e.to_string().contains("HOST_DEVICE_FAULT"), "{e}");
    assert_eq!(b.snapshot(), vec![0u8; 16], "nothing written");
    assert_eq!(
        builtin_host_module().names().collect::<Vec<_>>(),
        ["xstream_delay", "xstream_echo_params", "xstream_lcg"]
    );
}

#[test]
fn foreign_sources_are_unsupported() {
    let dev = HostDevice::new_isolated(0);
    for src in [
        ModuleSource::Ptx(".version 8.0"),
        ModuleSource::CudaBinary(b"\x7fELF"),
        ModuleSource::AscendBinary(b""),
    ] {
        match dev.load_module(&src) {
            Err(Error::Unsupported { what, .. }) => {
                assert!(what.contains(src.describe()), "{what}")
            }
            other => panic!("{src:?}: {other:?}"),
        }
    }
}

#[test]
fn xstream_calls_inside_a_kernel_are_not_permitted() {
    let dev = HostDevice::new_isolated(0);
    let d2 = dev.clone();
    let seen = Arc::new(std::sync::Mutex::new(None));
    let s2 = Arc::clone(&seen);
    let m = module(
        &dev,
        HostModule::new().with_kernel("calls", &[], move |_, _| {
            *s2.lock().unwrap() = Some(d2.alloc(4).map(|_| ()));
            Ok(())
        }),
    );
    let s = dev.create_stream(&StreamDesc::new()).unwrap();
    s.launch_kernel(&m.function("calls").unwrap(), &LaunchConfig::single(), &[])
        .unwrap();
    s.synchronize().unwrap();
    let r = seen.lock().unwrap().take().expect("the kernel ran");
    assert!(matches!(r, Err(Error::NotPermitted(_))), "{r:?}");
}
