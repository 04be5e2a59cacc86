//! The newer ACL runtime APIs the backend uses when the library exports them, over the
//! simulator: exception info in fault errors, 64-bit value operations, stream creation through
//! the configuration API, and the loader's version and per-capability symbol checks.
mod common;

use common::{global_lock, Sim};
use xstream_ascend::loader::{self, GroupState};
use xstream_ascend::sys::{AclFns, LoadError};
use xstream_ascend::AscendStream;
use xstream_core::{
    Buffer, Capabilities, Device, Error, Kernel, Stream, StreamDesc, StreamFlags, WaitCondition,
};

/// The runtime's own stream id.
fn acl_stream_id(s: &AscendStream) -> i32 {
    s.native_id().expect("the simulator has aclrtStreamGetId")
}

#[test]
fn device_fault_error_names_stream_and_task() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(1);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let buf = d.alloc(64).unwrap();
    s.memset(&buf, 0, 64, 1).unwrap(); // task 1
    s.launch_builtin(Kernel::Fault).unwrap(); // task 2
    let e = s.synchronize().unwrap_err();
    let msg = e
        .native()
        .and_then(|n| n.message.clone())
        .unwrap_or_default();
    Sim::get().reset();
    let want = format!("device exception: stream {}, task 2", acl_stream_id(&s));
    assert!(msg.contains(&want), "`{want}` not in the error: {e}");
    assert!(
        e.to_string().contains(&want),
        "Display lacks the location: {e}"
    );
    s.synchronize().unwrap();
}

#[test]
fn value_ops_are_64_bit_only_and_order_streams() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(0);
    assert!(d.info().capabilities.contains(Capabilities::VALUE_OPS_64));
    assert!(!d.info().capabilities.contains(Capabilities::VALUE_OPS_32));
    let nb = StreamDesc::new().flags(StreamFlags::NON_BLOCKING);
    let (a, b) = (d.create_stream(&nb).unwrap(), d.create_stream(&nb).unwrap());
    let buf = d.alloc(32).unwrap();
    a.memset(&buf, 0, 32, 0).unwrap();
    a.synchronize().unwrap();
    let e = a.wait_value32(&buf, 0, 1, WaitCondition::Eq).unwrap_err();
    assert!(
        matches!(&e, Error::Unsupported { what, .. } if what.contains("64-bit only")),
        "{e:?}"
    );
    assert!(matches!(
        a.write_value32(&buf, 0, 1),
        Err(Error::Unsupported { .. })
    ));
    // AND: released once bit 2 is set by the other stream.
    a.wait_value64(&buf, 0, 0b100, WaitCondition::And).unwrap();
    a.write_value64(&buf, 8, 9).unwrap();
    assert!(matches!(
        a.synchronize_timeout(std::time::Duration::from_millis(30)),
        Err(Error::Timeout(_))
    ));
    b.write_value64(&buf, 0, 0b110).unwrap();
    a.synchronize().unwrap();
    let rb = b.read(&buf, 8, 8).unwrap();
    b.synchronize().unwrap();
    assert_eq!(
        u64::from_le_bytes(rb.take().unwrap().try_into().unwrap()),
        9
    );
    assert_eq!(buf.len(), 32);
}

#[test]
fn streams_are_created_through_the_configuration_api() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(0);
    let sim = Sim::get();
    let v2 = sim.call_count("aclrtCreateStreamV2");
    let with_config = sim.call_count("aclrtCreateStreamWithConfig");
    let s = d
        .create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING | StreamFlags::FAST_SYNC))
        .unwrap();
    assert_eq!(sim.call_count("aclrtCreateStreamV2"), v2 + 1);
    assert_eq!(sim.call_count("aclrtCreateStreamWithConfig"), with_config);
    assert!(
        s.flags().contains(StreamFlags::FAST_SYNC),
        "{:?}",
        s.flags()
    );
    // A failing option call is an error and leaks no handle.
    assert_eq!(sim.set_faults("aclrtSetStreamConfigOpt:1:100000"), 0);
    let e = d
        .create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING | StreamFlags::FAST_SYNC))
        .unwrap_err();
    sim.set_faults("");
    assert_eq!(e.native().map(|n| n.code), Some(100_000), "{e:?}");
    assert!(e.to_string().contains("aclrtSetStreamConfigOpt"), "{e}");
}

#[test]
fn loader_reads_the_version_and_refuses_another_major() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let path = common::setup();
    let path = path.to_str().unwrap().to_string();
    let t = loader::check_version(AclFns::open(&path).map_err(|e| e.1).unwrap()).unwrap();
    assert_eq!(t.version, Some((1, 17, 0)));
    let lib = AclFns::open(&path).map_err(|e| e.1).unwrap();
    // SAFETY: `xsimSetVersion(int32_t, int32_t, int32_t) -> aclError` of the simulator.
    let set: libloading::Symbol<'_, unsafe extern "C" fn(i32, i32, i32) -> i32> =
        unsafe { lib_handle(&path).get(b"xsimSetVersion\0") }.unwrap();
    // SAFETY: plain integer arguments.
    assert_eq!(unsafe { set(2, 0, 0) }, 0);
    let r = loader::check_version(lib);
    // SAFETY: as above; 0.0.0 restores the default.
    assert_eq!(unsafe { set(0, 0, 0) }, 0);
    match r {
        Err(LoadError::UnsupportedVersion { found, .. }) => assert_eq!(found, (2, 0, 0)),
        other => panic!("expected UnsupportedVersion, got {other:?}"),
    }
}

/// A second handle on the already loaded simulator (same instance).
fn lib_handle(path: &str) -> &'static libloading::Library {
    // Kept for the whole process (in a static, so no leak) so its symbols stay valid.
    static LIB: std::sync::OnceLock<libloading::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        // SAFETY: the simulator's initialisers are Rust statics only.
        unsafe { libloading::Library::new(path) }.unwrap()
    })
}

#[test]
fn the_simulator_exports_every_group_completely() {
    if !common::in_sim_process() {
        return;
    }
    common::setup();
    let t = loader::table().unwrap();
    for g in loader::GROUPS {
        assert_eq!(
            loader::group_state(t, g),
            GroupState::Complete,
            "{}",
            g.name
        );
    }
    assert!(loader::group_report(t)
        .iter()
        .all(|l| l.ends_with("complete")));
}

#[test]
fn callback_after_a_fault_gets_the_located_error() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(1);
    let nb = StreamDesc::new().flags(StreamFlags::NON_BLOCKING);
    let (s, releaser) = (d.create_stream(&nb).unwrap(), d.create_stream(&nb).unwrap());
    let gate = d.alloc(8).unwrap();
    releaser.memset(&gate, 0, 8, 0).unwrap();
    releaser.synchronize().unwrap();
    // The value wait holds the stream, so the fault and the callback are both enqueued on a
    // healthy context before the fault runs.
    s.wait_value64(&gate, 0, 1, WaitCondition::Eq).unwrap(); // task 1
    s.launch_builtin(Kernel::Fault).unwrap(); // task 2
    let (tx, rx) = std::sync::mpsc::channel();
    s.host_callback(move |r| {
        let _ = tx.send(r);
    })
    .unwrap();
    releaser.write_value64(&gate, 0, 1).unwrap();
    let r = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the callback ran");
    let _ = s.synchronize();
    Sim::get().reset();
    let e = r.expect_err("the callback after a fault must get the error");
    let want = format!("device exception: stream {}, task 2", acl_stream_id(&s));
    assert!(e.to_string().contains(&want), "`{want}` not in {e}");
}
