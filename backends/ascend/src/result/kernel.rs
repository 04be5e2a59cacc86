//! Kernel binaries and launches (`acl/acl_rt.h`, CANN 8.5 / 9.x): `aclrtBinaryLoadFromData`,
//! `aclrtBinaryGetFunction`, `aclrtBinaryUnLoad`, the argument list
//! (`aclrtKernelArgsInit` / `aclrtKernelArgsAppend` / `aclrtKernelArgsFinalize`) and
//! `aclrtLaunchKernelWithConfig`.

use std::ffi::c_void;
use std::ptr::{null, null_mut};

use xstream_core::module::ArgValue;
use xstream_core::{Error, FunctionName, Result};

use super::{check, opt};
use crate::sys::{
    aclrtLaunchKernelAttr, aclrtLaunchKernelCfg, consts, AclFns, RawBinary, RawFunction, RawStream,
};

/// Maps the runtime's "invalid parameter" (107000) of a kernel call to
/// [`Error::InvalidArgument`] with `what` and the vendor's code and message; other errors as
/// they are.
fn invalid_as_argument(e: Error, what: impl FnOnce() -> String) -> Error {
    match e.native() {
        Some(n) if n.code == i64::from(consts::ACL_ERROR_RT_PARAM_INVALID) => {
            Error::invalid(format!("{}: {e}", what()))
        }
        _ => e,
    }
}

/// Loads a kernel binary from memory for the current context's device (no load options).
pub(crate) fn load(t: &AclFns, data: &[u8]) -> Result<RawBinary> {
    let f = opt(t.aclrtBinaryLoadFromData, "aclrtBinaryLoadFromData")?;
    let mut h: *mut c_void = null_mut();
    // SAFETY: `data` is readable for its length during the call (the runtime copies what it
    // keeps); NULL options are allowed; `h` is a live local.
    let code = unsafe { f(data.as_ptr().cast(), data.len(), null(), &mut h) };
    check(t, "aclrtBinaryLoadFromData", code).map_err(|e| {
        invalid_as_argument(e, || {
            format!(
                "the runtime refused the kernel binary ({} bytes)",
                data.len()
            )
        })
    })?;
    Ok(RawBinary(h))
}

/// The function `name` of binary `b`.
pub(crate) fn get_function(
    t: &AclFns,
    b: RawBinary,
    name: &FunctionName<'_>,
) -> Result<RawFunction> {
    let f = opt(t.aclrtBinaryGetFunction, "aclrtBinaryGetFunction")?;
    let mut h: *mut c_void = null_mut();
    // SAFETY: `b` is a live binary handle; the name is NUL-terminated; `h` is a live local.
    let code = unsafe { f(b.0, name.as_c_str().as_ptr(), &mut h) };
    check(t, "aclrtBinaryGetFunction", code).map_err(|e| {
        invalid_as_argument(e, || {
            xstream_core::module::missing_function(name.as_str()).to_string()
        })
    })?;
    Ok(RawFunction(h))
}

/// Unloads binary `b` (its functions become invalid).
pub(crate) fn unload(t: &AclFns, b: RawBinary) -> Result<()> {
    let f = opt(t.aclrtBinaryUnLoad, "aclrtBinaryUnLoad")?;
    // SAFETY: `b` is a live binary handle that nothing uses any more.
    let code = unsafe { f(b.0) };
    check(t, "aclrtBinaryUnLoad", code)
}

/// Builds the calling thread's argument list for `func` from `params` (each appended as its
/// little-endian bytes, in order) and finalizes it; returns the list handle, valid until the
/// next `aclrtKernelArgsInit` on this thread.
fn build_args(t: &AclFns, func: RawFunction, params: &[ArgValue<'_>]) -> Result<*mut c_void> {
    let init = opt(t.aclrtKernelArgsInit, "aclrtKernelArgsInit")?;
    let append = opt(t.aclrtKernelArgsAppend, "aclrtKernelArgsAppend")?;
    let finalize = opt(t.aclrtKernelArgsFinalize, "aclrtKernelArgsFinalize")?;
    let mut args: *mut c_void = null_mut();
    // SAFETY: `func` is a live function handle; `args` is a live local.
    check(t, "aclrtKernelArgsInit", unsafe { init(func.0, &mut args) })?;
    for v in params {
        let bytes = v.as_bytes();
        let mut ph: *mut c_void = null_mut();
        // SAFETY: `args` is this thread's live list; `bytes` is `bytes.len()` readable bytes
        // that the runtime copies during the call (it never writes through the pointer, which
        // the prototype declares non-const); `ph` is a live local.
        let code = unsafe { append(args, bytes.as_ptr().cast_mut().cast(), bytes.len(), &mut ph) };
        check(t, "aclrtKernelArgsAppend", code)?;
    }
    // SAFETY: `args` is this thread's live list.
    check(t, "aclrtKernelArgsFinalize", unsafe { finalize(args) })?;
    Ok(args)
}

/// Launches `func` on `s` with `num_blocks` blocks, the arguments `params` (each one's bytes,
/// in order) and, when non-zero, a dynamic unified-buffer size.
pub(crate) fn launch(
    t: &AclFns,
    func: RawFunction,
    num_blocks: u32,
    s: RawStream,
    params: &[ArgValue<'_>],
    dyn_ubuf: u32,
) -> Result<()> {
    let f = opt(t.aclrtLaunchKernelWithConfig, "aclrtLaunchKernelWithConfig")?;
    let args = build_args(t, func, params)?;
    let mut attr = aclrtLaunchKernelAttr {
        id: consts::ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE,
        value: [dyn_ubuf, 0, 0, 0],
    };
    let mut cfg = aclrtLaunchKernelCfg {
        attrs: &mut attr,
        numAttrs: 1,
    };
    let cfg_ptr: *mut aclrtLaunchKernelCfg = if dyn_ubuf == 0 { null_mut() } else { &mut cfg };
    // SAFETY: `func` and `s` are live handles of the current context; `args` is the list just
    // finalized on this thread; `cfg_ptr` is NULL or points to locals live during the call;
    // `reserve` is NULL as required.
    let code = unsafe { f(func.0, num_blocks, s.0, cfg_ptr, args, null_mut()) };
    check(t, "aclrtLaunchKernelWithConfig", code)
}
