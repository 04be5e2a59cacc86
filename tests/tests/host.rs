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

mod collectives {
    use std::time::Duration;

    use xstream_conformance::collectives::{report_coll_line, run_collectives, CollEnv};
    use xstream_core::Backend;
    use xstream_host::{HostBackend, HostDevice};

    fn run_on(what: &str, devices: Vec<HostDevice>) {
        let env = CollEnv::<HostBackend> {
            devices,
            short_timeout: Duration::from_millis(200),
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

    /// Two ranks on two distinct host contexts (foreign buffers are refused).
    #[test]
    fn collectives_two_devices() {
        run_on(
            "host, 2 ranks on 2 devices",
            vec![HostDevice::new_isolated(0), HostDevice::new_isolated(1)],
        );
    }
}
