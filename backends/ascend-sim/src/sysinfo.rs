//! System information: the run mode (`aclrtGetRunMode`), the installed CANN package versions
//! (`aclsysGetVersionStr` / `aclsysGetVersionNum`), the SoC name (`aclrtGetSocName`), the
//! cores the calling thread may use (`aclrtGetResInCurrentThread`), the device's fault
//! detail (`aclrtGetErrorVerbose`), and the device facts of `aclrtGetDeviceInfo`,
//! `aclrtGetMemInfo`, `aclrtDeviceGetUuid` and `aclrtDeviceGetPCIBusId` (plausible fixed values
//! per simulated product, listed in `docs/simulators.md`; the free memory is the total less the
//! simulator's live `aclrtMalloc` blocks).
//!
//! The rules follow the CANN runtime's source (`hicann/runtime`): `src/acl/aclrt_impl/device.cpp`
//! (run mode, resources), `src/acl/aclrt_impl/acl.cpp` (package versions),
//! `src/acl/aclrt_impl/acl_rt_impl_base.cpp` (SoC name), `src/acl/aclrt_impl/event.cpp` and
//! `src/runtime/api/api_c_device.cc`, `src/runtime/api/impl/api_error.cc`,
//! `src/runtime/api/impl/api_impl.cc` (error detail, resources). The package versions are read
//! from the same files the runtime reads, so a test (or a user) controls them through
//! `ASCEND_HOME_PATH` exactly as on a CANN install:
//! `$ASCEND_HOME_PATH/share/info/<package>/version.info`, first line containing `Version=`
//! (the driver and firmware packages: the directory named by `Driver_Install_Path_Param=` /
//! `Firmware_Install_Path_Param=` in `/etc/ascend_install.info`).

use crate::codes::*;
use crate::config::{product, Product};
use crate::device::*;
use crate::error::*;
use crate::faults::count_call;
use std::ffi::{c_char, CStr};
use std::panic::catch_unwind;

/// `ACL_ERROR_INVALID_FILE`: a version file is missing or has no version.
pub const ACL_ERROR_INVALID_FILE: i32 = 100_003;
/// `ACL_ERROR_INTERNAL_ERROR`: a version that does not parse, or one too long to return.
pub const ACL_ERROR_INTERNAL_ERROR: i32 = 500_000;
/// `ACL_ERROR_RT_DEVICE_ID` (107001, `ACL_ERROR_RT_INVALID_DEVICEID`): see [`ACL_ERROR_RT_INVALID_DEVICEID`].
const DEVICE_ID: i32 = ACL_ERROR_RT_INVALID_DEVICEID;
/// `ACL_PKG_VERSION_MAX_SIZE`: the size of the buffer `aclsysGetVersionStr` writes.
pub const ACL_PKG_VERSION_MAX_SIZE: usize = 128;
/// `ACL_DEVICE` (`aclrtRunMode`): the program runs on the device's own CPU.
pub const ACL_DEVICE: i32 = 0;
/// `ACL_HOST` (`aclrtRunMode`): the program runs on a host with the NPU attached.
pub const ACL_HOST: i32 = 1;
/// `ACL_RT_DEV_RES_CUBE_CORE` (`aclrtDevResLimitType`).
pub const ACL_RT_DEV_RES_CUBE_CORE: i32 = 0;
/// `ACL_RT_DEV_RES_VECTOR_CORE` (`aclrtDevResLimitType`).
pub const ACL_RT_DEV_RES_VECTOR_CORE: i32 = 1;
/// `ACL_RT_NO_ERROR` (`aclrtErrorType`).
pub const ACL_RT_NO_ERROR: i32 = 0;

/// The SoC the simulated product stands for, with its AI (cube) and vector core counts as the
/// runtime's platform configuration lists them (`src/platform/platform_config/cann/*.ini`).
pub(crate) fn soc() -> (&'static CStr, u32, u32) {
    match product() {
        Product::A2 => (c"Ascend910B1", 24, 48),
        Product::P310 => (c"Ascend310P3", 8, 7),
        Product::T910 => (c"Ascend910A", 32, 0),
    }
}

/// `aclError aclrtGetRunMode(aclrtRunMode* runMode)`: `ACL_HOST` (1), the simulator stands for
/// an NPU attached to the host. NULL → 100000. Needs no `aclInit`.
///
/// # Safety
/// `run_mode` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetRunMode(run_mode: *mut i32) -> i32 {
    ffi("aclrtGetRunMode", false, || {
        // SAFETY: put checks NULL; the caller guarantees validity otherwise.
        unsafe { put(run_mode, ACL_HOST) }
    })
}

/// `const char* aclrtGetSocName()`: the simulated product's SoC (`Ascend910B1` for `a2`,
/// `Ascend310P3` for `310p`, `Ascend910A` for `910`). Never NULL here.
///
/// # Safety
/// No pointer arguments; the result is a static string.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetSocName() -> *const c_char {
    count_call("aclrtGetSocName");
    catch_unwind(|| soc().0.as_ptr()).unwrap_or(std::ptr::null())
}

/// `aclError aclrtGetResInCurrentThread(aclrtDevResLimitType type, uint32_t* value)`: the
/// cube (0) or vector (1) cores of the current context's device (the simulator has no
/// per-device or per-stream limits, so the whole device). NULL `value` → 100000; a type other
/// than 0 or 1 → 107000; no current context → 107002.
///
/// # Safety
/// `value` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetResInCurrentThread(kind: i32, value: *mut u32) -> i32 {
    ffi("aclrtGetResInCurrentThread", false, || {
        non_null(value, "value")?;
        if kind as u32 >= 2 {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("type {kind} out of range [0, 2)"),
            );
        }
        cur_ctx()?;
        let (_, cube, vector) = soc();
        let n = if kind == ACL_RT_DEV_RES_CUBE_CORE {
            cube
        } else {
            vector
        };
        // SAFETY: checked non-NULL; caller contract.
        unsafe { put(value, n) }
    })
}

/// The leading fields of C `aclrtErrorInfo` (`acl_rt.h`): `uint8_t tryRepair; uint8_t
/// hasDetail; uint8_t reserved[2]; aclrtErrorType errorType;` then the `detail` union (8-byte
/// aligned, 2568 bytes), whose first four bytes are its `aclrtAicoreErrorType aicoreErrType`
/// member. The whole struct is 2576 bytes; only these fields are written.
#[repr(C)]
struct ErrorInfoHead {
    try_repair: u8,
    has_detail: u8,
    reserved: [u8; 2],
    error_type: i32,
    aicore_err_type: i32,
}

/// `aclError aclrtGetErrorVerbose(int32_t deviceId, aclrtErrorInfo* errorInfo)`: the fault
/// the device has recorded. The simulator models no memory (HBM UCE) or link fault, the only
/// kinds the runtime reports, so the answer is always "no error": `tryRepair` 0, `hasDetail` 0,
/// `errorType` `ACL_RT_NO_ERROR`, `detail.aicoreErrType` 0; the other bytes are not written.
/// NULL `errorInfo` → 100000; products other than `a2` (the runtime enables the call on
/// 910B/910C-class and newer chips only) → 207000; a device id outside `[0, count)` → 107001.
/// Needs no `aclInit`.
///
/// # Safety
/// `error_info` must be NULL or point to a writable `aclrtErrorInfo`.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetErrorVerbose(device_id: i32, error_info: *mut u8) -> i32 {
    ffi("aclrtGetErrorVerbose", false, || {
        non_null(error_info, "errorInfo")?;
        if product() != Product::A2 {
            return err(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                "this chip does not report error detail",
            );
        }
        if device_id as u32 >= crate::config::device_count() {
            return err(DEVICE_ID, format!("invalid device id {device_id}"));
        }
        let p = error_info.cast::<ErrorInfoHead>();
        // SAFETY: non-NULL; the caller passes an `aclrtErrorInfo`, which is 8-aligned and
        // larger than the head; each field is written in place, the rest left alone.
        unsafe {
            std::ptr::addr_of_mut!((*p).try_repair).write(0);
            std::ptr::addr_of_mut!((*p).has_detail).write(0);
            std::ptr::addr_of_mut!((*p).error_type).write(ACL_RT_NO_ERROR);
            std::ptr::addr_of_mut!((*p).aicore_err_type).write(0);
        }
        Ok(())
    })
}

/// Reads a whole file as bytes (`None` when it cannot be opened or read).
fn read(path: &[u8]) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    std::fs::read(std::ffi::OsStr::from_bytes(path)).ok()
}

/// The text after the first occurrence of `key` on the first line that has it.
fn after_key(text: &[u8], key: &[u8]) -> Option<Vec<u8>> {
    text.split(|&b| b == b'\n').find_map(|line| {
        line.windows(key.len())
            .position(|w| w == key)
            .map(|at| line[at + key.len()..].to_vec())
    })
}

/// Strips spaces, tabs, CR and LF at both ends; a string of only those is returned unchanged
/// (as the runtime's trim does).
fn trim(s: &[u8]) -> Vec<u8> {
    let ws = |b: &u8| b" \t\r\n".contains(b);
    match (
        s.iter().position(|b| !ws(b)),
        s.iter().rposition(|b| !ws(b)),
    ) {
        (Some(a), Some(z)) => s[a..=z].to_vec(),
        _ => s.to_vec(),
    }
}

/// The version text of one package name, or the runtime's code.
fn version_of(pkg: &[u8]) -> R<Vec<u8>> {
    let full = if pkg == b"driver" || pkg == b"firmware" {
        let key: &[u8] = if pkg == b"driver" {
            b"Driver_Install_Path_Param="
        } else {
            b"Firmware_Install_Path_Param="
        };
        let info = read(b"/etc/ascend_install.info")
            .ok_or_else(|| fail(ACL_ERROR_INVALID_FILE, "no /etc/ascend_install.info"))?;
        let dir = after_key(&info, key)
            .filter(|d| !d.is_empty())
            .ok_or_else(|| fail(ACL_ERROR_INVALID_FILE, "no package path"))?;
        [&dir[..], b"/", pkg, b"/version.info"].concat()
    } else {
        let home = std::env::var_os("ASCEND_HOME_PATH")
            .ok_or_else(|| fail(ACL_ERROR_INVALID_FILE, "ASCEND_HOME_PATH is not set"))?;
        let real = std::fs::canonicalize(&home)
            .map_err(|_| fail(ACL_ERROR_INVALID_FILE, "ASCEND_HOME_PATH does not exist"))?;
        use std::os::unix::ffi::OsStrExt;
        [
            real.as_os_str().as_bytes(),
            b"/share/info/",
            pkg,
            b"/version.info",
        ]
        .concat()
    };
    let text = read(&full).ok_or_else(|| {
        fail(
            ACL_ERROR_INVALID_FILE,
            format!("version file {} not found", String::from_utf8_lossy(&full)),
        )
    })?;
    match after_key(&text, b"Version=").map(|v| trim(&v)) {
        Some(v) if !v.is_empty() => Ok(v),
        _ => err(ACL_ERROR_INVALID_FILE, "no Version= line"),
    }
}

/// The version of `pkg`, trying the name with `-` and `_` swapped when the first fails.
fn package_version(pkg: &[u8]) -> R<Vec<u8>> {
    let alt: Option<Vec<u8>> = if pkg.contains(&b'-') {
        Some(
            pkg.iter()
                .map(|&b| if b == b'-' { b'_' } else { b })
                .collect(),
        )
    } else if pkg.contains(&b'_') {
        Some(
            pkg.iter()
                .map(|&b| if b == b'_' { b'-' } else { b })
                .collect(),
        )
    } else {
        None
    };
    match (version_of(pkg), alt) {
        (Ok(v), _) => Ok(v),
        (Err(_), Some(a)) => version_of(&a),
        (Err(e), None) => Err(e),
    }
}

/// C++ `std::stoi` on `s`: leading white space, an optional sign, then at least one digit;
/// the value and the bytes consumed. `None` where `stoi` throws (no digits, out of range).
fn stoi(s: &[u8]) -> Option<(i32, usize)> {
    let mut i = 0;
    while i < s.len() && (s[i] == b' ' || (b'\t'..=b'\r').contains(&s[i])) {
        i += 1;
    }
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let start = i;
    let mut v: i64 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        v = v.checked_mul(10)?.checked_add(i64::from(s[i] - b'0'))?;
        if v > i64::from(u32::MAX) + 1 {
            return None;
        }
        i += 1;
    }
    if i == start {
        return None;
    }
    let v = if neg { -v } else { v };
    i32::try_from(v).ok().map(|v| (v, i))
}

/// An error value (for `ok_or_else`).
fn fail(code: i32, msg: impl Into<String>) -> AclErr {
    AclErr {
        code,
        msg: msg.into(),
    }
}

fn bad_version<T>(why: &str) -> R<T> {
    err(ACL_ERROR_INTERNAL_ERROR, why)
}

/// `major.minor.patch`: the weighted base value and where the patch digits end.
fn base_version(v: &[u8]) -> R<(i32, usize)> {
    let dot1 = match v.iter().position(|&b| b == b'.') {
        Some(d) if d > 0 => d,
        _ => return bad_version("missing major version"),
    };
    let dot2 = match v[dot1 + 1..].iter().position(|&b| b == b'.') {
        Some(d) if d > 0 => dot1 + 1 + d,
        _ => return bad_version("missing minor version"),
    };
    let start = dot2 + 1;
    let end = start + v[start..].iter().take_while(|b| b.is_ascii_digit()).count();
    if end == start {
        return bad_version("missing patch version");
    }
    let num = |s: &[u8]| stoi(s).map(|(n, _)| n);
    let (Some(a), Some(b), Some(c)) = (
        num(&v[..dot1]),
        num(&v[dot1 + 1..dot2]),
        num(&v[start..end]),
    ) else {
        return bad_version("version part is not a number");
    };
    let base = a
        .wrapping_mul(10_000_000)
        .wrapping_add(b.wrapping_mul(100_000))
        .wrapping_add(c.wrapping_mul(1_000));
    Ok((base, end))
}

/// The number after a prerelease keyword: empty is 0; else at most one `.` or `-`, then
/// digits to the end.
fn prerelease_number(s: &[u8]) -> Option<i32> {
    if s.is_empty() {
        return Some(0);
    }
    let mut digit = None;
    for (i, &b) in s.iter().enumerate() {
        if b.is_ascii_digit() {
            digit = Some(i);
            break;
        }
        if b != b'.' && b != b'-' {
            return None;
        }
    }
    let d = digit.filter(|&d| d <= 1)?;
    let (n, used) = stoi(&s[d..])?;
    (used == s.len() - d).then_some(n)
}

/// The adjustment of a prerelease suffix: alpha −300, beta −200, rc −100, plus its number.
fn prerelease(raw: &[u8]) -> R<i32> {
    let lower = raw.to_ascii_lowercase();
    let find = |k: &[u8]| lower.windows(k.len()).position(|w| w == k);
    let (at, len, weight) = if let Some(i) = find(b"alpha") {
        (i, 5, 300)
    } else if let Some(i) = find(b"beta") {
        (i, 4, 200)
    } else if let Some(i) = find(b"rc") {
        (i, 2, 100)
    } else {
        return bad_version("unknown version suffix");
    };
    if at > 1 {
        return bad_version("too many separators before the prerelease keyword");
    }
    match prerelease_number(&raw[at + len..]) {
        Some(n) => Ok(n.wrapping_sub(weight)),
        None => bad_version("bad prerelease number"),
    }
}

/// The runtime's version number of a version string: major × 10^7 + minor × 10^5 + patch ×
/// 10^3, minus 300 / 200 / 100 for an alpha / beta / rc suffix, plus the suffix's number.
///
/// # Errors
/// 500000 (`ACL_ERROR_INTERNAL_ERROR`) where the runtime cannot parse `v`.
pub fn version_number(v: &[u8]) -> Result<i32, i32> {
    version_number_r(v).map_err(|e| e.code)
}

fn version_number_r(v: &[u8]) -> R<i32> {
    let (base, end) = base_version(v)?;
    if end >= v.len() {
        return Ok(base);
    }
    Ok(base.wrapping_add(prerelease(&v[end..])?))
}

/// `aclError aclsysGetVersionStr(char* pkgName, char* versionStr)`: the `Version=` text of the
/// package's `version.info` (trimmed), copied into `versionStr` (which must hold
/// `ACL_PKG_VERSION_MAX_SIZE` = 128 bytes). NULL `versionStr`, then NULL `pkgName` → 100000; no
/// `ASCEND_HOME_PATH`, no file, or no `Version=` line → 100003; a version of 128 bytes or more
/// → 500000 with `versionStr[0]` set to NUL. A name with `-` is retried with `_` (and the
/// reverse). Needs no `aclInit`.
///
/// # Safety
/// `pkg_name` must be NULL or a C string; `version_str` NULL or valid for 128 bytes.
#[no_mangle]
pub unsafe extern "C" fn aclsysGetVersionStr(
    pkg_name: *mut c_char,
    version_str: *mut c_char,
) -> i32 {
    ffi("aclsysGetVersionStr", false, || {
        non_null(version_str, "versionStr")?;
        non_null(pkg_name, "pkgName")?;
        // SAFETY: non-NULL C string by contract.
        let pkg = unsafe { CStr::from_ptr(pkg_name) }.to_bytes().to_vec();
        let v = package_version(&pkg)?;
        let out = version_str.cast::<u8>();
        if v.len() >= ACL_PKG_VERSION_MAX_SIZE {
            // SAFETY: non-NULL, valid for 128 bytes by contract.
            unsafe { out.write(0) };
            return err(ACL_ERROR_INTERNAL_ERROR, "version longer than the buffer");
        }
        // SAFETY: v.len() + 1 <= 128 bytes, within the caller's buffer; no overlap (ours).
        unsafe {
            std::ptr::copy_nonoverlapping(v.as_ptr(), out, v.len());
            out.add(v.len()).write(0);
        }
        Ok(())
    })
}

/// `aclError aclsysGetVersionNum(char* pkgName, int32_t* versionNum)`: the package's version
/// as a number (see [`version_number`]; `8.5.0` is 80500000, `9.0.0-rc.1` is 89999901). NULL
/// `versionNum`, then NULL `pkgName` → 100000; file problems → 100003 (as
/// `aclsysGetVersionStr`); a version that does not parse (no `major.minor.patch`, an unknown
/// suffix) → 500000. Needs no `aclInit`.
///
/// # Safety
/// `pkg_name` must be NULL or a C string; `version_num` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclsysGetVersionNum(pkg_name: *mut c_char, version_num: *mut i32) -> i32 {
    ffi("aclsysGetVersionNum", false, || {
        non_null(version_num, "versionNum")?;
        non_null(pkg_name, "pkgName")?;
        // SAFETY: non-NULL C string by contract.
        let pkg = unsafe { CStr::from_ptr(pkg_name) }.to_bytes().to_vec();
        let v = package_version(&pkg)?;
        let n = version_number_r(&v)?;
        // SAFETY: checked non-NULL; caller contract.
        unsafe { put(version_num, n) }
    })
}

/// `ACL_DEV_ATTR_AICPU_CORE_NUM` (`aclrtDevAttr`).
pub const ACL_DEV_ATTR_AICPU_CORE_NUM: i32 = 1;
/// `ACL_DEV_ATTR_AICORE_CORE_NUM`.
pub const ACL_DEV_ATTR_AICORE_CORE_NUM: i32 = 101;
/// `ACL_DEV_ATTR_CUBE_CORE_NUM`.
pub const ACL_DEV_ATTR_CUBE_CORE_NUM: i32 = 102;
/// `ACL_DEV_ATTR_VECTOR_CORE_NUM`.
pub const ACL_DEV_ATTR_VECTOR_CORE_NUM: i32 = 201;
/// `ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE` (bytes).
pub const ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE: i32 = 301;
/// `ACL_DEV_ATTR_L2_CACHE_SIZE` (bytes).
pub const ACL_DEV_ATTR_L2_CACHE_SIZE: i32 = 302;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// The simulated product's device memory, L2 cache and AI CPU count (plausible values for the
/// chip, not measured on one).
fn product_memory() -> (u64, u64, i64) {
    match product() {
        Product::A2 => (64 * GIB, 192 * MIB, 6),
        Product::P310 => (24 * GIB, 96 * MIB, 8),
        Product::T910 => (32 * GIB, 32 * MIB, 14),
    }
}

/// Checks a device id against the simulated device count (107001 outside).
fn check_device(id: i64) -> R {
    if id < 0 || id >= i64::from(crate::config::device_count()) {
        return err(DEVICE_ID, format!("device id {id} is out of range"));
    }
    Ok(())
}

/// `aclError aclrtGetDeviceInfo(uint32_t deviceId, aclrtDevAttr attr, int64_t* value)`: the
/// core counts (1, 101, 102, 201) and memory sizes (301, 302) of the simulated product. NULL
/// `value` → 100000 (the ACL layer's check); a device id out of range → 107001; another
/// attribute of the header → 207000 (not simulated); an unknown one → 107000.
///
/// # Safety
/// `value` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDeviceInfo(device_id: u32, attr: i32, value: *mut i64) -> i32 {
    ffi("aclrtGetDeviceInfo", false, || {
        non_null(value, "value")?;
        check_device(i64::from(device_id))?;
        let (_, cube, vector) = soc();
        let (mem, l2, aicpu) = product_memory();
        let v: i64 = match attr {
            ACL_DEV_ATTR_AICPU_CORE_NUM => aicpu,
            ACL_DEV_ATTR_AICORE_CORE_NUM | ACL_DEV_ATTR_CUBE_CORE_NUM => i64::from(cube),
            ACL_DEV_ATTR_VECTOR_CORE_NUM => i64::from(vector),
            ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE => mem as i64,
            ACL_DEV_ATTR_L2_CACHE_SIZE => l2 as i64,
            202..=212 | 401..=409 | 501 | 601 => {
                return err(
                    ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                    format!("device attribute {attr} is not simulated"),
                )
            }
            _ => {
                return err(
                    ACL_ERROR_RT_PARAM_INVALID,
                    format!("unknown device attribute {attr}"),
                )
            }
        };
        // SAFETY: checked non-NULL; caller contract.
        unsafe { put(value, v) }
    })
}

/// `aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t* free, size_t* total)`: the current
/// context's device: `total` the product's memory, `free` the total less the live
/// `aclrtMalloc` blocks of that device. Every `aclrtMemAttr` (0..=17) reports the same pool.
/// NULL `free` or `total` → 100000; another attribute → 107000; no current context → 107002.
///
/// # Safety
/// `free` and `total` must be NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetMemInfo(attr: i32, free: *mut usize, total: *mut usize) -> i32 {
    ffi("aclrtGetMemInfo", false, || {
        non_null(free, "free")?;
        non_null(total, "total")?;
        if !(0..=17).contains(&attr) {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("memory attribute {attr} out of range [0, 17]"),
            );
        }
        let ctx = cur_ctx()?;
        let (mem, _, _) = product_memory();
        let used = crate::memory::live_device_bytes(ctx.device);
        // SAFETY: checked non-NULL; caller contract.
        unsafe { put(total, mem as usize) }?;
        // SAFETY: as above.
        unsafe { put(free, mem.saturating_sub(used) as usize) }
    })
}

/// `aclError aclrtDeviceGetUuid(int32_t deviceId, aclrtUuid* uuid)`: a fixed UUID per device,
/// `58 53 49 4d` (`XSIM`), eleven zero bytes, the device id in the last byte. NULL → 100000;
/// a device id out of range → 107001.
///
/// # Safety
/// `uuid` must be NULL or valid for a 16-byte write.
#[no_mangle]
pub unsafe extern "C" fn aclrtDeviceGetUuid(device_id: i32, uuid: *mut [u8; 16]) -> i32 {
    ffi("aclrtDeviceGetUuid", false, || {
        non_null(uuid, "uuid")?;
        check_device(i64::from(device_id))?;
        let mut u = [0u8; 16];
        u[..4].copy_from_slice(b"XSIM");
        u[15] = device_id as u8;
        // SAFETY: checked non-NULL; caller contract.
        unsafe { put(uuid, u) }
    })
}

/// `aclError aclrtDeviceGetPCIBusId(int32_t deviceId, char* pciBusId, int32_t len)`: a fixed
/// bus id per device, `0000:<0xc1 + id>:00.0`, NUL-terminated. NULL → 100000; a device id out
/// of range → 107001; `len` too small for the id and its NUL → 107000.
///
/// # Safety
/// `pci_bus_id` must be NULL or valid for `len` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn aclrtDeviceGetPCIBusId(
    device_id: i32,
    pci_bus_id: *mut c_char,
    len: i32,
) -> i32 {
    ffi("aclrtDeviceGetPCIBusId", false, || {
        non_null(pci_bus_id, "pciBusId")?;
        check_device(i64::from(device_id))?;
        let id = format!("0000:{:02x}:00.0\0", 0xc1 + device_id);
        if len < 0 || (len as usize) < id.len() {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("len {len} is below the {} bytes of the bus id", id.len()),
            );
        }
        // SAFETY: checked non-NULL; the caller promised `len` writable bytes, and `id` (with
        // its NUL) fits in them (checked).
        unsafe { std::ptr::copy_nonoverlapping(id.as_ptr(), pci_bus_id.cast::<u8>(), id.len()) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(s: &str) -> Result<i32, i32> {
        version_number(s.as_bytes())
    }

    #[test]
    fn version_numbers() {
        assert_eq!(num("8.5.0"), Ok(80_500_000));
        assert_eq!(num("9.1.2"), Ok(90_102_000));
        assert_eq!(num("8.5.0.alpha001"), Ok(80_499_701));
        assert_eq!(num("9.0.0-rc.1"), Ok(89_999_901));
        assert_eq!(num("9.0.0rc2"), Ok(89_999_902));
        assert_eq!(num("9.0.0-beta"), Ok(89_999_800));
        assert_eq!(num("9.0.0-RC3"), Ok(89_999_903));
        // Not major.minor.patch, or a suffix the runtime does not know.
        assert_eq!(num("8.0.RC3"), Err(500_000));
        assert_eq!(num("8.5"), Err(500_000));
        assert_eq!(num(".5.0"), Err(500_000));
        assert_eq!(num("8..0"), Err(500_000));
        assert_eq!(num("8.5.0.1"), Err(500_000));
        assert_eq!(num("8.5.0-xrc1"), Err(500_000));
        assert_eq!(num("8.5.0-rc1x"), Err(500_000));
        assert_eq!(num("8.5.0-rc..1"), Err(500_000));
        assert_eq!(num("x.5.0"), Err(500_000));
    }

    #[test]
    fn stoi_like_cpp() {
        assert_eq!(stoi(b" 12ab"), Some((12, 3)));
        assert_eq!(stoi(b"-3"), Some((-3, 2)));
        assert_eq!(stoi(b"ab"), None);
        assert_eq!(stoi(b"99999999999"), None);
    }

    #[test]
    fn trim_keeps_all_blank() {
        assert_eq!(trim(b"  9.1.0 \r"), b"9.1.0");
        assert_eq!(trim(b"   "), b"   ");
    }
}
