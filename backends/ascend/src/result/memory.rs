//! The ACL memory calls: device and host allocation, copies, memsets, registration and the
//! stream-ordered pool's calls, each through the table with its error mapped.

use super::*;
pub(crate) fn malloc(t: &AclFns, len: usize, policy: i32) -> Result<DevPtr> {
    Ok(DevPtr(out!(*mut c_void, |p| call!(
        t,
        aclrtMalloc(p, len, policy)
    ))))
}
pub(crate) fn free(t: &AclFns, p: DevPtr) -> Result<()> {
    call!(t, aclrtFree(p.0))
}
/// `aclrtMemcpyAsync`. Contract (crate-internal): `dst`/`src` stay valid for `len` bytes
/// until the copy has executed; callers keep the owners alive (keep-alive callbacks or the
/// capture's keep list).
pub(crate) fn memcpy(
    t: &AclFns,
    dst: *mut c_void,
    src: *const c_void,
    len: usize,
    kind: i32,
    s: RawStream,
) -> Result<()> {
    call!(t, aclrtMemcpyAsync(dst, len, src, len, kind, s.0))
}
pub(crate) fn memset_async(
    t: &AclFns,
    p: DevPtr,
    offset: usize,
    len: usize,
    value: u8,
    s: RawStream,
) -> Result<()> {
    let dst = p.0.cast::<u8>().wrapping_add(offset).cast::<c_void>();
    call!(t, aclrtMemsetAsync(dst, len, i32::from(value), len, s.0))
}
/// Page-locked host memory from `aclrtMallocHost` (zeroed), released with
/// `aclrtFreeHost` on drop (by the caller's keep-alive rules, after every copy using it).
#[derive(Debug)]
pub(crate) struct PinnedAlloc {
    t: &'static AclFns,
    ptr: *mut u8,
    len: usize,
    ordinal: usize,
}

// SAFETY: plain host bytes owned by this value; access synchronised by the PinnedBuffer
// fence.
unsafe impl Send for PinnedAlloc {}
// SAFETY: as above.
unsafe impl Sync for PinnedAlloc {}

impl PinnedAlloc {
    pub(crate) fn new(t: &'static AclFns, ordinal: usize, len: usize) -> Result<Self> {
        let p = out!(*mut c_void, |p| call!(opt t, aclrtMallocHost(p, len)));
        if p.is_null() {
            return Err(Error::OutOfMemory {
                backend: xstream_core::BackendKind::Ascend,
                detail: format!("{len} bytes of page-locked host memory"),
            });
        }
        // SAFETY: the runtime returned `len` writable bytes at `p`.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, len) };
        Ok(Self {
            t,
            ptr: p.cast(),
            len,
            ordinal,
        })
    }

    /// Copies `src` to the start of the block (staging before a captured copy).
    pub(crate) fn fill(&self, src: &[u8]) {
        let n = src.len().min(self.len);
        // SAFETY: the block is valid for `len` bytes, `n <= len`, and nothing else uses
        // it yet (it was just allocated by the caller).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr, n) };
    }
}

impl Drop for PinnedAlloc {
    fn drop(&mut self) {
        let (t, p) = (self.t, self.ptr as usize);
        let free = move || {
            let r = (|| call!(opt t, aclrtFreeHost(p as *mut c_void)))();
            if let Err(e) = r {
                tracing::debug!(error = %e, "aclrtFreeHost failed");
            }
        };
        off_callback(free);
    }
}

// SAFETY: `ptr` is fixed for the value's life and valid for `len` bytes.
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
}

/// Host memory the caller borrows to xstream for a registration scope
/// (`Device::with_registered_host`): the whole pages holding it registered with
/// `aclrtHostRegister` (the runtime takes page-aligned addresses only), unregistered by
/// `release` (or the drop), never freed.
#[derive(Debug)]
pub(crate) struct BorrowedRegistration {
    t: &'static AclFns,
    ptr: *mut u8,
    len: usize,
    ordinal: usize,
    /// The first registered page.
    page: usize,
    released: std::sync::atomic::AtomicBool,
}

// SAFETY: plain host bytes the registration scope borrows exclusively; access is
// synchronised by the PinnedBuffer fence.
unsafe impl Send for BorrowedRegistration {}
// SAFETY: as above.
unsafe impl Sync for BorrowedRegistration {}

impl BorrowedRegistration {
    /// Registers the pages holding `len > 0` bytes at `ptr`.
    ///
    /// # Safety
    /// `ptr` must be valid for `len` bytes until this value was released or dropped, and
    /// no copy may use it after that.
    pub(crate) unsafe fn new(
        t: &'static AclFns,
        ordinal: usize,
        ptr: *mut u8,
        len: usize,
    ) -> Result<Self> {
        let register = opt(t.aclrtHostRegister, "aclrtHostRegister")?;
        opt(t.aclrtHostUnregister, "aclrtHostUnregister")?;
        if ptr.is_null() || len == 0 {
            return Err(Error::invalid(
                "cannot register an empty or null host range",
            ));
        }
        let page = (ptr as usize) / REGISTER_ALIGN * REGISTER_ALIGN;
        let end = (ptr as usize)
            .checked_add(len)
            .and_then(|e| e.checked_next_multiple_of(REGISTER_ALIGN))
            .ok_or_else(|| Error::invalid("host range too large to register"))?;
        let mut dev: *mut c_void = null_mut();
        // SAFETY: the pages `page..end` hold the caller's range, valid until the
        // unregistration (the caller's contract); `dev` is a live out-parameter; the
        // prototype is the C one.
        let code = unsafe {
            register(
                page as *mut c_void,
                (end - page) as u64,
                ACL_HOST_REGISTER_MAPPED,
                &mut dev,
            )
        };
        check(t, "aclrtHostRegister", code)?;
        Ok(Self {
            t,
            ptr,
            len,
            ordinal,
            page,
            released: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// `aclrtHostUnregister`, once.
    fn unregister(&self) {
        if self
            .released
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return;
        }
        let (t, p) = (self.t, self.page);
        let undo = move || {
            if let Err(e) = (|| call!(opt t, aclrtHostUnregister(p as *mut c_void)))() {
                tracing::debug!(error = %e, "aclrtHostUnregister failed");
            }
        };
        off_callback(undo);
    }
}

impl Drop for BorrowedRegistration {
    fn drop(&mut self) {
        // Normally already undone by `release` at the end of the registration scope.
        self.unregister();
    }
}

// SAFETY: `ptr` is fixed for the value's life and valid for `len` bytes while the
// registration scope lasts.
unsafe impl xstream_core::PinnedAllocation for BorrowedRegistration {
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
        self.unregister();
    }
}

/// The alignment `aclrtHostRegister` requires of its address (a 4 KiB page).
pub(crate) const REGISTER_ALIGN: usize = 4096;
/// `ACL_HOST_REGISTER_MAPPED` (`aclrtHostRegisterType`).
const ACL_HOST_REGISTER_MAPPED: i32 = 0;

/// What holds the bytes of a registered range.
#[derive(Debug)]
enum Backing {
    /// The caller's vector, registered in place (its buffer was page-aligned).
    InPlace(Vec<u8>),
    /// A page-aligned block of this layout, allocated here and holding the caller's bytes.
    Moved(std::alloc::Layout),
}

/// Host memory registered with `aclrtHostRegister` (page-locked for the runtime),
/// unregistered with `aclrtHostUnregister` and released on drop.
#[derive(Debug)]
pub(crate) struct PinnedRegistered {
    t: &'static AclFns,
    ptr: *mut u8,
    len: usize,
    ordinal: usize,
    backing: Option<Backing>,
}

// SAFETY: plain host bytes owned by this value; access synchronised by the PinnedBuffer
// fence.
unsafe impl Send for PinnedRegistered {}
// SAFETY: as above.
unsafe impl Sync for PinnedRegistered {}

impl PinnedRegistered {
    /// Registers `data` (not empty): in place when its buffer is page-aligned, otherwise
    /// after moving the bytes once into a page-aligned block.
    pub(crate) fn new(t: &'static AclFns, ordinal: usize, mut data: Vec<u8>) -> Result<Self> {
        let register = opt(t.aclrtHostRegister, "aclrtHostRegister")?;
        opt(t.aclrtHostUnregister, "aclrtHostUnregister")?;
        let len = data.len();
        let (ptr, backing) = if (data.as_ptr() as usize).is_multiple_of(REGISTER_ALIGN) {
            (data.as_mut_ptr(), Backing::InPlace(data))
        } else {
            let size = len.div_ceil(REGISTER_ALIGN) * REGISTER_ALIGN;
            let layout = std::alloc::Layout::from_size_align(size, REGISTER_ALIGN)
                .map_err(|_| Error::invalid("host range too large to register"))?;
            // SAFETY: `layout` has a non-zero size (`len > 0`, checked by the caller).
            let p = unsafe { std::alloc::alloc(layout) };
            if p.is_null() {
                return Err(Error::OutOfMemory {
                    backend: BackendKind::Ascend,
                    detail: format!("{size} bytes of page-aligned host memory"),
                });
            }
            // SAFETY: `p` is valid for `size >= len` bytes and does not overlap `data`.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, len) };
            (p, Backing::Moved(layout))
        };
        let mut this = Self {
            t,
            ptr,
            len,
            ordinal,
            backing: Some(backing),
        };
        let mut dev: *mut c_void = null_mut();
        // SAFETY: `ptr` is valid for `len` bytes and stays so until the unregistration in
        // `drop`; `dev` is a live out-parameter; the prototype is the C one.
        let code = unsafe { register(ptr.cast(), len as u64, ACL_HOST_REGISTER_MAPPED, &mut dev) };
        if let Err(e) = check(t, "aclrtHostRegister", code) {
            // Not registered: release the bytes without unregistering.
            this.release();
            return Err(e);
        }
        Ok(this)
    }

    /// Frees the backing (after the unregistration, or when registration failed).
    fn release(&mut self) {
        if let Some(Backing::Moved(layout)) = self.backing.take() {
            // SAFETY: `ptr` came from `std::alloc::alloc(layout)` and is freed once.
            unsafe { std::alloc::dealloc(self.ptr, layout) };
        }
    }
}

impl Drop for PinnedRegistered {
    fn drop(&mut self) {
        let Some(backing) = self.backing.take() else {
            return;
        };
        let (t, p) = (self.t, self.ptr as usize);
        let free = move || {
            let r = (|| call!(opt t, aclrtHostUnregister(p as *mut c_void)))();
            if let Err(e) = r {
                tracing::debug!(error = %e, "aclrtHostUnregister failed");
            }
            match backing {
                // SAFETY: `p` came from `std::alloc::alloc(layout)`, is no longer
                // registered nor used by a queued copy, and is freed once.
                Backing::Moved(layout) => unsafe { std::alloc::dealloc(p as *mut u8, layout) },
                // The caller's vector, no longer registered: freed now.
                Backing::InPlace(v) => drop(v),
            }
        };
        off_callback(free);
    }
}

// SAFETY: `ptr` is fixed for the value's life and valid for `len` bytes.
unsafe impl xstream_core::PinnedAllocation for PinnedRegistered {
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
}

/// Runs `release` now, or on the dispatcher thread inside a callback (no runtime calls there).
fn off_callback(release: impl FnOnce() + Send + 'static) {
    if xstream_core::callback::in_callback() {
        xstream_core::callback::dispatch(Box::new(release));
    } else {
        release();
    }
}

/// `dst + offset` as a raw pointer.
pub(crate) fn at(p: DevPtr, offset: usize) -> *mut c_void {
    p.0.cast::<u8>().wrapping_add(offset).cast()
}
