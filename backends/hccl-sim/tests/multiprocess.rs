//! Ranks in separate processes on one machine (children of this test binary), meeting
//! through the shared-memory world that the root info names; a rank process that dies.

mod common;
use common::*;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// In a rank process: `(rank, nranks, root info)`; `None` in the parent.
fn rank_env() -> Option<(u32, u32, Vec<u8>)> {
    let r = std::env::var("XSIM_HCCL_MP_RANK").ok()?;
    let n = std::env::var("XSIM_HCCL_MP_N").expect("n");
    let root = std::env::var("XSIM_HCCL_MP_ROOT").expect("root");
    Some((
        r.parse().expect("rank"),
        n.parse().expect("n"),
        unhex(&root),
    ))
}

/// Starts `n` rank processes running the calling test; returns their exit codes.
fn spawn_ranks(n: u32, timeout_ms: u64, faults: &str) -> Vec<Option<i32>> {
    let name = std::thread::current()
        .name()
        .expect("test thread")
        .to_owned();
    let root = sims().root_info();
    let children: Vec<_> = (0..n)
        .map(|r| {
            std::process::Command::new(std::env::current_exe().expect("exe"))
                .args([&name, "--exact", "--nocapture", "--test-threads=1"])
                .env("XSTREAM_ACL_LIBRARY", lib_path("libascendcl.so"))
                .env("XSIM_DEVICES", "1")
                .env("XSIM_HCCL_TIMEOUT_MS", timeout_ms.to_string())
                .env("XSIM_HCCL_FAULTS", faults)
                .env("XSIM_HCCL_MP_RANK", r.to_string())
                .env("XSIM_HCCL_MP_N", n.to_string())
                .env("XSIM_HCCL_MP_ROOT", hex(&root))
                .spawn()
                .expect("start a rank process")
        })
        .collect();
    children
        .into_iter()
        .map(|mut c| c.wait().expect("wait for a rank").code())
        .collect()
}

#[test]
fn ranks_in_separate_processes_reduce_gather_and_exchange() {
    let Some((rank, n, root)) = rank_env() else {
        assert_eq!(spawn_ranks(3, 20_000, ""), vec![Some(0); 3]);
        return;
    };
    let s = sims();
    s.set_device(0);
    let (rc, c) = s.init_rank(n, &root, rank);
    assert_eq!(rc, 0);
    let st = s.stream();
    // All-reduce, 5000 f32 (several staging chunks).
    let b = s.upload(&vec![rank as f32 + 1.0; 5000]);
    assert_eq!(s.all_reduce(&b, &b, 5000, FP32, SUM, c, st), 0);
    // All-gather.
    let g_in = s.upload(&[rank as i32; 3]);
    let g_out = s.alloc(3 * 4 * n as usize);
    assert_eq!(s.all_gather(&g_in, &g_out, 3, INT32, c, st), 0);
    // Ring exchange in a group.
    let tx = s.upload(&[rank as u8; 1000]);
    let rx = s.alloc(1000);
    assert_eq!(s.group(true), 0);
    assert_eq!(s.p2p(true, &tx, 1000, UINT8, (rank + 1) % n, c, st), 0);
    assert_eq!(s.p2p(false, &rx, 1000, UINT8, (rank + n - 1) % n, c, st), 0);
    assert_eq!(s.group(false), 0);
    assert_eq!(s.sync(st), 0);
    assert_eq!(s.async_error(c), HCCL_SUCCESS, "rank {rank}");
    assert_eq!(s.download::<f32>(&b), vec![6.0f32; 5000]);
    let want: Vec<i32> = (0..n as i32).flat_map(|r| [r; 3]).collect();
    assert_eq!(s.download::<i32>(&g_out), want);
    assert_eq!(
        s.download::<u8>(&rx),
        vec![((rank + n - 1) % n) as u8; 1000]
    );
    assert_eq!(s.destroy(c), 0);
}

#[test]
fn a_rank_process_that_dies_gives_the_others_an_error_not_a_hang() {
    let Some((rank, n, root)) = rank_env() else {
        let codes = spawn_ranks(3, 500, "die:1@1");
        assert_eq!(codes, vec![Some(0), Some(86), Some(0)]);
        return;
    };
    let s = sims();
    s.set_device(0);
    let (rc, c) = s.init_rank(n, &root, rank);
    assert_eq!(rc, 0);
    let st = s.stream();
    let b = s.upload(&[1i64; 8]);
    // Operation 0 completes everywhere; rank 1's process exits at operation 1.
    assert_eq!(s.all_reduce(&b, &b, 8, INT64, SUM, c, st), 0);
    assert_eq!(s.sync(st), 0);
    assert_eq!(s.download::<i64>(&b), vec![3i64; 8]);
    assert_eq!(s.all_reduce(&b, &b, 8, INT64, SUM, c, st), 0);
    assert_eq!(s.sync(st), 0);
    let e = s.async_error(c);
    assert!(e == HCCL_E_TIMEOUT || e == HCCL_E_REMOTE, "{e}");
}
