//! The `DeviceImpl` trait: what a backend implements for its devices.

#[allow(unused_imports)]
use super::*;

/// The backend's device (with its vendor context); cheap to clone, clones share the device.
///
/// Every method is required and does no checks of its own: users call [`Device`]
/// (`crate::api::device`), implemented for every `DeviceImpl` by core, which has refused calls
/// from inside a stream-blocking host callback, answered empty registrations itself, and
/// checked that a stream handed in is of this device before it calls a method here. `x_impl` is the backend's side of `Device::x`, whose docs say what it
/// does and which errors it gives.
pub trait DeviceImpl: Clone + Send + Sync + fmt::Debug + 'static {
    /// The backend.
    type B: Backend<Device = Self>;

    /// [`Device::info`].
    fn info_impl(&self) -> &DeviceInfo;

    /// [`Device::create_stream`].
    fn create_stream_impl(&self, desc: &StreamDesc) -> Result<StreamOf<Self::B>>;

    /// [`Device::default_stream`].
    fn default_stream_impl(&self) -> Result<StreamOf<Self::B>>;

    /// [`Device::create_event`].
    fn create_event_impl(&self, desc: &EventDesc) -> Result<EventOf<Self::B>>;

    /// [`Device::alloc`].
    fn alloc_impl(&self, len: usize) -> Result<BufferOf<Self::B>>;

    /// [`Device::alloc_uninit`].
    ///
    /// # Safety
    /// As [`Device::alloc_uninit`].
    #[allow(unsafe_code)]
    unsafe fn alloc_uninit_impl(&self, len: usize) -> Result<BufferOf<Self::B>>;

    /// [`Device::alloc_zeroed_on`]: `stream` is of this device.
    fn alloc_zeroed_on_impl(
        &self,
        stream: &StreamOf<Self::B>,
        len: usize,
    ) -> Result<BufferOf<Self::B>>;

    /// [`Device::synchronize`].
    fn synchronize_impl(&self) -> Result<()>;

    /// [`Device::alloc_pinned`] (its flags are the backend's to translate, also for
    /// `len == 0`).
    fn alloc_pinned_impl(
        &self,
        len: usize,
        desc: &PinnedAllocDesc,
    ) -> Result<PinnedBuffer<Self::B>>;

    /// The backend side of [`Device::with_registered_host`]: page-locks `len > 0` bytes at
    /// `ptr` in place and describes them as a [`PinnedAllocation`] whose
    /// [`release`](PinnedAllocation::release) (or drop) unregisters them.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes and used by nothing else until
    /// the returned allocation was released or dropped, and every copy that used it has
    /// completed before that.
    #[allow(unsafe_code)]
    unsafe fn register_host_range_impl(
        &self,
        ptr: *mut u8,
        len: usize,
    ) -> Result<std::sync::Arc<dyn PinnedAllocation>>;

    /// [`Device::can_access_peer`].
    fn can_access_peer_impl(&self, peer: &Self) -> Result<bool>;

    /// [`Device::enable_peer_access`].
    fn enable_peer_access_impl(&self, peer: &Self) -> Result<()>;

    /// [`Device::disable_peer_access`].
    fn disable_peer_access_impl(&self, peer: &Self) -> Result<()>;

    /// [`Device::memory_info`].
    fn memory_info_impl(&self) -> Result<MemoryInfo>;

    /// [`Device::load_module`].
    fn load_module_impl(&self, src: &ModuleSource<'_>) -> Result<ModuleOf<Self::B>>;

    /// [`Device::builtin_module`].
    fn builtin_module_impl(&self) -> Result<ModuleOf<Self::B>>;
}
