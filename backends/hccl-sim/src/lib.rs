//! # xstream-hccl-sim: a CPU **simulator / test double** of Huawei's `libhccl.so`
//!
//! This crate is **not** a collective library for Ascend hardware and never talks to an NPU.
//! It builds a `libhccl.so` (cdylib, `[lib] name = "hccl"`) that implements, on the CPU, the
//! subset of HCCL's public C API that the xstream Ascend backend uses, with HCCL's prototypes,
//! result codes, data type and reduction enums and root info size (`HCCL_ROOT_INFO_BYTES` =
//! 4108), so that the backend's HCCL path is exercised by loading a real shared library.
//!
//! Exports: `HcclGetRootInfo`, `HcclCommInitRootInfo`, `HcclCommInitAll`, `HcclAllReduce`,
//! `HcclAllGather`, `HcclReduceScatter`, `HcclBroadcast`, `HcclReduce`, `HcclSend`,
//! `HcclRecv`, `HcclBarrier`, `HcclGroupStart`, `HcclGroupEnd`, `HcclGetCommAsyncError`,
//! `HcclCommDestroy`, `HcclGetRankId`, `HcclGetRankSize`, `HcclGetErrorString`; and the
//! simulator-only `xsimHcclLiveComms`.
//!
//! ## Model
//! * **Arguments.** The checks, their order and their codes follow HCCL's public sources for
//!   the Atlas A2/A3 operation path (`hicann/hcomm`, `hicann/hccl`; `docs/simulators.md` names
//!   the files): count 0 succeeds first, NULL pointers are `HCCL_E_PTR`, then count
//!   (`HCCL_E_PARA`), type and op (`HCCL_E_NOT_SUPPORT`), root and peer (`HCCL_E_PARA`); see
//!   `types` and `ops::deferred_checks`.
//! * **Streams.** Every operation runs as a host task of the ACL simulator
//!   (`backends/ascend-sim`, its simulator-only `xsimLaunchHostTask`) on the `aclrtStream`
//!   passed in, in order with the stream's other work, so xstream events order collectives
//!   like any work. Streams in capture refuse them (`HCCL_E_NOT_SUPPORT`).
//! * **Worlds.** A communicator's ranks share one file in `/dev/shm` (named by the root info)
//!   mapped by each rank: threads of one process (`HcclCommInitAll`, or one rank per thread)
//!   or processes of one machine. Ranks meet at barriers made of per-rank phase counters;
//!   data moves through per-rank staging slots (collectives, chunked) and per-pair byte rings
//!   (send/recv). See `shm` and `ops`.
//! * **Failures.** Every wait is bounded: `HCCL_CONNECT_TIMEOUT` / `HCCL_EXEC_TIMEOUT`
//!   (seconds, HCCL's variables) or the simulator-only `XSIM_HCCL_TIMEOUT_MS`; a rank that
//!   waits in vain fails with `HCCL_E_TIMEOUT`, and its peers stop with `HCCL_E_REMOTE`; the
//!   error is the communicator's asynchronous error and the stream goes on (unless
//!   `XSIM_HCCL_FAULT_STREAM=1`: then the stream's context is faulted with 507904).
//!   `HcclCommDestroy` from another thread ends a running operation of that communicator
//!   (HCCL's documented way to abort). Faults are injected through `XSIM_HCCL_FAULTS` (a rank
//!   that dies, a rank that never arrives). See `config`.
//! * **Groups.** `HcclGroupStart`/`HcclGroupEnd` are per thread (an end without a start is
//!   `HCCL_E_NOT_SUPPORT`); the checks after HCCL's group branch run at the outermost end, which
//!   launches per communicator its sends and receives as one batch (they progress together, so
//!   exchanges in rings never deadlock), then its collectives largest first.
//!
//! Every export catches panics (`HCCL_E_INTERNAL`) instead of unwinding across the FFI
//! boundary.

pub mod acl;
pub mod comm;
pub mod config;
pub mod ops;
pub mod reduce;
pub mod shm;
pub mod types;

use comm::*;
use ops::*;
use std::ffi::c_char;
use std::ffi::c_void;
use std::panic::catch_unwind;
use std::panic::AssertUnwindSafe;
use types::*;

/// Runs an export's body, turning errors and panics into `HcclResult`.
fn ffi(f: impl FnOnce() -> Result<(), HcclResult>) -> HcclResult {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => HCCL_SUCCESS,
        Ok(Err(e)) => e,
        Err(_) => HCCL_E_INTERNAL,
    }
}

fn non_null<T>(p: *const T) -> Result<(), HcclResult> {
    if p.is_null() {
        Err(HCCL_E_PTR)
    } else {
        Ok(())
    }
}

/// One argument check made before the group branch: `Comm` resolves the communicator (NULL, or
/// a handle that is not live, is `HCCL_E_PTR`), the others are NULL checks (`HCCL_E_PTR`).
enum Arg {
    Comm,
    Stream,
    Send,
    Recv,
}

/// Runs `order` for an operation, returning its live communicator.
fn pre_checks(
    order: &[Arg],
    comm: *mut c_void,
    stream: *mut c_void,
    send: *mut c_void,
    recv: *mut c_void,
) -> Result<std::sync::Arc<Comm>, HcclResult> {
    let mut c = None;
    for a in order {
        match a {
            Arg::Comm => {
                non_null(comm)?;
                c = Some(comm_of(comm)?);
            }
            Arg::Stream => non_null(stream)?,
            Arg::Send => non_null(send)?,
            Arg::Recv => non_null(recv)?,
        }
    }
    c.ok_or(HCCL_E_PTR)
}

/// `HcclResult HcclGetRootInfo(HcclRootInfo* rootInfo)`: fills the 4108 bytes with a fresh
/// world's name.
///
/// # Safety
/// `root_info` must be NULL or valid for 4108 bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn HcclGetRootInfo(root_info: *mut c_void) -> HcclResult {
    ffi(|| {
        non_null(root_info)?;
        // SAFETY: the caller provides 4108 writable bytes.
        let out = unsafe { &mut *(root_info as *mut [u8; HCCL_ROOT_INFO_BYTES]) };
        new_root_info(out);
        Ok(())
    })
}

/// `HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo* rootInfo, uint32_t
/// rank, HcclComm* comm)`: joins the world as `rank` and waits until all `nRanks` joined.
///
/// # Safety
/// `root_info` NULL or 4108 readable bytes; `comm` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn HcclCommInitRootInfo(
    n_ranks: u32,
    root_info: *const c_void,
    rank: u32,
    comm: *mut *mut c_void,
) -> HcclResult {
    ffi(|| {
        if n_ranks == 0 || rank >= n_ranks {
            return Err(HCCL_E_PARA);
        }
        non_null(comm)?;
        non_null(root_info)?;
        // SAFETY: the caller provides 4108 readable bytes.
        let ri = unsafe { &*(root_info as *const [u8; HCCL_ROOT_INFO_BYTES]) };
        let path = parse_root_info(ri)?;
        let h = init_root_info(&path, n_ranks, rank)?;
        // SAFETY: checked non-NULL; the caller provides a writable handle.
        unsafe { *comm = h };
        Ok(())
    })
}

/// `HcclResult HcclCommInitAll(uint32_t ndev, int32_t* devices, HcclComm* comms)`: one
/// communicator per device of this process, rank `i` on `devices[i]`.
///
/// # Safety
/// `devices` NULL or `ndev` readable ids; `comms` NULL or `ndev` writable handles.
#[no_mangle]
pub unsafe extern "C" fn HcclCommInitAll(
    ndev: u32,
    devices: *mut i32,
    comms: *mut *mut c_void,
) -> HcclResult {
    ffi(|| {
        if ndev == 0 {
            return Err(HCCL_E_PARA);
        }
        non_null(comms)?;
        non_null(devices)?;
        // SAFETY: the caller provides `ndev` ids.
        let ids = unsafe { std::slice::from_raw_parts(devices, ndev as usize) };
        for (i, d) in ids.iter().enumerate() {
            if ids[..i].contains(d) {
                return Err(HCCL_E_PARA);
            }
        }
        // The library makes each device current in turn: one that does not exist fails that
        // step, and the whole call ends with HCCL_E_INTERNAL.
        let count = acl::device_count()?;
        if ids.iter().any(|&d| d < 0 || d as u32 >= count) {
            return Err(HCCL_E_INTERNAL);
        }
        if ndev > shm::MAX_RANKS {
            return Err(HCCL_E_NOT_SUPPORT);
        }
        let hs = init_all(ndev)?;
        for (i, h) in hs.into_iter().enumerate() {
            // SAFETY: the caller provides `ndev` writable handles.
            unsafe { *comms.add(i) = h };
        }
        Ok(())
    })
}

/// `HcclResult HcclCommDestroy(HcclComm comm)`: releases the communicator; a running or
/// queued operation of it ends with an error instead of waiting for its timeout. Inside a
/// group the destroy is queued for the outermost `HcclGroupEnd` (`HCCL_SUCCESS` now); NULL is
/// `HCCL_SUCCESS` (nothing to destroy); a handle that is not live is `HCCL_E_PTR` (the double's
/// rule: the library would use freed memory).
///
/// # Safety
/// `comm` is a lookup key.
#[no_mangle]
pub unsafe extern "C" fn HcclCommDestroy(comm: *mut c_void) -> HcclResult {
    ffi(|| {
        if in_group() {
            defer_destroy(comm);
            return Ok(());
        }
        if comm.is_null() {
            return Ok(());
        }
        destroy(comm)
    })
}

/// `HcclResult HcclGetRankId(HcclComm comm, uint32_t* rank)`.
///
/// # Safety
/// `rank` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn HcclGetRankId(comm: *mut c_void, rank: *mut u32) -> HcclResult {
    ffi(|| {
        non_null(comm)?;
        let c = comm_of(comm)?;
        non_null(rank)?;
        // SAFETY: checked non-NULL; caller contract.
        unsafe { *rank = c.rank };
        Ok(())
    })
}

/// `HcclResult HcclGetRankSize(HcclComm comm, uint32_t* rankSize)`.
///
/// # Safety
/// `rank_size` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn HcclGetRankSize(comm: *mut c_void, rank_size: *mut u32) -> HcclResult {
    ffi(|| {
        non_null(comm)?;
        let c = comm_of(comm)?;
        non_null(rank_size)?;
        // SAFETY: checked non-NULL; caller contract.
        unsafe { *rank_size = c.world.nranks };
        Ok(())
    })
}

/// `HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult* asyncError)`: the first
/// error of an operation of this communicator (`HCCL_SUCCESS` when none), without blocking.
///
/// # Safety
/// `async_error` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn HcclGetCommAsyncError(
    comm: *mut c_void,
    async_error: *mut HcclResult,
) -> HcclResult {
    ffi(|| {
        non_null(comm)?;
        let c = comm_of(comm)?;
        non_null(async_error)?;
        // SAFETY: checked non-NULL; caller contract.
        unsafe { *async_error = c.async_err.load(std::sync::atomic::Ordering::SeqCst) };
        Ok(())
    })
}

/// `const char* HcclGetErrorString(HcclResult code)`: a static message.
#[no_mangle]
pub extern "C" fn HcclGetErrorString(code: HcclResult) -> *const c_char {
    error_string(code).as_ptr()
}

/// `HcclResult HcclGroupStart(void)`: opens (or nests) the calling thread's group.
#[no_mangle]
pub extern "C" fn HcclGroupStart() -> HcclResult {
    ffi(|| {
        group_start();
        Ok(())
    })
}

/// `HcclResult HcclGroupEnd(void)`: closes the group; the outermost end launches its work
/// (`HCCL_E_NOT_SUPPORT` without an open group).
#[no_mangle]
pub extern "C" fn HcclGroupEnd() -> HcclResult {
    ffi(group_end)
}

/// A collective after its count-0 test and its pointer checks (in `order`).
#[allow(clippy::too_many_arguments)]
fn coll(
    kind: Kind,
    order: &[Arg],
    send: *mut c_void,
    recv: *mut c_void,
    count: u64,
    dtype: i32,
    op: i32,
    root: u32,
    comm: *mut c_void,
    stream: *mut c_void,
) -> Result<(), HcclResult> {
    // A count of 0 succeeds before any other check, NULL communicator included.
    if count == 0 && kind != Kind::Barrier {
        return Ok(());
    }
    let c = pre_checks(order, comm, stream, send, recv)?;
    if kind == Kind::Barrier {
        // The library's barrier has no group branch: it runs at once, even inside a group.
        let work = deferred_checks(&c, &Call::Coll(barrier_op()))?;
        return match c.async_err.load(std::sync::atomic::Ordering::SeqCst) {
            0 => launch(c, stream, work),
            e => Err(e),
        };
    }
    let op = Coll {
        kind,
        send: send as usize,
        recv: recv as usize,
        count,
        dtype,
        op,
        root,
    };
    submit(c, stream, Call::Coll(op))
}

fn barrier_op() -> Coll {
    Coll {
        kind: Kind::Barrier,
        send: 0,
        recv: 0,
        count: 0,
        dtype: HCCL_DATA_TYPE_INT8,
        op: 0,
        root: 0,
    }
}

/// `HcclResult HcclAllReduce(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType
/// dataType, HcclReduceOp op, HcclComm comm, aclrtStream stream)`.
///
/// # Safety
/// Both buffers hold `count` elements and stay valid until the operation ran on `stream`.
#[no_mangle]
pub unsafe extern "C" fn HcclAllReduce(
    send_buf: *mut c_void,
    recv_buf: *mut c_void,
    count: u64,
    data_type: i32,
    op: i32,
    comm: *mut c_void,
    stream: *mut c_void,
) -> HcclResult {
    ffi(|| {
        coll(
            Kind::AllReduce,
            &[Arg::Comm, Arg::Send, Arg::Recv, Arg::Stream],
            send_buf,
            recv_buf,
            count,
            data_type,
            op,
            0,
            comm,
            stream,
        )
    })
}

/// `HcclResult HcclReduce(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType
/// dataType, HcclReduceOp op, uint32_t root, HcclComm comm, aclrtStream stream)`.
///
/// # Safety
/// As for [`HcclAllReduce`] (`recvBuf` is written on `root` only).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn HcclReduce(
    send_buf: *mut c_void,
    recv_buf: *mut c_void,
    count: u64,
    data_type: i32,
    op: i32,
    root: u32,
    comm: *mut c_void,
    stream: *mut c_void,
) -> HcclResult {
    ffi(|| {
        coll(
            Kind::Reduce,
            &[Arg::Comm, Arg::Send, Arg::Recv, Arg::Stream],
            send_buf,
            recv_buf,
            count,
            data_type,
            op,
            root,
            comm,
            stream,
        )
    })
}

/// `HcclResult HcclAllGather(void* sendBuf, void* recvBuf, uint64_t sendCount, HcclDataType
/// dataType, HcclComm comm, aclrtStream stream)`: `recvBuf` holds `nRanks · sendCount`.
///
/// # Safety
/// The buffers hold their sizes and stay valid until the operation ran on `stream`.
#[no_mangle]
pub unsafe extern "C" fn HcclAllGather(
    send_buf: *mut c_void,
    recv_buf: *mut c_void,
    send_count: u64,
    data_type: i32,
    comm: *mut c_void,
    stream: *mut c_void,
) -> HcclResult {
    ffi(|| {
        coll(
            Kind::AllGather,
            &[Arg::Comm, Arg::Send, Arg::Recv, Arg::Stream],
            send_buf,
            recv_buf,
            send_count,
            data_type,
            0,
            0,
            comm,
            stream,
        )
    })
}

/// `HcclResult HcclReduceScatter(void* sendBuf, void* recvBuf, uint64_t recvCount,
/// HcclDataType dataType, HcclReduceOp op, HcclComm comm, aclrtStream stream)`: `sendBuf`
/// holds `nRanks · recvCount`.
///
/// # Safety
/// The buffers hold their sizes and stay valid until the operation ran on `stream`.
#[no_mangle]
pub unsafe extern "C" fn HcclReduceScatter(
    send_buf: *mut c_void,
    recv_buf: *mut c_void,
    recv_count: u64,
    data_type: i32,
    op: i32,
    comm: *mut c_void,
    stream: *mut c_void,
) -> HcclResult {
    ffi(|| {
        coll(
            Kind::ReduceScatter,
            &[Arg::Stream, Arg::Comm, Arg::Send, Arg::Recv],
            send_buf,
            recv_buf,
            recv_count,
            data_type,
            op,
            0,
            comm,
            stream,
        )
    })
}

/// `HcclResult HcclBroadcast(void* buf, uint64_t count, HcclDataType dataType, uint32_t root,
/// HcclComm comm, aclrtStream stream)`: in place.
///
/// # Safety
/// `buf` holds `count` elements and stays valid until the operation ran on `stream`.
#[no_mangle]
pub unsafe extern "C" fn HcclBroadcast(
    buf: *mut c_void,
    count: u64,
    data_type: i32,
    root: u32,
    comm: *mut c_void,
    stream: *mut c_void,
) -> HcclResult {
    ffi(|| {
        coll(
            Kind::Broadcast,
            &[Arg::Stream, Arg::Comm, Arg::Send],
            buf,
            buf,
            count,
            data_type,
            0,
            root,
            comm,
            stream,
        )
    })
}

/// `HcclResult HcclBarrier(HcclComm comm, aclrtStream stream)`.
///
/// # Safety
/// `comm` and `stream` are lookup keys.
#[no_mangle]
pub unsafe extern "C" fn HcclBarrier(comm: *mut c_void, stream: *mut c_void) -> HcclResult {
    ffi(|| {
        let null = std::ptr::null_mut();
        coll(
            Kind::Barrier,
            &[Arg::Comm, Arg::Stream],
            null,
            null,
            0,
            HCCL_DATA_TYPE_INT8,
            0,
            0,
            comm,
            stream,
        )
    })
}

fn p2p_call(
    send: bool,
    buf: *mut c_void,
    count: u64,
    dtype: i32,
    peer: u32,
    comm: *mut c_void,
    stream: *mut c_void,
) -> Result<(), HcclResult> {
    if count == 0 {
        return Ok(());
    }
    let which = if send { Arg::Send } else { Arg::Recv };
    let c = pre_checks(&[Arg::Comm, which, Arg::Stream], comm, stream, buf, buf)?;
    check_count(count)?;
    let call = Call::P2p {
        send,
        buf: buf as usize,
        count,
        dtype,
        peer,
    };
    submit(c, stream, call)
}

/// `HcclResult HcclSend(void* sendBuf, uint64_t count, HcclDataType dataType, uint32_t
/// destRank, HcclComm comm, aclrtStream stream)`.
///
/// # Safety
/// `send_buf` holds `count` elements and stays valid until the operation ran on `stream`.
#[no_mangle]
pub unsafe extern "C" fn HcclSend(
    send_buf: *mut c_void,
    count: u64,
    data_type: i32,
    dest_rank: u32,
    comm: *mut c_void,
    stream: *mut c_void,
) -> HcclResult {
    ffi(|| p2p_call(true, send_buf, count, data_type, dest_rank, comm, stream))
}

/// `HcclResult HcclRecv(void* recvBuf, uint64_t count, HcclDataType dataType, uint32_t
/// srcRank, HcclComm comm, aclrtStream stream)`.
///
/// # Safety
/// `recv_buf` holds `count` elements and stays valid until the operation ran on `stream`.
#[no_mangle]
pub unsafe extern "C" fn HcclRecv(
    recv_buf: *mut c_void,
    count: u64,
    data_type: i32,
    src_rank: u32,
    comm: *mut c_void,
    stream: *mut c_void,
) -> HcclResult {
    ffi(|| p2p_call(false, recv_buf, count, data_type, src_rank, comm, stream))
}

/// `uint64_t xsimHcclLiveComms(void)` (simulator-only): communicators not yet destroyed.
#[no_mangle]
pub extern "C" fn xsimHcclLiveComms() -> u64 {
    live() as u64
}
