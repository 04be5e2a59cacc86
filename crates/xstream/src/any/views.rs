//! The erased path's views, typed copies, fills of every width, the built-in reduce and the
//! rest of the generic traits' surface: the same methods as [`Stream`], [`Buffer`] and
//! [`Device`], over [`AnyBuffer`] views.
//!
//! A view of an erased buffer is the core's own [`BufferView`] / [`DeviceSlice`] over
//! [`AnyBuffer`] (which is [`Viewable`]): made, sliced, split and typed exactly as on the
//! generic path, and turned into the backend's view (one range check) when an operation runs.

use xstream_core::{MemoryInfo, MemsetPattern, Reduction, Viewable};

use super::{mixed, AnyBuffer, AnyDevice, AnyPinnedBuffer, AnyStream, Erasable};
use crate::{Backend, Buffer, BufferView, Device, DeviceSlice, Kernel, Readback, Result, Stream};

impl Viewable for AnyBuffer {
    #[inline]
    fn byte_len(&self) -> usize {
        self.len()
    }
    #[inline]
    fn base_address(&self) -> u64 {
        self.device_address()
    }
}

/// The backend's view of the same range, for stream `_s` (whose backend the buffer must be
/// of: else the mixing error).
#[inline]
fn typed_view<'v, S: Stream>(
    op: &'static str,
    _s: &S,
    v: BufferView<'v, AnyBuffer>,
) -> Result<BufferView<'v, <S::B as Backend>::Buffer>>
where
    S::B: Erasable,
{
    let b = <S::B as Erasable>::buffer_of(v.buffer())
        .ok_or_else(|| mixed(op, <S::B as Backend>::KIND, v.buffer().kind()))?;
    BufferView::range(b, v.offset(), v.len())
}

impl AnyBuffer {
    /// [`Buffer::view`]: the whole buffer as a byte view.
    #[inline]
    pub fn view(&self) -> BufferView<'_, AnyBuffer> {
        BufferView::new(self)
    }

    /// [`Buffer::typed`]: the whole buffer as a typed slice of `T`.
    ///
    /// # Errors
    /// As [`Buffer::typed`].
    #[inline]
    pub fn typed<T: xstream_core::bytemuck::Pod>(&self) -> Result<DeviceSlice<'_, T, AnyBuffer>> {
        DeviceSlice::new(self)
    }

    /// [`Buffer::device_ordinal`].
    #[inline]
    pub fn device_ordinal(&self) -> usize {
        each!(AnyBuffer, self, b => b.device_ordinal())
    }

    /// [`Buffer::belongs_to`]; `false` for a device of another backend.
    #[inline]
    pub fn belongs_to(&self, device: &AnyDevice) -> bool {
        pair!("AnyBuffer::belongs_to", AnyBuffer, self, AnyDevice, device, b, d => Ok(b.belongs_to(d)))
            .unwrap_or(false)
    }
}

impl AnyDevice {
    /// [`Device::memory_info`].
    ///
    /// # Errors
    /// As [`Device::memory_info`].
    #[inline]
    pub fn memory_info(&self) -> Result<MemoryInfo> {
        each!(AnyDevice, self, d => d.memory_info())
    }
}

impl AnyStream {
    /// [`Stream::memset_view`].
    ///
    /// # Errors
    /// As [`Stream::memset_view`]; [`crate::Error::WrongBackend`] for a buffer of another
    /// backend (as every method below that takes a buffer).
    #[inline]
    pub fn memset_view<'v>(
        &self,
        dst: impl Into<BufferView<'v, AnyBuffer>>,
        value: u8,
    ) -> Result<()> {
        self.memset_pattern(dst.into(), MemsetPattern::U8(value))
    }

    /// [`Stream::memset16`].
    ///
    /// # Errors
    /// As [`Stream::memset16`].
    #[inline]
    pub fn memset16<'v>(
        &self,
        dst: impl Into<BufferView<'v, AnyBuffer>>,
        value: u16,
    ) -> Result<()> {
        self.memset_pattern(dst.into(), MemsetPattern::U16(value))
    }

    /// [`Stream::memset32`].
    ///
    /// # Errors
    /// As [`Stream::memset32`].
    #[inline]
    pub fn memset32<'v>(
        &self,
        dst: impl Into<BufferView<'v, AnyBuffer>>,
        value: u32,
    ) -> Result<()> {
        self.memset_pattern(dst.into(), MemsetPattern::U32(value))
    }

    /// [`Stream::memset64`].
    ///
    /// # Errors
    /// As [`Stream::memset64`].
    #[inline]
    pub fn memset64<'v>(
        &self,
        dst: impl Into<BufferView<'v, AnyBuffer>>,
        value: u64,
    ) -> Result<()> {
        self.memset_pattern(dst.into(), MemsetPattern::U64(value))
    }

    /// [`Stream::memset_pattern`].
    ///
    /// # Errors
    /// As [`Stream::memset_pattern`].
    #[inline]
    pub fn memset_pattern(
        &self,
        dst: BufferView<'_, AnyBuffer>,
        value: MemsetPattern,
    ) -> Result<()> {
        const OP: &str = "AnyStream::memset_pattern";
        each!(AnyStream, self, s => s.memset_pattern(typed_view(OP, s, dst)?, value))
    }

    /// [`Stream::write_view`].
    ///
    /// # Errors
    /// As [`Stream::write_view`].
    #[inline]
    pub fn write_view<'v>(
        &self,
        dst: impl Into<BufferView<'v, AnyBuffer>>,
        data: Vec<u8>,
    ) -> Result<()> {
        const OP: &str = "AnyStream::write_view";
        let v = dst.into();
        each!(AnyStream, self, s => s.write_view(typed_view(OP, s, v)?, data))
    }

    /// [`Stream::read_view`].
    ///
    /// # Errors
    /// As [`Stream::read_view`].
    #[inline]
    pub fn read_view<'v>(&self, src: impl Into<BufferView<'v, AnyBuffer>>) -> Result<Readback> {
        const OP: &str = "AnyStream::read_view";
        let v = src.into();
        each!(AnyStream, self, s => s.read_view(typed_view(OP, s, v)?))
    }

    /// [`Stream::copy_view`].
    ///
    /// # Errors
    /// As [`Stream::copy_view`].
    #[inline]
    pub fn copy_view<'v>(
        &self,
        src: impl Into<BufferView<'v, AnyBuffer>>,
        dst: impl Into<BufferView<'v, AnyBuffer>>,
    ) -> Result<()> {
        const OP: &str = "AnyStream::copy_view";
        let (a, b) = (src.into(), dst.into());
        each!(AnyStream, self, s => s.copy_view(typed_view(OP, s, a)?, typed_view(OP, s, b)?))
    }

    /// [`Stream::reduce`].
    ///
    /// # Errors
    /// As [`Stream::reduce`].
    #[inline]
    pub fn reduce(
        &self,
        dst: &AnyBuffer,
        dst_offset: usize,
        src: &AnyBuffer,
        src_offset: usize,
        len: usize,
        r: Reduction,
    ) -> Result<()> {
        let src = self.same_buffer("AnyStream::reduce", src)?;
        pair!("AnyStream::reduce", AnyStream, self, AnyBuffer, dst, s, d => {
            s.reduce(d, dst_offset, src.downcast_same("AnyStream::reduce", s)?, src_offset, len, r)
        })
    }

    /// [`Stream::reduce_view`].
    ///
    /// # Errors
    /// As [`Stream::reduce_view`].
    #[inline]
    pub fn reduce_view<'v>(
        &self,
        dst: impl Into<BufferView<'v, AnyBuffer>>,
        src: impl Into<BufferView<'v, AnyBuffer>>,
        r: Reduction,
    ) -> Result<()> {
        const OP: &str = "AnyStream::reduce_view";
        let (d, v) = (dst.into(), src.into());
        each!(AnyStream, self, s => s.reduce_view(typed_view(OP, s, d)?, typed_view(OP, s, v)?, r))
    }

    /// Renamed [`AnyStream::write_from_blocking`].
    ///
    /// # Errors
    /// As [`AnyStream::write_from_blocking`].
    #[deprecated(since = "0.2.0", note = "renamed `write_from_blocking`")]
    pub fn write_from<'v, T: xstream_core::bytemuck::Pod>(
        &self,
        dst: impl Into<BufferView<'v, AnyBuffer>>,
        src: &[T],
    ) -> Result<()> {
        self.write_from_blocking(dst, src)
    }

    /// Renamed [`AnyStream::read_into_blocking`].
    ///
    /// # Errors
    /// As [`AnyStream::read_into_blocking`].
    #[deprecated(since = "0.2.0", note = "renamed `read_into_blocking`")]
    pub fn read_into<'v, T: xstream_core::bytemuck::Pod>(
        &self,
        src: impl Into<BufferView<'v, AnyBuffer>>,
        dst: &mut [T],
    ) -> Result<()> {
        self.read_into_blocking(src, dst)
    }

    /// [`Stream::write_from_blocking`]: synchronous with respect to `src`.
    ///
    /// # Errors
    /// As [`Stream::write_from_blocking`].
    #[inline]
    pub fn write_from_blocking<'v, T: xstream_core::bytemuck::Pod>(
        &self,
        dst: impl Into<BufferView<'v, AnyBuffer>>,
        src: &[T],
    ) -> Result<()> {
        const OP: &str = "AnyStream::write_from_blocking";
        let v = dst.into();
        each!(AnyStream, self, s => s.write_from_blocking(typed_view(OP, s, v)?, src))
    }

    /// [`Stream::read_into_blocking`].
    ///
    /// # Errors
    /// As [`Stream::read_into_blocking`].
    #[inline]
    pub fn read_into_blocking<'v, T: xstream_core::bytemuck::Pod>(
        &self,
        src: impl Into<BufferView<'v, AnyBuffer>>,
        dst: &mut [T],
    ) -> Result<()> {
        const OP: &str = "AnyStream::read_into_blocking";
        let v = src.into();
        each!(AnyStream, self, s => s.read_into_blocking(typed_view(OP, s, v)?, dst))
    }

    /// [`Stream::write_from_host`].
    ///
    /// # Errors
    /// As [`Stream::write_from_host`].
    #[inline]
    pub fn write_from_host<'v>(
        &self,
        src: &AnyPinnedBuffer,
        src_offset: usize,
        dst: impl Into<BufferView<'v, AnyBuffer>>,
    ) -> Result<()> {
        let v = dst.into();
        self.copy_to_device(src, src_offset, v.buffer(), v.offset(), v.len())
    }

    /// [`Stream::read_into_host`].
    ///
    /// # Errors
    /// As [`Stream::read_into_host`].
    #[inline]
    pub fn read_into_host<'v>(
        &self,
        src: impl Into<BufferView<'v, AnyBuffer>>,
        dst: &mut AnyPinnedBuffer,
        dst_offset: usize,
    ) -> Result<()> {
        let v = src.into();
        self.copy_to_host(v.buffer(), v.offset(), dst, dst_offset, v.len())
    }

    /// [`Stream::launch_builtin`]: the built-in work ([`Kernel`]) over an erased buffer.
    ///
    /// # Errors
    /// As [`Stream::launch_builtin`].
    #[inline]
    pub fn launch_builtin(&self, kernel: Kernel<'_, AnyBuffer>) -> Result<()> {
        const OP: &str = "AnyStream::launch_builtin";
        each!(AnyStream, self, s => s.launch_builtin(kernel.try_map_buffer(|b| b.downcast_same(OP, s))?))
    }

    /// The former name of [`AnyStream::launch_builtin`].
    ///
    /// # Errors
    /// As [`AnyStream::launch_builtin`].
    #[deprecated(since = "0.2.0", note = "renamed `launch_builtin`")]
    pub fn launch(&self, kernel: Kernel<'_, AnyBuffer>) -> Result<()> {
        self.launch_builtin(kernel)
    }
}

/// The former name of [`AnyPinnedRegistration`].
#[deprecated(since = "0.2.0", note = "renamed `AnyPinnedRegistration`")]
pub type AnyRegisteredHost<'r, 's> = AnyPinnedRegistration<'r, 's>;

/// The caller's memory registered for a scope on a device of any compiled backend
/// ([`AnyDevice::with_registered_host`]; the erased [`xstream_core::PinnedRegistration`]).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum AnyPinnedRegistration<'r, 's> {
    /// The host (CPU) backend's.
    #[cfg(feature = "host")]
    Host(&'r xstream_core::PinnedRegistration<'s, crate::host::HostBackend>),
    /// The CUDA backend's.
    #[cfg(feature = "cuda-backend")]
    Cuda(&'r xstream_core::PinnedRegistration<'s, crate::cuda::CudaBackend>),
    /// The Ascend backend's.
    #[cfg(feature = "ascend")]
    Ascend(&'r xstream_core::PinnedRegistration<'s, crate::ascend::AscendBackend>),
}

impl AnyPinnedRegistration<'_, '_> {
    /// Which backend it belongs to.
    pub fn kind(&self) -> crate::BackendKind {
        match self {
            #[cfg(feature = "host")]
            Self::Host(_) => crate::BackendKind::Host,
            #[cfg(feature = "cuda-backend")]
            Self::Cuda(_) => crate::BackendKind::Cuda,
            #[cfg(feature = "ascend")]
            Self::Ascend(_) => crate::BackendKind::Ascend,
        }
    }

    /// [`xstream_core::PinnedRegistration::len`].
    pub fn len(&self) -> usize {
        each!(AnyPinnedRegistration, self, r => r.len())
    }

    /// [`xstream_core::PinnedRegistration::is_empty`].
    pub fn is_empty(&self) -> bool {
        each!(AnyPinnedRegistration, self, r => r.is_empty())
    }

    /// [`xstream_core::PinnedRegistration::upload`]: an asynchronous copy into `dst` on `stream`.
    ///
    /// # Errors
    /// As [`xstream_core::PinnedRegistration::upload`]; [`crate::Error::WrongBackend`] for a stream
    /// or buffer of another backend.
    pub fn upload<'v>(
        &self,
        stream: &AnyStream,
        offset: usize,
        dst: impl Into<BufferView<'v, AnyBuffer>>,
    ) -> Result<()> {
        const OP: &str = "AnyPinnedRegistration::upload";
        let v = dst.into();
        pair!(OP, AnyPinnedRegistration, self, AnyStream, stream, r, s => r.upload(s, offset, typed_view(OP, s, v)?))
    }

    /// [`xstream_core::PinnedRegistration::download`]: an asynchronous copy of `src` on `stream`.
    ///
    /// # Errors
    /// As [`xstream_core::PinnedRegistration::download`]; [`crate::Error::WrongBackend`] for a
    /// stream or buffer of another backend.
    pub fn download<'v>(
        &self,
        stream: &AnyStream,
        src: impl Into<BufferView<'v, AnyBuffer>>,
        offset: usize,
    ) -> Result<()> {
        const OP: &str = "AnyPinnedRegistration::download";
        let v = src.into();
        pair!(OP, AnyPinnedRegistration, self, AnyStream, stream, r, s => r.download(s, typed_view(OP, s, v)?, offset))
    }
}

impl AnyDevice {
    /// [`Device::with_registered_host`]: `data` page-locked in place for the scope of `f`,
    /// with asynchronous uploads and downloads that never wait on the host.
    ///
    /// # Errors
    /// As [`Device::with_registered_host`].
    pub fn with_registered_host<T: xstream_core::bytemuck::Pod, R>(
        &self,
        data: &mut [T],
        f: impl FnOnce(&AnyPinnedRegistration<'_, '_>) -> R,
    ) -> Result<R> {
        match self {
            #[cfg(feature = "host")]
            AnyDevice::Host(d) => {
                d.with_registered_host(data, |r| f(&AnyPinnedRegistration::Host(r)))
            }
            #[cfg(feature = "cuda-backend")]
            AnyDevice::Cuda(d) => {
                d.with_registered_host(data, |r| f(&AnyPinnedRegistration::Cuda(r)))
            }
            #[cfg(feature = "ascend")]
            AnyDevice::Ascend(d) => {
                d.with_registered_host(data, |r| f(&AnyPinnedRegistration::Ascend(r)))
            }
        }
    }
}
