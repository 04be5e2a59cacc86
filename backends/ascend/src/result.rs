//! Safe-ish wrappers over [`AclFns`]: each returns [`Result`], maps codes with
//! [`map_error`](crate::error::map_error) (attaching `aclGetRecentErrMsg` text when the library
//! has it) and reads out-parameters through `MaybeUninit`.
//!
//! These are crate-private: callers pass handles owned by live xstream objects whose context is
//! current on the calling thread (see `device::bind`).
#![allow(unsafe_code)]

use std::ffi::{c_void, CStr};
use std::mem::MaybeUninit;
use std::ptr::null_mut;

use xstream_core::{BackendKind, Error, Result};

use crate::error::map_error;
use crate::sys::{
    aclError, aclrtCallback, aclrtStreamAttrValue, AclFns, DevPtr, RawContext, RawEvent, RawModel,
    RawStream,
};

pub(crate) mod exception;
pub(crate) mod kernel;
pub(crate) mod random;
pub(crate) mod reduce;
pub(crate) mod stream_config;
pub(crate) mod sysinfo;
pub(crate) mod value;
pub(crate) mod version;

/// The `aclGetRecentErrMsg` text, when the library exports it and has one.
pub(crate) fn recent_message(t: &AclFns) -> Option<String> {
    let f = t.aclGetRecentErrMsg?;
    // SAFETY: no arguments; returns NULL or a NUL-terminated string valid until the next call
    // on this thread, which we copy at once.
    let p = unsafe { f() };
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated per the ACL contract.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    (!s.is_empty()).then_some(s)
}

/// Maps a return code.
pub(crate) fn check(t: &AclFns, api: &'static str, code: aclError) -> Result<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(sysinfo::annotate(
            t,
            exception::annotate(map_error(api, code, recent_message(t))),
        ))
    }
}

/// An optional symbol, or [`Error::Unsupported`] naming it.
pub(crate) fn opt<F>(f: Option<F>, name: &'static str) -> Result<F> {
    f.ok_or_else(|| {
        Error::unsupported(
            BackendKind::Ascend,
            format!("{name} (not exported by this libascendcl.so)"),
        )
    })
}

macro_rules! call {
    ($t:expr, $api:ident ( $($arg:expr),* )) => {{
        // SAFETY: arguments are handles owned by live xstream objects (or NULL where ACL
        // accepts it) and out-pointers to live locals; the prototype is the C one.
        let code = unsafe { ($t.$api)($($arg),*) };
        check($t, stringify!($api), code)
    }};
    (opt $t:expr, $api:ident ( $($arg:expr),* )) => {{
        let f = opt($t.$api, stringify!($api))?;
        // SAFETY: as above.
        let code = unsafe { f($($arg),*) };
        check($t, stringify!($api), code)
    }};
}

macro_rules! out {
    ($ty:ty, |$p:ident| $body:expr) => {{
        let mut v = MaybeUninit::<$ty>::zeroed();
        let $p = v.as_mut_ptr();
        $body?;
        // SAFETY: zero-initialised, and the call succeeded (it wrote the value).
        unsafe { v.assume_init() }
    }};
}

/// The `u64` member of an attribute value.
pub(crate) fn attr_u64(v: aclrtStreamAttrValue) -> u64 {
    // SAFETY: every bit pattern is a valid u64; the union is 16 initialised bytes.
    unsafe { v.failureMode }
}

/// The first `u32` member of an attribute value.
pub(crate) fn attr_u32(v: aclrtStreamAttrValue) -> u32 {
    // SAFETY: every bit pattern is a valid u32 array; the union is 16 initialised bytes.
    unsafe { v.reserve[0] }
}

/// `aclInit(NULL)`; `ACL_ERROR_REPEAT_INITIALIZE` (100002) is success.
pub(crate) fn init(t: &AclFns) -> Result<()> {
    // SAFETY: NULL config path is allowed.
    let code = unsafe { (t.aclInit)(std::ptr::null()) };
    match code {
        0 | 100_002 => Ok(()),
        c => check(t, "aclInit", c),
    }
}

/// `aclFinalizeReference` when present (returns the remaining count), else `aclFinalize`.
pub(crate) fn finalize(t: &AclFns) -> Result<u64> {
    if t.aclFinalizeReference.is_some() {
        Ok(out!(u64, |p| call!(opt t, aclFinalizeReference(p))))
    } else {
        call!(t, aclFinalize()).map(|_| 0)
    }
}

pub(crate) mod device {
    use super::*;
    /// `aclrtDeviceCanAccessPeer`.
    pub(crate) fn can_access_peer(t: &AclFns, dev: i32, peer: i32) -> Result<bool> {
        Ok(out!(
            i32,
            |p| call!(opt t, aclrtDeviceCanAccessPeer(p, dev, peer))
        ) != 0)
    }
    /// `aclrtDeviceEnablePeerAccess` (flags 0) from the current device.
    pub(crate) fn enable_peer_access(t: &AclFns, peer: i32) -> Result<()> {
        call!(opt t, aclrtDeviceEnablePeerAccess(peer, 0))
    }
    /// `aclrtDeviceDisablePeerAccess` from the current device.
    pub(crate) fn disable_peer_access(t: &AclFns, peer: i32) -> Result<()> {
        call!(opt t, aclrtDeviceDisablePeerAccess(peer))
    }
    pub(crate) fn count(t: &AclFns) -> Result<u32> {
        Ok(out!(u32, |p| call!(t, aclrtGetDeviceCount(p))))
    }
    pub(crate) fn set(t: &AclFns, ordinal: i32) -> Result<()> {
        call!(t, aclrtSetDevice(ordinal))
    }
    pub(crate) fn reset(t: &AclFns, ordinal: i32) -> Result<()> {
        call!(t, aclrtResetDevice(ordinal))
    }
    pub(crate) fn synchronize(t: &AclFns) -> Result<()> {
        call!(t, aclrtSynchronizeDevice())
    }
    pub(crate) fn current_context(t: &AclFns) -> Result<RawContext> {
        Ok(RawContext(out!(*mut c_void, |p| call!(
            t,
            aclrtGetCurrentContext(p)
        ))))
    }
    pub(crate) fn create_context(t: &AclFns, ordinal: i32) -> Result<RawContext> {
        opt(t.aclrtCreateContext, "aclrtCreateContext")?;
        Ok(RawContext(out!(*mut c_void, |p| call!(
            opt t,
            aclrtCreateContext(p, ordinal)
        ))))
    }
    pub(crate) fn destroy_context(t: &AclFns, c: RawContext) -> Result<()> {
        opt(t.aclrtDestroyContext, "aclrtDestroyContext")?;
        call!(opt t, aclrtDestroyContext(c.0))
    }
    pub(crate) fn set_current_context(t: &AclFns, c: RawContext) -> Result<()> {
        call!(t, aclrtSetCurrentContext(c.0))
    }
    pub(crate) fn priority_range(t: &AclFns) -> Option<Result<(i32, i32)>> {
        t.aclrtDeviceGetStreamPriorityRange?;
        let mut least = 0i32;
        let mut greatest = 0i32;
        let r: Result<()> =
            (|| call!(opt t, aclrtDeviceGetStreamPriorityRange(&mut least, &mut greatest)))();
        Some(r.map(|_| (least, greatest)))
    }
    pub(crate) fn stream_available(t: &AclFns) -> Option<u32> {
        t.aclrtGetStreamAvailableNum?;
        let r: Result<u32> = (|| Ok(out!(u32, |p| call!(opt t, aclrtGetStreamAvailableNum(p)))))();
        r.ok()
    }
}

pub(crate) mod stream {
    use super::*;
    pub(crate) fn create(t: &AclFns) -> Result<RawStream> {
        Ok(RawStream(out!(*mut c_void, |p| call!(
            t,
            aclrtCreateStream(p)
        ))))
    }
    pub(crate) fn create_with_config(t: &AclFns, priority: u32, flag: u32) -> Result<RawStream> {
        Ok(RawStream(out!(
            *mut c_void,
            |p| call!(opt t, aclrtCreateStreamWithConfig(p, priority, flag))
        )))
    }
    pub(crate) fn destroy(t: &AclFns, s: RawStream) -> Result<()> {
        call!(t, aclrtDestroyStream(s.0))
    }
    pub(crate) fn destroy_force(t: &AclFns, s: RawStream) -> Result<()> {
        call!(opt t, aclrtDestroyStreamForce(s.0))
    }
    pub(crate) fn synchronize(t: &AclFns, s: RawStream) -> Result<()> {
        call!(t, aclrtSynchronizeStream(s.0))
    }
    pub(crate) fn synchronize_timeout(t: &AclFns, s: RawStream, ms: i32) -> Result<()> {
        call!(opt t, aclrtSynchronizeStreamWithTimeout(s.0, ms))
    }
    /// `ACL_STREAM_STATUS_*` (COMPLETE=0, NOT_READY=1).
    pub(crate) fn query(t: &AclFns, s: RawStream) -> Result<i32> {
        Ok(out!(i32, |p| call!(t, aclrtStreamQuery(s.0, p))))
    }
    pub(crate) fn wait_event(t: &AclFns, s: RawStream, e: RawEvent) -> Result<()> {
        call!(t, aclrtStreamWaitEvent(s.0, e.0))
    }
    pub(crate) fn set_failure_mode(t: &AclFns, s: RawStream, mode: u64) -> Result<()> {
        call!(opt t, aclrtSetStreamFailureMode(s.0, mode))
    }
    pub(crate) fn get_priority(t: &AclFns, s: RawStream) -> Result<u32> {
        Ok(out!(u32, |p| call!(opt t, aclrtStreamGetPriority(s.0, p))))
    }
    pub(crate) fn get_flags(t: &AclFns, s: RawStream) -> Result<u32> {
        Ok(out!(u32, |p| call!(opt t, aclrtStreamGetFlags(s.0, p))))
    }
    pub(crate) fn get_id(t: &AclFns, s: RawStream) -> Result<i32> {
        Ok(out!(i32, |p| call!(opt t, aclrtStreamGetId(s.0, p))))
    }
    pub(crate) fn get_attribute(
        t: &AclFns,
        s: RawStream,
        attr: i32,
    ) -> Result<aclrtStreamAttrValue> {
        Ok(out!(
            aclrtStreamAttrValue,
            |p| call!(opt t, aclrtGetStreamAttribute(s.0, attr, p))
        ))
    }
    pub(crate) fn set_attribute(
        t: &AclFns,
        s: RawStream,
        attr: i32,
        mut v: aclrtStreamAttrValue,
    ) -> Result<()> {
        call!(opt t, aclrtSetStreamAttribute(s.0, attr, &mut v))
    }
}

pub(crate) mod event {
    use super::*;
    pub(crate) fn create_with_flag(t: &AclFns, flag: u32) -> Result<RawEvent> {
        Ok(RawEvent(out!(*mut c_void, |p| call!(
            t,
            aclrtCreateEventWithFlag(p, flag)
        ))))
    }
    pub(crate) fn create_ex_with_flag(t: &AclFns, flag: u32) -> Result<RawEvent> {
        Ok(RawEvent(out!(
            *mut c_void,
            |p| call!(opt t, aclrtCreateEventExWithFlag(p, flag))
        )))
    }
    pub(crate) fn destroy(t: &AclFns, e: RawEvent) -> Result<()> {
        call!(t, aclrtDestroyEvent(e.0))
    }
    /// `aclrtIpcGetEventHandle`: the handle bytes of an `ACL_EVENT_IPC` event.
    pub(crate) fn ipc_get_handle(
        t: &AclFns,
        e: RawEvent,
    ) -> Result<[u8; crate::sys::ACL_IPC_EVENT_HANDLE_SIZE]> {
        let h = out!(crate::sys::aclrtIpcEventHandle, |p| call!(
            opt t,
            aclrtIpcGetEventHandle(e.0, p)
        ));
        Ok(h.reserved.map(|c| c as u8))
    }
    /// `aclrtIpcOpenEventHandle`: an event of this process for another process's handle.
    pub(crate) fn ipc_open_handle(
        t: &AclFns,
        bytes: &[u8; crate::sys::ACL_IPC_EVENT_HANDLE_SIZE],
    ) -> Result<RawEvent> {
        let h = crate::sys::aclrtIpcEventHandle {
            reserved: bytes.map(|b| b as std::ffi::c_char),
        };
        Ok(RawEvent(out!(*mut c_void, |p| call!(
            opt t,
            aclrtIpcOpenEventHandle(h, p)
        ))))
    }
    pub(crate) fn record(t: &AclFns, e: RawEvent, s: RawStream) -> Result<()> {
        call!(t, aclrtRecordEvent(e.0, s.0))
    }
    /// `aclrtEventRecordedStatus` (**inverted**: NOT_READY=0, COMPLETE=1).
    pub(crate) fn query_status(t: &AclFns, e: RawEvent) -> Result<i32> {
        Ok(out!(i32, |p| call!(t, aclrtQueryEventStatus(e.0, p))))
    }
    pub(crate) fn synchronize(t: &AclFns, e: RawEvent) -> Result<()> {
        call!(t, aclrtSynchronizeEvent(e.0))
    }
    pub(crate) fn synchronize_timeout(t: &AclFns, e: RawEvent, ms: i32) -> Result<()> {
        call!(opt t, aclrtSynchronizeEventWithTimeout(e.0, ms))
    }
    pub(crate) fn elapsed(t: &AclFns, start: RawEvent, end: RawEvent) -> Result<f32> {
        Ok(out!(f32, |p| call!(
            t,
            aclrtEventElapsedTime(p, start.0, end.0)
        )))
    }
}

pub(crate) mod callback {
    use super::*;
    pub(crate) fn launch(
        t: &AclFns,
        f: aclrtCallback,
        data: *mut c_void,
        block: i32,
        s: RawStream,
    ) -> Result<()> {
        call!(t, aclrtLaunchCallback(f, data, block, s.0))
    }
    pub(crate) fn launch_host_func(
        t: &AclFns,
        s: RawStream,
        f: aclrtCallback,
        data: *mut c_void,
    ) -> Result<()> {
        call!(opt t, aclrtLaunchHostFunc(s.0, f, data))
    }
    pub(crate) fn subscribe(t: &AclFns, tid: u64, s: RawStream) -> Result<()> {
        call!(t, aclrtSubscribeReport(tid, s.0))
    }
    pub(crate) fn unsubscribe(t: &AclFns, tid: u64, s: RawStream) -> Result<()> {
        call!(t, aclrtUnSubscribeReport(tid, s.0))
    }
    /// The raw code: 0 (ran callbacks), 507012 (idle), 107012 (no subscription yet), ...
    pub(crate) fn process_report(t: &AclFns, timeout_ms: i32) -> i32 {
        // SAFETY: runs our trampolines inline; no pointer arguments.
        unsafe { (t.aclrtProcessReport)(timeout_ms) }
    }
}

pub(crate) mod memory;

pub(crate) mod model {
    use super::*;
    pub(crate) fn capture_begin(t: &AclFns, s: RawStream, mode: i32) -> Result<()> {
        call!(opt t, aclmdlRICaptureBegin(s.0, mode))
    }
    /// `(status, model)`.
    pub(crate) fn capture_info(t: &AclFns, s: RawStream) -> Result<(i32, RawModel)> {
        let mut st = 0i32;
        let mut m: *mut c_void = null_mut();
        call!(opt t, aclmdlRICaptureGetInfo(s.0, &mut st, &mut m))?;
        Ok((st, RawModel(m)))
    }
    /// Ends the capture; on failure returns the error and whatever model the runtime gave.
    pub(crate) fn capture_end(t: &AclFns, s: RawStream) -> (Result<()>, RawModel) {
        let mut m: *mut c_void = null_mut();
        let r = (|| call!(opt t, aclmdlRICaptureEnd(s.0, &mut m)))();
        (r, RawModel(m))
    }
    pub(crate) fn execute_async(t: &AclFns, m: RawModel, s: RawStream) -> Result<()> {
        call!(opt t, aclmdlRIExecuteAsync(m.0, s.0))
    }
    pub(crate) fn destroy(t: &AclFns, m: RawModel) -> Result<()> {
        call!(opt t, aclmdlRIDestroy(m.0))
    }
    pub(crate) fn build_begin(t: &AclFns) -> Result<RawModel> {
        Ok(RawModel(out!(
            *mut c_void,
            |p| call!(opt t, aclmdlRIBuildBegin(p, 0))
        )))
    }
    pub(crate) fn bind_stream(t: &AclFns, m: RawModel, s: RawStream) -> Result<()> {
        call!(opt t, aclmdlRIBindStream(m.0, s.0, crate::sys::consts::ACL_MODEL_STREAM_FLAG_HEAD))
    }
    pub(crate) fn end_task(t: &AclFns, m: RawModel, s: RawStream) -> Result<()> {
        call!(opt t, aclmdlRIEndTask(m.0, s.0))
    }
    pub(crate) fn build_end(t: &AclFns, m: RawModel) -> Result<()> {
        call!(opt t, aclmdlRIBuildEnd(m.0, null_mut()))
    }
    pub(crate) fn unbind_stream(t: &AclFns, m: RawModel, s: RawStream) -> Result<()> {
        call!(opt t, aclmdlRIUnbindStream(m.0, s.0))
    }
}

pub(crate) mod xsim {
    use super::*;
    #[cfg_attr(not(feature = "testing"), allow(dead_code))] // used by `Kernel::Fault` only
    pub(crate) fn fault(t: &AclFns, s: RawStream, code: i32) -> Result<()> {
        call!(opt t, xsimLaunchFault(s.0, code))
    }
}

pub(crate) mod allocator {
    use super::*;
    use crate::sys::{
        aclrtAllocatorAllocAdviseFunc, aclrtAllocatorAllocFunc, aclrtAllocatorFreeFunc,
        aclrtAllocatorGetAddrFromBlockFunc,
    };

    /// The trampolines a registration installs.
    pub(crate) struct Funcs {
        pub(crate) alloc: aclrtAllocatorAllocFunc,
        pub(crate) free: aclrtAllocatorFreeFunc,
        pub(crate) advise: aclrtAllocatorAllocAdviseFunc,
        pub(crate) addr: aclrtAllocatorGetAddrFromBlockFunc,
    }

    /// CreateDesc, Set*ToDesc, Register, DestroyDesc.
    pub(crate) fn register(t: &AclFns, s: RawStream, obj: *mut c_void, f: &Funcs) -> Result<()> {
        let create = opt(t.aclrtAllocatorCreateDesc, "aclrtAllocatorCreateDesc")?;
        // SAFETY: no arguments; returns NULL on host OOM.
        let desc = unsafe { create() };
        if desc.is_null() {
            return Err(Error::OutOfMemory {
                backend: BackendKind::Ascend,
                detail: "aclrtAllocatorCreateDesc returned NULL".into(),
            });
        }
        let r = (|| {
            call!(opt t, aclrtAllocatorSetObjToDesc(desc, obj))?;
            call!(opt t, aclrtAllocatorSetAllocFuncToDesc(desc, f.alloc))?;
            call!(opt t, aclrtAllocatorSetFreeFuncToDesc(desc, f.free))?;
            call!(opt t, aclrtAllocatorSetAllocAdviseFuncToDesc(desc, f.advise))?;
            call!(opt t, aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, f.addr))?;
            call!(opt t, aclrtAllocatorRegister(s.0, desc))
        })();
        // The registry copies the desc's fields (CANN AscendCL API reference): destroy it either way.
        let _ = (|| call!(opt t, aclrtAllocatorDestroyDesc(desc)))();
        r
    }

    /// The `aclrtAllocator` object registered for `s` (NULL or an error when none).
    pub(crate) fn get_by_stream(t: &AclFns, s: RawStream) -> Result<*mut c_void> {
        let mut desc: *mut c_void = null_mut();
        let mut obj: *mut c_void = null_mut();
        let mut a: Option<aclrtAllocatorAllocFunc> = None;
        let mut fr: Option<aclrtAllocatorFreeFunc> = None;
        let mut ad: Option<aclrtAllocatorAllocAdviseFunc> = None;
        let mut ga: Option<aclrtAllocatorGetAddrFromBlockFunc> = None;
        call!(opt t, aclrtAllocatorGetByStream(s.0, &mut desc, &mut obj, &mut a, &mut fr, &mut ad, &mut ga))?;
        Ok(obj)
    }

    pub(crate) fn unregister(t: &AclFns, s: RawStream) -> Result<()> {
        call!(opt t, aclrtAllocatorUnregister(s.0))
    }
}

/// IPC memory: `aclrtIpcMemGetExportKey` / `aclrtIpcMemSetImportPid` /
/// `aclrtIpcMemImportByKey` / `aclrtIpcMemClose` (optional symbols).
pub(crate) mod ipc_mem {
    use super::*;
    use std::ffi::{c_char, CStr};

    /// The key buffer handed to `aclrtIpcMemGetExportKey` (with its NUL).
    pub(crate) const KEY_BUF: usize = 65;

    /// `aclrtIpcMemGetExportKey`: the key of `len` bytes at `p` (`flags` as ACL's).
    pub(crate) fn export_key(t: &AclFns, p: DevPtr, len: usize, flags: u64) -> Result<Vec<u8>> {
        let mut key = [0 as c_char; KEY_BUF];
        let kp = key.as_mut_ptr();
        call!(opt t, aclrtIpcMemGetExportKey(p.0, len, kp, KEY_BUF, flags))?;
        if key[KEY_BUF - 1] != 0 {
            return Err(Error::invalid(
                "aclrtIpcMemGetExportKey returned an unterminated key",
            ));
        }
        // SAFETY: NUL-terminated (checked above) and alive for this scope.
        let k = unsafe { CStr::from_ptr(key.as_ptr()) };
        Ok(k.to_bytes().to_vec())
    }
    /// `aclrtIpcMemSetImportPid`: `pids` may import `key`.
    pub(crate) fn set_import_pid(t: &AclFns, key: &CStr, pids: &mut [i32]) -> Result<()> {
        let (kp, pp, n) = (key.as_ptr(), pids.as_mut_ptr(), pids.len());
        call!(opt t, aclrtIpcMemSetImportPid(kp, pp, n))
    }
    /// `aclrtIpcMemImportByKey` (default flags): this process's address of the export.
    pub(crate) fn import_by_key(t: &AclFns, key: &CStr) -> Result<DevPtr> {
        let kp = key.as_ptr();
        Ok(DevPtr(out!(*mut c_void, |p| call!(
            opt t,
            aclrtIpcMemImportByKey(p, kp, 0)
        ))))
    }
    /// `aclrtIpcMemClose`: closes this process's import of `key` (or withdraws its export).
    pub(crate) fn close(t: &AclFns, key: &CStr) -> Result<()> {
        let kp = key.as_ptr();
        call!(opt t, aclrtIpcMemClose(kp))
    }
}

/// Virtual memory (optional symbols): granularity, reservations, physical memory, mappings
/// and access, for device memory (`ACL_MEM_LOCATION_TYPE_DEVICE`, pinned, `ACL_HBM_MEM_HUGE`).
pub(crate) mod vmm {
    use super::*;
    use crate::sys::{aclrtMemAccessDesc, aclrtPhysicalMemProp};

    /// The property of pinned huge-page device memory on device `dev`.
    fn prop(dev: usize) -> aclrtPhysicalMemProp {
        aclrtPhysicalMemProp {
            handleType: 0,
            allocationType: 0,
            memAttr: 4,
            locationId: dev as u32,
            locationType: 1,
            reserve: 0,
        }
    }

    /// `aclrtMemGetAllocationGranularity` (`option` 0: minimum, 1: recommended).
    pub(crate) fn granularity(t: &AclFns, dev: usize, option: u32) -> Result<usize> {
        let mut p = prop(dev);
        let pp = &mut p as *mut aclrtPhysicalMemProp;
        Ok(out!(usize, |g| call!(
            opt t,
            aclrtMemGetAllocationGranularity(pp, option, g)
        )))
    }

    /// `aclrtReserveMemAddress` anywhere (flags 0).
    pub(crate) fn reserve(t: &AclFns, size: usize, align: usize) -> Result<DevPtr> {
        let n = std::ptr::null_mut();
        Ok(DevPtr(out!(*mut c_void, |p| call!(
            opt t,
            aclrtReserveMemAddress(p, size, align, n, 0)
        ))))
    }

    /// `aclrtReleaseMemAddress`.
    pub(crate) fn release(t: &AclFns, p: DevPtr) -> Result<()> {
        call!(opt t, aclrtReleaseMemAddress(p.0))
    }

    /// `aclrtMallocPhysical` of device memory on `dev`.
    pub(crate) fn malloc_physical(t: &AclFns, dev: usize, size: usize) -> Result<DevPtr> {
        let pr = prop(dev);
        let pp = &pr as *const aclrtPhysicalMemProp;
        Ok(DevPtr(out!(*mut c_void, |h| call!(
            opt t,
            aclrtMallocPhysical(h, size, pp, 0)
        ))))
    }

    /// `aclrtFreePhysical`.
    pub(crate) fn free_physical(t: &AclFns, h: DevPtr) -> Result<()> {
        call!(opt t, aclrtFreePhysical(h.0))
    }

    /// `aclrtMapMem` of the whole handle (offset 0, flags 0).
    pub(crate) fn map(t: &AclFns, at: DevPtr, size: usize, h: DevPtr) -> Result<()> {
        call!(opt t, aclrtMapMem(at.0, size, 0, h.0, 0))
    }

    /// `aclrtUnmapMem`.
    pub(crate) fn unmap(t: &AclFns, at: DevPtr) -> Result<()> {
        call!(opt t, aclrtUnmapMem(at.0))
    }

    /// `aclrtMemSetAccess`: read and write for device `dev`.
    pub(crate) fn set_access(t: &AclFns, at: DevPtr, size: usize, dev: usize) -> Result<()> {
        let mut d = aclrtMemAccessDesc {
            flags: 3,
            locationId: dev as u32,
            locationType: 1,
            rsv: [0; 12],
        };
        let dp = &mut d as *mut aclrtMemAccessDesc;
        call!(opt t, aclrtMemSetAccess(at.0, size, dp, 1))
    }

    /// `aclrtMemExportToShareableHandle` (handle type NONE) with `flags`
    /// (`ACL_RT_VMM_EXPORT_FLAG_*`).
    pub(crate) fn export(t: &AclFns, h: DevPtr, flags: u64) -> Result<u64> {
        Ok(out!(u64, |s| call!(
            opt t,
            aclrtMemExportToShareableHandle(h.0, 0, flags, s)
        )))
    }

    /// `aclrtMemImportFromShareableHandle` on device `dev`.
    pub(crate) fn import(t: &AclFns, shareable: u64, dev: usize) -> Result<DevPtr> {
        Ok(DevPtr(out!(*mut c_void, |h| call!(
            opt t,
            aclrtMemImportFromShareableHandle(shareable, dev as i32, h)
        ))))
    }
}
