//! Initialisation, the device and the (primary) context: `cuInit`, `cuDevice*`, `cuCtx*`,
//! `cuMemGetInfo_v2` and the capture-mode exchange.

use super::*;

pub(super) static INITIALISED: AtomicBool = AtomicBool::new(false);

pub(super) fn initialised() -> R {
    if INITIALISED.load(Ordering::Acquire) {
        Ok(())
    } else {
        Err(NOT_INITIALIZED)
    }
}

pub(super) fn device(d: CUdevice) -> R {
    initialised()?;
    if d == 0 {
        Ok(())
    } else {
        Err(INVALID_DEVICE)
    }
}

/// The one (primary) context.
pub(super) static CONTEXT: u64 = 0x5843_5458; // "XCTX"

pub(super) fn context_handle() -> CUcontext {
    std::ptr::addr_of!(CONTEXT) as CUcontext
}

thread_local! {
    static CURRENT: Cell<usize> = const { Cell::new(0) };
    static CAPTURE_MODE: Cell<u32> = const { Cell::new(0) };
}

/// Refuses a call that needs a current context when the thread has none.
pub(super) fn current() -> R {
    if CURRENT.with(|c| c.get()) == context_handle() as usize {
        Ok(())
    } else {
        Err(INVALID_CONTEXT)
    }
}

/// `cuInit`.
#[no_mangle]
pub extern "C" fn cuInit(flags: u32) -> CUresult {
    run(F::cuInit, || {
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        INITIALISED.store(true, Ordering::Release);
        Ok(())
    })
}

/// `cuDriverGetVersion`.
#[no_mangle]
pub extern "C" fn cuDriverGetVersion(v: *mut i32) -> CUresult {
    // SAFETY: the caller's out-pointer.
    run(F::cuDriverGetVersion, || unsafe { put(v, DRIVER_VERSION) })
}

/// `cuDeviceGetCount`: one device.
#[no_mangle]
pub extern "C" fn cuDeviceGetCount(n: *mut i32) -> CUresult {
    run(F::cuDeviceGetCount, || {
        initialised()?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(n, 1) }
    })
}

/// `cuDeviceGet`.
#[no_mangle]
pub extern "C" fn cuDeviceGet(d: *mut CUdevice, ordinal: i32) -> CUresult {
    run(F::cuDeviceGet, || {
        device(ordinal)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(d, ordinal) }
    })
}

/// The value of a device attribute (the `CUdevice_attribute` number), plausible for an
/// H100-class device; 0 for attributes not listed.
pub(super) fn attribute(a: u32) -> i32 {
    match a {
        1 => 1024,      // MAX_THREADS_PER_BLOCK
        2 | 3 => 1024,  // MAX_BLOCK_DIM_X / Y
        4 => 64,        // MAX_BLOCK_DIM_Z
        5 => i32::MAX,  // MAX_GRID_DIM_X
        6 | 7 => 65535, // MAX_GRID_DIM_Y / Z
        8 => 49152,     // MAX_SHARED_MEMORY_PER_BLOCK
        10 => 32,       // WARP_SIZE
        16 => 132,      // MULTIPROCESSOR_COUNT
        41 => 1,        // UNIFIED_ADDRESSING
        75 => 9,        // COMPUTE_CAPABILITY_MAJOR
        76 => 0,        // COMPUTE_CAPABILITY_MINOR
        95 => 1,        // COOPERATIVE_LAUNCH
        97 => 232448,   // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
        102 => 1,       // VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
        103 => 1,       // HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
        115 => 1,       // MEMORY_POOLS_SUPPORTED (the default pool only)
        _ => 0,         // among them MANAGED_MEMORY, stream memory ops
    }
}

/// `cuDeviceGetAttribute`.
#[no_mangle]
pub extern "C" fn cuDeviceGetAttribute(v: *mut i32, attr: u32, d: CUdevice) -> CUresult {
    run(F::cuDeviceGetAttribute, || {
        device(d)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(v, attribute(attr)) }
    })
}

/// `cuDeviceGetName`.
#[no_mangle]
pub extern "C" fn cuDeviceGetName(name: *mut c_char, len: i32, d: CUdevice) -> CUresult {
    run(F::cuDeviceGetName, || {
        device(d)?;
        // SAFETY: the caller's buffer of `len` bytes.
        unsafe { put_str(name, len, "xstream null driver (a test double, not a GPU)") }
    })
}

/// `cuDeviceTotalMem_v2`.
#[no_mangle]
pub extern "C" fn cuDeviceTotalMem_v2(bytes: *mut usize, d: CUdevice) -> CUresult {
    run(F::cuDeviceTotalMem_v2, || {
        device(d)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(bytes, TOTAL_MEM) }
    })
}

/// `cuDeviceGetUuid_v2`: a fixed UUID.
#[no_mangle]
pub extern "C" fn cuDeviceGetUuid_v2(uuid: *mut [u8; 16], d: CUdevice) -> CUresult {
    run(F::cuDeviceGetUuid_v2, || {
        device(d)?;
        // SAFETY: the caller's 16-byte out-pointer.
        unsafe { put(uuid, *b"xstream-nulldrv0") }
    })
}

/// `cuDeviceGetPCIBusId`.
#[no_mangle]
pub extern "C" fn cuDeviceGetPCIBusId(buf: *mut c_char, len: i32, d: CUdevice) -> CUresult {
    run(F::cuDeviceGetPCIBusId, || {
        device(d)?;
        // SAFETY: the caller's buffer of `len` bytes.
        unsafe { put_str(buf, len, "0000:00:00.0") }
    })
}

/// `cuDevicePrimaryCtxRetain`.
#[no_mangle]
pub extern "C" fn cuDevicePrimaryCtxRetain(ctx: *mut CUcontext, d: CUdevice) -> CUresult {
    run(F::cuDevicePrimaryCtxRetain, || {
        device(d)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(ctx, context_handle()) }
    })
}

/// `cuDevicePrimaryCtxRelease_v2`.
#[no_mangle]
pub extern "C" fn cuDevicePrimaryCtxRelease_v2(d: CUdevice) -> CUresult {
    run(F::cuDevicePrimaryCtxRelease_v2, || device(d))
}

/// `cuCtxGetCurrent`.
#[no_mangle]
pub extern "C" fn cuCtxGetCurrent(ctx: *mut CUcontext) -> CUresult {
    run(F::cuCtxGetCurrent, || {
        let c = CURRENT.with(|c| c.get());
        // SAFETY: the caller's out-pointer.
        unsafe { put(ctx, c as CUcontext) }
    })
}

/// `cuCtxSetCurrent`: the primary context or none.
#[no_mangle]
pub extern "C" fn cuCtxSetCurrent(ctx: CUcontext) -> CUresult {
    run(F::cuCtxSetCurrent, || {
        if !ctx.is_null() && ctx != context_handle() {
            return Err(INVALID_CONTEXT);
        }
        CURRENT.with(|c| c.set(ctx as usize));
        Ok(())
    })
}

/// `cuCtxGetStreamPriorityRange`.
#[no_mangle]
pub extern "C" fn cuCtxGetStreamPriorityRange(least: *mut i32, greatest: *mut i32) -> CUresult {
    run(F::cuCtxGetStreamPriorityRange, || {
        current()?;
        // SAFETY: the caller's out-pointers (either may be null: it is then not written).
        unsafe {
            if !least.is_null() {
                put(least, 0)?;
            }
            if !greatest.is_null() {
                put(greatest, PRIORITY_GREATEST)?;
            }
        }
        Ok(())
    })
}

/// `cuCtxSynchronize`: waits for every host function queued so far.
#[no_mangle]
pub extern "C" fn cuCtxSynchronize() -> CUresult {
    run(F::cuCtxSynchronize, || {
        current()?;
        state::wait(state::issued())
    })
}

/// `cuMemGetInfo_v2`.
#[no_mangle]
pub extern "C" fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> CUresult {
    run(F::cuMemGetInfo_v2, || {
        current()?;
        // SAFETY: the caller's out-pointers.
        unsafe {
            put(free, TOTAL_MEM)?;
            put(total, TOTAL_MEM)
        }
    })
}

/// `cuThreadExchangeStreamCaptureMode` (the mode is only remembered: nothing is captured).
#[no_mangle]
pub extern "C" fn cuThreadExchangeStreamCaptureMode(mode: *mut u32) -> CUresult {
    run(F::cuThreadExchangeStreamCaptureMode, || {
        if mode.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: not null: the caller's in/out pointer.
        let want = unsafe { mode.read() };
        if want > 2 {
            return Err(INVALID_VALUE);
        }
        let old = CAPTURE_MODE.with(|m| m.replace(want));
        // SAFETY: as above.
        unsafe { put(mode, old) }
    })
}
