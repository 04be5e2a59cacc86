//! The raw driver side shared by `launch_profile` and `launch_count`: the test kernels' PTX,
//! their loading and their `cuLaunchKernel`.

use std::ffi::c_void;
use std::ptr;

use cudarc::driver::sys;

/// An empty kernel without parameters.
pub(crate) const EMPTY_PTX: &str = ".version 8.0\n.target sm_90\n.address_size 64\n\n\
.visible .entry xs_prof_empty()\n{\n    ret;\n}\n\0";

/// An empty kernel of three parameters (`.u64`, `.u32`, `.f32`).
pub(crate) const ARGS3_PTX: &str = ".version 8.0\n.target sm_90\n.address_size 64\n\n\
.visible .entry xs_prof_args3(.param .u64 xs_prof_args3_p, .param .u32 xs_prof_args3_n, \
.param .f32 xs_prof_args3_x)\n{\n    ret;\n}\n\0";

/// `Err` naming `what` unless `r` is `CUDA_SUCCESS`.
pub(crate) fn ck(r: sys::CUresult, what: &str) -> Result<(), String> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what}: {r:?}"))
    }
}

/// Loads `ptx_nul` (NUL-terminated) with `cuModuleLoadDataEx` and returns its function `name`.
pub(crate) fn raw_function(
    ptx_nul: &str,
    name: &std::ffi::CStr,
) -> Result<sys::CUfunction, String> {
    let mut m = ptr::null_mut();
    // SAFETY: `ptx_nul` is NUL-terminated PTX text; valid out-pointer; no JIT options (null
    // arrays of length 0); the context is current.
    let r = unsafe {
        sys::cuModuleLoadDataEx(
            &mut m,
            ptx_nul.as_ptr() as *const c_void,
            0,
            ptr::null_mut(),
            ptr::null_mut(),
        )
    };
    ck(r, "cuModuleLoadDataEx")?;
    let mut f = ptr::null_mut();
    // SAFETY: `m` is a loaded module (kept for the life of the process); `name` is
    // NUL-terminated; valid out-pointer.
    let r = unsafe { sys::cuModuleGetFunction(&mut f, m, name.as_ptr()) };
    ck(r, "cuModuleGetFunction")?;
    Ok(f)
}

/// `cuLaunchKernel` of `f` on one thread with `params` (null for none).
pub(crate) fn raw_launch(f: sys::CUfunction, s: sys::CUstream, params: *mut *mut c_void) {
    // SAFETY: callers pass a function whose parameter list `params` matches (null for a
    // kernel without parameters), pointing at live values the driver copies during the call;
    // `s` is a live stream of the current context.
    let r = unsafe { sys::cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, ptr::null_mut()) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuLaunchKernel");
}
