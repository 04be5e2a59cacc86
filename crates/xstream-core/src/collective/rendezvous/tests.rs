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
    assert_eq!(h[4..6], 1u16.to_le_bytes());
    assert_eq!(h[6..8], [0, 0]);
    assert_eq!(h[8..12], 4u32.to_le_bytes());
    assert_eq!(h[12..16], 3u32.to_le_bytes());
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
    let boot = Bootstrap {
        rank: 0,
        world_size: 3,
        local_rank: 0,
        id_source: IdSource::Tcp(ep),
    };
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

#[test]
fn too_many_stray_connections_fail_rank_0() {
    let server = RendezvousServer::bind(loopback()).unwrap();
    let addr = server.local_addr().unwrap();
    let flood = thread::spawn(move || {
        for _ in 0..=MAX_STRAY_CONNECTIONS {
            let mut c = TcpStream::connect(addr).unwrap();
            let _ = c.write_all(b"nope-nope-nope-nope");
        }
    });
    let e = server.serve(&id(), 2, LONG).unwrap_err();
    flood.join().unwrap();
    assert_eq!(e.collective_kind(), Some(CollectiveErrorKind::Init));
    assert!(e.to_string().contains("not xstream ranks"), "{e}");
}

/// Runs a server of `world` ranks against one raw hello; returns (server error, reply).
fn refused(world: usize, hello: [u8; HELLO_LEN]) -> (Error, Vec<u8>) {
    let server = RendezvousServer::bind(loopback()).unwrap();
    let addr = server.local_addr().unwrap();
    let c = thread::spawn(move || raw(addr, &hello));
    let e = server.serve(&id(), world, LONG).unwrap_err();
    (e, c.join().unwrap())
}

#[test]
fn a_rank_out_of_range_or_of_another_version_fails_both_sides() {
    for (hello, status, words) in [
        (encode_hello(2, 5), Status::RankOutOfRange, "RANK=5"),
        (encode_hello(2, 0), Status::RankOutOfRange, "RANK=0"),
        (
            {
                let mut h = encode_hello(2, 1);
                h[4] = 9;
                h
            },
            Status::UnsupportedVersion,
            "version 9",
        ),
    ] {
        let (e, reply) = refused(2, hello);
        assert_eq!(e.collective_kind(), Some(CollectiveErrorKind::Init));
        assert!(e.to_string().contains(words), "{e}");
        assert_eq!(reply.len(), REPLY_HEADER_LEN, "a header and no id");
        assert_eq!(&reply[..4], &MAGIC);
        assert_eq!(u16_at(&reply, 6), status as u16);
        assert_eq!(u32_at(&reply, 12), 0);
    }
}

#[test]
fn a_wrong_world_size_fails_both_sides() {
    let server = RendezvousServer::bind(loopback()).unwrap();
    let ep = endpoint(server.local_addr().unwrap());
    let c = thread::spawn(move || fetch_id(&ep, 1, 3, LONG));
    let e = server.serve(&id(), 2, LONG).unwrap_err();
    assert_eq!(e.collective_kind(), Some(CollectiveErrorKind::Init));
    assert!(e.to_string().contains("WORLD_SIZE=3"), "{e}");
    let ce = c.join().unwrap().unwrap_err();
    assert_eq!(ce.collective_kind(), Some(CollectiveErrorKind::Init));
    assert!(
        ce.to_string()
            .contains("this rank has WORLD_SIZE=3, rank 0 has WORLD_SIZE=2"),
        "{ce}"
    );
}

#[test]
fn a_duplicate_rank_fails_both_sides() {
    let server = RendezvousServer::bind(loopback()).unwrap();
    let ep = endpoint(server.local_addr().unwrap());
    let (ep1, ep2) = (ep.clone(), ep);
    let c = thread::spawn(move || {
        let first = fetch_id(&ep1, 1, 3, LONG);
        let second = fetch_id(&ep2, 1, 3, LONG);
        (first, second)
    });
    let e = server.serve(&id(), 3, LONG).unwrap_err();
    assert!(e.to_string().contains("rank 1 connected twice"), "{e}");
    let (first, second) = c.join().unwrap();
    assert_eq!(first.unwrap(), id());
    let se = second.unwrap_err();
    assert!(se.to_string().contains("already gave the id"), "{se}");
}

#[test]
fn a_rank_that_never_connects_times_rank_0_out_naming_it() {
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
