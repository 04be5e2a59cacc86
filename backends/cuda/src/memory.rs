//! Device memory: [`CudaBuffer`], [`CudaManagedBuffer`] and the stream-ordered
//! [`CudaAsyncAllocator`].
//!
//! # Buffer lifetime
//! A buffer's allocation lives in an `Arc`. Every enqueue that touches it (memset, copies,
//! kernels) clones that `Arc` into the stream's keep-alive list. The list is trimmed when a
//! `query`/`synchronize` observes the stream idle, and is otherwise handed to a host function
//! behind the stream's work (at stream drop, or every 256 entries); that host function moves it
//! to xstream's dispatcher thread, which drops it (`cuMemFree` is not allowed inside a host
//! function). So dropping a `CudaBuffer` never frees memory that queued work still uses; the
//! `cuMemFree` happens when the last user is known complete. A captured graph keeps its
//! buffers, and hands them to the stream at each launch. After a device fault, host functions
//! never run and the memory is left to the (dead) context.

use std::fmt;
use std::sync::{Arc, Mutex};

use xstream_core::callback::{dispatch, in_callback};
use xstream_core::{Allocator, BackendKind, Block, Buffer, Error, Result};

use crate::ffi::{self, CuStream};
use crate::stream::StreamHandle;
use crate::{CudaBackend, CudaDevice, CudaStream};

/// One device allocation; `cuMemFree` on drop.
pub(crate) struct Alloc {
    dev: CudaDevice,
    ptr: u64,
    len: usize,
}

impl Drop for Alloc {
    fn drop(&mut self) {
        let (ptr, ctx) = (self.ptr, self.dev.shared.raw_ctx);
        let free = move || {
            if ffi::bind(ctx).is_ok() {
                if let Err(c) = ffi::mem_free(ptr) {
                    tracing::debug!(code = c, "cuMemFree failed");
                }
            }
        };
        if in_callback() {
            dispatch(Box::new(move || {
                ffi::ensure_relaxed_capture_mode();
                free();
            }));
        } else {
            free();
        }
    }
}

/// Something queued work references and that must outlive it.
pub(crate) enum Keep {
    /// A device allocation.
    Buffer(#[allow(dead_code)] Arc<Alloc>),
    /// Host bytes a captured copy reads at every replay.
    Bytes(#[allow(dead_code)] Vec<u8>),
    /// A graph's list, kept by a launch of it.
    Shared(#[allow(dead_code)] Arc<Vec<Keep>>),
}

/// A zero-initialised device buffer (`cuMemAlloc`). `Send + Sync`. See the module docs for
/// when its memory is freed.
pub struct CudaBuffer {
    alloc: Arc<Alloc>,
}

impl fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaBuffer")
            .field("ptr", &format_args!("{:#x}", self.alloc.ptr))
            .field("len", &self.alloc.len)
            .finish()
    }
}

impl CudaBuffer {
    pub(crate) fn ptr(&self) -> u64 {
        self.alloc.ptr
    }
    pub(crate) fn len_bytes(&self) -> usize {
        self.alloc.len
    }
    pub(crate) fn keep(&self) -> Keep {
        Keep::Buffer(Arc::clone(&self.alloc))
    }
}

impl Buffer for CudaBuffer {
    type B = CudaBackend;
    fn len(&self) -> usize {
        self.alloc.len
    }
    fn device_address(&self) -> u64 {
        self.alloc.ptr
    }
}

pub(crate) fn alloc(dev: &CudaDevice, len: usize) -> Result<CudaBuffer> {
    if len == 0 {
        return Err(Error::invalid("a buffer needs at least one byte"));
    }
    let sh = &dev.shared;
    sh.enter()?;
    let ptr = sh.check("cuMemAlloc", ffi::mem_alloc(len))?;
    let buf = CudaBuffer {
        alloc: Arc::new(Alloc {
            dev: dev.clone(),
            ptr,
            len,
        }),
    };
    // Zero on the internal stream and wait: `cuMemsetD8` (sync) would run on the legacy stream
    // and could race with work on NON_BLOCKING streams.
    let _g = sh.sentinel_lock.lock().unwrap_or_else(|e| e.into_inner());
    sh.check(
        "cuMemsetD8Async",
        ffi::memset_d8_async(ptr, 0, len, sh.sentinel),
    )?;
    sh.check("cuStreamSynchronize", ffi::stream_synchronize(sh.sentinel))?;
    Ok(buf)
}

/// Managed (unified) memory from `cuMemAllocManaged`, for
/// [`CudaStream::attach_mem_async`]. Freed on drop (the caller orders that after its work).
pub struct CudaManagedBuffer {
    alloc: Arc<Alloc>,
}

impl fmt::Debug for CudaManagedBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaManagedBuffer")
            .field("ptr", &format_args!("{:#x}", self.alloc.ptr))
            .field("len", &self.alloc.len)
            .finish()
    }
}

impl CudaManagedBuffer {
    /// The unified address (valid on host and device).
    pub fn ptr(&self) -> u64 {
        self.alloc.ptr
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.alloc.len
    }
    /// Whether it is empty (never).
    pub fn is_empty(&self) -> bool {
        self.alloc.len == 0
    }
}

pub(crate) fn alloc_managed(dev: &CudaDevice, len: usize) -> Result<CudaManagedBuffer> {
    if len == 0 {
        return Err(Error::invalid("a buffer needs at least one byte"));
    }
    let sh = &dev.shared;
    sh.enter()?;
    if !sh.managed_memory {
        return Err(Error::unsupported(
            BackendKind::Cuda,
            "managed memory on this device",
        ));
    }
    // CU_MEM_ATTACH_GLOBAL = 1.
    let ptr = sh.check("cuMemAllocManaged", ffi::mem_alloc_managed(len, 0x1))?;
    Ok(CudaManagedBuffer {
        alloc: Arc::new(Alloc {
            dev: dev.clone(),
            ptr,
            len,
        }),
    })
}

/// A stream-ordered allocator (`cuMemAllocFromPoolAsync` / `cuMemFreeAsync` on one stream,
/// from the device's default pool `cuDeviceGetDefaultMemPool`). Register it on the stream with
/// [`xstream_core::Stream::set_allocator`]. A block is usable by work enqueued on that stream
/// after the allocation; `free` is ordered after the work enqueued before it.
pub struct CudaAsyncAllocator {
    dev: CudaDevice,
    stream: Arc<StreamHandle>,
    pool: ffi::CuMemPool,
    live: Mutex<std::collections::HashSet<u64>>,
}

impl fmt::Debug for CudaAsyncAllocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaAsyncAllocator")
            .field("stream", &self.stream.raw)
            .field("live", &self.live_blocks())
            .finish()
    }
}

impl CudaAsyncAllocator {
    pub(crate) fn new(dev: &CudaDevice, stream: &CudaStream) -> Result<Arc<Self>> {
        dev.shared.enter()?;
        let Some(pool) = dev.shared.default_pool else {
            return Err(Error::unsupported(
                BackendKind::Cuda,
                "stream-ordered allocation (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 0)",
            ));
        };
        Ok(Arc::new(Self {
            dev: dev.clone(),
            stream: Arc::clone(&stream.handle),
            pool,
            live: Mutex::new(Default::default()),
        }))
    }

    fn raw_stream(&self) -> CuStream {
        self.stream.raw
    }

    /// Blocks allocated and not yet freed.
    pub fn live_blocks(&self) -> usize {
        self.live.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Allocator for CudaAsyncAllocator {
    fn alloc(&self, size: usize) -> Option<Block> {
        self.dev.shared.enter().ok()?;
        match ffi::mem_alloc_from_pool_async(size.max(1), self.pool, self.raw_stream()) {
            Ok(p) => {
                self.live
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(p);
                Some(Block(p))
            }
            Err(c) => {
                let e = self.dev.shared.fail("cuMemAllocFromPoolAsync", c);
                tracing::debug!(error = %e, "stream-ordered allocation failed");
                None
            }
        }
    }

    fn free(&self, block: Block) {
        if !self
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&block.0)
        {
            tracing::warn!(
                block = block.0,
                "free of a block this allocator does not own"
            );
            return;
        }
        if self.dev.shared.enter().is_err() {
            return;
        }
        if let Err(c) = ffi::mem_free_async(block.0, self.raw_stream()) {
            let _ = self.dev.shared.fail("cuMemFreeAsync", c);
        }
    }

    fn address(&self, block: Block) -> u64 {
        block.0
    }
}

impl Drop for CudaAsyncAllocator {
    fn drop(&mut self) {
        let live = std::mem::take(&mut *self.live.lock().unwrap_or_else(|e| e.into_inner()));
        if live.is_empty() || in_callback() {
            return;
        }
        if ffi::bind(self.dev.shared.raw_ctx).is_ok() {
            for p in live {
                let _ = ffi::mem_free_async(p, self.stream.raw);
            }
        }
    }
}

/// Allocates `len` bytes with `cuMemAllocAsync` from the device's current pool on `stream`
/// (for callers that want stream-ordered memory without an allocator object).
///
/// # Errors
/// [`Error::Unsupported`] without memory pools; [`Error::OutOfMemory`].
pub fn alloc_async(stream: &CudaStream, len: usize) -> Result<u64> {
    let sh = &stream.cuda_device().shared;
    sh.enter()?;
    if sh.default_pool.is_none() {
        return Err(Error::unsupported(
            BackendKind::Cuda,
            "stream-ordered allocation",
        ));
    }
    sh.check(
        "cuMemAllocAsync",
        ffi::mem_alloc_async(len, stream.handle.raw),
    )
}

/// Frees memory from [`alloc_async`] with `cuMemFreeAsync` on `stream`.
///
/// # Errors
/// Vendor errors.
pub fn free_async(stream: &CudaStream, ptr: u64) -> Result<()> {
    let sh = &stream.cuda_device().shared;
    sh.enter()?;
    sh.check(
        "cuMemFreeAsync",
        ffi::mem_free_async(ptr, stream.handle.raw),
    )
}
