//! Collectives over HCCL (feature `hccl`): `libhccl.so` loaded at run time with the same
//! loader rules as ACL, and [`AscendComm`], the [`Communicator`] of the Ascend backend.
//!
//! # Loading
//! Candidates, in order: `$XSTREAM_HCCL_LIBRARY` (an explicit path), then
//! `$ASCEND_HOME_PATH/lib64/libhccl.so`, then
//! `/usr/local/Ascend/ascend-toolkit/latest/lib64/libhccl.so`, then `libhccl.so` (the dynamic
//! loader's search path). No library gives [`Error::NotAvailable`]; a library without an entry
//! point xstream needs gives [`Error::MissingSymbol`]. Nothing panics. `HcclGroupStart` /
//! `HcclGroupEnd` are optional (HCCL marks them experimental): without them a group is only
//! counted, and operations are issued one by one as they are called.
//!
//! # Mapping
//! | xstream | HCCL |
//! | --- | --- |
//! | `new_unique_id` | `HcclGetRootInfo` (4108 bytes) |
//! | `init_rank` | `HcclCommInitRootInfo` |
//! | `init_all` | `HcclCommInitAll` (device ordinals; a device listed twice → `InvalidArgument`) |
//! | `all_reduce`, `all_gather`, `reduce_scatter`, `reduce` | `HcclAllReduce`, `HcclAllGather`, `HcclReduceScatter`, `HcclReduce` |
//! | `broadcast` | `HcclBroadcast` (in place: the root's `send` is first copied to its `recv` on the stream) |
//! | `send`, `recv` | `HcclSend`, `HcclRecv` |
//! | `group_start`, `group_end` | `HcclGroupStart`, `HcclGroupEnd` |
//! | `async_error` | `HcclGetCommAsyncError` |
//! | `abort` | `HcclCommDestroy` (HCCL's documented way to stop a running operation: destroying the communicator from another thread ends it with an error) |
//! | drop | `HcclCommDestroy` (unless aborted) |
//!
//! # Errors
//! [`CODES`] names every `HcclResult` of `hccl_types.h` (0 to 24, 1041, 1042). Codes of
//! synchronous calls are kept in [`Error::Native`] (`api`, the `HcclResult` value, its
//! `HCCL_E_*` name, its [`ErrorKind`] from [`code_kind`], `HcclGetErrorString`'s text):
//! `HCCL_E_NOT_SUPPORT` (an unsupported type, op or feature; e.g. a stream in capture, where
//! the double refuses collectives) is of kind `Unsupported`, `HCCL_E_OOM` of kind
//! `OutOfMemory`, `HCCL_E_PARA` of kind `InvalidValue`.
//! Asynchronous errors: `HCCL_E_TIMEOUT` → [`Error::Collective`] of kind `Timeout`,
//! `HCCL_E_REMOTE` and `HCCL_E_OPRETRY_FAIL` → `PeerFailed`, others → [`Error::Native`]; the
//! detail keeps the code and its name. After [`Communicator::abort`] every call fails with kind
//! `Aborted`.
//!
//! Inside a group HCCL checks only count 0 and NULL pointers at the call; its other checks
//! run at the outermost `HcclGroupEnd`, which reports none of them (it returns `HCCL_SUCCESS`
//! and skips the rest of that communicator's group). The backend therefore checks every
//! argument itself before calling HCCL (sizes, root and peer, the op × dtype table below), so
//! a grouped call never depends on those late checks.
//!
//! # Table
//! HCCL reduces int8, int16, int32, int64, fp16, fp32 and bf16, with no prod on int16 and
//! bf16, and has no average (CANN HCCL API reference, Atlas A2 training series); it moves every
//! type. [`AscendBackend::support`](xstream_core::CollectiveBackend::support) reports exactly
//! that for xstream's types.

mod ffi;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use xstream_core::collective::{collective_timeout, ArgSizes, OpArgs};
use xstream_core::{
    ensure_not_in_callback, BackendKind, CollectiveBackend, CollectiveErrorKind, CollectiveKind,
    CollectiveSupport, Communicator, DataType, Error, ErrorKind, NativeError, ReduceOp, Result,
    Stream, UniqueId,
};

pub use ffi::{Call, HcclFns, OpenError, RawComm, ROOT_INFO_BYTES};

use crate::{AscendBackend, AscendBuffer, AscendDevice, AscendStream};

/// The environment variable naming an explicit `libhccl.so` path.
pub const ENV_HCCL_LIBRARY: &str = "XSTREAM_HCCL_LIBRARY";

/// The candidate paths, in the order they are tried.
pub fn candidates() -> Vec<String> {
    let mut v = Vec::new();
    if let Ok(p) = std::env::var(ENV_HCCL_LIBRARY) {
        if !p.is_empty() {
            v.push(p);
        }
    }
    if let Ok(home) = std::env::var("ASCEND_HOME_PATH") {
        if !home.is_empty() {
            v.push(format!("{home}/lib64/libhccl.so"));
        }
    }
    v.push("/usr/local/Ascend/ascend-toolkit/latest/lib64/libhccl.so".to_string());
    v.push("libhccl.so".to_string());
    v
}

/// Tries `candidates` in order (no global state).
///
/// # Errors
/// [`Error::NotAvailable`] listing every place tried; [`Error::MissingSymbol`] when a library
/// opened but lacks an entry point (and no later candidate is usable).
pub fn try_load(candidates: &[String]) -> Result<HcclFns> {
    let mut tried = Vec::new();
    let mut missing = None;
    for c in candidates {
        match HcclFns::open(c) {
            Ok(t) => return Ok(t),
            Err(OpenError::Missing(symbol)) => {
                tried.push(format!("{c}: no {symbol}"));
                missing.get_or_insert(Error::MissingSymbol {
                    library: c.clone(),
                    symbol,
                });
            }
            Err(OpenError::Open(why)) => tried.push(format!("{c}: {why}")),
        }
    }
    Err(missing.unwrap_or_else(|| Error::NotAvailable {
        backend: BackendKind::Ascend,
        reason: format!("libhccl.so not found (tried {})", tried.join("; ")),
    }))
}

/// The process-wide HCCL table (loaded once; ACL is loaded and initialised first).
///
/// # Errors
/// As [`try_load`]; ACL load errors.
pub fn hccl() -> Result<&'static HcclFns> {
    static T: OnceLock<std::result::Result<HcclFns, Error>> = OnceLock::new();
    crate::loader::acl()?;
    T.get_or_init(|| try_load(&candidates()))
        .as_ref()
        .map_err(Clone::clone)
}

/// `(code, name)` of every `HcclResult` value of `hccl_types.h` (public sources
/// `hicann/hcomm`, `include/hccl/hccl_types.h`), `HCCL_E_RESERVED` (the enum's end) included.
pub const CODES: &[(i32, &str)] = &[
    (0, "HCCL_SUCCESS"),
    (1, "HCCL_E_PARA"),
    (2, "HCCL_E_PTR"),
    (3, "HCCL_E_MEMORY"),
    (4, "HCCL_E_INTERNAL"),
    (5, "HCCL_E_NOT_SUPPORT"),
    (6, "HCCL_E_NOT_FOUND"),
    (7, "HCCL_E_UNAVAIL"),
    (8, "HCCL_E_SYSCALL"),
    (9, "HCCL_E_TIMEOUT"),
    (10, "HCCL_E_OPEN_FILE_FAILURE"),
    (11, "HCCL_E_TCP_CONNECT"),
    (12, "HCCL_E_ROCE_CONNECT"),
    (13, "HCCL_E_TCP_TRANSFER"),
    (14, "HCCL_E_ROCE_TRANSFER"),
    (15, "HCCL_E_RUNTIME"),
    (16, "HCCL_E_DRV"),
    (17, "HCCL_E_PROFILING"),
    (18, "HCCL_E_CCE"),
    (19, "HCCL_E_NETWORK"),
    (20, "HCCL_E_AGAIN"),
    (21, "HCCL_E_REMOTE"),
    (22, "HCCL_E_SUSPENDING"),
    (23, "HCCL_E_OPRETRY_FAIL"),
    (24, "HCCL_E_OOM"),
    (1041, "HCCL_E_IN_STATUS"),
    (1042, "HCCL_E_RESERVED"),
];

const HCCL_E_PARA: i32 = 1;
const HCCL_E_NOT_SUPPORT: i32 = 5;
const HCCL_E_TIMEOUT: i32 = 9;
const HCCL_E_REMOTE: i32 = 21;
const HCCL_E_OPRETRY_FAIL: i32 = 23;
const HCCL_E_OOM: i32 = 24;

/// The symbolic name of an `HcclResult` (`"HCCL_E_UNKNOWN"` outside [`CODES`]).
pub fn code_name(code: i32) -> &'static str {
    CODES
        .iter()
        .find(|c| c.0 == code)
        .map(|c| c.1)
        .unwrap_or("HCCL_E_UNKNOWN")
}

/// What an `HcclResult` means: `HCCL_E_PARA` and `HCCL_E_PTR` a bad argument,
/// `HCCL_E_NOT_SUPPORT` unsupported, `HCCL_E_MEMORY` and `HCCL_E_OOM` out of memory,
/// `HCCL_E_TIMEOUT` a timeout, `HCCL_E_REMOTE` and `HCCL_E_OPRETRY_FAIL` a failed collective,
/// `HCCL_E_AGAIN` not ready; any other code [`ErrorKind::Other`].
pub fn code_kind(code: i32) -> ErrorKind {
    match code {
        HCCL_E_PARA | 2 => ErrorKind::InvalidValue,
        HCCL_E_NOT_SUPPORT => ErrorKind::Unsupported,
        3 | HCCL_E_OOM => ErrorKind::OutOfMemory,
        HCCL_E_TIMEOUT => ErrorKind::Timeout,
        HCCL_E_REMOTE | HCCL_E_OPRETRY_FAIL => ErrorKind::Collective,
        20 => ErrorKind::NotReady,
        _ => ErrorKind::Other,
    }
}

/// The xstream error of a failed synchronous HCCL call: [`Error::Native`] keeping the code,
/// its name, its kind ([`code_kind`]: `HCCL_E_NOT_SUPPORT` is [`ErrorKind::Unsupported`],
/// `HCCL_E_OOM` [`ErrorKind::OutOfMemory`], ...) and `HcclGetErrorString`'s text.
pub fn native_error(t: &HcclFns, api: &'static str, code: i32) -> Error {
    Error::Native(
        NativeError::new(
            BackendKind::Ascend,
            api,
            i64::from(code),
            code_name(code),
            code_kind(code),
        )
        .with_message(Some(t.error_string(code)).filter(|m| !m.is_empty())),
    )
}

/// The xstream error of an asynchronous HCCL error (`HcclGetCommAsyncError`):
/// `HCCL_E_TIMEOUT` → kind `Timeout`; `HCCL_E_REMOTE` (an error completion from the remote end)
/// and `HCCL_E_OPRETRY_FAIL` (the library's retry of the operation over the failed link
/// failed) → kind `PeerFailed`, the detail naming the code; others as [`native_error`].
pub fn async_error_of(t: &HcclFns, code: i32, rank: usize, world: usize) -> Error {
    let detail = format!(
        "rank {rank} of {world}: HcclGetCommAsyncError reported {} ({code}): {}",
        code_name(code),
        t.error_string(code)
    );
    let kind = match code {
        HCCL_E_TIMEOUT => CollectiveErrorKind::Timeout,
        HCCL_E_REMOTE | HCCL_E_OPRETRY_FAIL => CollectiveErrorKind::PeerFailed,
        _ => return native_error(t, "HcclGetCommAsyncError", code),
    };
    Error::Collective {
        op: "async_error",
        kind,
        detail,
    }
}

/// `HcclDataType` of an xstream type.
pub fn hccl_dtype(d: DataType) -> i32 {
    match d {
        DataType::F32 => 4,
        DataType::F16 => 3,
        DataType::BF16 => 11,
        DataType::F64 => 10,
        DataType::I32 => 2,
        DataType::I64 => 5,
        DataType::U8 => 7,
    }
}

/// `HcclReduceOp` of an xstream reduction (`None` for average: HCCL has none).
pub fn hccl_op(op: ReduceOp) -> Option<i32> {
    match op {
        ReduceOp::Sum => Some(0),
        ReduceOp::Prod => Some(1),
        ReduceOp::Max => Some(2),
        ReduceOp::Min => Some(3),
        ReduceOp::Avg => None,
    }
}

/// The op × dtype table of HCCL (see the module docs).
pub fn support(op: Option<ReduceOp>, dtype: DataType) -> CollectiveSupport {
    let Some(op) = op else {
        return CollectiveSupport::Native;
    };
    match (op, dtype) {
        (ReduceOp::Avg, _) => CollectiveSupport::Unsupported("HCCL has no average reduction"),
        (_, DataType::F64) => CollectiveSupport::Unsupported("HCCL does not reduce fp64"),
        (_, DataType::U8) => CollectiveSupport::Unsupported("HCCL does not reduce uint8"),
        (ReduceOp::Prod, DataType::BF16) => {
            CollectiveSupport::Unsupported("HCCL has no prod on bf16")
        }
        _ => CollectiveSupport::Native,
    }
}

thread_local! {
    /// Open xstream groups of this thread (HCCL's group state is per thread too).
    static GROUP_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// One rank of an HCCL job on an Ascend device.
pub struct AscendComm {
    raw: RawComm,
    t: &'static HcclFns,
    rank: usize,
    world: usize,
    device: AscendDevice,
    aborted: AtomicBool,
    /// [`Communicator::timeout`] in ms (0: the default).
    timeout_ms: AtomicU64,
}

impl std::fmt::Debug for AscendComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AscendComm")
            .field("rank", &self.rank)
            .field("world", &self.world)
            .field("device", &self.device.inner.ordinal)
            .field("aborted", &self.aborted.load(Ordering::Acquire))
            .finish()
    }
}

impl Drop for AscendComm {
    fn drop(&mut self) {
        if !self.aborted.swap(true, Ordering::AcqRel) {
            let _ = self.t.destroy(self.raw);
        }
    }
}

impl AscendComm {
    /// The raw `HcclComm` (ACL-only extension; invalid after [`Communicator::abort`]).
    pub fn as_raw(&self) -> RawComm {
        self.raw
    }

    fn new(t: &'static HcclFns, raw: RawComm, device: AscendDevice) -> Result<Self> {
        let (rank, world) = match t.rank_and_size(raw) {
            Ok(v) => v,
            Err(code) => {
                let _ = t.destroy(raw);
                return Err(native_error(t, "HcclGetRankId", code));
            }
        };
        Ok(AscendComm {
            raw,
            t,
            rank: rank as usize,
            world: world as usize,
            device,
            aborted: AtomicBool::new(false),
            timeout_ms: AtomicU64::new(0),
        })
    }

    fn aborted_error(&self, op: &'static str) -> Error {
        Error::Collective {
            op,
            kind: CollectiveErrorKind::Aborted,
            detail: format!(
                "rank {} of {}: the communicator was aborted",
                self.rank, self.world
            ),
        }
    }

    fn check_device(&self, what: &str, dev: &AscendDevice) -> Result<()> {
        if dev.same(&self.device) {
            Ok(())
        } else {
            Err(Error::WrongDevice(format!(
                "{what} is on Ascend device {}, the communicator's rank {} is on device {}",
                dev.inner.ordinal, self.rank, self.device.inner.ordinal
            )))
        }
    }
}

impl Communicator for AscendComm {
    type B = AscendBackend;

    fn rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world
    }

    fn device(&self) -> &AscendDevice {
        &self.device
    }

    fn issue_impl(
        &self,
        args: OpArgs,
        sizes: ArgSizes,
        send: &AscendBuffer,
        recv: &AscendBuffer,
        stream: &AscendStream,
    ) -> Result<()> {
        let OpArgs {
            kind,
            count,
            dtype,
            op,
            root,
        } = args;
        let name = kind.name();
        if self.aborted.load(Ordering::Acquire) {
            return Err(self.aborted_error(name));
        }
        self.check_device("the stream", stream.device())?;
        if sizes.send_bytes > 0 {
            self.check_device("the send buffer", send.device())?;
        }
        if sizes.recv_bytes > 0 {
            self.check_device("the receive buffer", recv.device())?;
        }
        if let Ok(code @ 1..) = self.t.async_error(self.raw) {
            return Err(async_error_of(self.t, code, self.rank, self.world));
        }
        self.device.inner.bind()?;
        let (dt, n) = (hccl_dtype(dtype), count as u64);
        let rop = op.and_then(hccl_op).unwrap_or(0);
        let (s, r) = (send.as_raw(), recv.as_raw());
        let call = match kind {
            CollectiveKind::AllReduce => Call::AllReduce {
                send: s,
                recv: r,
                count: n,
                dtype: dt,
                op: rop,
            },
            CollectiveKind::AllGather => Call::AllGather {
                send: s,
                recv: r,
                count: n,
                dtype: dt,
            },
            CollectiveKind::ReduceScatter => Call::ReduceScatter {
                send: s,
                recv: r,
                count: n,
                dtype: dt,
                op: rop,
            },
            CollectiveKind::Reduce => Call::Reduce {
                send: s,
                recv: r,
                count: n,
                dtype: dt,
                op: rop,
                root: root as u32,
            },
            CollectiveKind::Broadcast => {
                // HCCL broadcasts in place: the root's data must be in `recv` first.
                if self.rank == root && sizes.recv_bytes > 0 && s != r {
                    stream.copy(send, 0, recv, 0, sizes.recv_bytes)?;
                }
                Call::Broadcast {
                    buf: r,
                    count: n,
                    dtype: dt,
                    root: root as u32,
                }
            }
            CollectiveKind::Send => Call::Send {
                buf: s,
                count: n,
                dtype: dt,
                peer: root as u32,
            },
            CollectiveKind::Recv => Call::Recv {
                buf: r,
                count: n,
                dtype: dt,
                peer: root as u32,
            },
        };
        self.t
            .enqueue(call, self.raw, stream.as_raw())
            .map_err(|code| native_error(self.t, call.api(), code))
    }

    fn group_start(&self) -> Result<()> {
        ensure_not_in_callback()?;
        self.t
            .group_start()
            .map_err(|c| native_error(self.t, "HcclGroupStart", c))?;
        GROUP_DEPTH.with(|d| d.set(d.get() + 1));
        Ok(())
    }

    fn group_end(&self) -> Result<()> {
        ensure_not_in_callback()?;
        if GROUP_DEPTH.with(|d| d.get()) == 0 {
            return Err(Error::invalid("group_end without an open group"));
        }
        GROUP_DEPTH.with(|d| d.set(d.get() - 1));
        self.t
            .group_end()
            .map_err(|c| native_error(self.t, "HcclGroupEnd", c))
    }

    fn async_error(&self) -> Result<()> {
        if self.aborted.load(Ordering::Acquire) {
            return Err(self.aborted_error("async_error"));
        }
        match self.t.async_error(self.raw) {
            Ok(0) => Ok(()),
            Ok(code) => Err(async_error_of(self.t, code, self.rank, self.world)),
            Err(code) => Err(native_error(self.t, "HcclGetCommAsyncError", code)),
        }
    }

    fn abort(&self) -> Result<()> {
        if self.aborted.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.t
            .destroy(self.raw)
            .map_err(|c| native_error(self.t, "HcclCommDestroy", c))
    }

    fn timeout(&self) -> Duration {
        match self.timeout_ms.load(Ordering::Acquire) {
            0 => {
                collective_timeout().unwrap_or(xstream_core::collective::DEFAULT_COLLECTIVE_TIMEOUT)
            }
            ms => Duration::from_millis(ms),
        }
    }

    fn set_timeout(&self, timeout: Duration) -> Result<()> {
        let ms = timeout.as_millis();
        if ms == 0 {
            return Err(Error::invalid("a collective timeout must be at least 1 ms"));
        }
        self.timeout_ms
            .store(u64::try_from(ms).unwrap_or(u64::MAX), Ordering::Release);
        Ok(())
    }
}

impl CollectiveBackend for AscendBackend {
    type Comm = AscendComm;

    fn new_unique_id() -> Result<UniqueId> {
        ensure_not_in_callback()?;
        let t = hccl()?;
        let bytes = t
            .root_info()
            .map_err(|c| native_error(t, "HcclGetRootInfo", c))?;
        UniqueId::from_bytes(bytes)
    }

    fn init_rank(
        device: &AscendDevice,
        id: &UniqueId,
        rank: usize,
        world: usize,
    ) -> Result<AscendComm> {
        ensure_not_in_callback()?;
        let t = hccl()?;
        if world == 0 || rank >= world {
            return Err(Error::invalid(format!(
                "init_rank: rank {rank} is not in a job of {world} ranks"
            )));
        }
        let (Ok(n), Ok(r)) = (u32::try_from(world), u32::try_from(rank)) else {
            return Err(Error::invalid("init_rank: world size too large for HCCL"));
        };
        if id.as_bytes().len() != ROOT_INFO_BYTES {
            return Err(Error::invalid(format!(
                "init_rank: an HCCL root info has {ROOT_INFO_BYTES} bytes, the id has {}",
                id.as_bytes().len()
            )));
        }
        device.inner.bind()?;
        let raw = t.init_root_info(n, id.as_bytes(), r).map_err(|code| match code {
            HCCL_E_TIMEOUT => Error::Collective {
                op: "init_rank",
                kind: CollectiveErrorKind::Timeout,
                detail: format!(
                    "rank {rank} of {world}: HcclCommInitRootInfo returned HCCL_E_TIMEOUT (9): not every rank joined"
                ),
            },
            // HCCL_E_PARA: the root info or the rank layout was refused (kind InvalidValue).
            _ => native_error(t, "HcclCommInitRootInfo", code),
        })?;
        AscendComm::new(t, raw, device.clone())
    }

    fn init_all(devices: &[AscendDevice]) -> Result<Vec<AscendComm>> {
        ensure_not_in_callback()?;
        let t = hccl()?;
        if devices.is_empty() {
            return Err(Error::invalid("init_all: no device"));
        }
        for (i, d) in devices.iter().enumerate() {
            if devices[..i].iter().any(|e| e.same(d)) {
                return Err(Error::invalid(format!(
                    "init_all: Ascend device {} is listed twice (HCCL needs one rank per device)",
                    d.inner.ordinal
                )));
            }
        }
        let ids: Vec<i32> = devices.iter().map(|d| d.inner.ordinal as i32).collect();
        let raws = t
            .init_all(&ids)
            .map_err(|c| native_error(t, "HcclCommInitAll", c))?;
        let mut out = Vec::with_capacity(raws.len());
        let mut raws = raws.into_iter().zip(devices);
        for (raw, d) in raws.by_ref() {
            match AscendComm::new(t, raw, d.clone()) {
                Ok(c) => out.push(c),
                Err(e) => {
                    for (raw, _) in raws {
                        let _ = t.destroy(raw);
                    }
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    fn support(op: Option<ReduceOp>, dtype: DataType) -> CollectiveSupport {
        support(op, dtype)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_hccl_reference() {
        assert_eq!(support(None, DataType::F64), CollectiveSupport::Native);
        assert!(support(Some(ReduceOp::Sum), DataType::BF16).is_supported());
        assert!(!support(Some(ReduceOp::Prod), DataType::BF16).is_supported());
        assert!(!support(Some(ReduceOp::Avg), DataType::F32).is_supported());
        assert!(!support(Some(ReduceOp::Max), DataType::U8).is_supported());
        assert!(!support(Some(ReduceOp::Min), DataType::F64).is_supported());
        assert_eq!(hccl_dtype(DataType::BF16), 11);
        assert_eq!(code_name(9), "HCCL_E_TIMEOUT");
        assert_eq!(code_name(99), "HCCL_E_UNKNOWN");
    }

    #[test]
    fn the_code_table_holds_every_value_of_hccl_types_h() {
        // hccl_types.h: 0 to 24 in order, then HCCL_E_IN_STATUS = 1041 and the end marker.
        let values: Vec<i32> = CODES.iter().map(|c| c.0).collect();
        let want: Vec<i32> = (0..=24).chain([1041, 1042]).collect();
        assert_eq!(values, want);
        assert_eq!(code_name(23), "HCCL_E_OPRETRY_FAIL");
        assert_eq!(code_name(24), "HCCL_E_OOM");
        assert_eq!(code_name(1041), "HCCL_E_IN_STATUS");
        assert_eq!(code_name(1042), "HCCL_E_RESERVED");
        assert_eq!(code_name(25), "HCCL_E_UNKNOWN");
    }

    #[test]
    fn missing_library_is_not_available_never_a_panic() {
        let e = try_load(&["/nonexistent/libhccl.so".to_string()]).unwrap_err();
        assert!(matches!(e, Error::NotAvailable { .. }), "{e}");
        assert!(e.to_string().contains("/nonexistent/libhccl.so"), "{e}");
    }
}
