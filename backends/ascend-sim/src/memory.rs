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
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::Mutex;
use std::sync::OnceLock;

const ALIGN: usize = 64;

/// Where a block lives: a device (`aclrtMalloc`, the current context's device) or the host
/// (`aclrtMallocHost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Home {
    /// Device memory of this device id.
    Device(i32),
    /// Page-locked host memory.
    Host,
}

/// `aclrtMalloc` sizes are aligned to this many bytes (the runtime's `DATA_MEMORY_ALIGN_SIZE`).
const DEVICE_ALIGN: usize = 32;
/// ... and padded with this many (the runtime's default `DATA_MEMORY_PADDING_SIZE`; a real SoC
/// spec may set another `padding_size`, the simulator has none).
const DEVICE_PADDING: usize = 32;
/// `ACL_MEM_MALLOC_HUGE1G_ONLY` and `ACL_MEM_MALLOC_HUGE1G_ONLY_P2P`: aligned, never padded.
const HUGE1G_POLICIES: [i32; 2] = [6, 7];

/// One live block: its layout (the bytes really allocated), the size the caller asked for, and
/// where it lives.
#[derive(Debug, Clone, Copy)]
struct Block {
    layout: Layout,
    requested: usize,
    home: Home,
}

/// Live blocks by start address.
fn allocs() -> &'static Mutex<BTreeMap<usize, Block>> {
    static A: OnceLock<Mutex<BTreeMap<usize, Block>>> = OnceLock::new();
    A.get_or_init(Default::default)
}

/// The home of the block holding `p .. p + n`, when one does.
pub(crate) fn home_of(p: usize, n: usize) -> Option<Home> {
    let g = lock(allocs());
    let (&start, b) = g.range(..=p).next_back()?;
    let end = p.checked_add(n)?;
    (end <= start + b.layout.size()).then_some(b.home)
}

/// The bytes `aclrtMalloc` really allocates for `size` (the runtime's
/// `GetAlignedAndPaddingSize`): `size` plus the alignment and, unless unpadded, the padding,
/// minus one, rounded down to the alignment. `None` when the sum overflows (the runtime's
/// "size too large", `ACL_ERROR_INVALID_PARAM`).
fn device_size(size: usize, padded: bool) -> Option<usize> {
    let append = if padded {
        DEVICE_ALIGN + DEVICE_PADDING
    } else {
        DEVICE_ALIGN
    };
    let sum = size.checked_add(append)?;
    Some((sum - 1) / DEVICE_ALIGN * DEVICE_ALIGN)
}

/// Allocates `size` bytes (`requested` is what the caller asked for, recorded for
/// `xsimAllocRequested`).
fn sim_alloc(out: *mut *mut c_void, size: usize, requested: usize, home: Home) -> R {
    non_null(out, "pointer")?;
    if requested == 0 {
        return err(ACL_ERROR_INVALID_PARAM, "size is 0");
    }
    let layout = Layout::from_size_align(size, ALIGN)
        .or_else(|_| err(ACL_ERROR_INVALID_PARAM, "size too large"))?;
    // SAFETY: layout has non-zero size (`size >= requested > 0`).
    let p = unsafe { std::alloc::alloc(layout) };
    if p.is_null() {
        return err(207_001, "out of memory");
    }
    lock(allocs()).insert(
        p as usize,
        Block {
            layout,
            requested,
            home,
        },
    );
    // SAFETY: checked non-NULL; caller contract.
    unsafe { put(out, p as *mut c_void) }
}

fn sim_free(p: *mut c_void) -> R {
    non_null(p, "pointer")?;
    let Some(Block { layout, .. }) = lock(allocs()).remove(&(p as usize)) else {
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

/// `uint64_t xsimAllocSize(const void* p)`: the bytes really allocated for the live block that
/// starts at `p` (for `aclrtMalloc`, the runtime's aligned and padded size), 0 when no live
/// block starts there. Simulator-only.
///
/// # Safety
/// `p` is only compared, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn xsimAllocSize(p: *const c_void) -> u64 {
    crate::faults::count_call("xsimAllocSize");
    std::panic::catch_unwind(|| {
        lock(allocs())
            .get(&(p as usize))
            .map_or(0, |b| b.layout.size() as u64)
    })
    .unwrap_or(0)
}

/// `uint64_t xsimAllocRequested(const void* p)`: the size the caller passed for the live block
/// that starts at `p`, 0 when no live block starts there. Simulator-only.
///
/// # Safety
/// `p` is only compared, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn xsimAllocRequested(p: *const c_void) -> u64 {
    crate::faults::count_call("xsimAllocRequested");
    std::panic::catch_unwind(|| {
        lock(allocs())
            .get(&(p as usize))
            .map_or(0, |b| b.requested as u64)
    })
    .unwrap_or(0)
}

/// `aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy)`: host memory
/// standing in for device memory (64-byte aligned); needs a current context. Like the runtime
/// (`src/acl/aclrt_impl/memory.cpp`, `aclMallocMemInner`), the block is `size` aligned up to 32
/// bytes plus 32 bytes of padding (no padding for the two HUGE1G policies), and a `size` whose
/// padded sum overflows is `ACL_ERROR_INVALID_PARAM`. The policy is otherwise ignored.
///
/// # Safety
/// `dev_ptr` must be NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtMalloc(dev_ptr: *mut *mut c_void, size: usize, policy: i32) -> i32 {
    ffi("aclrtMalloc", true, || {
        // The runtime's order: the pointer, the size, the padded size, then the context.
        non_null(dev_ptr, "pointer")?;
        if size == 0 {
            return err(ACL_ERROR_INVALID_PARAM, "size is 0");
        }
        let Some(real) = device_size(size, !HUGE1G_POLICIES.contains(&policy)) else {
            return err(ACL_ERROR_INVALID_PARAM, "size too large");
        };
        let ctx = cur_ctx()?;
        sim_alloc(dev_ptr, real, size, Home::Device(ctx.device))
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
        sim_alloc(host_ptr, size, size, Home::Host)?;
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

/// `aclrtHostRegisterType`: `ACL_HOST_REGISTER_MAPPED`, `ACL_HOST_REGISTER_IOMEMORY`,
/// `ACL_HOST_REGISTER_READONLY`.
const HOST_REGISTER_TYPES: [i32; 3] = [0, 0x4, 0x8];

/// `aclError aclrtHostRegister(void* ptr, uint64_t size, aclrtHostRegisterType type, void**
/// devPtr)`: records `ptr .. ptr + size` as page-locked (usable by captured asynchronous
/// copies) and returns the same address as its device address (one address space in the
/// simulator). NULL pointers, `size == 0`, an address not aligned to a 4 KiB page, an unknown
/// type, or a range overlapping page-locked memory → 100000.
///
/// # Safety
/// `dev_ptr` must be NULL or valid for a write; the range must stay allocated until
/// `aclrtHostUnregister`.
#[no_mangle]
pub unsafe extern "C" fn aclrtHostRegister(
    ptr: *mut c_void,
    size: u64,
    kind: i32,
    dev_ptr: *mut *mut c_void,
) -> i32 {
    ffi("aclrtHostRegister", true, || {
        non_null(ptr, "ptr")?;
        non_null(dev_ptr, "devPtr")?;
        if !HOST_REGISTER_TYPES.contains(&kind) {
            return err(
                ACL_ERROR_INVALID_PARAM,
                format!("bad aclrtHostRegisterType {kind}"),
            );
        }
        let len = usize::try_from(size).or_else(|_| err(ACL_ERROR_INVALID_PARAM, "size"))?;
        crate::host_mem::register(ptr as usize, len)?;
        // SAFETY: checked non-NULL; caller contract.
        unsafe { put(dev_ptr, ptr) }
    })
}

/// `aclError aclrtHostUnregister(void* ptr)`: ends a registration; `ptr` must start one
/// (otherwise 100000).
///
/// # Safety
/// No queued copy may still use the range.
#[no_mangle]
pub unsafe extern "C" fn aclrtHostUnregister(ptr: *mut c_void) -> i32 {
    ffi("aclrtHostUnregister", true, || {
        non_null(ptr, "ptr")?;
        crate::host_mem::unregister(ptr as usize)
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
        crate::peer::check_copy_access(ctx.device, kind, dst as usize, src as usize, count)?;
        // SAFETY: both non-NULL; the caller guarantees `count` valid bytes on each side;
        // `copy` tolerates overlap.
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, count) };
        Ok(())
    })
}

/// `aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count,
/// aclrtMemcpyKind kind, aclrtStream stream)`: executes in stream order on the stream's worker
/// (pageable host memory is treated like pinned memory, except inside a capture, where a
/// pageable host side is refused: see `host_mem`). `count > destMax` → 100000. A
/// device-to-device copy touching memory of another device needs peer access from the
/// stream's device to it (`aclrtDeviceEnablePeerAccess`), otherwise 100000 (see `peer`).
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
        crate::peer::check_copy_access(s.ctx.device, kind, dst as usize, src as usize, count)?;
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
