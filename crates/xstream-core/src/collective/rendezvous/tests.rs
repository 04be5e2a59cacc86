//! Loopback tests of the TCP rendezvous: every server and client here has a timeout, so a
//! failing test ends instead of hanging.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use super::*;
use crate::collective::bootstrap::{Bootstrap, IdSource};

/// Generous bound for paths that succeed (they finish far sooner; the bound only stops a
/// broken test).
const LONG: Duration = Duration::from_secs(30);

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn endpoint(addr: SocketAddr) -> Endpoint {
    Endpoint {
        host: addr.ip().to_string(),
        port: addr.port(),
    }
}

fn id() -> UniqueId {
    UniqueId::from_bytes((0..200u8).collect::<Vec<_>>()).unwrap()
}

fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let m: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| m.get(k).cloned()
}

/// Sends `bytes` as a raw connection, closes its sending side and returns what the server
/// answered (until it closes).
fn raw(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(LONG)).unwrap();
    c.write_all(bytes).unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    out
}

#[test]
fn hello_layout_is_the_documented_one() {
    let h = encode_hello(4, 3);
    assert_eq!(&h[..4], b"XSRZ");
    assert_eq!(h[4..6], 2u16.to_le_bytes());
    assert_eq!(h[6..8], [0, 0]);
    assert_eq!(h[8..12], 4u32.to_le_bytes());
    assert_eq!(h[12..16], 3u32.to_le_bytes());
    let j = encode_hello_for_job(4, 3, b"4242.0");
    assert_eq!(j.len(), HELLO_LEN + 6);
    assert_eq!(j[6..8], 6u16.to_le_bytes());
    assert_eq!(&j[..6], &h[..6]);
    assert_eq!(&j[8..16], &h[8..16]);
    assert_eq!(&j[16..], b"4242.0");
}

#[test]
fn endpoint_from_environment() {
    assert_eq!(Endpoint::from_lookup(lookup(&[])).unwrap(), None);
    let ep = |vars: &[(&str, &str)]| Endpoint::from_lookup(lookup(vars));
    assert_eq!(
        ep(&[("MASTER_ADDR", " node0 "), ("MASTER_PORT", "29500")])
            .unwrap()
            .unwrap(),
        Endpoint {
            host: "node0".into(),
            port: 29500
        }
    );
    // torchrun's agent store holds MASTER_PORT: the next port.
    let agent = ep(&[
        ("MASTER_ADDR", "h"),
        ("MASTER_PORT", "29500"),
        ("TORCHELASTIC_USE_AGENT_STORE", "True"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(agent.port, 29501);
    let over = ep(&[
        ("MASTER_ADDR", "h"),
        ("MASTER_PORT", "29500"),
        ("TORCHELASTIC_USE_AGENT_STORE", "True"),
        ("XSTREAM_RENDEZVOUS_PORT", "4000"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(over.port, 4000);
    let err = |vars: &[(&str, &str)]| ep(vars).unwrap_err().to_string();
    assert!(err(&[("MASTER_ADDR", "h")]).contains("MASTER_PORT is not"));
    assert!(err(&[("MASTER_PORT", "1")]).contains("MASTER_ADDR is not"));
    assert!(err(&[("MASTER_ADDR", "h"), ("MASTER_PORT", "0")]).contains("not a TCP port"));
    assert!(err(&[("MASTER_ADDR", "h"), ("MASTER_PORT", "70000")]).contains("not a TCP port"));
    assert!(err(&[("MASTER_ADDR", " "), ("MASTER_PORT", "1")]).contains("empty"));
    assert!(err(&[
        ("MASTER_ADDR", "h"),
        ("MASTER_PORT", "65535"),
        ("TORCHELASTIC_USE_AGENT_STORE", "1")
    ])
    .contains("XSTREAM_RENDEZVOUS_PORT"));
}

#[test]
fn bootstrap_takes_the_tcp_source_last() {
    let tcp = [
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "29500"),
    ];
    let b = Bootstrap::from_lookup(lookup(&tcp)).unwrap().unwrap();
    assert_eq!(
        b.id_source,
        IdSource::Tcp(Endpoint {
            host: "127.0.0.1".into(),
            port: 29500
        })
    );
    let mut with_file = tcp.to_vec();
    with_file.push(("XSTREAM_UNIQUE_ID_FILE", "/tmp/z"));
    let b = Bootstrap::from_lookup(lookup(&with_file)).unwrap().unwrap();
    assert_eq!(b.id_source, IdSource::File("/tmp/z".into()));
    let mut with_id = tcp.to_vec();
    with_id.push(("XSTREAM_UNIQUE_ID", "ab"));
    let b = Bootstrap::from_lookup(lookup(&with_id)).unwrap().unwrap();
    assert!(matches!(b.id_source, IdSource::Given(_)));
    let single = [("RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "x")];
    let b = Bootstrap::from_lookup(lookup(&single)).unwrap().unwrap();
    assert_eq!(b.id_source, IdSource::Local, "one rank needs no rendezvous");
    let e = Bootstrap::from_lookup(lookup(&[("RANK", "0"), ("WORLD_SIZE", "2")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("MASTER_ADDR"), "{e}");
}

#[test]
fn ranks_on_threads_get_rank_0s_id() {
    let server = RendezvousServer::bind(loopback()).unwrap();
    let ep = endpoint(server.local_addr().unwrap());
    let world = 4;
    let clients: Vec<_> = (1..world)
        .map(|r| {
            let ep = ep.clone();
            thread::spawn(move || fetch_id(&ep, r, world, LONG))
        })
        .collect();
    let report = server.serve(&id(), world, LONG).unwrap();
    assert_eq!(report.served, world - 1);
    assert!(report.ignored.is_empty(), "{:?}", report.ignored);
    for c in clients {
        assert_eq!(c.join().unwrap().unwrap(), id());
    }
}

#[test]
fn ranks_retry_until_rank_0_listens() {
    // A port nobody listens on yet (taken from the system, then released).
    let port = TcpListener::bind(loopback())
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ep = Endpoint {
        host: "127.0.0.1".into(),
        port,
    };
    let clients: Vec<_> = (1..3)
        .map(|r| {
            let ep = ep.clone();
            thread::spawn(move || fetch_id(&ep, r, 3, LONG))
        })
        .collect();
    // Let the clients find the port closed at least once.
    thread::sleep(Duration::from_millis(100));
    let boot = Bootstrap::new(0, 3, 0, IdSource::Tcp(ep));
    let made = boot.unique_id(|| Ok(id()), LONG).unwrap();
    assert_eq!(made, id());
    for c in clients {
        assert_eq!(c.join().unwrap().unwrap(), id());
    }
}

#[test]
fn stray_connections_are_ignored_and_counted() {
    let server = RendezvousServer::bind(loopback())
        .unwrap()
        .with_hello_timeout(Duration::from_millis(200));
    let addr = server.local_addr().unwrap();
    let ep = endpoint(addr);
    let strays = thread::spawn(move || {
        // Garbage, an HTTP request, a closed connection, half a hello, a silent connection.
        assert!(raw(addr, b"\x00\x01garbage-bytes-here").is_empty());
        assert!(raw(addr, b"GET / HTTP/1.1\r\n\r\n").is_empty());
        drop(TcpStream::connect(addr).unwrap());
        assert!(raw(addr, &encode_hello(2, 1)[..7]).is_empty());
        let silent = TcpStream::connect(addr).unwrap();
        thread::sleep(Duration::from_millis(300));
        drop(silent);
        fetch_id(&ep, 1, 2, LONG)
    });
    let report = server.serve(&id(), 2, LONG).unwrap();
    assert_eq!(strays.join().unwrap().unwrap(), id());
    assert_eq!(report.served, 1);
    assert_eq!(report.ignored.len(), 5, "{:#?}", report.ignored);
    assert_eq!(report.ignored_total, 5);
    assert!(
        report.ignored[0].contains("wrong magic"),
        "{:?}",
        report.ignored
    );
    assert!(
        report.ignored[2].contains("closed after 0"),
        "{:?}",
        report.ignored
    );
    assert!(
        report.ignored[3].contains("closed after 7"),
        "{:?}",
        report.ignored
    );
    assert!(
        report.ignored[4].contains("no full hello"),
        "{:?}",
        report.ignored
    );
}

/// The detail of a collective error (the reason rank 0 gives).
fn detail(e: &Error) -> String {
    match e {
        Error::Collective { detail, .. } => detail.clone(),
        other => panic!("not a collective error: {other}"),
    }
}

#[test]
fn a_scan_of_1000_connections_leaves_the_job_intact() {
    let server = RendezvousServer::bind(loopback())
        .unwrap()
        .with_job("job-a")
        .with_hello_timeout(Duration::from_secs(2));
    let addr = server.local_addr().unwrap();
    let ep = endpoint(addr);
    // Rank 1 says hello before the scan and is held through it.
    let ep1 = ep.clone();
    let early = thread::spawn(move || fetch_id_for_job(&ep1, 1, 3, "job-a", LONG));
    let scan = thread::spawn(move || {
        let mut silent = Vec::new();
        for i in 0..1000u32 {
            let Ok(mut c) = TcpStream::connect(addr) else {
                continue;
            };
            match i % 4 {
                0 => drop(c),
                1 => {
                    let _ = c.write_all(b"\x16\x03\x01 not a hello at all");
                }
                2 => {
                    let _ = c.write_all(&encode_hello_for_job(3, 2, b"job-b"));
                }
                _ => {
                    silent.push(c);
                    if silent.len() > 100 {
                        silent.remove(0);
                    }
                }
            }
        }
        // The last rank comes after the scan, while 100 silent connections are still open.
        let got = fetch_id_for_job(&ep, 2, 3, "job-a", LONG);
        drop(silent);
        got
    });
    let report = server.serve(&id(), 3, LONG).unwrap();
    assert_eq!(scan.join().unwrap().unwrap(), id());
    assert_eq!(early.join().unwrap().unwrap(), id());
    assert_eq!(report.served, 2);
    assert!(report.ignored_total >= 500, "{}", report.ignored_total);
    assert_eq!(report.ignored.len(), MAX_REPORTED);
}

#[test]
fn a_hello_of_another_job_is_ignored() {
    let server = RendezvousServer::bind(loopback())
        .unwrap()
        .with_job("1234.0");
    let ep = endpoint(server.local_addr().unwrap());
    // Another job on the same port, with another world size: refused, rank 0 goes on; then
    // the real rank 1.
    let both = thread::spawn(move || {
        let stray = fetch_id_for_job(&ep, 1, 5, "999.0", LONG);
        (stray, fetch_id_for_job(&ep, 1, 2, "1234.0", LONG))
    });
    let report = server.serve(&id(), 2, LONG).unwrap();
    let (stray, real) = both.join().unwrap();
    let se = stray.unwrap_err();
    assert_eq!(se.collective_kind(), Some(CollectiveErrorKind::Init));
    assert!(se.to_string().contains("another job"), "{se}");
    assert!(se.to_string().contains("\"999.0\""), "{se}");
    assert_eq!(real.unwrap(), id());
    assert_eq!(report.ignored_total, 1, "{:?}", report.ignored);
    assert!(
        report.ignored[0].contains("another job"),
        "{:?}",
        report.ignored
    );
    // A hello without a token is another job too when rank 0 has one.
    let server = RendezvousServer::bind(loopback())
        .unwrap()
        .with_job("1234.0");
    let ep = endpoint(server.local_addr().unwrap());
    let both = thread::spawn(move || {
        let tokenless = fetch_id(&ep, 1, 2, LONG);
        (tokenless, fetch_id_for_job(&ep, 1, 2, "1234.0", LONG))
    });
    server.serve(&id(), 2, LONG).unwrap();
    let (tokenless, real) = both.join().unwrap();
    assert!(tokenless.unwrap_err().to_string().contains("another job"));
    assert_eq!(real.unwrap(), id());
}

#[test]
fn a_hello_of_another_version_is_answered_and_ignored() {
    let server = RendezvousServer::bind(loopback()).unwrap();
    let addr = server.local_addr().unwrap();
    let ep = endpoint(addr);
    let c = thread::spawn(move || {
        let mut v1 = encode_hello(2, 1);
        v1[4..6].copy_from_slice(&1u16.to_le_bytes());
        let reply = raw(addr, &v1);
        (reply, fetch_id(&ep, 1, 2, LONG))
    });
    let report = server.serve(&id(), 2, LONG).unwrap();
    let (reply, got) = c.join().unwrap();
    assert_eq!(got.unwrap(), id());
    assert_eq!(&reply[..4], &MAGIC);
    assert_eq!(u16_at(&reply, 6), Status::UnsupportedVersion as u16);
    let n = u32_at(&reply, 12) as usize;
    assert_eq!(reply.len(), REPLY_HEADER_LEN + n);
    assert!(String::from_utf8_lossy(&reply[16..]).contains("version 1"));
    assert_eq!(report.ignored_total, 1);
}

/// Runs a server of `world` ranks against one raw hello with a short window; returns
/// (server error, reply).
fn refused(world: usize, hello: [u8; HELLO_LEN]) -> (Error, Vec<u8>) {
    let server = RendezvousServer::bind(loopback()).unwrap();
    let addr = server.local_addr().unwrap();
    let c = thread::spawn(move || raw(addr, &hello));
    let e = server
        .serve(&id(), world, Duration::from_millis(500))
        .unwrap_err();
    (e, c.join().unwrap())
}

#[test]
fn a_rank_out_of_range_fails_both_sides_with_the_reason() {
    for (hello, words) in [
        (encode_hello(2, 5), "RANK=5"),
        (encode_hello(2, 0), "RANK=0"),
    ] {
        let (e, reply) = refused(2, hello);
        assert_eq!(e.collective_kind(), Some(CollectiveErrorKind::Init));
        assert!(e.to_string().contains(words), "{e}");
        assert_eq!(&reply[..4], &MAGIC);
        assert_eq!(u16_at(&reply, 6), Status::RankOutOfRange as u16);
        let n = u32_at(&reply, 12) as usize;
        assert_eq!(reply.len(), REPLY_HEADER_LEN + n, "a header and the reason");
        assert_eq!(String::from_utf8_lossy(&reply[16..]), detail(&e));
    }
}

#[test]
fn a_wrong_world_size_fails_every_rank_with_one_reason() {
    let server = RendezvousServer::bind(loopback()).unwrap().with_job("j");
    let ep = endpoint(server.local_addr().unwrap());
    // Rank 1 is right; ranks 2 and 4 think the job has 5 ranks; rank 3 is right.
    let ranks: Vec<_> = [(1, 4), (2, 5), (3, 4), (4, 5)]
        .into_iter()
        .map(|(r, w)| {
            let ep = ep.clone();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(50 * r as u64));
                fetch_id_for_job(&ep, r, w, "j", LONG)
            })
        })
        .collect();
    let e = server.serve(&id(), 4, LONG).unwrap_err();
    assert_eq!(e.collective_kind(), Some(CollectiveErrorKind::Init));
    let reason = detail(&e);
    assert!(reason.contains("WORLD_SIZE=5"), "{reason}");
    for (i, h) in ranks.into_iter().enumerate() {
        let ce = h.join().unwrap().unwrap_err();
        assert_eq!(
            ce.collective_kind(),
            Some(CollectiveErrorKind::Init),
            "{ce}"
        );
        assert!(ce.to_string().contains(&reason), "rank {}: {ce}", i + 1);
    }
}

#[test]
fn a_duplicate_rank_fails_both_sides() {
    let server = RendezvousServer::bind(loopback()).unwrap();
    let ep = endpoint(server.local_addr().unwrap());
    let twins: Vec<_> = (0..2)
        .map(|_| {
            let ep = ep.clone();
            thread::spawn(move || fetch_id(&ep, 1, 3, LONG))
        })
        .collect();
    let ep2 = ep.clone();
    let two = thread::spawn(move || {
        thread::sleep(Duration::from_millis(300));
        fetch_id(&ep2, 2, 3, LONG)
    });
    let e = server.serve(&id(), 3, LONG).unwrap_err();
    assert!(e.to_string().contains("rank 1 connected twice"), "{e}");
    let reason = detail(&e);
    let errs: Vec<String> = twins
        .into_iter()
        .chain([two])
        .map(|h| h.join().unwrap().unwrap_err().to_string())
        .collect();
    assert!(errs.iter().all(|t| t.contains(&reason)), "{errs:#?}");
    assert!(
        errs.iter()
            .any(|t| t.contains("already holds or gave the id")),
        "{errs:#?}"
    );
}

#[test]
fn a_rank_that_never_connects_times_every_rank_out_naming_it() {
    let server = RendezvousServer::bind(loopback()).unwrap();
    let ep = endpoint(server.local_addr().unwrap());
    let c = thread::spawn(move || fetch_id(&ep, 2, 4, LONG));
    let e = server
        .serve(&id(), 4, Duration::from_millis(400))
        .unwrap_err();
    assert_eq!(e.collective_kind(), Some(CollectiveErrorKind::Timeout));
    assert!(
        e.to_string()
            .contains("2 of 3 ranks never connected: ranks 1, 3"),
        "{e}"
    );
    let ce = c.join().unwrap().unwrap_err();
    assert_eq!(ce.collective_kind(), Some(CollectiveErrorKind::Timeout));
    assert!(ce.to_string().contains(&detail(&e)), "{ce}");
}

#[test]
fn a_rank_dropped_before_its_hello_reconnects() {
    // A server that closes the first connection unanswered, then serves.
    let l = TcpListener::bind(loopback()).unwrap();
    let addr = l.local_addr().unwrap();
    let c = thread::spawn(move || fetch_id(&endpoint(addr), 1, 2, LONG));
    drop(l.accept().unwrap());
    let server = RendezvousServer {
        listener: l,
        hello_timeout: DEFAULT_HELLO_TIMEOUT,
        job: String::new(),
    };
    server.serve(&id(), 2, LONG).unwrap();
    assert_eq!(c.join().unwrap().unwrap(), id());
}

#[test]
fn a_rank_without_rank_0_times_out() {
    let port = TcpListener::bind(loopback())
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ep = Endpoint {
        host: "127.0.0.1".into(),
        port,
    };
    let e = fetch_id(&ep, 1, 2, Duration::from_millis(200)).unwrap_err();
    assert_eq!(e.collective_kind(), Some(CollectiveErrorKind::Timeout));
    assert!(e.to_string().contains("could not reach"), "{e}");
    assert!(
        fetch_id(&ep, 0, 2, LONG).is_err(),
        "rank 0 serves, never fetches"
    );
    assert!(fetch_id(&ep, 2, 2, LONG).is_err());
}

#[test]
fn a_server_that_is_not_a_rendezvous_is_refused() {
    let l = TcpListener::bind(loopback()).unwrap();
    let ep = endpoint(l.local_addr().unwrap());
    let s = thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut h = [0u8; HELLO_LEN];
        c.read_exact(&mut h).unwrap();
        c.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").unwrap();
    });
    let e = fetch_id(&ep, 1, 2, LONG).unwrap_err();
    s.join().unwrap();
    assert_eq!(e.collective_kind(), Some(CollectiveErrorKind::Init));
    assert!(e.to_string().contains("not an xstream rendezvous"), "{e}");
}

#[test]
fn a_silent_server_times_the_rank_out() {
    let l = TcpListener::bind(loopback()).unwrap();
    let ep = endpoint(l.local_addr().unwrap());
    // Accepted by the kernel's backlog, never answered.
    let e = fetch_id(&ep, 1, 2, Duration::from_millis(200)).unwrap_err();
    drop(l);
    assert_eq!(e.collective_kind(), Some(CollectiveErrorKind::Timeout));
    assert!(e.to_string().contains("did not answer"), "{e}");
}
