//! System information and the synchronous memset: `aclsysGetVersionStr` /
//! `aclsysGetVersionNum` (the CANN package version), `aclrtGetRunMode`, `aclrtGetSocName`,
//! `aclrtGetResInCurrentThread`, `aclrtGetErrorVerbose`, `aclrtMemset`, `aclDataTypeSize`.
//! Each is optional: `None` (or [`Error::Unsupported`]) where the runtime does not export it.

use std::ffi::{c_char, CStr};

use xstream_core::{Error, Result};

use crate::sys::{aclrtErrorInfo, consts, AclFns, DevPtr, PackageVersion};

/// The package xstream reads the version of: the runtime itself.
pub(crate) const RUNTIME_PACKAGE: &str = "runtime";

/// The `runtime` package version, when the runtime exports both version calls and the string
/// call succeeds (the number is `None` where the runtime cannot parse the text).
pub(crate) fn package_version(t: &AclFns) -> Option<PackageVersion> {
    let (Some(s), Some(n)) = (t.aclsysGetVersionStr, t.aclsysGetVersionNum) else {
        return None;
    };
    let mut name = *b"runtime\0";
    let mut buf = [0 as c_char; consts::ACL_PKG_VERSION_MAX_SIZE];
    // SAFETY: a NUL-terminated name and a buffer of ACL_PKG_VERSION_MAX_SIZE bytes, the size
    // the prototype `aclError aclsysGetVersionStr(char*, char*)` writes at most.
    let code = unsafe { s(name.as_mut_ptr().cast(), buf.as_mut_ptr()) };
    if code != 0 {
        return None;
    }
    // SAFETY: on success the runtime wrote a NUL-terminated string into `buf` (the last byte
    // is still the zero it was initialised with even if it did not).
    let text = unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let mut num = 0i32;
    // SAFETY: the same name; one out-pointer to a live local.
    let code = unsafe { n(name.as_mut_ptr().cast(), &mut num) };
    Some(PackageVersion {
        package: RUNTIME_PACKAGE,
        text,
        number: (code == 0).then_some(num),
    })
}

/// `aclrtGetRunMode`: `Some(true)` for a host with the NPU attached (`ACL_HOST`),
/// `Some(false)` on the device's own CPU.
pub(crate) fn host_run_mode(t: &AclFns) -> Option<bool> {
    let f = t.aclrtGetRunMode?;
    let mut m = -1i32;
    // SAFETY: one out-pointer to a live local.
    let code = unsafe { f(&mut m) };
    (code == 0).then_some(m == consts::ACL_HOST)
}

/// `aclrtGetSocName`, when exported and not NULL.
pub(crate) fn soc_name(t: &AclFns) -> Option<String> {
    let f = t.aclrtGetSocName?;
    // SAFETY: no arguments; NULL or a NUL-terminated string owned by the runtime, copied at
    // once.
    let p = unsafe { f() };
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated per the ACL contract.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    (!s.is_empty()).then_some(s)
}

/// `aclrtGetResInCurrentThread` for cube and vector cores (the current context's device).
pub(crate) fn cores(t: &AclFns) -> Option<(u32, u32)> {
    let f = t.aclrtGetResInCurrentThread?;
    let get = |kind| {
        let mut v = 0u32;
        // SAFETY: one out-pointer to a live local; `kind` is a valid aclrtDevResLimitType.
        (unsafe { f(kind, &mut v) } == 0).then_some(v)
    };
    Some((
        get(consts::ACL_RT_DEV_RES_CUBE_CORE)?,
        get(consts::ACL_RT_DEV_RES_VECTOR_CORE)?,
    ))
}

/// The fault `aclrtGetErrorVerbose` reports for `device`, in words; `None` when it reports
/// none, fails, or is not exported.
pub(crate) fn fault_detail(t: &AclFns, device: i32) -> Option<String> {
    let f = t.aclrtGetErrorVerbose?;
    let mut info = aclrtErrorInfo {
        tryRepair: 0,
        hasDetail: 0,
        reserved: [0; 2],
        errorType: 0,
        detail: [0; 321],
    };
    // SAFETY: a zeroed, correctly sized and aligned aclrtErrorInfo (layout asserted in sys).
    if unsafe { f(device, &mut info) } != 0 || info.errorType == 0 {
        return None;
    }
    let kind = match info.errorType {
        1 => "memory (uncorrectable HBM error)".to_string(),
        2 => "L2 cache".to_string(),
        3 => "AI Core".to_string(),
        4 => "link".to_string(),
        5 => "L3 port".to_string(),
        0xFFFF => "other".to_string(),
        n => format!("type {n}"),
    };
    let mut s = format!("device {device} fault reported by aclrtGetErrorVerbose: {kind}");
    if info.hasDetail == 1 && info.errorType == 1 {
        s.push_str(&format!(", {} affected range(s)", info.detail[0].min(20)));
    }
    if info.tryRepair == 1 {
        s.push_str(", repairable (aclrtRepairError)");
    }
    Some(s)
}

/// Adds [`fault_detail`] of the device named by the matching device exception to a sticky
/// error's message.
pub(crate) fn annotate(t: &AclFns, mut e: Error) -> Error {
    if !e.is_sticky() || t.aclrtGetErrorVerbose.is_none() {
        return e;
    }
    let (Error::DeviceLost(n) | Error::Native(n)) = &mut e else {
        return e;
    };
    let Some(x) = super::exception::latest(n.code).filter(|x| x.device != u32::MAX) else {
        return e;
    };
    let Some(detail) = fault_detail(t, x.device as i32) else {
        return e;
    };
    n.message = Some(match n.message.take() {
        Some(m) => format!("{m}; {detail}"),
        None => detail,
    });
    e
}

/// `aclrtMemset`: sets `len` bytes at `p` to `value` before returning (the current context
/// must own `p`).
pub(crate) fn memset(t: &AclFns, p: DevPtr, len: usize, value: u8) -> Result<()> {
    let f = super::opt(t.aclrtMemset, "aclrtMemset")?;
    // SAFETY: `p` is a live device allocation of at least `len` bytes (caller contract).
    super::check(t, "aclrtMemset", unsafe {
        f(p.0, len, i32::from(value), len)
    })
}

/// `aclrtGetDeviceSatMode`: the process's `aclrtFloatOverflowMode`.
pub(crate) fn sat_mode(t: &AclFns) -> Result<i32> {
    let f = super::opt(t.aclrtGetDeviceSatMode, "aclrtGetDeviceSatMode")?;
    let mut m = -1;
    // SAFETY: `m` is a valid out-pointer for the call.
    super::check(t, "aclrtGetDeviceSatMode", unsafe { f(&mut m) })?;
    Ok(m)
}

/// `aclrtSetDeviceSatMode(mode)`.
pub(crate) fn set_sat_mode(t: &AclFns, mode: i32) -> Result<()> {
    let f = super::opt(t.aclrtSetDeviceSatMode, "aclrtSetDeviceSatMode")?;
    // SAFETY: no pointers; the runtime checks the value.
    super::check(t, "aclrtSetDeviceSatMode", unsafe { f(mode) })
}

/// `aclGetCannAttribute(attr)`: whether the installed CANN has the attribute (`aclCannAttr`).
pub(crate) fn cann_attribute(t: &AclFns, attr: i32) -> Result<bool> {
    let f = super::opt(t.aclGetCannAttribute, "aclGetCannAttribute")?;
    let mut v = -1;
    // SAFETY: `v` is a valid out-pointer for the call.
    super::check(t, "aclGetCannAttribute", unsafe { f(attr, &mut v) })?;
    Ok(v == 1)
}

/// `aclGetCannAttributeList`: the available attributes (`aclCannAttr` values), copied out of
/// the runtime's array.
pub(crate) fn cann_attribute_list(t: &AclFns) -> Result<Vec<i32>> {
    let f = super::opt(t.aclGetCannAttributeList, "aclGetCannAttributeList")?;
    let mut p: *const i32 = std::ptr::null();
    let mut n = 0usize;
    // SAFETY: both are valid out-pointers for the call.
    super::check(t, "aclGetCannAttributeList", unsafe { f(&mut p, &mut n) })?;
    if n == 0 {
        return Ok(Vec::new());
    }
    if p.is_null() || n > 1024 {
        return Err(Error::invalid(format!(
            "aclGetCannAttributeList answered {n} attribute(s) at {p:?}"
        )));
    }
    // SAFETY: the runtime returned a pointer to its own array of `n` `aclCannAttr` values,
    // which lives for the process (a static array in the runtime); checked non-NULL above.
    Ok(unsafe { std::slice::from_raw_parts(p, n) }.to_vec())
}

/// `aclrtGetDeviceCapability(device, feature)`: the runtime's answer (1 supported, 0 not).
pub(crate) fn device_capability(t: &AclFns, device: i32, feature: i32) -> Result<i32> {
    let f = super::opt(t.aclrtGetDeviceCapability, "aclrtGetDeviceCapability")?;
    let mut v = -1;
    // SAFETY: `v` is a valid out-pointer for the call.
    super::check(t, "aclrtGetDeviceCapability", unsafe {
        f(device, feature, &mut v)
    })?;
    Ok(v)
}

/// `aclDataTypeSize`, when exported.
pub(crate) fn data_type_size(t: &AclFns, acl_type: i32) -> Option<usize> {
    let f = t.aclDataTypeSize?;
    // SAFETY: no pointers; any value is accepted by the runtime.
    Some(unsafe { f(acl_type) })
}

/// `ACL_DEV_ATTR_AICORE_CORE_NUM` (`aclrtDevAttr`).
const ACL_DEV_ATTR_AICORE_CORE_NUM: i32 = 101;
/// `ACL_DDR_MEM` (`aclrtMemAttr`).
const ACL_DDR_MEM: i32 = 0;
/// `ACL_HBM_MEM` (`aclrtMemAttr`).
const ACL_HBM_MEM: i32 = 1;

/// `aclrtGetDeviceInfo(ACL_DEV_ATTR_AICORE_CORE_NUM)` of device `id`, when exported and
/// successful.
pub(crate) fn ai_cores(t: &AclFns, id: u32) -> Option<u32> {
    let f = t.aclrtGetDeviceInfo?;
    let mut v = 0i64;
    // SAFETY: one out-pointer to a live local.
    let code = unsafe { f(id, ACL_DEV_ATTR_AICORE_CORE_NUM, &mut v) };
    (code == 0).then(|| u32::try_from(v).ok()).flatten()
}

/// `aclrtGetMemInfo` of the current context's device: `(free, total)` of its HBM, or of its
/// DDR where it reports no HBM. `None` when not exported; the runtime's error otherwise.
pub(crate) fn mem_info(t: &AclFns) -> Option<Result<(u64, u64)>> {
    let f = t.aclrtGetMemInfo?;
    let get = |attr| {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: two out-pointers to live locals.
        let code = unsafe { f(attr, &mut free, &mut total) };
        super::check(t, "aclrtGetMemInfo", code).map(|()| (free as u64, total as u64))
    };
    Some(match get(ACL_HBM_MEM) {
        Ok((_, 0)) | Err(_) => get(ACL_DDR_MEM),
        ok => ok,
    })
}

/// `aclrtDeviceGetUuid` of device `id`, when exported and successful.
pub(crate) fn uuid(t: &AclFns, id: i32) -> Option<[u8; 16]> {
    let f = t.aclrtDeviceGetUuid?;
    let mut u = [0u8; 16];
    // SAFETY: one out-pointer to 16 writable bytes (`aclrtUuid` is `char bytes[16]`).
    (unsafe { f(id, &mut u) } == 0).then_some(u)
}

/// `aclrtDeviceGetPCIBusId` of device `id`, when exported and successful.
pub(crate) fn pci_bus_id(t: &AclFns, id: i32) -> Option<String> {
    let f = t.aclrtDeviceGetPCIBusId?;
    let mut buf = [0 as c_char; 64];
    // SAFETY: `buf` is writable for the length passed.
    if unsafe { f(id, buf.as_mut_ptr(), buf.len() as i32) } != 0 {
        return None;
    }
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    let s = String::from_utf8_lossy(&bytes).into_owned();
    (!s.is_empty()).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::c_void;

    extern "C" fn dummy() {}

    /// Reports a repairable memory fault with two ranges on device 3, nothing elsewhere.
    unsafe extern "C" fn memory_fault(device: i32, info: *mut aclrtErrorInfo) -> i32 {
        if device == 3 {
            // SAFETY: the caller passes a valid aclrtErrorInfo.
            unsafe {
                (*info).errorType = 1;
                (*info).hasDetail = 1;
                (*info).tryRepair = 1;
                (*info).detail[0] = 2;
            }
        }
        0
    }

    #[test]
    fn fault_detail_in_words() {
        let addr = dummy as *const () as *mut c_void;
        let verbose = memory_fault as *const () as *mut c_void;
        // SAFETY: only aclrtGetErrorVerbose is called, and it has the declared prototype.
        let t = unsafe {
            AclFns::load_with("fake", |n: &CStr| {
                if n == c"aclrtGetErrorVerbose" {
                    verbose
                } else if AclFns::REQUIRED.contains(&n) {
                    addr
                } else {
                    std::ptr::null_mut()
                }
            })
        }
        .unwrap();
        assert_eq!(
            fault_detail(&t, 3).as_deref(),
            Some(
                "device 3 fault reported by aclrtGetErrorVerbose: memory (uncorrectable HBM \
                 error), 2 affected range(s), repairable (aclrtRepairError)"
            )
        );
        assert_eq!(fault_detail(&t, 0), None);
    }
}
