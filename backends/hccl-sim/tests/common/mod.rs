//! Shared helpers of the simulator's tests: the two simulated libraries opened by path
//! (`libascendcl.so`, `libhccl.so`, built next to the test binary), typed entry points, and
//! running a test in a child process started with the simulators' environment.
#![allow(dead_code, clippy::too_many_arguments)]

use libloading::Library;
use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::OnceLock;

pub const HCCL_SUCCESS: i32 = 0;
pub const HCCL_E_PARA: i32 = 1;
pub const HCCL_E_PTR: i32 = 2;
pub const HCCL_E_INTERNAL: i32 = 4;
pub const HCCL_E_NOT_SUPPORT: i32 = 5;
pub const HCCL_E_TIMEOUT: i32 = 9;
pub const HCCL_E_REMOTE: i32 = 21;
pub const HCCL_E_OPRETRY_FAIL: i32 = 23;
pub const HCCL_E_OOM: i32 = 24;
pub const HCCL_E_IN_STATUS: i32 = 1041;
pub const HCCL_E_RESERVED: i32 = 1042;
pub const INT16: i32 = 1;
pub const UINT64: i32 = 6;
pub const UINT16: i32 = 8;
pub const UINT32: i32 = 9;
pub const HIF8: i32 = 14;
pub const FP8E8M0: i32 = 17;
/// `SYS_MAX_COUNT`: the largest count an operation accepts.
pub const SYS_MAX_COUNT: u64 = 0x7_FFFF_FFFF;
pub const INT8: i32 = 0;
pub const INT32: i32 = 2;
pub const FP16: i32 = 3;
pub const FP32: i32 = 4;
pub const INT64: i32 = 5;
pub const UINT8: i32 = 7;
pub const FP64: i32 = 10;
pub const BF16: i32 = 11;
pub const INT128: i32 = 12;
pub const SUM: i32 = 0;
pub const PROD: i32 = 1;
pub const MAX: i32 = 2;
pub const MIN: i32 = 3;
pub const REDUCE_RESERVED: i32 = 255;
/// `ACL_ERROR_RT_COMM_OP_RETRY_FAIL`: what a stream reports after a failed operation.
pub const ACL_COMM_FAIL: i32 = 507_904;

fn deps_dir() -> PathBuf {
    std::env::current_exe()
        .expect("current_exe")
        .parent()
        .expect("deps dir")
        .to_path_buf()
}

/// Path of a library built next to the test binary.
pub fn lib_path(name: &str) -> PathBuf {
    let p = deps_dir().join(name);
    assert!(p.exists(), "{} not built", p.display());
    p
}

/// Runs the calling test in a child process with the simulators' environment (4 devices, an
/// execution timeout of `timeout_ms`) plus `extra`, unless this is that child. Returns `true`
/// in the child (run the body), `false` in the parent once the child passed.
pub fn in_child(timeout_ms: u64, extra: &[(&str, &str)]) -> bool {
    let thread = std::thread::current();
    let name = thread.name().expect("a libtest thread").to_owned();
    if std::env::var("XSIM_HCCL_TEST_CHILD").as_deref() == Ok(name.as_str()) {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().expect("exe"))
        .args([&name, "--exact", "--nocapture", "--test-threads=1"])
        .env("XSTREAM_ACL_LIBRARY", lib_path("libascendcl.so"))
        .env("XSIM_DEVICES", "4")
        .env("XSIM_HCCL_TIMEOUT_MS", timeout_ms.to_string())
        .env("XSIM_HCCL_TEST_CHILD", &name)
        .envs(extra.iter().copied())
        .output()
        .expect("start the test binary again");
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{name} failed in its child process");
    assert!(stdout.contains("1 passed"), "the child did not run {name}");
    false
}

type Stream = *mut c_void;
type Comm = *mut c_void;

/// The two libraries, opened once per process.
pub struct Sims {
    acl: Library,
    hccl: Library,
}

// SAFETY: `Library` handles are usable from any thread.
unsafe impl Sync for Sims {}

/// The process-wide handles (ACL initialised).
pub fn sims() -> &'static Sims {
    static S: OnceLock<Sims> = OnceLock::new();
    S.get_or_init(|| {
        // SAFETY: the simulators' initialisers are Rust statics without preconditions.
        let acl = unsafe { Library::new(lib_path("libascendcl.so")) }.expect("dlopen ACL sim");
        // SAFETY: as above.
        let hccl = unsafe { Library::new(lib_path("libhccl.so")) }.expect("dlopen HCCL sim");
        let s = Sims { acl, hccl };
        // SAFETY: `aclError aclInit(const char*)`, NULL config.
        let init: unsafe extern "C" fn(*const i8) -> i32 = unsafe { s.acl_sym(b"aclInit\0") };
        // SAFETY: NULL is a valid argument.
        assert_eq!(unsafe { init(std::ptr::null()) }, 0);
        s
    })
}

impl Sims {
    /// # Safety
    /// `T` is the symbol's exact type.
    pub unsafe fn acl_sym<T: Copy>(&self, name: &[u8]) -> T {
        // SAFETY: caller contract.
        unsafe { *self.acl.get::<T>(name).expect("ACL symbol") }
    }

    /// # Safety
    /// `T` is the symbol's exact type.
    pub unsafe fn hccl_sym<T: Copy>(&self, name: &[u8]) -> T {
        // SAFETY: caller contract.
        unsafe { *self.hccl.get::<T>(name).expect("HCCL symbol") }
    }

    /// Makes `dev` current on this thread.
    pub fn set_device(&self, dev: i32) {
        // SAFETY: `aclError aclrtSetDevice(int32_t)`.
        let f: unsafe extern "C" fn(i32) -> i32 = unsafe { self.acl_sym(b"aclrtSetDevice\0") };
        // SAFETY: a plain integer.
        assert_eq!(unsafe { f(dev) }, 0);
    }

    /// A new stream of the current device.
    pub fn stream(&self) -> Stream {
        // SAFETY: `aclError aclrtCreateStream(aclrtStream*)`.
        let f: unsafe extern "C" fn(*mut Stream) -> i32 =
            unsafe { self.acl_sym(b"aclrtCreateStream\0") };
        let mut s = std::ptr::null_mut();
        // SAFETY: `s` is a live local.
        assert_eq!(unsafe { f(&mut s) }, 0);
        s
    }

    /// `aclrtSynchronizeStream`'s code.
    pub fn sync(&self, s: Stream) -> i32 {
        // SAFETY: `aclError aclrtSynchronizeStream(aclrtStream)`.
        let f: unsafe extern "C" fn(Stream) -> i32 =
            unsafe { self.acl_sym(b"aclrtSynchronizeStream\0") };
        // SAFETY: a stream of this library.
        unsafe { f(s) }
    }

    /// Device memory holding `data`.
    pub fn upload<T: Copy>(&self, data: &[T]) -> DevBuf {
        let b = self.alloc(std::mem::size_of_val(data));
        // SAFETY: `aclError aclrtMemcpy(void*, size_t, const void*, size_t, kind)`; 1 = H2D.
        let f: unsafe extern "C" fn(*mut c_void, usize, *const c_void, usize, i32) -> i32 =
            unsafe { self.acl_sym(b"aclrtMemcpy\0") };
        let n = std::mem::size_of_val(data);
        if n > 0 {
            // SAFETY: `b` holds `n` bytes; `data` is readable.
            assert_eq!(unsafe { f(b.ptr, n, data.as_ptr().cast(), n, 1) }, 0);
        }
        b
    }

    /// `bytes` of device memory (at least 1).
    pub fn alloc(&self, bytes: usize) -> DevBuf {
        // SAFETY: `aclError aclrtMalloc(void**, size_t, policy)`.
        let f: unsafe extern "C" fn(*mut *mut c_void, usize, i32) -> i32 =
            unsafe { self.acl_sym(b"aclrtMalloc\0") };
        let mut p = std::ptr::null_mut();
        // SAFETY: `p` is a live local.
        assert_eq!(unsafe { f(&mut p, bytes.max(1), 0) }, 0);
        DevBuf { ptr: p, bytes }
    }

    /// Copies `b` back as `T`s.
    pub fn download<T: Copy + Default>(&self, b: &DevBuf) -> Vec<T> {
        let mut v = vec![T::default(); b.bytes / std::mem::size_of::<T>()];
        // SAFETY: as in `upload`; 2 = D2H.
        let f: unsafe extern "C" fn(*mut c_void, usize, *const c_void, usize, i32) -> i32 =
            unsafe { self.acl_sym(b"aclrtMemcpy\0") };
        if b.bytes > 0 {
            // SAFETY: `v` holds `b.bytes` bytes.
            let rc = unsafe { f(v.as_mut_ptr().cast(), b.bytes, b.ptr, b.bytes, 2) };
            assert_eq!(rc, 0);
        }
        v
    }

    /// `HcclGetRootInfo`.
    pub fn root_info(&self) -> Vec<u8> {
        let mut r = vec![0u8; 4108];
        // SAFETY: `HcclResult HcclGetRootInfo(HcclRootInfo*)`.
        let f: unsafe extern "C" fn(*mut c_void) -> i32 =
            unsafe { self.hccl_sym(b"HcclGetRootInfo\0") };
        // SAFETY: 4108 writable bytes.
        assert_eq!(unsafe { f(r.as_mut_ptr().cast()) }, 0);
        r
    }

    /// `HcclCommInitRootInfo`'s code and communicator.
    pub fn init_rank(&self, n: u32, root: &[u8], rank: u32) -> (i32, Comm) {
        // SAFETY: `HcclResult HcclCommInitRootInfo(uint32_t, const HcclRootInfo*, uint32_t,
        // HcclComm*)`.
        let f: unsafe extern "C" fn(u32, *const c_void, u32, *mut Comm) -> i32 =
            unsafe { self.hccl_sym(b"HcclCommInitRootInfo\0") };
        let mut c = std::ptr::null_mut();
        // SAFETY: `root` has 4108 bytes; `c` is a live local.
        let rc = unsafe { f(n, root.as_ptr().cast(), rank, &mut c) };
        (rc, c)
    }

    /// `HcclCommInitAll` over devices `0..n`.
    pub fn init_all(&self, n: u32) -> Vec<Comm> {
        // SAFETY: `HcclResult HcclCommInitAll(uint32_t, int32_t*, HcclComm*)`.
        let f: unsafe extern "C" fn(u32, *mut i32, *mut Comm) -> i32 =
            unsafe { self.hccl_sym(b"HcclCommInitAll\0") };
        let mut devs: Vec<i32> = (0..n as i32).collect();
        let mut comms = vec![std::ptr::null_mut(); n as usize];
        // SAFETY: `n` ids and `n` handle slots.
        assert_eq!(unsafe { f(n, devs.as_mut_ptr(), comms.as_mut_ptr()) }, 0);
        comms
    }

    /// `HcclCommDestroy`.
    pub fn destroy(&self, c: Comm) -> i32 {
        // SAFETY: `HcclResult HcclCommDestroy(HcclComm)`.
        let f: unsafe extern "C" fn(Comm) -> i32 = unsafe { self.hccl_sym(b"HcclCommDestroy\0") };
        // SAFETY: a lookup key.
        unsafe { f(c) }
    }

    /// `HcclGetCommAsyncError`'s value (the call must succeed).
    pub fn async_error(&self, c: Comm) -> i32 {
        // SAFETY: `HcclResult HcclGetCommAsyncError(HcclComm, HcclResult*)`.
        let f: unsafe extern "C" fn(Comm, *mut i32) -> i32 =
            unsafe { self.hccl_sym(b"HcclGetCommAsyncError\0") };
        let mut e = -1;
        // SAFETY: `e` is a live local.
        assert_eq!(unsafe { f(c, &mut e) }, 0);
        e
    }

    /// `HcclAllReduce`.
    pub fn all_reduce(
        &self,
        s: &DevBuf,
        r: &DevBuf,
        n: u64,
        dt: i32,
        op: i32,
        c: Comm,
        st: Stream,
    ) -> i32 {
        // SAFETY: HCCL's documented prototype.
        let f: unsafe extern "C" fn(*mut c_void, *mut c_void, u64, i32, i32, Comm, Stream) -> i32 =
            unsafe { self.hccl_sym(b"HcclAllReduce\0") };
        // SAFETY: buffers stay alive until the test synchronised the stream.
        unsafe { f(s.ptr, r.ptr, n, dt, op, c, st) }
    }

    /// `HcclReduce`.
    #[allow(clippy::too_many_arguments)]
    pub fn reduce(
        &self,
        s: &DevBuf,
        r: &DevBuf,
        n: u64,
        dt: i32,
        op: i32,
        root: u32,
        c: Comm,
        st: Stream,
    ) -> i32 {
        // SAFETY: HCCL's documented prototype.
        let f: unsafe extern "C" fn(
            *mut c_void,
            *mut c_void,
            u64,
            i32,
            i32,
            u32,
            Comm,
            Stream,
        ) -> i32 = unsafe { self.hccl_sym(b"HcclReduce\0") };
        // SAFETY: as above.
        unsafe { f(s.ptr, r.ptr, n, dt, op, root, c, st) }
    }

    /// `HcclAllGather`.
    pub fn all_gather(&self, s: &DevBuf, r: &DevBuf, n: u64, dt: i32, c: Comm, st: Stream) -> i32 {
        // SAFETY: HCCL's documented prototype.
        let f: unsafe extern "C" fn(*mut c_void, *mut c_void, u64, i32, Comm, Stream) -> i32 =
            unsafe { self.hccl_sym(b"HcclAllGather\0") };
        // SAFETY: as above.
        unsafe { f(s.ptr, r.ptr, n, dt, c, st) }
    }

    /// `HcclReduceScatter`.
    pub fn reduce_scatter(
        &self,
        s: &DevBuf,
        r: &DevBuf,
        n: u64,
        dt: i32,
        op: i32,
        c: Comm,
        st: Stream,
    ) -> i32 {
        // SAFETY: HCCL's documented prototype.
        let f: unsafe extern "C" fn(*mut c_void, *mut c_void, u64, i32, i32, Comm, Stream) -> i32 =
            unsafe { self.hccl_sym(b"HcclReduceScatter\0") };
        // SAFETY: as above.
        unsafe { f(s.ptr, r.ptr, n, dt, op, c, st) }
    }

    /// `HcclBroadcast`.
    pub fn broadcast(&self, b: &DevBuf, n: u64, dt: i32, root: u32, c: Comm, st: Stream) -> i32 {
        // SAFETY: HCCL's documented prototype.
        let f: unsafe extern "C" fn(*mut c_void, u64, i32, u32, Comm, Stream) -> i32 =
            unsafe { self.hccl_sym(b"HcclBroadcast\0") };
        // SAFETY: as above.
        unsafe { f(b.ptr, n, dt, root, c, st) }
    }

    /// `HcclSend` (`send`) or `HcclRecv`.
    pub fn p2p(
        &self,
        send: bool,
        b: &DevBuf,
        n: u64,
        dt: i32,
        peer: u32,
        c: Comm,
        st: Stream,
    ) -> i32 {
        let name: &[u8] = if send { b"HcclSend\0" } else { b"HcclRecv\0" };
        // SAFETY: HCCL's documented prototypes (identical for both).
        let f: unsafe extern "C" fn(*mut c_void, u64, i32, u32, Comm, Stream) -> i32 =
            unsafe { self.hccl_sym(name) };
        // SAFETY: as above.
        unsafe { f(b.ptr, n, dt, peer, c, st) }
    }

    /// `HcclGroupStart` / `HcclGroupEnd`.
    pub fn group(&self, start: bool) -> i32 {
        let name: &[u8] = if start {
            b"HcclGroupStart\0"
        } else {
            b"HcclGroupEnd\0"
        };
        // SAFETY: `HcclResult HcclGroupStart(void)` / `HcclGroupEnd(void)`.
        let f: unsafe extern "C" fn() -> i32 = unsafe { self.hccl_sym(name) };
        // SAFETY: no arguments.
        unsafe { f() }
    }
}

/// A device allocation (freed with the process).
pub struct DevBuf {
    pub ptr: *mut c_void,
    pub bytes: usize,
}

// SAFETY: device pointers of the simulator are plain addresses usable from any thread.
unsafe impl Send for DevBuf {}
// SAFETY: as above.
unsafe impl Sync for DevBuf {}

/// A raw handle moved into a rank's thread.
#[derive(Clone, Copy)]
pub struct Raw(pub *mut c_void);
// SAFETY: HCCL communicators and ACL streams are handles usable from any thread.
unsafe impl Send for Raw {}
