//! The `testing` feature's kernels on the host backend. These tests get xstream-core's
//! `testing` feature from the conformance suite (a dev-dependency), so `Kernel::Fault` exists;
//! whether the host backend serves it depends on the host backend's own `testing` feature
//! (off under `cargo test -p xstream`, on in a workspace build, where the CLI and the suite
//! turn it on). Either way the capability and the launch must agree.
#![cfg(feature = "host")]

use xstream::host::HostDevice;
use xstream::{Capabilities, Device, Error, Kernel, Stream, StreamDesc};

#[test]
fn fault_kernel_is_served_exactly_where_the_capability_says() {
    // An isolated context: a fault poisons it, not the process's shared device 0.
    let d = HostDevice::new_isolated(0);
    let caps = d.info().capabilities;
    let s = d.create_stream(&StreamDesc::new()).expect("stream");
    match s.launch_builtin(Kernel::Fault) {
        Ok(()) => {
            assert!(
                caps.contains(Capabilities::FAULT_INJECTION),
                "Kernel::Fault ran on a device that does not report FAULT_INJECTION"
            );
            let e = s.synchronize().expect_err("a fault must poison the stream");
            assert!(e.is_device_lost() && e.is_sticky(), "{e:?}");
        }
        Err(e) => {
            assert!(
                !caps.contains(Capabilities::FAULT_INJECTION),
                "a device reporting FAULT_INJECTION refused Kernel::Fault: {e}"
            );
            assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
            assert!(e.to_string().contains("`testing` feature is off"), "{e}");
            // The stream is not poisoned: refused before anything was enqueued.
            s.synchronize().expect("synchronize after a refused launch");
        }
    }
}
