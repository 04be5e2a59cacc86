//! The raw-driver side (`cudarc::driver::sys`): each call checked, each handle a plain value.
//! The set-up functions take a context and make it current first (`cuCtxSetCurrent`); the
//! timed ones (launch, record, waits, copies) do not: their caller binds the right context
//! with [`bind`] before it starts the clock, as a program using the driver directly would.

use std::ffi::{c_void, CStr};
use std::ptr;

use cudarc::driver::sys;

use super::BenchResult;

/// `CU_STREAM_NON_BLOCKING`.
const CU_STREAM_NON_BLOCKING: u32 = 1;
/// `CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS` (the driver's rule for IPC events).
const CU_EVENT_IPC: u32 = 0x2 | 0x4;
/// `CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS` (what xstream's import passes too).
const CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: u32 = 1;

pub(crate) type Ctx = sys::CUcontext;

fn ck(r: sys::CUresult, what: &str) -> BenchResult<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what} failed with {r:?}"))
    }
}

/// `cuCtxSetCurrent`.
pub(crate) fn bind(ctx: Ctx) -> BenchResult<()> {
    // SAFETY: `ctx` is a live primary context (held by an xstream device of this process).
    ck(unsafe { sys::cuCtxSetCurrent(ctx) }, "cuCtxSetCurrent")
}

pub(crate) fn stream(ctx: Ctx) -> BenchResult<sys::CUstream> {
    bind(ctx)?;
    let mut s = ptr::null_mut();
    ck(
        // SAFETY: valid out-pointer; `ctx` is current.
        unsafe { sys::cuStreamCreate(&mut s, CU_STREAM_NON_BLOCKING) },
        "cuStreamCreate",
    )?;
    Ok(s)
}

pub(crate) fn sync(s: sys::CUstream) -> BenchResult<()> {
    ck(
        // SAFETY: `s` is a live stream (of the current context).
        unsafe { sys::cuStreamSynchronize(s) },
        "cuStreamSynchronize",
    )
}

pub(crate) fn alloc(ctx: Ctx, len: usize) -> BenchResult<u64> {
    bind(ctx)?;
    let mut p = 0u64;
    // SAFETY: valid out-pointer; `ctx` is current.
    ck(unsafe { sys::cuMemAlloc_v2(&mut p, len) }, "cuMemAlloc")?;
    Ok(p)
}

pub(crate) fn free(ctx: Ctx, p: u64) {
    if bind(ctx).is_ok() {
        // SAFETY: `p` came from `alloc` in `ctx` and no queued work uses it (the caller
        // synchronized, and the importing process has exited).
        unsafe { sys::cuMemFree_v2(p) };
    }
}

/// Page-locked host memory (`cuMemHostAlloc`, no flags).
pub(crate) fn host_alloc(ctx: Ctx, len: usize) -> BenchResult<*mut u8> {
    bind(ctx)?;
    let mut p = ptr::null_mut();
    ck(
        // SAFETY: valid out-pointer; `ctx` is current.
        unsafe { sys::cuMemHostAlloc(&mut p, len, 0) },
        "cuMemHostAlloc",
    )?;
    Ok(p.cast())
}

pub(crate) fn host_free(ctx: Ctx, p: *mut u8) {
    if bind(ctx).is_ok() {
        // SAFETY: `p` came from `host_alloc` and no queued copy uses it any more.
        unsafe { sys::cuMemFreeHost(p.cast()) };
    }
}

/// Reads byte `at` of a `host_alloc` block of more than `at` bytes, after its copies completed.
pub(crate) fn host_byte(p: *const u8, at: usize) -> u8 {
    // SAFETY: the caller passes an offset inside the block and synchronized its copies.
    unsafe { p.add(at).read_volatile() }
}

/// `cuMemsetD8_v2` (synchronous).
pub(crate) fn memset(ctx: Ctx, p: u64, value: u8, len: usize) -> BenchResult<()> {
    bind(ctx)?;
    // SAFETY: `p` is a live allocation of at least `len` bytes in `ctx`.
    ck(unsafe { sys::cuMemsetD8_v2(p, value, len) }, "cuMemsetD8")
}

pub(crate) fn copy_dtod(dst: u64, src: u64, len: usize, s: sys::CUstream) -> BenchResult<()> {
    ck(
        // SAFETY: both ranges are live device memory of `len` bytes usable in the current
        // context; `s` is one of its streams.
        unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, len, s) },
        "cuMemcpyDtoDAsync",
    )
}

/// `cuMemcpyPeerAsync` from `src` (of `src_ctx`) to `dst` (of `dst_ctx`) on `s`, a stream of
/// `dst_ctx`.
pub(crate) fn copy_peer(
    dst_ctx: Ctx,
    dst: u64,
    src_ctx: Ctx,
    src: u64,
    len: usize,
    s: sys::CUstream,
) -> BenchResult<()> {
    ck(
        // SAFETY: both ranges are live device memory of `len` bytes in their contexts; `s` is a
        // stream of `dst_ctx`.
        unsafe { sys::cuMemcpyPeerAsync(dst, dst_ctx, src, src_ctx, len, s) },
        "cuMemcpyPeerAsync",
    )
}

pub(crate) fn copy_dtoh(dst: *mut u8, src: u64, len: usize, s: sys::CUstream) -> BenchResult<()> {
    ck(
        // SAFETY: `dst` is a page-locked block of at least `len` bytes that nothing else touches
        // until the stream is synchronized; `src` is live device memory of `len` bytes; `s` is a
        // stream of the current context.
        unsafe { sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, len, s) },
        "cuMemcpyDtoHAsync",
    )
}

/// An interprocess event (`CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING`).
pub(crate) fn ipc_event(ctx: Ctx) -> BenchResult<sys::CUevent> {
    bind(ctx)?;
    let mut e = ptr::null_mut();
    ck(
        // SAFETY: valid out-pointer; `ctx` is current.
        unsafe { sys::cuEventCreate(&mut e, CU_EVENT_IPC) },
        "cuEventCreate",
    )?;
    Ok(e)
}

pub(crate) fn record(e: sys::CUevent, s: sys::CUstream) -> BenchResult<()> {
    // SAFETY: `e` and `s` are live handles of the current context.
    ck(unsafe { sys::cuEventRecord(e, s) }, "cuEventRecord")
}

pub(crate) fn event_sync(e: sys::CUevent) -> BenchResult<()> {
    // SAFETY: `e` is a live event of this process.
    ck(unsafe { sys::cuEventSynchronize(e) }, "cuEventSynchronize")
}

/// `cuStreamWaitEvent(s, e)` then `cuStreamSynchronize(s)`; `e` may be of another context.
pub(crate) fn wait_and_sync(s: sys::CUstream, e: sys::CUevent) -> BenchResult<()> {
    ck(
        // SAFETY: `s` is a live stream of the current context, `e` a live event of this
        // process (of any context).
        unsafe { sys::cuStreamWaitEvent(s, e, 0) },
        "cuStreamWaitEvent",
    )?;
    ck(
        // SAFETY: as above.
        unsafe { sys::cuStreamSynchronize(s) },
        "cuStreamSynchronize",
    )
}

/// The two-GPU form of [`wait_and_sync`]: `s` (a stream of `ctxc`) waits for the interprocess
/// event `e` (opened in `ctx0`) through `bridge` (a stream of `ctx0`) and `relay` (an ordinary
/// event of `ctx0`): the wait on `e` in its own context, `relay` recorded behind it, `s` waits
/// for `relay`, then `s` is synchronized. A direct `cuStreamWaitEvent(s, e)` from another
/// device's stream kills the process inside the driver (SIGSEGV; docs/gpu-runs/
/// 2026-11-27-2xh100-run19a), so the raw baseline makes the same detour as xstream.
pub(crate) fn wait_bridged_and_sync(
    ctx0: Ctx,
    ctxc: Ctx,
    bridge: sys::CUstream,
    relay: sys::CUevent,
    s: sys::CUstream,
    e: sys::CUevent,
) -> BenchResult<()> {
    bind(ctx0)?;
    ck(
        // SAFETY: `bridge` and `e` are live handles of `ctx0`, which is current.
        unsafe { sys::cuStreamWaitEvent(bridge, e, 0) },
        "cuStreamWaitEvent (bridge)",
    )?;
    record(relay, bridge)?;
    bind(ctxc)?;
    wait_and_sync(s, relay)
}

/// An ordinary event (`CU_EVENT_DISABLE_TIMING`) of `ctx`.
pub(crate) fn plain_event(ctx: Ctx) -> BenchResult<sys::CUevent> {
    bind(ctx)?;
    let mut e = ptr::null_mut();
    ck(
        // SAFETY: valid out-pointer; `ctx` is current.
        unsafe { sys::cuEventCreate(&mut e, 0x2) },
        "cuEventCreate",
    )?;
    Ok(e)
}

pub(crate) fn ipc_event_handle(ctx: Ctx, e: sys::CUevent) -> BenchResult<[u8; 64]> {
    bind(ctx)?;
    let mut h = sys::CUipcEventHandle { reserved: [0; 64] };
    ck(
        // SAFETY: valid out-pointer; `e` is an interprocess event of `ctx`.
        unsafe { sys::cuIpcGetEventHandle(&mut h, e) },
        "cuIpcGetEventHandle",
    )?;
    Ok(h.reserved.map(|c| c as u8))
}

pub(crate) fn ipc_open_event(ctx: Ctx, bytes: [u8; 64]) -> BenchResult<sys::CUevent> {
    bind(ctx)?;
    let h = sys::CUipcEventHandle {
        reserved: bytes.map(|b| b as std::ffi::c_char),
    };
    let mut e = ptr::null_mut();
    ck(
        // SAFETY: valid out-pointer; the handle is passed by value; `ctx` is current.
        unsafe { sys::cuIpcOpenEventHandle(&mut e, h) },
        "cuIpcOpenEventHandle",
    )?;
    Ok(e)
}

pub(crate) fn ipc_mem_handle(ctx: Ctx, p: u64) -> BenchResult<[u8; 64]> {
    bind(ctx)?;
    let mut h = sys::CUipcMemHandle { reserved: [0; 64] };
    ck(
        // SAFETY: valid out-pointer; `p` is the base of a `cuMemAlloc` allocation of `ctx`.
        unsafe { sys::cuIpcGetMemHandle(&mut h, p) },
        "cuIpcGetMemHandle",
    )?;
    Ok(h.reserved.map(|c| c as u8))
}

pub(crate) fn ipc_open_mem(ctx: Ctx, bytes: [u8; 64]) -> BenchResult<u64> {
    bind(ctx)?;
    let h = sys::CUipcMemHandle {
        reserved: bytes.map(|b| b as std::ffi::c_char),
    };
    let mut p = 0u64;
    ck(
        // SAFETY: valid out-pointer; the handle is passed by value; `ctx` is current.
        unsafe { sys::cuIpcOpenMemHandle_v2(&mut p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) },
        "cuIpcOpenMemHandle",
    )?;
    Ok(p)
}

pub(crate) fn ipc_close_mem(ctx: Ctx, p: u64) {
    if bind(ctx).is_ok() {
        // SAFETY: `p` came from `ipc_open_mem` in `ctx`; its copies were synchronized.
        unsafe { sys::cuIpcCloseMemHandle(p) };
    }
}

/// Loads a NUL-terminated PTX text and returns the named function (the module stays loaded
/// for the life of the process).
pub(crate) fn function(ctx: Ctx, ptx_nul: &str, name: &CStr) -> BenchResult<sys::CUfunction> {
    bind(ctx)?;
    let mut m = ptr::null_mut();
    ck(
        // SAFETY: `ptx_nul` is NUL-terminated PTX text; valid out-pointer; `ctx` is current.
        unsafe { sys::cuModuleLoadData(&mut m, ptx_nul.as_ptr().cast::<c_void>()) },
        "cuModuleLoadData",
    )?;
    let mut f = ptr::null_mut();
    ck(
        // SAFETY: `m` is a loaded module; `name` is NUL-terminated; valid out-pointer.
        unsafe { sys::cuModuleGetFunction(&mut f, m, name.as_ptr()) },
        "cuModuleGetFunction",
    )?;
    Ok(f)
}

/// Launches `xstream_delay(ns)` (the kernel behind xstream's `Kernel::Delay`) on one thread.
pub(crate) fn launch_delay(f: sys::CUfunction, s: sys::CUstream, ns: u64) -> BenchResult<()> {
    let mut ns = ns;
    let mut params = [(&mut ns as *mut u64).cast::<c_void>()];
    ck(
        // SAFETY: `f` takes one .u64 parameter, `params` points to it and lives across the call
        // (the driver copies it); `s` is a live stream of the current context, where `f` is
        // loaded.
        unsafe {
            sys::cuLaunchKernel(
                f,
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                s,
                params.as_mut_ptr(),
                ptr::null_mut(),
            )
        },
        "cuLaunchKernel",
    )
}

/// Lower-case hex of `b`.
pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The 64 bytes of a raw handle from [`hex`]'s form.
pub(crate) fn unhex64(s: &str) -> BenchResult<[u8; 64]> {
    let s = s.trim();
    if s.len() != 128 || !s.is_ascii() {
        return Err(format!(
            "a raw handle is 128 hex digits, got {} characters",
            s.len()
        ));
    }
    let mut out = [0u8; 64];
    for (i, o) in out.iter_mut().enumerate() {
        *o =
            u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|e| format!("raw handle: {e}"))?;
    }
    Ok(out)
}
