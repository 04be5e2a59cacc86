//! Physical memory of the virtual memory API shared with another process on CUDA
//! (`cuMemCreate` with `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`,
//! `cuMemExportToShareableHandle` / `cuMemImportFromShareableHandle`): the exporter and the
//! importer (this test binary started again) on device 0 write through their own mappings
//! and read each other's bytes (`xstream_conformance::vmm_share`); the handle and its file
//! descriptor cross a Unix socket (`xstream_cuda::fdpass`, `SCM_RIGHTS`). Skips (prints
//! `SKIP: <test>: <reason>` and passes) without a CUDA device or without
//! `SHAREABLE_PHYSICAL`. The null driver's call sequence is covered in
//! `tests/null_driver/vmm.rs`. Every wait has a bound; a child past its bound is killed.

use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

use xstream_conformance::child::spawn_test;
use xstream_conformance::vmm_share;
use xstream_core::{Backend, Capabilities, Device, Error};
use xstream_cuda::fdpass::{recv_handle, send_handle};
use xstream_cuda::{CudaBackend, CudaDevice};

const SOCKET: &str = "XSTREAM_CUDA_VMM_SHARE_SOCKET";
const T: &str = "an_importer_process_sees_and_writes_the_exporters_bytes_on_a_gpu";

fn device(test: &str) -> Option<CudaDevice> {
    if let Err(e) = CudaBackend::availability() {
        xstream_conformance::report_skip(test, &e);
        return None;
    }
    let d = match CudaBackend::open(0) {
        Ok(d) => d,
        Err(e) => panic!("{test}: CUDA is available but open(0) failed: {e}"),
    };
    if !d
        .info()
        .capabilities
        .contains(Capabilities::SHAREABLE_PHYSICAL)
    {
        let e = Error::unsupported(
            xstream_core::BackendKind::Cuda,
            "device 0 lacks SHAREABLE_PHYSICAL (no virtual memory management or no POSIX \
             file descriptor handles)",
        );
        xstream_conformance::report_skip(test, &e);
        return None;
    }
    Some(d)
}

#[test]
fn an_importer_process_sees_and_writes_the_exporters_bytes_on_a_gpu() {
    if let Some(path) = std::env::var_os(SOCKET) {
        let d = CudaBackend::open(0).unwrap();
        let sock = UnixStream::connect(&path).unwrap();
        let h = recv_handle(&sock).unwrap();
        assert!(
            h.needs_fd() && h.fd().is_some(),
            "the descriptor came along"
        );
        return vmm_share::child(&d, &h);
    }
    let Some(d) = device(T) else { return };
    let ex = vmm_share::export(&d);
    assert!(ex.handle.needs_fd(), "a CUDA handle is a file descriptor");
    let dir = std::env::temp_dir().join(format!("xstream-cuda-vmm-{}", std::process::id()));
    let _ = std::fs::remove_file(&dir);
    let listener = UnixListener::bind(&dir).unwrap();
    let child = spawn_test(T, [(SOCKET, dir.as_os_str().to_owned())]);
    listener.set_nonblocking(true).unwrap();
    let end = std::time::Instant::now() + vmm_share::BOUND;
    let sock = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(_) if std::time::Instant::now() < end => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("the importer never connected: {e}"),
        }
    };
    let _ = std::fs::remove_file(&dir);
    sock.set_nonblocking(false).unwrap();
    send_handle(&sock, &ex.handle).unwrap();
    vmm_share::parent(&d, &ex, child);
}
