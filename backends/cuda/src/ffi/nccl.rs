//! NCCL through cudarc's `nccl` bindings (with cudarc's run-time loading, libnccl is opened at
//! the first call; with `dynamic-linking` it is linked). cudarc's loader *panics* when no
//! library name loads and when a symbol is missing, so [`probe`] first opens the library
//! under names cudarc tries too ([`super::library::candidates`]: `libnccl.so`,
//! `libnccl.so.12`, ...) and checks every symbol xstream calls; no wrapper here is reached
//! before [`probe`] succeeded. Note that PyTorch's wheels ship only `libnccl.so.2`, a name
//! cudarc does not try: a directory on `LD_LIBRARY_PATH` with a `libnccl.so` link to it
//! makes it loadable.
//!
//! NCCL switches the calling thread's current device itself (`cudaSetDevice` in init, group
//! end and launches); every wrapper that may do so forgets xstream's per-thread context cache
//! afterwards, so the next xstream call binds its own context again.

use std::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;

use cudarc::nccl::sys;

use super::CuStream;

/// Every NCCL function xstream calls (checked by [`probe`]).
pub(crate) const SYMBOLS: [&str; 17] = [
    "ncclGetVersion",
    "ncclGetUniqueId",
    "ncclCommInitRank",
    "ncclCommInitAll",
    "ncclAllReduce",
    "ncclAllGather",
    "ncclReduceScatter",
    "ncclBroadcast",
    "ncclReduce",
    "ncclSend",
    "ncclRecv",
    "ncclGroupStart",
    "ncclGroupEnd",
    "ncclCommGetAsyncError",
    "ncclCommAbort",
    "ncclCommDestroy",
    "ncclGetErrorString",
];

/// A raw `ncclResult_t` other than `ncclSuccess`.
pub(crate) type NcclCode = u32;

fn ok(r: sys::ncclResult_t) -> Result<(), NcclCode> {
    match r {
        sys::ncclResult_t::ncclSuccess => Ok(()),
        e => Err(e as u32),
    }
}

/// The outcome of the probe: the library's version code (`ncclGetVersion`, e.g. 22105 for
/// 2.21.5) or why NCCL cannot be used.
pub(crate) fn probe() -> &'static Result<i32, String> {
    static PROBE: OnceLock<Result<i32, String>> = OnceLock::new();
    PROBE.get_or_init(|| {
        let names = super::library::candidates("nccl");
        let mut found = None;
        for n in &names {
            // SAFETY: loading NCCL runs its initialisers, which have no preconditions; the
            // handle is only used to look symbols up and is dropped before cudarc loads the
            // same file (the dynamic loader keeps one copy).
            if let Ok(lib) = unsafe { libloading::Library::new(n) } {
                found = Some((n.clone(), lib));
                break;
            }
        }
        let Some((name, lib)) = found else {
            return Err(format!(
                "no NCCL library found (tried {names:?}); install NCCL, or put a directory with \
                 a `libnccl.so` link to your libnccl.so.2 on LD_LIBRARY_PATH"
            ));
        };
        for s in SYMBOLS {
            // SAFETY: only the symbol's presence is checked; it is not called through this
            // untyped pointer.
            if unsafe { lib.get::<*const c_void>(s.as_bytes()) }.is_err() {
                return Err(format!("{name} lacks `{s}` (NCCL too old?)"));
            }
        }
        drop(lib);
        let mut v: c_int = 0;
        // SAFETY: the library loads (checked above) and exports the symbol; `v` is a valid
        // out-pointer.
        match ok(unsafe { sys::ncclGetVersion(&mut v) }) {
            Ok(()) => Ok(v),
            Err(c) => Err(format!("ncclGetVersion failed with code {c}")),
        }
    })
}

/// A communicator handle (`ncclComm_t`). `Send + Sync`: NCCL communicators may be used from
/// any thread as long as calls on one are not concurrent, which the owner serialises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawComm(sys::ncclComm_t);

// SAFETY: an opaque token; the owner (`NcclComm`) serialises every call on it with a mutex.
unsafe impl Send for RawComm {}
// SAFETY: as for `Send`.
unsafe impl Sync for RawComm {}

fn stream(s: CuStream) -> sys::cudaStream_t {
    s.0 as sys::cudaStream_t
}

/// `ncclGetErrorString`.
pub(crate) fn error_string(code: NcclCode) -> String {
    let Ok(()) = probe().as_ref().map(|_| ()) else {
        return String::new();
    };
    if code >= sys::ncclResult_t::ncclNumResults as u32 {
        return format!("unknown ncclResult_t {code}");
    }
    // SAFETY: `code` is a valid discriminant of the `#[repr(u32)]` enum (checked just above).
    let r: sys::ncclResult_t = unsafe { std::mem::transmute::<u32, sys::ncclResult_t>(code) };
    // SAFETY: NCCL returns a static NUL-terminated string (or null).
    let p = unsafe { sys::ncclGetErrorString(r) };
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-null, NUL-terminated, static.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// `ncclGetUniqueId` (128 bytes). Call only after [`probe`] succeeded.
pub(crate) fn get_unique_id() -> Result<Vec<u8>, NcclCode> {
    let mut id = sys::ncclUniqueId { internal: [0; 128] };
    // SAFETY: `id` is a valid out-pointer; the library is loaded (probe).
    ok(unsafe { sys::ncclGetUniqueId(&mut id) })?;
    Ok(id.internal.iter().map(|&c| c as u8).collect())
}

/// `ncclCommInitRank` (blocks until every rank joined). The device's context must be
/// current on this thread.
pub(crate) fn comm_init_rank(
    id: &[u8; 128],
    rank: c_int,
    world: c_int,
) -> Result<RawComm, NcclCode> {
    let mut uid = sys::ncclUniqueId { internal: [0; 128] };
    for (d, s) in uid.internal.iter_mut().zip(id) {
        *d = *s as _;
    }
    let mut comm: sys::ncclComm_t = std::ptr::null_mut();
    // SAFETY: valid out-pointer and id; ranks are checked by the caller.
    let r = ok(unsafe { sys::ncclCommInitRank(&mut comm, world, uid, rank) });
    super::forget_bound_context();
    r.map(|()| RawComm(comm))
}

/// `ncclCommInitAll` over CUDA device ordinals.
pub(crate) fn comm_init_all(devices: &[c_int]) -> Result<Vec<RawComm>, NcclCode> {
    let mut comms: Vec<sys::ncclComm_t> = vec![std::ptr::null_mut(); devices.len()];
    let n = c_int::try_from(devices.len())
        .map_err(|_| sys::ncclResult_t::ncclInvalidArgument as u32)?;
    // SAFETY: `comms` has room for `n` handles; `devices` holds `n` ordinals.
    let r = ok(unsafe { sys::ncclCommInitAll(comms.as_mut_ptr(), n, devices.as_ptr()) });
    super::forget_bound_context();
    r.map(|()| comms.into_iter().map(RawComm).collect())
}

/// The NCCL element type.
pub(crate) fn dtype(d: xstream_core::DataType) -> sys::ncclDataType_t {
    use sys::ncclDataType_t as T;
    use xstream_core::DataType as D;
    match d {
        D::F32 => T::ncclFloat32,
        D::F16 => T::ncclFloat16,
        D::BF16 => T::ncclBfloat16,
        D::F64 => T::ncclFloat64,
        D::I32 => T::ncclInt32,
        D::I64 => T::ncclInt64,
        D::U8 => T::ncclUint8,
    }
}

/// The NCCL reduction.
pub(crate) fn red_op(o: xstream_core::ReduceOp) -> sys::ncclRedOp_t {
    use sys::ncclRedOp_t as O;
    use xstream_core::ReduceOp as R;
    match o {
        R::Sum => O::ncclSum,
        R::Prod => O::ncclProd,
        R::Max => O::ncclMax,
        R::Min => O::ncclMin,
        R::Avg => O::ncclAvg,
    }
}

/// One enqueued NCCL operation: device addresses, counts in elements.
#[derive(Debug, Clone, Copy)]
pub(crate) enum NcclOp {
    AllReduce {
        send: u64,
        recv: u64,
        count: usize,
        op: sys::ncclRedOp_t,
    },
    AllGather {
        send: u64,
        recv: u64,
        count: usize,
    },
    ReduceScatter {
        send: u64,
        recv: u64,
        count: usize,
        op: sys::ncclRedOp_t,
    },
    Broadcast {
        send: u64,
        recv: u64,
        count: usize,
        root: c_int,
    },
    Reduce {
        send: u64,
        recv: u64,
        count: usize,
        op: sys::ncclRedOp_t,
        root: c_int,
    },
    Send {
        buf: u64,
        count: usize,
        peer: c_int,
    },
    Recv {
        buf: u64,
        count: usize,
        peer: c_int,
    },
}

/// Enqueues `op` on `s`. The caller keeps the buffers alive until the stream got past it and
/// checked sizes, ranks and devices.
pub(crate) fn enqueue(
    comm: RawComm,
    op: NcclOp,
    dt: sys::ncclDataType_t,
    s: CuStream,
) -> Result<(), NcclCode> {
    let p = |a: u64| a as usize as *mut c_void;
    let c = comm.0;
    let st = stream(s);
    // SAFETY: `comm` is live (the owner holds its lock and has not destroyed it); the
    // addresses are device allocations of the communicator's device holding at least the
    // counts given (checked by `check_args`); `s` is a live stream of that device.
    let r = unsafe {
        match op {
            NcclOp::AllReduce {
                send,
                recv,
                count,
                op,
            } => sys::ncclAllReduce(p(send), p(recv), count, dt, op, c, st),
            NcclOp::AllGather { send, recv, count } => {
                sys::ncclAllGather(p(send), p(recv), count, dt, c, st)
            }
            NcclOp::ReduceScatter {
                send,
                recv,
                count,
                op,
            } => sys::ncclReduceScatter(p(send), p(recv), count, dt, op, c, st),
            NcclOp::Broadcast {
                send,
                recv,
                count,
                root,
            } => sys::ncclBroadcast(p(send), p(recv), count, dt, root, c, st),
            NcclOp::Reduce {
                send,
                recv,
                count,
                op,
                root,
            } => sys::ncclReduce(p(send), p(recv), count, dt, op, root, c, st),
            NcclOp::Send { buf, count, peer } => sys::ncclSend(p(buf), count, dt, peer, c, st),
            NcclOp::Recv { buf, count, peer } => sys::ncclRecv(p(buf), count, dt, peer, c, st),
        }
    };
    super::forget_bound_context();
    ok(r)
}

/// `ncclGroupStart`.
pub(crate) fn group_start() -> Result<(), NcclCode> {
    // SAFETY: no arguments; the library is loaded (a communicator exists).
    ok(unsafe { sys::ncclGroupStart() })
}

/// `ncclGroupEnd`.
pub(crate) fn group_end() -> Result<(), NcclCode> {
    // SAFETY: as for `group_start`.
    let r = ok(unsafe { sys::ncclGroupEnd() });
    super::forget_bound_context();
    r
}

/// `ncclCommGetAsyncError`: `Ok(())` or the asynchronous error's code.
pub(crate) fn async_error(comm: RawComm) -> Result<(), NcclCode> {
    let mut r = sys::ncclResult_t::ncclSuccess;
    // SAFETY: live communicator; valid out-pointer.
    ok(unsafe { sys::ncclCommGetAsyncError(comm.0, &mut r) })?;
    ok(r)
}

/// `ncclCommAbort`: frees the communicator; its pending kernels stop.
pub(crate) fn comm_abort(comm: RawComm) -> Result<(), NcclCode> {
    // SAFETY: live communicator, never used again by the caller.
    let r = ok(unsafe { sys::ncclCommAbort(comm.0) });
    super::forget_bound_context();
    r
}

/// `ncclCommDestroy`: frees the communicator after its pending work.
pub(crate) fn comm_destroy(comm: RawComm) -> Result<(), NcclCode> {
    // SAFETY: live communicator, never used again by the caller.
    let r = ok(unsafe { sys::ncclCommDestroy(comm.0) });
    super::forget_bound_context();
    r
}
