//! Every entry point of the HCCL simulator, loaded by path like the real library, on the ACL
//! simulator's streams, with ranks in one process (`HcclCommInitAll`, or one thread per rank).

mod common;
use common::*;
use std::ffi::c_void;

/// `n` communicators of `HcclCommInitAll`, each with a stream of its device.
fn world(n: u32) -> Vec<(*mut c_void, *mut c_void)> {
    let s = sims();
    let comms = s.init_all(n);
    comms
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            s.set_device(i as i32);
            (c, s.stream())
        })
        .collect()
}

fn sync_all(w: &[(*mut c_void, *mut c_void)]) -> Vec<i32> {
    w.iter().map(|&(_, st)| sims().sync(st)).collect()
}

#[test]
fn root_info_names_a_fresh_world_and_bad_root_info_is_refused() {
    if !in_child(20_000, &[]) {
        return;
    }
    let s = sims();
    let a = s.root_info();
    let b = s.root_info();
    assert_eq!(a.len(), 4108);
    assert_ne!(a, b, "two root infos name two worlds");
    let (rc, _) = s.init_rank(2, &[7u8; 4108], 0);
    assert_eq!(rc, HCCL_E_PARA);
    let (rc, _) = s.init_rank(0, &a, 0);
    assert_eq!(rc, HCCL_E_PARA, "zero ranks");
    let (rc, _) = s.init_rank(2, &a, 2);
    assert_eq!(rc, HCCL_E_PARA, "rank out of range");
    // SAFETY: `HcclGetRootInfo(NULL)` is an argument error, not a write.
    let f: unsafe extern "C" fn(*mut c_void) -> i32 = unsafe { s.hccl_sym(b"HcclGetRootInfo\0") };
    // SAFETY: see above.
    assert_eq!(unsafe { f(std::ptr::null_mut()) }, HCCL_E_PTR);
}

#[test]
fn init_all_ranks_sizes_and_destroy() {
    if !in_child(20_000, &[]) {
        return;
    }
    let s = sims();
    // SAFETY: HCCL's prototypes for the rank queries; xsimHcclLiveComms takes nothing.
    let (rank_id, rank_size, live) = unsafe {
        (
            s.hccl_sym::<unsafe extern "C" fn(*mut c_void, *mut u32) -> i32>(b"HcclGetRankId\0"),
            s.hccl_sym::<unsafe extern "C" fn(*mut c_void, *mut u32) -> i32>(b"HcclGetRankSize\0"),
            s.hccl_sym::<unsafe extern "C" fn() -> u64>(b"xsimHcclLiveComms\0"),
        )
    };
    // SAFETY: no arguments.
    let before = unsafe { live() };
    let comms = s.init_all(3);
    // SAFETY: no arguments.
    assert_eq!(unsafe { live() }, before + 3);
    for (i, &c) in comms.iter().enumerate() {
        let (mut r, mut n) = (99, 99);
        // SAFETY: live locals.
        assert_eq!(unsafe { rank_id(c, &mut r) }, 0);
        // SAFETY: live locals.
        assert_eq!(unsafe { rank_size(c, &mut n) }, 0);
        assert_eq!((r, n), (i as u32, 3));
        assert_eq!(s.async_error(c), HCCL_SUCCESS);
    }
    // SAFETY: NULL out-pointer: an argument error.
    let rc = unsafe { rank_id(comms[0], std::ptr::null_mut()) };
    assert_eq!(rc, HCCL_E_PTR);
    for &c in &comms {
        assert_eq!(s.destroy(c), 0);
    }
    // SAFETY: no arguments.
    assert_eq!(unsafe { live() }, before);
    assert_eq!(s.destroy(comms[0]), HCCL_E_PTR, "double destroy");
    let mut r = 0;
    // SAFETY: a destroyed handle is only a lookup key.
    assert_eq!(unsafe { rank_id(comms[0], &mut r) }, HCCL_E_PTR);
    // SAFETY: `HcclCommInitAll` with a repeated device: an argument error.
    let f: unsafe extern "C" fn(u32, *mut i32, *mut *mut c_void) -> i32 =
        unsafe { s.hccl_sym(b"HcclCommInitAll\0") };
    let mut devs = [0, 0];
    let mut out = [std::ptr::null_mut(); 2];
    // SAFETY: two ids, two slots.
    let rc = unsafe { f(2, devs.as_mut_ptr(), out.as_mut_ptr()) };
    assert_eq!(rc, HCCL_E_PARA);
}

#[test]
fn all_reduce_every_op_chunked_and_in_place() {
    // A 512-byte staging slot: 1000 i32 take 8 chunks.
    if !in_child(20_000, &[("XSIM_HCCL_BUFFER_BYTES", "512")]) {
        return;
    }
    let s = sims();
    let w = world(3);
    let n = 1000usize;
    for (op, expect) in [
        (SUM, Box::new(|i: i32| 3 * i + 3) as Box<dyn Fn(i32) -> i32>),
        (
            PROD,
            Box::new(|i: i32| i.wrapping_mul(i + 1).wrapping_mul(i + 2)),
        ),
        (MAX, Box::new(|i: i32| i + 2)),
        (MIN, Box::new(|i: i32| i)),
    ] {
        let bufs: Vec<_> = (0..3)
            .map(|r| {
                let v: Vec<i32> = (0..n as i32).map(|i| i + r).collect();
                (s.upload(&v), s.alloc(n * 4))
            })
            .collect();
        for (r, &(c, st)) in w.iter().enumerate() {
            assert_eq!(
                s.all_reduce(&bufs[r].0, &bufs[r].1, n as u64, INT32, op, c, st),
                0
            );
        }
        assert_eq!(sync_all(&w), vec![0; 3]);
        for (send, recv) in &bufs {
            let got: Vec<i32> = s.download(recv);
            let want: Vec<i32> = (0..n as i32).map(&expect).collect();
            assert_eq!(got, want, "op {op}");
            // Inputs untouched.
            let input: Vec<i32> = s.download(send);
            assert_eq!(input.len(), n);
        }
    }
    // In place, f32.
    let bufs: Vec<_> = (0..3).map(|r| s.upload(&[r as f32 + 0.5; 100])).collect();
    for (r, &(c, st)) in w.iter().enumerate() {
        assert_eq!(s.all_reduce(&bufs[r], &bufs[r], 100, FP32, SUM, c, st), 0);
    }
    assert_eq!(sync_all(&w), vec![0; 3]);
    for b in &bufs {
        assert_eq!(s.download::<f32>(b), vec![4.5f32; 100]);
    }
}

#[test]
fn half_types_reduce_in_f32_and_round() {
    if !in_child(20_000, &[]) {
        return;
    }
    let s = sims();
    let w = world(2);
    // fp16 1.0 = 0x3c00, 2.0 = 0x4000, 3.0 = 0x4200; bf16 1.0 = 0x3f80, 3.0 = 0x4040.
    for (dt, one, two, three) in [
        (FP16, 0x3c00u16, 0x4000u16, 0x4200u16),
        (BF16, 0x3f80, 0x4000, 0x4040),
    ] {
        let bufs = [s.upload(&[one; 8]), s.upload(&[two; 8])];
        let outs = [s.alloc(16), s.alloc(16)];
        for (r, &(c, st)) in w.iter().enumerate() {
            assert_eq!(s.all_reduce(&bufs[r], &outs[r], 8, dt, SUM, c, st), 0);
        }
        assert_eq!(sync_all(&w), vec![0; 2]);
        for o in &outs {
            assert_eq!(s.download::<u16>(o), vec![three; 8], "dtype {dt}");
        }
    }
}

#[test]
fn all_gather_reduce_scatter_broadcast_reduce_and_barrier() {
    if !in_child(20_000, &[("XSIM_HCCL_BUFFER_BYTES", "512")]) {
        return;
    }
    let s = sims();
    let w = world(4);
    // All-gather of 100 i64 per rank (two chunks of the 512-byte slot).
    let ins: Vec<_> = (0..4).map(|r| s.upload(&[r as i64 * 100; 100])).collect();
    let outs: Vec<_> = (0..4).map(|_| s.alloc(400 * 8)).collect();
    for (r, &(c, st)) in w.iter().enumerate() {
        assert_eq!(s.all_gather(&ins[r], &outs[r], 100, INT64, c, st), 0);
    }
    assert_eq!(sync_all(&w), vec![0; 4]);
    let want: Vec<i64> = (0..400).map(|i| (i / 100) * 100).collect();
    for o in &outs {
        assert_eq!(s.download::<i64>(o), want);
    }
    // Reduce-scatter: rank r sends 4 blocks of 60 (two chunks of 32 per block); block b holds
    // r + 10·b, so rank b's sum is 0+1+2+3 + 40·b and a wrong block shows.
    let ins: Vec<_> = (0..4)
        .map(|r| {
            let v: Vec<i32> = (0..240).map(|i| r + 10 * (i / 60)).collect();
            s.upload(&v)
        })
        .collect();
    let outs: Vec<_> = (0..4).map(|_| s.alloc(60 * 4)).collect();
    for (r, &(c, st)) in w.iter().enumerate() {
        assert_eq!(
            s.reduce_scatter(&ins[r], &outs[r], 60, INT32, SUM, c, st),
            0
        );
    }
    assert_eq!(sync_all(&w), vec![0; 4]);
    for (r, o) in outs.iter().enumerate() {
        assert_eq!(s.download::<i32>(o), vec![6 + 40 * r as i32; 60]);
    }
    // Broadcast from rank 2.
    let bufs: Vec<_> = (0..4).map(|r| s.upload(&[r as u8; 700])).collect();
    for (r, &(c, st)) in w.iter().enumerate() {
        assert_eq!(s.broadcast(&bufs[r], 700, UINT8, 2, c, st), 0);
    }
    assert_eq!(sync_all(&w), vec![0; 4]);
    for b in &bufs {
        assert_eq!(s.download::<u8>(b), vec![2u8; 700]);
    }
    // Reduce (max) to rank 1: other ranks' receive buffers untouched.
    let ins: Vec<_> = (0..4).map(|r| s.upload(&[r as i8 - 2; 600])).collect();
    let outs: Vec<_> = (0..4).map(|_| s.upload(&[9i8; 600])).collect();
    for (r, &(c, st)) in w.iter().enumerate() {
        assert_eq!(s.reduce(&ins[r], &outs[r], 600, INT8, MAX, 1, c, st), 0);
    }
    assert_eq!(sync_all(&w), vec![0; 4]);
    for (r, o) in outs.iter().enumerate() {
        assert_eq!(s.download::<i8>(o), vec![if r == 1 { 1 } else { 9 }; 600]);
    }
    // Barrier.
    // SAFETY: `HcclResult HcclBarrier(HcclComm, aclrtStream)`.
    let barrier: unsafe extern "C" fn(*mut c_void, *mut c_void) -> i32 =
        unsafe { s.hccl_sym(b"HcclBarrier\0") };
    for &(c, st) in &w {
        // SAFETY: live handles.
        assert_eq!(unsafe { barrier(c, st) }, 0);
    }
    assert_eq!(sync_all(&w), vec![0; 4]);
}

#[test]
fn send_recv_ring_in_a_group_and_a_plain_pair() {
    if !in_child(20_000, &[]) {
        return;
    }
    let s = sims();
    let w = world(3);
    // Every rank sends 300000 i32 (over a 256 KiB ring, several laps) to the next and
    // receives from the previous, all in one group: no deadlock.
    let n = 300_000usize;
    let outs: Vec<_> = (0..3).map(|r| s.upload(&vec![r; n])).collect();
    let ins: Vec<_> = (0..3).map(|_| s.alloc(n * 4)).collect();
    assert_eq!(s.group(true), 0);
    for (r, &(c, st)) in w.iter().enumerate() {
        assert_eq!(
            s.p2p(true, &outs[r], n as u64, INT32, ((r + 1) % 3) as u32, c, st),
            0
        );
        assert_eq!(
            s.p2p(false, &ins[r], n as u64, INT32, ((r + 2) % 3) as u32, c, st),
            0
        );
    }
    assert_eq!(s.group(false), 0);
    assert_eq!(sync_all(&w), vec![0; 3]);
    for (r, b) in ins.iter().enumerate() {
        assert_eq!(s.download::<i32>(b), vec![((r + 2) % 3) as i32; n]);
    }
    // A plain send 0 → 2, receive on 2.
    let b0 = s.upload(&[1.25f64; 7]);
    let b2 = s.alloc(7 * 8);
    assert_eq!(s.p2p(false, &b2, 7, FP64, 0, w[2].0, w[2].1), 0);
    assert_eq!(s.p2p(true, &b0, 7, FP64, 2, w[0].0, w[0].1), 0);
    assert_eq!(sync_all(&w), vec![0; 3]);
    assert_eq!(s.download::<f64>(&b2), vec![1.25; 7]);
    // HCCL answers an unbalanced end with HCCL_E_NOT_SUPPORT (hccl_group / comm resource
    // adapter of hicann/hcomm).
    assert_eq!(
        s.group(false),
        HCCL_E_NOT_SUPPORT,
        "group end without a group"
    );
}

#[test]
fn argument_errors_are_synchronous_and_precise() {
    if !in_child(20_000, &[]) {
        return;
    }
    let s = sims();
    let w = world(2);
    let (c, st) = w[0];
    let b = s.alloc(64);
    assert_eq!(
        s.all_reduce(&b, &b, 4, FP64, SUM, c, st),
        HCCL_E_NOT_SUPPORT,
        "no fp64 reduce"
    );
    assert_eq!(
        s.all_reduce(&b, &b, 4, UINT8, SUM, c, st),
        HCCL_E_NOT_SUPPORT,
        "no u8 reduce"
    );
    assert_eq!(
        s.all_reduce(&b, &b, 4, BF16, PROD, c, st),
        HCCL_E_NOT_SUPPORT,
        "no bf16 prod"
    );
    // HCCL refuses an op or a type outside its enums with HCCL_E_NOT_SUPPORT; fp8 types do
    // not pass the Atlas A2/A3 type check (codes.rs has every case).
    assert_eq!(s.all_gather(&b, &b, 1, 15, c, st), HCCL_E_NOT_SUPPORT);
    assert_eq!(
        s.all_reduce(&b, &b, 4, INT32, 4, c, st),
        HCCL_E_NOT_SUPPORT,
        "op out of range"
    );
    assert_eq!(
        s.all_reduce(&b, &b, 4, 99, SUM, c, st),
        HCCL_E_NOT_SUPPORT,
        "dtype out of range"
    );
    assert_eq!(
        s.broadcast(&b, 4, INT32, 2, c, st),
        HCCL_E_PARA,
        "root out of range"
    );
    assert_eq!(
        s.p2p(true, &b, 4, INT32, 5, c, st),
        HCCL_E_PARA,
        "peer out of range"
    );
    assert_eq!(
        s.all_reduce(&b, &b, 4, INT32, SUM, c, std::ptr::null_mut()),
        HCCL_E_PTR
    );
    assert_eq!(
        s.all_reduce(&b, &b, 4, INT32, SUM, std::ptr::null_mut(), st),
        HCCL_E_PTR
    );
    let null = DevBuf {
        ptr: std::ptr::null_mut(),
        bytes: 0,
    };
    assert_eq!(s.all_reduce(&null, &b, 4, INT32, SUM, c, st), HCCL_E_PTR);
    assert_eq!(sync_all(&w), vec![0; 2], "nothing was enqueued");
    // SAFETY: `const char* HcclGetErrorString(HcclResult)`: static strings.
    let msg: unsafe extern "C" fn(i32) -> *const std::ffi::c_char =
        unsafe { s.hccl_sym(b"HcclGetErrorString\0") };
    let text = |code| {
        // SAFETY: the returned strings are static and NUL-terminated.
        unsafe { std::ffi::CStr::from_ptr(msg(code)) }
            .to_string_lossy()
            .into_owned()
    };
    assert_eq!(text(HCCL_E_TIMEOUT), "timeout");
    assert_eq!(text(HCCL_E_PARA), "parameter error");
    assert_eq!(text(12345), "unknown error");
}

#[test]
fn mismatched_counts_fail_every_rank_with_e_para() {
    if !in_child(20_000, &[]) {
        return;
    }
    let s = sims();
    let w = world(2);
    let a = s.alloc(64);
    let b = s.alloc(64);
    assert_eq!(s.all_reduce(&a, &a, 4, INT32, SUM, w[0].0, w[0].1), 0);
    assert_eq!(s.all_reduce(&b, &b, 5, INT32, SUM, w[1].0, w[1].1), 0);
    // The failure is the communicators' asynchronous error; the streams go on.
    assert_eq!(sync_all(&w), vec![0; 2]);
    let errs: Vec<i32> = w.iter().map(|&(c, _)| s.async_error(c)).collect();
    assert!(errs.contains(&HCCL_E_PARA), "{errs:?}");
    assert!(
        errs.iter().all(|&e| e == HCCL_E_PARA || e == HCCL_E_REMOTE),
        "{errs:?}"
    );
    // The communicator stays failed: later calls return the error at once.
    assert_ne!(s.all_reduce(&a, &a, 4, INT32, SUM, w[0].0, w[0].1), 0);
}

#[test]
fn mismatched_send_and_recv_sizes_fail_with_e_para() {
    if !in_child(20_000, &[]) {
        return;
    }
    let s = sims();
    let w = world(2);
    let a = s.alloc(64);
    let b = s.alloc(64);
    assert_eq!(s.p2p(true, &a, 4, INT32, 1, w[0].0, w[0].1), 0);
    assert_eq!(s.p2p(false, &b, 3, INT32, 0, w[1].0, w[1].1), 0);
    assert_eq!(s.sync(w[1].1), 0);
    assert_eq!(s.async_error(w[1].0), HCCL_E_PARA);
}

#[test]
fn a_rank_that_never_arrives_times_out_the_others() {
    // Hardware-like mode: the failed operation faults each stream's context.
    let env = [
        ("XSIM_HCCL_FAULTS", "stall:1@1"),
        ("XSIM_HCCL_FAULT_STREAM", "1"),
    ];
    if !in_child(300, &env) {
        return;
    }
    let s = sims();
    let w = world(3);
    let b: Vec<_> = (0..3).map(|_| s.upload(&[1i32; 4])).collect();
    // Operation 0 works; operation 1 of rank 1 never arrives.
    for _ in 0..2 {
        for (r, &(c, st)) in w.iter().enumerate() {
            assert_eq!(s.all_reduce(&b[r], &b[r], 4, INT32, SUM, c, st), 0);
        }
    }
    assert_eq!(sync_all(&w), vec![ACL_COMM_FAIL; 3]);
    let errs: Vec<i32> = w.iter().map(|&(c, _)| s.async_error(c)).collect();
    assert!(errs.contains(&HCCL_E_TIMEOUT), "{errs:?}");
    assert!(
        errs.iter()
            .all(|&e| e == HCCL_E_TIMEOUT || e == HCCL_E_REMOTE),
        "{errs:?}"
    );
}

#[test]
fn destroy_ends_a_pending_operation_without_waiting_for_the_timeout() {
    // A timeout far beyond the test's patience: only destroy can end the wait.
    if !in_child(600_000, &[]) {
        return;
    }
    let s = sims();
    let w = world(2);
    let b = s.alloc(16);
    // Only rank 0 enters: it waits for rank 1.
    assert_eq!(s.all_reduce(&b, &b, 4, INT32, SUM, w[0].0, w[0].1), 0);
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(s.destroy(w[0].0), 0);
    assert_eq!(s.sync(w[0].1), 0, "the operation ended");
    // Rank 1 now enters: its peer is gone, so it stops with HCCL_E_REMOTE at once.
    assert_eq!(s.all_reduce(&b, &b, 4, INT32, SUM, w[1].0, w[1].1), 0);
    assert_eq!(s.sync(w[1].1), 0);
    assert_eq!(s.async_error(w[1].0), HCCL_E_REMOTE);
}

#[test]
fn one_rank_per_thread_with_root_info() {
    if !in_child(20_000, &[]) {
        return;
    }
    let s = sims();
    let root = s.root_info();
    let results: Vec<Vec<f32>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..4u32)
            .map(|r| {
                let root = root.clone();
                sc.spawn(move || {
                    s.set_device(r as i32);
                    let (rc, c) = s.init_rank(4, &root, r);
                    assert_eq!(rc, 0);
                    let st = s.stream();
                    let b = s.upload(&[r as f32; 16]);
                    assert_eq!(s.all_reduce(&b, &b, 16, FP32, MAX, c, st), 0);
                    assert_eq!(s.sync(st), 0);
                    let v = s.download::<f32>(&b);
                    assert_eq!(s.destroy(c), 0);
                    v
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("rank thread"))
            .collect()
    });
    for v in results {
        assert_eq!(v, vec![3.0f32; 16]);
    }
}

#[test]
fn init_times_out_when_a_rank_never_joins() {
    if !in_child(200, &[]) {
        return;
    }
    let s = sims();
    let root = s.root_info();
    s.set_device(0);
    let (rc, _) = s.init_rank(2, &root, 0);
    assert_eq!(rc, HCCL_E_TIMEOUT);
}

#[test]
fn a_departed_rank_stops_only_the_peers_that_wait_for_it() {
    if !in_child(20_000, &[]) {
        return;
    }
    let s = sims();
    let w = world(3);
    let tx = s.upload(&[7i32; 64]);
    let rx = s.alloc(64 * 4);
    // Rank 2 waits for a message of rank 1; rank 0 leaves meanwhile; rank 1 sends later.
    assert_eq!(s.p2p(false, &rx, 64, INT32, 1, w[2].0, w[2].1), 0);
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(s.destroy(w[0].0), 0);
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(s.p2p(true, &tx, 64, INT32, 2, w[1].0, w[1].1), 0);
    assert_eq!(s.sync(w[1].1), 0);
    assert_eq!(s.sync(w[2].1), 0);
    assert_eq!(
        s.async_error(w[2].0),
        HCCL_SUCCESS,
        "rank 0 was not rank 2's peer"
    );
    assert_eq!(s.download::<i32>(&rx), vec![7; 64]);
    // A receive from the departed rank fails at once.
    assert_eq!(s.p2p(false, &rx, 64, INT32, 0, w[2].0, w[2].1), 0);
    assert_eq!(s.sync(w[2].1), 0);
    assert_eq!(s.async_error(w[2].0), HCCL_E_REMOTE);
}
