//! Collectives over NCCL (cargo feature `nccl`): [`NcclComm`] and the
//! [`CollectiveBackend`] impl of [`CudaBackend`].
//!
//! - **Loading.** libnccl is opened at run time through cudarc's `nccl` bindings; the probe in
//!   `ffi::nccl` runs first (cudarc panics when the library or a symbol is missing), so a
//!   machine without NCCL gets [`Error::NotAvailable`] with the names tried.
//! - **Enqueue.** Every operation is one NCCL call on the stream's raw `CUstream`, with the
//!   device's context bound; the stream keeps the buffers alive until its work got past the
//!   call (the backend's buffer lifetime rule), as for copies. Capture follows CUDA: NCCL
//!   calls on a capturing stream are recorded into the graph.
//! - **Groups** are NCCL's (`ncclGroupStart`/`ncclGroupEnd`, per thread, nesting): one thread
//!   driving every device of a process must group its calls (`xstream_core::collective::group`).
//! - **Failures.** `async_error` is `ncclCommGetAsyncError`; `abort` is `ncclCommAbort` (the
//!   communicator is freed: later calls fail with [`CollectiveErrorKind::Aborted`]). The
//!   timeout path is `xstream_core::collective::synchronize` (polls the stream and the async
//!   error, aborts after the communicator's timeout). Vendor codes stay in
//!   [`Error::Native`] (`ncclResult_t`, name, `ncclGetErrorString`).
//! - **Joining** (`init_rank`): NCCL's blocking `ncclCommInitRank` runs on a helper thread
//!   and the call gives up after the communicator timeout with
//!   [`CollectiveErrorKind::Timeout`] (a late completion frees the communicator). Not yet:
//!   non-blocking communicators (`ncclCommInitRankConfig` with `blocking = 0`).
//!
//! The op × dtype table: every cell native; `avg` and `bf16` need NCCL 2.10 or newer
//! (`ncclAvg`, `ncclBfloat16`), refused as unsupported on older libraries.

use std::ffi::c_int;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use xstream_core::callback::ensure_not_in_callback;
use xstream_core::collective::{collective_timeout, ArgSizes, OpArgs};
use xstream_core::{
    BackendKind, CollectiveBackend, CollectiveErrorKind, CollectiveKind, CollectiveSupport,
    Communicator, DataType, Error, ErrorKind, NativeError, ReduceOp, Result, Stream, UniqueId,
};

use crate::ffi::nccl::{self, NcclCode, NcclOp, RawComm};
use crate::{CudaBackend, CudaBuffer, CudaDevice, CudaStream};

thread_local! {
    /// Open NCCL groups of this thread (NCCL's groups are per thread and nest).
    static GROUP_DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// NCCL 2.10.0 as `ncclGetVersion` reports it: the first with `ncclAvg` and `ncclBfloat16`.
pub const NCCL_2_10: i32 = 21000;

/// The names of `ncclResult_t` values.
fn code_name(code: NcclCode) -> &'static str {
    match code {
        1 => "ncclUnhandledCudaError",
        2 => "ncclSystemError",
        3 => "ncclInternalError",
        4 => "ncclInvalidArgument",
        5 => "ncclInvalidUsage",
        6 => "ncclRemoteError",
        7 => "ncclInProgress",
        8 => "ncclTimeout",
        _ => "ncclUnknownResult",
    }
}

/// A failed NCCL call as [`Error::Native`], keeping the code, its name and NCCL's string.
pub fn nccl_error(api: &'static str, code: u32) -> Error {
    let msg = nccl::error_string(code);
    Error::Native(
        NativeError::new(
            BackendKind::Cuda,
            api,
            i64::from(code),
            code_name(code),
            code_kind(code),
        )
        .with_message((!msg.is_empty()).then_some(msg)),
    )
}

/// What an `ncclResult_t` means: `ncclInvalidArgument` and `ncclInvalidUsage` a bad argument,
/// `ncclInProgress` not ready, `ncclTimeout` a timeout, `ncclRemoteError` a failed collective;
/// the others [`ErrorKind::Other`].
fn code_kind(code: NcclCode) -> ErrorKind {
    match code {
        4 | 5 => ErrorKind::InvalidValue,
        6 => ErrorKind::Collective,
        7 => ErrorKind::NotReady,
        8 => ErrorKind::Timeout,
        _ => ErrorKind::Other,
    }
}

/// The loaded NCCL's version code (e.g. 22105 for 2.21.5).
///
/// # Errors
/// [`Error::NotAvailable`] when no usable NCCL library loads (the reason lists the names
/// tried).
pub fn nccl_version() -> Result<i32> {
    nccl::probe().clone().map_err(|reason| Error::NotAvailable {
        backend: BackendKind::Cuda,
        reason: format!("NCCL: {reason}"),
    })
}

use xstream_core::sync::lock;

/// One rank of an NCCL communicator.
pub struct NcclComm {
    /// `None` once aborted (NCCL freed it).
    raw: Mutex<Option<RawComm>>,
    rank: usize,
    world: usize,
    dev: CudaDevice,
    timeout_ms: AtomicU64,
    /// Why it was aborted, for later calls.
    aborted: Mutex<Option<Error>>,
}

impl fmt::Debug for NcclComm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NcclComm")
            .field("rank", &self.rank)
            .field("world", &self.world)
            .field("device", &self.dev.shared.info.ordinal)
            .field("live", &lock(&self.raw).is_some())
            .finish()
    }
}

fn timeout_ms() -> Result<u64> {
    Ok(u64::try_from(collective_timeout()?.as_millis()).unwrap_or(u64::MAX))
}

impl NcclComm {
    fn new(raw: RawComm, rank: usize, world: usize, dev: CudaDevice, ms: u64) -> Arc<Self> {
        Arc::new(Self {
            raw: Mutex::new(Some(raw)),
            rank,
            world,
            dev,
            timeout_ms: AtomicU64::new(ms),
            aborted: Mutex::new(None),
        })
    }

    fn gone(&self, op: &'static str) -> Error {
        lock(&self.aborted).clone().unwrap_or(Error::Collective {
            op,
            kind: CollectiveErrorKind::Aborted,
            detail: format!("rank {}: the communicator was aborted", self.rank),
        })
    }

    fn issue(
        &self,
        args: OpArgs,
        send: &CudaBuffer,
        recv: &CudaBuffer,
        stream: &CudaStream,
        op: NcclOp,
    ) -> Result<()> {
        let name = args.kind.name();
        if stream.device().shared.raw_ctx != self.dev.shared.raw_ctx {
            return Err(Error::WrongDevice(format!(
                "{name}: the stream belongs to CUDA device {}, the communicator (rank {}) to device {}",
                stream.device().shared.info.ordinal,
                self.rank,
                self.dev.shared.info.ordinal
            )));
        }
        send.check_device(name, &self.dev)?;
        recv.check_device(name, &self.dev)?;
        stream.state.capture.gate_enqueue(name)?;
        let g = lock(&self.raw);
        let Some(raw) = *g else {
            return Err(self.gone(name));
        };
        self.dev.shared.enter()?;
        nccl::enqueue(raw, op, nccl::dtype(args.dtype), stream.handle.raw())
            .map_err(|c| nccl_error(nccl_api(args.kind), c))?;
        drop(g);
        stream.keep_buf(send);
        if !std::ptr::eq(send, recv) {
            stream.keep_buf(recv);
        }
        Ok(())
    }
}

fn nccl_api(kind: CollectiveKind) -> &'static str {
    match kind {
        CollectiveKind::AllReduce => "ncclAllReduce",
        CollectiveKind::AllGather => "ncclAllGather",
        CollectiveKind::ReduceScatter => "ncclReduceScatter",
        CollectiveKind::Broadcast => "ncclBroadcast",
        CollectiveKind::Reduce => "ncclReduce",
        CollectiveKind::Send => "ncclSend",
        CollectiveKind::Recv => "ncclRecv",
    }
}

fn rank_int(r: usize) -> c_int {
    // Checked against the world size (a c_int) before use.
    c_int::try_from(r).unwrap_or(c_int::MAX)
}

impl Drop for NcclComm {
    fn drop(&mut self) {
        if let Some(raw) = lock(&self.raw).take() {
            let ctx = self.dev.shared.raw_ctx;
            // NCCL calls the driver: inside a host callback (no driver call permitted there)
            // the release runs on the dispatcher, holding the device (and its context) until
            // it ran, as every other driver object's drop does.
            crate::stream::release_now_or_dispatched(&self.dev, move || free_comm(ctx, raw));
        }
    }
}

/// Frees a communicator in context `ctx`: `ncclCommDestroy`, or `ncclCommAbort` when it has an
/// asynchronous error (such a communicator may never drain, and the destroy would wait for
/// it). Never inside a host callback (`NcclComm`'s drop).
fn free_comm(ctx: crate::ffi::CuContext, raw: RawComm) {
    if crate::ffi::bind(ctx).is_err() {
        return;
    }
    let r = match nccl::async_error(raw) {
        Ok(()) => nccl::comm_destroy(raw),
        Err(_) => nccl::comm_abort(raw),
    };
    if let Err(c) = r {
        tracing::debug!(code = c, "freeing an NCCL communicator failed");
    }
}

/// The handle [`CollectiveBackend::Comm`] of CUDA: a shared [`NcclComm`].
#[derive(Debug, Clone)]
pub struct CudaComm(Arc<NcclComm>);

impl Communicator for CudaComm {
    type B = CudaBackend;

    fn rank(&self) -> usize {
        self.0.rank
    }

    fn world_size(&self) -> usize {
        self.0.world
    }

    fn device(&self) -> &CudaDevice {
        &self.0.dev
    }

    fn issue_impl(
        &self,
        args: OpArgs,
        _sizes: ArgSizes,
        send: &CudaBuffer,
        recv: &CudaBuffer,
        stream: &CudaStream,
    ) -> Result<()> {
        let (send_ptr, recv_ptr, count) = (send.ptr(), recv.ptr(), args.count);
        // The reduction is there for the reducing kinds (`check_args`).
        let op = nccl::red_op(args.op.unwrap_or(ReduceOp::Sum));
        let root = rank_int(args.root);
        let o = match args.kind {
            CollectiveKind::AllReduce => NcclOp::AllReduce {
                send: send_ptr,
                recv: recv_ptr,
                count,
                op,
            },
            CollectiveKind::AllGather => NcclOp::AllGather {
                send: send_ptr,
                recv: recv_ptr,
                count,
            },
            CollectiveKind::ReduceScatter => NcclOp::ReduceScatter {
                send: send_ptr,
                recv: recv_ptr,
                count,
                op,
            },
            CollectiveKind::Broadcast => NcclOp::Broadcast {
                send: send_ptr,
                recv: recv_ptr,
                count,
                root,
            },
            CollectiveKind::Reduce => NcclOp::Reduce {
                send: send_ptr,
                recv: recv_ptr,
                count,
                op,
                root,
            },
            CollectiveKind::Send => NcclOp::Send {
                buf: send_ptr,
                count,
                peer: root,
            },
            CollectiveKind::Recv => NcclOp::Recv {
                buf: recv_ptr,
                count,
                peer: root,
            },
        };
        self.0.issue(args, send, recv, stream, o)
    }

    fn group_start(&self) -> Result<()> {
        ensure_not_in_callback()?;
        nccl::group_start().map_err(|c| nccl_error("ncclGroupStart", c))?;
        GROUP_DEPTH.with(|d| d.set(d.get() + 1));
        Ok(())
    }

    fn group_end(&self) -> Result<()> {
        ensure_not_in_callback()?;
        // NCCL's groups are per thread; a group_end without a group_start is refused here
        // with the portable error instead of NCCL's ncclInvalidUsage.
        if GROUP_DEPTH.with(|d| d.get()) == 0 {
            return Err(Error::invalid("group_end without a matching group_start"));
        }
        GROUP_DEPTH.with(|d| d.set(d.get() - 1));
        self.0.dev.shared.enter()?;
        nccl::group_end().map_err(|c| nccl_error("ncclGroupEnd", c))
    }

    fn async_error(&self) -> Result<()> {
        let g = lock(&self.0.raw);
        let Some(raw) = *g else {
            return Err(self.0.gone("async_error"));
        };
        nccl::async_error(raw).map_err(|c| nccl_error("ncclCommGetAsyncError", c))
    }

    fn abort(&self) -> Result<()> {
        let raw = lock(&self.0.raw).take();
        if let Some(raw) = raw {
            lock(&self.0.aborted).get_or_insert(Error::Collective {
                op: "abort",
                kind: CollectiveErrorKind::Aborted,
                detail: format!(
                    "rank {}: the communicator was aborted (ncclCommAbort)",
                    self.0.rank
                ),
            });
            self.0.dev.shared.enter()?;
            nccl::comm_abort(raw).map_err(|c| nccl_error("ncclCommAbort", c))?;
        }
        Ok(())
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.0.timeout_ms.load(Ordering::Relaxed))
    }

    fn set_timeout(&self, timeout: Duration) -> Result<()> {
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        if ms == 0 {
            return Err(Error::invalid(
                "a communicator timeout must be at least 1 ms",
            ));
        }
        self.0.timeout_ms.store(ms, Ordering::Relaxed);
        Ok(())
    }
}

fn check_world(world: usize) -> Result<c_int> {
    c_int::try_from(world)
        .ok()
        .filter(|&w| w > 0)
        .ok_or_else(|| Error::invalid(format!("a world size of {world} ranks")))
}

impl CollectiveBackend for CudaBackend {
    type Comm = CudaComm;

    /// `ncclGetUniqueId`: 128 bytes.
    fn new_unique_id() -> Result<UniqueId> {
        nccl_version()?;
        let id = nccl::get_unique_id().map_err(|c| nccl_error("ncclGetUniqueId", c))?;
        UniqueId::from_bytes(id)
    }

    /// `ncclCommInitRank` with `device`'s context current (on a helper thread); blocks until
    /// every rank joined, up to the collective timeout.
    fn init_rank(
        device: &CudaDevice,
        id: &UniqueId,
        rank: usize,
        world: usize,
    ) -> Result<CudaComm> {
        ensure_not_in_callback()?;
        let w = check_world(world)?;
        if rank >= world {
            return Err(Error::invalid(format!(
                "init_rank: rank {rank} is not in a job of {world} ranks"
            )));
        }
        let bytes: &[u8; 128] = id.as_bytes().try_into().map_err(|_| {
            Error::invalid(format!(
                "an NCCL unique id has 128 bytes, this one {} (made by another backend?)",
                id.as_bytes().len()
            ))
        })?;
        nccl_version()?;
        let ms = timeout_ms()?;
        // NCCL's blocking init waits for every rank with no time limit: it runs on a helper
        // thread, and this call gives up after the timeout. A late completion frees the
        // communicator on that thread (nobody holds it any more).
        let (tx, rx) = std::sync::mpsc::channel();
        let (dev, id) = (device.clone(), *bytes);
        std::thread::Builder::new()
            .name(format!("xstream-nccl-init-{rank}"))
            .spawn(move || {
                let r = dev.shared.enter().and_then(|()| {
                    nccl::comm_init_rank(&id, rank_int(rank), w)
                        .map_err(|c| nccl_error("ncclCommInitRank", c))
                });
                if let Err(std::sync::mpsc::SendError(Ok(late))) = tx.send(r) {
                    let _ = dev.shared.enter();
                    let _ = nccl::comm_abort(late);
                }
            })
            .map_err(|e| Error::ResourceExhausted {
                backend: BackendKind::Cuda,
                detail: format!("cannot spawn the NCCL init thread: {e}"),
            })?;
        let timeout = Duration::from_millis(ms);
        match rx.recv_timeout(timeout) {
            Ok(r) => Ok(CudaComm(NcclComm::new(r?, rank, world, device.clone(), ms))),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(Error::Collective {
                op: "init_rank",
                kind: CollectiveErrorKind::Timeout,
                detail: format!(
                    "rank {rank} of {world}: not every rank joined within {timeout:?} \
                     (ncclCommInitRank keeps waiting on a helper thread and frees the \
                     communicator if it completes)"
                ),
            }),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(Error::Collective {
                op: "init_rank",
                kind: CollectiveErrorKind::Init,
                detail: "the NCCL init thread ended without a result".into(),
            }),
        }
    }

    /// `ncclCommInitAll` over the devices' ordinals (NCCL refuses a device listed twice).
    fn init_all(devices: &[CudaDevice]) -> Result<Vec<CudaComm>> {
        ensure_not_in_callback()?;
        if devices.is_empty() {
            return Err(Error::invalid("init_all: no devices"));
        }
        check_world(devices.len())?;
        nccl_version()?;
        let ms = timeout_ms()?;
        let ords: Vec<c_int> = devices
            .iter()
            .map(|d| rank_int(d.shared.info.ordinal))
            .collect();
        devices[0].shared.enter()?;
        let raws = nccl::comm_init_all(&ords).map_err(|c| nccl_error("ncclCommInitAll", c))?;
        Ok(raws
            .into_iter()
            .zip(devices)
            .enumerate()
            .map(|(r, (raw, d))| CudaComm(NcclComm::new(raw, r, devices.len(), d.clone(), ms)))
            .collect())
    }

    fn support(op: Option<ReduceOp>, dtype: DataType) -> CollectiveSupport {
        let old = matches!(nccl::probe(), Ok(v) if *v < NCCL_2_10);
        match (op, dtype) {
            (Some(ReduceOp::Avg), _) if old => {
                CollectiveSupport::Unsupported("ncclAvg needs NCCL 2.10 or newer")
            }
            (_, DataType::BF16) if old => {
                CollectiveSupport::Unsupported("ncclBfloat16 needs NCCL 2.10 or newer")
            }
            _ => CollectiveSupport::Native,
        }
    }
}
