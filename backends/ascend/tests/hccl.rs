//! The Ascend backend's collectives over HCCL, on the simulators (`libascendcl.so` and
//! `libhccl.so` test doubles built by the workspace, not hardware): every operation, the
//! op × dtype table, `init_rank` from threads and from separate processes, a dead peer, abort.
#![cfg(feature = "hccl")]

mod common;

use std::time::Duration;

use xstream_ascend::{AscendBackend, AscendBuffer, AscendDevice, AscendStream};
use xstream_core::collective::{self, group};
use xstream_core::{
    CollectiveBackend, CollectiveErrorKind, Communicator, DataType, Device, Error, ReduceOp,
    Stream, StreamDesc,
};

fn devices() -> Vec<AscendDevice> {
    vec![common::device(0), common::device(1)]
}

fn upload(d: &AscendDevice, s: &AscendStream, bytes: Vec<u8>) -> AscendBuffer {
    let b = d.alloc(bytes.len().max(1)).expect("alloc");
    s.write(&b, 0, bytes).expect("write");
    b
}

fn download(s: &AscendStream, b: &AscendBuffer, len: usize) -> Vec<u8> {
    let r = s.read(b, 0, len).expect("read");
    s.synchronize().expect("synchronize");
    r.take().expect("readback")
}

fn i32s(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_i32s(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn every_operation_over_init_all() {
    if !common::in_sim_process() {
        return;
    }
    let devs = devices();
    let cs = AscendBackend::init_all(&devs).expect("init_all");
    assert_eq!((cs[1].rank(), cs[1].world_size()), (1, 2));
    let ss: Vec<AscendStream> = devs
        .iter()
        .map(|d| d.create_stream(&StreamDesc::new()).expect("stream"))
        .collect();
    let n = 1000;
    // all_reduce with every HCCL reduction on i32.
    for (op, f) in [
        (ReduceOp::Sum, (|a, b| a + b) as fn(i32, i32) -> i32),
        (ReduceOp::Prod, |a, b| a * b),
        (ReduceOp::Max, |a: i32, b: i32| a.max(b)),
        (ReduceOp::Min, |a: i32, b: i32| a.min(b)),
    ] {
        let input = |r: i32| (0..n).map(|i| (i % 7) - 3 + r).collect::<Vec<i32>>();
        let bufs: Vec<_> = (0..2)
            .map(|r| upload(&devs[r], &ss[r], i32s(&input(r as i32))))
            .collect();
        let refs: Vec<&_> = cs.iter().collect();
        group(&refs, || {
            for r in 0..2 {
                cs[r].all_reduce(&bufs[r], &bufs[r], n as usize, DataType::I32, op, &ss[r])?;
            }
            Ok(())
        })
        .expect("all_reduce");
        let want: Vec<i32> = input(0)
            .iter()
            .zip(input(1))
            .map(|(a, b)| f(*a, b))
            .collect();
        for r in 0..2 {
            collective::synchronize(&cs[r], &ss[r]).expect("synchronize");
            assert_eq!(
                from_i32s(&download(&ss[r], &bufs[r], n as usize * 4)),
                want,
                "{op}"
            );
        }
    }
    // broadcast from rank 1 with distinct send / recv buffers (HCCL broadcasts in place).
    let send: Vec<_> = (0..2)
        .map(|r| upload(&devs[r], &ss[r], i32s(&[r as i32 + 10; 8])))
        .collect();
    let recv: Vec<_> = (0..2)
        .map(|r| upload(&devs[r], &ss[r], i32s(&[0; 8])))
        .collect();
    group(&[&cs[0], &cs[1]], || {
        for r in 0..2 {
            cs[r].broadcast(&send[r], &recv[r], 8, DataType::I32, 1, &ss[r])?;
        }
        Ok(())
    })
    .expect("broadcast");
    for r in 0..2 {
        assert_eq!(from_i32s(&download(&ss[r], &recv[r], 32)), vec![11; 8]);
        assert_eq!(
            from_i32s(&download(&ss[r], &send[r], 32)),
            vec![r as i32 + 10; 8]
        );
    }
    // all_gather, reduce_scatter, reduce.
    let out: Vec<_> = (0..2).map(|r| devs[r].alloc(64).expect("alloc")).collect();
    let rs_out: Vec<_> = (0..2).map(|r| devs[r].alloc(32).expect("alloc")).collect();
    let red: Vec<_> = (0..2)
        .map(|r| upload(&devs[r], &ss[r], i32s(&[-1; 8])))
        .collect();
    group(&[&cs[0], &cs[1]], || {
        for r in 0..2 {
            cs[r].all_gather(&send[r], &out[r], 8, DataType::I32, &ss[r])?;
            cs[r].reduce_scatter(&out[r], &rs_out[r], 8, DataType::I32, ReduceOp::Sum, &ss[r])?;
            cs[r].reduce(
                &send[r],
                &red[r],
                8,
                DataType::I32,
                ReduceOp::Max,
                0,
                &ss[r],
            )?;
        }
        Ok(())
    })
    .expect("gather / scatter / reduce");
    for r in 0..2 {
        let g = from_i32s(&download(&ss[r], &out[r], 64));
        assert_eq!(g, [vec![10; 8], vec![11; 8]].concat());
        // out = [10 x8, 11 x8]: rank r gets its block of 8 summed over both ranks.
        let want = if r == 0 { 20 } else { 22 };
        assert_eq!(from_i32s(&download(&ss[r], &rs_out[r], 32)), vec![want; 8]);
        let want = if r == 0 { vec![11; 8] } else { vec![-1; 8] };
        assert_eq!(
            from_i32s(&download(&ss[r], &red[r], 32)),
            want,
            "reduce on rank {r}"
        );
    }
    // send/recv: an exchange in one group.
    let rx: Vec<_> = (0..2).map(|r| devs[r].alloc(32).expect("alloc")).collect();
    group(&[&cs[0], &cs[1]], || {
        for r in 0..2 {
            cs[r].send(&send[r], 8, DataType::F32, 1 - r, &ss[r])?;
            cs[r].recv(&rx[r], 8, DataType::F32, 1 - r, &ss[r])?;
        }
        Ok(())
    })
    .expect("send/recv");
    for r in 0..2 {
        assert_eq!(
            from_i32s(&download(&ss[r], &rx[r], 32)),
            vec![11 - r as i32; 8]
        );
        cs[r].async_error().expect("no async error");
    }
}

#[test]
fn unsupported_cells_and_bad_arguments_are_refused_at_enqueue() {
    if !common::in_sim_process() {
        return;
    }
    let devs = devices();
    let cs = AscendBackend::init_all(&devs).expect("init_all");
    let s = devs[0].create_stream(&StreamDesc::new()).expect("stream");
    let b = devs[0].alloc(64).expect("alloc");
    for (dt, op) in [
        (DataType::F32, ReduceOp::Avg),
        (DataType::U8, ReduceOp::Sum),
        (DataType::F64, ReduceOp::Max),
        (DataType::BF16, ReduceOp::Prod),
    ] {
        let e = cs[0].all_reduce(&b, &b, 4, dt, op, &s).unwrap_err();
        assert!(e.is_unsupported(), "{dt} {op}: {e}");
    }
    let e = cs[0]
        .all_reduce(&b, &b, 17, DataType::F32, ReduceOp::Sum, &s)
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "too long: {e}");
    let e = cs[0]
        .broadcast(&b, &b, 4, DataType::F32, 2, &s)
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "root: {e}");
    let other = devs[1].alloc(64).expect("alloc");
    let e = cs[0]
        .all_reduce(&other, &other, 4, DataType::F32, ReduceOp::Sum, &s)
        .unwrap_err();
    assert!(
        matches!(e, Error::WrongDevice(_)),
        "buffer of another device: {e}"
    );
    let e = cs[0].group_end().unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument(_)),
        "group_end without a group: {e}"
    );
    let e = AscendBackend::init_all(&[devs[0].clone(), devs[0].clone()]).unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument(_)),
        "a device twice: {e}"
    );
    assert_eq!(
        AscendBackend::new_unique_id().expect("id").as_bytes().len(),
        4108
    );
}

#[test]
fn init_rank_from_one_thread_per_rank() {
    if !common::in_sim_process() {
        return;
    }
    let id = AscendBackend::new_unique_id().expect("unique id");
    let got: Vec<Vec<i32>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..2)
            .map(|r| {
                let id = id.clone();
                sc.spawn(move || {
                    let d = common::device(r);
                    let c = AscendBackend::init_rank(&d, &id, r, 2).expect("init_rank");
                    assert_eq!(c.rank(), r);
                    let s = d.create_stream(&StreamDesc::new()).expect("stream");
                    let b = upload(&d, &s, i32s(&[r as i32 + 1; 16]));
                    c.all_reduce(&b, &b, 16, DataType::I32, ReduceOp::Sum, &s)
                        .expect("all_reduce");
                    collective::synchronize(&c, &s).expect("synchronize");
                    from_i32s(&download(&s, &b, 64))
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("rank")).collect()
    });
    assert_eq!(got, vec![vec![3; 16], vec![3; 16]]);
}

/// Two ranks; only rank 0 enters an all_reduce (with `timeout` set first, if any).
fn lone_rank_0(
    timeout: Option<Duration>,
) -> (
    Vec<xstream_ascend::hccl::AscendComm>,
    AscendStream,
    AscendBuffer,
) {
    let devs = devices();
    let cs = AscendBackend::init_all(&devs).expect("init_all");
    let s = devs[0].create_stream(&StreamDesc::new()).expect("stream");
    let b = devs[0].alloc(64).expect("alloc");
    if let Some(t) = timeout {
        cs[0].set_timeout(t).expect("set_timeout");
    }
    cs[0]
        .all_reduce(&b, &b, 4, DataType::F32, ReduceOp::Sum, &s)
        .expect("enqueue");
    (cs, s, b)
}

#[test]
fn a_missing_peer_times_out_and_the_communicator_refuses_later_work() {
    if !common::in_sim_process() {
        return;
    }
    let (cs, s, b) = lone_rank_0(Some(Duration::from_millis(200)));
    let e = collective::synchronize(&cs[0], &s).unwrap_err();
    assert_eq!(
        e.collective_kind(),
        Some(CollectiveErrorKind::Timeout),
        "{e}"
    );
    s.synchronize()
        .expect("the stream goes on after the failure");
    assert!(cs[0].async_error().is_err());
    let e = cs[0]
        .all_reduce(&b, &b, 4, DataType::F32, ReduceOp::Sum, &s)
        .unwrap_err();
    assert_eq!(
        e.collective_kind(),
        Some(CollectiveErrorKind::Aborted),
        "{e}"
    );
}

#[test]
fn abort_stops_a_waiting_peer_with_an_error() {
    if !common::in_sim_process() {
        return;
    }
    let (cs, s, _b) = lone_rank_0(None);
    cs[1].abort().expect("abort");
    let e = collective::synchronize(&cs[0], &s).unwrap_err();
    assert_eq!(
        e.collective_kind(),
        Some(CollectiveErrorKind::PeerFailed),
        "{e}"
    );
    assert!(
        e.to_string().contains("HCCL_E_REMOTE"),
        "the vendor code is kept: {e}"
    );
    s.synchronize().expect("stream after the failure");
}

/// The body of a rank process of the bootstrap tests: join through the environment, then an
/// all_reduce of two ranks.
fn rank_process_through_the_bootstrap() {
    use xstream_core::collective::bootstrap::Bootstrap;
    let b = Bootstrap::from_env()
        .expect("bootstrap")
        .expect("launched as a job");
    let d = common::device(b.local_rank);
    let c = b
        .init::<AscendBackend>(&d)
        .expect("init through the bootstrap");
    assert_eq!((c.rank(), c.world_size()), (b.rank, 2));
    let s = d.create_stream(&StreamDesc::new()).expect("stream");
    let buf = upload(&d, &s, i32s(&[5 * (b.rank as i32 + 1); 100]));
    c.all_reduce(&buf, &buf, 100, DataType::I32, ReduceOp::Sum, &s)
        .expect("all_reduce");
    collective::synchronize(&c, &s).expect("synchronize");
    assert_eq!(from_i32s(&download(&s, &buf, 400)), vec![15; 100]);
}

/// Two rank processes launched torchrun-style with `MASTER_ADDR` / `MASTER_PORT` (loopback):
/// rank 0 serves the HCCL root info over TCP, rank 1 fetches it, then one all_reduce. Each
/// process is killed if it outlives its bound.
#[test]
fn ranks_in_separate_processes_through_the_tcp_rendezvous() {
    if std::env::var_os("XSTREAM_TEST_HCCL_RANK_PROCESS").is_some() {
        return rank_process_through_the_bootstrap();
    }
    if !common::in_sim_process() {
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let name = std::thread::current().name().expect("test").to_owned();
    let kids: Vec<_> = (0..2)
        .map(|r| {
            std::process::Command::new(std::env::current_exe().expect("exe"))
                .args([&name, "--exact", "--nocapture", "--test-threads=1"])
                .env("XSTREAM_TEST_HCCL_RANK_PROCESS", "1")
                .env("RANK", r.to_string())
                .env("WORLD_SIZE", "2")
                .env("LOCAL_RANK", r.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .env_remove("XSTREAM_UNIQUE_ID")
                .env_remove("XSTREAM_UNIQUE_ID_FILE")
                .env_remove("TORCHELASTIC_USE_AGENT_STORE")
                .env_remove("XSTREAM_RENDEZVOUS_PORT")
                .env("XSTREAM_RENDEZVOUS_TIMEOUT_MS", "20000")
                .env("XSTREAM_COLLECTIVE_TIMEOUT_MS", "20000")
                .spawn()
                .expect("rank process")
        })
        .collect();
    let start = std::time::Instant::now();
    let ok: Vec<bool> = kids
        .into_iter()
        .map(|mut k| loop {
            if let Some(st) = k.try_wait().expect("try_wait") {
                break st.success();
            }
            if start.elapsed() > std::time::Duration::from_secs(60) {
                let _ = k.kill();
                let _ = k.wait();
                break false;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        })
        .collect();
    assert_eq!(ok, vec![true, true], "a rank process failed");
}

/// Two rank processes launched torchrun-style: `RANK`, `WORLD_SIZE`, `LOCAL_RANK` and
/// `XSTREAM_UNIQUE_ID_FILE` (rank 0 writes the HCCL root info there, rank 1 waits for it),
/// joined through `collective::bootstrap`.
#[test]
fn ranks_in_separate_processes_through_the_bootstrap() {
    if std::env::var_os("XSTREAM_TEST_HCCL_RANK_PROCESS").is_some() {
        return rank_process_through_the_bootstrap();
    }
    if !common::in_sim_process() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("xstream-hccl-bootstrap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let id_file = dir.join("unique_id");
    let _ = std::fs::remove_file(&id_file);
    let name = std::thread::current().name().expect("test").to_owned();
    let kids: Vec<_> = (0..2)
        .map(|r| {
            std::process::Command::new(std::env::current_exe().expect("exe"))
                .args([&name, "--exact", "--nocapture", "--test-threads=1"])
                .env("XSTREAM_TEST_HCCL_RANK_PROCESS", "1")
                .env("RANK", r.to_string())
                .env("WORLD_SIZE", "2")
                .env("LOCAL_RANK", r.to_string())
                .env("XSTREAM_UNIQUE_ID_FILE", &id_file)
                .env("XSTREAM_COLLECTIVE_TIMEOUT_MS", "20000")
                .spawn()
                .expect("rank process")
        })
        .collect();
    let ok: Vec<bool> = kids
        .into_iter()
        .map(|mut k| k.wait().expect("wait").success())
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(ok, vec![true, true], "a rank process failed");
}

#[test]
fn hccl_codes_keep_their_value_and_name_in_xstream_errors() {
    if !common::in_sim_process() {
        return;
    }
    use xstream_ascend::hccl::{async_error_of, hccl, native_error};
    let _ = common::device(0);
    let t = hccl().expect("the HCCL double loads");
    // A real refusal of the double: HcclGroupEnd without HcclGroupStart is HCCL_E_NOT_SUPPORT.
    let code = t.group_end().expect_err("an unbalanced HcclGroupEnd fails");
    assert_eq!(
        code, 5,
        "HCCL answers an unbalanced group end with HCCL_E_NOT_SUPPORT"
    );
    let e = native_error(t, "HcclGroupEnd", code);
    assert!(e.is_unsupported(), "{e:?}");
    let n = e.native().expect("an HCCL code stays native");
    assert_eq!(
        (n.api, n.code, n.name),
        ("HcclGroupEnd", 5, "HCCL_E_NOT_SUPPORT")
    );
    assert!(
        n.message
            .as_deref()
            .is_some_and(|m| m.contains("not support feature")),
        "{n:?}"
    );
    // HCCL_E_OOM (24): out of memory, the code kept.
    let e = native_error(t, "HcclAllReduce", 24);
    assert!(e.is_out_of_memory(), "{e:?}");
    assert_eq!(
        e.native().map(|n| (n.code, n.name)),
        Some((24, "HCCL_E_OOM"))
    );
    assert!(e.to_string().contains("HcclAllReduce"), "{e}");
    // HCCL_E_IN_STATUS (1041): a native error keeping the value, the name and the library's
    // message for it.
    match native_error(t, "HcclAllReduce", 1041) {
        Error::Native(n) => {
            assert_eq!((n.code, n.name), (1041, "HCCL_E_IN_STATUS"));
            assert_eq!(n.message.as_deref(), Some("unknown err"));
        }
        e => panic!("expected Native, got {e:?}"),
    }
    // HCCL_E_OPRETRY_FAIL (23) from HcclGetCommAsyncError: the peer link failed for good.
    match async_error_of(t, 23, 1, 2) {
        Error::Collective { kind, detail, .. } => {
            assert_eq!(kind, CollectiveErrorKind::PeerFailed);
            assert!(detail.contains("HCCL_E_OPRETRY_FAIL (23)"), "{detail}");
            assert!(detail.contains("retry constraint"), "{detail}");
        }
        e => panic!("expected a collective error, got {e:?}"),
    }
}
