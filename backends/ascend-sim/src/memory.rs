//! Memory: `aclrtMalloc` / `aclrtFree` (host memory standing in for device memory; the live
//! blocks are counted by the simulator-only `xsimLiveAllocs`),
//! `aclrtMallocHost` / `aclrtFreeHost` (page-locked blocks, recorded in `host_mem`), the
//! synchronous `aclrtMemcpy` and the stream-ordered `aclrtMemcpyAsync` / `aclrtMemsetAsync`.
//!
//! `aclrtMemcpy` copies on the calling thread before the call returns. Like every simulated copy
//! it reads and writes host memory, so all eight `aclrtMemcpyKind` values behave alike. During a
//! capture in GLOBAL or THREAD_LOCAL mode the capturing thread gets 107027 and the capture is
//! invalidated (synchronous copies are illegal in a capture unless the thread switched to
//! RELAXED).

use crate::capture::*;
use crate::codes::*;
use crate::device::*;
use crate::error::*;
use crate::stream::*;
use crate::task::*;
use std::alloc::Layout;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Mutex;
use std::sync::OnceLock;

const ALIGN: usize = 64;

fn allocs() -> &'static Mutex<HashMap<usize, Layout>> {
    static A: OnceLock<Mutex<HashMap<usize, Layout>>> = OnceLock::new();
    A.get_or_init(Default::default)
}

fn sim_alloc(out: *mut *mut c_void, size: usize) -> R {
    non_null(out, "pointer")?;
    if size == 0 {
        return err(ACL_ERROR_INVALID_PARAM, "size is 0");
    }
    let layout = Layout::from_size_align(size, ALIGN)
        .or_else(|_| err(ACL_ERROR_INVALID_PARAM, "size too large"))?;
    // SAFETY: layout has non-zero size.
    let p = unsafe { std::alloc::alloc(layout) };
    if p.is_null() {
        return err(207_001, "out of memory");
    }
    lock(allocs()).insert(p as usize, layout);
    // SAFETY: checked non-NULL; caller contract.
    unsafe { put(out, p as *mut c_void) }
}

fn sim_free(p: *mut c_void) -> R {
    non_null(p, "pointer")?;
    let Some(layout) = lock(allocs()).remove(&(p as usize)) else {
        return err(
            ACL_ERROR_INVALID_PARAM,
            "pointer not allocated by the simulator",
        );
    };
    // SAFETY: `p` was returned by std::alloc::alloc with exactly this layout and is freed once.
    unsafe { std::alloc::dealloc(p as *mut u8, layout) };
    Ok(())
}

/// `uint64_t xsimLiveAllocs(void)`: blocks from `aclrtMalloc` not yet given back with
/// `aclrtFree` (every context). Simulator-only.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn xsimLiveAllocs() -> u64 {
    crate::faults::count_call("xsimLiveAllocs");
    std::panic::catch_unwind(|| lock(allocs()).len() as u64).unwrap_or(u64::MAX)
}

/// `aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy)`: host memory
/// standing in for device memory (64-byte aligned, policy ignored); needs a current context.
///
/// # Safety
/// `dev_ptr` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtMalloc(dev_ptr: *mut *mut c_void, size: usize, policy: i32) -> i32 {
    let _ = policy;
    ffi("aclrtMalloc", true, || {
        cur_ctx()?;
        sim_alloc(dev_ptr, size)
    })
}

/// `aclError aclrtFree(void* devPtr)`.
///
/// # Safety
/// `dev_ptr` must come from `aclrtMalloc` and not be in use by queued work.
#[no_mangle]
pub unsafe extern "C" fn aclrtFree(dev_ptr: *mut c_void) -> i32 {
    ffi("aclrtFree", true, || sim_free(dev_ptr))
}

/// `aclError aclrtMallocHost(void** hostPtr, size_t size)`: "pinned" host memory.
///
/// # Safety
/// `host_ptr` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtMallocHost(host_ptr: *mut *mut c_void, size: usize) -> i32 {
    ffi("aclrtMallocHost", true, || {
        sim_alloc(host_ptr, size)?;
        // SAFETY: sim_alloc wrote the block's address through the checked-non-NULL pointer.
        crate::host_mem::add(unsafe { *host_ptr } as usize, size);
        Ok(())
    })
}

/// `aclError aclrtFreeHost(void* hostPtr)`.
///
/// # Safety
/// `host_ptr` must come from `aclrtMallocHost` and not be in use by queued work.
#[no_mangle]
pub unsafe extern "C" fn aclrtFreeHost(host_ptr: *mut c_void) -> i32 {
    ffi("aclrtFreeHost", true, || {
        sim_free(host_ptr)?;
        crate::host_mem::remove(host_ptr as usize);
        Ok(())
    })
}

/// The argument rules `aclrtMemcpy` and `aclrtMemcpyAsync` share: non-NULL pointers,
/// `count <= destMax`, a known copy kind (0..=7); each broken rule → 100000.
fn check_copy(dst: *mut c_void, dest_max: usize, src: *const c_void, count: usize, kind: i32) -> R {
    non_null(dst, "dst")?;
    non_null(src, "src")?;
    if count > dest_max {
        return err(ACL_ERROR_INVALID_PARAM, "count exceeds destMax");
    }
    if !(0..=7).contains(&kind) {
        return err(ACL_ERROR_INVALID_PARAM, format!("bad memcpy kind {kind}"));
    }
    Ok(())
}

/// `aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
/// aclrtMemcpyKind kind)`: synchronous copy. NULL pointers, `count > destMax` or a kind outside
/// 0..=7 → 100000; no current context → 107002; poisoned context → its code.
///
/// # Safety
/// `src` must be valid for `count` reads and `dst` for `count` writes.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemcpy(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: i32,
) -> i32 {
    ffi("aclrtMemcpy", true, || {
        check_copy(dst, dest_max, src, count, kind)?;
        let ctx = cur_ctx()?;
        refuse_in_capture(
            ACL_ERROR_RT_STREAM_CAPTURED,
            "synchronous copy during capture",
        )?;
        ctx.check_poison()?;
        // SAFETY: both non-NULL; the caller guarantees `count` valid bytes on each side;
        // `copy` tolerates overlap.
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, count) };
        Ok(())
    })
}

/// `aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count,
/// aclrtMemcpyKind kind, aclrtStream stream)`: executes in stream order on the stream's worker
/// (pageable host memory is treated like pinned memory, except inside a capture, where a
/// pageable host side is refused: see `host_mem`). `count > destMax` → 100000.
///
/// # Safety
/// Both ranges must stay valid until the copy has executed.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemcpyAsync(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: i32,
    stream: *mut c_void,
) -> i32 {
    ffi("aclrtMemcpyAsync", true, || {
        check_copy(dst, dest_max, src, count, kind)?;
        let s = enqueue_stream(stream)?;
        if s.capture().is_some() {
            crate::host_mem::check_captured_copy(kind, dst as usize, src as usize, count)?;
        }
        s.push(Task::Copy {
            dst: dst as usize,
            src: src as usize,
            n: count,
        })
    })
}

/// `aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count,
/// aclrtStream stream)`: `count > maxCount` → 100000.
///
/// # Safety
/// The range must stay valid until the memset has executed.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemsetAsync(
    dev_ptr: *mut c_void,
    max_count: usize,
    value: i32,
    count: usize,
    stream: *mut c_void,
) -> i32 {
    ffi("aclrtMemsetAsync", true, || {
        non_null(dev_ptr, "devPtr")?;
        if count > max_count {
            return err(ACL_ERROR_INVALID_PARAM, "count exceeds maxCount");
        }
        let s = enqueue_stream(stream)?;
        s.push(Task::Set {
            dst: dev_ptr as usize,
            val: value as u8,
            n: count,
        })
    })
}
