//! The data-parallel example started unchanged under Slurm- and Open MPI-style variables, two
//! processes each, on the host backend. Host collectives do not cross processes, so the
//! documented outcome is: rank 1 fetches rank 0's id over the TCP rendezvous and then refuses
//! it, naming the process that made it (rank 0's); rank 0 handed the id out (it does not
//! report ranks that never connected) and then fails joining the host job after the short
//! collective timeout. That proves each launcher's variables carry the example through the
//! bootstrap. Every process is killed if it outlives a generous bound.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn start(vars: &[(String, String)]) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_data-parallel-allreduce"));
    cmd.args(["--backend", "host", "--elems", "64", "--steps", "1"])
        .env_clear()
        .env("XSTREAM_RENDEZVOUS_TIMEOUT_MS", "30000")
        .env("XSTREAM_COLLECTIVE_TIMEOUT_MS", "2000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Ok(p) = std::env::var("PATH") {
        cmd.env("PATH", p);
    }
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.spawn().expect("start data-parallel-allreduce")
}

fn finish(mut c: Child) -> (bool, String) {
    let start = Instant::now();
    while c.try_wait().expect("try_wait").is_none() {
        if start.elapsed() > Duration::from_secs(90) {
            let _ = c.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = c.wait_with_output().expect("output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// Starts rank 0 and rank 1 with `vars(rank)`; checks the documented outcome.
fn two_ranks(vars: impl Fn(usize) -> Vec<(String, String)>) {
    let r0 = start(&vars(0));
    let pid0 = r0.id();
    let r1 = start(&vars(1));
    let (ok1, out1) = finish(r1);
    let (ok0, out0) = finish(r0);
    assert!(
        !ok1 && !ok0,
        "host jobs cannot span processes:\n{out0}\n{out1}"
    );
    assert!(
        out1.contains(&format!("this id was made by process {pid0}")),
        "rank 1 did not get rank 0's id:\n{out1}\n--- rank 0:\n{out0}"
    );
    assert!(
        !out0.contains("never connected") && !out0.contains("rendezvous"),
        "rank 0's rendezvous did not serve rank 1:\n{out0}"
    );
}

fn kv(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn data_parallel_under_slurm_variables() {
    let port = free_port();
    two_ranks(|r| {
        kv(&[
            ("SLURM_PROCID", r.to_string()),
            ("SLURM_NTASKS", "2".into()),
            ("SLURM_LOCALID", "0".into()),
            ("SLURM_JOB_ID", "31337".into()),
            ("SLURM_STEP_ID", "0".into()),
            ("SLURM_JOB_NODELIST", "127.0.0.[1-2]".into()),
            ("XSTREAM_RENDEZVOUS_PORT", port.to_string()),
        ])
    });
}

#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn data_parallel_under_open_mpi_variables() {
    let port = free_port();
    two_ranks(|r| {
        kv(&[
            ("OMPI_COMM_WORLD_RANK", r.to_string()),
            ("OMPI_COMM_WORLD_SIZE", "2".into()),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "0".into()),
            ("OMPI_MCA_ess_base_jobid", "12345".into()),
            ("XSTREAM_MASTER_ADDR", "127.0.0.1".into()),
            ("MASTER_PORT", port.to_string()),
        ])
    });
}
