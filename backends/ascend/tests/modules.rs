//! Modules and kernels over the simulator's ACL kernel-binary API: the builtin module, user
//! binaries in the simulator's test-only format, argument checks, bad binaries, capture, and
//! `Kernel::Delay` / `Kernel::Lcg` going through `aclrtLaunchKernelWithConfig`. Every test
//! holds the simulator lock: one counts the runtime's launch calls, which the others would
//! change when the tests share a process (under valgrind).
mod common;

use common::{global_lock, Sim};
use xstream_ascend::module::{builtin_binary, sim_binary, SimKernel};
use xstream_ascend::AscendBackend;
use xstream_core::module::{BUILTIN_LCG, BUILTIN_LCG_PARAMS};
use xstream_core::{
    lcg_reference, Capabilities, CaptureMode, Device, Error, Function, Graph, Kernel, KernelArg,
    LaunchConfig, Module, ModuleSource, Stream, StreamDesc,
};

fn words(n: u32) -> Vec<u8> {
    (1..=n).flat_map(|i| i.to_le_bytes()).collect()
}

#[test]
fn builtin_module_runs_through_the_binary_path() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(0);
    let caps = d.info().capabilities;
    assert!(caps.contains(Capabilities::MODULES | Capabilities::KERNELS));
    let m = d.builtin_module().unwrap();
    let lcg = m.function(BUILTIN_LCG).unwrap();
    assert_eq!(lcg.name(), BUILTIN_LCG);
    assert_eq!(lcg.params(), Some(BUILTIN_LCG_PARAMS));
    let e = m.function("xstream_nope").unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(s) if s.contains("xstream_nope")),
        "{e}"
    );
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let buf = d.alloc(64).unwrap();
    s.write(&buf, 0, words(16)).unwrap();
    let before = Sim::get().call_count("aclrtLaunchKernelWithConfig");
    s.launch_kernel(
        &lcg,
        &LaunchConfig::for_items(16, 8),
        &[
            KernelArg::Buffer(&buf),
            KernelArg::U32(16),
            KernelArg::U32(2),
        ],
    )
    .unwrap();
    // The built-in kernels are launches of the builtin module too.
    s.launch_builtin(Kernel::Lcg {
        buf: &buf,
        rounds: 1,
    })
    .unwrap();
    s.launch_builtin(Kernel::Delay(std::time::Duration::from_millis(1)))
        .unwrap();
    let rb = s.read(&buf, 0, 64).unwrap();
    s.synchronize().unwrap();
    assert_eq!(
        Sim::get().call_count("aclrtLaunchKernelWithConfig") - before,
        3
    );
    let mut want = words(16);
    lcg_reference(&mut want, 3);
    assert_eq!(rb.take().unwrap(), want);
    // Wrong arguments are refused before anything is queued.
    let e = s
        .launch_kernel(&lcg, &LaunchConfig::single(), &[KernelArg::Buffer(&buf)])
        .unwrap_err();
    assert!(e.to_string().contains("takes 3 argument(s)"), "{e}");
    let e = s
        .launch_kernel(
            &lcg,
            &LaunchConfig::new([1, 0, 1], [1, 1, 1]),
            &[
                KernelArg::Buffer(&buf),
                KernelArg::U32(1),
                KernelArg::U32(1),
            ],
        )
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert_eq!(
        Sim::get().call_count("aclrtLaunchKernelWithConfig") - before,
        3,
        "refused launches never reach the runtime"
    );
}

#[test]
fn user_binary_functions_and_argument_checks() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(0);
    let bin = sim_binary(&[("my_lcg", SimKernel::Lcg), ("my_wait", SimKernel::Delay)]);
    let m = d.load_module(&ModuleSource::AscendBinary(&bin)).unwrap();
    let f = m.function("my_lcg").unwrap();
    assert_eq!(f.params(), None, "ACL cannot tell a function's parameters");
    assert!(m.function(BUILTIN_LCG).is_err());
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let buf = d.alloc(16).unwrap();
    s.write(&buf, 0, words(4)).unwrap();
    // Unchecked by xstream, refused by the runtime (the simulator knows the layout): the
    // vendor error, code kept.
    let e = s
        .launch_kernel(
            &f,
            &LaunchConfig::single(),
            &[
                KernelArg::Buffer(&buf),
                KernelArg::U64(4),
                KernelArg::U32(1),
            ],
        )
        .unwrap_err();
    assert_eq!(e.native().map(|n| n.code), Some(107_000), "{e}");
    s.launch_kernel(
        &f,
        &LaunchConfig::linear(2, 1),
        &[
            KernelArg::Buffer(&buf),
            KernelArg::U32(4),
            KernelArg::U32(5),
        ],
    )
    .unwrap();
    // Dynamic shared memory becomes the launch attribute DYN_UBUF_SIZE (the simulator checks
    // the attribute id, the value has no effect there).
    s.launch_kernel(
        &f,
        &LaunchConfig::single().with_shared_mem(4096),
        &[
            KernelArg::Buffer(&buf),
            KernelArg::U32(4),
            KernelArg::U32(1),
        ],
    )
    .unwrap();
    // Dropping the module and function with a launch queued: the launch still runs.
    drop((m, f));
    let rb = s.read(&buf, 0, 16).unwrap();
    s.synchronize().unwrap();
    let mut want = words(4);
    lcg_reference(&mut want, 6);
    assert_eq!(rb.take().unwrap(), want);
}

#[test]
fn bad_sources_are_clear_errors() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(0);
    let elf = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0";
    let e = d.load_module(&ModuleSource::AscendBinary(elf)).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("refused the kernel binary") && m.contains("107000")),
        "{e}"
    );
    let mut truncated = builtin_binary();
    truncated.pop();
    assert!(matches!(
        d.load_module(&ModuleSource::AscendBinary(&truncated)),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        d.load_module(&ModuleSource::AscendBinary(&[])),
        Err(Error::InvalidArgument(_))
    ));
    let e = d
        .load_module(&ModuleSource::Ptx(".version 8.0"))
        .unwrap_err();
    assert!(
        matches!(&e, Error::Unsupported { what, .. } if what.contains("PTX")),
        "{e}"
    );
}

#[test]
fn other_device_buffers_and_functions_are_refused() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let (d0, d1) = (common::device(0), common::device(1));
    let f0 = d0.builtin_module().unwrap().function(BUILTIN_LCG).unwrap();
    let f1 = d1.builtin_module().unwrap().function(BUILTIN_LCG).unwrap();
    let s0 = d0.create_stream(&StreamDesc::new()).unwrap();
    let (b0, b1) = (d0.alloc(16).unwrap(), d1.alloc(16).unwrap());
    let args = |b| [KernelArg::Buffer(b), KernelArg::U32(4), KernelArg::U32(1)];
    let cfg = LaunchConfig::single();
    assert!(matches!(
        s0.launch_kernel(&f1, &cfg, &args(&b0)),
        Err(Error::WrongDevice(_))
    ));
    assert!(matches!(
        s0.launch_kernel(&f0, &cfg, &args(&b1)),
        Err(Error::WrongDevice(_))
    ));
    s0.launch_kernel(&f0, &cfg, &args(&b0)).unwrap();
    s0.synchronize().unwrap();
}

#[test]
fn captured_launch_keeps_its_module() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(0);
    let bin = sim_binary(&[("lcg", SimKernel::Lcg)]);
    let m = d.load_module(&ModuleSource::AscendBinary(&bin)).unwrap();
    let f = m.function("lcg").unwrap();
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let buf = d.alloc(8).unwrap();
    s.write(&buf, 0, words(2)).unwrap();
    s.synchronize().unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    s.launch_kernel(
        &f,
        &LaunchConfig::single(),
        &[
            KernelArg::Buffer(&buf),
            KernelArg::U32(2),
            KernelArg::U32(1),
        ],
    )
    .unwrap();
    let g = s.end_capture().unwrap();
    assert_eq!(g.node_count(), 1);
    drop((m, f));
    g.replay(&s).unwrap();
    g.replay(&s).unwrap();
    let rb = s.read(&buf, 0, 8).unwrap();
    s.synchronize().unwrap();
    let mut want = words(2);
    lcg_reference(&mut want, 2);
    assert_eq!(rb.take().unwrap(), want);
}

#[test]
fn a_runtime_that_refuses_the_builtin_binary_still_loads_user_binaries() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    // As on an NPU: the runtime refuses the simulator-format builtin binary (the first load,
    // made when the device opens), but exports the kernel-binary API.
    assert_eq!(Sim::get().set_faults("aclrtBinaryLoadFromData:1:107000"), 0);
    let d = xstream_ascend::AscendDevice::new_isolated(0);
    Sim::get().set_faults("");
    let d = d.unwrap();
    let caps = d.info().capabilities;
    assert!(caps.contains(Capabilities::MODULES) && !caps.contains(Capabilities::KERNELS));
    let e = d.builtin_module().unwrap_err();
    assert!(
        matches!(&e, Error::Unsupported { what, .. } if what.contains("exists only in the test-only binary format")),
        "{e}"
    );
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let buf = d.alloc(8).unwrap();
    assert!(matches!(
        s.launch_builtin(Kernel::Lcg {
            buf: &buf,
            rounds: 1
        }),
        Err(Error::Unsupported { .. })
    ));
    let bin = sim_binary(&[("fill", SimKernel::Fill)]);
    let m = d.load_module(&ModuleSource::AscendBinary(&bin)).unwrap();
    let f = m.function("fill").unwrap();
    s.launch_kernel(
        &f,
        &LaunchConfig::single(),
        &[
            KernelArg::Buffer(&buf),
            KernelArg::U32(2),
            KernelArg::U32(7),
        ],
    )
    .unwrap();
    let rb = s.read(&buf, 0, 8).unwrap();
    s.synchronize().unwrap();
    assert_eq!(rb.take().unwrap(), [7, 0, 0, 0, 7, 0, 0, 0]);
}

#[test]
fn conformance_fill_binary_is_the_simulator_format() {
    assert_eq!(
        sim_binary(&[("xs_fill", SimKernel::Fill)]),
        xstream_conformance::modules::FILL_ASCEND_SIM
    );
}

#[test]
fn modules_off_without_the_symbols() {
    if !common::in_sim_process() {
        return;
    }
    // Capability by symbol presence: the simulator exports the whole group.
    let t = AscendBackend::fns().unwrap();
    assert!(xstream_ascend::loader::has_group(
        t,
        &xstream_ascend::loader::MODULES
    ));
    assert!(xstream_ascend::loader::symbol_capabilities(t).contains(Capabilities::MODULES));
}
