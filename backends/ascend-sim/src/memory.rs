//! Memory: `aclrtMalloc` / `aclrtFree` (host memory standing in for device memory; the live
//! blocks are counted by the simulator-only `xsimLiveAllocs`),
//! `aclrtMallocHost` / `aclrtFreeHost` (page-locked blocks, recorded in `host_mem`), the
//! synchronous `aclrtMemcpy` and the stream-ordered `aclrtMemcpyAsync` / `aclrtMemsetAsync`.
//!
//! `aclrtMemcpy` copies on the calling thread before the call returns. Like every simulated copy
//! it reads and writes host memory, so the six copy kinds the runtime accepts (0..=5) behave
//! alike. The argument checks follow the CANN runtime's source (`hicann/runtime`:
//! `src/acl/aclrt_impl/memory.cpp` `aclrtMemcpyImpl`, `aclrtMemcpyAsyncImpl`,
//! `aclrtMemsetAsyncImpl`, `MemcpyKindTranslate`; `src/runtime/api/api_c.cc` `rtMemcpy`,
//! `rtMemcpyAsync`, `rtMemsetAsync`; `src/runtime/api/impl/api_error.cc` and `api_impl.cc`
//! `MemCopySync`, `MemcpyAsync`, `MemsetAsync`): a zero count succeeds before any check, bad
//! pointers and kinds are the ACL layer's 100000, a count above the destination's capacity is
//! the runtime layer's 107000. During a capture in GLOBAL or THREAD_LOCAL mode a synchronous
//! copy gets 107030 and the capture stays valid (the thread may switch to RELAXED).

use crate::capture::*;
use crate::codes::*;
use crate::device::*;
use crate::error::*;
use crate::memset::ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT;
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

/// Bytes the caller asked for in the live `aclrtMalloc` blocks of device `device` (what
/// `aclrtGetMemInfo` counts as used).
pub(crate) fn live_device_bytes(device: i32) -> u64 {
    lock(allocs())
        .values()
        .filter(|b| b.home == Home::Device(device))
        .map(|b| b.requested as u64)
        .sum()
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
    let p = if matches!(home, Home::Device(_)) && crate::ipc_mem::shared_backing() {
        crate::ipc_mem::alloc_shared(size)?
    } else {
        // SAFETY: layout has non-zero size (`size >= requested > 0`).
        unsafe { std::alloc::alloc(layout) }
    };
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
    if crate::vmm::is_mapping(p as usize) {
        return err(
            ACL_ERROR_RT_PARAM_INVALID,
            "aclrtFree of a virtual memory mapping: unmap it with aclrtUnmapMem",
        );
    }
    if crate::ipc_mem::is_import(p as usize) {
        return err(
            ACL_ERROR_RT_PARAM_INVALID,
            "aclrtFree of an IPC import: close it with aclrtIpcMemClose",
        );
    }
    let Some(Block { layout, .. }) = lock(allocs()).remove(&(p as usize)) else {
        return err(
            ACL_ERROR_INVALID_PARAM,
            "pointer not allocated by the simulator",
        );
    };
    if crate::ipc_mem::free_shared(p as usize) {
        return Ok(());
    }
    // SAFETY: `p` was returned by std::alloc::alloc with exactly this layout and is freed once.
    unsafe { std::alloc::dealloc(p as *mut u8, layout) };
    Ok(())
}

/// Records an IPC import of `size` bytes at `p` as device memory of `device` (so copies and
/// kernels accept it).
pub(crate) fn register_import(p: usize, size: usize, device: i32) {
    if let Ok(layout) = Layout::from_size_align(size.max(1), 1) {
        lock(allocs()).insert(
            p,
            Block {
                layout,
                requested: size,
                home: Home::Device(device),
            },
        );
    }
}

/// Forgets an IPC import recorded by [`register_import`].
pub(crate) fn unregister_import(p: usize) {
    lock(allocs()).remove(&p);
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

/// `aclError aclrtFreeHost(void* hostPtr)`: NULL → 100000; device memory from `aclrtMalloc`
/// → 107000; an address the simulator did not allocate → 100000.
///
/// # Safety
/// `host_ptr` must come from `aclrtMallocHost` and not be in use by queued work.
#[no_mangle]
pub unsafe extern "C" fn aclrtFreeHost(host_ptr: *mut c_void) -> i32 {
    ffi("aclrtFreeHost", true, || {
        // `ApiImpl::HostFree` (`src/runtime/api/impl/api_impl.cc`): an address whose location
        // is device memory is refused with `RT_ERROR_INVALID_VALUE` (107000).
        non_null(host_ptr, "hostPtr")?;
        if let Some(Home::Device(_)) = home_of(host_ptr as usize, 1) {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                "aclrtFreeHost of device memory (aclrtMalloc): use aclrtFree",
            );
        }
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

/// The copy kinds the runtime's ACL layer translates (`MemcpyKindTranslate` in
/// `src/acl/aclrt_impl/memory.cpp`): `ACL_MEMCPY_HOST_TO_HOST` (0) … `ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE`
/// (5). `ACL_MEMCPY_INNER_DEVICE_TO_DEVICE` (6), `ACL_MEMCPY_INTER_DEVICE_TO_DEVICE` (7) and
/// every other value → 100000.
pub const COPY_KINDS: std::ops::RangeInclusive<i32> = 0..=5;

/// What the ACL layer of `aclrtMemcpy` / `aclrtMemcpyAsync` checks, in its order, after
/// `count == 0` (which the callers answer with 0 before this): NULL `dst`, then NULL `src`,
/// then a kind outside [`COPY_KINDS`], each → 100000.
fn check_copy_acl(dst: *mut c_void, src: *const c_void, kind: i32) -> R {
    non_null(dst, "dst")?;
    non_null(src, "src")?;
    if !COPY_KINDS.contains(&kind) {
        return err(
            ACL_ERROR_INVALID_PARAM,
            format!("memcpy kind {kind} is not one of 0..=5"),
        );
    }
    Ok(())
}

/// The runtime layer's count rule (`ApiErrorDecorator::MemCopySync` / `MemcpyAsync` /
/// `MemsetAsync` in `src/runtime/api/impl/api_error.cc`): `count > max` → 107000
/// (`RT_ERROR_INVALID_VALUE`).
fn check_count(count: usize, max: usize, what: &str) -> R {
    if count > max {
        return err(
            ACL_ERROR_RT_PARAM_INVALID,
            format!("count {count} exceeds {what} {max}"),
        );
    }
    Ok(())
}

/// The runtime validates a non-NULL stream handle before its own argument checks
/// (`rtMemcpyAsync` / `rtMemsetAsync` in `src/runtime/api/api_c.cc`); NULL is the default
/// stream, resolved later.
fn check_stream_handle(stream: *mut c_void) -> R {
    if !stream.is_null() {
        crate::registry::stream_of(stream)?;
    }
    Ok(())
}

/// `aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
/// aclrtMemcpyKind kind)`: synchronous copy, in the runtime's order: `count == 0` → 0 with
/// nothing checked; NULL `dst`, NULL `src`, a kind outside 0..=5 → 100000; `count > destMax`
/// (so also `destMax == 0`) → 107000; `dst == src` → 0 with nothing copied (no context
/// needed); no current context → 107002; poisoned context → its code; the thread captures in
/// GLOBAL or THREAD_LOCAL mode → 107030, the capture stays valid (RELAXED allows the copy).
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
        if count == 0 {
            return Ok(());
        }
        check_copy_acl(dst, src, kind)?;
        check_count(count, dest_max, "destMax")?;
        if dst.cast_const() == src {
            return Ok(());
        }
        let ctx = cur_ctx()?;
        ctx.check_poison()?;
        if !captures_affecting_me().is_empty() {
            return err(
                ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
                "synchronous copy while the thread captures (only RELAXED allows it)",
            );
        }
        crate::peer::check_copy_access(ctx.device, kind, dst as usize, src as usize, count)?;
        // SAFETY: both non-NULL; the caller guarantees `count` valid bytes on each side;
        // `copy` tolerates overlap.
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, count) };
        Ok(())
    })
}

/// `aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count,
/// aclrtMemcpyKind kind, aclrtStream stream)`: executes in stream order on the stream's worker
/// (pageable host memory is treated like pinned memory, except inside a capture: see
/// `host_mem`). In the runtime's order: `count == 0` → 0 with nothing checked; NULL `dst`,
/// NULL `src`, a kind outside 0..=5 → 100000; an unknown stream handle → 100000;
/// `count > destMax` → 107000; no current context → 107002; `dst == src` → 0 with no task; a
/// pageable host side of a host-to-device or device-to-host copy on a capturing stream →
/// 107000 (the runtime's `RT_ERROR_INVALID_VALUE`); then the stream rules (another context's
/// stream 107003, the default stream in a capture 107031); a device-to-device copy touching
/// memory of another device needs peer access from the stream's device to it
/// (`aclrtDeviceEnablePeerAccess`), otherwise 100000 (see `peer`).
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
        if count == 0 {
            return Ok(());
        }
        check_copy_acl(dst, src, kind)?;
        check_stream_handle(stream)?;
        check_count(count, dest_max, "destMax")?;
        cur_ctx()?;
        if dst.cast_const() == src {
            return Ok(());
        }
        if !stream.is_null() && crate::registry::stream_of(stream)?.capture().is_some() {
            crate::host_mem::check_captured_copy(kind, dst as usize, src as usize, count)?;
        }
        let s = enqueue_stream(stream)?;
        crate::peer::check_copy_access(s.ctx.device, kind, dst as usize, src as usize, count)?;
        s.push(Task::Copy {
            dst: dst as usize,
            src: src as usize,
            n: count,
        })
    })
}

/// `aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count,
/// aclrtStream stream)`: sets the low byte of `value`, in stream order. In the runtime's
/// order: `count == 0` → 0 with nothing checked; NULL `devPtr` → 100000; an unknown stream
/// handle → 100000; `count > maxCount` → 107000; then the stream rules as for
/// `aclrtMemcpyAsync`.
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
        if count == 0 {
            return Ok(());
        }
        non_null(dev_ptr, "devPtr")?;
        check_stream_handle(stream)?;
        check_count(count, max_count, "maxCount")?;
        let s = enqueue_stream(stream)?;
        s.push(Task::Set {
            dst: dev_ptr as usize,
            val: value as u8,
            n: count,
        })
    })
}
