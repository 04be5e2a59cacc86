//! The ACL simulator's host-task extension (`xsimLaunchHostTask`, `xsimHostTaskCancelled`,
//! simulator-only symbols of `backends/ascend-sim`), through which every operation runs in
//! stream order on the caller's `aclrtStream`. The library is opened by path (`XSIM_ACL_LIBRARY`,
//! else `XSTREAM_ACL_LIBRARY`, else `libascendcl.so`); opening a path that the process has
//! already loaded returns that same instance, whose streams the caller holds.

use crate::types::*;
use std::ffi::c_void;
use std::ffi::CString;
use std::sync::OnceLock;

/// `int32_t (*)(void* user, const void* token)`.
pub(crate) type HostTaskFn = unsafe extern "C" fn(*mut c_void, *const c_void) -> i32;
type LaunchFn = unsafe extern "C" fn(*mut c_void, Option<HostTaskFn>, *mut c_void) -> i32;
type CancelledFn = unsafe extern "C" fn(*const c_void) -> i32;
type DeviceCountFn = unsafe extern "C" fn(*mut u32) -> i32;

/// The resolved extension.
pub(crate) struct Hooks {
    pub(crate) launch: LaunchFn,
    pub(crate) cancelled: CancelledFn,
    /// ACL's public `aclrtGetDeviceCount`.
    pub(crate) device_count: DeviceCountFn,
}

fn resolve() -> Option<Hooks> {
    let path = std::env::var("XSIM_ACL_LIBRARY")
        .or_else(|_| std::env::var("XSTREAM_ACL_LIBRARY"))
        .unwrap_or_else(|_| "libascendcl.so".into());
    let c = CString::new(path).ok()?;
    // SAFETY: `c` is a valid C string. The handle is never closed (the library stays loaded
    // for the life of the process, like a linked dependency).
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        return None;
    }
    // SAFETY: `h` is a live handle; the names are C strings.
    let (l, k, d) = unsafe {
        (
            libc::dlsym(h, c"xsimLaunchHostTask".as_ptr()),
            libc::dlsym(h, c"xsimHostTaskCancelled".as_ptr()),
            libc::dlsym(h, c"aclrtGetDeviceCount".as_ptr()),
        )
    };
    if l.is_null() || k.is_null() || d.is_null() {
        return None;
    }
    // SAFETY: the ACL simulator documents the two extension prototypes (its README);
    // `aclrtGetDeviceCount` is ACL's public `aclError (uint32_t*)`; the symbols stay valid
    // while the library is loaded (forever, see above).
    unsafe {
        Some(Hooks {
            launch: std::mem::transmute::<*mut c_void, LaunchFn>(l),
            cancelled: std::mem::transmute::<*mut c_void, CancelledFn>(k),
            device_count: std::mem::transmute::<*mut c_void, DeviceCountFn>(d),
        })
    }
}

/// The extension, or `HCCL_E_RUNTIME` when the ACL simulator cannot be found.
pub(crate) fn hooks() -> Result<&'static Hooks, HcclResult> {
    static H: OnceLock<Option<Hooks>> = OnceLock::new();
    H.get_or_init(resolve).as_ref().ok_or(HCCL_E_RUNTIME)
}

/// Whether the running host task whose token is `token` must stop.
pub(crate) fn cancelled(token: *const c_void) -> bool {
    match hooks() {
        // SAFETY: `token` is the token of the host task running on this thread.
        Ok(h) => unsafe { (h.cancelled)(token) != 0 },
        Err(_) => true,
    }
}

/// The number of devices of the ACL simulator (`HCCL_E_RUNTIME` when it cannot say).
pub(crate) fn device_count() -> Result<u32, HcclResult> {
    let h = hooks()?;
    let mut n = 0u32;
    // SAFETY: a live local for the out-parameter.
    match unsafe { (h.device_count)(&mut n) } {
        0 => Ok(n),
        _ => Err(HCCL_E_RUNTIME),
    }
}
