//! Host-only collective behaviour (the portable checks are in the conformance suite):
//! in-process unique ids, joining by id, a rank whose device faults, the environment timeout.

use std::time::Duration;

use xstream_core::collective::{self, TIMEOUT_ENV};
use xstream_core::{
    Backend, CollectiveBackend, CollectiveErrorKind, Communicator, DataType, Device, Error, Kernel,
    ReduceOp, Stream, StreamDesc, UniqueId,
};
use xstream_host::{HostBackend, HostDevice};

/// Set (by the parent) in a child started with a short `XSTREAM_COLLECTIVE_TIMEOUT_MS`.
const CHILD: &str = "XSTREAM_HOST_COLL_CHILD";

#[test]
fn unique_ids_are_in_process_and_checked() {
    let d = HostBackend::open(0).unwrap();
    let a = HostBackend::new_unique_id().unwrap();
    assert_ne!(a, HostBackend::new_unique_id().unwrap());
    // An id of another process: host jobs do not cross processes.
    let mut b = a.as_bytes().to_vec();
    let pid = std::process::id().wrapping_add(1).to_le_bytes();
    b[4..8].copy_from_slice(&pid);
    let foreign = UniqueId::from_bytes(b).unwrap();
    let e = HostBackend::init_rank(&d, &foreign, 0, 2).unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    // Not a host id at all (e.g. a 128-byte NCCL id).
    let nccl_like = UniqueId::from_bytes(vec![1u8; 128]).unwrap();
    let e = HostBackend::init_rank(&d, &nccl_like, 0, 2).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    let e = HostBackend::init_rank(&d, &a, 2, 2).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(matches!(
        HostBackend::init_all(&[]),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn a_faulted_rank_fails_its_peers_without_a_timeout() {
    let (d0, d1) = (HostDevice::new_isolated(0), HostDevice::new_isolated(1));
    let cs = HostBackend::init_all(&[d0.clone(), d1.clone()]).unwrap();
    let s0 = d0.create_stream(&StreamDesc::new()).unwrap();
    let s1 = d1.create_stream(&StreamDesc::new()).unwrap();
    let (b0, b1) = (d0.alloc(64).unwrap(), d1.alloc(64).unwrap());
    // The default (long) timeout: a peer failure must be reported at once, not after it.
    cs[0].set_timeout(Duration::from_secs(600)).unwrap();
    cs[1].set_timeout(Duration::from_secs(600)).unwrap();
    // A gate holds the stream so the all_reduce is enqueued before the fault runs.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    s0.host_callback(move |_| {
        let _ = rx.recv_timeout(Duration::from_secs(30));
    })
    .unwrap();
    s0.launch_builtin(Kernel::Fault).unwrap();
    cs[0]
        .all_reduce(&b0, &b0, 16, DataType::F32, ReduceOp::Sum, &s0)
        .unwrap();
    tx.send(()).unwrap();
    // Rank 0's fault may already be known when rank 1 enqueues (the gate is open): then the
    // enqueue itself is refused; otherwise the synchronize fails. Either way with the peer's
    // failure, at once.
    let e = match cs[1].all_reduce(&b1, &b1, 16, DataType::F32, ReduceOp::Sum, &s1) {
        Err(e) => e,
        Ok(()) => collective::synchronize(&cs[1], &s1).unwrap_err(),
    };
    assert_eq!(
        e.collective_kind(),
        Some(CollectiveErrorKind::PeerFailed),
        "{e}"
    );
    assert!(e.to_string().contains("rank 0's device faulted"), "{e}");
}

/// In a child with `XSTREAM_COLLECTIVE_TIMEOUT_MS=100`: joining alone times out naming the
/// missing rank; ranks that disagree on the world size are refused; new communicators start
/// with the environment's timeout.
fn child_checks() {
    assert_eq!(
        collective::collective_timeout().unwrap(),
        Duration::from_millis(100)
    );
    let d = HostBackend::open(0).unwrap();
    let id = HostBackend::new_unique_id().unwrap();
    let e = HostBackend::init_rank(&d, &id, 0, 2).unwrap_err();
    assert_eq!(
        e.collective_kind(),
        Some(CollectiveErrorKind::Timeout),
        "{e}"
    );
    assert!(e.to_string().contains("[1]"), "{e}");
    let id = HostBackend::new_unique_id().unwrap();
    std::thread::scope(|s| {
        let first = s.spawn(|| HostBackend::init_rank(&d, &id, 0, 2));
        std::thread::sleep(Duration::from_millis(20));
        let e = HostBackend::init_rank(&d, &id, 1, 3).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(first.join().unwrap().is_err());
    });
    let cs = HostBackend::init_all(&[d.clone(), d]).unwrap();
    assert_eq!(cs[0].timeout(), Duration::from_millis(100));
}

#[test]
#[cfg_attr(miri, ignore = "starts a child process, which Miri cannot run")]
fn environment_timeout_bounds_joining() {
    if std::env::var(CHILD).is_ok() {
        child_checks();
        return;
    }
    let exe = std::env::current_exe().expect("current_exe");
    let out = std::process::Command::new(exe)
        .args([
            "environment_timeout_bounds_joining",
            "--exact",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env(TIMEOUT_ENV, "100")
        .output()
        .expect("start the test binary again");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
