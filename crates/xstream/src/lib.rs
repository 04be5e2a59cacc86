//! # xstream
//!
//! One Stream / Event / host-callback model over NVIDIA GPUs (CUDA driver), Huawei Ascend
//! NPUs (ACL runtime) and CPU threads.
//!
//! This facade re-exports [`xstream_core`] and the backends enabled by cargo features:
//!
//! | feature | backend | module | needs at build time |
//! |---|---|---|---|
//! | `host` (default) | CPU threads, the reference semantics | [`host`] | nothing |
//! | `cuda` | CUDA driver via cudarc, loaded at run time (cudarc's CUDA 13.0 bindings; `cuda-backend` plus a `cuda-XXXXX` feature picks others) | `cuda`, `cudarc` | nothing |
//! | `ascend` | `libascendcl.so` via libloading | `ascend` | nothing |
//! | `collectives` | the vendor parts of [`collective`] (CUDA: NCCL, loaded at run time); the host's are always on | `cuda::collective` | nothing |
//!
//! The crate holds the re-export of `xstream_core`, one module per enabled backend (the table
//! above), automatic backend choice ([`auto`]), [`dispatch!`], the type-erased path (`any`)
//! and the demo's main job as a library ([`pipeline`]).
//!
//! Generic code is written over `B: Backend` and costs nothing at run time. Run-time choice
//! goes through [`dispatch!`], which instantiates the generic code once per compiled backend
//! and picks one by [`BackendKind`]:
//!
//! ```
//! use xstream::{Backend, BackendKind, Device, Stream, StreamDesc};
//!
//! fn roundtrip<B: Backend>() -> xstream::Result<u64> {
//!     let dev = B::open(0)?;
//!     let s = dev.create_stream(&StreamDesc::new())?;
//!     s.synchronize()?;
//!     Ok(s.id())
//! }
//!
//! let kind = xstream::auto();
//! let id = xstream::dispatch!(kind, B => roundtrip::<B>()).unwrap();
//! assert!(id > 0);
//! ```
//!
//! # The data path
//! Page-locked host buffers ([`Device::alloc_pinned`]) move data with one native asynchronous
//! copy each way ([`Stream::copy_to_device`], [`Stream::copy_to_host`]); stream-ordered
//! buffers come from [`Stream::alloc_async`] and go back with [`Stream::free_async`]:
//!
//! ```
//! # #[cfg(feature = "host")] {
//! use xstream::{Backend, Device, PinnedAllocDesc, Stream, StreamDesc};
//! let d = xstream::HostBackend::open(0).unwrap();
//! let s = d.create_stream(&StreamDesc::new()).unwrap();
//! let mut h = d.alloc_pinned(16, &PinnedAllocDesc::new()).unwrap();
//! h.as_mut_slice().unwrap().fill(7);
//! let b = s.alloc_async(16).unwrap();
//! s.copy_to_device(&h, 0, &b, 0, 16).unwrap();
//! s.copy_to_host(&b, 0, &mut h, 0, 16).unwrap();
//! s.free_async(b).unwrap();
//! assert_eq!(h.as_slice().unwrap(), &[7u8; 16]); // waits for the copy back
//! # }
//! ```
//!
//! `free_async` takes the buffer, so a use after it, or a second free, does not compile:
//!
//! ```compile_fail
//! use xstream::{Backend, Device, Stream, StreamDesc};
//! let d = xstream::HostBackend::open(0).unwrap();
//! let s = d.create_stream(&StreamDesc::new()).unwrap();
//! let b = s.alloc_async(16).unwrap();
//! s.free_async(b).unwrap();
//! s.memset(&b, 0, 16, 1).unwrap(); // use after free_async: `b` was moved
//! ```
//!
//! ```compile_fail
//! use xstream::{Backend, Device, Stream, StreamDesc};
//! let d = xstream::HostBackend::open(0).unwrap();
//! let s = d.create_stream(&StreamDesc::new()).unwrap();
//! let b = s.alloc_async(16).unwrap();
//! s.free_async(b).unwrap();
//! s.free_async(b).unwrap(); // double free: `b` was moved
//! ```
#![deny(unsafe_code)]

pub use xstream_core::*;

#[cfg(any(feature = "host", feature = "cuda-backend", feature = "ascend"))]
pub mod any;

pub mod pipeline;

/// The snippets of docs/coming-from-cudarc.md, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/coming-from-cudarc.md")]
pub struct ComingFromCudarc;

/// The snippets of docs/guide.md, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide.md")]
pub struct Guide;

/// The snippets of docs/coming-from-torch.md, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/coming-from-torch.md")]
pub struct ComingFromTorch;

#[cfg(feature = "host")]
/// The CPU backend.
pub use xstream_host as host;
#[cfg(feature = "host")]
pub use xstream_host::HostBackend;

#[cfg(feature = "host")]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_host {
    ($($t:tt)*) => { $($t)* };
}

#[cfg(not(feature = "host"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_host {
    ($($t:tt)*) => {};
}

#[cfg(feature = "cuda-backend")]
/// The CUDA backend.
pub use xstream_cuda as cuda;
#[cfg(feature = "cuda-backend")]
/// The cudarc the CUDA backend is built on (see [`cuda::cudarc`]).
pub use xstream_cuda::cudarc;
#[cfg(feature = "cuda-backend")]
pub use xstream_cuda::CudaBackend;

#[cfg(feature = "cuda-backend")]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_cuda {
    ($($t:tt)*) => { $($t)* };
}

#[cfg(not(feature = "cuda-backend"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_cuda {
    ($($t:tt)*) => {};
}

#[cfg(feature = "ascend")]
/// The Ascend backend.
pub use xstream_ascend as ascend;
#[cfg(feature = "ascend")]
pub use xstream_ascend::AscendBackend;

#[cfg(feature = "ascend")]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_ascend {
    ($($t:tt)*) => { $($t)* };
}

#[cfg(not(feature = "ascend"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_ascend {
    ($($t:tt)*) => {};
}

/// Runs generic code with the backend chosen at run time.
///
/// `dispatch!(kind, B => expr)` evaluates `expr` with the type alias `B` bound to the backend
/// type of `kind`. `expr` must be a `Result<_, xstream::Error>`; a backend that is not compiled
/// in yields [`Error::NotCompiled`].
///
/// `dispatch!(kind, B => expr, else k => other)` takes any type instead: for a backend that
/// is not compiled in it evaluates `other`, with `k` (a name, or `_`) bound to the
/// kind. Use it when the body returns your own error type, or no `Result` at all:
///
/// ```
/// use xstream::{Backend, BackendKind};
///
/// #[derive(Debug, PartialEq)]
/// enum MyError { Missing(BackendKind) }
///
/// let name: Result<&str, MyError> =
///     xstream::dispatch!(BackendKind::Host, B => Ok(B::KIND.name()), else k => Err(MyError::Missing(k)));
/// assert_eq!(name, Ok("host"));
/// let n: usize = xstream::dispatch!(BackendKind::Host, B => B::device_count().unwrap_or(0), else _ => 0);
/// assert!(n >= 1);
/// ```
#[macro_export]
macro_rules! dispatch {
    ($kind:expr, $B:ident => $body:expr, else $k:pat => $else:expr $(,)?) => {{
        let __xstream_kind: $crate::BackendKind = $kind;
        #[allow(unreachable_code, clippy::never_loop)]
        loop {
            $crate::__if_host! {
                if __xstream_kind == $crate::BackendKind::Host {
                    #[allow(dead_code)]
                    type $B = $crate::host::HostBackend;
                    break $body;
                }
            }
            $crate::__if_cuda! {
                if __xstream_kind == $crate::BackendKind::Cuda {
                    #[allow(dead_code)]
                    type $B = $crate::cuda::CudaBackend;
                    break $body;
                }
            }
            $crate::__if_ascend! {
                if __xstream_kind == $crate::BackendKind::Ascend {
                    #[allow(dead_code)]
                    type $B = $crate::ascend::AscendBackend;
                    break $body;
                }
            }
            #[allow(unused_variables, irrefutable_let_patterns)]
            let $k = __xstream_kind;
            break $else;
        }
    }};
    ($kind:expr, $B:ident => $body:expr) => {
        $crate::dispatch!($kind, $B => $body, else k => Err($crate::Error::NotCompiled(k)))
    };
}

/// The backends compiled into this build.
pub fn compiled() -> Vec<BackendKind> {
    BackendKind::ALL
        .into_iter()
        .filter(|k| is_compiled(*k))
        .collect()
}

/// Whether a backend is compiled into this build.
pub fn is_compiled(kind: BackendKind) -> bool {
    match kind {
        BackendKind::Host => cfg!(feature = "host"),
        BackendKind::Cuda => cfg!(feature = "cuda-backend"),
        BackendKind::Ascend => cfg!(feature = "ascend"),
    }
}

/// Whether a backend can be used here: [`Error::NotCompiled`] or the backend's own reason.
///
/// # Errors
/// As described.
pub fn availability(kind: BackendKind) -> Result<()> {
    dispatch!(kind, B => B::availability())
}

/// The flag translation table of a backend.
///
/// # Errors
/// [`Error::NotCompiled`].
pub fn flag_table(kind: BackendKind) -> Result<&'static FlagTable> {
    dispatch!(kind, B => Ok(B::flag_table()))
}

cfg_if::cfg_if! {
    if #[cfg(feature = "host")] {
        /// The backend [`auto`] falls back to when none is available: the host backend when it
        /// is compiled in.
        pub const FALLBACK: BackendKind = BackendKind::Host;
    } else if #[cfg(feature = "cuda-backend")] {
        /// The backend [`auto`] falls back to when none is available (host is not compiled in).
        pub const FALLBACK: BackendKind = BackendKind::Cuda;
    } else {
        /// The backend [`auto`] falls back to when none is available (host is not compiled in).
        pub const FALLBACK: BackendKind = BackendKind::Ascend;
    }
}

/// The backend a program should use when the user did not say: the first available of CUDA,
/// Ascend, host (in that order), or [`FALLBACK`] if nothing is available (its calls then
/// return the reason).
pub fn auto() -> BackendKind {
    BackendKind::ALL
        .into_iter()
        .find(|k| availability(*k).is_ok())
        .unwrap_or(FALLBACK)
}

/// The first available backend (in [`auto`]'s order) whose device 0 has every capability in
/// `needs`, or [`FALLBACK`]. Use it when the job needs more than the portable minimum: an NPU
/// whose runtime lacks the built-in kernels is skipped for a job that launches them, instead
/// of being chosen and failing.
// With no backend compiled in, `dispatch!` has no arm that reads `needs`.
#[cfg_attr(
    not(any(feature = "host", feature = "cuda", feature = "ascend")),
    allow(unused_variables)
)]
pub fn auto_for(needs: Capabilities) -> BackendKind {
    BackendKind::ALL
        .into_iter()
        .find(|k| {
            availability(*k).is_ok()
                && dispatch!(*k, B => B::open(0).map(|d| d.info().capabilities.contains(needs)))
                    .unwrap_or(false)
        })
        .unwrap_or(FALLBACK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_for_skips_backends_without_the_capability() {
        // The host backend has the built-in kernels, so a kernel job always finds a backend
        // that has them; a capability no device has falls back.
        let k = auto_for(Capabilities::KERNELS);
        let caps = dispatch!(k, B => B::open(0).map(|d| d.info().capabilities)).unwrap();
        assert!(caps.contains(Capabilities::KERNELS));
        assert_eq!(auto_for(Capabilities::all()), FALLBACK);
    }

    #[test]
    fn host_is_compiled_and_available_by_default() {
        assert!(compiled().contains(&BackendKind::Host));
        assert!(availability(BackendKind::Host).is_ok());
        assert!(flag_table(BackendKind::Host).unwrap().check_total().is_ok());
    }

    #[test]
    fn uncompiled_backend_is_a_clear_error() {
        for k in BackendKind::ALL {
            if !is_compiled(k) {
                assert!(matches!(availability(k), Err(Error::NotCompiled(x)) if x == k));
            }
        }
    }
}
