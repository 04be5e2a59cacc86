//! Modules, functions and launches: `cuModule*` (PTX text only), `cuFunc*`, `cuLaunchKernel`
//! (checked, counted, never run) and `cuLaunchHostFunc` (queued to one background thread that
//! runs host functions in order).

use super::*;

pub(super) const MODULE_MAGIC: u64 = 0x584d_4f44_4e55_4c4c;
pub(super) const FUNCTION_MAGIC: u64 = 0x5846_554e_4e55_4c4c;

pub(super) struct ModuleObj {
    magic: u64,
    alive: &'static AtomicBool,
    functions: Vec<&'static FunctionObj>,
}

pub(super) struct FunctionObj {
    magic: u64,
    module_alive: &'static AtomicBool,
    name: String,
    params: Vec<(usize, usize)>,
}

pub(super) fn module(h: CUmodule) -> Result<&'static ModuleObj, u32> {
    if h.is_null() {
        return Err(INVALID_HANDLE);
    }
    // SAFETY: a module handle is the address of a leaked `ModuleObj` (never freed).
    let m = unsafe { &*(h as *const ModuleObj) };
    if m.magic != MODULE_MAGIC || !m.alive.load(Ordering::Acquire) {
        return Err(INVALID_HANDLE);
    }
    Ok(m)
}

pub(super) fn function(h: CUfunction) -> Result<&'static FunctionObj, u32> {
    if h.is_null() {
        return Err(INVALID_HANDLE);
    }
    // SAFETY: a function handle is the address of a leaked `FunctionObj` (never freed).
    let f = unsafe { &*(h as *const FunctionObj) };
    if f.magic != FUNCTION_MAGIC || !f.module_alive.load(Ordering::Acquire) {
        return Err(INVALID_HANDLE);
    }
    Ok(f)
}

/// The `CU_JIT_ERROR_LOG_BUFFER` (5) and `..._SIZE_BYTES` (6) options: writes `msg` into the
/// log buffer and its length into the size slot.
///
/// # Safety
/// `options` and `values` hold `n` entries each (or are null with `n == 0`); a log buffer
/// option points to a writable buffer of the size the size option gives.
pub(super) unsafe fn write_jit_log(
    n: u32,
    options: *const u32,
    values: *mut *mut c_void,
    msg: &str,
) {
    if n == 0 || options.is_null() || values.is_null() {
        return;
    }
    let (mut buf, mut size_slot) = (None, None);
    for i in 0..n as usize {
        // SAFETY: `i < n` entries (the caller's contract).
        match unsafe { options.add(i).read() } {
            // SAFETY: as above, for the values array.
            5 => buf = Some(unsafe { values.add(i).read() }),
            6 => size_slot = Some(i),
            _ => {}
        }
    }
    let (Some(buf), Some(slot)) = (buf, size_slot) else {
        return;
    };
    // SAFETY: `slot < n`; the size travels as an integer in the pointer slot (driver API).
    let cap = unsafe { values.add(slot).read() } as usize;
    if buf.is_null() || cap == 0 {
        return;
    }
    let used = msg.len().min(cap - 1);
    // SAFETY: the buffer holds `cap` bytes (the caller's contract) and `used + 1 <= cap`.
    unsafe {
        std::ptr::copy_nonoverlapping(msg.as_ptr(), buf.cast::<u8>(), used);
        buf.cast::<u8>().add(used).write(0);
        values.add(slot).write(used as *mut c_void);
    }
}

/// `cuModuleLoadDataEx` of NUL-terminated PTX text (a cubin or fatbin image is refused with
/// `CUDA_ERROR_INVALID_IMAGE`: the null driver reads only PTX's entry declarations).
#[no_mangle]
pub extern "C" fn cuModuleLoadDataEx(
    out: *mut CUmodule,
    image: *const c_void,
    n: u32,
    options: *const u32,
    values: *mut *mut c_void,
) -> CUresult {
    run(F::cuModuleLoadDataEx, || {
        current()?;
        if out.is_null() || image.is_null() {
            return Err(INVALID_VALUE);
        }
        let p = image.cast::<u8>();
        // SAFETY: `image` is readable up to its NUL (PTX) or is a binary image at least as
        // long as its header; byte 1 is read only when byte 0 is not NUL.
        let binary = unsafe {
            let b0 = p.read();
            b0 == 0x7f || (b0 == 0x50 && p.add(1).read() == 0xed)
        };
        let parsed = if binary {
            Err((
                INVALID_IMAGE,
                "null driver: cubin/fatbin images are not read (PTX text only)".to_string(),
            ))
        } else {
            // SAFETY: not a binary image, so NUL-terminated PTX text (the driver contract).
            let text = unsafe { CStr::from_ptr(image.cast::<c_char>()) };
            match text.to_str() {
                Ok(t) => ptx::entries(t).map_err(|m| (INVALID_PTX, m)),
                Err(_) => Err((INVALID_PTX, "null driver: PTX is not UTF-8".to_string())),
            }
        };
        let entries = match parsed {
            Ok(e) => e,
            Err((code, msg)) => {
                // SAFETY: the caller's option arrays (`n` entries each).
                unsafe { write_jit_log(n, options, values, &msg) };
                return Err(code);
            }
        };
        let alive: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(true)));
        let functions = entries
            .into_iter()
            .map(|e| {
                &*Box::leak(Box::new(FunctionObj {
                    magic: FUNCTION_MAGIC,
                    module_alive: alive,
                    name: e.name,
                    params: e.params,
                }))
            })
            .collect();
        let m: &'static ModuleObj = Box::leak(Box::new(ModuleObj {
            magic: MODULE_MAGIC,
            alive,
            functions,
        }));
        // SAFETY: the caller's option arrays; nothing to report.
        unsafe { write_jit_log(n, options, values, "") };
        // SAFETY: checked not null; the caller's out-pointer.
        unsafe { put(out, m as *const ModuleObj as CUmodule) }
    })
}

/// `cuModuleGetFunction`: `CUDA_ERROR_NOT_FOUND` for a name without `.entry`.
#[no_mangle]
pub extern "C" fn cuModuleGetFunction(
    out: *mut CUfunction,
    m: CUmodule,
    name: *const c_char,
) -> CUresult {
    run(F::cuModuleGetFunction, || {
        let m = module(m)?;
        if name.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: not null: a NUL-terminated name (the driver contract).
        let name = unsafe { CStr::from_ptr(name) };
        let f = m
            .functions
            .iter()
            .find(|f| f.name.as_bytes() == name.to_bytes())
            .ok_or(NOT_FOUND)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(out, *f as *const FunctionObj as CUfunction) }
    })
}

/// `cuModuleUnload`: its functions are invalid afterwards.
#[no_mangle]
pub extern "C" fn cuModuleUnload(m: CUmodule) -> CUresult {
    run(F::cuModuleUnload, || {
        module(m)?.alive.store(false, Ordering::Release);
        Ok(())
    })
}

/// `cuFuncGetParamInfo`: offset and size from the `.param` declaration;
/// `CUDA_ERROR_INVALID_VALUE` past the last parameter.
#[no_mangle]
pub extern "C" fn cuFuncGetParamInfo(
    f: CUfunction,
    index: usize,
    offset: *mut usize,
    size: *mut usize,
) -> CUresult {
    run(F::cuFuncGetParamInfo, || {
        let f = function(f)?;
        let &(off, len) = f.params.get(index).ok_or(INVALID_VALUE)?;
        // SAFETY: the caller's out-pointers.
        unsafe {
            put(offset, off)?;
            put(size, len)
        }
    })
}

/// `cuFuncGetAttribute`: 1024 threads per block (0), 48 KiB dynamic shared memory (8), 0 for
/// the rest.
#[no_mangle]
pub extern "C" fn cuFuncGetAttribute(v: *mut i32, attr: u32, f: CUfunction) -> CUresult {
    run(F::cuFuncGetAttribute, || {
        function(f)?;
        let x = match attr {
            0 => 1024,
            8 => 49152,
            _ => 0,
        };
        // SAFETY: the caller's out-pointer.
        unsafe { put(v, x) }
    })
}

/// The checks of a launch (nothing runs): live function and stream, dimensions at least 1,
/// one non-null value pointer per parameter.
pub(super) fn check_launch(
    f: CUfunction,
    h: CUstream,
    dims: [u32; 6],
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> R {
    let f = function(f)?;
    stream(h)?;
    if dims.contains(&0) {
        return Err(INVALID_VALUE);
    }
    if f.params.is_empty() || !extra.is_null() {
        return Ok(());
    }
    if params.is_null() {
        return Err(INVALID_VALUE);
    }
    for i in 0..f.params.len() {
        // SAFETY: the driver reads one value pointer per parameter of the function (the
        // driver contract of `kernelParams`).
        if unsafe { params.add(i).read() }.is_null() {
            return Err(INVALID_VALUE);
        }
    }
    Ok(())
}

/// `cuLaunchKernel`: checked and counted; the kernel does not run.
#[no_mangle]
pub extern "C" fn cuLaunchKernel(
    f: CUfunction,
    gx: u32,
    gy: u32,
    gz: u32,
    bx: u32,
    by: u32,
    bz: u32,
    _shared: u32,
    h: CUstream,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    run(F::cuLaunchKernel, || {
        check_launch(f, h, [gx, gy, gz, bx, by, bz], params, extra)
    })
}

/// `CUlaunchConfig` (the fields in the header's order).
#[repr(C)]
pub struct LaunchConfig {
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem: u32,
    stream: CUstream,
    attrs: *mut c_void,
    num_attrs: u32,
}

/// `cuLaunchKernelEx`: as [`cuLaunchKernel`]; the attributes are not looked at.
#[no_mangle]
pub extern "C" fn cuLaunchKernelEx(
    config: *const LaunchConfig,
    f: CUfunction,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    run(F::cuLaunchKernelEx, || {
        if config.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: not null: the caller's launch configuration.
        let c = unsafe { &*config };
        let [gx, gy, gz] = c.grid;
        let [bx, by, bz] = c.block;
        check_launch(f, c.stream, [gx, gy, gz, bx, by, bz], params, extra)
    })
}

/// A host function and its argument, moved to the host-function thread.
pub(super) struct HostCall(unsafe extern "C" fn(*mut c_void), *mut c_void);
// SAFETY: the driver API hands host functions to a driver thread; their argument is the
// caller's to make safe there (as with the real driver).
unsafe impl Send for HostCall {}

impl HostCall {
    fn call(self) {
        // SAFETY: the caller of `cuLaunchHostFunc` passed a function for this argument.
        unsafe { (self.0)(self.1) }
    }
}

/// `cuLaunchHostFunc`: queued to the one host-function thread, which runs host functions in
/// the order they were queued.
#[no_mangle]
pub extern "C" fn cuLaunchHostFunc(h: CUstream, f: CUhostFn, user: *mut c_void) -> CUresult {
    run(F::cuLaunchHostFunc, || {
        let s = stream(h)?;
        let f = f.ok_or(INVALID_VALUE)?;
        // Behind what the stream waits for already: the queue runs in order.
        let call = HostCall(f, user);
        let t = state::enqueue(Box::new(move || call.call())).map_err(|()| UNKNOWN)?;
        s.ticket.fetch_max(t, Ordering::AcqRel);
        s.host_fns.fetch_add(1, Ordering::Relaxed);
        Ok(())
    })
}
