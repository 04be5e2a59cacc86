//! The `Device` trait: what users call on a device (streams, events, memory, modules,
//! peers), with every check of its operations (the callback gate, zero-length page-locked
//! memory, the stream of `alloc_zeroed_on`), implemented for every backend's [`DeviceImpl`] by
//! the blanket impl below and by nothing else.

#[allow(unused_imports)]
use crate::backend::*;
use crate::callback::ensure_not_in_callback;
use crate::devinfo::MemoryInfo;
use crate::hostmem::{PinnedAllocDesc, PinnedBuffer, PinnedRegistration};
use crate::module::ModuleSource;
use crate::Result;
#[allow(unused_imports)]
use crate::{Error, Stream};

/// A device (with its vendor context). Cheap to clone: clones share the device.
pub trait Device: DeviceImpl {
    /// Static facts.
    fn info(&self) -> &DeviceInfo {
        self.info_impl()
    }

    /// Creates a stream.
    ///
    /// # Errors
    /// Flag and priority errors per the desc's policy, [`Error::ResourceExhausted`] at the
    /// vendor's stream limit, vendor errors.
    fn create_stream(&self, desc: &StreamDesc) -> Result<StreamOf<Self::B>> {
        ensure_not_in_callback()?;
        self.create_stream_impl(desc)
    }

    /// The device's default stream (never destroyed; cannot be captured).
    ///
    /// # Errors
    /// Vendor errors.
    fn default_stream(&self) -> Result<StreamOf<Self::B>> {
        ensure_not_in_callback()?;
        self.default_stream_impl()
    }

    /// Creates an event.
    ///
    /// # Errors
    /// Flag errors per the desc's policy, vendor errors.
    fn create_event(&self, desc: &EventDesc) -> Result<EventOf<Self::B>> {
        ensure_not_in_callback()?;
        self.create_event_impl(desc)
    }

    /// Allocates a zero-initialised device buffer of `len` bytes. A zero-length buffer is
    /// allowed (an empty tensor): every zero-length operation on it is a no-op, and it still
    /// holds one allocation granule underneath, so its address is valid and unique.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`].
    fn alloc(&self, len: usize) -> Result<BufferOf<Self::B>> {
        ensure_not_in_callback()?;
        self.alloc_impl(len)
    }

    /// Waits for all work on the device (every stream).
    ///
    /// # Errors
    /// The first error of any stream; sticky errors.
    fn synchronize(&self) -> Result<()> {
        ensure_not_in_callback()?;
        self.synchronize_impl()
    }

    // ---- Data path: page-locked host memory (see `crate::hostmem`) ----

    /// Allocates `len` bytes of page-locked host memory bound to this device (zeroed).
    /// `len == 0` gives an empty buffer ([`PinnedBuffer::empty`]), as a zero-length request is
    /// a no-op everywhere.
    ///
    /// # Errors
    /// Flag errors per the desc's policy;
    /// [`Error::OutOfMemory`]; [`Error::Unsupported`] where the backend has no such memory.
    fn alloc_pinned(&self, len: usize, desc: &PinnedAllocDesc) -> Result<PinnedBuffer<Self::B>> {
        ensure_not_in_callback()?;
        self.alloc_pinned_impl(len, desc)
    }

    /// Renamed [`Device::alloc_pinned`] (page-locked memory is "pinned"; `Host` names the host
    /// backend).
    ///
    /// # Errors
    /// As [`Device::alloc_pinned`].
    #[deprecated(since = "0.2.0", note = "renamed `alloc_pinned`")]
    fn alloc_host(&self, len: usize, desc: &PinnedAllocDesc) -> Result<PinnedBuffer<Self::B>> {
        self.alloc_pinned(len, desc)
    }

    /// Page-locks the caller's `data` in place for the scope of `f` (CUDA
    /// `cuMemHostRegister`, ACL `aclrtHostRegister` of the pages holding it, the host backend:
    /// nothing to do) and hands `f` a [`PinnedRegistration`] whose
    /// [`upload`](PinnedRegistration::upload) and [`download`](PinnedRegistration::download) are
    /// single native asynchronous copies: they return without waiting for the stream's
    /// earlier work, and nothing is staged or copied on the host. `data` stays borrowed until
    /// the scope ends, and the scope ends only after every copy that used it has completed
    /// and the memory is unregistered, so no copy can outlive the borrow (no `unsafe` for the
    /// caller). The bytes a download wrote are in `data` when this returns. An empty `data` is
    /// a no-op registration.
    ///
    /// ```
    /// # use xstream_core::{Backend, Device, Stream, StreamDesc};
    /// # fn demo<B: Backend>(dev: &B::Device) -> xstream_core::Result<()> {
    /// let s = dev.create_stream(&StreamDesc::new())?;
    /// let mut weights = vec![1.5f32; 1024];
    /// let buf = dev.alloc(4096)?;
    /// dev.with_registered_host(&mut weights, |reg| {
    ///     reg.upload(&s, 0, &buf) // returns at once, even behind earlier work on `s`
    /// })??;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Unsupported`] where the backend cannot register host memory; vendor errors of
    /// the registration: ACL registers the whole pages holding `data` and refuses a page that
    /// holds other page-locked or registered memory (keep slices you register on pages of
    /// their own, e.g. page-aligned allocations, when other page-locked memory is alive); the wait for the scope's
    /// copies (reported after the memory was unregistered). The closure's own result is
    /// returned inside `Ok`.
    fn with_registered_host<T: bytemuck::Pod, R>(
        &self,
        data: &mut [T],
        f: impl FnOnce(&PinnedRegistration<'_, Self::B>) -> R,
    ) -> Result<R>
    where
        Self: Sized,
    {
        ensure_not_in_callback()?;
        crate::hostmem::with_registered::<Self::B, T, R>(self, data, f)
    }

    // ---- Data path: peer access between devices of one backend ----

    /// Whether this device can access the memory of `peer` (another device of the same
    /// backend) once [`Device::enable_peer_access`] was called. `false` for the device itself
    /// (same-device copies are ordinary [`Stream::copy`]s) and on backends without peer
    /// access.
    ///
    /// # Errors
    /// Vendor errors.
    fn can_access_peer(&self, peer: &Self) -> Result<bool> {
        ensure_not_in_callback()?;
        self.can_access_peer_impl(peer)
    }

    /// Lets this device access the memory of `peer`, as the vendor's peer-access call does;
    /// needed before [`Stream::copy_peer`] on a stream of this device moves bytes of `peer`.
    /// Enabling twice is not an error (the vendors' "already enabled" is absorbed).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for the device itself; [`Error::Unsupported`] where
    /// [`Device::can_access_peer`] says no or the backend has no peer access;
    /// vendor errors.
    fn enable_peer_access(&self, peer: &Self) -> Result<()> {
        ensure_not_in_callback()?;
        self.enable_peer_access_impl(peer)
    }

    /// Withdraws access granted by [`Device::enable_peer_access`]; later peer copies with
    /// `peer` fail. Copies already enqueued complete.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when access to `peer` was not enabled;
    /// [`Error::Unsupported`] without peer access; vendor errors.
    fn disable_peer_access(&self, peer: &Self) -> Result<()> {
        ensure_not_in_callback()?;
        self.disable_peer_access_impl(peer)
    }

    // --- device info ---

    /// Free and total memory now (see [`crate::devinfo`]).
    ///
    /// # Errors
    /// [`Error::Unsupported`] where the vendor cannot say; vendor errors.
    fn memory_info(&self) -> Result<MemoryInfo> {
        ensure_not_in_callback()?;
        self.memory_info_impl()
    }

    // --- end of device info ---

    // ---- Modules and kernels (see `crate::module`) ----

    /// Loads a module of kernels.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a source of another backend (or without
    /// [`Capabilities::MODULES`]); [`Error::InvalidArgument`] for malformed code that xstream
    /// detects before calling the vendor; for code the vendor rejects, the vendor's error
    /// ([`Error::Native`]) with its code and, where there is one, the compiler's log as its
    /// message.
    fn load_module(&self, src: &ModuleSource<'_>) -> Result<ModuleOf<Self::B>> {
        ensure_not_in_callback()?;
        self.load_module_impl(src)
    }

    /// The module shipped with the crate, holding [`crate::module::BUILTIN_DELAY`]
    /// (`xstream_delay(u64 nanoseconds)`) and [`crate::module::BUILTIN_LCG`]
    /// (`xstream_lcg(buffer, u32 words, u32 rounds)`), the kernels behind [`Kernel::Delay`]
    /// and [`Kernel::Lcg`].
    ///
    /// # Errors
    /// [`Error::Unsupported`] where the backend has no builtin module.
    fn builtin_module(&self) -> Result<ModuleOf<Self::B>> {
        ensure_not_in_callback()?;
        self.builtin_module_impl()
    }

    // --- ordering and allocation without host sync ---

    /// Allocates a device buffer of `len` bytes whose contents are unspecified, with no host
    /// synchronization: no zeroing is enqueued and the calling thread never waits for device
    /// work (the vendor's allocation call itself is the only cost). The buffer is usable at
    /// once by work on any stream of the device, like one from [`Device::alloc`].
    ///
    /// A backend without a cheaper path (the host backend) allocates as [`Device::alloc`]:
    /// zeroed bytes are one choice of unspecified bytes. See docs/semantics.md ("Allocation
    /// without host synchronization") for what each backend does.
    ///
    /// # Safety
    /// The bytes are unspecified: they may hold data that an earlier allocation of this
    /// process left there. Reading them (by any work, a kernel, a copy, a readback) before
    /// writing them is the caller's bug; xstream neither detects nor prevents it. Writing
    /// first (a copy, a kernel, a [`Stream::memset`]) makes the buffer as defined as any
    /// other.
    ///
    /// # Errors
    /// As [`Device::alloc`].
    #[allow(unsafe_code)]
    unsafe fn alloc_uninit(&self, len: usize) -> Result<BufferOf<Self::B>> {
        ensure_not_in_callback()?;
        // SAFETY: the caller keeps this function's contract, which is the backend's.
        unsafe { self.alloc_uninit_impl(len) }
    }

    /// Allocates a device buffer of `len` bytes zeroed in `stream`'s order: the zeroing is
    /// enqueued on `stream` and the calling thread does not wait for it. Work enqueued on
    /// `stream` after this call sees zeros; work on another stream must be ordered after it
    /// first ([`Stream::wait_stream`], an event), as for any write.
    ///
    /// # Errors
    /// As [`Device::alloc`]; [`Error::WrongDevice`] for a stream of another device; the
    /// stream's enqueue errors (the buffer is then dropped under the lifetime rule).
    fn alloc_zeroed_on(&self, stream: &StreamOf<Self::B>, len: usize) -> Result<BufferOf<Self::B>> {
        ensure_not_in_callback()?;
        if stream.device().info().ordinal != self.info().ordinal {
            return Err(Error::WrongDevice(
                "alloc_zeroed_on: the stream belongs to another device".into(),
            ));
        }
        self.alloc_zeroed_on_impl(stream, len)
    }

    // --- end of ordering and allocation without host sync ---
}

impl<D: DeviceImpl> Device for D {}
