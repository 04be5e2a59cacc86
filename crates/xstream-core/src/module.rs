//! Modules and kernels: the values of the one launch path shared by every backend.
//!
//! A [`Device`](crate::Device) loads a module from a [`ModuleSource`] (PTX text or a CUDA
//! binary, an ACL kernel binary, or Rust functions on the host backend), a
//! [`Module`](crate::Module) hands out [`Function`](crate::Function)s by name, and
//! [`Stream::launch_kernel`](crate::Stream::launch_kernel) enqueues one with a
//! [`LaunchConfig`] and typed [`KernelArg`]s. Every device also ships a builtin module
//! ([`Device::builtin_module`](crate::Device::builtin_module)) holding [`BUILTIN_DELAY`] and
//! [`BUILTIN_LCG`]; the built-in [`Kernel::Delay`](crate::Kernel::Delay) and
//! [`Kernel::Lcg`](crate::Kernel::Lcg) run through it.
//!
//! # Checks before a launch
//! Every backend refuses, with [`Error::InvalidArgument`] and before anything is enqueued: a
//! zero grid or block dimension ([`LaunchConfig::check_nonzero`]), dimensions or shared memory
//! beyond the device's [`LaunchLimits`], and, when the function's parameters are known
//! ([`Function::params`](crate::Function::params)), a wrong argument count or kind
//! ([`check_args`]). A buffer of another device is [`Error::WrongDevice`].
//!
//! # Lifetimes
//! A function keeps its module loaded; a module stays loaded while any of its functions or
//! any queued or captured launch of them exists. Buffers passed to a launch are kept alive
//! until the launch completed (the backend's buffer lifetime rule), and by a graph that
//! captured the launch for as long as the graph lives.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::{BackendKind, Error, Result};

mod host;
pub use host::{HostArg, HostKernel, HostKernelFn, HostModule};

/// The builtin module's delay kernel: `xstream_delay(u64 nanoseconds)` keeps the stream busy
/// for that long (one thread; the semantics of [`Kernel::Delay`](crate::Kernel::Delay)).
pub const BUILTIN_DELAY: &str = "xstream_delay";

/// The builtin module's compute kernel: `xstream_lcg(buffer, u32 words, u32 rounds)` applies
/// [`lcg_reference`](crate::lcg_reference)'s update `rounds` times to each of the first
/// `words` little-endian `u32` words of the buffer (any grid: a grid-stride loop).
pub const BUILTIN_LCG: &str = "xstream_lcg";

/// The builtin module's argument test kernel:
/// `xstream_echo_params(buffer out, EchoStruct s, i8 x, u16 y, i64 z, f32 w)`, where
/// `EchoStruct` is the 16-byte `#[repr(C)] { u16 a; i8 b; /* 5 bytes padding */ f64 c; }`
/// passed by value. One thread writes the fields, little-endian, into the first
/// [`ECHO_RECORD_BYTES`] bytes of `out`: `a` at 0, `b` at 2, `c` at 8, `x` at 16, `y` at 18,
/// `z` at 24, `w` at 32 (other bytes untouched). It proves that scalars of several widths and
/// a struct by value reach the kernel intact.
pub const BUILTIN_ECHO: &str = "xstream_echo_params";

/// The bytes of [`BUILTIN_ECHO`]'s record.
pub const ECHO_RECORD_BYTES: usize = 40;

/// The parameters of [`BUILTIN_ECHO`].
pub const BUILTIN_ECHO_PARAMS: &[ParamKind] = &[
    ParamKind::Buffer,
    ParamKind::Bytes(16),
    ParamKind::I8,
    ParamKind::U16,
    ParamKind::I64,
    ParamKind::F32,
];

/// [`BUILTIN_ECHO`]'s record for struct bytes `s` (16) and the scalars: what every backend's
/// kernel writes (the host reference).
pub fn echo_record(s: &[u8; 16], x: i8, y: u16, z: i64, w: f32) -> [u8; ECHO_RECORD_BYTES] {
    let mut r = [0u8; ECHO_RECORD_BYTES];
    r[0..3].copy_from_slice(&s[0..3]);
    r[8..16].copy_from_slice(&s[8..16]);
    r[16] = x.to_le_bytes()[0];
    r[18..20].copy_from_slice(&y.to_le_bytes());
    r[24..32].copy_from_slice(&z.to_le_bytes());
    r[32..36].copy_from_slice(&w.to_le_bytes());
    r
}

/// The parameters of [`BUILTIN_DELAY`].
pub const BUILTIN_DELAY_PARAMS: &[ParamKind] = &[ParamKind::U64];

/// The parameters of [`BUILTIN_LCG`].
pub const BUILTIN_LCG_PARAMS: &[ParamKind] = &[ParamKind::Buffer, ParamKind::U32, ParamKind::U32];

/// The parameters of the builtin function `name` of every backend's builtin module
/// ([`BUILTIN_DELAY`], [`BUILTIN_LCG`], [`BUILTIN_ECHO`]); `None` for another name.
pub fn builtin_params(name: &str) -> Option<&'static [ParamKind]> {
    match name {
        BUILTIN_DELAY => Some(BUILTIN_DELAY_PARAMS),
        BUILTIN_LCG => Some(BUILTIN_LCG_PARAMS),
        BUILTIN_ECHO => Some(BUILTIN_ECHO_PARAMS),
        _ => None,
    }
}

/// Where a module's code comes from.
#[derive(Clone)]
pub enum ModuleSource<'a> {
    /// PTX text (CUDA). Interior NUL bytes are refused.
    Ptx(&'a str),
    /// cubin or fatbin bytes (CUDA).
    CudaBinary(&'a [u8]),
    /// An ACL kernel binary (Ascend; on the simulator, its documented test-only format).
    AscendBinary(&'a [u8]),
    /// Rust functions (host backend).
    Host(HostModule),
}

impl ModuleSource<'_> {
    /// The kind of source, in words (`"PTX text"`, `"a CUDA binary"`, ...).
    pub fn describe(&self) -> &'static str {
        match self {
            Self::Ptx(_) => "PTX text",
            Self::CudaBinary(_) => "a CUDA binary (cubin/fatbin)",
            Self::AscendBinary(_) => "an ACL kernel binary",
            Self::Host(_) => "a host module (Rust functions)",
        }
    }

    /// The error a backend returns for a source of another backend:
    /// [`Error::Unsupported`] naming the source kind.
    pub fn unsupported_on(&self, backend: BackendKind) -> Error {
        Error::unsupported(
            backend,
            format!("loading a module from {}", self.describe()),
        )
    }
}

impl fmt::Debug for ModuleSource<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ptx(s) => write!(f, "Ptx({} bytes)", s.len()),
            Self::CudaBinary(b) => write!(f, "CudaBinary({} bytes)", b.len()),
            Self::AscendBinary(b) => write!(f, "AscendBinary({} bytes)", b.len()),
            Self::Host(m) => f.debug_tuple("Host").field(m).finish(),
        }
    }
}

/// The declared kind of one kernel parameter, used to check argument count and sizes before
/// a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// A device buffer, passed as its device address (8 bytes).
    Buffer,
    /// `u32`.
    U32,
    /// `i32`.
    I32,
    /// `u64`.
    U64,
    /// `i64`.
    I64,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
    /// `i8`.
    I8,
    /// `u8`.
    U8,
    /// `i16`.
    I16,
    /// `u16`.
    U16,
    /// IEEE 754 half precision ([`half::f16`]).
    F16,
    /// bfloat16 ([`half::bf16`]).
    BF16,
    /// A block of this many bytes passed by value: a `#[repr(C)]` struct or raw bytes (see
    /// [`crate::launch`]).
    Bytes(usize),
}

impl ParamKind {
    /// The size in bytes of the value passed to the kernel.
    pub const fn size(self) -> usize {
        match self {
            Self::I8 | Self::U8 => 1,
            Self::I16 | Self::U16 | Self::F16 | Self::BF16 => 2,
            Self::U32 | Self::I32 | Self::F32 => 4,
            Self::Buffer | Self::U64 | Self::I64 | Self::F64 => 8,
            Self::Bytes(n) => n,
        }
    }

    /// Its name, for messages.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Buffer => "buffer",
            Self::U32 => "u32",
            Self::I32 => "i32",
            Self::U64 => "u64",
            Self::I64 => "i64",
            Self::F32 => "f32",
            Self::F64 => "f64",
            Self::I8 => "i8",
            Self::U8 => "u8",
            Self::I16 => "i16",
            Self::U16 => "u16",
            Self::F16 => "f16",
            Self::BF16 => "bf16",
            Self::Bytes(_) => "bytes",
        }
    }
}

/// One kernel argument, in order.
#[derive(Debug)]
pub enum KernelArg<'a, Buf> {
    /// A device buffer, passed as its device address; kept alive until the launch completed.
    Buffer(&'a Buf),
    /// A range of a device buffer ([`crate::BufferView`]), filling a
    /// [`ParamKind::Buffer`] parameter: CUDA and Ascend kernels get the buffer's address plus
    /// the view's offset, host kernels the view's bytes. The buffer is kept alive as for
    /// [`KernelArg::Buffer`].
    View(crate::BufferView<'a, Buf>),
    /// A `u32` value.
    U32(u32),
    /// An `i32` value.
    I32(i32),
    /// A `u64` value.
    U64(u64),
    /// An `i64` value.
    I64(i64),
    /// An `f32` value.
    F32(f32),
    /// An `f64` value.
    F64(f64),
    /// An `i8` value.
    I8(i8),
    /// A `u8` value.
    U8(u8),
    /// An `i16` value.
    I16(i16),
    /// A `u16` value.
    U16(u16),
    /// An IEEE 754 half-precision value.
    F16(half::f16),
    /// A bfloat16 value.
    BF16(half::bf16),
    /// Bytes passed by value as one parameter (a `#[repr(C)]` struct's bytes, see
    /// [`crate::launch::ByValue`]); the kernel receives a copy taken at the launch call.
    Bytes(&'a [u8]),
}

impl<Buf> Clone for KernelArg<'_, Buf> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Buf> Copy for KernelArg<'_, Buf> {}

impl<'a, Buf> KernelArg<'a, Buf> {
    /// The parameter kind this argument fills.
    pub const fn kind(&self) -> ParamKind {
        match self {
            Self::Buffer(_) | Self::View(_) => ParamKind::Buffer,
            Self::U32(_) => ParamKind::U32,
            Self::I32(_) => ParamKind::I32,
            Self::U64(_) => ParamKind::U64,
            Self::I64(_) => ParamKind::I64,
            Self::F32(_) => ParamKind::F32,
            Self::F64(_) => ParamKind::F64,
            Self::I8(_) => ParamKind::I8,
            Self::U8(_) => ParamKind::U8,
            Self::I16(_) => ParamKind::I16,
            Self::U16(_) => ParamKind::U16,
            Self::F16(_) => ParamKind::F16,
            Self::BF16(_) => ParamKind::BF16,
            Self::Bytes(b) => ParamKind::Bytes(b.len()),
        }
    }

    /// The buffer of a [`KernelArg::Buffer`] or [`KernelArg::View`] (what the launch keeps
    /// alive and checks the device of); `None` for a scalar.
    pub const fn buffer(&self) -> Option<&'a Buf> {
        match *self {
            Self::Buffer(b) => Some(b),
            Self::View(v) => Some(v.buffer()),
            _ => None,
        }
    }

    /// The size in bytes of the value passed to the kernel.
    pub const fn size(&self) -> usize {
        self.kind().size()
    }

    /// The argument's value as the kernel sees it (little-endian, zero-extended to 64 bits),
    /// with `address` giving a buffer's device address (a view adds its offset). [`KernelArg::Bytes`] gives its first
    /// (at most 8) bytes: use [`KernelArg::value`] for every argument kind.
    pub fn to_bits(&self, address: impl FnOnce(&Buf) -> u64) -> u64 {
        let v = self.value(address);
        let b = v.as_bytes();
        let mut w = [0u8; 8];
        let n = b.len().min(8);
        w[..n].copy_from_slice(&b[..n]);
        u64::from_le_bytes(w)
    }

    /// The argument's bytes as the kernel receives them (little-endian scalars, a buffer's
    /// 8-byte device address from `address`, a by-value block as it is), without allocating.
    #[inline]
    pub fn value(&self, address: impl FnOnce(&Buf) -> u64) -> ArgValue<'a> {
        // Each scalar widened to a `u64` whose little-endian bytes start with the value's own
        // (zero-padded): no copy of a variable length per argument.
        let inline = |bits: u64, len: u8| ArgValue::Inline {
            bytes: bits.to_le_bytes(),
            len,
        };
        match *self {
            Self::Buffer(b) => inline(address(b), 8),
            Self::View(v) => inline(address(v.buffer()).wrapping_add(v.offset() as u64), 8),
            Self::U32(v) => inline(u64::from(v), 4),
            Self::I32(v) => inline(u64::from(v as u32), 4),
            Self::U64(v) => inline(v, 8),
            Self::I64(v) => inline(v as u64, 8),
            Self::F32(v) => inline(u64::from(v.to_bits()), 4),
            Self::F64(v) => inline(v.to_bits(), 8),
            Self::I8(v) => inline(u64::from(v as u8), 1),
            Self::U8(v) => inline(u64::from(v), 1),
            Self::I16(v) => inline(u64::from(v as u16), 2),
            Self::U16(v) => inline(u64::from(v), 2),
            Self::F16(v) => inline(u64::from(v.to_bits()), 2),
            Self::BF16(v) => inline(u64::from(v.to_bits()), 2),
            Self::Bytes(b) => ArgValue::Borrowed(b),
        }
    }

    /// The same argument with its buffer (if any) mapped by `f` (for wrappers over backend
    /// buffers, such as the facade's run-time dispatch); a view keeps its offset and length,
    /// so `f` must map a buffer to one of the same length (the same memory seen through
    /// another type); every other kind is kept as it is.
    ///
    /// # Errors
    /// What `f` returns.
    pub fn map_buffer<B2>(
        self,
        f: impl FnOnce(&'a Buf) -> Result<&'a B2>,
    ) -> Result<KernelArg<'a, B2>> {
        Ok(match self {
            Self::Buffer(b) => KernelArg::Buffer(f(b)?),
            Self::View(v) => KernelArg::View(v.rebind(f(v.buffer())?)),
            Self::U32(v) => KernelArg::U32(v),
            Self::I32(v) => KernelArg::I32(v),
            Self::U64(v) => KernelArg::U64(v),
            Self::I64(v) => KernelArg::I64(v),
            Self::F32(v) => KernelArg::F32(v),
            Self::F64(v) => KernelArg::F64(v),
            Self::I8(v) => KernelArg::I8(v),
            Self::U8(v) => KernelArg::U8(v),
            Self::I16(v) => KernelArg::I16(v),
            Self::U16(v) => KernelArg::U16(v),
            Self::F16(v) => KernelArg::F16(v),
            Self::BF16(v) => KernelArg::BF16(v),
            Self::Bytes(b) => KernelArg::Bytes(b),
        })
    }
}

/// The bytes of one argument as the kernel receives them ([`KernelArg::value`]): up to 8
/// bytes inline, or a borrowed by-value block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgValue<'a> {
    /// A scalar or a buffer address: the first `len` bytes of `bytes`.
    Inline {
        /// The little-endian value, zero-padded.
        bytes: [u8; 8],
        /// How many bytes of `bytes` the parameter takes (1..=8).
        len: u8,
    },
    /// A by-value block.
    Borrowed(&'a [u8]),
}

impl ArgValue<'_> {
    /// The bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Self::Inline { bytes, len } => &bytes[..usize::from(*len)],
            Self::Borrowed(b) => b,
        }
    }
}

/// Checks the sizes of `args` against a parameter layout reported by the vendor (`sizes`, one
/// per parameter, in bytes): same count, same size at each position.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the function, the position and both sizes.
pub fn check_arg_sizes<Buf>(
    name: &str,
    sizes: &[usize],
    args: &[KernelArg<'_, Buf>],
) -> Result<()> {
    if sizes.len() != args.len() {
        return Err(Error::invalid(format!(
            "kernel `{name}` takes {} argument(s) (sizes in bytes {sizes:?}), got {}",
            sizes.len(),
            args.len()
        )));
    }
    for (i, (&n, a)) in sizes.iter().zip(args).enumerate() {
        if a.size() != n {
            return Err(Error::invalid(format!(
                "kernel `{name}` argument {i}: the parameter has {n} bytes, got {} ({} bytes)",
                a.kind().name(),
                a.size()
            )));
        }
    }
    Ok(())
}

/// Checks `args` against the declared `params` of function `name`: same count, same kind at
/// each position.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the function, the position and both kinds.
pub fn check_args<Buf>(
    name: &str,
    params: &[ParamKind],
    args: &[KernelArg<'_, Buf>],
) -> Result<()> {
    if params.len() != args.len() {
        return Err(Error::invalid(format!(
            "kernel `{name}` takes {} argument(s) ({}), got {}",
            params.len(),
            kinds_list(params),
            args.len()
        )));
    }
    for (i, (p, a)) in params.iter().zip(args).enumerate() {
        if *p != a.kind() {
            return Err(Error::invalid(format!(
                "kernel `{name}` argument {i}: expected {} ({} bytes), got {} ({} bytes)",
                p.name(),
                p.size(),
                a.kind().name(),
                a.kind().size()
            )));
        }
    }
    Ok(())
}

fn kinds_list(params: &[ParamKind]) -> String {
    let v: Vec<&str> = params.iter().map(|p| p.name()).collect();
    v.join(", ")
}

/// Grid, block and dynamic shared memory of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks per grid, x/y/z (each at least 1).
    pub grid: [u32; 3],
    /// Threads per block, x/y/z (each at least 1).
    pub block: [u32; 3],
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// A three-dimensional launch without dynamic shared memory.
    pub const fn new(grid: [u32; 3], block: [u32; 3]) -> Self {
        Self {
            grid,
            block,
            shared_mem_bytes: 0,
        }
    }

    /// A one-dimensional launch: `grid_x` blocks of `block_x` threads.
    pub const fn linear(grid_x: u32, block_x: u32) -> Self {
        Self::new([grid_x, 1, 1], [block_x, 1, 1])
    }

    /// One block of one thread.
    pub const fn single() -> Self {
        Self::linear(1, 1)
    }

    /// A one-dimensional launch covering `n` items with blocks of `block_x` threads (at least
    /// one block; a `block_x` of 0 is kept and refused at launch).
    pub const fn for_items(n: u32, block_x: u32) -> Self {
        let g = if block_x == 0 { 1 } else { n.div_ceil(block_x) };
        Self::linear(if g == 0 { 1 } else { g }, block_x)
    }

    /// Sets the dynamic shared memory per block.
    pub const fn with_shared_mem(mut self, bytes: u32) -> Self {
        self.shared_mem_bytes = bytes;
        self
    }

    /// Threads per block (x * y * z).
    pub const fn threads_per_block(&self) -> u64 {
        self.block[0] as u64 * self.block[1] as u64 * self.block[2] as u64
    }

    /// Blocks in the grid (x * y * z).
    pub const fn blocks(&self) -> u64 {
        self.grid[0] as u64 * self.grid[1] as u64 * self.grid[2] as u64
    }

    /// Refuses a zero grid or block dimension.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the dimension.
    pub fn check_nonzero(&self) -> Result<()> {
        for (what, dims) in [("grid", self.grid), ("block", self.block)] {
            if let Some(i) = dims.iter().position(|&d| d == 0) {
                return Err(Error::invalid(format!(
                    "launch {what} dimension {} is 0 ({what} = {dims:?}); every dimension must be at least 1",
                    ["x", "y", "z"][i]
                )));
            }
        }
        Ok(())
    }
}

/// A device's launch limits (CUDA: `MAX_GRID_DIM_*`, `MAX_BLOCK_DIM_*`,
/// `MAX_THREADS_PER_BLOCK`, the opt-in shared memory per block).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchLimits {
    /// Largest grid, x/y/z.
    pub max_grid: [u32; 3],
    /// Largest block, x/y/z.
    pub max_block: [u32; 3],
    /// Most threads in one block.
    pub max_threads_per_block: u32,
    /// Most dynamic shared memory per block, in bytes.
    pub max_shared_mem_bytes: u32,
}

impl LaunchLimits {
    /// No limit beyond the `u32` range (host backend).
    pub const UNLIMITED: Self = Self {
        max_grid: [u32::MAX; 3],
        max_block: [u32::MAX; 3],
        max_threads_per_block: u32::MAX,
        max_shared_mem_bytes: u32::MAX,
    };

    /// Checks `cfg`: no zero dimension, nothing above these limits.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the dimension, the value and the limit.
    pub fn check(&self, cfg: &LaunchConfig) -> Result<()> {
        cfg.check_nonzero()?;
        for (what, dims, max) in [
            ("grid", cfg.grid, self.max_grid),
            ("block", cfg.block, self.max_block),
        ] {
            for i in 0..3 {
                if dims[i] > max[i] {
                    return Err(Error::invalid(format!(
                        "launch {what} dimension {} is {}, above the device's limit {}",
                        ["x", "y", "z"][i],
                        dims[i],
                        max[i]
                    )));
                }
            }
        }
        if cfg.threads_per_block() > u64::from(self.max_threads_per_block) {
            return Err(Error::invalid(format!(
                "launch block {:?} has {} threads, above the device's limit {}",
                cfg.block,
                cfg.threads_per_block(),
                self.max_threads_per_block
            )));
        }
        if cfg.shared_mem_bytes > self.max_shared_mem_bytes {
            return Err(Error::invalid(format!(
                "launch asks {} bytes of dynamic shared memory, above the device's limit {}",
                cfg.shared_mem_bytes, self.max_shared_mem_bytes
            )));
        }
        Ok(())
    }
}

/// Threads per block of the builtin LCG launch that [`Kernel::Lcg`](crate::Kernel::Lcg)
/// makes.
pub const LCG_BLOCK: u32 = 256;

/// The launch of [`BUILTIN_LCG`] that [`Kernel::Lcg`](crate::Kernel::Lcg) makes over a buffer
/// of `len` bytes: the word count and the configuration (blocks of [`LCG_BLOCK`] threads, at
/// most 4096 blocks; the kernel loops over the rest).
///
/// # Errors
/// [`Error::InvalidArgument`] when `len` is not a multiple of 4 or holds more than
/// `u32::MAX` words.
pub fn lcg_launch(len: usize) -> Result<(u32, LaunchConfig)> {
    if !len.is_multiple_of(4) {
        return Err(Error::invalid(format!(
            "lcg: buffer length {len} is not a multiple of 4"
        )));
    }
    let words = u32::try_from(len / 4)
        .map_err(|_| Error::invalid(format!("lcg: {len} bytes hold more than u32::MAX words")))?;
    let grid = words.div_ceil(LCG_BLOCK).clamp(1, 4096);
    Ok((words, LaunchConfig::linear(grid, LCG_BLOCK)))
}

/// The argument of [`BUILTIN_DELAY`] for a [`Kernel::Delay`](crate::Kernel::Delay) of `d`
/// (nanoseconds, saturating).
pub fn delay_nanoseconds(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The error of [`Module::function`](crate::Module::function) for a name the module lacks.
pub fn missing_function(name: &str) -> Error {
    Error::invalid(format!("the module has no function named `{name}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_params_name_the_builtin_functions_only() {
        assert_eq!(builtin_params(BUILTIN_LCG), Some(BUILTIN_LCG_PARAMS));
        assert_eq!(builtin_params(BUILTIN_DELAY), Some(BUILTIN_DELAY_PARAMS));
        assert_eq!(builtin_params(BUILTIN_ECHO), Some(BUILTIN_ECHO_PARAMS));
        assert_eq!(builtin_params("other"), None);
    }

    #[test]
    fn host_buffer_arguments_read_as_typed_slices() {
        // 8-byte aligned storage, so the bytes may be read as u32 and as u64.
        let mut store = [0u64; 2];
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut store);
        let mut arg = HostArg::Buffer(bytes);
        arg.typed_mut::<u32>()
            .unwrap()
            .copy_from_slice(&[1, 2, 3, 4]);
        arg.typed_mut::<u32>().unwrap()[2] = 30;
        assert_eq!(arg.typed::<u32>().unwrap(), &[1, 2, 30, 4]);
        assert_eq!(arg.typed::<u64>().unwrap().len(), 2);
        assert!(
            arg.typed::<[u8; 3]>().is_err(),
            "16 bytes are not whole 3-byte elements"
        );
        assert_eq!(store[1], u64::from_le_bytes([30, 0, 0, 0, 4, 0, 0, 0]));
        let mut odd = [0u32; 2];
        let b: &mut [u8] = bytemuck::cast_slice_mut(&mut odd);
        let mut misaligned = HostArg::Buffer(&mut b[1..5]);
        assert!(misaligned.typed_mut::<u32>().is_err(), "misaligned");
        assert!(HostArg::U32(1).typed::<u32>().is_err(), "not a buffer");
    }

    #[test]
    fn arg_check_names_the_problem() {
        let params = BUILTIN_LCG_PARAMS;
        let buf = ();
        let ok: [KernelArg<'_, ()>; 3] = [
            KernelArg::Buffer(&buf),
            KernelArg::U32(1),
            KernelArg::U32(2),
        ];
        check_args("k", params, &ok).unwrap();
        let e = check_args("k", params, &ok[..2]).unwrap_err().to_string();
        assert!(
            e.contains("takes 3 argument(s)") && e.contains("got 2"),
            "{e}"
        );
        let bad = [
            KernelArg::Buffer(&buf),
            KernelArg::U64(1),
            KernelArg::U32(2),
        ];
        let e = check_args("k", params, &bad).unwrap_err().to_string();
        assert!(
            e.contains("argument 1") && e.contains("expected u32"),
            "{e}"
        );
    }

    #[test]
    fn limits_refuse_zero_and_oversize() {
        let lim = LaunchLimits {
            max_grid: [10, 10, 10],
            max_block: [8, 8, 1],
            max_threads_per_block: 32,
            max_shared_mem_bytes: 100,
        };
        lim.check(&LaunchConfig::linear(10, 8)).unwrap();
        let e = lim
            .check(&LaunchConfig::new([1, 0, 1], [1, 1, 1]))
            .unwrap_err();
        assert!(e.to_string().contains("grid dimension y is 0"), "{e}");
        assert!(lim.check(&LaunchConfig::linear(11, 1)).is_err());
        assert!(lim.check(&LaunchConfig::new([1; 3], [1, 1, 2])).is_err());
        let e = lim
            .check(&LaunchConfig::new([1; 3], [8, 8, 1]))
            .unwrap_err();
        assert!(e.to_string().contains("64 threads"), "{e}");
        assert!(lim
            .check(&LaunchConfig::linear(1, 1).with_shared_mem(101))
            .is_err());
    }

    #[test]
    fn lcg_launch_covers_every_word() {
        let (w, cfg) = lcg_launch(4 * 1000).unwrap();
        assert_eq!(w, 1000);
        assert!(cfg.blocks() * cfg.threads_per_block() >= 1000);
        assert!(lcg_launch(6).is_err());
        assert_eq!(LaunchConfig::for_items(0, 64).grid, [1, 1, 1]);
        assert_eq!(LaunchConfig::for_items(65, 64).grid, [2, 1, 1]);
    }

    #[test]
    fn arg_bits_are_little_endian_values() {
        let a: KernelArg<'_, ()> = KernelArg::I32(-1);
        assert_eq!(a.to_bits(|_| 0), 0xffff_ffff);
        let f: KernelArg<'_, ()> = KernelArg::F32(1.0);
        assert_eq!(f.to_bits(|_| 0), u64::from(1.0f32.to_bits()));
        let mut h = HostArg::U32(3);
        assert_eq!(h.u32().unwrap(), 3);
        assert!(h.u64().is_err());
        assert!(h.buffer().is_err());
    }

    /// Every kind's value is its own little-endian bytes, of its parameter's size.
    #[test]
    fn arg_values_are_each_kinds_own_bytes() {
        let buf = ();
        let h = half::f16::from_f32(-2.5);
        let b = half::bf16::from_f32(3.25);
        let block = [9u8, 8, 7, 6, 5, 4, 3, 2, 1, 0, 11];
        let cases: [(KernelArg<'_, ()>, Vec<u8>); 15] = [
            (
                KernelArg::Buffer(&buf),
                0x1122_3344_5566_7788u64.to_le_bytes().into(),
            ),
            (
                KernelArg::U32(0x8000_0001),
                0x8000_0001u32.to_le_bytes().into(),
            ),
            (KernelArg::I32(-7), (-7i32).to_le_bytes().into()),
            (
                KernelArg::U64(u64::MAX - 1),
                (u64::MAX - 1).to_le_bytes().into(),
            ),
            (KernelArg::I64(-9), (-9i64).to_le_bytes().into()),
            (KernelArg::F32(-0.75), (-0.75f32).to_le_bytes().into()),
            (KernelArg::F64(1e300), 1e300f64.to_le_bytes().into()),
            (KernelArg::I8(-128), vec![0x80]),
            (KernelArg::U8(0xfe), vec![0xfe]),
            (KernelArg::I16(-2), (-2i16).to_le_bytes().into()),
            (KernelArg::U16(0xbeef), 0xbeefu16.to_le_bytes().into()),
            (KernelArg::F16(h), h.to_le_bytes().into()),
            (KernelArg::BF16(b), b.to_le_bytes().into()),
            (KernelArg::Bytes(&block), block.into()),
            (KernelArg::Bytes(&block[..1]), vec![9]),
        ];
        for (a, want) in cases {
            let v = a.value(|_| 0x1122_3344_5566_7788);
            assert_eq!(v.as_bytes(), &want[..], "{a:?}");
            assert_eq!(v.as_bytes().len(), a.size(), "{a:?}");
        }
    }

    #[test]
    fn host_module_lists_kernels() {
        let m = HostModule::new()
            .with_kernel("b", &[ParamKind::U32], |_, _| Ok(()))
            .with_kernel("a", &[], |_, _| Ok(()));
        assert_eq!(m.names().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(m.kernel("b").unwrap().params(), &[ParamKind::U32]);
        assert!(m.kernel("c").is_none());
        assert!(missing_function("c").to_string().contains("`c`"));
    }
}
