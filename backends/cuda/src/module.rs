//! Modules and kernels on CUDA: [`CudaModule`] (`cuModuleLoadDataEx` of PTX text or a
//! cubin/fatbin image), [`CudaFunction`] (`cuModuleGetFunction`, with its parameter layout
//! from `cuFuncGetParamInfo` and its limits from `cuFuncGetAttribute`), and the launch
//! (`cuLaunchKernel`) behind [`Stream::launch_kernel`](xstream_core::Stream::launch_kernel).
//!
//! # Checks
//! Every launch is checked before the driver sees it: the function's context against the
//! stream's ([`Error::WrongDevice`]), the dimensions against the device's
//! `MAX_GRID_DIM_*` / `MAX_BLOCK_DIM_*` and the function's `MAX_THREADS_PER_BLOCK` /
//! `MAX_DYNAMIC_SHARED_SIZE_BYTES`, the argument count and each argument's size against the
//! driver's parameter layout, the kinds when they are declared (the builtin module, or
//! [`CudaFunction::with_params`]), and each buffer's context. The driver then reads exactly
//! one value of the right size per parameter, so a bad launch is an error, never UB. A
//! function whose layout the driver cannot report (drivers before 12.4) is refused by every
//! safe launch; only the `unsafe` unchecked launch of the launch builder
//! ([`xstream_core::launch`]) passes its arguments as given.
//!
//! # Launch attributes
//! The launch builder's cooperative launch and cluster dimensions go to `cuLaunchKernelEx` as
//! `CU_LAUNCH_ATTRIBUTE_COOPERATIVE` / `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`; a device
//! without `CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH`, or below compute capability 9.0 for
//! clusters, refuses them with `Error::Unsupported` before the driver is called. A plain
//! launch stays `cuLaunchKernel`.
//!
//! # Lifetimes
//! A function keeps its module loaded. A launch keeps the module loaded until the stream is
//! known to have run it: each stream remembers the modules of its launches (one entry per
//! module, no allocation once present) and lets one go when `synchronize` or a `Ready` query
//! sees its work done and nothing else holds the module, or behind its work when the stream
//! is dropped. A capture keeps
//! the modules of its launches for the life of the graph. The module is unloaded
//! (`cuModuleUnload`) when the last of these goes.
//!
//! # Allocations
//! A launch allocates nothing for up to 32 parameters (values and pointers live on the
//! stack); buffers are kept alive through the stream's keep-alive list (see
//! [`crate::memory`]), which allocates when it grows or is handed off.

use std::ffi::CString;
use std::fmt;
use std::sync::Arc;

use xstream_core::launch::LaunchAttrs;
use xstream_core::module::{
    check_arg_sizes, check_args, ArgValue, KernelArg, LaunchConfig, LaunchLimits, ModuleSource,
};
use xstream_core::{BackendKind, Error, FunctionImpl, FunctionName, ModuleImpl, ParamKind, Result};

use crate::ffi::{self, CheckedImage, CuContext, CuFunction, CuModule, KernelLayout};
use crate::{error, CudaBackend, CudaBuffer, CudaDevice, CudaStream};

/// Bytes of the JIT error log kept when loading fails.
const LOG_BYTES: usize = 16 * 1024;
/// Most parameters a kernel may have (CUDA's 32 KiB parameter space holds at most 8192
/// four-byte values).
const MAX_PARAMS: usize = 8192;

/// A loaded module: unloaded when the last handle, function, queued launch or graph using it
/// goes.
pub(crate) struct ModuleInner {
    raw: CuModule,
    pub(crate) raw_ctx: CuContext,
    /// Keeps the primary context retained while the module lives.
    _ctx: Arc<cudarc::driver::CudaContext>,
    ordinal: usize,
}

impl fmt::Debug for ModuleInner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaModule")
            .field("raw", &self.raw)
            .field("device", &self.ordinal)
            .finish()
    }
}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        let (raw, ctx) = (self.raw, self.raw_ctx);
        let unload = move || {
            if ffi::bind(ctx).is_ok() {
                if let Err(c) = ffi::module_unload(raw) {
                    tracing::debug!(code = c, "cuModuleUnload failed");
                }
            }
        };
        // Driver calls are refused inside host functions: then unload on the dispatcher, with
        // the context retained until the unload ran (the last release of `_ctx` inside the
        // host function would also be a driver call there, and would come first).
        crate::stream::release_now_or_dispatched(&self._ctx, unload);
    }
}

/// A loaded CUDA module (PTX, cubin or fatbin). Cheap to clone; see the module docs for
/// when it is unloaded.
#[derive(Debug, Clone)]
pub struct CudaModule {
    pub(crate) inner: Arc<ModuleInner>,
    /// The device's builtin module: its functions have declared parameter kinds and need no
    /// per-launch tracking (the device keeps it loaded).
    builtin: bool,
    limits: LaunchLimits,
}

impl CudaModule {
    /// The raw `CUmodule` (valid while this value or one of its functions lives; never
    /// unload it yourself).
    pub fn raw(&self) -> CuModule {
        self.inner.raw
    }
}

impl ModuleImpl for CudaModule {
    type B = CudaBackend;

    fn function_impl(&self, name: &FunctionName<'_>) -> Result<CudaFunction> {
        let n = name.as_str();
        let kinds = self.builtin.then(|| {
            xstream_core::module::builtin_params(n).or_else(|| {
                crate::device::REDUCE_KERNELS
                    .contains(&n)
                    .then_some(REDUCE_PARAMS)
            })
        });
        function(self, name, kinds.flatten().map(Into::into))
    }
}

/// The parameters of the built-in reduce's kernels: destination buffer and byte offset, source
/// buffer and byte offset, element count, `aclrtReduceKind` value.
const REDUCE_PARAMS: &[ParamKind] = &[
    ParamKind::Buffer,
    ParamKind::U64,
    ParamKind::Buffer,
    ParamKind::U64,
    ParamKind::U64,
    ParamKind::U32,
];

fn function(
    m: &CudaModule,
    fname: &FunctionName<'_>,
    kinds: Option<Box<[ParamKind]>>,
) -> Result<CudaFunction> {
    let api_err = |api, c| error::map(api, c);
    ffi::bind(m.inner.raw_ctx).map_err(|c| api_err("cuCtxSetCurrent", c))?;
    let name = fname.as_str();
    let raw = match ffi::module_get_function(m.inner.raw, fname.as_c_str()) {
        Ok(f) => f,
        // CUDA_ERROR_NOT_FOUND
        Err(500) => return Err(xstream_core::module::missing_function(name)),
        Err(c) => return Err(api_err("cuModuleGetFunction", c)),
    };
    let mut layout = KernelLayout::read(raw, MAX_PARAMS).unwrap_or_else(|c| {
        // Safe launches of this function are then refused (only the unsafe unchecked launch
        // passes its arguments).
        tracing::debug!(
            code = c,
            name,
            "cuFuncGetParamInfo failed; parameter layout unknown"
        );
        None
    });
    if let (None, Some(k), true) = (&layout, &kinds, m.builtin) {
        // The builtin module's kernels are xstream's own PTX: their parameters are known.
        let sizes: Vec<usize> = k.iter().map(|p| p.size()).collect();
        layout = Some(KernelLayout::builtin(raw, &sizes));
    }
    use cudarc::driver::sys::CUfunction_attribute as A;
    let attr = |a| ffi::func_attribute(raw, a).map_err(|c| api_err("cuFuncGetAttribute", c));
    let mut limits = m.limits;
    let threads = attr(A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?;
    let shared = attr(A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?;
    limits.max_threads_per_block = limits.max_threads_per_block.min(threads.max(0) as u32);
    limits.max_shared_mem_bytes = limits.max_shared_mem_bytes.min(shared.max(0) as u32);
    let f = CudaFunction {
        inner: Arc::new(FunctionInner {
            name: name.into(),
            raw,
            layout,
            kinds: None,
            limits,
            raw_ctx: m.inner.raw_ctx,
            module: Arc::clone(&m.inner),
            tracked: !m.builtin,
        }),
    };
    match kinds {
        Some(k) => f.with_params(&k),
        None => Ok(f),
    }
}

/// A kernel's handle and what a launch checks. `repr(C)` with what a launch reads first (cold
/// caches, docs/hot-paths.md): the module's context is copied here so that a launch reads the
/// module only to track it.
#[repr(C)]
struct FunctionInner {
    raw: CuFunction,
    /// `module.raw_ctx`.
    raw_ctx: CuContext,
    /// Whether launches record the module in the stream (not for the builtin module).
    tracked: bool,
    limits: LaunchLimits,
    /// `None` when the driver cannot report the layout: safe launches are then refused.
    layout: Option<KernelLayout>,
    kinds: Option<Box<[ParamKind]>>,
    module: Arc<ModuleInner>,
    name: Box<str>,
}

/// A kernel of a loaded CUDA module; cheap to clone; keeps its module loaded.
#[derive(Clone)]
pub struct CudaFunction {
    inner: Arc<FunctionInner>,
}

impl fmt::Debug for CudaFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaFunction")
            .field("name", &self.inner.name)
            .field("raw", &self.inner.raw)
            .field("param_sizes", &self.param_sizes())
            .field("kinds", &self.inner.kinds)
            .finish()
    }
}

impl CudaFunction {
    /// The raw `CUfunction` (valid while this value lives).
    pub fn raw(&self) -> CuFunction {
        self.inner.raw
    }

    /// The size in bytes of each parameter, as the driver reports them
    /// (`cuFuncGetParamInfo`); `None` when it cannot.
    pub fn param_sizes(&self) -> Option<&[usize]> {
        self.inner.layout.as_ref().map(KernelLayout::sizes)
    }

    /// The device's (and this function's) launch limits.
    pub fn launch_limits(&self) -> &LaunchLimits {
        &self.inner.limits
    }

    /// The same function with declared parameter kinds, so that launches also check each
    /// argument's kind (the driver only knows sizes).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `kinds` does not match the driver's layout.
    pub fn with_params(&self, kinds: &[ParamKind]) -> Result<CudaFunction> {
        if let Some(sizes) = self.param_sizes() {
            let fits =
                sizes.len() == kinds.len() && sizes.iter().zip(kinds).all(|(s, k)| *s == k.size());
            if !fits {
                return Err(Error::invalid(format!(
                    "declared parameters {kinds:?} of `{}` do not match the driver's layout (sizes {sizes:?})",
                    self.inner.name
                )));
            }
        }
        let i = &self.inner;
        Ok(CudaFunction {
            inner: Arc::new(FunctionInner {
                name: i.name.clone(),
                raw: i.raw,
                raw_ctx: i.raw_ctx,
                layout: i.layout.clone(),
                kinds: Some(kinds.into()),
                limits: i.limits,
                module: Arc::clone(&i.module),
                tracked: i.tracked,
            }),
        })
    }
}

impl FunctionImpl for CudaFunction {
    type B = CudaBackend;

    fn name_impl(&self) -> &str {
        &self.inner.name
    }

    fn params_impl(&self) -> Option<&[ParamKind]> {
        self.inner.kinds.as_deref()
    }
}

/// The device's launch limits (`cuDeviceGetAttribute`).
pub(crate) fn device_limits(dev: cudarc::driver::sys::CUdevice) -> ffi::CuResult<LaunchLimits> {
    use cudarc::driver::sys::CUdevice_attribute as A;
    let a = |x| ffi::device_attribute(dev, x).map(|v| v.max(0) as u32);
    Ok(LaunchLimits {
        max_grid: [
            a(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            a(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
            a(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
        ],
        max_block: [
            a(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
            a(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
            a(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
        ],
        max_threads_per_block: a(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_shared_mem_bytes: a(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
    })
}

/// Loads a module on `dev` (its context bound by the caller).
pub(crate) fn load(
    ctx: &Arc<cudarc::driver::CudaContext>,
    raw_ctx: CuContext,
    ordinal: usize,
    limits: LaunchLimits,
    src: &ModuleSource<'_>,
    builtin: bool,
) -> Result<CudaModule> {
    let mut log = vec![0u8; LOG_BYTES];
    let r = match src {
        ModuleSource::Ptx(text) => {
            let text = text.strip_suffix('\0').unwrap_or(text);
            let c = CString::new(text).map_err(|e| {
                Error::invalid(format!(
                    "PTX text contains a NUL byte at offset {}",
                    e.nul_position()
                ))
            })?;
            ffi::module_load_ptx(&c, &mut log)
        }
        ModuleSource::CudaBinary(bytes) => {
            let img = CheckedImage::new(bytes).map_err(Error::invalid)?;
            ffi::module_load_image(&img, &mut log)
        }
        other => return Err(other.unsupported_on(BackendKind::Cuda)),
    };
    match r {
        Ok(raw) => Ok(CudaModule {
            inner: Arc::new(ModuleInner {
                raw,
                raw_ctx,
                _ctx: Arc::clone(ctx),
                ordinal,
            }),
            builtin,
            limits,
        }),
        Err((code, used)) => {
            let mut e = error::map("cuModuleLoadDataEx", code);
            let text = String::from_utf8_lossy(&log[..used]).trim().to_string();
            if let Error::Native(n) = &mut e {
                n.message = Some(if text.is_empty() {
                    format!("loading {} failed (no JIT log)", src.describe())
                } else {
                    format!("JIT log: {text}")
                });
            }
            Err(e)
        }
    }
}

impl CudaDevice {
    pub(crate) fn load_module_impl(&self, src: &ModuleSource<'_>) -> Result<CudaModule> {
        let sh = &self.shared;
        sh.bind()?;
        let r = load(&sh.ctx, sh.raw_ctx, sh.info.ordinal, sh.limits, src, false);
        if let Err(e) = &r {
            if e.is_sticky() {
                sh.poison(e);
            }
        }
        r
    }
}

/// How a launch treats a function whose layout the driver cannot report.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Layout {
    /// Refused (every safe launch).
    Required,
    /// Passed as given (the unsafe unchecked launch; the caller vouches for the arguments).
    Trusted(ffi::Trusted),
}

/// Checks and enqueues one launch (the stream's context bound and capture gate passed).
pub(crate) fn launch(
    s: &CudaStream,
    f: &CudaFunction,
    cfg: &LaunchConfig,
    args: &[KernelArg<'_, CudaBuffer>],
) -> Result<()> {
    launch_ex(s, f, cfg, args, &LaunchAttrs::default(), Layout::Required)
}

/// As [`launch`], with launch attributes and the treatment of an unknown layout.
pub(crate) fn launch_ex(
    s: &CudaStream,
    f: &CudaFunction,
    cfg: &LaunchConfig,
    args: &[KernelArg<'_, CudaBuffer>],
    attrs: &LaunchAttrs,
    unknown: Layout,
) -> Result<()> {
    let fi = &*f.inner;
    if fi.raw_ctx != s.raw_ctx() {
        let dev = s.cuda_device();
        return Err(Error::WrongDevice(format!(
            "launch_kernel: `{}` was loaded on CUDA device {}, the stream is on device {}",
            fi.name, fi.module.ordinal, dev.shared.info.ordinal
        )));
    }
    // The common case is answered by plain comparisons; the shared checks run (and build
    // their error) only when one fails.
    if !within_limits(&fi.limits, cfg) {
        fi.limits.check(cfg)?;
    }
    if !attrs.is_empty() {
        attrs.check(cfg)?;
        check_attrs_supported(s.cuda_device(), attrs)?;
    }
    if let Some(kinds) = &fi.kinds {
        if !kinds_match(kinds, args) {
            check_args(&fi.name, kinds, args)?;
        }
    }
    if let (None, Layout::Required) = (&fi.layout, unknown) {
        return Err(no_layout(&fi.name));
    }
    // Each buffer's device was checked by the checked layer (`Stream::launch_kernel` and the
    // others: `check_args_device`, the contract of `StreamImpl`), the same context comparison
    // as `CudaBuffer::check_device`; it is not repeated here.
    let l = ffi::Launch {
        f: fi.raw,
        stream: s.raw_stream(),
        grid: cfg.grid,
        block: cfg.block,
        shared_mem: cfg.shared_mem_bytes,
        attrs: ffi::LaunchAttrs {
            cooperative: attrs.cooperative,
            cluster: attrs.cluster,
        },
    };
    // The values and the driver's pointer array live on the stack in arrays of the smallest
    // tier that holds them: filling a 32-slot array on every launch cost more than the rest of
    // the launch path (null-driver profile, docs/performance.md).
    let r = match args.len() {
        0 => enqueue::<0>(fi, &l, args, unknown),
        1..=4 => enqueue::<4>(fi, &l, args, unknown),
        5..=8 => enqueue::<8>(fi, &l, args, unknown),
        9..=16 => enqueue::<16>(fi, &l, args, unknown),
        _ => enqueue::<{ ffi::INLINE_PARAMS }>(fi, &l, args, unknown),
    };
    match r {
        Ok(r) => s.check_launch(r)?,
        // The layout's size check failed: the shared check names the position and sizes.
        Err(ffi::Mismatch) => {
            let sizes = fi.layout.as_ref().map_or(&[][..], KernelLayout::sizes);
            check_arg_sizes(&fi.name, sizes, args)?;
            return Err(Error::invalid(format!(
                "launch_kernel: the arguments of `{}` do not match its layout",
                fi.name
            )));
        }
    }
    for a in args {
        if let Some(b) = a.buffer() {
            s.keep_buf(b);
        }
    }
    if fi.tracked {
        s.track_module(&fi.module);
    }
    Ok(())
}

/// Whether `cfg` passes [`LaunchLimits::check`]: every dimension at least 1 and at most its
/// limit, the block's threads and the dynamic shared memory within theirs. `false` sends the
/// launch to the full check, which gives the error.
#[inline]
fn within_limits(l: &LaunchLimits, cfg: &LaunchConfig) -> bool {
    let dims_ok = |d: [u32; 3], m: [u32; 3]| (0..3).all(|i| d[i] != 0 && d[i] <= m[i]);
    dims_ok(cfg.grid, l.max_grid)
        && dims_ok(cfg.block, l.max_block)
        && cfg.threads_per_block() <= u64::from(l.max_threads_per_block)
        && cfg.shared_mem_bytes <= l.max_shared_mem_bytes
}

/// Whether `args` match the declared `kinds` (count and each kind): what [`check_args`]
/// accepts.
#[inline]
fn kinds_match(kinds: &[ParamKind], args: &[KernelArg<'_, CudaBuffer>]) -> bool {
    kinds.len() == args.len() && kinds.iter().zip(args).all(|(k, a)| *k == a.kind())
}

/// Converts `args` to their values in a stack array of `N` slots (a heap array past `N`) and
/// makes the driver call (the layout's size check first, [`ffi::launch_kernel`]).
#[inline]
fn enqueue<const N: usize>(
    fi: &FunctionInner,
    l: &ffi::Launch,
    args: &[KernelArg<'_, CudaBuffer>],
    unknown: Layout,
) -> std::result::Result<ffi::CuResult<()>, ffi::Mismatch> {
    let mut inline_vals = [ArgValue::Borrowed(&[]); N];
    let mut heap_vals = Vec::new();
    let vals: &mut [ArgValue<'_>] = if args.len() <= N {
        &mut inline_vals[..args.len()]
    } else {
        heap_vals.resize(args.len(), ArgValue::Borrowed(&[]));
        &mut heap_vals
    };
    for (v, a) in vals.iter_mut().zip(args) {
        *v = a.value(CudaBuffer::ptr);
    }
    match (&fi.layout, unknown) {
        (Some(layout), _) => ffi::launch_kernel::<N>(layout, l, vals),
        (None, Layout::Trusted(promise)) => Ok(ffi::launch_trusted::<N>(l, vals, promise)),
        // Refused by `launch_ex` before the values are made.
        (None, Layout::Required) => Err(ffi::Mismatch),
    }
}

/// The error of a safe launch of a function whose layout the driver cannot report.
fn no_layout(name: &str) -> Error {
    Error::unsupported(
        BackendKind::Cuda,
        format!(
            "a checked launch of `{name}`: the driver cannot report its parameter layout (cuFuncGetParamInfo needs a CUDA 12.4 driver); use the unsafe unchecked launch"
        ),
    )
}

/// Refuses attributes the device lacks: cooperative launch without
/// `CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH`, clusters below compute capability 9.0.
fn check_attrs_supported(dev: &CudaDevice, attrs: &LaunchAttrs) -> Result<()> {
    use cudarc::driver::sys::CUdevice_attribute as A;
    if attrs.is_empty() {
        return Ok(());
    }
    let a = |x| {
        ffi::device_attribute(dev.shared.cu_device, x)
            .map_err(|c| error::map("cuDeviceGetAttribute", c))
    };
    if attrs.cooperative && a(A::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)? == 0 {
        return Err(Error::unsupported(
            BackendKind::Cuda,
            "cooperative launch: the device lacks CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH",
        ));
    }
    if attrs.cluster.is_some() && a(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)? < 9 {
        return Err(Error::unsupported(
            BackendKind::Cuda,
            "thread-block clusters: they need compute capability 9.0 or later",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The launch path's quick answers agree with the shared checks they stand in for, on
    /// every value at and around each limit (0, 1, limit - 1, limit, limit + 1).
    #[test]
    fn quick_checks_agree_with_the_shared_ones() {
        let l = LaunchLimits {
            max_grid: [2_147_483_647, 65_535, 65_535],
            max_block: [1024, 1024, 64],
            max_threads_per_block: 1024,
            max_shared_mem_bytes: 232_448,
        };
        let around = |m: u32| [0, 1, m - 1, m, m.saturating_add(1)];
        let mut n = 0;
        for axis in 0..3 {
            for v in around(l.max_grid[axis]) {
                for w in around(l.max_block[axis]) {
                    for sh in around(l.max_shared_mem_bytes) {
                        let mut c = LaunchConfig::single();
                        c.grid[axis] = v;
                        c.block[axis] = w;
                        c.shared_mem_bytes = sh;
                        assert_eq!(within_limits(&l, &c), l.check(&c).is_ok(), "{c:?}");
                        n += 1;
                    }
                }
            }
        }
        // Threads per block over the limit with every dimension within its own.
        let c = LaunchConfig::new([1, 1, 1], [1024, 2, 1]);
        assert!(!within_limits(&l, &c) && l.check(&c).is_err());
        assert_eq!(n, 375);

        let kinds = [ParamKind::U64, ParamKind::U32, ParamKind::F32];
        let cases: [&[KernelArg<'_, CudaBuffer>]; 6] = [
            &[KernelArg::U64(1), KernelArg::U32(2), KernelArg::F32(0.5)],
            &[KernelArg::U64(1), KernelArg::U32(2)],
            &[KernelArg::U32(1), KernelArg::U32(2), KernelArg::F32(0.5)],
            &[KernelArg::U64(1), KernelArg::U32(2), KernelArg::F64(0.5)],
            &[KernelArg::U64(1), KernelArg::I32(2), KernelArg::F32(0.5)],
            &[],
        ];
        let mut matched = 0;
        for args in cases {
            let ok = kinds_match(&kinds, args);
            assert_eq!(ok, check_args("k", &kinds, args).is_ok(), "{args:?}");
            matched += usize::from(ok);
        }
        assert_eq!(matched, 1);
    }

    /// The layout's size check, the only one on the launch path, refuses a wrong count or a
    /// wrong size at any position before the driver is called.
    #[test]
    fn layout_check_refuses_every_mismatch() {
        let f = ffi::CuFunction(std::ptr::null_mut());
        let layout = KernelLayout::builtin(f, &[8, 4, 4]);
        let l = ffi::Launch {
            f,
            stream: ffi::CuStream(std::ptr::null_mut()),
            grid: [1; 3],
            block: [1; 3],
            shared_mem: 0,
            attrs: ffi::LaunchAttrs::default(),
        };
        let bad: [&[KernelArg<'_, CudaBuffer>]; 5] = [
            &[KernelArg::U64(1), KernelArg::U32(2)],
            &[KernelArg::U32(1), KernelArg::U32(2), KernelArg::F32(0.5)],
            &[KernelArg::U64(1), KernelArg::U32(2), KernelArg::F64(0.5)],
            &[
                KernelArg::U64(1),
                KernelArg::U32(2),
                KernelArg::Bytes(&[0; 3]),
            ],
            &[],
        ];
        for args in bad {
            let vals: Vec<ArgValue<'_>> = args.iter().map(|a| a.value(|_| 0)).collect();
            assert_eq!(
                ffi::launch_kernel::<4>(&layout, &l, &vals),
                Err(ffi::Mismatch),
                "{args:?}"
            );
            assert!(check_arg_sizes("k", layout.sizes(), args).is_err());
        }
        // Another function than the layout's is refused too.
        let other = ffi::Launch {
            f: ffi::CuFunction(std::ptr::NonNull::<u8>::dangling().as_ptr().cast()),
            ..l
        };
        let vals = [
            KernelArg::<CudaBuffer>::U64(1),
            KernelArg::U32(2),
            KernelArg::F32(0.5),
        ]
        .map(|a| a.value(|_| 0));
        assert_eq!(
            ffi::launch_kernel::<4>(&layout, &other, &vals),
            Err(ffi::Mismatch)
        );
    }
}
