//! The FFI surface: the exported driver functions (`#[no_mangle] extern "C"`, declared here
//! from the driver API's documented prototypes) and the `xnull_*` controls. Every function
//! counts its call, then runs its body inside `catch_unwind` (a panic returns
//! `CUDA_ERROR_UNKNOWN`, never unwinds into the caller). All of the crate's `unsafe` is here.
//!
//! Handles (contexts, streams, events, modules, functions) are addresses of objects the null
//! driver leaks on purpose: a destroyed handle stays readable, so a stale one is refused with
//! `CUDA_ERROR_INVALID_HANDLE` instead of being undefined behaviour. A handle the null driver
//! never returned is outside the driver's contract (as with the real driver).
#![allow(unsafe_code, non_snake_case)]

use std::alloc::Layout;
use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::ptx;
use crate::state::{self, hit, F};

/// `CUresult`.
type CUresult = u32;
type CUdevice = i32;
type CUdeviceptr = u64;
type CUcontext = *mut c_void;
type CUstream = *mut c_void;
type CUevent = *mut c_void;
type CUmodule = *mut c_void;
type CUfunction = *mut c_void;
type CUhostFn = Option<unsafe extern "C" fn(*mut c_void)>;

const SUCCESS: u32 = 0;
const INVALID_VALUE: u32 = 1;
const OUT_OF_MEMORY: u32 = 2;
const NOT_INITIALIZED: u32 = 3;
const INVALID_DEVICE: u32 = 101;
const INVALID_IMAGE: u32 = 200;
const INVALID_CONTEXT: u32 = 201;
const INVALID_PTX: u32 = 218;
const INVALID_HANDLE: u32 = 400;
const NOT_FOUND: u32 = 500;
const NOT_READY: u32 = 600;
const UNKNOWN: u32 = 999;

/// The driver version reported (13.0, the bindings xstream-cuda builds with by default).
const DRIVER_VERSION: i32 = 13000;
/// Device memory reported (16 GiB; the null driver has no limit but the host's).
const TOTAL_MEM: usize = 16 << 30;
/// Alignment of device allocations (the driver guarantees at least 256 bytes).
const DEVICE_ALIGN: usize = 256;
const HOST_ALIGN: usize = 4096;
/// `cuCtxGetStreamPriorityRange`: least 0, greatest -5.
const PRIORITY_GREATEST: i32 = -5;

type R = Result<(), u32>;

/// Counts a call of `f`, then runs `body` with panics caught.
#[inline]
fn run(f: F, body: impl FnOnce() -> R) -> CUresult {
    hit(f);
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => SUCCESS,
        Ok(Err(c)) => c,
        Err(_) => UNKNOWN,
    }
}

/// Writes `v` through an out-pointer of the caller.
///
/// # Safety
/// `p` is null (refused with `CUDA_ERROR_INVALID_VALUE`) or valid for a write of `T`.
unsafe fn put<T>(p: *mut T, v: T) -> R {
    if p.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: not null, and valid for a write of `T` by the caller's contract.
    unsafe { p.write(v) };
    Ok(())
}

/// Copies `s` NUL-terminated and truncated into the caller's `len`-byte buffer.
///
/// # Safety
/// `buf` is null (refused) or valid for writes of `len` bytes.
unsafe fn put_str(buf: *mut c_char, len: i32, s: &str) -> R {
    if buf.is_null() || len <= 0 {
        return Err(INVALID_VALUE);
    }
    let n = s.len().min(len as usize - 1);
    // SAFETY: `buf` holds `len` bytes (the caller's contract) and `n + 1 <= len`; `s` is a
    // distinct Rust string.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), n);
        buf.add(n).write(0);
    }
    Ok(())
}

// ---- Initialisation, device, context ------------------------------------------------------

static INITIALISED: AtomicBool = AtomicBool::new(false);

fn initialised() -> R {
    if INITIALISED.load(Ordering::Acquire) {
        Ok(())
    } else {
        Err(NOT_INITIALIZED)
    }
}

fn device(d: CUdevice) -> R {
    initialised()?;
    if d == 0 {
        Ok(())
    } else {
        Err(INVALID_DEVICE)
    }
}

/// The one (primary) context.
static CONTEXT: u64 = 0x5843_5458; // "XCTX"

fn context_handle() -> CUcontext {
    std::ptr::addr_of!(CONTEXT) as CUcontext
}

thread_local! {
    static CURRENT: Cell<usize> = const { Cell::new(0) };
    static CAPTURE_MODE: Cell<u32> = const { Cell::new(0) };
}

/// Refuses a call that needs a current context when the thread has none.
fn current() -> R {
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
fn attribute(a: u32) -> i32 {
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
        _ => 0,         // among them MANAGED_MEMORY, MEMORY_POOLS_SUPPORTED, stream memory ops
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

// ---- Streams and events -------------------------------------------------------------------

const STREAM_MAGIC: u64 = 0x5854_524d_4e55_4c4c;
const EVENT_MAGIC: u64 = 0x5845_564e_4e55_4c4c;

/// A stream: the ticket of the last host function it must wait for.
struct StreamObj {
    magic: u64,
    alive: AtomicBool,
    flags: u32,
    priority: i32,
    id: u64,
    ticket: AtomicU64,
}

/// The special handles (0, `CU_STREAM_LEGACY` = 1, `CU_STREAM_PER_THREAD` = 2): ordered after
/// every host function queued so far on any stream.
static DEFAULT_STREAM: StreamObj = StreamObj {
    magic: STREAM_MAGIC,
    alive: AtomicBool::new(true),
    flags: 0,
    priority: 0,
    id: 0,
    ticket: AtomicU64::new(0),
};

static NEXT_STREAM_ID: AtomicU64 = AtomicU64::new(16);

fn stream(h: CUstream) -> Result<&'static StreamObj, u32> {
    if (h as usize) <= 2 {
        return Ok(&DEFAULT_STREAM);
    }
    // SAFETY: a stream handle is the address of a leaked `StreamObj` (never freed, see the
    // module docs), so it is readable for the life of the process.
    let s = unsafe { &*(h as *const StreamObj) };
    if s.magic != STREAM_MAGIC || !s.alive.load(Ordering::Acquire) {
        return Err(INVALID_HANDLE);
    }
    Ok(s)
}

/// The ticket work on `s` is ordered after.
fn target(h: CUstream, s: &StreamObj) -> u64 {
    if (h as usize) <= 2 {
        state::issued()
    } else {
        s.ticket.load(Ordering::Acquire)
    }
}

fn new_stream(out: *mut CUstream, flags: u32, priority: i32) -> R {
    current()?;
    if out.is_null() || flags > 1 {
        return Err(INVALID_VALUE);
    }
    let s: &'static StreamObj = Box::leak(Box::new(StreamObj {
        magic: STREAM_MAGIC,
        alive: AtomicBool::new(true),
        flags,
        priority: priority.clamp(PRIORITY_GREATEST, 0),
        id: NEXT_STREAM_ID.fetch_add(1, Ordering::Relaxed),
        ticket: AtomicU64::new(0),
    }));
    // SAFETY: checked not null; the caller's out-pointer.
    unsafe { put(out, s as *const StreamObj as CUstream) }
}

/// `cuStreamCreate`.
#[no_mangle]
pub extern "C" fn cuStreamCreate(out: *mut CUstream, flags: u32) -> CUresult {
    run(F::cuStreamCreate, || new_stream(out, flags, 0))
}

/// `cuStreamCreateWithPriority` (the priority is clamped to the range, as the driver does).
#[no_mangle]
pub extern "C" fn cuStreamCreateWithPriority(
    out: *mut CUstream,
    flags: u32,
    priority: i32,
) -> CUresult {
    run(F::cuStreamCreateWithPriority, || {
        new_stream(out, flags, priority)
    })
}

/// `cuStreamDestroy_v2`: the handle is invalid afterwards; queued host functions still run.
#[no_mangle]
pub extern "C" fn cuStreamDestroy_v2(h: CUstream) -> CUresult {
    run(F::cuStreamDestroy_v2, || {
        if (h as usize) <= 2 {
            return Err(INVALID_HANDLE);
        }
        stream(h)?.alive.store(false, Ordering::Release);
        Ok(())
    })
}

/// `cuStreamQuery`: `CUDA_ERROR_NOT_READY` while a host function it waits for has not run.
#[no_mangle]
pub extern "C" fn cuStreamQuery(h: CUstream) -> CUresult {
    run(F::cuStreamQuery, || {
        let s = stream(h)?;
        if state::done(target(h, s)) {
            Ok(())
        } else {
            Err(NOT_READY)
        }
    })
}

/// `cuStreamSynchronize`.
#[no_mangle]
pub extern "C" fn cuStreamSynchronize(h: CUstream) -> CUresult {
    run(F::cuStreamSynchronize, || {
        let s = stream(h)?;
        state::wait(target(h, s))
    })
}

/// `cuStreamWaitEvent`: later work on the stream is ordered after the event's host functions.
#[no_mangle]
pub extern "C" fn cuStreamWaitEvent(h: CUstream, e: CUevent, flags: u32) -> CUresult {
    run(F::cuStreamWaitEvent, || {
        let s = stream(h)?;
        let e = event(e)?;
        if flags > 1 {
            return Err(INVALID_VALUE);
        }
        s.ticket
            .fetch_max(e.ticket.load(Ordering::Acquire), Ordering::AcqRel);
        Ok(())
    })
}

/// `cuStreamGetFlags`.
#[no_mangle]
pub extern "C" fn cuStreamGetFlags(h: CUstream, flags: *mut u32) -> CUresult {
    run(F::cuStreamGetFlags, || {
        let s = stream(h)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(flags, s.flags) }
    })
}

/// `cuStreamGetPriority`.
#[no_mangle]
pub extern "C" fn cuStreamGetPriority(h: CUstream, p: *mut i32) -> CUresult {
    run(F::cuStreamGetPriority, || {
        let s = stream(h)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(p, s.priority) }
    })
}

/// `cuStreamGetId`: created streams from 16 up; the special handles 1 (null and legacy) and 2
/// (per-thread).
#[no_mangle]
pub extern "C" fn cuStreamGetId(h: CUstream, id: *mut u64) -> CUresult {
    run(F::cuStreamGetId, || {
        let s = stream(h)?;
        let v = match h as usize {
            0 | 1 => 1,
            2 => 2,
            _ => s.id,
        };
        // SAFETY: the caller's out-pointer.
        unsafe { put(id, v) }
    })
}

/// An event: the ticket its record was ordered after.
struct EventObj {
    magic: u64,
    alive: AtomicBool,
    ticket: AtomicU64,
}

fn event(h: CUevent) -> Result<&'static EventObj, u32> {
    if h.is_null() {
        return Err(INVALID_HANDLE);
    }
    // SAFETY: an event handle is the address of a leaked `EventObj` (never freed).
    let e = unsafe { &*(h as *const EventObj) };
    if e.magic != EVENT_MAGIC || !e.alive.load(Ordering::Acquire) {
        return Err(INVALID_HANDLE);
    }
    Ok(e)
}

/// `cuEventCreate`.
#[no_mangle]
pub extern "C" fn cuEventCreate(out: *mut CUevent, flags: u32) -> CUresult {
    run(F::cuEventCreate, || {
        current()?;
        if out.is_null() || flags > 0xf {
            return Err(INVALID_VALUE);
        }
        let e: &'static EventObj = Box::leak(Box::new(EventObj {
            magic: EVENT_MAGIC,
            alive: AtomicBool::new(true),
            ticket: AtomicU64::new(0),
        }));
        // SAFETY: checked not null; the caller's out-pointer.
        unsafe { put(out, e as *const EventObj as CUevent) }
    })
}

/// `cuEventRecord`.
#[no_mangle]
pub extern "C" fn cuEventRecord(e: CUevent, h: CUstream) -> CUresult {
    run(F::cuEventRecord, || {
        let e = event(e)?;
        let s = stream(h)?;
        e.ticket.store(target(h, s), Ordering::Release);
        Ok(())
    })
}

/// `cuEventQuery`.
#[no_mangle]
pub extern "C" fn cuEventQuery(e: CUevent) -> CUresult {
    run(F::cuEventQuery, || {
        if state::done(event(e)?.ticket.load(Ordering::Acquire)) {
            Ok(())
        } else {
            Err(NOT_READY)
        }
    })
}

/// `cuEventSynchronize`.
#[no_mangle]
pub extern "C" fn cuEventSynchronize(e: CUevent) -> CUresult {
    run(F::cuEventSynchronize, || {
        state::wait(event(e)?.ticket.load(Ordering::Acquire))
    })
}

/// `cuEventDestroy_v2`.
#[no_mangle]
pub extern "C" fn cuEventDestroy_v2(e: CUevent) -> CUresult {
    run(F::cuEventDestroy_v2, || {
        event(e)?.alive.store(false, Ordering::Release);
        Ok(())
    })
}

// ---- Modules, functions, launches ---------------------------------------------------------

const MODULE_MAGIC: u64 = 0x584d_4f44_4e55_4c4c;
const FUNCTION_MAGIC: u64 = 0x5846_554e_4e55_4c4c;

struct ModuleObj {
    magic: u64,
    alive: &'static AtomicBool,
    functions: Vec<&'static FunctionObj>,
}

struct FunctionObj {
    magic: u64,
    module_alive: &'static AtomicBool,
    name: String,
    params: Vec<(usize, usize)>,
}

fn module(h: CUmodule) -> Result<&'static ModuleObj, u32> {
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

fn function(h: CUfunction) -> Result<&'static FunctionObj, u32> {
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
unsafe fn write_jit_log(n: u32, options: *const u32, values: *mut *mut c_void, msg: &str) {
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
fn check_launch(
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
struct HostCall(unsafe extern "C" fn(*mut c_void), *mut c_void);
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
        Ok(())
    })
}

// ---- Memory -------------------------------------------------------------------------------

/// `cuMemAlloc_v2`: zeroed host heap memory, 256-byte aligned.
#[no_mangle]
pub extern "C" fn cuMemAlloc_v2(out: *mut CUdeviceptr, len: usize) -> CUresult {
    run(F::cuMemAlloc_v2, || {
        current()?;
        if out.is_null() || len == 0 {
            return Err(INVALID_VALUE);
        }
        let layout = Layout::from_size_align(len, DEVICE_ALIGN).map_err(|_| OUT_OF_MEMORY)?;
        // SAFETY: `layout` has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        if p.is_null() {
            return Err(OUT_OF_MEMORY);
        }
        state::device_mem().insert(p as u64, len);
        // SAFETY: checked not null; the caller's out-pointer.
        unsafe { put(out, p as u64) }
    })
}

/// `cuMemFree_v2`.
#[no_mangle]
pub extern "C" fn cuMemFree_v2(p: CUdeviceptr) -> CUresult {
    run(F::cuMemFree_v2, || {
        let len = state::device_mem().remove(p).ok_or(INVALID_VALUE)?;
        let layout = Layout::from_size_align(len, DEVICE_ALIGN).map_err(|_| UNKNOWN)?;
        // SAFETY: `p` was allocated by `cuMemAlloc_v2` with this layout and was in the table
        // (removed now, so it is freed once).
        unsafe { std::alloc::dealloc(p as *mut u8, layout) };
        Ok(())
    })
}

/// `cuMemGetAddressRange_v2`.
#[no_mangle]
pub extern "C" fn cuMemGetAddressRange_v2(
    base: *mut CUdeviceptr,
    size: *mut usize,
    p: CUdeviceptr,
) -> CUresult {
    run(F::cuMemGetAddressRange_v2, || {
        let (b, n) = state::device_mem().containing(p, 1).ok_or(NOT_FOUND)?;
        // SAFETY: the caller's out-pointers (either may be null: it is then not written).
        unsafe {
            if !base.is_null() {
                put(base, b)?;
            }
            if !size.is_null() {
                put(size, n)?;
            }
        }
        Ok(())
    })
}

/// `cuMemHostAlloc`: zeroed host heap memory, page aligned (nothing is page-locked).
#[no_mangle]
pub extern "C" fn cuMemHostAlloc(out: *mut *mut c_void, len: usize, flags: u32) -> CUresult {
    run(F::cuMemHostAlloc, || {
        current()?;
        if out.is_null() || len == 0 || flags > 0xf {
            return Err(INVALID_VALUE);
        }
        let layout = Layout::from_size_align(len, HOST_ALIGN).map_err(|_| OUT_OF_MEMORY)?;
        // SAFETY: `layout` has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        if p.is_null() {
            return Err(OUT_OF_MEMORY);
        }
        state::host_mem().insert(p as u64, len);
        // SAFETY: checked not null; the caller's out-pointer.
        unsafe { put(out, p.cast::<c_void>()) }
    })
}

/// `cuMemFreeHost`.
#[no_mangle]
pub extern "C" fn cuMemFreeHost(p: *mut c_void) -> CUresult {
    run(F::cuMemFreeHost, || {
        let len = state::host_mem().remove(p as u64).ok_or(INVALID_VALUE)?;
        let layout = Layout::from_size_align(len, HOST_ALIGN).map_err(|_| UNKNOWN)?;
        // SAFETY: allocated by `cuMemHostAlloc` with this layout, freed once (removed above).
        unsafe { std::alloc::dealloc(p.cast::<u8>(), layout) };
        Ok(())
    })
}

/// Checks that `[p, p + n)` lies in one device allocation.
fn device_range(p: CUdeviceptr, n: usize) -> R {
    state::device_mem()
        .containing(p, n)
        .map(|_| ())
        .ok_or(INVALID_VALUE)
}

/// Orders a memory operation on `h` after the host functions it waits for (the copy then runs
/// at once, on the calling thread).
fn in_order(h: CUstream) -> R {
    let s = stream(h)?;
    state::wait(target(h, s))
}

/// `cuMemcpyHtoDAsync_v2`: copies at once (after the stream's pending host functions).
#[no_mangle]
pub extern "C" fn cuMemcpyHtoDAsync_v2(
    dst: CUdeviceptr,
    src: *const c_void,
    n: usize,
    h: CUstream,
) -> CUresult {
    run(F::cuMemcpyHtoDAsync_v2, || {
        in_order(h)?;
        if n == 0 {
            return Ok(());
        }
        device_range(dst, n)?;
        if src.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: `dst..dst+n` is inside a live device allocation (checked); `src` is readable
        // for `n` bytes (the caller's contract); `ptr::copy` allows overlap.
        unsafe { std::ptr::copy(src.cast::<u8>(), dst as *mut u8, n) };
        Ok(())
    })
}

/// `cuMemcpyDtoHAsync_v2`: copies at once (after the stream's pending host functions).
#[no_mangle]
pub extern "C" fn cuMemcpyDtoHAsync_v2(
    dst: *mut c_void,
    src: CUdeviceptr,
    n: usize,
    h: CUstream,
) -> CUresult {
    run(F::cuMemcpyDtoHAsync_v2, || {
        in_order(h)?;
        if n == 0 {
            return Ok(());
        }
        device_range(src, n)?;
        if dst.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: `src..src+n` is inside a live device allocation (checked); `dst` is writable
        // for `n` bytes (the caller's contract).
        unsafe { std::ptr::copy(src as *const u8, dst.cast::<u8>(), n) };
        Ok(())
    })
}

/// `cuMemcpyDtoDAsync_v2`.
#[no_mangle]
pub extern "C" fn cuMemcpyDtoDAsync_v2(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: usize,
    h: CUstream,
) -> CUresult {
    run(F::cuMemcpyDtoDAsync_v2, || {
        in_order(h)?;
        if n == 0 {
            return Ok(());
        }
        device_range(src, n)?;
        device_range(dst, n)?;
        // SAFETY: both ranges lie in live device allocations (checked).
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, n) };
        Ok(())
    })
}

/// Fills `count` elements of `T` at `dst` with `v`.
fn fill<T: Copy>(dst: CUdeviceptr, v: T, count: usize, h: CUstream) -> R {
    in_order(h)?;
    let bytes = count
        .checked_mul(std::mem::size_of::<T>())
        .ok_or(INVALID_VALUE)?;
    if bytes == 0 {
        return Ok(());
    }
    if !dst.is_multiple_of(std::mem::align_of::<T>() as u64) {
        return Err(INVALID_VALUE);
    }
    device_range(dst, bytes)?;
    let p = dst as *mut T;
    for i in 0..count {
        // SAFETY: `count` aligned elements lie inside a live device allocation (checked).
        unsafe { p.add(i).write(v) };
    }
    Ok(())
}

/// `cuMemsetD8Async`.
#[no_mangle]
pub extern "C" fn cuMemsetD8Async(dst: CUdeviceptr, v: u8, n: usize, h: CUstream) -> CUresult {
    run(F::cuMemsetD8Async, || fill(dst, v, n, h))
}

/// `cuMemsetD16Async`.
#[no_mangle]
pub extern "C" fn cuMemsetD16Async(dst: CUdeviceptr, v: u16, n: usize, h: CUstream) -> CUresult {
    run(F::cuMemsetD16Async, || fill(dst, v, n, h))
}

/// `cuMemsetD32Async`.
#[no_mangle]
pub extern "C" fn cuMemsetD32Async(dst: CUdeviceptr, v: u32, n: usize, h: CUstream) -> CUresult {
    run(F::cuMemsetD32Async, || fill(dst, v, n, h))
}

// ---- Controls -----------------------------------------------------------------------------

/// Reads a control's name argument.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
unsafe fn name_arg<'a>(name: *const c_char) -> Option<&'a str> {
    if name.is_null() {
        return None;
    }
    // SAFETY: not null: NUL-terminated (the caller's contract).
    unsafe { CStr::from_ptr(name) }.to_str().ok()
}

/// `uint64_t xnull_calls(const char *name)`: calls of the driver function `name` by every
/// thread since the last `xnull_reset`; `UINT64_MAX` for a name the null driver does not
/// export.
#[no_mangle]
pub extern "C" fn xnull_calls(name: *const c_char) -> u64 {
    catch_unwind(|| {
        // SAFETY: the caller passes a NUL-terminated name.
        unsafe { name_arg(name) }.and_then(state::calls)
    })
    .ok()
    .flatten()
    .unwrap_or(u64::MAX)
}

/// `uint64_t xnull_thread_calls(const char *name)`: as `xnull_calls`, counting only the
/// calling thread's calls (since its own last `xnull_reset`).
#[no_mangle]
pub extern "C" fn xnull_thread_calls(name: *const c_char) -> u64 {
    catch_unwind(|| {
        // SAFETY: the caller passes a NUL-terminated name.
        unsafe { name_arg(name) }.and_then(state::thread_calls)
    })
    .ok()
    .flatten()
    .unwrap_or(u64::MAX)
}

/// `uint64_t xnull_wait_ns(void)`: nanoseconds that callers of the driver functions spent
/// blocked waiting for queued host functions to run (synchronize calls, and copies or memsets
/// ordered behind a pending host function), all threads, since the last `xnull_reset`.
#[no_mangle]
pub extern "C" fn xnull_wait_ns() -> u64 {
    catch_unwind(state::waited_ns).unwrap_or(0)
}

/// `void xnull_reset(void)`: zeroes the totals of every thread (and `xnull_wait_ns`) and the
/// calling thread's own counts.
#[no_mangle]
pub extern "C" fn xnull_reset() {
    let _ = catch_unwind(state::reset);
}

/// `size_t xnull_functions(const char **names, size_t cap)`: the number of exported driver
/// functions, writing up to `cap` of their (static, NUL-terminated) names to `names`.
#[no_mangle]
pub extern "C" fn xnull_functions(names: *mut *const c_char, cap: usize) -> usize {
    catch_unwind(|| {
        let all = crate::c_names();
        if !names.is_null() {
            for (i, n) in all.iter().take(cap).enumerate() {
                // SAFETY: `names` holds `cap` writable entries (the caller's contract).
                unsafe { names.add(i).write(n.as_ptr()) };
            }
        }
        all.len()
    })
    .unwrap_or(0)
}

// ---- Virtual memory management ------------------------------------------------------------

/// The granularity of the virtual memory functions (minimum and recommended).
const VMM_GRANULARITY: usize = 2 << 20;
const ALREADY_MAPPED: u32 = 208;
const NOT_MAPPED: u32 = 211;

/// Reservations (base -> (size, alignment)), physical handles (handle -> (size, live mappings, released))
/// and mappings (address -> (size, handle)). A reservation is zeroed heap memory; a mapping
/// makes its part of that memory device memory (copies and memsets accept it). Mapping one
/// handle twice does not alias the two ranges (no `mmap` here: a counting double).
#[derive(Default)]
struct Vmm {
    reserved: std::collections::BTreeMap<u64, (usize, usize)>,
    handles: std::collections::HashMap<u64, (usize, usize, bool)>,
    maps: std::collections::BTreeMap<u64, (usize, u64)>,
    next: u64,
}

fn vmm() -> std::sync::MutexGuard<'static, Vmm> {
    static V: std::sync::OnceLock<std::sync::Mutex<Vmm>> = std::sync::OnceLock::new();
    V.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// `cuMemGetAllocationGranularity`: 2 MiB for both options.
#[no_mangle]
pub extern "C" fn cuMemGetAllocationGranularity(
    g: *mut usize,
    prop: *const c_void,
    option: u32,
) -> CUresult {
    run(F::cuMemGetAllocationGranularity, || {
        if prop.is_null() || option > 1 {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's out-pointer.
        unsafe { put(g, VMM_GRANULARITY) }
    })
}

/// `cuMemAddressReserve`: zeroed heap memory aligned to the granularity (a fixed address
/// is not honoured, as the driver may do).
#[no_mangle]
pub extern "C" fn cuMemAddressReserve(
    out: *mut CUdeviceptr,
    size: usize,
    align: usize,
    _addr: CUdeviceptr,
    flags: u64,
) -> CUresult {
    run(F::cuMemAddressReserve, || {
        current()?;
        if out.is_null() || size == 0 || !size.is_multiple_of(VMM_GRANULARITY) || flags != 0 {
            return Err(INVALID_VALUE);
        }
        let align = align.max(VMM_GRANULARITY);
        let layout = Layout::from_size_align(size, align).map_err(|_| INVALID_VALUE)?;
        // SAFETY: `layout` has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        if p.is_null() {
            return Err(OUT_OF_MEMORY);
        }
        vmm().reserved.insert(p as u64, (size, align));
        // SAFETY: the caller's out-pointer.
        unsafe { put(out, p as u64) }
    })
}

/// `cuMemAddressFree`: a whole reservation with nothing mapped in it.
#[no_mangle]
pub extern "C" fn cuMemAddressFree(p: CUdeviceptr, size: usize) -> CUresult {
    run(F::cuMemAddressFree, || {
        let mut v = vmm();
        let align = match v.reserved.get(&p) {
            Some(&(n, a)) if n == size => a,
            _ => return Err(INVALID_VALUE),
        };
        let end = p + size as u64;
        if v.maps.range(p..end).next().is_some() {
            return Err(INVALID_VALUE);
        }
        v.reserved.remove(&p);
        drop(v);
        let layout = Layout::from_size_align(size, align).map_err(|_| UNKNOWN)?;
        // SAFETY: reserved by `cuMemAddressReserve` with this size and alignment; removed from
        // the table, so freed once.
        unsafe { std::alloc::dealloc(p as *mut u8, layout) };
        Ok(())
    })
}

/// `cuMemCreate`: a handle of `size` bytes (no memory of its own).
#[no_mangle]
pub extern "C" fn cuMemCreate(
    h: *mut u64,
    size: usize,
    prop: *const c_void,
    flags: u64,
) -> CUresult {
    run(F::cuMemCreate, || {
        current()?;
        if prop.is_null() || size == 0 || !size.is_multiple_of(VMM_GRANULARITY) || flags != 0 {
            return Err(INVALID_VALUE);
        }
        let mut v = vmm();
        v.next += 1;
        let id = v.next;
        v.handles.insert(id, (size, 0, false));
        drop(v);
        // SAFETY: the caller's out-pointer.
        unsafe { put(h, id) }
    })
}

/// `cuMemRelease`: the handle goes after its last mapping.
#[no_mangle]
pub extern "C" fn cuMemRelease(h: u64) -> CUresult {
    run(F::cuMemRelease, || {
        let mut v = vmm();
        let e = v.handles.get_mut(&h).ok_or(INVALID_VALUE)?;
        if e.2 {
            return Err(INVALID_VALUE);
        }
        e.2 = true;
        if e.1 == 0 {
            v.handles.remove(&h);
        }
        Ok(())
    })
}

/// `cuMemMap`: the whole handle (offset 0) inside one reservation, where nothing is mapped.
#[no_mangle]
pub extern "C" fn cuMemMap(
    p: CUdeviceptr,
    size: usize,
    offset: usize,
    h: u64,
    flags: u64,
) -> CUresult {
    run(F::cuMemMap, || {
        let mut v = vmm();
        if offset != 0 || flags != 0 {
            return Err(INVALID_VALUE);
        }
        match v.handles.get(&h) {
            Some(&(n, _, false)) if n == size => {}
            _ => return Err(INVALID_VALUE),
        }
        let end = p.checked_add(size as u64).ok_or(INVALID_VALUE)?;
        let (&base, &(len, _)) = v.reserved.range(..=p).next_back().ok_or(INVALID_VALUE)?;
        if end > base + len as u64 {
            return Err(INVALID_VALUE);
        }
        let before = v.maps.range(..end).next_back();
        if before.is_some_and(|(&a, &(n, _))| a + n as u64 > p) {
            return Err(ALREADY_MAPPED);
        }
        v.maps.insert(p, (size, h));
        if let Some(e) = v.handles.get_mut(&h) {
            e.1 += 1;
        }
        state::device_mem().insert(p, size);
        Ok(())
    })
}

/// `cuMemUnmap`: exactly one mapping.
#[no_mangle]
pub extern "C" fn cuMemUnmap(p: CUdeviceptr, size: usize) -> CUresult {
    run(F::cuMemUnmap, || {
        let mut v = vmm();
        match v.maps.get(&p) {
            Some(&(n, _)) if n == size => {}
            _ => return Err(NOT_MAPPED),
        }
        let (_, h) = v.maps.remove(&p).ok_or(NOT_MAPPED)?;
        state::device_mem().remove(p);
        let gone = v.handles.get_mut(&h).is_some_and(|e| {
            e.1 -= 1;
            e.1 == 0 && e.2
        });
        if gone {
            v.handles.remove(&h);
        }
        Ok(())
    })
}

/// `cuMemSetAccess`: one or more descriptors over mapped bytes (the access is not modelled).
#[no_mangle]
pub extern "C" fn cuMemSetAccess(
    p: CUdeviceptr,
    size: usize,
    desc: *const c_void,
    count: usize,
) -> CUresult {
    run(F::cuMemSetAccess, || {
        if desc.is_null() || count == 0 || size == 0 {
            return Err(INVALID_VALUE);
        }
        let v = vmm();
        let (&a, &(n, _)) = v.maps.range(..=p).next_back().ok_or(NOT_MAPPED)?;
        if p + size as u64 > a + n as u64 {
            return Err(NOT_MAPPED);
        }
        Ok(())
    })
}
