use std::collections::HashMap;
use std::time::Duration;

use super::bootstrap::{read_id_file, write_id_file, Bootstrap, IdSource};
use super::*;

fn args(kind: CollectiveKind, count: usize, op: Option<ReduceOp>, root: usize) -> OpArgs {
    OpArgs::new(kind, count, DataType::F32, op, root)
}

#[test]
fn dtype_and_op_names_round_trip() {
    for d in DataType::ALL {
        assert_eq!(DataType::parse(d.name()).unwrap(), d);
    }
    for o in ReduceOp::ALL {
        assert_eq!(ReduceOp::parse(o.name()).unwrap(), o);
    }
    assert_eq!(
        CollectiveKind::parse("all-reduce").unwrap(),
        CollectiveKind::AllReduce
    );
    assert!(DataType::parse("f8").is_err());
    assert_eq!(DataType::BF16.size_of(), 2);
    assert_eq!(DataType::I64.size_of(), 8);
    assert!(!DataType::U8.is_float());
}

#[test]
fn unique_id_hex_round_trip_and_rejects() {
    let id = UniqueId::from_bytes((0..=255u8).collect::<Vec<_>>()).unwrap();
    let hex = id.to_hex();
    assert_eq!(&hex[..6], "000102");
    assert_eq!(&hex[hex.len() - 2..], "ff");
    assert_eq!(UniqueId::from_hex(&hex.to_uppercase()).unwrap(), id);
    assert!(UniqueId::from_hex("abc").is_err());
    assert!(UniqueId::from_hex("zz").is_err());
    assert!(UniqueId::from_hex("").is_err());
    assert!(UniqueId::from_bytes(Vec::new()).is_err());
}

#[test]
fn bus_factors_follow_nccl_tests() {
    assert_eq!(CollectiveKind::AllReduce.bus_factor(2), 1.0);
    assert_eq!(CollectiveKind::AllReduce.bus_factor(4), 1.5);
    assert_eq!(CollectiveKind::AllGather.bus_factor(4), 0.75);
    assert_eq!(CollectiveKind::Broadcast.bus_factor(4), 1.0);
}

#[test]
fn check_args_sizes_per_kind() {
    use CollectiveKind::*;
    let s = |k, op, root, rank| check_args(&args(k, 4, op, root), rank, 2, 1 << 20, 1 << 20);
    let sum = Some(ReduceOp::Sum);
    assert_eq!(
        s(AllReduce, sum, 0, 0).unwrap(),
        ArgSizes {
            send_bytes: 16,
            recv_bytes: 16
        }
    );
    assert_eq!(
        s(AllGather, None, 0, 1).unwrap(),
        ArgSizes {
            send_bytes: 16,
            recv_bytes: 32
        }
    );
    assert_eq!(
        s(ReduceScatter, sum, 0, 1).unwrap(),
        ArgSizes {
            send_bytes: 32,
            recv_bytes: 16
        }
    );
    assert_eq!(
        s(Broadcast, None, 1, 0).unwrap(),
        ArgSizes {
            send_bytes: 0,
            recv_bytes: 16
        }
    );
    assert_eq!(
        s(Broadcast, None, 1, 1).unwrap(),
        ArgSizes {
            send_bytes: 16,
            recv_bytes: 16
        }
    );
    assert_eq!(
        s(Reduce, sum, 1, 0).unwrap(),
        ArgSizes {
            send_bytes: 16,
            recv_bytes: 0
        }
    );
    assert_eq!(
        s(Send, None, 1, 0).unwrap(),
        ArgSizes {
            send_bytes: 16,
            recv_bytes: 0
        }
    );
    assert_eq!(
        s(Recv, None, 1, 0).unwrap(),
        ArgSizes {
            send_bytes: 0,
            recv_bytes: 16
        }
    );
}

#[test]
fn check_args_rejects_bad_input() {
    use CollectiveKind::*;
    let sum = Some(ReduceOp::Sum);
    let bad = |a: OpArgs, send: usize, recv: usize| {
        let e = check_args(&a, 0, 2, send, recv).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        e.to_string()
    };
    assert!(bad(args(Broadcast, 4, None, 2), 64, 64).contains("root 2"));
    assert!(bad(args(Send, 4, None, 5), 64, 64).contains("peer 5"));
    assert!(bad(args(AllReduce, 4, None, 0), 64, 64).contains("required"));
    assert!(bad(args(AllGather, 4, sum, 0), 64, 64).contains("not expected"));
    assert!(bad(args(AllReduce, 5, sum, 0), 16, 64).contains("send buffer holds 16"));
    assert!(bad(args(AllGather, 4, None, 0), 16, 16).contains("receive buffer holds 16"));
    assert!(bad(args(AllReduce, usize::MAX, sum, 0), 16, 16).contains("overflows"));
    assert!(check_args(&args(AllReduce, 1, sum, 0), 2, 2, 4, 4).is_err());
    // Count 0 is a valid no-op.
    assert!(check_args(&args(AllReduce, 0, sum, 0), 0, 2, 0, 0).is_ok());
}

#[test]
fn timeout_parsing() {
    assert_eq!(parse_timeout(None).unwrap(), DEFAULT_COLLECTIVE_TIMEOUT);
    assert_eq!(
        parse_timeout(Some("250")).unwrap(),
        Duration::from_millis(250)
    );
    assert!(parse_timeout(Some("0")).is_err());
    assert!(parse_timeout(Some("soon")).is_err());
}

fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let m: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| m.get(k).cloned()
}

#[test]
fn bootstrap_reads_torchrun_variables() {
    assert_eq!(Bootstrap::from_lookup(lookup(&[])).unwrap(), None);
    let b = Bootstrap::from_lookup(lookup(&[
        ("RANK", "3"),
        ("WORLD_SIZE", "4"),
        ("LOCAL_RANK", "1"),
        ("XSTREAM_UNIQUE_ID", "0a0B"),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!((b.rank, b.world_size, b.local_rank), (3, 4, 1));
    assert_eq!(
        b.id_source,
        IdSource::Given(UniqueId::from_bytes(vec![10, 11]).unwrap())
    );
    let b = Bootstrap::from_lookup(lookup(&[
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("XSTREAM_UNIQUE_ID_FILE", "/tmp/x"),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(b.local_rank, 1, "LOCAL_RANK defaults to RANK");
    assert_eq!(b.id_source, IdSource::File("/tmp/x".into()));
    let single = Bootstrap::from_lookup(lookup(&[("RANK", "0"), ("WORLD_SIZE", "1")]))
        .unwrap()
        .unwrap();
    assert_eq!(single.id_source, IdSource::Local);
}

#[test]
fn bootstrap_rejects_bad_environments() {
    let err = |vars: &[(&str, &str)]| {
        Bootstrap::from_lookup(lookup(vars))
            .unwrap_err()
            .to_string()
    };
    assert!(err(&[("RANK", "0")]).contains("WORLD_SIZE"));
    assert!(err(&[("WORLD_SIZE", "2")]).contains("RANK"));
    assert!(err(&[("RANK", "2"), ("WORLD_SIZE", "2")]).contains("not a rank"));
    assert!(err(&[("RANK", "x"), ("WORLD_SIZE", "2")]).contains("not a non-negative"));
    assert!(err(&[("RANK", "0"), ("WORLD_SIZE", "2")]).contains("XSTREAM_UNIQUE_ID"));
    assert!(err(&[
        ("RANK", "0"),
        ("WORLD_SIZE", "2"),
        ("XSTREAM_UNIQUE_ID", "00"),
        ("XSTREAM_UNIQUE_ID_FILE", "/tmp/y")
    ])
    .contains("both"));
    assert!(err(&[
        ("RANK", "0"),
        ("WORLD_SIZE", "2"),
        ("XSTREAM_UNIQUE_ID", "0g")
    ])
    .contains("hex digit"));
}

fn temp_path(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "xstream-bootstrap-{tag}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_file(&dir);
    dir
}

#[test]
fn id_file_rank0_writes_others_wait() {
    let path = temp_path("share");
    let id = UniqueId::from_bytes(vec![1, 2, 3, 250]).unwrap();
    let boot = |rank| Bootstrap::new(rank, 3, rank, IdSource::File(path.clone()));
    let readers: Vec<_> = (1..3)
        .map(|r| {
            let b = boot(r);
            std::thread::spawn(move || {
                b.unique_id(
                    || panic!("only rank 0 makes the id"),
                    Duration::from_secs(30),
                )
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    let made = boot(0)
        .unique_id(|| Ok(id.clone()), Duration::from_secs(1))
        .unwrap();
    assert_eq!(made, id);
    for r in readers {
        assert_eq!(r.join().unwrap().unwrap(), id);
    }
    // A second job on the same path is refused instead of reading the stale id.
    let e = write_id_file(&path, &id).unwrap_err();
    assert_eq!(e.collective_kind(), Some(CollectiveErrorKind::Init));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn id_file_missing_writer_times_out() {
    let path = temp_path("missing");
    let e = read_id_file(&path, Duration::from_millis(30)).unwrap_err();
    assert_eq!(e.collective_kind(), Some(CollectiveErrorKind::Timeout));
    assert!(e.to_string().contains("did not write"), "{e}");
    std::fs::write(&path, "not hex\n").unwrap();
    let e = read_id_file(&path, Duration::from_millis(30)).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    std::fs::remove_file(&path).unwrap();
}
