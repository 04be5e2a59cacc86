//! `XSTREAM_HOST_DEVICES`. The variable is never changed inside this (multi-threaded) test
//! process: each value is given to a child process of this test binary by `Command::env`,
//! before it starts, and the child checks what the backend reads.

use xstream_core::{Backend, Device, Error, Graph, Stream, StreamDesc};
use xstream_host::{HostBackend, HostDevice, DEVICES_ENV};

/// Set (by the parent) in a child: which value of `XSTREAM_HOST_DEVICES` it was started with.
const CASE: &str = "XSTREAM_HOST_ENV_CASE";

/// The cases: the value of `XSTREAM_HOST_DEVICES` (`None`: unset).
const CASES: [Option<&str>; 4] = [None, Some("3"), Some("many"), Some("0")];

/// In a child: checks the device count the backend reads for the value it was started with.
fn check_case(value: Option<&str>) {
    match value {
        None => assert_eq!(HostBackend::device_count().unwrap(), 1),
        Some("3") => {
            assert_eq!(HostBackend::device_count().unwrap(), 3);
            let d2 = HostBackend::open(2).unwrap();
            assert_eq!(d2.info().ordinal, 2);
            assert_eq!(d2.info().name, "host-cpu-2");
            assert!(!d2.same_context(&HostBackend::open(1).unwrap()));
            assert!(matches!(
                HostBackend::open(3),
                Err(Error::InvalidArgument(_))
            ));
        }
        Some("many") => assert!(matches!(
            HostBackend::device_count(),
            Err(Error::InvalidArgument(_))
        )),
        Some("0") => {
            assert_eq!(HostBackend::device_count().unwrap(), 0);
            assert!(HostBackend::open(0).is_err());
        }
        Some(other) => panic!("unknown case {other}"),
    }
}

#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn device_count_from_env() {
    if let Ok(case) = std::env::var(CASE) {
        let value = std::env::var(DEVICES_ENV).ok();
        assert_eq!(value.as_deref().unwrap_or("unset"), case);
        check_case(value.as_deref());
        return;
    }
    let exe = std::env::current_exe().expect("current_exe");
    for value in CASES {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["device_count_from_env", "--exact", "--test-threads=1"])
            .env(CASE, value.unwrap_or("unset"));
        match value {
            Some(v) => cmd.env(DEVICES_ENV, v),
            None => cmd.env_remove(DEVICES_ENV),
        };
        let out = cmd.output().expect("start the test binary again");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("test result: ok. 1 passed"),
            "{DEVICES_ENV}={value:?}: child failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn a_graph_belongs_to_its_context() {
    let (a, b) = (HostDevice::new_isolated(0), HostDevice::new_isolated(0));
    let s = a.create_stream(&StreamDesc::new()).unwrap();
    s.begin_capture(Default::default()).unwrap();
    let g = s.end_capture().unwrap();
    assert_eq!(g.node_count(), 0);
    let t = b.create_stream(&StreamDesc::new()).unwrap();
    assert!(matches!(g.replay(&t), Err(Error::WrongDevice(_))));
    g.replay(&a.default_stream().unwrap()).unwrap();
    a.synchronize().unwrap();
}
