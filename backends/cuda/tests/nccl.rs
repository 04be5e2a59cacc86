//! NCCL collectives on CUDA devices (feature `nccl`). Every test prints `SKIP: ...` with the
//! reason and returns when CUDA, NCCL or a second GPU is missing.

#![cfg(feature = "nccl")]

use std::time::Duration;

use xstream_conformance::collectives::{
    rank_conformance, report_coll_line, run_collectives, CollEnv,
};
use xstream_conformance::report_skip;
use xstream_core::collective::bootstrap::Bootstrap;
use xstream_core::{
    Backend, CollectiveBackend, Communicator, DataType, Device, Error, ReduceOp, StreamDesc,
};
use xstream_cuda::collective::nccl_version;
use xstream_cuda::CudaBackend;

/// The CUDA devices, or why the test cannot run.
fn devices(test: &str, need: usize) -> Option<Vec<xstream_cuda::CudaDevice>> {
    if let Err(e) = CudaBackend::availability() {
        report_skip(test, &e);
        return None;
    }
    if let Err(e) = nccl_version() {
        report_skip(test, &e);
        return None;
    }
    let n = CudaBackend::device_count().unwrap_or(0);
    if n < need {
        report_skip(test, &format!("needs {need} GPUs, found {n}"));
        return None;
    }
    Some(
        (0..n)
            .map(|i| CudaBackend::open(i).expect("open"))
            .collect(),
    )
}

/// Without NCCL the calls fail with NotAvailable (never a panic from the loader); with it the
/// unique id has NCCL's 128 bytes.
#[test]
fn missing_nccl_is_not_available() {
    match nccl_version() {
        Err(e) => {
            assert!(matches!(e, Error::NotAvailable { .. }), "{e}");
            assert!(e.to_string().contains("NCCL"), "{e}");
            match CudaBackend::new_unique_id() {
                Err(Error::NotAvailable { reason, .. }) => {
                    assert!(reason.contains("libnccl.so"), "{reason}")
                }
                other => panic!("expected NotAvailable, got {other:?}"),
            }
            report_skip("missing_nccl_is_not_available (NCCL part)", &e);
        }
        Ok(v) => {
            let id = CudaBackend::new_unique_id().expect("ncclGetUniqueId");
            assert_eq!(id.as_bytes().len(), 128, "NCCL {v}");
        }
    }
}

/// The collective checks that may skip on CUDA, each with its reason; any other skip fails
/// [`nccl_conformance_one_process`] (as the host and Ascend conformance tests do).
const CUDA_COLL_SKIPS: &[(&str, &str)] = &[(
    "coll_peer_mismatch",
    "NCCL does not promise to detect ranks that disagree on count or dtype, so the backend does \
     not claim it",
)];

/// The collective conformance checks over every GPU of the machine, one process. A check that
/// skips must be listed in [`CUDA_COLL_SKIPS`].
#[test]
fn nccl_conformance_one_process() {
    let Some(devs) = devices("nccl_conformance_one_process", 2) else {
        return;
    };
    let env = CollEnv::<CudaBackend> {
        devices: devs,
        short_timeout: Duration::from_secs(2),
    };
    let mut skipped = Vec::new();
    let sum = run_collectives(&env, None, |c, r, t| {
        if matches!(r, Ok(xstream_conformance::Outcome::Skip(_))) {
            skipped.push(c.name);
        }
        report_coll_line(c, r, t);
    });
    println!("nccl: {sum:?}");
    assert_eq!(sum.failed, 0, "NCCL collective failures (see FAIL lines)");
    for s in &skipped {
        assert!(
            CUDA_COLL_SKIPS.iter().any(|(n, _)| n == s),
            "{s} skipped on CUDA and is not in CUDA_COLL_SKIPS"
        );
    }
    assert!(sum.passed > 0, "no collective check passed");
}

/// A one-rank job on one GPU: every op × dtype × reduction of the conformance cases out of
/// place (the receive buffer starts zeroed and the inputs are mostly non-zero, so a call that
/// did nothing fails; unsupported cells must be refused with `Unsupported`), a send/recv to
/// itself in a group, and bad arguments refused.
#[test]
fn nccl_single_rank() {
    let Some(devs) = devices("nccl_single_rank", 1) else {
        return;
    };
    let d = &devs[0];
    let cs = CudaBackend::init_all(std::slice::from_ref(d)).expect("ncclCommInitAll");
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let r = rank_conformance::<CudaBackend>(&cs[0], &s);
    println!("nccl one rank: {r:?}");
    assert!(r.is_ok(), "{r:?}");
    let b = d.alloc(64).unwrap();
    assert!(matches!(
        cs[0].all_reduce(&b, &b, 17, DataType::I32, ReduceOp::Sum, &s),
        Err(Error::InvalidArgument(_))
    ));
}

/// Set in the child processes of [`nccl_one_process_per_gpu`].
const CHILD: &str = "XSTREAM_NCCL_TEST_CHILD";

/// One process per GPU, joined through the bootstrap environment (rank 0 writes the unique id
/// to a file); each rank runs every op x dtype and a ring send/recv.
#[test]
fn nccl_one_process_per_gpu() {
    if std::env::var(CHILD).is_ok() {
        let b = Bootstrap::from_env()
            .unwrap()
            .expect("bootstrap environment");
        let dev = CudaBackend::open(b.local_rank).expect("open");
        let comm = b.init::<CudaBackend>(&dev).expect("init");
        let s = dev.create_stream(&StreamDesc::new()).unwrap();
        let r = rank_conformance::<CudaBackend>(&comm, &s);
        println!("rank {}: {r:?}", b.rank);
        assert!(r.is_ok(), "{r:?}");
        return;
    }
    let Some(devs) = devices("nccl_one_process_per_gpu", 2) else {
        return;
    };
    let world = devs.len();
    let file = std::env::temp_dir().join(format!("xstream-nccl-id-{}", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..world)
        .map(|r| {
            std::process::Command::new(&exe)
                .args(["nccl_one_process_per_gpu", "--exact", "--nocapture"])
                .env(CHILD, "1")
                .env("RANK", r.to_string())
                .env("WORLD_SIZE", world.to_string())
                .env("LOCAL_RANK", r.to_string())
                .env("XSTREAM_UNIQUE_ID_FILE", &file)
                .env("XSTREAM_COLLECTIVE_TIMEOUT_MS", "120000")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start a rank")
        })
        .collect();
    // Every rank runs at once (each waits for the others); collect them afterwards.
    let children: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait for a rank"))
        .collect();
    let _ = std::fs::remove_file(&file);
    for (r, out) in children.into_iter().enumerate() {
        let stdout = String::from_utf8_lossy(&out.stdout);
        println!("rank {r}:\n{stdout}");
        assert!(
            out.status.success() && stdout.contains("test result: ok. 1 passed"),
            "rank {r} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Set in the child of [`nccl_init_rank_missing_peer_times_out`].
const LONE: &str = "XSTREAM_NCCL_TEST_LONE";

/// A rank whose peer never comes: `init_rank` gives up after the collective timeout with a
/// timeout error instead of blocking in NCCL's init forever (a child process with a 2 s
/// timeout).
#[test]
fn nccl_init_rank_missing_peer_times_out() {
    if std::env::var(LONE).is_ok() {
        let dev = CudaBackend::open(0).expect("open");
        let id = CudaBackend::new_unique_id().expect("ncclGetUniqueId");
        let e = CudaBackend::init_rank(&dev, &id, 0, 2).expect_err("a lone rank joined");
        assert_eq!(
            e.collective_kind(),
            Some(xstream_core::CollectiveErrorKind::Timeout),
            "{e}"
        );
        return;
    }
    if devices("nccl_init_rank_missing_peer_times_out", 1).is_none() {
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "nccl_init_rank_missing_peer_times_out",
            "--exact",
            "--nocapture",
        ])
        .env(LONE, "1")
        .env("XSTREAM_COLLECTIVE_TIMEOUT_MS", "2000")
        .output()
        .expect("start the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
