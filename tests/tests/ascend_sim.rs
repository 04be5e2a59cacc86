//! The conformance suite on the Ascend backend, over the ACL runtime simulator (a test double
//! of `libascendcl.so`, built by this workspace and loaded with dlopen). This is not hardware
//! verification.

use xstream_ascend::AscendBackend;
use xstream_conformance::{assert_conforms, report_line, run, Env};
use xstream_core::Backend;

#[test]
fn conformance_on_ascend_simulator() {
    if !xstream_conformance::simulator::run_in_child(2) {
        return;
    }
    xstream_conformance::simulator::setup(2);
    AscendBackend::availability().expect("the simulator must load through dlopen");
    let env = Env::<AscendBackend> {
        device: AscendBackend::open(0).expect("simulated Ascend device"),
        // A context of its own: the deliberate fault of `callback_error_after_fault` poisons
        // only that context.
        isolated: Some(|| xstream_ascend::AscendDevice::new_isolated(0)),
    };
    let sum = run(&env, None, report_line);
    assert_conforms::<AscendBackend>("ascend (simulator)", &sum);
    let fault = run(&env, Some("callback_error_after_fault"), report_line);
    assert_eq!(
        (fault.passed, fault.skipped),
        (1, 0),
        "callback_error_after_fault must run on the simulator"
    );
}

/// A native device-to-device copy through the stream's raw handle (`aclrtMemcpyAsync`),
/// unseen by xstream: the raw path of the `record_use` check.
fn acl_raw_copy(
    s: &xstream_ascend::AscendStream,
    src: u64,
    dst: u64,
    len: usize,
) -> xstream_core::Result<()> {
    use xstream_core::Stream;
    let t = AscendBackend::fns()?;
    // SAFETY: `src` and `dst` are device addresses of live buffers of at least `len` bytes
    // (the check keeps both alive until the stream synchronized); the stream's handle is live
    // and its context is bound on this thread (the check's xstream calls bound it).
    let rc = unsafe {
        (t.aclrtMemcpyAsync)(
            dst as usize as *mut std::ffi::c_void,
            len,
            src as usize as *const std::ffi::c_void,
            len,
            xstream_ascend::sys::consts::ACL_MEMCPY_DEVICE_TO_DEVICE,
            s.as_raw().0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(xstream_core::Error::invalid(format!(
            "aclrtMemcpyAsync failed: {rc}"
        )))
    }
}

/// `record_use` with work enqueued through the raw handle (PyTorch's `record_stream`): marked,
/// the freed block is not reused before the raw copy ran; unmarked, the simulated runtime's
/// stream-ordered block cache hands the block to the freeing stream's next allocation at once
/// and the held raw copy reads the new bytes (the check fails without the marking).
#[test]
fn record_use_covers_raw_handle_work_on_ascend_simulator() {
    use xstream_conformance::ordered_use::{record_use_with_raw_copy, RawUse};
    if !xstream_conformance::simulator::run_in_child(1) {
        return;
    }
    xstream_conformance::simulator::setup(1);
    let env = Env::<AscendBackend> {
        device: AscendBackend::open(0).expect("simulated Ascend device"),
        isolated: None,
    };
    assert_eq!(
        record_use_with_raw_copy(&env, acl_raw_copy, true),
        Ok(RawUse::Kept)
    );
    assert_eq!(
        record_use_with_raw_copy(&env, acl_raw_copy, false),
        Ok(RawUse::Reused),
        "without the marking the raw copy must observe the reuse (the check's negative control)"
    );
}

/// The collective checks on Ascend over the simulators (`libascendcl.so` and `libhccl.so`
/// test doubles): two ranks in this process (`init_all`), and two rank processes.
mod collectives {
    use std::time::Duration;

    use xstream_ascend::AscendBackend;
    use xstream_conformance::collectives::{
        rank_conformance, report_coll_line, run_collectives, CollEnv,
    };
    use xstream_conformance::simulator;
    use xstream_core::{Backend, CollectiveBackend, Device, StreamDesc, UniqueId};

    /// Checks that skip on the simulators: `coll_capture` (the HCCL simulator refuses
    /// collectives on a capturing stream: `HCCL_E_NOT_SUPPORT` → `Unsupported`) and
    /// `coll_peer_mismatch` (HCCL does not promise to detect ranks that disagree, so the
    /// backend does not claim it, although the simulator fails them with `HCCL_E_PARA`).
    const SKIPS: &[&str] = &["coll_capture", "coll_peer_mismatch"];

    #[test]
    fn collectives_on_ascend_simulator_in_one_process() {
        if !simulator::run_in_child(2) {
            return;
        }
        simulator::setup(2);
        let env = CollEnv::<AscendBackend> {
            devices: vec![
                AscendBackend::open(0).expect("device 0"),
                AscendBackend::open(1).expect("device 1"),
            ],
            short_timeout: xstream_conformance::harness_timeout(Duration::from_millis(300)),
        };
        let mut skipped = Vec::new();
        let sum = run_collectives(&env, None, |c, r, t| {
            if matches!(r, Ok(xstream_conformance::Outcome::Skip(_))) {
                skipped.push(c.name);
            }
            report_coll_line(c, r, t);
        });
        println!("ascend (simulators): {sum:?}");
        assert_eq!(sum.failed, 0, "collective failures (see FAIL lines)");
        for s in &skipped {
            assert!(SKIPS.contains(s), "{s} skipped on the simulators");
        }
    }

    #[test]
    fn collectives_on_ascend_simulator_rank_processes() {
        if let (Ok(r), Ok(id)) = (
            std::env::var("XSTREAM_TEST_RANK"),
            std::env::var("XSTREAM_TEST_ID"),
        ) {
            let r: usize = r.parse().expect("rank");
            let id = UniqueId::from_hex(&id).expect("id");
            let d = AscendBackend::open(r).expect("device");
            let c = AscendBackend::init_rank(&d, &id, r, 2).expect("init_rank");
            let s = d.create_stream(&StreamDesc::new()).expect("stream");
            let report = rank_conformance::<AscendBackend>(&c, &s).expect("rank conformance");
            println!("rank {r}: {report}");
            return;
        }
        if !simulator::run_in_child(2) {
            return;
        }
        simulator::setup(2);
        let id = AscendBackend::new_unique_id().expect("unique id");
        let name = std::thread::current().name().expect("test").to_owned();
        let kids: Vec<_> = (0..2)
            .map(|r| {
                std::process::Command::new(std::env::current_exe().expect("exe"))
                    .args([&name, "--exact", "--nocapture", "--test-threads=1"])
                    .env("XSTREAM_TEST_RANK", r.to_string())
                    .env("XSTREAM_TEST_ID", id.to_hex())
                    .spawn()
                    .expect("rank process")
            })
            .collect();
        for mut k in kids {
            assert!(k.wait().expect("wait").success(), "a rank process failed");
        }
    }

    /// The data-parallel example's training loop (`xstream_examples::data_parallel`) on the
    /// two simulated devices: every step's average verified (HCCL has no `avg`: sum / world).
    #[test]
    fn data_parallel_example_on_ascend_simulator() {
        use xstream_examples::data_parallel::{communicators, train, Config};
        if !simulator::run_in_child(2) {
            return;
        }
        simulator::setup(2);
        let cfg = Config {
            backend: "ascend".into(),
            ranks: None,
            elems: 4096,
            steps: 3,
        };
        let comms = communicators::<AscendBackend>(&cfg).expect("communicators");
        let report = train::<AscendBackend>(&cfg, &comms).expect("train");
        println!("{report}");
        assert_eq!((report.world, report.ranks_here, report.steps), (2, 2, 3));
        assert!(!report.native_avg, "HCCL has no average reduction");
    }
}
