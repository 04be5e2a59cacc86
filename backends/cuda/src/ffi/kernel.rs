//! Modules and kernels: `cuModuleLoadData`, `cuModuleGetFunction`, `cuLaunchKernel` of the
//! built-in PTX kernels.

use std::ffi::{c_void, CStr};
use std::ptr;

use cudarc::driver::sys;

use super::{ok, CuFunction, CuModule, CuResult, CuStream};

/// `cuModuleLoadData` of NUL-terminated PTX text.
pub(crate) fn module_load_data(ptx: &CStr) -> CuResult<CuModule> {
    let mut m = ptr::null_mut();
    // SAFETY: `ptx` is NUL-terminated text, valid during the call; context bound.
    ok(unsafe { sys::cuModuleLoadData(&mut m, ptx.as_ptr() as *const c_void) })?;
    Ok(CuModule(m))
}

/// `cuModuleGetFunction`.
pub(crate) fn module_get_function(m: CuModule, name: &CStr) -> CuResult<CuFunction> {
    let mut f = ptr::null_mut();
    // SAFETY: valid out-pointer; `m` live; `name` NUL-terminated.
    ok(unsafe { sys::cuModuleGetFunction(&mut f, m.0, name.as_ptr()) })?;
    Ok(CuFunction(f))
}

/// `cuModuleUnload`.
pub(crate) fn module_unload(m: CuModule) -> CuResult<()> {
    // SAFETY: owned, never used again.
    ok(unsafe { sys::cuModuleUnload(m.0) })
}

fn launch(
    f: CuFunction,
    s: CuStream,
    grid: u32,
    block: u32,
    params: &mut [*mut c_void],
) -> CuResult<()> {
    // SAFETY: `params` points to one pointer per kernel parameter, each pointing to a value
    // of the parameter's PTX type, all alive during the call (the driver copies them).
    ok(unsafe {
        sys::cuLaunchKernel(
            f.0,
            grid,
            1,
            1,
            block,
            1,
            1,
            0,
            s.0,
            params.as_mut_ptr(),
            ptr::null_mut(),
        )
    })
}

/// Launches `xs_delay(u64 ns)` on one thread.
pub(crate) fn launch_delay(f: CuFunction, s: CuStream, ns: u64) -> CuResult<()> {
    let mut ns = ns;
    launch(f, s, 1, 1, &mut [&mut ns as *mut u64 as *mut c_void])
}

/// Launches `xs_lcg(u32* data, u64 words, u32 rounds)`.
pub(crate) fn launch_lcg(
    f: CuFunction,
    s: CuStream,
    grid: u32,
    block: u32,
    data: u64,
    words: u64,
    rounds: u32,
) -> CuResult<()> {
    let (mut d, mut w, mut r) = (data, words, rounds);
    launch(
        f,
        s,
        grid,
        block,
        &mut [
            &mut d as *mut u64 as *mut c_void,
            &mut w as *mut u64 as *mut c_void,
            &mut r as *mut u32 as *mut c_void,
        ],
    )
}

/// Launches `xs_fault()` (a store to address 0).
pub(crate) fn launch_fault(f: CuFunction, s: CuStream) -> CuResult<()> {
    launch(f, s, 1, 1, &mut [])
}
