//! The launch builder: kernel arguments of every width, structs by value, raw bytes and
//! buffers, pushed one by one and checked against the kernel's parameter layout, with launch
//! attributes where the vendor has them.
//!
//! ```no_run
//! # use xstream_core::{Backend, Device, Module, Stream, LaunchConfig};
//! # use xstream_core::launch::ByValue;
//! #[repr(C)]
//! #[derive(Clone, Copy)]
//! struct Params { scale: f32, n: u32 }
//! // SAFETY: `repr(C)`, two 4-byte fields, no padding, every bit pattern valid.
//! unsafe impl bytemuck::Zeroable for Params {}
//! // SAFETY: as above.
//! unsafe impl bytemuck::Pod for Params {}
//!
//! fn run<B: Backend>(dev: &B::Device, f: &B::Function, buf: &B::Buffer) -> xstream_core::Result<()> {
//!     let s = dev.create_stream(&Default::default())?;
//!     let p = Params { scale: 2.0, n: 64 };
//!     s.launch_builder(f)
//!         .config(LaunchConfig::for_items(64, 64))
//!         .arg(buf)
//!         .arg(ByValue(&p))
//!         .arg(7u16)
//!         .launch()
//! }
//! ```
//!
//! # What a kernel takes
//! [`KernelParam`] turns a value into one [`KernelArg`]: the scalars `i8`..`u64`, `f32`, `f64`,
//! [`half::f16`], [`half::bf16`] by value, a device buffer by reference (its device address),
//! a plain-old-data `#[repr(C)]` struct by value through [`ByValue`] (`bytemuck::Pod`: no
//! padding, so every byte passed is initialised), raw bytes through [`RawBytes`], and any
//! [`KernelArg`] itself. A new argument type (a buffer view, say) joins with one `impl`.
//!
//! # Checked and unchecked launches
//! [`LaunchBuilder::launch`] is safe: before anything is enqueued the backend checks the
//! argument count and each argument's size against the parameter layout it knows (the host
//! backend's declared kinds; on CUDA the driver's layout from `cuFuncGetParamInfo`, and the
//! kinds where declared; on Ascend the kinds declared for the builtin module or with
//! `AscendFunction::with_params`), and refuses a mismatch with [`Error::InvalidArgument`]
//! naming the position and both sizes. Where the layout is unknown (CUDA drivers before 12.4,
//! which lack `cuFuncGetParamInfo`; ACL, which never reports one) the checked launch is
//! refused with [`Error::Unsupported`] naming the missing layout: a wrong argument would be
//! undefined behaviour on the device. [`LaunchBuilder::launch_unchecked`] is `unsafe` and
//! passes the arguments as given where no layout is known (the caller promises they match the
//! kernel's parameters); it still checks whatever the backend knows.
//!
//! # Launch attributes
//! [`LaunchAttrs`]: cooperative launch (all blocks co-resident, grid-wide synchronisation) and
//! thread-block clusters. CUDA honours both natively (`cuLaunchKernelEx` with
//! `CU_LAUNCH_ATTRIBUTE_COOPERATIVE` / `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`); the host
//! backend and ACL have neither, and refuse them with [`Error::Unsupported`] (the strict
//! policy: an attribute is never dropped silently).
//!
//! # Allocations
//! The builder keeps up to [`INLINE_ARGS`] arguments inline (no heap allocation); more spill
//! to one `Vec`. What the backend does per launch is its own (see docs/semantics.md).

use crate::backend::{Backend, BufferOf, FunctionOf, StreamOf};
use crate::module::{KernelArg, LaunchConfig};
use crate::Stream;
use crate::{BackendKind, Buffer, Error, Result};

/// Arguments a [`LaunchBuilder`] keeps without allocating.
pub const INLINE_ARGS: usize = 16;

/// A value that a kernel takes as one parameter (see the [module docs](self)).
pub trait KernelParam<'a, Buf> {
    /// The argument.
    fn into_arg(self) -> KernelArg<'a, Buf>;
}

macro_rules! scalar_param {
    ($($t:ty => $v:ident),* $(,)?) => {$(
        impl<'a, Buf> KernelParam<'a, Buf> for $t {
            fn into_arg(self) -> KernelArg<'a, Buf> {
                KernelArg::$v(self)
            }
        }
    )*};
}

scalar_param!(
    i8 => I8, u8 => U8, i16 => I16, u16 => U16, i32 => I32, u32 => U32, i64 => I64, u64 => U64,
    f32 => F32, f64 => F64, half::f16 => F16, half::bf16 => BF16,
);

impl<'a, Buf: Buffer> KernelParam<'a, Buf> for &'a Buf {
    fn into_arg(self) -> KernelArg<'a, Buf> {
        KernelArg::Buffer(self)
    }
}

/// A view passes the buffer's address plus its offset (CUDA, Ascend) or its bytes (host), as
/// [`KernelArg::View`].
impl<'a, Buf> KernelParam<'a, Buf> for crate::BufferView<'a, Buf> {
    fn into_arg(self) -> KernelArg<'a, Buf> {
        KernelArg::View(self)
    }
}

/// A typed slice passes as its byte view ([`KernelArg::View`]).
impl<'a, T, Buf> KernelParam<'a, Buf> for crate::DeviceSlice<'a, T, Buf> {
    fn into_arg(self) -> KernelArg<'a, Buf> {
        KernelArg::View(self.into())
    }
}

impl<'a, Buf> KernelParam<'a, Buf> for KernelArg<'a, Buf> {
    fn into_arg(self) -> KernelArg<'a, Buf> {
        self
    }
}

/// A plain-old-data value (a `#[repr(C)]` struct) passed to the kernel by value: its bytes,
/// copied at the launch call. `bytemuck::Pod` rules out padding, so no uninitialised byte is
/// ever read; put explicit padding fields where C would pad.
#[derive(Debug, Clone, Copy)]
pub struct ByValue<'a, T>(pub &'a T);

impl<'a, Buf, T: bytemuck::Pod> KernelParam<'a, Buf> for ByValue<'a, T> {
    fn into_arg(self) -> KernelArg<'a, Buf> {
        KernelArg::Bytes(bytemuck::bytes_of(self.0))
    }
}

/// Raw bytes passed to the kernel by value as one parameter (copied at the launch call).
#[derive(Debug, Clone, Copy)]
pub struct RawBytes<'a>(pub &'a [u8]);

impl<'a, Buf> KernelParam<'a, Buf> for RawBytes<'a> {
    fn into_arg(self) -> KernelArg<'a, Buf> {
        KernelArg::Bytes(self.0)
    }
}

/// Launch attributes (see the [module docs](self) for which backend honours which).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaunchAttrs {
    /// A cooperative launch: every block is resident at once, so the kernel may synchronise
    /// the whole grid (CUDA `CU_LAUNCH_ATTRIBUTE_COOPERATIVE`). The grid must fit the device
    /// at once (the driver refuses a larger one).
    pub cooperative: bool,
    /// Thread-block cluster dimensions (CUDA `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`, compute
    /// capability 9.0 and later); each grid dimension must be a multiple of the cluster's.
    pub cluster: Option<[u32; 3]>,
}

impl LaunchAttrs {
    /// Whether no attribute is set (a plain launch).
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Checks the attributes against `cfg`: no zero cluster dimension and every grid
    /// dimension a multiple of the cluster's.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the dimension.
    pub fn check(&self, cfg: &LaunchConfig) -> Result<()> {
        if let Some(c) = self.cluster {
            for i in 0..3 {
                let axis = ["x", "y", "z"][i];
                if c[i] == 0 {
                    return Err(Error::invalid(format!(
                        "cluster dimension {axis} is 0 (cluster = {c:?}); every dimension must be at least 1"
                    )));
                }
                if !cfg.grid[i].is_multiple_of(c[i]) {
                    return Err(Error::invalid(format!(
                        "grid dimension {axis} ({}) is not a multiple of the cluster dimension ({})",
                        cfg.grid[i], c[i]
                    )));
                }
            }
        }
        Ok(())
    }

    /// The names of the attributes set, for messages.
    pub fn names(&self) -> String {
        let mut v = Vec::new();
        if self.cooperative {
            v.push("cooperative launch".to_string());
        }
        if let Some(c) = self.cluster {
            v.push(format!("cluster dimensions {c:?}"));
        }
        v.join(", ")
    }

    /// Refuses any attribute, for a backend that has none: [`Error::Unsupported`] naming
    /// them; `Ok` when none is set.
    ///
    /// # Errors
    /// As described.
    pub fn refuse_all(&self, backend: BackendKind) -> Result<()> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(Error::unsupported(
                backend,
                format!("launch attribute(s): {}", self.names()),
            ))
        }
    }
}

/// The arguments of a launch: up to [`INLINE_ARGS`] inline, more in one `Vec`.
#[derive(Debug)]
pub struct ArgList<'a, Buf> {
    inline: [KernelArg<'a, Buf>; INLINE_ARGS],
    len: usize,
    spill: Vec<KernelArg<'a, Buf>>,
}

impl<Buf> Default for ArgList<'_, Buf> {
    fn default() -> Self {
        Self {
            inline: [KernelArg::U8(0); INLINE_ARGS],
            len: 0,
            spill: Vec::new(),
        }
    }
}

impl<'a, Buf> ArgList<'a, Buf> {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `a`.
    #[inline]
    pub fn push(&mut self, a: KernelArg<'a, Buf>) {
        // `len` counts every argument: up to `INLINE_ARGS` they are inline, past it all of
        // them are in `spill`.
        if let Some(slot) = self.inline.get_mut(self.len) {
            *slot = a;
        } else {
            if self.len == INLINE_ARGS {
                self.spill.extend_from_slice(&self.inline);
            }
            self.spill.push(a);
        }
        self.len += 1;
    }

    /// The arguments, in order.
    #[inline]
    pub fn as_slice(&self) -> &[KernelArg<'a, Buf>] {
        if self.len <= INLINE_ARGS {
            &self.inline[..self.len]
        } else {
            &self.spill
        }
    }

    /// Removes every argument (keeping any spill capacity).
    pub fn clear(&mut self) {
        self.len = 0;
        self.spill.clear();
    }
}

/// A launch being assembled: the function, the configuration, the arguments and the
/// attributes (see the [module docs](self)). Made by [`Stream::launch_builder`]; may launch
/// any number of times.
pub struct LaunchBuilder<'a, B: Backend> {
    stream: &'a StreamOf<B>,
    func: &'a FunctionOf<B>,
    cfg: LaunchConfig,
    attrs: LaunchAttrs,
    args: ArgList<'a, BufferOf<B>>,
}

impl<B: Backend> std::fmt::Debug for LaunchBuilder<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchBuilder")
            .field("func", self.func)
            .field("cfg", &self.cfg)
            .field("attrs", &self.attrs)
            .field("args", &self.args.as_slice())
            .finish()
    }
}

impl<'a, B: Backend> LaunchBuilder<'a, B> {
    /// A launch of `func` on `stream` with [`LaunchConfig::single`], no argument and no
    /// attribute.
    pub fn new(stream: &'a StreamOf<B>, func: &'a FunctionOf<B>) -> Self {
        Self {
            stream,
            func,
            cfg: LaunchConfig::single(),
            attrs: LaunchAttrs::default(),
            args: ArgList::new(),
        }
    }

    /// Sets the grid, block and dynamic shared memory.
    pub fn config(&mut self, cfg: LaunchConfig) -> &mut Self {
        self.cfg = cfg;
        self
    }

    /// Appends one argument.
    pub fn arg<P: KernelParam<'a, BufferOf<B>>>(&mut self, p: P) -> &mut Self {
        self.args.push(p.into_arg());
        self
    }

    /// Removes every argument (to launch again with others).
    pub fn clear_args(&mut self) -> &mut Self {
        self.args.clear();
        self
    }

    /// Asks for a cooperative launch (see [`LaunchAttrs::cooperative`]).
    pub fn cooperative(&mut self, on: bool) -> &mut Self {
        self.attrs.cooperative = on;
        self
    }

    /// Asks for thread-block clusters of `dims` (see [`LaunchAttrs::cluster`]).
    pub fn cluster(&mut self, dims: [u32; 3]) -> &mut Self {
        self.attrs.cluster = Some(dims);
        self
    }

    /// Sets every attribute at once.
    pub fn attrs(&mut self, attrs: LaunchAttrs) -> &mut Self {
        self.attrs = attrs;
        self
    }

    /// The arguments so far.
    pub fn args(&self) -> &[KernelArg<'a, BufferOf<B>>] {
        self.args.as_slice()
    }

    /// Enqueues the launch after checking it ([`Stream::launch_kernel_with`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a wrong argument count or size, bad dimensions or
    /// cluster; [`Error::Unsupported`] for an attribute the backend lacks or a kernel whose
    /// parameter layout is unknown; as [`Stream::launch_kernel`].
    pub fn launch(&self) -> Result<()> {
        refuse_empty_blocks(self.args.as_slice())?;
        self.stream
            .launch_kernel_with(self.func, &self.cfg, self.args.as_slice(), &self.attrs)
    }

    /// Enqueues the launch, passing the arguments as given where the kernel's parameter
    /// layout is unknown ([`Stream::launch_kernel_unchecked`]).
    ///
    /// # Safety
    /// The arguments must match the kernel's parameters in count, size and meaning (a
    /// buffer where it takes a pointer, a value of the type it reads): otherwise the kernel
    /// reads garbage or out-of-bounds memory on the device.
    ///
    /// # Errors
    /// As [`LaunchBuilder::launch`], less the unknown layout.
    #[allow(unsafe_code)]
    pub unsafe fn launch_unchecked(&self) -> Result<()> {
        refuse_empty_blocks(self.args.as_slice())?;
        // SAFETY: the caller upholds the contract of `enqueue_launch_unchecked`, which is
        // this function's.
        unsafe {
            self.stream.launch_kernel_unchecked(
                self.func,
                &self.cfg,
                self.args.as_slice(),
                &self.attrs,
            )
        }
    }
}

/// Refuses a by-value block of no bytes (no kernel parameter is empty; ACL refuses one too).
fn refuse_empty_blocks<Buf>(args: &[KernelArg<'_, Buf>]) -> Result<()> {
    match args
        .iter()
        .position(|a| matches!(a, KernelArg::Bytes(b) if b.is_empty()))
    {
        Some(i) => Err(Error::invalid(format!(
            "launch argument {i} is an empty byte block (a kernel parameter has at least one byte)"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    #[derive(Clone, Copy)]
    struct P {
        a: u16,
        b: i8,
        pad: [u8; 5],
        c: f64,
    }
    // SAFETY: repr(C), explicit padding, every bit pattern valid.
    #[allow(unsafe_code)]
    unsafe impl bytemuck::Zeroable for P {}
    // SAFETY: as above.
    #[allow(unsafe_code)]
    unsafe impl bytemuck::Pod for P {}

    #[test]
    fn params_become_args_of_their_width() {
        let a: KernelArg<'_, ()> = 3u16.into_arg();
        assert_eq!((a.kind(), a.size()), (crate::ParamKind::U16, 2));
        let b: KernelArg<'_, ()> = (-2i8).into_arg();
        assert_eq!(b.value(|_| 0).as_bytes(), &[0xfe]);
        let h: KernelArg<'_, ()> = half::f16::from_f32(1.0).into_arg();
        assert_eq!(h.value(|_| 0).as_bytes(), &0x3c00u16.to_le_bytes());
        let p = P {
            a: 0x0102,
            b: -1,
            pad: [0; 5],
            c: 2.5,
        };
        let s: KernelArg<'_, ()> = ByValue(&p).into_arg();
        assert_eq!(s.kind(), crate::ParamKind::Bytes(16));
        let v = s.value(|_| 0);
        assert_eq!(&v.as_bytes()[..3], &[2, 1, 0xff]);
        assert_eq!(&v.as_bytes()[8..], &2.5f64.to_le_bytes());
        let r: KernelArg<'_, ()> = RawBytes(&[1, 2, 3]).into_arg();
        assert_eq!(r.size(), 3);
    }

    #[test]
    fn arg_list_spills_past_the_inline_capacity() {
        let mut l: ArgList<'_, ()> = ArgList::new();
        for i in 0..INLINE_ARGS as u32 + 3 {
            l.push(KernelArg::U32(i));
            assert_eq!(l.as_slice().len(), i as usize + 1);
        }
        let got: Vec<u64> = l.as_slice().iter().map(|a| a.to_bits(|_| 0)).collect();
        let want: Vec<u64> = (0..INLINE_ARGS as u64 + 3).collect();
        assert_eq!(got, want);
        l.clear();
        assert!(l.as_slice().is_empty());
        // Refilled after a clear, past the capacity again: the same order, nothing left over.
        for i in 0..INLINE_ARGS as u32 + 2 {
            l.push(KernelArg::U32(100 + i));
        }
        let got: Vec<u64> = l.as_slice().iter().map(|a| a.to_bits(|_| 0)).collect();
        let want: Vec<u64> = (100..100 + INLINE_ARGS as u64 + 2).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn attrs_check_clusters_and_refuse_by_name() {
        let cfg = LaunchConfig::new([4, 2, 1], [32, 1, 1]);
        let mut a = LaunchAttrs::default();
        assert!(a.is_empty());
        a.refuse_all(BackendKind::Host).unwrap();
        a.cluster = Some([2, 1, 1]);
        a.check(&cfg).unwrap();
        a.cluster = Some([3, 1, 1]);
        let e = a.check(&cfg).unwrap_err().to_string();
        assert!(e.contains("not a multiple"), "{e}");
        a.cluster = Some([0, 1, 1]);
        assert!(a.check(&cfg).is_err());
        a.cooperative = true;
        match a.refuse_all(BackendKind::Ascend) {
            Err(Error::Unsupported { what, .. }) => {
                assert!(
                    what.contains("cooperative") && what.contains("cluster"),
                    "{what}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn size_check_names_position_and_sizes() {
        let args: [KernelArg<'_, ()>; 2] = [KernelArg::U16(1), KernelArg::Bytes(&[0; 12])];
        check_ok(&[2, 12], &args);
        let e = crate::module::check_arg_sizes("k", &[2, 16], &args)
            .unwrap_err()
            .to_string();
        assert!(e.contains("argument 1") && e.contains("16 bytes"), "{e}");
        let e = crate::module::check_arg_sizes("k", &[2], &args)
            .unwrap_err()
            .to_string();
        assert!(e.contains("takes 1 argument"), "{e}");
    }

    fn check_ok(sizes: &[usize], args: &[KernelArg<'_, ()>]) {
        crate::module::check_arg_sizes("k", sizes, args).unwrap();
    }
}
