//! `xstream collectives` joins a job through the TCP rendezvous (`MASTER_ADDR` /
//! `MASTER_PORT`): two CLI processes on loopback. Host jobs do not cross processes, so rank 1
//! then refuses the id it fetched, naming the process that made it: rank 0's. That names
//! the id's way from rank 0 to rank 1 through the CLI. Both processes are bounded by short
//! timeouts and killed past a generous bound.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn rank(r: usize, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_xstream"))
        .args(["collectives", "--backend", "host", "--max-bytes", "64"])
        .env("RANK", r.to_string())
        .env("WORLD_SIZE", "2")
        .env("LOCAL_RANK", "0")
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string())
        .env("XSTREAM_RENDEZVOUS_TIMEOUT_MS", "20000")
        .env("XSTREAM_COLLECTIVE_TIMEOUT_MS", "2000")
        .env_remove("XSTREAM_UNIQUE_ID")
        .env_remove("XSTREAM_UNIQUE_ID_FILE")
        .env_remove("TORCHELASTIC_USE_AGENT_STORE")
        .env_remove("XSTREAM_RENDEZVOUS_PORT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the xstream CLI")
}

fn finish(mut c: Child) -> (bool, String) {
    let start = Instant::now();
    loop {
        if c.try_wait().expect("try_wait").is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = c.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = c.wait_with_output().expect("output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn collectives_fetches_rank_0s_id_over_tcp() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let r0 = rank(0, port);
    let pid0 = r0.id();
    let r1 = rank(1, port);
    let (ok1, err1) = finish(r1);
    let (ok0, err0) = finish(r0);
    assert!(
        !ok1 && !ok0,
        "host jobs cannot span processes:\n{err0}\n{err1}"
    );
    assert!(
        err1.contains(&format!("this id was made by process {pid0}")),
        "rank 1 did not get rank 0's id:\n{err1}"
    );
    assert!(
        !err0.contains("never connected"),
        "rank 1 reached rank 0's rendezvous:\n{err0}"
    );
}

/// `xstream bootstrap` under Slurm-style variables (and nothing else) names the launcher, the
/// job token and rank 0's endpoint with where each came from; under a disagreeing mix it fails
/// naming both launchers.
#[test]
fn bootstrap_names_the_launcher_and_its_variables() {
    let run = |vars: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_xstream"));
        cmd.arg("bootstrap").env_clear();
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run xstream bootstrap");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let slurm = [
        ("SLURM_PROCID", "1"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_LOCALID", "1"),
        ("SLURM_JOB_ID", "808"),
        ("SLURM_STEP_ID", "2"),
        ("SLURM_JOB_NODELIST", "node[07-08]"),
    ];
    let (ok, text) = run(&slurm);
    assert!(ok, "{text}");
    assert!(
        text.contains("rank 1 of 2 (local rank 1) from slurm"),
        "{text}"
    );
    assert!(
        text.contains("job token \"808.2\" from SLURM_JOB_ID.SLURM_STEP_ID"),
        "{text}"
    );
    assert!(
        text.contains("rank 0's rendezvous at node07:16466: host: first host of SLURM_JOB_NODELIST (2 hosts); port: derived from SLURM_JOB_ID=808, SLURM_STEP_ID=2"),
        "{text}"
    );
    let mut mix = slurm.to_vec();
    mix.extend([("RANK", "0"), ("WORLD_SIZE", "2")]);
    let (ok, text) = run(&mix);
    assert!(!ok, "{text}");
    assert!(
        text.contains("torchrun (RANK=0, WORLD_SIZE=2) and slurm (SLURM_PROCID=1, SLURM_NTASKS=2)"),
        "{text}"
    );
    let (ok, text) = run(&[]);
    assert!(ok && text.contains("not launched as a job"), "{text}");
}
