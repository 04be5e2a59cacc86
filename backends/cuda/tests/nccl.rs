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
    Backend, CollectiveBackend, Communicator, DataType, Device, Error, ReduceOp, Stream, StreamDesc,
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

/// The collective conformance checks over every GPU of the machine, one process.
#[test]
fn nccl_conformance_one_process() {
    let Some(devs) = devices("nccl_conformance_one_process", 2) else {
        return;
    };
    let env = CollEnv::<CudaBackend> {
        devices: devs,
        short_timeout: Duration::from_secs(2),
    };
    let sum = run_collectives(&env, None, report_coll_line);
    println!("nccl: {sum:?}");
    assert_eq!(sum.failed, 0, "NCCL collective failures (see FAIL lines)");
}

/// A one-rank job on one GPU: all_reduce is the identity, and bad arguments are refused.
#[test]
fn nccl_single_rank() {
    let Some(devs) = devices("nccl_single_rank", 1) else {
        return;
    };
    let d = &devs[0];
    let cs = CudaBackend::init_all(std::slice::from_ref(d)).expect("ncclCommInitAll");
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let b = d.alloc(64).unwrap();
    s.write(&b, 0, (0..64u8).collect()).unwrap();
    cs[0]
        .all_reduce(&b, &b, 16, DataType::I32, ReduceOp::Sum, &s)
        .unwrap();
    xstream_core::collective::synchronize(&cs[0], &s).unwrap();
    let rb = s.read(&b, 0, 64).unwrap();
    s.synchronize().unwrap();
    assert_eq!(rb.take().unwrap(), (0..64u8).collect::<Vec<_>>());
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
