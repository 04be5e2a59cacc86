//! Physical memory of the virtual memory API shared with another process on the host
//! backend: the exporter (this test) and the importer (this test binary started again) write
//! through their own mappings and read each other's bytes (`xstream_conformance::vmm_share`).
//! Every wait has a bound; a child past its bound is killed.

use xstream_conformance::child::spawn_test;
use xstream_conformance::vmm_share::{self, recv_hex, send_hex};
use xstream_core::{BackendKind, Error, ShareableHandle, ShareablePayload, VirtualMemory};
use xstream_host::HostDevice;

const ROLE: &str = "XSTREAM_HOST_VMM_SHARE_ROLE";
const T: &str = "an_importer_process_sees_and_writes_the_exporters_bytes";

fn dev() -> HostDevice {
    HostDevice::new_isolated(0)
}

#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn an_importer_process_sees_and_writes_the_exporters_bytes() {
    if std::env::var(ROLE).as_deref() == Ok("importer") {
        return vmm_share::child(&dev(), &recv_hex());
    }
    let d = dev();
    let ex = vmm_share::export(&d);
    assert!(!ex.handle.needs_fd(), "host handles carry a file name");
    let mut child = spawn_test(T, [(ROLE, "importer")]);
    send_hex(&mut child, &ex.handle);
    vmm_share::parent(&d, &ex, child);
}

#[test]
fn bad_handles_are_refused() {
    let d = dev();
    let other_pid = |payload: &[u8], size: usize| {
        // A handle as another process would send it: the exporter pid is not ours.
        let h = ShareableHandle::new(
            BackendKind::Host,
            0,
            size,
            ShareablePayload {
                bytes: payload.to_vec(),
                fd: None,
            },
        )
        .unwrap();
        let mut b = *h.as_bytes();
        b[24..28].copy_from_slice(&(std::process::id() + 1).to_le_bytes());
        ShareableHandle::from_bytes(&b).unwrap()
    };
    let g = d.granularity().unwrap().minimum;
    // A payload that is no file name of ours, a file that does not exist, a bad size.
    let e = d
        .import_physical(&other_pid(b"../../etc/passwd", g))
        .unwrap_err();
    assert!(
        e.to_string().contains("not a host IPC memory handle"),
        "{e}"
    );
    let e = d
        .import_physical(&other_pid(b"xstream-host-ipc-mem-1-2-3", g))
        .unwrap_err();
    assert!(e.to_string().contains("cannot be opened"), "{e}");
    for size in [0, g + 1] {
        let e = d
            .import_physical(&other_pid(b"xstream-host-ipc-mem-1-2-3", size))
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{size}: {e}");
    }
    // Another backend or device.
    let mut b = *other_pid(b"x", g).as_bytes();
    b[6] = 2;
    let cuda = ShareableHandle::from_bytes(&b).unwrap();
    assert!(matches!(
        d.import_physical(&cuda),
        Err(Error::WrongBackend { .. })
    ));
    let mut b = *other_pid(b"x", g).as_bytes();
    b[8] = 1;
    let dev1 = ShareableHandle::from_bytes(&b).unwrap();
    assert!(matches!(
        d.import_physical(&dev1),
        Err(Error::WrongDevice(_))
    ));
}
