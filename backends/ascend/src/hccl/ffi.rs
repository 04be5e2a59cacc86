//! `libhccl.so` loaded at run time: the function table and one safe wrapper per entry point.
//! The prototypes are declared here from HCCL's public C API (CANN HCCL API reference:
//! `hccl.h`, `hccl_types.h`); a symbol's type cannot be checked at run time, so the ABI is
//! trusted from these declarations.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_void};

use crate::sys::{DevPtr, RawStream};

/// `HcclComm`: a raw communicator handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawComm(pub *mut c_void);

// SAFETY: HCCL communicators are opaque handles HCCL accepts from any thread (HCCL documents
// `HcclCommDestroy` from another thread as the way to stop a running operation).
unsafe impl Send for RawComm {}
// SAFETY: as above.
unsafe impl Sync for RawComm {}

/// `HCCL_ROOT_INFO_BYTES`.
pub const ROOT_INFO_BYTES: usize = 4108;

type Fn6 = unsafe extern "C" fn(*mut c_void, u64, i32, u32, RawCommArg, RawStreamArg) -> i32;
type RawCommArg = *mut c_void;
/// `HcclAllReduce` and `HcclReduceScatter` share one prototype.
type ReduceFn =
    unsafe extern "C" fn(*mut c_void, *mut c_void, u64, i32, i32, RawCommArg, RawStreamArg) -> i32;
type RawStreamArg = *mut c_void;

/// The entry points xstream uses (required unless `Option`).
pub struct HcclFns {
    _lib: libloading::Library,
    /// The path the library was opened from.
    pub library: String,
    get_root_info: unsafe extern "C" fn(*mut c_void) -> i32,
    init_root_info: unsafe extern "C" fn(u32, *const c_void, u32, *mut RawCommArg) -> i32,
    init_all: unsafe extern "C" fn(u32, *mut i32, *mut RawCommArg) -> i32,
    all_reduce: ReduceFn,
    all_gather:
        unsafe extern "C" fn(*mut c_void, *mut c_void, u64, i32, RawCommArg, RawStreamArg) -> i32,
    reduce_scatter: ReduceFn,
    reduce: unsafe extern "C" fn(
        *mut c_void,
        *mut c_void,
        u64,
        i32,
        i32,
        u32,
        RawCommArg,
        RawStreamArg,
    ) -> i32,
    broadcast: Fn6,
    send: Fn6,
    recv: Fn6,
    destroy: unsafe extern "C" fn(RawCommArg) -> i32,
    rank_id: unsafe extern "C" fn(RawCommArg, *mut u32) -> i32,
    rank_size: unsafe extern "C" fn(RawCommArg, *mut u32) -> i32,
    async_error: unsafe extern "C" fn(RawCommArg, *mut i32) -> i32,
    error_string: unsafe extern "C" fn(i32) -> *const c_char,
    group_start: Option<unsafe extern "C" fn() -> i32>,
    group_end: Option<unsafe extern "C" fn() -> i32>,
}

impl std::fmt::Debug for HcclFns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HcclFns")
            .field("library", &self.library)
            .field("groups", &self.group_start.is_some())
            .finish()
    }
}

/// Why a candidate could not be used.
#[derive(Debug)]
pub enum OpenError {
    /// The file could not be opened.
    Open(String),
    /// It opened but lacks a required symbol.
    Missing(&'static str),
}

impl HcclFns {
    /// Opens `path` and binds every entry point.
    ///
    /// # Errors
    /// [`OpenError`].
    pub fn open(path: &str) -> Result<Self, OpenError> {
        // SAFETY: loading a shared library runs its initialisers; `libhccl.so` (or the
        // workspace's simulator) has no initialiser preconditions.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| OpenError::Open(e.to_string()))?;
        macro_rules! req {
            ($name:literal) => {
                // SAFETY: the field's type is the prototype of HCCL's public API for $name;
                // the pointer stays valid while `_lib` (kept in the table) is loaded.
                unsafe {
                    *lib.get(concat!($name, "\0").as_bytes())
                        .map_err(|_| OpenError::Missing($name))?
                }
            };
        }
        macro_rules! opt {
            ($name:literal) => {
                // SAFETY: as for `req!`.
                unsafe { lib.get(concat!($name, "\0").as_bytes()).ok().map(|s| *s) }
            };
        }
        Ok(HcclFns {
            get_root_info: req!("HcclGetRootInfo"),
            init_root_info: req!("HcclCommInitRootInfo"),
            init_all: req!("HcclCommInitAll"),
            all_reduce: req!("HcclAllReduce"),
            all_gather: req!("HcclAllGather"),
            reduce_scatter: req!("HcclReduceScatter"),
            reduce: req!("HcclReduce"),
            broadcast: req!("HcclBroadcast"),
            send: req!("HcclSend"),
            recv: req!("HcclRecv"),
            destroy: req!("HcclCommDestroy"),
            rank_id: req!("HcclGetRankId"),
            rank_size: req!("HcclGetRankSize"),
            async_error: req!("HcclGetCommAsyncError"),
            error_string: req!("HcclGetErrorString"),
            group_start: opt!("HcclGroupStart"),
            group_end: opt!("HcclGroupEnd"),
            library: path.to_string(),
            _lib: lib,
        })
    }

    /// Whether the library has `HcclGroupStart`/`HcclGroupEnd`.
    pub fn has_groups(&self) -> bool {
        self.group_start.is_some() && self.group_end.is_some()
    }

    /// `HcclGetErrorString(code)`.
    pub fn error_string(&self, code: i32) -> String {
        // SAFETY: HCCL returns a static NUL-terminated string (or NULL).
        let p = unsafe { (self.error_string)(code) };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: non-NULL, static, NUL-terminated.
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_string_lossy()
            .into_owned()
    }

    /// `HcclGetRootInfo`.
    pub fn root_info(&self) -> Result<Vec<u8>, i32> {
        let mut v = vec![0u8; ROOT_INFO_BYTES];
        // SAFETY: `v` holds the 4108 bytes of an `HcclRootInfo`.
        code(unsafe { (self.get_root_info)(v.as_mut_ptr().cast()) })?;
        Ok(v)
    }

    /// `HcclCommInitRootInfo` (`root` must hold 4108 bytes: checked).
    pub fn init_root_info(&self, n: u32, root: &[u8], rank: u32) -> Result<RawComm, i32> {
        assert_eq!(root.len(), ROOT_INFO_BYTES, "root info size");
        let mut c = std::ptr::null_mut();
        // SAFETY: `root` holds an `HcclRootInfo`; `c` is a live local.
        code(unsafe { (self.init_root_info)(n, root.as_ptr().cast(), rank, &mut c) })?;
        Ok(RawComm(c))
    }

    /// `HcclCommInitAll` over `devices`.
    pub fn init_all(&self, devices: &[i32]) -> Result<Vec<RawComm>, i32> {
        let mut ids = devices.to_vec();
        let mut out = vec![std::ptr::null_mut(); ids.len()];
        // SAFETY: `ids` and `out` hold `ndev` entries each.
        code(unsafe { (self.init_all)(ids.len() as u32, ids.as_mut_ptr(), out.as_mut_ptr()) })?;
        Ok(out.into_iter().map(RawComm).collect())
    }

    /// `HcclCommDestroy`.
    pub fn destroy(&self, c: RawComm) -> Result<(), i32> {
        // SAFETY: a handle from an init call, destroyed once by its owner.
        code(unsafe { (self.destroy)(c.0) })
    }

    /// `HcclGetRankId` and `HcclGetRankSize`.
    pub fn rank_and_size(&self, c: RawComm) -> Result<(u32, u32), i32> {
        let (mut r, mut n) = (0, 0);
        // SAFETY: live locals; `c` is a live handle.
        code(unsafe { (self.rank_id)(c.0, &mut r) })?;
        // SAFETY: as above.
        code(unsafe { (self.rank_size)(c.0, &mut n) })?;
        Ok((r, n))
    }

    /// `HcclGetCommAsyncError`: the communicator's asynchronous error (0: none).
    pub fn async_error(&self, c: RawComm) -> Result<i32, i32> {
        let mut e = 0;
        // SAFETY: a live local; `c` is a live handle.
        code(unsafe { (self.async_error)(c.0, &mut e) })?;
        Ok(e)
    }

    /// `HcclGroupStart` (`Ok` without group support).
    pub fn group_start(&self) -> Result<(), i32> {
        match self.group_start {
            // SAFETY: no arguments.
            Some(f) => code(unsafe { f() }),
            None => Ok(()),
        }
    }

    /// `HcclGroupEnd` (`Ok` without group support).
    pub fn group_end(&self) -> Result<(), i32> {
        match self.group_end {
            // SAFETY: no arguments.
            Some(f) => code(unsafe { f() }),
            None => Ok(()),
        }
    }
}

/// One enqueue call; the buffers are xstream buffers whose memory outlives the queued work
/// (their release waits for the device's queued work), so passing their addresses is sound.
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub enum Call {
    AllReduce {
        send: DevPtr,
        recv: DevPtr,
        count: u64,
        dtype: i32,
        op: i32,
    },
    AllGather {
        send: DevPtr,
        recv: DevPtr,
        count: u64,
        dtype: i32,
    },
    ReduceScatter {
        send: DevPtr,
        recv: DevPtr,
        count: u64,
        dtype: i32,
        op: i32,
    },
    Broadcast {
        buf: DevPtr,
        count: u64,
        dtype: i32,
        root: u32,
    },
    Reduce {
        send: DevPtr,
        recv: DevPtr,
        count: u64,
        dtype: i32,
        op: i32,
        root: u32,
    },
    Send {
        buf: DevPtr,
        count: u64,
        dtype: i32,
        peer: u32,
    },
    Recv {
        buf: DevPtr,
        count: u64,
        dtype: i32,
        peer: u32,
    },
}

impl Call {
    /// The HCCL function this call is.
    pub fn api(&self) -> &'static str {
        match self {
            Call::AllReduce { .. } => "HcclAllReduce",
            Call::AllGather { .. } => "HcclAllGather",
            Call::ReduceScatter { .. } => "HcclReduceScatter",
            Call::Broadcast { .. } => "HcclBroadcast",
            Call::Reduce { .. } => "HcclReduce",
            Call::Send { .. } => "HcclSend",
            Call::Recv { .. } => "HcclRecv",
        }
    }
}

impl HcclFns {
    /// Enqueues `call` on `stream` for communicator `c`.
    pub fn enqueue(&self, call: Call, c: RawComm, stream: RawStream) -> Result<(), i32> {
        let (cm, st) = (c.0, stream.0);
        // SAFETY: HCCL's prototypes; the caller checked the buffers' sizes against the
        // counts (`check_args`) and their memory outlives the queued operation (see `Call`).
        let rc = unsafe {
            match call {
                Call::AllReduce {
                    send,
                    recv,
                    count,
                    dtype,
                    op,
                } => (self.all_reduce)(send.0, recv.0, count, dtype, op, cm, st),
                Call::AllGather {
                    send,
                    recv,
                    count,
                    dtype,
                } => (self.all_gather)(send.0, recv.0, count, dtype, cm, st),
                Call::ReduceScatter {
                    send,
                    recv,
                    count,
                    dtype,
                    op,
                } => (self.reduce_scatter)(send.0, recv.0, count, dtype, op, cm, st),
                Call::Broadcast {
                    buf,
                    count,
                    dtype,
                    root,
                } => (self.broadcast)(buf.0, count, dtype, root, cm, st),
                Call::Reduce {
                    send,
                    recv,
                    count,
                    dtype,
                    op,
                    root,
                } => (self.reduce)(send.0, recv.0, count, dtype, op, root, cm, st),
                Call::Send {
                    buf,
                    count,
                    dtype,
                    peer,
                } => (self.send)(buf.0, count, dtype, peer, cm, st),
                Call::Recv {
                    buf,
                    count,
                    dtype,
                    peer,
                } => (self.recv)(buf.0, count, dtype, peer, cm, st),
            }
        };
        code(rc)
    }
}

fn code(rc: i32) -> Result<(), i32> {
    if rc == 0 {
        Ok(())
    } else {
        Err(rc)
    }
}
