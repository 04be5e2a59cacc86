//! The TCP rendezvous (`MASTER_ADDR` / `MASTER_PORT`) on the host backend, on loopback:
//! ranks on threads that go on to form a host job, and ranks in processes (this test binary
//! started again with a rank's environment). Every wait is bounded and every child is killed
//! if it outlives its bound.

use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use xstream_core::collective::bootstrap::{Bootstrap, IdSource};
use xstream_core::collective::rendezvous::{
    rendezvous_timeout, Endpoint, RendezvousServer, RENDEZVOUS_TIMEOUT_ENV,
};
use xstream_core::{CollectiveBackend, CollectiveErrorKind, Communicator, UniqueId};
use xstream_host::{HostBackend, HostDevice};

/// Set by the parent in a child: which test body the child runs.
const CHILD: &str = "XSTREAM_RDZV_CHILD";
/// Bound for paths that succeed (they end far sooner; it only stops a broken test).
const LONG: Duration = Duration::from_secs(30);
/// The line a child prints with the id it got.
const ID_LINE: &str = "RENDEZVOUS-ID ";

/// A port nobody listens on (taken from the system, then released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs this binary's `test` again as rank `rank` of `world` against `port`.
fn spawn_rank(test: &str, rank: usize, world: usize, port: u16, timeout_ms: u64) -> Child {
    Command::new(std::env::current_exe().expect("current_exe"))
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, test)
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", world.to_string())
        .env("LOCAL_RANK", "0")
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string())
        .env(RENDEZVOUS_TIMEOUT_ENV, timeout_ms.to_string())
        .env_remove("XSTREAM_UNIQUE_ID")
        .env_remove("XSTREAM_UNIQUE_ID_FILE")
        .env_remove("TORCHELASTIC_USE_AGENT_STORE")
        .env_remove("XSTREAM_RENDEZVOUS_PORT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the test binary again")
}

/// Waits for `child` up to `bound` (killing it past that); returns (success, stdout+stderr).
fn finish(mut child: Child, bound: Duration) -> (bool, String) {
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break Some(s);
        }
        if start.elapsed() > bound {
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
        None => (false, format!("KILLED after {bound:?}\n{text}")),
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

/// A child's body: join through the environment and print the id.
fn child_rank() {
    let b = Bootstrap::from_env()
        .expect("bootstrap environment")
        .expect("launched as a rank");
    assert!(matches!(b.id_source, IdSource::Tcp(_)), "{:?}", b.id_source);
    let id = b
        .unique_id(
            HostBackend::new_unique_id,
            rendezvous_timeout().expect("timeout"),
        )
        .unwrap_or_else(|e| panic!("rank {}: {e}", b.rank));
    println!("{ID_LINE}{}", id.to_hex());
}

/// Ranks on threads: rank 0 serves through the bootstrap, the others fetch, then all of them
/// form one host job with the id.
#[test]
fn ranks_on_threads_form_a_host_job() {
    let world = 3;
    let ep = Endpoint {
        host: "127.0.0.1".into(),
        port: free_port(),
    };
    let ids: Vec<UniqueId> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..world)
            .map(|rank| {
                let b = Bootstrap::new(rank, world, 0, IdSource::Tcp(ep.clone()));
                s.spawn(move || b.unique_id(HostBackend::new_unique_id, LONG).unwrap())
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(ids.iter().all(|i| *i == ids[0]), "{ids:?}");
    let dev = HostDevice::new_isolated(0);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..world)
            .map(|rank| {
                let (dev, id) = (dev.clone(), ids[rank].clone());
                s.spawn(move || HostBackend::init_rank(&dev, &id, rank, world))
            })
            .collect();
        for (rank, h) in hs.into_iter().enumerate() {
            let c = h.join().unwrap().unwrap();
            assert_eq!((c.rank(), c.world_size()), (rank, world));
        }
    });
}

/// Ranks in processes: this process serves as rank 0, two children fetch the id.
#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn ranks_in_processes_get_rank_0s_id() {
    const T: &str = "ranks_in_processes_get_rank_0s_id";
    if std::env::var(CHILD).as_deref() == Ok(T) {
        return child_rank();
    }
    let server = RendezvousServer::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = server.local_addr().unwrap().port();
    let id = HostBackend::new_unique_id().unwrap();
    let children: Vec<_> = (1..3).map(|r| spawn_rank(T, r, 3, port, 30_000)).collect();
    let served = server.serve(&id, 3, LONG);
    let outs: Vec<_> = children.into_iter().map(|c| finish(c, LONG)).collect();
    let report = served.unwrap_or_else(|e| panic!("{e}\n{outs:#?}"));
    assert_eq!(report.served, 2);
    for (ok, text) in &outs {
        assert!(ok, "{text}");
        assert_eq!(printed_ids(text), vec![id.to_hex()], "{text}");
    }
}

/// Rank 0 in a child process (serving through the bootstrap environment), ranks 1 and 2 here
/// and in another child.
#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn rank_0_in_a_process_serves_the_others() {
    const T: &str = "rank_0_in_a_process_serves_the_others";
    if std::env::var(CHILD).as_deref() == Ok(T) {
        return child_rank();
    }
    let port = free_port();
    let rank0 = spawn_rank(T, 0, 3, port, 30_000);
    let rank2 = spawn_rank(T, 2, 3, port, 30_000);
    let ep = Endpoint {
        host: "127.0.0.1".into(),
        port,
    };
    let here = xstream_core::collective::rendezvous::fetch_id(&ep, 1, 3, LONG);
    let (ok0, text0) = finish(rank0, LONG);
    let (ok2, text2) = finish(rank2, LONG);
    let here = here.unwrap_or_else(|e| panic!("{e}\n{text0}\n{text2}"));
    assert!(ok0 && ok2, "{text0}\n{text2}");
    assert_eq!(printed_ids(&text0), vec![here.to_hex()], "{text0}");
    assert_eq!(printed_ids(&text2), vec![here.to_hex()], "{text2}");
}

/// A child with another `WORLD_SIZE`: both it and rank 0 fail, naming the sizes.
#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn a_process_with_another_world_size_fails_both() {
    const T: &str = "a_process_with_another_world_size_fails_both";
    if std::env::var(CHILD).as_deref() == Ok(T) {
        return child_rank();
    }
    let server = RendezvousServer::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = server.local_addr().unwrap().port();
    let child = spawn_rank(T, 1, 4, port, 30_000);
    // The child announced 4 ranks: rank 0 would wait for ranks 2 and 3 of that size to tell
    // them too, until the window ends; a short window keeps the test short.
    let e = server
        .serve(
            &HostBackend::new_unique_id().unwrap(),
            2,
            Duration::from_secs(2),
        )
        .unwrap_err();
    let (ok, text) = finish(child, LONG);
    assert_eq!(e.collective_kind(), Some(CollectiveErrorKind::Init));
    assert!(e.to_string().contains("WORLD_SIZE=4"), "{e}");
    assert!(!ok, "{text}");
    assert!(
        text.contains("this rank has WORLD_SIZE=4, rank 0 has WORLD_SIZE=2"),
        "{text}"
    );
}

/// A rank that never connects: rank 0 (a child here) times out naming it, and tells rank 1
/// the same reason.
#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn a_rank_that_never_connects_fails_rank_0() {
    const T: &str = "a_rank_that_never_connects_fails_rank_0";
    if std::env::var(CHILD).as_deref() == Ok(T) {
        return child_rank();
    }
    let port = free_port();
    let rank0 = spawn_rank(T, 0, 3, port, 1_500);
    let ep = Endpoint {
        host: "127.0.0.1".into(),
        port,
    };
    let got = xstream_core::collective::rendezvous::fetch_id(&ep, 1, 3, LONG);
    let (ok, text) = finish(rank0, LONG);
    let e = got.expect_err(&text);
    assert_eq!(
        e.collective_kind(),
        Some(CollectiveErrorKind::Timeout),
        "{e}"
    );
    assert!(
        e.to_string().contains("ranks never connected: ranks 2"),
        "{e}"
    );
    assert!(!ok, "{text}");
    assert!(
        text.contains("1 of 2 ranks never connected: ranks 2"),
        "{text}"
    );
}
