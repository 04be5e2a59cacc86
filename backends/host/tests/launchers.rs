//! Jobs started the way Slurm and the MPI launchers start them, without a cluster: this test
//! binary is started again once per rank with only that launcher's variables (the parent's
//! environment is cleared), on loopback addresses standing for hosts (`127.0.0.1` and
//! `127.0.0.2`). Every rank joins through `Bootstrap::from_env` and the TCP rendezvous and
//! prints the id it got. Every child is killed if it outlives a generous bound.

use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use xstream_core::collective::bootstrap::{Bootstrap, IdSource};
use xstream_core::collective::launcher::Launcher;
use xstream_core::collective::rendezvous::rendezvous_timeout;
use xstream_core::CollectiveBackend;
use xstream_host::HostBackend;

/// Set by the parent in a child: which test body the child runs.
const CHILD: &str = "XSTREAM_LAUNCHER_TEST_CHILD";
/// Bound for a child (it ends far sooner; it only stops a broken test).
const LONG: Duration = Duration::from_secs(60);
/// The line a child prints with the id it got.
const ID_LINE: &str = "LAUNCHED-ID ";

fn free_port(ip: &str) -> u16 {
    TcpListener::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts this binary's `test` again with exactly `vars` (and `PATH`).
fn spawn(test: &str, vars: &[(String, String)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().expect("current_exe"));
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env_clear()
        .env(CHILD, test)
        .env("XSTREAM_RENDEZVOUS_TIMEOUT_MS", "30000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Ok(p) = std::env::var("PATH") {
        cmd.env("PATH", p);
    }
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.spawn().expect("start the test binary again")
}

/// Waits for `child` up to [`LONG`] (killing it past that); returns (success, output).
fn finish(mut child: Child) -> (bool, String) {
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break Some(s);
        }
        if start.elapsed() > LONG {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut text = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut text);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut text);
    }
    match status {
        Some(s) => (s.success(), text),
        None => (false, format!("KILLED after {LONG:?}\n{text}")),
    }
}

/// A child's body: join through the environment, check the launcher, print the id.
fn child(expect: Launcher) {
    let b = Bootstrap::from_env()
        .expect("bootstrap environment")
        .expect("launched as a rank");
    assert_eq!(b.launcher, expect, "{:#?}", b.found);
    assert!(matches!(b.id_source, IdSource::Tcp(_)), "{:?}", b.id_source);
    for line in &b.found {
        println!("found: {line}");
    }
    match b.unique_id(HostBackend::new_unique_id, rendezvous_timeout().unwrap()) {
        Ok(id) => println!("{ID_LINE}{}", id.to_hex()),
        Err(e) => panic!("rank {}: {e}", b.rank),
    }
}

fn printed_ids(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            l.find(ID_LINE)
                .map(|i| l[i + ID_LINE.len()..].trim().to_string())
        })
        .collect()
}

fn kv(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// Runs every rank's environment as a child; asserts that all of them got one id.
fn all_get_one_id(test: &str, ranks: Vec<Vec<(String, String)>>) {
    let children: Vec<_> = ranks.iter().map(|vars| spawn(test, vars)).collect();
    let outs: Vec<_> = children.into_iter().map(finish).collect();
    let mut ids = Vec::new();
    for (ok, text) in &outs {
        assert!(ok, "{outs:#?}");
        let got = printed_ids(text);
        assert_eq!(got.len(), 1, "{text}");
        ids.push(got[0].clone());
    }
    assert!(ids.iter().all(|i| *i == ids[0]), "{outs:#?}");
}

#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn slurm_ranks_meet_at_the_first_host_of_the_node_list() {
    const T: &str = "slurm_ranks_meet_at_the_first_host_of_the_node_list";
    if std::env::var(CHILD).as_deref() == Ok(T) {
        return child(Launcher::Slurm);
    }
    let port = free_port("127.0.0.1");
    // Three tasks over two "hosts": tasks 0 and 1 on 127.0.0.1, task 2 on 127.0.0.2.
    let ranks = (0..3)
        .map(|r: usize| {
            kv(&[
                ("SLURM_PROCID", r.to_string()),
                ("SLURM_NTASKS", "3".into()),
                ("SLURM_LOCALID", (r % 2).to_string()),
                ("SLURM_JOB_ID", "4242".into()),
                ("SLURM_STEP_ID", "0".into()),
                ("SLURM_JOB_NODELIST", "127.0.0.[1-2]".into()),
                ("XSTREAM_RENDEZVOUS_PORT", port.to_string()),
            ])
        })
        .collect();
    all_get_one_id(T, ranks);
}

#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn open_mpi_ranks_meet_at_xstream_master_addr() {
    const T: &str = "open_mpi_ranks_meet_at_xstream_master_addr";
    if std::env::var(CHILD).as_deref() == Ok(T) {
        return child(Launcher::OpenMpi);
    }
    let port = free_port("127.0.0.2");
    let ranks = (0..3)
        .map(|r: usize| {
            kv(&[
                ("OMPI_COMM_WORLD_RANK", r.to_string()),
                ("OMPI_COMM_WORLD_SIZE", "3".into()),
                ("OMPI_COMM_WORLD_LOCAL_RANK", r.to_string()),
                ("OMPI_MCA_ess_base_jobid", "3735879681".into()),
                ("XSTREAM_MASTER_ADDR", "127.0.0.2".into()),
                ("MASTER_PORT", port.to_string()),
            ])
        })
        .collect();
    all_get_one_id(T, ranks);
}

#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn hydra_ranks_meet_at_master_addr() {
    const T: &str = "hydra_ranks_meet_at_master_addr";
    if std::env::var(CHILD).as_deref() == Ok(T) {
        return child(Launcher::Hydra);
    }
    let port = free_port("127.0.0.1");
    let ranks = (0..2)
        .map(|r: usize| {
            kv(&[
                ("PMI_RANK", r.to_string()),
                ("PMI_SIZE", "2".into()),
                ("MPI_LOCALRANKID", r.to_string()),
                ("XSTREAM_JOB_ID", "hydra-test".into()),
                ("MASTER_ADDR", "127.0.0.1".into()),
                ("MASTER_PORT", port.to_string()),
            ])
        })
        .collect();
    all_get_one_id(T, ranks);
}

/// A rank launched with another task count: every rank fails with one reason, well before
/// the 30 s rendezvous window ends; none of them times out.
#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn a_rank_with_another_task_count_fails_every_rank_with_one_reason() {
    const T: &str = "a_rank_with_another_task_count_fails_every_rank_with_one_reason";
    if std::env::var(CHILD).as_deref() == Ok(T) {
        return child(Launcher::Slurm);
    }
    let port = free_port("127.0.0.1");
    let rank = |r: usize, n: usize| {
        kv(&[
            ("SLURM_PROCID", r.to_string()),
            ("SLURM_NTASKS", n.to_string()),
            ("SLURM_LOCALID", "0".into()),
            ("SLURM_JOB_ID", "77".into()),
            ("SLURM_STEP_ID", "1".into()),
            ("SLURM_JOB_NODELIST", "127.0.0.1".into()),
            ("XSTREAM_RENDEZVOUS_PORT", port.to_string()),
        ])
    };
    let children: Vec<_> = [rank(0, 3), rank(1, 3), rank(2, 4), rank(3, 4)]
        .iter()
        .map(|v| spawn(T, v))
        .collect();
    let outs: Vec<_> = children.into_iter().map(finish).collect();
    // Ranks 2 and 3 both disagree; whichever rank 0 heard first is the one reason, and every
    // rank must name the same one.
    let reason = ["rank 2 (from ", "rank 3 (from "]
        .into_iter()
        .find(|r| outs[0].1.contains(r))
        .unwrap_or_else(|| panic!("rank 0 names neither disagreeing rank: {outs:#?}"));
    for (ok, text) in &outs {
        assert!(!ok, "{outs:#?}");
        assert!(text.contains(reason), "{outs:#?}");
        assert!(
            text.contains("has WORLD_SIZE=4, rank 0 has WORLD_SIZE=3"),
            "{text}"
        );
        assert!(
            !text.contains("KILLED") && !text.contains("never connected"),
            "{text}"
        );
    }
}
