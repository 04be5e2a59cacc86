//! Modules and kernels: `cuModuleLoadData(Ex)`, `cuModuleGetFunction`, `cuFuncGetParamInfo`,
//! `cuFuncGetAttribute`, `cuLaunchKernel`.

use std::ffi::{c_void, CStr};
use std::ptr;

use cudarc::driver::sys;

use super::{ok, CheckedImage, CuFunction, CuModule, CuResult, CuStream};

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

/// Launches `xs_fault()` (a store to address 0; no parameters).
pub(crate) fn launch_fault(f: CuFunction, s: CuStream) -> CuResult<()> {
    // SAFETY: `xs_fault` takes no parameter, so a null parameter array is valid.
    ok(unsafe {
        sys::cuLaunchKernel(
            f.0,
            1,
            1,
            1,
            1,
            1,
            1,
            0,
            s.0,
            ptr::null_mut(),
            ptr::null_mut(),
        )
    })
}

/// `cuModuleLoadDataEx` of NUL-terminated PTX text with an error-log buffer (see
/// [`load_ex`]).
pub(crate) fn module_load_ptx(
    ptx: &CStr,
    log: &mut [u8],
) -> Result<CuModule, (super::Code, usize)> {
    // SAFETY: NUL-terminated text, valid during the call.
    unsafe { load_ex(ptx.as_ptr().cast(), log) }
}

/// `cuModuleLoadDataEx` of a cubin/fatbin image whose headers were checked to describe only
/// bytes inside it (see [`load_ex`]).
pub(crate) fn module_load_image(
    image: &CheckedImage,
    log: &mut [u8],
) -> Result<CuModule, (super::Code, usize)> {
    // SAFETY: `CheckedImage` holds an 8-byte-aligned copy whose headers point only inside
    // it (checked by `CheckedImage::new`), valid during the call.
    unsafe { load_ex(image.as_ptr(), log) }
}

/// `cuModuleLoadDataEx` of `image` with an error-log buffer: on failure, the code and the
/// bytes of `log` the JIT wrote (without the trailing NUL).
///
/// # Safety
/// `image` must point to NUL-terminated PTX text, or to a complete cubin/fatbin image whose
/// headers describe only bytes inside it; it must stay valid during the call. The context of
/// the module must be current.
unsafe fn load_ex(image: *const c_void, log: &mut [u8]) -> Result<CuModule, (super::Code, usize)> {
    let mut m = ptr::null_mut();
    let mut opts = [
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    let mut vals: [*mut c_void; 2] = [log.as_mut_ptr().cast(), log.len() as *mut c_void];
    // SAFETY: the caller guarantees `image`; `opts`/`vals` are two options with matching
    // values: a writable log buffer of `log.len()` bytes and its size (an integer passed in
    // the pointer slot, as the driver API specifies; the driver writes back the bytes used).
    let r = unsafe {
        sys::cuModuleLoadDataEx(
            &mut m,
            image,
            opts.len() as u32,
            opts.as_mut_ptr(),
            vals.as_mut_ptr(),
        )
    };
    match ok(r) {
        Ok(()) => Ok(CuModule(m)),
        Err(c) => {
            let used = (vals[1] as usize).min(log.len());
            let used = log[..used].iter().position(|&b| b == 0).unwrap_or(used);
            Err((c, used))
        }
    }
}

/// `cuFuncGetParamInfo`: the offset and size of parameter `index`
/// (`CUDA_ERROR_INVALID_VALUE` past the last one).
pub(crate) fn func_param_info(f: CuFunction, index: usize) -> CuResult<(usize, usize)> {
    let (mut off, mut size) = (0usize, 0usize);
    // SAFETY: valid out-pointers; `f` is a live function handle.
    ok(unsafe { sys::cuFuncGetParamInfo(f.0, index, &mut off, &mut size) })?;
    Ok((off, size))
}

/// `cuFuncGetAttribute`.
pub(crate) fn func_attribute(f: CuFunction, attr: sys::CUfunction_attribute) -> CuResult<i32> {
    let mut v = 0;
    // SAFETY: valid out-pointer; `f` is a live function handle.
    ok(unsafe { sys::cuFuncGetAttribute(&mut v, attr, f.0) })?;
    Ok(v)
}

/// Parameters kept inline (on the stack) by [`launch_kernel`]; more take one allocation.
pub(crate) const INLINE_PARAMS: usize = 32;

/// A function with its parameter sizes as the driver reports them (`cuFuncGetParamInfo`):
/// the only way to launch one, so that every launch passes exactly one value of the right
/// size per parameter.
#[derive(Debug, Clone)]
pub(crate) struct KernelLayout {
    f: CuFunction,
    sizes: Box<[usize]>,
}

impl KernelLayout {
    /// Reads the layout of `f` (at most `max` parameters). `Ok(None)` when the driver cannot
    /// report it (`CUDA_ERROR_NOT_SUPPORTED`).
    pub(crate) fn read(f: CuFunction, max: usize) -> CuResult<Option<Self>> {
        let mut sizes = Vec::new();
        for i in 0..=max {
            match func_param_info(f, i) {
                Ok((_, size)) => sizes.push(size),
                // Past the last parameter.
                Err(1) => break,
                Err(801) => return Ok(None),
                Err(c) => return Err(c),
            }
        }
        Ok(Some(Self {
            f,
            sizes: sizes.into(),
        }))
    }

    /// The layout of a function whose parameters xstream wrote itself (the builtin PTX), for
    /// a driver that cannot report it. Only for xstream's own kernels: the sizes must be the
    /// kernel's real parameters, since launches rely on them.
    pub(crate) fn builtin(f: CuFunction, sizes: &[usize]) -> Self {
        Self {
            f,
            sizes: sizes.into(),
        }
    }

    /// The parameter sizes in bytes.
    pub(crate) fn sizes(&self) -> &[usize] {
        &self.sizes
    }
}

/// `cuLaunchKernel` of `k` with three-dimensional grid and block and dynamic shared memory;
/// `values[i]` is parameter `i` as little-endian bytes. `CUDA_ERROR_INVALID_VALUE` when the
/// values do not match the layout (count, or a parameter above 8 bytes); no allocation for
/// up to [`INLINE_PARAMS`] parameters.
pub(crate) fn launch_kernel(
    k: &KernelLayout,
    s: CuStream,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem: u32,
    values: &mut [[u8; 8]],
) -> CuResult<()> {
    if values.len() != k.sizes.len() || k.sizes.iter().any(|&n| n > 8) {
        return Err(1);
    }
    let mut inline = [ptr::null_mut::<c_void>(); INLINE_PARAMS];
    let mut heap = Vec::new();
    let ptrs: &mut [*mut c_void] = if values.len() <= INLINE_PARAMS {
        &mut inline[..values.len()]
    } else {
        heap.resize(values.len(), ptr::null_mut());
        &mut heap
    };
    for (p, v) in ptrs.iter_mut().zip(values.iter_mut()) {
        *p = v.as_mut_ptr().cast();
    }
    let params = if ptrs.is_empty() {
        ptr::null_mut()
    } else {
        ptrs.as_mut_ptr()
    };
    // SAFETY: `params` holds one pointer per parameter of `k.f` (count checked against the
    // driver's layout), each to 8 readable bytes, at least the parameter's size (checked);
    // all live during the call (the driver copies them). `s` is a live stream of the
    // function's context, which the caller bound.
    ok(unsafe {
        sys::cuLaunchKernel(
            k.f.0,
            grid[0],
            grid[1],
            grid[2],
            block[0],
            block[1],
            block[2],
            shared_mem,
            s.0,
            params,
            ptr::null_mut(),
        )
    })
}

/// Whether libnvrtc can be opened (cudarc's run-time loader panics at the first NVRTC call
/// otherwise); asked through [`super::library`], so it builds with every cudarc loading mode.
#[cfg(feature = "nvrtc")]
pub(crate) fn nvrtc_present() -> bool {
    static P: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *P.get_or_init(|| super::library::present(&["nvrtc"]))
}
