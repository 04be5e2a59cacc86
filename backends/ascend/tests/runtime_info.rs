//! The runtime information the backend reads through the optional system calls
//! (`aclsysGetVersionStr/Num`, `aclrtGetSocName`, `aclrtGetResInCurrentThread`,
//! `aclrtGetRunMode`, `aclDataTypeSize`), the synchronous `aclrtMemset` that zeroes new
//! buffers, and the version gate on changing a stream's priority, on the simulator.
mod common;

use std::path::Path;

use xstream_core::{Buffer, DataType, Device, Error, Stream, StreamAttrValue, StreamDesc};

/// Marks a child process started by [`with_runtime_package`], naming the version it wrote.
const MARK: &str = "XSTREAM_TEST_RUNTIME_PACKAGE";

/// Runs the calling test again in a child process with the simulator's environment and an
/// `ASCEND_HOME_PATH` whose `runtime` package is `version`. Returns the version in the child
/// (which runs the body), `None` in the parent after the child passed.
fn with_runtime_package(version: &str) -> Option<String> {
    if let Ok(v) = std::env::var(MARK) {
        return Some(v);
    }
    let name = std::thread::current()
        .name()
        .expect("a libtest test thread")
        .to_string();
    // One tree per test and version: tests of this binary run in parallel.
    let home = std::env::temp_dir().join(format!(
        "xstream-runtime-info-{}-{name}-{version}",
        std::process::id(),
    ));
    let info = home.join("share/info/runtime");
    std::fs::create_dir_all(&info).unwrap();
    std::fs::write(
        info.join("version.info"),
        format!("package_name=runtime\nVersion={version}\n"),
    )
    .unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .envs(xstream_conformance::simulator::env(2))
        .env("ASCEND_HOME_PATH", &home)
        .env(MARK, version)
        .output()
        .expect("start the test binary again");
    let _ = std::fs::remove_dir_all(&home);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{name} with runtime {version} failed:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    None
}

#[test]
fn device_info_names_soc_cores_and_run_mode() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let info = d.info();
    assert!(
        info.name
            .contains(": Ascend910B1, 24 AI cores, 48 vector cores"),
        "{}",
        info.name
    );
    assert!(
        info.driver.starts_with("ACL runtime 1.17.0"),
        "{}",
        info.driver
    );
    assert!(
        info.driver.contains(", host run mode from "),
        "{}",
        info.driver
    );
    let t = xstream_ascend::loader::table().unwrap();
    for g in [
        &xstream_ascend::loader::PACKAGE_VERSION,
        &xstream_ascend::loader::SYNC_MEMSET,
        &xstream_ascend::loader::ERROR_DETAIL,
    ] {
        assert!(xstream_ascend::loader::has_group(t, g), "{}", g.name);
    }
}

#[test]
fn data_type_table_agrees_with_the_runtime() {
    if !common::in_sim_process() {
        return;
    }
    common::setup();
    let t = xstream_ascend::loader::table().unwrap();
    assert_eq!(xstream_ascend::dtype::mismatches(t), vec![]);
    // The check sees every type: ask the runtime directly for each.
    let size = t.aclDataTypeSize.expect("exported by the simulator");
    for d in DataType::ALL {
        // SAFETY: no pointers; any value is accepted.
        let n = unsafe { size(xstream_ascend::dtype::acl_data_type(d)) };
        assert_eq!(n, d.size_of(), "{d:?}");
    }
}

#[test]
fn new_buffers_are_zeroed_with_the_synchronous_memset() {
    if !common::in_sim_process() {
        return;
    }
    let _g = common::global_lock();
    let sim = common::Sim::get();
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let a = d.alloc(256).unwrap();
    s.write(&a, 0, vec![0xFF; 256]).unwrap();
    s.synchronize().unwrap();
    drop(a);
    let (sync0, async0) = (
        sim.call_count("aclrtMemset"),
        sim.call_count("aclrtMemsetAsync"),
    );
    let b = d.alloc(256).unwrap();
    assert_eq!(sim.call_count("aclrtMemset"), sync0 + 1);
    assert_eq!(sim.call_count("aclrtMemsetAsync"), async0);
    let back = s.read(&b, 0, 256).unwrap();
    s.synchronize().unwrap();
    assert_eq!(back.take().unwrap(), vec![0; 256]);
    assert_eq!(b.len(), 256);
}

#[test]
fn runtime_package_version_in_driver_string() {
    let Some(v) = with_runtime_package("8.5.0") else {
        return;
    };
    let d = common::device(0);
    assert!(
        d.info()
            .driver
            .contains(&format!("CANN runtime package {v} (80500000)")),
        "{}",
        d.info().driver
    );
    let p = xstream_ascend::loader::table()
        .unwrap()
        .package
        .clone()
        .expect("package version read");
    assert!(p.older_than(9, 1, 0) && !p.older_than(8, 5, 0));
}

/// A runtime package before 9.1.0 lacks the priority attribute: the backend refuses without
/// calling; 9.1.0 tries it.
#[test]
fn priority_change_is_gated_on_the_package_version() {
    let Some(v) = with_runtime_package("8.5.0") else {
        assert!(with_runtime_package("9.1.0").is_none());
        return;
    };
    let sim = common::Sim::get();
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let before = sim.call_count("aclrtSetStreamAttribute");
    let r = s.set_attribute(StreamAttrValue::Priority(3));
    let after = sim.call_count("aclrtSetStreamAttribute");
    if v == "8.5.0" {
        assert!(matches!(r, Err(Error::Unsupported { .. })), "{r:?}");
        assert_eq!(after, before, "the attribute was tried on 8.5.0");
    } else {
        r.unwrap();
        assert_eq!(after, before + 1);
        assert_eq!(s.priority(), 3);
    }
}

#[test]
fn no_runtime_package_without_version_files() {
    if !common::in_sim_process() {
        return;
    }
    common::setup();
    let t = xstream_ascend::loader::table().unwrap();
    match std::env::var_os("ASCEND_HOME_PATH") {
        Some(h)
            if Path::new(&h)
                .join("share/info/runtime/version.info")
                .exists() =>
        {
            eprintln!("SKIP: ASCEND_HOME_PATH holds a runtime version.info");
        }
        _ => assert_eq!(t.package, None),
    }
}

/// A sticky device error asks `aclrtGetErrorVerbose` for the device's fault detail; the
/// simulator records no memory or link fault, so nothing is added to the message.
#[test]
fn sticky_errors_ask_for_the_fault_detail() {
    if !common::in_sim_process() {
        return;
    }
    let _g = common::global_lock();
    let sim = common::Sim::get();
    let d = common::device(1);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let before = sim.call_count("aclrtGetErrorVerbose");
    s.launch_builtin(xstream_core::Kernel::Fault).unwrap();
    let e = s.synchronize().unwrap_err();
    assert!(e.is_sticky(), "{e:?}");
    assert!(sim.call_count("aclrtGetErrorVerbose") > before);
    assert!(!e.to_string().contains("aclrtGetErrorVerbose"), "{e}");
    sim.reset();
    s.synchronize().unwrap();
}

#[test]
fn numeric_capabilities_are_asked_of_the_runtime() {
    use xstream_ascend::{CannAttribute, DeviceFeature};
    use xstream_core::Capabilities;
    if !common::in_sim_process() {
        return;
    }
    let _g = common::global_lock();
    common::each_product(&["a2", "910", "310p"], |product, d| {
        let numerics = product == "a2";
        let caps = d.info().capabilities;
        assert_eq!(caps.contains(Capabilities::BF16), numerics, "{product}");
        assert_eq!(caps.contains(Capabilities::INF_NAN), numerics, "{product}");
        let attrs = d.cann_attributes().unwrap();
        let expect = if numerics {
            vec![
                CannAttribute::InfNan,
                CannAttribute::Bf16,
                CannAttribute::JitCompile,
            ]
        } else {
            vec![CannAttribute::JitCompile]
        };
        assert_eq!(attrs, expect, "{product}");
        for f in [
            DeviceFeature::TaskUpdateAicAiv,
            DeviceFeature::MemQueueEventCrossDevice,
        ] {
            assert!(!d.has_feature(f).unwrap(), "{product} {f:?}");
        }
    });
}
