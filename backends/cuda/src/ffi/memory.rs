//! Memory: allocation (plain, managed, stream-ordered), memset, copies, stream memory
//! operations, pool thresholds, and page-locked host memory ([`PinnedAlloc`]).

use std::ffi::c_void;
use std::ptr;
use std::sync::Arc;

use cudarc::driver::sys;

use super::context::bind;
use super::{ok, CuContext, CuMemPool, CuResult, CuStream};

/// `cuMemAlloc`.
pub(crate) fn mem_alloc(len: usize) -> CuResult<u64> {
    let mut p = 0;
    // SAFETY: valid out-pointer; context bound.
    ok(unsafe { sys::cuMemAlloc_v2(&mut p, len) })?;
    Ok(p)
}

/// `cuMemAllocManaged`.
pub(crate) fn mem_alloc_managed(len: usize, flags: u32) -> CuResult<u64> {
    let mut p = 0;
    // SAFETY: valid out-pointer; context bound.
    ok(unsafe { sys::cuMemAllocManaged(&mut p, len, flags) })?;
    Ok(p)
}

/// `cuMemGetAddressRange`: the base and size of the allocation holding `p`.
pub(crate) fn mem_get_address_range(p: u64) -> CuResult<(u64, usize)> {
    let (mut base, mut size) = (0, 0);
    // SAFETY: valid out-pointers; context bound; an unknown address is an error, not UB.
    ok(unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, p) })?;
    Ok((base, size))
}

/// `cuMemFree`.
///
/// # Safety
/// `p` is the base of a live allocation of the bound context made by `cuMemAlloc` (or
/// `cuMemAllocManaged`), not freed before, and no work enqueued or captured on any stream
/// uses it any more (the driver does not track the uses: a kernel or copy still pending
/// would touch memory that may be reallocated).
pub(crate) unsafe fn mem_free(p: u64) -> CuResult<()> {
    // SAFETY: the caller's contract above.
    ok(unsafe { sys::cuMemFree_v2(p) })
}

/// `cuMemAllocFromPoolAsync`.
pub(crate) fn mem_alloc_from_pool_async(len: usize, pool: CuMemPool, s: CuStream) -> CuResult<u64> {
    let mut p = 0;
    // SAFETY: valid out-pointer; pool and stream live.
    ok(unsafe { sys::cuMemAllocFromPoolAsync(&mut p, len, pool.0, s.0) })?;
    Ok(p)
}

/// `cuMemAllocAsync` (from the device's current pool).
pub(crate) fn mem_alloc_async(len: usize, s: CuStream) -> CuResult<u64> {
    let mut p = 0;
    // SAFETY: valid out-pointer; stream live.
    ok(unsafe { sys::cuMemAllocAsync(&mut p, len, s.0) })?;
    Ok(p)
}

/// `cuMemFreeAsync`: frees `p` once the work enqueued on `s` before it completed.
///
/// # Safety
/// `p` is the base of a live allocation not freed before (stream-ordered, or plain on a
/// driver that accepts it), `s` is live, and every use of `p` by work on *other* streams is
/// ordered before this call on `s` (an event waited on `s`): the driver orders the free
/// after `s`'s work only.
pub(crate) unsafe fn mem_free_async(p: u64, s: CuStream) -> CuResult<()> {
    // SAFETY: the caller's contract above.
    ok(unsafe { sys::cuMemFreeAsync(p, s.0) })
}

/// `cuMemsetD8Async`.
pub(crate) fn memset_d8_async(p: u64, value: u8, len: usize, s: CuStream) -> CuResult<()> {
    // SAFETY: the range lies inside a live allocation (checked by the caller); `s` live.
    ok(unsafe { sys::cuMemsetD8Async(p, value, len, s.0) })
}

/// `cuMemsetD16Async`: `n` 16-bit elements from `p` (2-byte aligned).
pub(crate) fn memset_d16_async(p: u64, value: u16, n: usize, s: CuStream) -> CuResult<()> {
    // SAFETY: the range lies inside a live allocation and is aligned (checked by the caller);
    // `s` live.
    ok(unsafe { sys::cuMemsetD16Async(p, value, n, s.0) })
}

/// `cuMemsetD32Async`: `n` 32-bit elements from `p` (4-byte aligned).
pub(crate) fn memset_d32_async(p: u64, value: u32, n: usize, s: CuStream) -> CuResult<()> {
    // SAFETY: as in `memset_d16_async`.
    ok(unsafe { sys::cuMemsetD32Async(p, value, n, s.0) })
}

/// `cuMemsetD2D32Async`: `height` rows of `width` 32-bit elements, rows `pitch` bytes apart,
/// from `p` (4-byte aligned).
pub(crate) fn memset_d2d32_async(
    p: u64,
    pitch: usize,
    value: u32,
    width: usize,
    height: usize,
    s: CuStream,
) -> CuResult<()> {
    // SAFETY: the rows lie inside a live allocation and are aligned (checked by the caller:
    // `p + (height - 1) * pitch + 4 * width` is within the range); `s` live.
    ok(unsafe { sys::cuMemsetD2D32Async(p, pitch, value, width, height, s.0) })
}

/// `cuStreamWaitValue32` (the `_v2` symbol, CUDA >= 11.7): `flags` is a
/// `CU_STREAM_WAIT_VALUE_*` comparison.
pub(crate) fn stream_wait_value32(s: CuStream, addr: u64, value: u32, flags: u32) -> CuResult<()> {
    // SAFETY: `addr` is an aligned word inside a live allocation the stream keeps (checked by
    // the caller); `s` is live.
    ok(unsafe { sys::cuStreamWaitValue32_v2(s.0, addr, value, flags) })
}

/// `cuStreamWaitValue64` (`_v2`).
pub(crate) fn stream_wait_value64(s: CuStream, addr: u64, value: u64, flags: u32) -> CuResult<()> {
    // SAFETY: as in `stream_wait_value32`.
    ok(unsafe { sys::cuStreamWaitValue64_v2(s.0, addr, value, flags) })
}

/// `cuStreamWriteValue32` (`_v2`, `CU_STREAM_WRITE_VALUE_DEFAULT`).
pub(crate) fn stream_write_value32(s: CuStream, addr: u64, value: u32) -> CuResult<()> {
    // SAFETY: as in `stream_wait_value32`.
    ok(unsafe { sys::cuStreamWriteValue32_v2(s.0, addr, value, 0) })
}

/// `cuStreamWriteValue64` (`_v2`, `CU_STREAM_WRITE_VALUE_DEFAULT`).
pub(crate) fn stream_write_value64(s: CuStream, addr: u64, value: u64) -> CuResult<()> {
    // SAFETY: as in `stream_wait_value32`.
    ok(unsafe { sys::cuStreamWriteValue64_v2(s.0, addr, value, 0) })
}

/// `cuMemcpyHtoDAsync` from pageable memory.
///
/// # Safety
/// `dst..dst + src.len()` lies inside a live device allocation of the stream's context, and
/// `src` stays allocated and unmodified until the copy has read it: for pageable memory
/// CUDA stages the source before returning (CUDA "API synchronization behavior"), but a
/// captured copy reads `src` at every replay of the graph, so during a capture the caller
/// keeps `src` alive as long as the graph.
pub(crate) unsafe fn memcpy_htod_async(dst: u64, src: &[u8], s: CuStream) -> CuResult<()> {
    // SAFETY: `src` is valid for `src.len()` bytes during the call; later reads and the
    // destination range are the caller's contract above.
    ok(unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src.as_ptr() as *const c_void, src.len(), s.0) })
}

/// `cuMemcpyDtoHAsync` into the memory behind `dst`: the device writes it *after* this
/// returns, when the stream reaches the copy.
///
/// # Safety
/// `src..src + dst.len()` lies inside a live device allocation of the stream's context, and
/// the memory behind `dst` stays allocated, is not moved (a `Box`'s or `Vec`'s heap contents,
/// never a stack array), and is neither read nor written by anything else until the stream has
/// completed the copy (the borrow ends when this returns; the device's write does not).
pub(crate) unsafe fn memcpy_dtoh_async(dst: &mut [u8], src: u64, s: CuStream) -> CuResult<()> {
    // SAFETY: `dst` is valid for writes of `dst.len()` bytes now; its life until the copy
    // completes and the source range are the caller's contract above.
    ok(unsafe { sys::cuMemcpyDtoHAsync_v2(dst.as_mut_ptr() as *mut c_void, src, dst.len(), s.0) })
}

/// `cuMemcpyDtoDAsync`.
pub(crate) fn memcpy_dtod_async(dst: u64, src: u64, len: usize, s: CuStream) -> CuResult<()> {
    // SAFETY: both ranges checked by the caller; `s` live.
    ok(unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, len, s.0) })
}

/// `cuMemcpyHtoDAsync` from page-locked memory: a true asynchronous copy, which reads `src`
/// when the stream reaches it.
///
/// # Safety
/// `dst..dst + src.len()` lies inside a live device allocation of the stream's context, and
/// the span's page-locked memory stays allocated and is not written by host code until the
/// stream has completed the copy (the caller puts the span on the stream's keep list, and
/// the `PinnedBuffer` fence keeps host code out).
pub(crate) unsafe fn memcpy_htod_async_span(
    dst: u64,
    src: &xstream_core::PinnedSpan,
    s: CuStream,
) -> CuResult<()> {
    // SAFETY: the caller's contract above.
    ok(unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src.as_ptr() as *const c_void, src.len(), s.0) })
}

/// `cuMemcpyDtoHAsync` into page-locked memory, written when the stream reaches the copy.
///
/// # Safety
/// `src..src + dst.len()` lies inside a live device allocation of the stream's context, and
/// the span's memory stays allocated and is neither read nor written by host code until the
/// stream has completed the copy (keep list and `PinnedBuffer` fence, as for
/// [`memcpy_htod_async_span`]).
pub(crate) unsafe fn memcpy_dtoh_async_span(
    dst: &xstream_core::PinnedSpan,
    src: u64,
    s: CuStream,
) -> CuResult<()> {
    // SAFETY: the caller's contract above.
    ok(unsafe { sys::cuMemcpyDtoHAsync_v2(dst.as_ptr() as *mut c_void, src, dst.len(), s.0) })
}

/// `cuMemPoolSetAttribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)`.
pub(crate) fn mem_pool_set_release_threshold(pool: CuMemPool, bytes: u64) -> CuResult<()> {
    let mut v: u64 = bytes;
    // SAFETY: live pool; the attribute takes a pointer to a cuuint64_t.
    ok(unsafe {
        sys::cuMemPoolSetAttribute(
            pool.0,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            &mut v as *mut u64 as *mut c_void,
        )
    })
}

/// Page-locked host memory from `cuMemHostAlloc`, or caller memory page-locked with
/// `cuMemHostRegister`; released (`cuMemFreeHost` / `cuMemHostUnregister`) on drop.
#[derive(Debug)]
pub(crate) struct PinnedAlloc {
    ptr: *mut u8,
    len: usize,
    ctx: CuContext,
    /// Keeps the context retained while the memory lives and until its release ran (also
    /// when that release is dispatched from inside a host callback).
    retained: Arc<cudarc::driver::CudaContext>,
    ordinal: usize,
    /// The caller's memory, for a registration (unregistered, then dropped).
    registered: Option<Vec<u8>>,
    /// A registration of memory borrowed for a scope (`Device::with_registered_host`):
    /// unregistered by `release` (or the drop), never freed.
    borrowed: bool,
    /// The borrowed registration was already undone.
    released: std::sync::atomic::AtomicBool,
}

// SAFETY: the pointer is plain host memory owned by this value; access is synchronised by the
// PinnedBuffer fence.
unsafe impl Send for PinnedAlloc {}
// SAFETY: as above.
unsafe impl Sync for PinnedAlloc {}

impl PinnedAlloc {
    /// `cuMemHostAlloc(len, flags)` in the bound context `ctx` (retained by `retained`),
    /// zeroed.
    pub(crate) fn alloc(
        ctx: CuContext,
        retained: &Arc<cudarc::driver::CudaContext>,
        ordinal: usize,
        len: usize,
        flags: u32,
    ) -> CuResult<Self> {
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: valid out-pointer; context bound by the caller.
        ok(unsafe { sys::cuMemHostAlloc(&mut p, len, flags) })?;
        // SAFETY: the driver returned `len` writable bytes at `p`.
        unsafe { ptr::write_bytes(p as *mut u8, 0, len) };
        Ok(Self {
            ptr: p as *mut u8,
            len,
            ctx,
            retained: Arc::clone(retained),
            ordinal,
            registered: None,
            borrowed: false,
            released: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// `cuMemHostRegister` of the caller's bytes (taken over; returned to nobody).
    pub(crate) fn register(
        ctx: CuContext,
        retained: &Arc<cudarc::driver::CudaContext>,
        ordinal: usize,
        mut v: Vec<u8>,
        flags: u32,
    ) -> CuResult<Self> {
        let (p, len) = (v.as_mut_ptr(), v.len());
        // SAFETY: the Vec's heap block is valid for `len` bytes and is not moved or freed
        // before the unregistration in `drop` (the Vec is kept in `registered`).
        ok(unsafe { sys::cuMemHostRegister_v2(p as *mut c_void, len, flags) })?;
        Ok(Self {
            ptr: p,
            len,
            ctx,
            retained: Arc::clone(retained),
            ordinal,
            registered: Some(v),
            borrowed: false,
            released: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// `cuMemHostRegister` of `len` bytes the caller borrows to xstream for a scope (not taken
    /// over: unregistered by `release` or the drop, never freed).
    ///
    /// # Safety
    /// `p` must be valid for `len` bytes until this value was released or dropped, and no
    /// copy may use it after that.
    pub(crate) unsafe fn register_borrowed(
        ctx: CuContext,
        retained: &Arc<cudarc::driver::CudaContext>,
        ordinal: usize,
        p: *mut u8,
        len: usize,
        flags: u32,
    ) -> CuResult<Self> {
        // SAFETY: `p` is valid for `len` bytes until the unregistration (the caller's
        // contract); context bound by the caller.
        ok(unsafe { sys::cuMemHostRegister_v2(p as *mut c_void, len, flags) })?;
        Ok(Self {
            ptr: p,
            len,
            ctx,
            retained: Arc::clone(retained),
            ordinal,
            registered: None,
            borrowed: true,
            released: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// `cuMemHostUnregister` of a borrowed registration, once.
    fn unregister_borrowed(&self) {
        if !self.borrowed
            || self
                .released
                .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return;
        }
        unregister(self.ctx, self.ptr.cast());
    }
}

/// `cuMemHostUnregister(p)` in context `ctx`, a borrowed registration's undoing (a failure is
/// logged). `p` was registered in `ctx` by [`PinnedAlloc::register_borrowed`], and is
/// unregistered once (the `released` flag) after the copies that used it (the registration
/// scope waited for them, or they kept the allocation alive).
fn unregister(ctx: CuContext, p: *mut c_void) {
    if bind(ctx).is_ok() {
        // SAFETY: as documented above: a live registration of this context, undone once.
        let r = unsafe { sys::cuMemHostUnregister(p) };
        if r != sys::CUresult::CUDA_SUCCESS {
            tracing::debug!(code = r as u32, "cuMemHostUnregister failed");
        }
    }
}

impl Drop for PinnedAlloc {
    fn drop(&mut self) {
        if self.borrowed {
            // Normally already undone by `release` at the end of the registration scope (a
            // call outside any host callback); otherwise now, or on the dispatcher inside one.
            if !self
                .released
                .swap(true, std::sync::atomic::Ordering::AcqRel)
            {
                // Dispatched, the range may be unregistered after the caller's scope ended: a
                // late unpinning of memory the caller may reuse, never a driver call on the
                // driver's callback thread.
                let (p, ctx) = (self.ptr as usize, self.ctx);
                crate::stream::release_now_or_dispatched(&self.retained, move || {
                    unregister(ctx, p as *mut c_void);
                });
            }
            return;
        }
        let (p, ctx, reg) = (self.ptr as usize, self.ctx, self.registered.take());
        let free = move || {
            if bind(ctx).is_ok() {
                // SAFETY: `p` came from cuMemHostAlloc / cuMemHostRegister of this context and
                // no queued copy uses it (its last user dropped its keep-alive clone).
                let r = unsafe {
                    if reg.is_some() {
                        sys::cuMemHostUnregister(p as *mut c_void)
                    } else {
                        sys::cuMemFreeHost(p as *mut c_void)
                    }
                };
                if r != sys::CUresult::CUDA_SUCCESS {
                    tracing::debug!(code = r as u32, "releasing page-locked host memory failed");
                }
            }
            drop(reg);
        };
        crate::stream::release_now_or_dispatched(&self.retained, free);
    }
}

// SAFETY: `ptr` is fixed for the value's life and valid for `len` bytes (driver allocation or
// the kept Vec's block).
unsafe impl xstream_core::PinnedAllocation for PinnedAlloc {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn page_locked(&self) -> bool {
        true
    }
    fn ordinal(&self) -> usize {
        self.ordinal
    }
    fn release(&self) {
        self.unregister_borrowed();
    }
}
