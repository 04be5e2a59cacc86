//! The codes of the HCCL double for bad arguments, entry point by entry point, in the order of
//! the checks of HCCL's operation path on Atlas A2/A3 (public sources `hicann/hcomm` and
//! `hicann/hccl`, newest code path; see `docs/simulators.md`). Each assertion names the exact
//! `HcclResult`.

mod common;
use common::*;
use std::ffi::c_void;

type Comm = *mut c_void;
type Stream = *mut c_void;

fn null() -> DevBuf {
    DevBuf {
        ptr: std::ptr::null_mut(),
        bytes: 0,
    }
}

/// `n` communicators of `HcclCommInitAll`, each with a stream of its device.
fn world(n: u32) -> Vec<(Comm, Stream)> {
    let s = sims();
    s.init_all(n)
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            s.set_device(i as i32);
            (c, s.stream())
        })
        .collect()
}

fn live() -> u64 {
    // SAFETY: `uint64_t xsimHcclLiveComms(void)`.
    let f: unsafe extern "C" fn() -> u64 = unsafe { sims().hccl_sym(b"xsimHcclLiveComms\0") };
    // SAFETY: no arguments.
    unsafe { f() }
}

fn barrier(c: Comm, st: Stream) -> i32 {
    // SAFETY: `HcclResult HcclBarrier(HcclComm, aclrtStream)`.
    let f: unsafe extern "C" fn(Comm, Stream) -> i32 = unsafe { sims().hccl_sym(b"HcclBarrier\0") };
    // SAFETY: lookup keys.
    unsafe { f(c, st) }
}

#[test]
fn a_count_of_zero_succeeds_before_every_other_check() {
    if !in_child(20_000, &[]) {
        return;
    }
    let s = sims();
    let (n, z) = (std::ptr::null_mut(), null());
    // NULL communicator, stream and buffers, a type and an op outside the enums: count 0 wins.
    assert_eq!(s.all_reduce(&z, &z, 0, 99, 99, n, n), HCCL_SUCCESS);
    assert_eq!(s.reduce(&z, &z, 0, 99, 99, 7, n, n), HCCL_SUCCESS);
    assert_eq!(s.reduce_scatter(&z, &z, 0, 99, 99, n, n), HCCL_SUCCESS);
    assert_eq!(s.all_gather(&z, &z, 0, 99, n, n), HCCL_SUCCESS);
    assert_eq!(s.broadcast(&z, 0, 99, 7, n, n), HCCL_SUCCESS);
    assert_eq!(s.p2p(true, &z, 0, 99, 7, n, n), HCCL_SUCCESS);
    assert_eq!(s.p2p(false, &z, 0, 99, 7, n, n), HCCL_SUCCESS);
    // The barrier has no count: its NULL communicator is refused.
    let w = world(1);
    assert_eq!(barrier(n, w[0].1), HCCL_E_PTR);
    assert_eq!(barrier(w[0].0, n), HCCL_E_PTR);
    assert_eq!(s.sync(w[0].1), 0);
}

#[test]
fn pointers_are_checked_before_counts_types_ops_and_ranks() {
    if !in_child(20_000, &[]) {
        return;
    }
    let s = sims();
    let w = world(2);
    let (c, st) = w[0];
    let (b, z, n) = (s.alloc(64), null(), std::ptr::null_mut());
    let huge = SYS_MAX_COUNT + 1;
    // Every other argument is wrong too: the pointer check comes first.
    assert_eq!(s.all_reduce(&z, &b, huge, 99, 99, c, st), HCCL_E_PTR);
    assert_eq!(s.all_reduce(&b, &z, huge, 99, 99, c, st), HCCL_E_PTR);
    assert_eq!(s.all_reduce(&b, &b, huge, 99, 99, c, n), HCCL_E_PTR);
    assert_eq!(s.all_reduce(&b, &b, huge, 99, 99, n, st), HCCL_E_PTR);
    assert_eq!(s.reduce(&b, &z, 4, UINT8, 99, 9, c, st), HCCL_E_PTR);
    assert_eq!(s.reduce_scatter(&b, &b, 4, FP64, SUM, c, n), HCCL_E_PTR);
    assert_eq!(s.all_gather(&z, &b, 4, 99, c, st), HCCL_E_PTR);
    assert_eq!(s.broadcast(&z, 4, 99, 9, c, st), HCCL_E_PTR);
    assert_eq!(s.p2p(true, &z, huge, 99, 9, c, st), HCCL_E_PTR);
    assert_eq!(s.p2p(false, &b, huge, 99, 9, c, n), HCCL_E_PTR);
    // A handle that is not a live communicator (the double's rule; HCCL would use it).
    let bogus = 0x10 as Comm;
    assert_eq!(s.all_reduce(&b, &b, 4, INT32, SUM, bogus, st), HCCL_E_PTR);
    assert_eq!(s.sync(st), 0, "nothing was enqueued");
}

#[test]
fn reducing_operations_check_count_type_op_then_reduce_type() {
    if !in_child(20_000, &[]) {
        return;
    }
    let s = sims();
    let w = world(2);
    let (c, st) = w[0];
    let b = s.alloc(64);
    let huge = SYS_MAX_COUNT + 1;
    for rs in [false, true] {
        let call = |n: u64, dt: i32, op: i32| {
            if rs {
                s.reduce_scatter(&b, &b, n, dt, op, c, st)
            } else {
                s.all_reduce(&b, &b, n, dt, op, c, st)
            }
        };
        assert_eq!(call(huge, 99, 99), HCCL_E_PARA, "count first");
        assert_eq!(call(4, 99, 99), HCCL_E_NOT_SUPPORT, "type outside the enum");
        assert_eq!(call(4, 13, SUM), HCCL_E_NOT_SUPPORT, "the gap in the enum");
        assert_eq!(call(4, HIF8, SUM), HCCL_E_NOT_SUPPORT, "fp8 types");
        assert_eq!(call(4, FP8E8M0, SUM), HCCL_E_NOT_SUPPORT);
        assert_eq!(call(4, INT32, 4), HCCL_E_NOT_SUPPORT, "op outside the enum");
        assert_eq!(call(4, INT32, REDUCE_RESERVED), HCCL_E_NOT_SUPPORT);
        assert_eq!(call(4, INT16, PROD), HCCL_E_NOT_SUPPORT, "no prod on int16");
        assert_eq!(call(4, BF16, PROD), HCCL_E_NOT_SUPPORT, "no prod on bf16");
        for dt in [UINT8, UINT16, UINT32, UINT64, FP64, INT128] {
            assert_eq!(
                call(1, dt, SUM),
                HCCL_E_NOT_SUPPORT,
                "no reduce on type {dt}"
            );
        }
    }
    // Reduce: the root is checked after the op and before the reduce type.
    assert_eq!(s.reduce(&b, &b, 4, UINT8, SUM, 2, c, st), HCCL_E_PARA);
    assert_eq!(s.reduce(&b, &b, 4, INT32, 4, 2, c, st), HCCL_E_NOT_SUPPORT);
    assert_eq!(s.reduce(&b, &b, 4, FP64, SUM, 1, c, st), HCCL_E_NOT_SUPPORT);
    assert_eq!(s.reduce(&b, &b, huge, 99, 99, 9, c, st), HCCL_E_PARA);
    assert_eq!(s.sync(st), 0, "nothing was enqueued");
    assert_eq!(s.async_error(c), HCCL_SUCCESS);
}

#[test]
fn moving_operations_accept_every_type_to_int128_and_check_roots_and_peers() {
    if !in_child(20_000, &[]) {
        return;
    }
    let s = sims();
    let w = world(2);
    let (c, st) = w[0];
    let b = s.alloc(64);
    let huge = SYS_MAX_COUNT + 1;
    assert_eq!(s.all_gather(&b, &b, huge, INT32, c, st), HCCL_E_PARA);
    assert_eq!(s.all_gather(&b, &b, 1, HIF8, c, st), HCCL_E_NOT_SUPPORT);
    assert_eq!(
        s.broadcast(&b, 4, 99, 2, c, st),
        HCCL_E_NOT_SUPPORT,
        "type first"
    );
    assert_eq!(s.broadcast(&b, 4, INT32, 2, c, st), HCCL_E_PARA, "root");
    assert_eq!(s.p2p(true, &b, huge, INT32, 1, c, st), HCCL_E_PARA);
    assert_eq!(
        s.p2p(true, &b, 4, 99, 5, c, st),
        HCCL_E_NOT_SUPPORT,
        "type first"
    );
    assert_eq!(s.p2p(true, &b, 4, INT32, 2, c, st), HCCL_E_PARA, "peer");
    assert_eq!(s.p2p(false, &b, 4, INT32, 2, c, st), HCCL_E_PARA, "peer");
    assert_eq!(s.sync(st), 0);
    // int128 moves (16-byte elements).
    let ins: Vec<_> = (0..2u8).map(|r| s.upload(&[r + 1; 32])).collect();
    let outs: Vec<_> = (0..2).map(|_| s.alloc(64)).collect();
    for (r, &(c, st)) in w.iter().enumerate() {
        assert_eq!(s.all_gather(&ins[r], &outs[r], 2, INT128, c, st), 0);
    }
    for &(c, st) in &w {
        assert_eq!(s.sync(st), 0);
        assert_eq!(s.async_error(c), HCCL_SUCCESS);
    }
    let want: Vec<u8> = [vec![1u8; 32], vec![2u8; 32]].concat();
    for o in &outs {
        assert_eq!(s.download::<u8>(o), want);
    }
}

#[test]
fn group_end_without_start_is_not_support_and_only_the_outermost_end_launches() {
    if !in_child(20_000, &[]) {
        return;
    }
    let s = sims();
    assert_eq!(s.group(false), HCCL_E_NOT_SUPPORT);
    let w = world(2);
    let tx = s.upload(&[7i32; 8]);
    let rx = s.upload(&[0i32; 8]);
    assert_eq!(s.group(true), 0);
    assert_eq!(s.group(true), 0);
    assert_eq!(s.p2p(true, &tx, 8, INT32, 1, w[0].0, w[0].1), 0);
    assert_eq!(s.p2p(false, &rx, 8, INT32, 0, w[1].0, w[1].1), 0);
    assert_eq!(s.group(false), 0, "inner end");
    assert_eq!(s.sync(w[1].1), 0);
    assert_eq!(s.download::<i32>(&rx), vec![0; 8], "nothing launched yet");
    assert_eq!(s.group(false), 0, "outer end");
    for &(_, st) in &w {
        assert_eq!(s.sync(st), 0);
    }
    assert_eq!(s.download::<i32>(&rx), vec![7; 8]);
    assert_eq!(s.group(false), HCCL_E_NOT_SUPPORT, "balanced again");
}

#[test]
fn inside_a_group_pointers_are_checked_at_the_call_the_rest_at_the_end() {
    if !in_child(20_000, &[]) {
        return;
    }
    let s = sims();
    let w = world(1);
    let (c, st) = w[0];
    let src = s.upload(&[5i32; 4]);
    let dst = s.upload(&[0i32; 4]);
    let n = std::ptr::null_mut();
    assert_eq!(s.group(true), 0);
    // Newer HCCL checks count 0 and NULL pointers before queuing.
    assert_eq!(s.all_reduce(&src, &dst, 4, INT32, SUM, c, n), HCCL_E_PTR);
    assert_eq!(
        s.p2p(true, &src, SYS_MAX_COUNT + 1, INT32, 0, c, st),
        HCCL_E_PARA
    );
    // The rest waits for the end: accepted now.
    assert_eq!(s.all_reduce(&src, &dst, 4, INT32, 4, c, st), 0);
    assert_eq!(s.all_reduce(&src, &dst, 4, INT32, SUM, c, st), 0);
    // The end reports nothing; the bad call stopped this communicator's part of the group.
    assert_eq!(s.group(false), 0);
    assert_eq!(s.sync(st), 0);
    assert_eq!(
        s.download::<i32>(&dst),
        vec![0; 4],
        "nothing of the group ran"
    );
    assert_eq!(s.async_error(c), HCCL_SUCCESS);
    // A send to a peer outside the communicator: accepted at the call, and at the end it
    // stops the whole batch (the receive from self included) without an error.
    assert_eq!(s.group(true), 0);
    assert_eq!(s.p2p(true, &src, 4, INT32, 0, c, st), 0);
    assert_eq!(s.p2p(false, &dst, 4, INT32, 0, c, st), 0);
    assert_eq!(s.p2p(true, &src, 4, INT32, 3, c, st), 0);
    assert_eq!(s.group(false), 0);
    assert_eq!(s.sync(st), 0);
    assert_eq!(s.download::<i32>(&dst), vec![0; 4], "the batch did not run");
    // The same batch without the bad send runs (a rank sends to itself).
    assert_eq!(s.group(true), 0);
    assert_eq!(s.p2p(true, &src, 4, INT32, 0, c, st), 0);
    assert_eq!(s.p2p(false, &dst, 4, INT32, 0, c, st), 0);
    assert_eq!(s.group(false), 0);
    assert_eq!(s.sync(st), 0);
    assert_eq!(s.download::<i32>(&dst), vec![5; 4]);
    assert_eq!(s.async_error(c), HCCL_SUCCESS);
}

#[test]
fn a_group_launches_collectives_largest_first() {
    if !in_child(20_000, &[]) {
        return;
    }
    let s = sims();
    let w = world(1);
    let (c, st) = w[0];
    let small = s.upload(&[1i32]);
    let large = s.upload(&[2i32; 4]);
    let out = s.upload(&[0i32; 4]);
    // One rank: an all-reduce copies its input. Called small then large; the library issues
    // the larger first, so the small one's value is the last written to element 0.
    assert_eq!(s.group(true), 0);
    assert_eq!(s.all_reduce(&small, &out, 1, INT32, SUM, c, st), 0);
    assert_eq!(s.all_reduce(&large, &out, 4, INT32, SUM, c, st), 0);
    assert_eq!(s.group(false), 0);
    assert_eq!(s.sync(st), 0);
    assert_eq!(s.download::<i32>(&out), vec![1, 2, 2, 2]);
    // Outside a group they run in call order.
    assert_eq!(s.all_reduce(&small, &out, 1, INT32, SUM, c, st), 0);
    assert_eq!(s.all_reduce(&large, &out, 4, INT32, SUM, c, st), 0);
    assert_eq!(s.sync(st), 0);
    assert_eq!(s.download::<i32>(&out), vec![2, 2, 2, 2]);
}

#[test]
fn destroy_of_null_succeeds_and_inside_a_group_waits_for_the_end() {
    if !in_child(20_000, &[]) {
        return;
    }
    let s = sims();
    assert_eq!(s.destroy(std::ptr::null_mut()), HCCL_SUCCESS);
    let before = live();
    let w = world(1);
    assert_eq!(live(), before + 1);
    assert_eq!(s.group(true), 0);
    assert_eq!(s.destroy(w[0].0), HCCL_SUCCESS);
    assert_eq!(live(), before + 1, "queued, not yet destroyed");
    assert_eq!(s.group(false), 0);
    assert_eq!(live(), before);
    assert_eq!(
        s.destroy(w[0].0),
        HCCL_E_PTR,
        "no longer live (the double's rule)"
    );
}

fn init_all_raw(ndev: u32, devices: Option<&mut [i32]>, comms: bool) -> i32 {
    // SAFETY: `HcclResult HcclCommInitAll(uint32_t, int32_t*, HcclComm*)`.
    let f: unsafe extern "C" fn(u32, *mut i32, *mut Comm) -> i32 =
        unsafe { sims().hccl_sym(b"HcclCommInitAll\0") };
    let mut out = [std::ptr::null_mut(); 8];
    let d = devices.map_or(std::ptr::null_mut(), |d| d.as_mut_ptr());
    let o = if comms {
        out.as_mut_ptr()
    } else {
        std::ptr::null_mut()
    };
    // SAFETY: at most 8 ids and 8 slots (every call below passes ndev ≤ 8 or fails first).
    unsafe { f(ndev, d, o) }
}

#[test]
fn init_all_checks_count_pointers_duplicates_then_devices() {
    // The test environment has 4 simulated devices (0 to 3).
    if !in_child(20_000, &[]) {
        return;
    }
    let before = live();
    assert_eq!(init_all_raw(0, None, false), HCCL_E_PARA, "ndev 0 first");
    assert_eq!(init_all_raw(2, None, false), HCCL_E_PTR, "comms");
    assert_eq!(init_all_raw(2, None, true), HCCL_E_PTR, "devices");
    assert_eq!(init_all_raw(2, Some(&mut [9, 9]), true), HCCL_E_PARA, "dup");
    assert_eq!(init_all_raw(2, Some(&mut [0, 4]), true), HCCL_E_INTERNAL);
    assert_eq!(init_all_raw(2, Some(&mut [-1, 1]), true), HCCL_E_INTERNAL);
    assert_eq!(live(), before, "no communicator left behind");
    assert_eq!(init_all_raw(2, Some(&mut [3, 1]), true), HCCL_SUCCESS);
    assert_eq!(live(), before + 2);
}

#[test]
fn init_root_info_checks_ranks_then_comm_then_root_info() {
    if !in_child(20_000, &[]) {
        return;
    }
    // SAFETY: `HcclResult HcclCommInitRootInfo(uint32_t, const HcclRootInfo*, uint32_t,
    // HcclComm*)`.
    let f: unsafe extern "C" fn(u32, *const c_void, u32, *mut Comm) -> i32 =
        unsafe { sims().hccl_sym(b"HcclCommInitRootInfo\0") };
    let (n, root) = (std::ptr::null_mut(), sims().root_info());
    let mut c = std::ptr::null_mut();
    // SAFETY: NULL or live arguments; every call fails its checks before using them.
    unsafe {
        assert_eq!(f(0, std::ptr::null(), 0, n), HCCL_E_PARA);
        assert_eq!(f(2, std::ptr::null(), 2, n), HCCL_E_PARA);
        assert_eq!(f(2, root.as_ptr().cast(), 0, n), HCCL_E_PTR);
        assert_eq!(f(2, std::ptr::null(), 0, &mut c), HCCL_E_PTR);
    }
}

#[test]
fn queries_check_the_communicator_first() {
    if !in_child(20_000, &[]) {
        return;
    }
    let s = sims();
    let w = world(1);
    let n = std::ptr::null_mut();
    // SAFETY: HCCL's prototypes of the rank queries and the async error query.
    let (rank_id, rank_size, async_err) = unsafe {
        (
            s.hccl_sym::<unsafe extern "C" fn(Comm, *mut u32) -> i32>(b"HcclGetRankId\0"),
            s.hccl_sym::<unsafe extern "C" fn(Comm, *mut u32) -> i32>(b"HcclGetRankSize\0"),
            s.hccl_sym::<unsafe extern "C" fn(Comm, *mut i32) -> i32>(b"HcclGetCommAsyncError\0"),
        )
    };
    let (mut v, mut e) = (9u32, 9i32);
    // SAFETY: NULL or live arguments.
    unsafe {
        assert_eq!(rank_id(n, &mut v), HCCL_E_PTR);
        assert_eq!(rank_size(n, &mut v), HCCL_E_PTR);
        assert_eq!(async_err(n, &mut e), HCCL_E_PTR);
        assert_eq!(rank_size(w[0].0, std::ptr::null_mut()), HCCL_E_PTR);
        assert_eq!(async_err(w[0].0, std::ptr::null_mut()), HCCL_E_PTR);
        assert_eq!(rank_size(w[0].0, &mut v), HCCL_SUCCESS);
    }
    assert_eq!((v, e), (1, 9), "failed queries write nothing");
}

#[test]
fn every_result_code_has_the_library_message() {
    if !in_child(20_000, &[]) {
        return;
    }
    // SAFETY: `const char* HcclGetErrorString(HcclResult)`: static strings.
    let msg: unsafe extern "C" fn(i32) -> *const std::ffi::c_char =
        unsafe { sims().hccl_sym(b"HcclGetErrorString\0") };
    let text = |code| {
        // SAFETY: the returned strings are static and NUL-terminated.
        unsafe { std::ffi::CStr::from_ptr(msg(code)) }
            .to_string_lossy()
            .into_owned()
    };
    assert_eq!(text(HCCL_SUCCESS), "no error");
    assert_eq!(text(HCCL_E_PARA), "parameter error");
    assert_eq!(text(HCCL_E_NOT_SUPPORT), "not support feature");
    assert_eq!(text(HCCL_E_TIMEOUT), "timeout");
    assert_eq!(text(HCCL_E_REMOTE), "error cqe");
    assert_eq!(text(HCCL_E_OPRETRY_FAIL), "retry constraint");
    assert_eq!(text(HCCL_E_OOM), "out of memory");
    for code in 0..=HCCL_E_OOM {
        assert!(
            !text(code).starts_with("unknown"),
            "code {code} has a message"
        );
    }
    // Inside the enum's range without a message (HCCL_E_IN_STATUS included) …
    assert_eq!(text(25), "unknown err");
    assert_eq!(text(HCCL_E_IN_STATUS), "unknown err");
    // … and outside it.
    assert_eq!(text(HCCL_E_RESERVED), "unknown error");
    assert_eq!(text(-1), "unknown error");
}
