//! `XSTREAM_HOST_DEVICES` (own process: the test changes the environment).

use xstream_core::{Backend, Device, Error, Graph, Stream, StreamDesc};
use xstream_host::{HostBackend, HostDevice, DEVICES_ENV};

#[test]
fn device_count_from_env_and_graph_contexts() {
    std::env::remove_var(DEVICES_ENV);
    assert_eq!(HostBackend::device_count().unwrap(), 1);
    std::env::set_var(DEVICES_ENV, "3");
    assert_eq!(HostBackend::device_count().unwrap(), 3);
    let d2 = HostBackend::open(2).unwrap();
    assert_eq!(d2.info().ordinal, 2);
    assert_eq!(d2.info().name, "host-cpu-2");
    assert!(!d2.same_context(&HostBackend::open(1).unwrap()));
    assert!(matches!(
        HostBackend::open(3),
        Err(Error::InvalidArgument(_))
    ));
    std::env::set_var(DEVICES_ENV, "many");
    assert!(matches!(
        HostBackend::device_count(),
        Err(Error::InvalidArgument(_))
    ));
    std::env::set_var(DEVICES_ENV, "0");
    assert_eq!(HostBackend::device_count().unwrap(), 0);
    assert!(HostBackend::open(0).is_err());
    std::env::remove_var(DEVICES_ENV);

    // A graph belongs to its context.
    let (a, b) = (HostDevice::new_isolated(0), HostDevice::new_isolated(0));
    let s = a.create_stream(&StreamDesc::new()).unwrap();
    s.begin_capture(Default::default()).unwrap();
    let g = s.end_capture().unwrap();
    assert_eq!(g.node_count(), 0);
    let t = b.create_stream(&StreamDesc::new()).unwrap();
    assert!(matches!(g.launch(&t), Err(Error::WrongDevice(_))));
    g.launch(&a.default_stream().unwrap()).unwrap();
    a.synchronize().unwrap();
}
