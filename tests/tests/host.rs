//! The conformance suite on the host backend (always available).

use xstream_conformance::{assert_conforms, report_line, run, Env};
use xstream_core::Backend;
use xstream_host::{HostBackend, HostDevice};

#[test]
fn conformance_on_host() {
    let env = Env::<HostBackend> {
        device: HostBackend::open(0).expect("host device"),
        isolated: Some(|| Ok(HostDevice::new_isolated(0))),
    };
    let sum = run(&env, None, report_line);
    assert_conforms::<HostBackend>("host", &sum);
}

/// The checks that need two host devices (peer copies, the foreign-buffer rule): the variable
/// that sets the device count is only read, never changed, in this multi-threaded test binary,
/// so they run in a child process started with `XSTREAM_HOST_DEVICES=2`.
#[test]
fn peer_copy_on_two_host_devices() {
    const CHILD: &str = "XSTREAM_PEER_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let env = Env::<HostBackend> {
            device: HostBackend::open(0).expect("host device"),
            isolated: None,
        };
        for check in ["peer_copy", "foreign_buffers", "vmm_bad_input"] {
            let sum = run(&env, Some(check), report_line);
            assert_eq!(
                (sum.passed, sum.failed, sum.skipped),
                (1, 0, 0),
                "{check} on two host devices: {sum:?}"
            );
        }
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "peer_copy_on_two_host_devices", "--nocapture"])
        .env(CHILD, "1")
        .env(xstream_host::DEVICES_ENV, "2")
        .output()
        .expect("child test process");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

mod collectives {
    use std::time::Duration;

    use xstream_conformance::collectives::{report_coll_line, run_collectives, CollEnv};
    use xstream_core::Backend;
    use xstream_host::{HostBackend, HostDevice};

    fn run_on(what: &str, devices: Vec<HostDevice>) {
        let env = CollEnv::<HostBackend> {
            devices,
            short_timeout: xstream_conformance::harness_timeout(Duration::from_millis(200)),
        };
        let sum = run_collectives(&env, None, report_coll_line);
        println!("{what}: {sum:?}");
        assert_eq!(
            sum.failed, 0,
            "{what}: collective failures (see FAIL lines)"
        );
        assert_eq!(
            sum.skipped, 0,
            "{what}: the host reference skips no collective check"
        );
    }

    /// Three ranks on the one default host device (init_all accepts it several times).
    #[test]
    fn collectives_three_ranks_one_device() {
        let d = HostBackend::open(0).expect("host device");
        run_on("host, 3 ranks on device 0", vec![d.clone(), d.clone(), d]);
    }

    /// A one-rank job passes `rank_conformance` (the path `nccl_single_rank` takes on one GPU):
    /// every case out of place and the send/recv to itself.
    #[test]
    fn rank_conformance_one_rank() {
        use xstream_conformance::collectives::rank_conformance;
        use xstream_core::{CollectiveBackend, Device, StreamDesc};
        let dev = HostDevice::new_isolated(0);
        let c = HostBackend::init_all(std::slice::from_ref(&dev)).unwrap();
        let st = dev.create_stream(&StreamDesc::new()).unwrap();
        let r = rank_conformance::<HostBackend>(&c[0], &st);
        println!("{r:?}");
        assert!(r.is_ok(), "{r:?}");
    }

    /// `rank_conformance` (what each process of a multi-process job runs), one thread per rank
    /// joined by unique id.
    #[test]
    fn rank_conformance_one_thread_per_rank() {
        use xstream_conformance::collectives::rank_conformance;
        use xstream_core::{CollectiveBackend, Device, StreamDesc};
        let world = 3;
        let id = HostBackend::new_unique_id().unwrap();
        // A context of its own: the other tests of this binary run beside it in this process
        // (device faults and device-wide waits of the conformance suite must not reach it).
        let dev = HostDevice::new_isolated(0);
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..world)
                .map(|rank| {
                    let (id, dev) = (id.clone(), dev.clone());
                    s.spawn(move || {
                        let d = dev;
                        let c = HostBackend::init_rank(&d, &id, rank, world).unwrap();
                        let st = d.create_stream(&StreamDesc::new()).unwrap();
                        rank_conformance::<HostBackend>(&c, &st)
                    })
                })
                .collect();
            for h in hs {
                let r = h.join().unwrap();
                println!("{r:?}");
                assert!(r.is_ok(), "{r:?}");
            }
        });
    }

    /// Two ranks on two distinct host contexts (foreign buffers are refused).
    #[test]
    fn collectives_two_devices() {
        run_on(
            "host, 2 ranks on 2 devices",
            vec![HostDevice::new_isolated(0), HostDevice::new_isolated(1)],
        );
    }
}
