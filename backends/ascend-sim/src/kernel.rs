//! Kernel loading and execution: `aclrtBinaryLoadFromData`, `aclrtBinaryGetFunction`,
//! `aclrtBinaryUnLoad`, the argument list (`aclrtKernelArgsInit`, `aclrtKernelArgsAppend`,
//! `aclrtKernelArgsFinalize`) and the launches (`aclrtLaunchKernelWithConfig`,
//! `aclrtLaunchKernel`), with the prototypes of the CANN runtime header `acl/acl_rt.h`
//! (CANN 8.5 / 9.x, ACL API 1.16–1.17).
//!
//! Binaries are the simulator's test-only format (`crate::binary`); each function runs one of
//! the simulator's built-in CPU kernels as a stream task, in stream order, recorded into a
//! capture like any other task. Rules (ACL-layer NULL / zero checks → 100000, runtime checks →
//! 107000, as in the runtime's implementation):
//!
//! * A binary is loaded for the current context's device (107002 without a current context);
//!   launching one of its functions on a stream of another device → 107003.
//! * Unknown or unloaded binary, function or argument-list handles → 107017
//!   (`ACL_ERROR_RT_INVALID_HANDLE`). After `aclrtBinaryUnLoad` its function handles are stale;
//!   launches already queued still run.
//! * `aclrtKernelArgsInit` hands out the calling thread's one argument list (the runtime keeps
//!   one per thread and re-initialises it on every call): build, finalize and launch before the
//!   next `aclrtKernelArgsInit` on the same thread. A launch copies the arguments, so the list
//!   may be reused at once.
//! * Each appended parameter starts at the next multiple of 8 bytes; at most 128 parameters and
//!   64 KiB (107000 beyond). Appending after `aclrtKernelArgsFinalize` → 207000.
//! * A launch checks the arguments against the kernel's layout (`crate::binary`): a list that is
//!   not finalized, or of another function, or whose parameter count or sizes differ → 107000
//!   (the simulator knows the layout; a real runtime does not check sizes).
//! * `aclrtLaunchKernel` reads its `argsData` block (device memory) when the kernel runs, like
//!   the device does; `argsSize` must equal the layout's size (107000).
//! * `numBlocks` must be non-zero (100000 from the config launch, 107000 from
//!   `aclrtLaunchKernel`); it has no other effect. A launch configuration (`cfg`) may be NULL;
//!   attribute ids must be known (1..=9, else 107000), their values have no effect. `reserve`
//!   must be NULL (100000).
//! * A kernel that dereferences a NULL or misaligned pointer raises a device fault
//!   (507015, `ACL_ERROR_RT_AICORE_EXCEPTION`) that poisons the context, like `xsimLaunchFault`.

use crate::binary::*;
use crate::codes::*;
use crate::device::*;
use crate::error::*;
use crate::stream::*;
use crate::task::*;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_char;
use std::ffi::c_void;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::time::Duration;

/// `aclrtBinaryLoadOption`: `{ aclrtBinaryLoadOptionType type; aclrtBinaryLoadOptionValue
/// value; }` (the value is a 16-byte union of `uint32_t` / `int32_t` members).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct AclrtBinaryLoadOption {
    /// `aclrtBinaryLoadOptionType`.
    pub kind: i32,
    /// `aclrtBinaryLoadOptionValue` (`isLazyLoad` / `magic` / `cpuKernelMode` / `rsv[4]`).
    pub value: [u32; 4],
}

/// `aclrtBinaryLoadOptions`: `{ aclrtBinaryLoadOption* options; size_t numOpt; }`.
#[repr(C)]
#[derive(Debug)]
pub struct AclrtBinaryLoadOptions {
    /// The options.
    pub options: *mut AclrtBinaryLoadOption,
    /// How many.
    pub num_opt: usize,
}

/// `aclrtLaunchKernelAttr`: `{ aclrtLaunchKernelAttrId id; aclrtLaunchKernelAttrValue value;
/// }` (the value is a 16-byte union, align 4).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct AclrtLaunchKernelAttr {
    /// `aclrtLaunchKernelAttrId`: 1..=9 in CANN 9.x (`ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE` ..
    /// `..._ENABLE_PROFILING`; 2 is `..._DYN_UBUF_SIZE`).
    pub id: i32,
    /// `aclrtLaunchKernelAttrValue` as its `uint32_t rsv[4]` member.
    pub value: [u32; 4],
}

/// `aclrtLaunchKernelCfg`: `{ aclrtLaunchKernelAttr* attrs; size_t numAttrs; }`.
#[repr(C)]
#[derive(Debug)]
pub struct AclrtLaunchKernelCfg {
    /// The attributes.
    pub attrs: *mut AclrtLaunchKernelAttr,
    /// How many.
    pub num_attrs: usize,
}

/// Checks a launch configuration: NULL is allowed; attribute ids must be known (1..=9), their
/// values are accepted and have no effect.
///
/// # Safety
/// `cfg` is NULL or valid, with `num_attrs` readable attributes.
unsafe fn check_cfg(cfg: *const AclrtLaunchKernelCfg) -> R {
    if cfg.is_null() {
        return Ok(());
    }
    // SAFETY: non-NULL, valid per the caller.
    let c = unsafe { &*cfg };
    if c.num_attrs == 0 {
        return Ok(());
    }
    if c.attrs.is_null() {
        return err(ACL_ERROR_RT_PARAM_INVALID, "cfg->attrs is NULL");
    }
    // SAFETY: non-NULL with `num_attrs` entries per the caller.
    let attrs = unsafe { std::slice::from_raw_parts(c.attrs, c.num_attrs) };
    match attrs.iter().find(|a| !(1..=9).contains(&a.id)) {
        Some(a) => err(
            ACL_ERROR_RT_PARAM_INVALID,
            format!("unknown launch attribute id {}", a.id),
        ),
        None => Ok(()),
    }
}

/// Most parameters of one argument list.
pub const MAX_KERNEL_PARAMS: usize = 128;
/// Size of an argument list's buffer.
pub const MAX_KERNEL_ARGS_BYTES: usize = 64 * 1024;

struct Binary {
    funcs: Vec<Arc<Func>>,
}

struct Func {
    def: KernelDef,
    device: i32,
}

struct Args {
    func: usize,
    buf: Vec<u8>,
    params: Vec<(usize, usize)>,
    finalized: bool,
    /// One byte per parameter slot: the addresses handed out as `aclrtParamHandle`s.
    slots: Box<[u8; MAX_KERNEL_PARAMS]>,
}

#[derive(Default)]
struct Registry {
    bins: HashMap<usize, Arc<Binary>>,
    funcs: HashMap<usize, Arc<Func>>,
    args: HashMap<usize, Arc<Mutex<Args>>>,
}

fn registry() -> &'static Mutex<Registry> {
    static R: OnceLock<Mutex<Registry>> = OnceLock::new();
    R.get_or_init(Mutex::default)
}

/// The calling thread's argument list, unregistered when the thread exits.
struct ThreadArgs(Arc<Mutex<Args>>);

impl Drop for ThreadArgs {
    fn drop(&mut self) {
        lock(registry())
            .args
            .remove(&(Arc::as_ptr(&self.0) as usize));
    }
}

thread_local! {
    static THREAD_ARGS: RefCell<Option<ThreadArgs>> = const { RefCell::new(None) };
}

fn func_of(h: *mut c_void) -> R<Arc<Func>> {
    non_null(h, "funcHandle")?;
    lock(registry())
        .funcs
        .get(&(h as usize))
        .cloned()
        .map_or_else(
            || {
                err(
                    ACL_ERROR_RT_INVALID_HANDLE,
                    "unknown or unloaded funcHandle",
                )
            },
            Ok,
        )
}

fn args_of(h: *mut c_void) -> R<Arc<Mutex<Args>>> {
    non_null(h, "argsHandle")?;
    lock(registry())
        .args
        .get(&(h as usize))
        .cloned()
        .map_or_else(
            || err(ACL_ERROR_RT_INVALID_HANDLE, "unknown argsHandle"),
            Ok,
        )
}

/// Checks the load options the runtime checks (types 1..=3, a known magic); CPU-kernel mode
/// (AI CPU operators) is not simulated.
///
/// # Safety
/// `o` is NULL or points to a valid `aclrtBinaryLoadOptions` whose array has `num_opt` entries.
unsafe fn check_options(o: *const AclrtBinaryLoadOptions) -> R {
    if o.is_null() {
        return Ok(());
    }
    // SAFETY: non-NULL, valid per the caller.
    let o = unsafe { &*o };
    if o.num_opt == 0 {
        return Ok(());
    }
    if o.options.is_null() {
        return err(ACL_ERROR_RT_PARAM_INVALID, "options->options is NULL");
    }
    // SAFETY: non-NULL with `num_opt` entries per the caller.
    let opts = unsafe { std::slice::from_raw_parts(o.options, o.num_opt) };
    for opt in opts {
        match opt.kind {
            ACL_RT_BINARY_LOAD_OPT_LAZY_LOAD => {}
            ACL_RT_BINARY_LOAD_OPT_MAGIC => {
                let m = opt.value[0];
                if ![
                    ACL_RT_BINARY_MAGIC_ELF_AICORE,
                    ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE,
                    ACL_RT_BINARY_MAGIC_ELF_CUBE_CORE,
                ]
                .contains(&m)
                {
                    return err(
                        ACL_ERROR_RT_PARAM_INVALID,
                        format!("magic {m:#x} is invalid"),
                    );
                }
            }
            ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE => {
                return err(
                    ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                    "AI CPU kernels (CPU_KERNEL_MODE) are not simulated",
                )
            }
            k => return err(ACL_ERROR_RT_PARAM_INVALID, format!("load option type {k}")),
        }
    }
    Ok(())
}

/// `aclError aclrtBinaryLoadFromData(const void* data, size_t length, const
/// aclrtBinaryLoadOptions* options, aclrtBinHandle* binHandle)`: parses a simulator kernel
/// binary (`crate::binary`) for the current context's device.
///
/// # Safety
/// `data` is NULL or points to `length` readable bytes; `options` is NULL or valid;
/// `bin_handle` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtBinaryLoadFromData(
    data: *const c_void,
    length: usize,
    options: *const AclrtBinaryLoadOptions,
    bin_handle: *mut *mut c_void,
) -> i32 {
    ffi("aclrtBinaryLoadFromData", true, || {
        non_null(data, "data")?;
        non_null(bin_handle, "binHandle")?;
        if length == 0 {
            return err(ACL_ERROR_RT_PARAM_INVALID, "length is 0");
        }
        // SAFETY: as the caller promised.
        unsafe { check_options(options) }?;
        let ctx = cur_ctx()?;
        // SAFETY: non-NULL with `length` readable bytes per the caller.
        let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), length) };
        if crate::real_kernels::real_kernels() {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                "not a kernel object this runtime can load (XSIM_REAL_KERNELS: the simulator \
                 refuses its test-only format as a real runtime does)",
            );
        }
        let defs = parse(bytes).or_else(|m| err(ACL_ERROR_RT_PARAM_INVALID, m))?;
        let bin = Arc::new(Binary {
            funcs: defs
                .into_iter()
                .map(|def| {
                    Arc::new(Func {
                        def,
                        device: ctx.device,
                    })
                })
                .collect(),
        });
        let h = Arc::as_ptr(&bin) as usize;
        let mut r = lock(registry());
        for f in &bin.funcs {
            r.funcs.insert(Arc::as_ptr(f) as usize, f.clone());
        }
        r.bins.insert(h, bin);
        drop(r);
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { put(bin_handle, h as *mut c_void) }
    })
}

/// `aclError aclrtBinaryGetFunction(const aclrtBinHandle binHandle, const char* kernelName,
/// aclrtFuncHandle* funcHandle)`: the function named `kernelName` (unknown name → 107000).
///
/// # Safety
/// `kernel_name` is NULL or a NUL-terminated string; `func_handle` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtBinaryGetFunction(
    bin_handle: *mut c_void,
    kernel_name: *const c_char,
    func_handle: *mut *mut c_void,
) -> i32 {
    ffi("aclrtBinaryGetFunction", true, || {
        non_null(bin_handle, "binHandle")?;
        non_null(kernel_name, "kernelName")?;
        non_null(func_handle, "funcHandle")?;
        // SAFETY: non-NULL C string per the caller.
        let name = unsafe { opt_str(kernel_name) }?.unwrap_or_default();
        let bin = lock(registry())
            .bins
            .get(&(bin_handle as usize))
            .cloned()
            .map_or_else(
                || err(ACL_ERROR_RT_INVALID_HANDLE, "unknown or unloaded binHandle"),
                Ok,
            )?;
        let f = bin.funcs.iter().find(|f| f.def.name == name).map_or_else(
            || {
                err(
                    ACL_ERROR_RT_PARAM_INVALID,
                    format!("no kernel named '{name}' in the binary"),
                )
            },
            Ok,
        )?;
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { put(func_handle, Arc::as_ptr(f) as *mut c_void) }
    })
}

/// `aclError aclrtBinaryUnLoad(aclrtBinHandle binHandle)`: forgets the binary and its
/// function handles; launches already queued still run.
///
/// # Safety
/// `bin_handle` is a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtBinaryUnLoad(bin_handle: *mut c_void) -> i32 {
    ffi("aclrtBinaryUnLoad", true, || {
        non_null(bin_handle, "binHandle")?;
        let mut r = lock(registry());
        let Some(bin) = r.bins.remove(&(bin_handle as usize)) else {
            return err(ACL_ERROR_RT_INVALID_HANDLE, "unknown or unloaded binHandle");
        };
        for f in &bin.funcs {
            r.funcs.remove(&(Arc::as_ptr(f) as usize));
        }
        Ok(())
    })
}

/// `aclError aclrtKernelArgsInit(aclrtFuncHandle funcHandle, aclrtArgsHandle* argsHandle)`:
/// (re-)initialises the calling thread's argument list for `funcHandle`.
///
/// # Safety
/// `args_handle` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtKernelArgsInit(
    func_handle: *mut c_void,
    args_handle: *mut *mut c_void,
) -> i32 {
    ffi("aclrtKernelArgsInit", true, || {
        non_null(func_handle, "funcHandle")?;
        non_null(args_handle, "argsHandle")?;
        func_of(func_handle)?;
        let a = THREAD_ARGS.with(|t| {
            let mut t = t.borrow_mut();
            let a = t.get_or_insert_with(|| {
                let a = Arc::new(Mutex::new(Args {
                    func: 0,
                    buf: Vec::new(),
                    params: Vec::new(),
                    finalized: false,
                    slots: Box::new([0; MAX_KERNEL_PARAMS]),
                }));
                lock(registry())
                    .args
                    .insert(Arc::as_ptr(&a) as usize, a.clone());
                ThreadArgs(a)
            });
            a.0.clone()
        });
        {
            let mut g = lock(&a);
            g.func = func_handle as usize;
            g.buf.clear();
            g.params.clear();
            g.finalized = false;
        }
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { put(args_handle, Arc::as_ptr(&a) as *mut c_void) }
    })
}

/// `aclError aclrtKernelArgsAppend(aclrtArgsHandle argsHandle, void* param, size_t paramSize,
/// aclrtParamHandle* paramHandle)`: copies `paramSize` bytes of `param` into the list at the
/// next multiple of 8 bytes.
///
/// # Safety
/// `param` is NULL or points to `param_size` readable bytes; `param_handle` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtKernelArgsAppend(
    args_handle: *mut c_void,
    param: *mut c_void,
    param_size: usize,
    param_handle: *mut *mut c_void,
) -> i32 {
    ffi("aclrtKernelArgsAppend", true, || {
        non_null(args_handle, "argsHandle")?;
        non_null(param, "param")?;
        if param_size == 0 {
            return err(ACL_ERROR_INVALID_PARAM, "paramSize is 0");
        }
        non_null(param_handle, "paramHandle")?;
        let a = args_of(args_handle)?;
        let mut g = lock(&a);
        if g.finalized {
            return err(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                "appending after aclrtKernelArgsFinalize is not supported",
            );
        }
        if g.params.len() >= MAX_KERNEL_PARAMS {
            return err(ACL_ERROR_RT_PARAM_INVALID, "more than 128 parameters");
        }
        let off = g.buf.len().next_multiple_of(8);
        if off + param_size > MAX_KERNEL_ARGS_BYTES {
            return err(ACL_ERROR_RT_PARAM_INVALID, "arguments exceed 64 KiB");
        }
        // SAFETY: non-NULL with `param_size` readable bytes per the caller.
        let src = unsafe { std::slice::from_raw_parts(param.cast::<u8>(), param_size) };
        g.buf.resize(off, 0);
        g.buf.extend_from_slice(src);
        let idx = g.params.len();
        g.params.push((off, param_size));
        let slot = g.slots.as_ptr().wrapping_add(idx) as *mut c_void;
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { put(param_handle, slot) }
    })
}

/// `aclError aclrtKernelArgsFinalize(aclrtArgsHandle argsHandle)`: marks the list complete.
///
/// # Safety
/// `args_handle` is a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtKernelArgsFinalize(args_handle: *mut c_void) -> i32 {
    ffi("aclrtKernelArgsFinalize", true, || {
        let a = args_of(args_handle)?;
        lock(&a).finalized = true;
        Ok(())
    })
}

/// Where a queued kernel reads its argument block.
enum ArgBlock {
    /// Copied at launch (`aclrtLaunchKernelWithConfig`).
    Copied(Vec<u8>),
    /// Device memory read when the kernel runs (`aclrtLaunchKernel`).
    Device { ptr: usize, len: usize },
}

struct KernelTask {
    builtin: Builtin,
    args: ArgBlock,
}

fn read_u32(b: &[u8], off: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(w)
}

fn read_u64(b: &[u8], off: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(w)
}

impl ExtTask for KernelTask {
    fn run(&self, stream: &Stream, epoch: u64) {
        let device_copy;
        let b: &[u8] = match &self.args {
            ArgBlock::Copied(v) => v,
            ArgBlock::Device { ptr, len } => {
                // SAFETY: the caller of aclrtLaunchKernel promised `len` bytes at `ptr` stay
                // valid until the kernel ran.
                device_copy = unsafe { std::slice::from_raw_parts(*ptr as *const u8, *len) };
                device_copy
            }
        };
        let lay = self.builtin.layout();
        match self.builtin {
            Builtin::Delay => stream.spin(Duration::from_nanos(read_u64(b, lay[0].0)), epoch),
            Builtin::Lcg | Builtin::Fill => {
                let ptr = read_u64(b, lay[0].0) as usize;
                let words = read_u32(b, lay[1].0) as usize;
                let x = read_u32(b, lay[2].0);
                if words == 0 {
                    return;
                }
                if ptr == 0 || !ptr.is_multiple_of(4) {
                    stream.fault(ACL_ERROR_RT_AICORE_EXCEPTION);
                    return;
                }
                if self.builtin == Builtin::Lcg {
                    // SAFETY: the launcher promised `words` u32s at `ptr` stay valid until
                    // the kernel ran (the device trusts its arguments the same way).
                    unsafe { lcg_words(ptr as *mut u32, words, x) }
                } else {
                    // SAFETY: as above.
                    unsafe { std::slice::from_raw_parts_mut(ptr as *mut u32, words) }.fill(x);
                }
            }
            Builtin::Add => {
                let ptrs = [0, 1, 2].map(|i| read_u64(b, lay[i].0) as usize);
                let words = read_u32(b, lay[3].0) as usize;
                if words == 0 {
                    return;
                }
                if ptrs.iter().any(|&p| p == 0 || !p.is_multiple_of(4)) {
                    stream.fault(ACL_ERROR_RT_AICORE_EXCEPTION);
                    return;
                }
                let [a, bb, out] = ptrs.map(|p| p as *mut u32);
                for i in 0..words {
                    // SAFETY: the launcher promised `words` u32s at each pointer stay valid
                    // until the kernel ran; element-wise reads and writes through raw pointers
                    // allow the arguments to alias.
                    unsafe {
                        let x = a.add(i).read().wrapping_add(bb.add(i).read());
                        out.add(i).write(x);
                    }
                }
            }
            Builtin::Echo => {
                let ptr = read_u64(b, lay[0].0) as usize;
                if ptr == 0 {
                    stream.fault(ACL_ERROR_RT_AICORE_EXCEPTION);
                    return;
                }
                // (source offset in the argument block, length, record offset)
                let (s, x, y, z, w) = (lay[1].0, lay[2].0, lay[3].0, lay[4].0, lay[5].0);
                let pieces = [
                    (s, 3, 0),
                    (s + 8, 8, 8),
                    (x, 1, 16),
                    (y, 2, 18),
                    (z, 8, 24),
                    (w, 4, 32),
                ];
                for (src, n, dst) in pieces {
                    // SAFETY: the launcher promised the 40-byte record at `ptr` stays valid
                    // until the kernel ran (the device trusts its arguments the same way);
                    // `src..src + n` lies in the argument block, checked against the layout
                    // at launch.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            b[src..src + n].as_ptr(),
                            (ptr as *mut u8).add(dst),
                            n,
                        )
                    };
                }
            }
            Builtin::Fault => {
                let code = read_u32(b, lay[0].0) as i32;
                if code != 0 {
                    stream.fault(code);
                }
            }
        }
    }
}

/// Resolves the function and stream of a launch and checks they are on one device.
fn launch_target(func_handle: *mut c_void, stream: *mut c_void) -> R<(Arc<Func>, Arc<Stream>)> {
    let f = func_of(func_handle)?;
    let s = enqueue_stream(stream)?;
    if s.ctx.device != f.device {
        return err(
            ACL_ERROR_RT_STREAM_CONTEXT,
            format!(
                "kernel loaded on device {} launched on a stream of device {}",
                f.device, s.ctx.device
            ),
        );
    }
    Ok((f, s))
}

/// `aclError aclrtLaunchKernelWithConfig(aclrtFuncHandle funcHandle, uint32_t numBlocks,
/// aclrtStream stream, aclrtLaunchKernelCfg* cfg, aclrtArgsHandle argsHandle, void*
/// reserve)`: queues the kernel with a copy of the finalized argument list.
///
/// # Safety
/// `cfg` is NULL or valid; the handles are lookup keys; pointers passed as kernel arguments
/// must stay valid until the kernel ran.
#[no_mangle]
pub unsafe extern "C" fn aclrtLaunchKernelWithConfig(
    func_handle: *mut c_void,
    num_blocks: u32,
    stream: *mut c_void,
    cfg: *const AclrtLaunchKernelCfg,
    args_handle: *mut c_void,
    reserve: *mut c_void,
) -> i32 {
    ffi("aclrtLaunchKernelWithConfig", true, || {
        non_null(func_handle, "funcHandle")?;
        if num_blocks == 0 {
            return err(ACL_ERROR_INVALID_PARAM, "numBlocks is 0");
        }
        non_null(args_handle, "argsHandle")?;
        if !reserve.is_null() {
            return err(ACL_ERROR_INVALID_PARAM, "reserve must be NULL");
        }
        // SAFETY: as the caller promised.
        unsafe { check_cfg(cfg) }?;
        let (f, s) = launch_target(func_handle, stream)?;
        let a = args_of(args_handle)?;
        let g = lock(&a);
        if g.func != func_handle as usize {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                "argsHandle was initialised for another function",
            );
        }
        if !g.finalized {
            return err(ACL_ERROR_RT_PARAM_INVALID, "argsHandle is not finalized");
        }
        let want = f.def.builtin.layout();
        if g.params != want {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!(
                    "kernel '{}' takes parameters at (offset, size) {want:?}; got {:?}",
                    f.def.name, g.params
                ),
            );
        }
        let args = ArgBlock::Copied(g.buf.clone());
        drop(g);
        s.push(Task::Ext(Arc::new(KernelTask {
            builtin: f.def.builtin,
            args,
        })))
    })
}

/// `aclError aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t numBlocks, const void*
/// argsData, size_t argsSize, aclrtStream stream)`: queues the kernel; it reads its argument
/// block from `argsData` (device memory) when it runs.
///
/// # Safety
/// `args_data` must point to `args_size` bytes that stay valid until the kernel ran, and so
/// must the memory its pointer arguments name.
#[no_mangle]
pub unsafe extern "C" fn aclrtLaunchKernel(
    func_handle: *mut c_void,
    num_blocks: u32,
    args_data: *const c_void,
    args_size: usize,
    stream: *mut c_void,
) -> i32 {
    ffi("aclrtLaunchKernel", true, || {
        non_null(func_handle, "funcHandle")?;
        non_null(args_data, "argsData")?;
        if num_blocks == 0 {
            return err(ACL_ERROR_RT_PARAM_INVALID, "numBlocks is 0");
        }
        let (f, s) = launch_target(func_handle, stream)?;
        let want = f.def.builtin.args_size();
        if args_size != want {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!(
                    "kernel '{}' takes {want} bytes of arguments; argsSize is {args_size}",
                    f.def.name
                ),
            );
        }
        if !(args_data as usize).is_multiple_of(8) {
            return err(ACL_ERROR_RT_PARAM_INVALID, "argsData is not 8-byte aligned");
        }
        s.push(Task::Ext(Arc::new(KernelTask {
            builtin: f.def.builtin,
            args: ArgBlock::Device {
                ptr: args_data as usize,
                len: args_size,
            },
        })))
    })
}
