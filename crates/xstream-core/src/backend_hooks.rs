//! Backend hooks: the stream operations that backends implement and users never call.
//!
//! The user-facing methods of [`Stream`] check their arguments (ranges, element alignment,
//! devices of page-locked host buffers) and keep their invariants (the fence of a
//! [`HostBuffer`](crate::HostBuffer)), then hand the rest to a hook of [`StreamHooks`]. A hook
//! called directly would skip those checks, so the hooks live on this separate trait and:
//! - **cannot be called outside this crate**: each takes a [`HookToken`], which only
//!   `xstream-core` can make;
//! - **are implemented only by xstream's backends**: the trait is sealed by the supertrait
//!   `xstream_core::__private::Sealed`, which the backends (separate crates) name and which is
//!   hidden and outside the API's stability promise.
//!
//! [`Backend::Stream`] requires `StreamHooks`, so every backend's stream has them.
//! docs/design.md ("Backend hooks") says why this shape.
//!
//! Code outside this crate cannot make the token, so it cannot skip a method's checks by
//! calling its hook:
//!
//! ```compile_fail,E0423
//! use xstream_core::backend_hooks::{HookToken, StreamHooks};
//! use xstream_core::{Backend, BufferOf, StreamOf};
//!
//! fn unchecked<B: Backend>(stream: &StreamOf<B>, buf: &BufferOf<B>) {
//!     let _ = stream.write_bytes_now(HookToken(()), buf, usize::MAX, &[1, 2, 3]);
//! }
//! ```

use crate::backend::{
    check_buffer_device, check_range, Backend, BufferOf, FunctionOf, Kernel, Stream, StreamOf,
};
use crate::hostmem::HostSpan;
use crate::module::{KernelArg, LaunchConfig};
use crate::view::MemsetPattern;
use crate::{Buffer, Error, Result};
use crate::{Readback, WaitCondition};

/// The proof that a hook of [`StreamHooks`] is called by `xstream-core`, after the checks of
/// the user-facing method. Only `xstream-core` can make one; a backend receives it and may
/// pass it on to another hook.
#[derive(Clone, Copy, Debug)]
pub struct HookToken(());

/// The hooks behind the user-facing methods of [`Stream`]: implemented by every backend's
/// stream, called only by `xstream-core` (see the [module](self) documentation).
pub trait StreamHooks: Stream + crate::__private::Sealed {
    /// Hook of [`Stream::copy_to_device`]: the range checks, the device check of the host side
    /// and the fence are done; the backend checks that `dst` is of its device and keeps `src`
    /// (and `dst`) alive until the copy completed.
    ///
    /// # Errors
    /// [`Error::WrongDevice`]; vendor errors; [`Error::Unsupported`] by default.
    fn enqueue_copy_to_device(
        &self,
        token: HookToken,
        src: HostSpan,
        dst: &BufferOf<Self::B>,
        dst_offset: usize,
    ) -> Result<()> {
        let _ = (token, src, dst, dst_offset);
        Err(Error::unsupported(
            <Self::B as Backend>::KIND,
            "asynchronous copies from page-locked host memory (not yet)",
        ))
    }

    /// Hook of [`Stream::copy_to_host`]; as [`StreamHooks::enqueue_copy_to_device`].
    ///
    /// # Errors
    /// As [`StreamHooks::enqueue_copy_to_device`].
    fn enqueue_copy_to_host(
        &self,
        token: HookToken,
        src: &BufferOf<Self::B>,
        src_offset: usize,
        dst: HostSpan,
    ) -> Result<()> {
        let _ = (token, src, src_offset, dst);
        Err(Error::unsupported(
            <Self::B as Backend>::KIND,
            "asynchronous copies to page-locked host memory (not yet)",
        ))
    }

    /// Hook of [`Stream::memset_pattern`] (range and element alignment checked). The default
    /// takes patterns whose bytes are all equal through [`Stream::memset`] and refuses the
    /// others as [`Error::Unsupported`].
    ///
    /// # Errors
    /// As [`Stream::memset`]; [`Error::Unsupported`] by default.
    fn enqueue_memset_pattern(
        &self,
        token: HookToken,
        buf: &BufferOf<Self::B>,
        offset: usize,
        len: usize,
        value: MemsetPattern,
    ) -> Result<()> {
        let _ = token;
        match value.as_byte() {
            Some(b) => self.memset(buf, offset, len, b),
            None => Err(Error::unsupported(
                <Self::B as Backend>::KIND,
                "memset of 16- and 32-bit patterns",
            )),
        }
    }

    /// Hook of [`Stream::write_from_blocking`]: copy `src` to `offset` of `dst` in stream order and
    /// return once `src` may be reused. The default stages the bytes through
    /// [`Stream::write`] (one allocation) and synchronizes the stream.
    ///
    /// # Errors
    /// As [`Stream::write_from_blocking`].
    fn write_bytes_now(
        &self,
        token: HookToken,
        dst: &BufferOf<Self::B>,
        offset: usize,
        src: &[u8],
    ) -> Result<()> {
        let _ = token;
        check_range("write_from_blocking", dst.len(), offset, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        self.write(dst, offset, src.to_vec())?;
        self.synchronize()
    }

    /// Hook of [`Stream::read_into_blocking`]: fill `dst` from `offset` of `src` in stream order and
    /// return once it is filled. The default goes through [`Stream::read`].
    ///
    /// # Errors
    /// As [`Stream::read_into_blocking`].
    fn read_bytes_now(
        &self,
        token: HookToken,
        src: &BufferOf<Self::B>,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<()> {
        let _ = token;
        check_range("read_into_blocking", src.len(), offset, dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        let rb = self.read(src, offset, dst.len())?;
        self.synchronize()?;
        dst.copy_from_slice(&rb.take()?);
        Ok(())
    }
    /// Hook of [`Stream::memset`]: the buffer is of this stream's device.
    ///
    /// # Errors
    /// As [`Stream::memset`].
    fn enqueue_memset(
        &self,
        token: HookToken,
        buf: &BufferOf<Self::B>,
        offset: usize,
        len: usize,
        value: u8,
    ) -> Result<()>;

    /// Hook of [`Stream::write`]: the buffer is of this stream's device.
    ///
    /// # Errors
    /// As [`Stream::write`].
    fn enqueue_write(
        &self,
        token: HookToken,
        dst: &BufferOf<Self::B>,
        offset: usize,
        data: Vec<u8>,
    ) -> Result<()>;

    /// Hook of [`Stream::read`]: the buffer is of this stream's device.
    ///
    /// # Errors
    /// As [`Stream::read`].
    fn enqueue_read(
        &self,
        token: HookToken,
        src: &BufferOf<Self::B>,
        offset: usize,
        len: usize,
    ) -> Result<Readback>;

    /// Hook of [`Stream::copy`]: both buffers are of this stream's device.
    ///
    /// # Errors
    /// As [`Stream::copy`].
    fn enqueue_copy(
        &self,
        token: HookToken,
        src: &BufferOf<Self::B>,
        src_offset: usize,
        dst: &BufferOf<Self::B>,
        dst_offset: usize,
        len: usize,
    ) -> Result<()>;

    /// Hook of [`Stream::launch`]: a buffer of the kernel is of this stream's device.
    ///
    /// # Errors
    /// As [`Stream::launch`].
    fn enqueue_builtin(
        &self,
        token: HookToken,
        kernel: Kernel<'_, BufferOf<Self::B>>,
    ) -> Result<()>;

    /// Hook of [`Stream::launch_kernel`]: every buffer argument is of this stream's device.
    /// The default refuses.
    ///
    /// # Errors
    /// As [`Stream::launch_kernel`]; [`Error::Unsupported`] by default.
    fn enqueue_kernel(
        &self,
        token: HookToken,
        f: &FunctionOf<Self::B>,
        cfg: &LaunchConfig,
        args: &[KernelArg<'_, BufferOf<Self::B>>],
    ) -> Result<()> {
        let _ = (token, f, cfg, args);
        Err(Error::unsupported(
            <Self::B as Backend>::KIND,
            "kernel launches from modules (not yet)",
        ))
    }

    /// Hook of [`Stream::free_async`]: the buffer is of this stream's device. The default
    /// drops it under the backend's buffer lifetime rule.
    ///
    /// # Errors
    /// As [`Stream::free_async`].
    fn enqueue_free(&self, token: HookToken, buf: BufferOf<Self::B>) -> Result<()> {
        let _ = token;
        drop(buf);
        Ok(())
    }

    /// Hook of [`Stream::wait_value32`]: the buffer is of this stream's device. The default
    /// refuses.
    ///
    /// # Errors
    /// As [`Stream::wait_value32`].
    fn enqueue_wait_value32(
        &self,
        token: HookToken,
        buf: &BufferOf<Self::B>,
        offset: usize,
        value: u32,
        cond: WaitCondition,
    ) -> Result<()> {
        let _ = (token, buf, offset, value, cond);
        Err(crate::memop::unsupported(Self::B::KIND, "wait_value32"))
    }

    /// Hook of [`Stream::wait_value64`]; as [`StreamHooks::enqueue_wait_value32`].
    ///
    /// # Errors
    /// As [`Stream::wait_value64`].
    fn enqueue_wait_value64(
        &self,
        token: HookToken,
        buf: &BufferOf<Self::B>,
        offset: usize,
        value: u64,
        cond: WaitCondition,
    ) -> Result<()> {
        let _ = (token, buf, offset, value, cond);
        Err(crate::memop::unsupported(Self::B::KIND, "wait_value64"))
    }

    /// Hook of [`Stream::write_value32`]; as [`StreamHooks::enqueue_wait_value32`].
    ///
    /// # Errors
    /// As [`Stream::write_value32`].
    fn enqueue_write_value32(
        &self,
        token: HookToken,
        buf: &BufferOf<Self::B>,
        offset: usize,
        value: u32,
    ) -> Result<()> {
        let _ = (token, buf, offset, value);
        Err(crate::memop::unsupported(Self::B::KIND, "write_value32"))
    }

    /// Hook of [`Stream::write_value64`]; as [`StreamHooks::enqueue_wait_value32`].
    ///
    /// # Errors
    /// As [`Stream::write_value64`].
    fn enqueue_write_value64(
        &self,
        token: HookToken,
        buf: &BufferOf<Self::B>,
        offset: usize,
        value: u64,
    ) -> Result<()> {
        let _ = (token, buf, offset, value);
        Err(crate::memop::unsupported(Self::B::KIND, "write_value64"))
    }

    /// Hook of [`Stream::reduce`]: both buffers are of this stream's device, the length is not
    /// zero, the element alignment, bounds and overlap are checked
    /// ([`crate::reduce::check`], [`crate::reduce::check_overlap`]). The default refuses.
    ///
    /// # Errors
    /// As [`Stream::reduce`].
    #[allow(clippy::too_many_arguments)]
    fn enqueue_reduce(
        &self,
        token: HookToken,
        dst: &BufferOf<Self::B>,
        dst_offset: usize,
        src: &BufferOf<Self::B>,
        src_offset: usize,
        len: usize,
        r: crate::Reduction,
    ) -> Result<()> {
        let _ = (token, dst, dst_offset, src, src_offset, len, r);
        Err(crate::reduce::unsupported(Self::B::KIND, "not available"))
    }

    /// Hook of [`Stream::record_use`]: the buffer is of this stream's device. The default
    /// refuses.
    ///
    /// # Errors
    /// As [`Stream::record_use`].
    fn enqueue_record_use(&self, token: HookToken, buf: &BufferOf<Self::B>) -> Result<()> {
        let _ = (token, buf);
        Err(Error::unsupported(
            <Self::B as Backend>::KIND,
            "marking a buffer used by work xstream did not enqueue (record_use)",
        ))
    }
}

// The calls of the hooks, for the provided methods of `Stream` and for `hostmem`. They are
// generic over the backend, not the stream: there `StreamOf<B>: StreamHooks` follows from the
// bound on `Backend::Stream`, whereas inside `Stream`'s own methods `Self` is not known to
// implement the hooks.

pub(crate) fn enqueue_copy_to_device<B: Backend>(
    stream: &StreamOf<B>,
    src: HostSpan,
    dst: &BufferOf<B>,
    dst_offset: usize,
) -> Result<()> {
    stream.enqueue_copy_to_device(HookToken(()), src, dst, dst_offset)
}

pub(crate) fn enqueue_copy_to_host<B: Backend>(
    stream: &StreamOf<B>,
    src: &BufferOf<B>,
    src_offset: usize,
    dst: HostSpan,
) -> Result<()> {
    stream.enqueue_copy_to_host(HookToken(()), src, src_offset, dst)
}

pub(crate) fn enqueue_memset_pattern<B: Backend>(
    stream: &StreamOf<B>,
    buf: &BufferOf<B>,
    offset: usize,
    len: usize,
    value: MemsetPattern,
) -> Result<()> {
    check_buffer_device::<B>("memset_pattern", stream, buf)?;
    stream.enqueue_memset_pattern(HookToken(()), buf, offset, len, value)
}

pub(crate) fn write_bytes_now<B: Backend>(
    stream: &StreamOf<B>,
    dst: &BufferOf<B>,
    offset: usize,
    src: &[u8],
) -> Result<()> {
    check_buffer_device::<B>("write_from_blocking", stream, dst)?;
    stream.write_bytes_now(HookToken(()), dst, offset, src)
}

pub(crate) fn read_bytes_now<B: Backend>(
    stream: &StreamOf<B>,
    src: &BufferOf<B>,
    offset: usize,
    dst: &mut [u8],
) -> Result<()> {
    check_buffer_device::<B>("read_into_blocking", stream, src)?;
    stream.read_bytes_now(HookToken(()), src, offset, dst)
}

pub(crate) fn enqueue_memset<B: Backend>(
    stream: &StreamOf<B>,
    buf: &BufferOf<B>,
    offset: usize,
    len: usize,
    value: u8,
) -> Result<()> {
    stream.enqueue_memset(HookToken(()), buf, offset, len, value)
}

pub(crate) fn enqueue_write<B: Backend>(
    stream: &StreamOf<B>,
    dst: &BufferOf<B>,
    offset: usize,
    data: Vec<u8>,
) -> Result<()> {
    stream.enqueue_write(HookToken(()), dst, offset, data)
}

pub(crate) fn enqueue_read<B: Backend>(
    stream: &StreamOf<B>,
    src: &BufferOf<B>,
    offset: usize,
    len: usize,
) -> Result<Readback> {
    stream.enqueue_read(HookToken(()), src, offset, len)
}

pub(crate) fn enqueue_copy<B: Backend>(
    stream: &StreamOf<B>,
    src: &BufferOf<B>,
    src_offset: usize,
    dst: &BufferOf<B>,
    dst_offset: usize,
    len: usize,
) -> Result<()> {
    stream.enqueue_copy(HookToken(()), src, src_offset, dst, dst_offset, len)
}

pub(crate) fn enqueue_builtin<B: Backend>(
    stream: &StreamOf<B>,
    kernel: Kernel<'_, BufferOf<B>>,
) -> Result<()> {
    stream.enqueue_builtin(HookToken(()), kernel)
}

pub(crate) fn enqueue_kernel<B: Backend>(
    stream: &StreamOf<B>,
    f: &FunctionOf<B>,
    cfg: &LaunchConfig,
    args: &[KernelArg<'_, BufferOf<B>>],
) -> Result<()> {
    stream.enqueue_kernel(HookToken(()), f, cfg, args)
}

pub(crate) fn enqueue_free<B: Backend>(stream: &StreamOf<B>, buf: BufferOf<B>) -> Result<()> {
    stream.enqueue_free(HookToken(()), buf)
}

pub(crate) fn enqueue_wait_value32<B: Backend>(
    stream: &StreamOf<B>,
    buf: &BufferOf<B>,
    offset: usize,
    value: u32,
    cond: WaitCondition,
) -> Result<()> {
    stream.enqueue_wait_value32(HookToken(()), buf, offset, value, cond)
}

pub(crate) fn enqueue_wait_value64<B: Backend>(
    stream: &StreamOf<B>,
    buf: &BufferOf<B>,
    offset: usize,
    value: u64,
    cond: WaitCondition,
) -> Result<()> {
    stream.enqueue_wait_value64(HookToken(()), buf, offset, value, cond)
}

pub(crate) fn enqueue_write_value32<B: Backend>(
    stream: &StreamOf<B>,
    buf: &BufferOf<B>,
    offset: usize,
    value: u32,
) -> Result<()> {
    stream.enqueue_write_value32(HookToken(()), buf, offset, value)
}

pub(crate) fn enqueue_write_value64<B: Backend>(
    stream: &StreamOf<B>,
    buf: &BufferOf<B>,
    offset: usize,
    value: u64,
) -> Result<()> {
    stream.enqueue_write_value64(HookToken(()), buf, offset, value)
}

pub(crate) fn enqueue_reduce<B: Backend>(
    stream: &StreamOf<B>,
    dst: &BufferOf<B>,
    dst_offset: usize,
    src: &BufferOf<B>,
    src_offset: usize,
    len: usize,
    r: crate::Reduction,
) -> Result<()> {
    stream.enqueue_reduce(HookToken(()), dst, dst_offset, src, src_offset, len, r)
}

pub(crate) fn enqueue_record_use<B: Backend>(
    stream: &StreamOf<B>,
    buf: &BufferOf<B>,
) -> Result<()> {
    stream.enqueue_record_use(HookToken(()), buf)
}
