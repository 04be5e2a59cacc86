//! Modules and kernels: `cuModuleLoadData(Ex)`, `cuModuleGetFunction`, `cuFuncGetParamInfo`,
//! `cuFuncGetAttribute`, `cuLaunchKernel`, `cuLaunchKernelEx` (launch attributes).

use std::ffi::{c_void, CStr};
use std::ptr;

use cudarc::driver::sys;
use xstream_core::module::ArgValue;

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
#[cfg_attr(not(feature = "testing"), allow(dead_code))] // used by `Kernel::Fault` only
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

/// The largest stack tier of [`launch_kernel`]'s pointer array; more parameters take one
/// allocation.
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
    /// report it (a driver before 12.4, or `CUDA_ERROR_NOT_SUPPORTED`).
    pub(crate) fn read(f: CuFunction, max: usize) -> CuResult<Option<Self>> {
        // `cuFuncGetParamInfo` appeared in CUDA 12.4: an older driver lacks the symbol
        // (calling it through the dynamically loaded table would panic).
        if super::driver_version()? < 12040 {
            return Ok(None);
        }
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

/// The launch attributes the driver takes (`cuLaunchKernelEx`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LaunchAttrs {
    /// `CU_LAUNCH_ATTRIBUTE_COOPERATIVE`.
    pub cooperative: bool,
    /// `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`.
    pub cluster: Option<[u32; 3]>,
}

/// One launch: function, stream, dimensions, dynamic shared memory and attributes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Launch {
    pub f: CuFunction,
    pub stream: CuStream,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem: u32,
    pub attrs: LaunchAttrs,
}

/// `cuLaunchKernel` of `k` (or `cuLaunchKernelEx` when `l.attrs` asks for attributes);
/// `values[i]` is parameter `i`'s value. `Err(Mismatch)` before any driver call when the
/// values do not match the layout (count or any size), so the driver reads exactly the bytes
/// given; else the driver's result. The pointer array lives on the stack in `N` slots (a heap
/// array past `N`): the caller picks the smallest tier that holds its arguments.
pub(crate) fn launch_kernel<const N: usize>(
    k: &KernelLayout,
    l: &Launch,
    values: &[ArgValue<'_>],
) -> Result<CuResult<()>, Mismatch> {
    if values.len() != k.sizes.len()
        || values
            .iter()
            .zip(&*k.sizes)
            .any(|(v, &n)| v.as_bytes().len() != n)
        || l.f != k.f
    {
        return Err(Mismatch);
    }
    // SAFETY: one value per parameter of `k.f`, each exactly the parameter's size (checked
    // against the driver's layout just above).
    Ok(unsafe { launch_values::<N>(l, values) })
}

/// The answer of [`launch_kernel`] to values that do not match the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mismatch;

/// The caller's promise, made once in an `unsafe` block, that a launch's arguments match its
/// kernel's parameters (the unchecked launch); [`launch_trusted`] takes it instead of a
/// layout.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Trusted(());

impl Trusted {
    /// The promise.
    ///
    /// # Safety
    /// Every launch made with it must pass one value per parameter of its kernel, each at
    /// least the parameter's size.
    pub(crate) unsafe fn new() -> Self {
        Self(())
    }
}

/// As [`launch_kernel`] for a function whose layout the driver cannot report, under the
/// caller's [`Trusted`] promise.
pub(crate) fn launch_trusted<const N: usize>(
    l: &Launch,
    values: &[ArgValue<'_>],
    _promise: Trusted,
) -> CuResult<()> {
    // SAFETY: the values match the kernel's parameters (the promise `Trusted::new`'s caller
    // made); the stream is live and bound (the crate's invariant, see the module docs).
    unsafe { launch_values::<N>(l, values) }
}

/// As [`launch_kernel`] without a layout, with a stack array of `N` pointers (a heap array
/// past `N`).
///
/// # Safety
/// `values` must hold one entry per parameter of `l.f`, each at least the parameter's size.
/// The stream must be a live stream of the function's context, which the caller bound.
#[inline]
unsafe fn launch_values<const N: usize>(l: &Launch, values: &[ArgValue<'_>]) -> CuResult<()> {
    let mut inline = [ptr::null_mut::<c_void>(); N];
    let mut heap = Vec::new();
    let ptrs: &mut [*mut c_void] = if values.len() <= N {
        &mut inline[..values.len()]
    } else {
        heap.resize(values.len(), ptr::null_mut());
        &mut heap
    };
    for (p, v) in ptrs.iter_mut().zip(values) {
        // The driver only reads through these pointers (the API's `void**` is not const).
        *p = v.as_bytes().as_ptr().cast_mut().cast();
    }
    let params = if ptrs.is_empty() {
        ptr::null_mut()
    } else {
        ptrs.as_mut_ptr()
    };
    if l.attrs == LaunchAttrs::default() {
        // SAFETY: `params` holds one pointer per parameter of `l.f`, each to enough readable
        // bytes (the caller's promise), all live during the call (the driver copies them).
        // `l.stream` is a live stream of the function's context, which the caller bound.
        return ok(unsafe {
            sys::cuLaunchKernel(
                l.f.0,
                l.grid[0],
                l.grid[1],
                l.grid[2],
                l.block[0],
                l.block[1],
                l.block[2],
                l.shared_mem,
                l.stream.0,
                params,
                ptr::null_mut(),
            )
        });
    }
    // SAFETY: an all-zero `CUlaunchAttribute` is a valid value (id 0, `IGNORE`; zeroed
    // union), overwritten below.
    let mut attrs: [sys::CUlaunchAttribute; 2] = unsafe { std::mem::zeroed() };
    let mut n = 0;
    if l.attrs.cooperative {
        attrs[n].id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        attrs[n].value.cooperative = 1;
        n += 1;
    }
    if let Some([x, y, z]) = l.attrs.cluster {
        attrs[n].id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attrs[n].value.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 { x, y, z };
        n += 1;
    }
    let cfg = sys::CUlaunchConfig {
        gridDimX: l.grid[0],
        gridDimY: l.grid[1],
        gridDimZ: l.grid[2],
        blockDimX: l.block[0],
        blockDimY: l.block[1],
        blockDimZ: l.block[2],
        sharedMemBytes: l.shared_mem,
        hStream: l.stream.0,
        attrs: attrs.as_mut_ptr(),
        numAttrs: n as u32,
    };
    // SAFETY: as for `cuLaunchKernel` above; `cfg` and its `n` attributes are locals live
    // during the call.
    ok(unsafe { sys::cuLaunchKernelEx(&cfg, l.f.0, params, ptr::null_mut()) })
}

/// Whether libnvrtc can be opened (cudarc's run-time loader panics at the first NVRTC call
/// otherwise); asked through [`super::library`], so it builds with every cudarc loading mode.
#[cfg(feature = "nvrtc")]
pub(crate) fn nvrtc_present() -> bool {
    static P: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *P.get_or_init(|| super::library::present(&["nvrtc"]))
}
