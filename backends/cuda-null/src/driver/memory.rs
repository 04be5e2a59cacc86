//! Memory: device allocations (host heap memory), page-locked host memory, copies and
//! memsets, each ordered after the host functions its stream waits for.

use super::*;

/// `cuMemAlloc_v2`: zeroed host heap memory, 256-byte aligned.
#[no_mangle]
pub extern "C" fn cuMemAlloc_v2(out: *mut CUdeviceptr, len: usize) -> CUresult {
    run(F::cuMemAlloc_v2, || {
        current()?;
        device_alloc(out, len)
    })
}

/// A zeroed device allocation of `len` bytes (host heap memory, 256-byte aligned) written to
/// `out`.
fn device_alloc(out: *mut CUdeviceptr, len: usize) -> R {
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
}

/// `cuMemFree_v2`.
#[no_mangle]
pub extern "C" fn cuMemFree_v2(p: CUdeviceptr) -> CUresult {
    run(F::cuMemFree_v2, || device_free(p))
}

/// Frees a device allocation made by [`device_alloc`].
fn device_free(p: CUdeviceptr) -> R {
    let len = state::device_mem().remove(p).ok_or(INVALID_VALUE)?;
    let layout = Layout::from_size_align(len, DEVICE_ALIGN).map_err(|_| UNKNOWN)?;
    // SAFETY: `p` was allocated by `device_alloc` with this layout and was in the table
    // (removed now, so it is freed once).
    unsafe { std::alloc::dealloc(p as *mut u8, layout) };
    Ok(())
}

/// `cuMemAllocAsync` (the default pool): zeroed host heap memory at once, like
/// `cuMemAlloc_v2`, after the host functions the stream waits for.
#[no_mangle]
pub extern "C" fn cuMemAllocAsync(out: *mut CUdeviceptr, len: usize, h: CUstream) -> CUresult {
    run(F::cuMemAllocAsync, || {
        in_order(h)?;
        device_alloc(out, len)
    })
}

/// `cuMemAllocFromPoolAsync` (the default pool's handle only, `cuDeviceGetDefaultMemPool`): as
/// `cuMemAllocAsync`.
#[no_mangle]
pub extern "C" fn cuMemAllocFromPoolAsync(
    out: *mut CUdeviceptr,
    len: usize,
    pool: *mut c_void,
    h: CUstream,
) -> CUresult {
    run(F::cuMemAllocFromPoolAsync, || {
        if pool.cast_const() != default_pool() {
            return Err(INVALID_VALUE);
        }
        in_order(h)?;
        device_alloc(out, len)
    })
}

/// `cuMemFreeAsync`: frees at once, after the host functions the stream waits for.
#[no_mangle]
pub extern "C" fn cuMemFreeAsync(p: CUdeviceptr, h: CUstream) -> CUresult {
    run(F::cuMemFreeAsync, || {
        in_order(h)?;
        device_free(p)
    })
}

/// `cuDeviceGetDefaultMemPool`: one pool handle per device (only ever compared, never used).
#[no_mangle]
pub extern "C" fn cuDeviceGetDefaultMemPool(out: *mut *mut c_void, d: CUdevice) -> CUresult {
    run(F::cuDeviceGetDefaultMemPool, || {
        super::device::device(d)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(out, default_pool().cast_mut()) }
    })
}

/// The default pool's handle: the address of a static.
fn default_pool() -> *const c_void {
    static POOL: u8 = 0;
    std::ptr::addr_of!(POOL).cast()
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
pub(super) fn device_range(p: CUdeviceptr, n: usize) -> R {
    state::device_mem()
        .containing(p, n)
        .map(|_| ())
        .ok_or(INVALID_VALUE)
}

/// Orders a memory operation on `h` after the host functions it waits for (the copy then runs
/// at once, on the calling thread).
pub(super) fn in_order(h: CUstream) -> R {
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
pub(super) fn fill<T: Copy>(dst: CUdeviceptr, v: T, count: usize, h: CUstream) -> R {
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
