//! Kernels of the host backend: Rust functions over the launch's arguments, and the module
//! that holds them by name.

#[allow(unused_imports)]
use super::*;

/// One argument as a host kernel sees it.
#[derive(Debug)]
pub enum HostArg<'a> {
    /// The bytes of a buffer (exclusive access during the kernel).
    Buffer(&'a mut [u8]),
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
    /// A block passed by value (a `#[repr(C)]` struct's bytes): read it with
    /// [`HostArg::pod`] or [`HostArg::bytes`].
    Bytes(&'a [u8]),
}

macro_rules! host_arg_getter {
    ($(#[$m:meta])* $fn:ident, $variant:ident, $t:ty) => {
        $(#[$m])*
        ///
        /// # Errors
        /// [`Error::InvalidArgument`] when the argument is of another kind.
        pub fn $fn(&self) -> Result<$t> {
            match self {
                Self::$variant(v) => Ok(*v),
                other => Err(other.mismatch(ParamKind::$variant)),
            }
        }
    };
}

/// The error of a buffer argument that is not a whole number of aligned `T`s.
fn typed_error<T>(len: usize, e: bytemuck::PodCastError) -> Error {
    Error::invalid(format!(
        "host kernel argument: a buffer of {len} bytes as [{}]: {e:?}",
        std::any::type_name::<T>()
    ))
}

impl HostArg<'_> {
    /// The parameter kind of this argument.
    pub const fn kind(&self) -> ParamKind {
        match self {
            Self::Buffer(_) => ParamKind::Buffer,
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

    /// The bytes of a by-value block.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the argument is not a block.
    pub fn bytes(&self) -> Result<&[u8]> {
        match self {
            Self::Bytes(b) => Ok(b),
            other => Err(other.mismatch(ParamKind::Bytes(0))),
        }
    }

    /// A by-value block read as a `T` (a plain-old-data `#[repr(C)]` struct); the block need
    /// not be aligned.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the argument is not a block of `size_of::<T>()` bytes.
    pub fn pod<T: bytemuck::Pod>(&self) -> Result<T> {
        let b = self.bytes()?;
        if b.len() != std::mem::size_of::<T>() {
            return Err(Error::invalid(format!(
                "host kernel argument: a block of {} bytes read as a {}-byte value",
                b.len(),
                std::mem::size_of::<T>()
            )));
        }
        Ok(bytemuck::pod_read_unaligned(b))
    }

    fn mismatch(&self, want: ParamKind) -> Error {
        Error::invalid(format!(
            "host kernel argument: expected {}, got {}",
            want.name(),
            self.kind().name()
        ))
    }

    /// The buffer's bytes.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the argument is not a buffer.
    pub fn buffer(&mut self) -> Result<&mut [u8]> {
        match self {
            Self::Buffer(b) => Ok(b),
            other => Err(other.mismatch(ParamKind::Buffer)),
        }
    }

    /// The buffer's bytes as elements of `T`, writable (a host kernel's typed view of its
    /// buffer argument). Buffers start on [`DeviceInfo::base_alignment`](crate::DeviceInfo)
    /// (256 bytes on the host backend), so a view whose offset is a multiple of `T`'s
    /// alignment casts.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the argument is not a buffer, or its bytes are not a
    /// whole number of aligned `T`s.
    pub fn typed_mut<T: bytemuck::Pod>(&mut self) -> Result<&mut [T]> {
        let b = self.buffer()?;
        let len = b.len();
        bytemuck::try_cast_slice_mut(b).map_err(|e| typed_error::<T>(len, e))
    }

    /// The buffer's bytes as elements of `T`, read-only.
    ///
    /// # Errors
    /// As [`HostArg::typed_mut`].
    pub fn typed<T: bytemuck::Pod>(&self) -> Result<&[T]> {
        match self {
            Self::Buffer(b) => {
                bytemuck::try_cast_slice(b).map_err(|e| typed_error::<T>(b.len(), e))
            }
            other => Err(other.mismatch(ParamKind::Buffer)),
        }
    }

    host_arg_getter!(
        /// The `u32` value.
        u32, U32, u32
    );
    host_arg_getter!(
        /// The `i32` value.
        i32, I32, i32
    );
    host_arg_getter!(
        /// The `u64` value.
        u64, U64, u64
    );
    host_arg_getter!(
        /// The `i64` value.
        i64, I64, i64
    );
    host_arg_getter!(
        /// The `f32` value.
        f32, F32, f32
    );
    host_arg_getter!(
        /// The `f64` value.
        f64, F64, f64
    );
    host_arg_getter!(
        /// The `i8` value.
        i8, I8, i8
    );
    host_arg_getter!(
        /// The `u8` value.
        u8, U8, u8
    );
    host_arg_getter!(
        /// The `i16` value.
        i16, I16, i16
    );
    host_arg_getter!(
        /// The `u16` value.
        u16, U16, u16
    );
    host_arg_getter!(
        /// The half-precision value.
        f16, F16, half::f16
    );
    host_arg_getter!(
        /// The bfloat16 value.
        bf16, BF16, half::bf16
    );
}

/// A host kernel: a Rust function over the launch configuration and the arguments (checked
/// against its declared parameters before the launch is queued). It runs once per launch, on
/// the stream's worker, in stream order. An error it returns, or a panic, is a device fault:
/// the device's context is poisoned with a sticky error naming the kernel, as a failing
/// kernel poisons a CUDA context.
pub type HostKernelFn = Arc<dyn Fn(&LaunchConfig, &mut [HostArg<'_>]) -> Result<()> + Send + Sync>;

/// One named host kernel: its declared parameters and its function.
#[derive(Clone)]
pub struct HostKernel {
    params: Arc<[ParamKind]>,
    f: HostKernelFn,
}

impl HostKernel {
    /// Its declared parameters.
    pub fn params(&self) -> &[ParamKind] {
        &self.params
    }

    /// Its function.
    pub fn function(&self) -> &HostKernelFn {
        &self.f
    }
}

impl fmt::Debug for HostKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostKernel")
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

/// Host kernels: named Rust functions over buffers, with declared parameter kinds (host
/// backend). Cheap to clone (the functions are shared).
#[derive(Clone, Default)]
pub struct HostModule {
    kernels: BTreeMap<String, HostKernel>,
}

impl HostModule {
    /// An empty module.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) kernel `name` taking `params`.
    pub fn with_kernel<F>(mut self, name: impl Into<String>, params: &[ParamKind], f: F) -> Self
    where
        F: Fn(&LaunchConfig, &mut [HostArg<'_>]) -> Result<()> + Send + Sync + 'static,
    {
        self.insert(name, params, f);
        self
    }

    /// Adds (or replaces) kernel `name` taking `params`.
    pub fn insert<F>(&mut self, name: impl Into<String>, params: &[ParamKind], f: F)
    where
        F: Fn(&LaunchConfig, &mut [HostArg<'_>]) -> Result<()> + Send + Sync + 'static,
    {
        self.kernels.insert(
            name.into(),
            HostKernel {
                params: params.into(),
                f: Arc::new(f),
            },
        );
    }

    /// Kernel `name`, if the module has it.
    pub fn kernel(&self, name: &str) -> Option<&HostKernel> {
        self.kernels.get(name)
    }

    /// The kernel names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.kernels.keys().map(String::as_str)
    }

    /// How many kernels it holds.
    pub fn len(&self) -> usize {
        self.kernels.len()
    }

    /// Whether it holds no kernel.
    pub fn is_empty(&self) -> bool {
        self.kernels.is_empty()
    }
}

impl fmt::Debug for HostModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.kernels.iter()).finish()
    }
}
