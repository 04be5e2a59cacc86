//! Host modules: kernels are Rust functions over buffers ([`HostModule`]), launched in stream
//! order on the stream's worker thread. The builtin module ([`builtin_host_module`]) holds
//! `xstream_delay` and `xstream_lcg`, the kernels behind `Kernel::Delay` and `Kernel::Lcg`, and
//! `xstream_echo_params`, the argument test kernel.
//!
//! A kernel receives the launch configuration and its arguments: buffers (or the ranges of
//! views) as exclusive byte slices (every buffer of the launch is locked for the call, in
//! address order), scalars by value. A buffer may be passed several times: overlapping
//! arguments work on copies merged back after the call (see `KernelLaunch::run` and
//! docs/semantics.md, "Views and aliasing"). An error returned by the kernel, or a
//! panic, is a device fault: the context is poisoned with a sticky error naming the kernel,
//! as a failing kernel poisons a CUDA context. Like device code, a kernel touches only its
//! arguments: xstream calls from inside it return `Error::NotPermitted` (as inside a
//! stream-blocking callback), and a buffer it reached by other means may be locked by this
//! very launch.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use xstream_core::module::{
    echo_record, missing_function, BUILTIN_DELAY, BUILTIN_DELAY_PARAMS, BUILTIN_ECHO,
    BUILTIN_ECHO_PARAMS, BUILTIN_LCG, BUILTIN_LCG_PARAMS, ECHO_RECORD_BYTES,
};
use xstream_core::{
    lcg_reference, Error, FunctionImpl, FunctionName, HostArg, HostKernel, HostModule,
    LaunchConfig, ModuleImpl, ParamKind, Result,
};

use crate::HostBackend;

/// The builtin module of the host backend: `xstream_delay(u64 nanoseconds)` sleeps on the
/// worker; `xstream_lcg(buffer, u32 words, u32 rounds)` runs [`lcg_reference`] over the first
/// `words` words (more words than the buffer holds is a kernel error, a device fault).
pub fn builtin_host_module() -> &'static HostModule {
    static M: OnceLock<HostModule> = OnceLock::new();
    M.get_or_init(|| {
        HostModule::new()
            .with_kernel(BUILTIN_DELAY, BUILTIN_DELAY_PARAMS, |_, args| {
                std::thread::sleep(Duration::from_nanos(args[0].u64()?));
                Ok(())
            })
            .with_kernel(BUILTIN_LCG, BUILTIN_LCG_PARAMS, |_, args| {
                let words = args[1].u32()? as usize;
                let rounds = args[2].u32()?;
                let buf = args[0].buffer()?;
                let len = buf.len();
                let data = words
                    .checked_mul(4)
                    .and_then(|n| buf.get_mut(..n))
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "{BUILTIN_LCG}: {words} words do not fit a {len}-byte buffer"
                        ))
                    })?;
                lcg_reference(data, rounds);
                Ok(())
            })
            .with_kernel(BUILTIN_ECHO, BUILTIN_ECHO_PARAMS, |_, args| {
                let mut st = [0u8; 16];
                st.copy_from_slice(args[1].bytes()?);
                let rec = echo_record(
                    &st,
                    args[2].i8()?,
                    args[3].u16()?,
                    args[4].i64()?,
                    args[5].f32()?,
                );
                let out = args[0].buffer()?;
                let len = out.len();
                let dst = out.get_mut(..ECHO_RECORD_BYTES).ok_or_else(|| {
                    Error::invalid(format!(
                        "{BUILTIN_ECHO}: its {ECHO_RECORD_BYTES}-byte record does not fit a {len}-byte buffer"
                    ))
                })?;
                // Only the fields' bytes: the padding of the record stays untouched.
                for r in [0..3, 8..17, 18..20, 24..36] {
                    dst[r.clone()].copy_from_slice(&rec[r]);
                }
                Ok(())
            })
    })
}

/// Builtin function `name` for device `ordinal`, from functions made once (no map clone or
/// name allocation per launch).
pub(crate) fn builtin_function(name: &str, ordinal: usize) -> Result<HostFunction> {
    static FNS: OnceLock<Vec<HostFunction>> = OnceLock::new();
    let fns = FNS.get_or_init(|| {
        let m = builtin_host_module();
        m.names()
            .filter_map(|n| {
                m.kernel(n).map(|k| HostFunction {
                    name: n.into(),
                    kernel: k.clone(),
                    ordinal: 0,
                })
            })
            .collect()
    });
    let mut f = fns
        .iter()
        .find(|f| &*f.name == name)
        .cloned()
        .ok_or_else(|| missing_function(name))?;
    f.ordinal = ordinal;
    Ok(f)
}

/// A module loaded on a host device (from [`xstream_core::ModuleSource::Host`]).
#[derive(Debug, Clone)]
pub struct HostLoadedModule {
    module: HostModule,
    ordinal: usize,
}

impl HostLoadedModule {
    pub(crate) fn new(module: HostModule, ordinal: usize) -> Self {
        Self { module, ordinal }
    }

    /// The kernels it holds.
    pub fn source(&self) -> &HostModule {
        &self.module
    }
}

impl ModuleImpl for HostLoadedModule {
    type B = HostBackend;

    fn function_impl(&self, name: &FunctionName<'_>) -> Result<HostFunction> {
        let name = name.as_str();
        let k = self
            .module
            .kernel(name)
            .ok_or_else(|| missing_function(name))?;
        Ok(HostFunction {
            name: name.into(),
            kernel: k.clone(),
            ordinal: self.ordinal,
        })
    }
}

/// A host kernel of a loaded module.
#[derive(Debug, Clone)]
pub struct HostFunction {
    name: Arc<str>,
    pub(crate) kernel: HostKernel,
    pub(crate) ordinal: usize,
}

impl FunctionImpl for HostFunction {
    type B = HostBackend;

    fn name_impl(&self) -> &str {
        &self.name
    }

    fn params_impl(&self) -> Option<&[ParamKind]> {
        Some(self.kernel.params())
    }
}

/// By-value bytes kept inline up to this size (larger blocks take one allocation).
const INLINE_BYTES: usize = 32;

/// A by-value block as queued: a copy taken at the launch call.
#[derive(Debug, Clone)]
pub(crate) enum QueuedBytes {
    Inline([u8; INLINE_BYTES], u8),
    Heap(Box<[u8]>),
}

impl QueuedBytes {
    pub(crate) fn new(b: &[u8]) -> Self {
        if b.len() <= INLINE_BYTES {
            let mut a = [0u8; INLINE_BYTES];
            a[..b.len()].copy_from_slice(b);
            Self::Inline(a, b.len() as u8)
        } else {
            Self::Heap(b.into())
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            Self::Inline(a, n) => &a[..usize::from(*n)],
            Self::Heap(b) => b,
        }
    }
}

/// A launch's argument as queued: buffers (whole, or the range of a view) keep their bytes
/// alive until the launch ran.
#[derive(Debug, Clone)]
pub(crate) enum QueuedArg {
    Buffer {
        buf: Arc<crate::buffer::BufInner>,
        offset: usize,
        len: usize,
    },
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    I8(i8),
    U8(u8),
    I16(i16),
    U16(u16),
    F16(half::f16),
    BF16(half::bf16),
    Bytes(QueuedBytes),
}

/// One queued (or captured) launch.
#[derive(Debug, Clone)]
pub(crate) struct KernelLaunch {
    pub function: HostFunction,
    pub cfg: LaunchConfig,
    pub args: Vec<QueuedArg>,
}

/// The buffer arguments of one buffer in a launch: `(argument index, offset, len)`.
type Group = Vec<(usize, usize, usize)>;

impl KernelLaunch {
    /// Runs the kernel: locks each distinct buffer once (in address order, the order every
    /// multi-buffer operation of the worker uses), hands each buffer argument its bytes, then
    /// calls the function.
    ///
    /// Aliasing (docs/semantics.md, "Views and aliasing"): arguments of one buffer whose
    /// ranges are disjoint get disjoint slices of the buffer itself. When ranges overlap (the
    /// same buffer twice, overlapping views), each of those arguments gets a private copy of
    /// its bytes as they were when the kernel started, and afterwards the bytes each argument
    /// changed are written back, in argument order: `out = a + a` and the in-place
    /// `a = a + b` give CUDA's results.
    pub(crate) fn run(&self) -> Result<()> {
        let mut groups: Vec<(&Arc<crate::buffer::BufInner>, Group)> = Vec::new();
        for (i, a) in self.args.iter().enumerate() {
            if let QueuedArg::Buffer { buf, offset, len } = a {
                match groups.iter_mut().find(|(b, _)| Arc::ptr_eq(b, buf)) {
                    Some((_, g)) => g.push((i, *offset, *len)),
                    None => groups.push((buf, vec![(i, *offset, *len)])),
                }
            }
        }
        groups.sort_by_key(|(b, _)| b.addr());
        let mut guards: Vec<crate::ipc_mem::BufGuard<'_>> =
            groups.iter().map(|(b, _)| b.lock()).collect();
        // Per group: whether its ranges overlap (then it works on copies).
        let overlapping: Vec<bool> = groups
            .iter_mut()
            .map(|(_, g)| {
                g.sort_by_key(|&(_, off, _)| off);
                g.windows(2).any(|w| w[0].1 + w[0].2 > w[1].1)
            })
            .collect();
        // Copies for overlapping groups: (argument index, offset, bytes at launch start).
        let mut private: Vec<(usize, usize, Vec<u8>)> = Vec::new();
        let mut pristine: Vec<Option<Vec<u8>>> = Vec::with_capacity(groups.len());
        for ((_, g), (guard, &ov)) in groups.iter().zip(guards.iter_mut().zip(&overlapping)) {
            if ov {
                let whole = guard[..].to_vec();
                for &(i, off, len) in g {
                    private.push((i, off, whole[off..off + len].to_vec()));
                }
                pristine.push(Some(whole));
            } else {
                pristine.push(None);
            }
        }
        let mut slots: Vec<Option<&mut [u8]>> = (0..self.args.len()).map(|_| None).collect();
        for ((_, g), (guard, &ov)) in groups.iter().zip(guards.iter_mut().zip(&overlapping)) {
            if ov {
                continue;
            }
            // Disjoint ranges, sorted by offset: split the buffer's bytes between them.
            let mut rest: &mut [u8] = &mut guard[..];
            let mut at = 0;
            for &(i, off, len) in g {
                let (_, tail) = std::mem::take(&mut rest).split_at_mut(off - at);
                let (mine, tail) = tail.split_at_mut(len);
                slots[i] = Some(mine);
                rest = tail;
                at = off + len;
            }
        }
        for (i, _, bytes) in private.iter_mut() {
            slots[*i] = Some(bytes.as_mut_slice());
        }
        let mut args = self
            .args
            .iter()
            .zip(slots.iter_mut())
            .map(|(a, slot)| {
                Ok(match a {
                    QueuedArg::Buffer { .. } => match slot.take() {
                        Some(b) => HostArg::Buffer(b),
                        None => return Err(Error::invalid("host kernel buffer not bound")),
                    },
                    QueuedArg::U32(v) => HostArg::U32(*v),
                    QueuedArg::I32(v) => HostArg::I32(*v),
                    QueuedArg::U64(v) => HostArg::U64(*v),
                    QueuedArg::I64(v) => HostArg::I64(*v),
                    QueuedArg::F32(v) => HostArg::F32(*v),
                    QueuedArg::F64(v) => HostArg::F64(*v),
                    QueuedArg::I8(v) => HostArg::I8(*v),
                    QueuedArg::U8(v) => HostArg::U8(*v),
                    QueuedArg::I16(v) => HostArg::I16(*v),
                    QueuedArg::U16(v) => HostArg::U16(*v),
                    QueuedArg::F16(v) => HostArg::F16(*v),
                    QueuedArg::BF16(v) => HostArg::BF16(*v),
                    QueuedArg::Bytes(b) => HostArg::Bytes(b.as_slice()),
                })
            })
            .collect::<Result<Vec<HostArg<'_>>>>()?;
        let r = (self.function.kernel.function())(&self.cfg, &mut args);
        drop(args);
        drop(slots);
        // Write back what each copy changed, in argument order.
        private.sort_by_key(|&(i, _, _)| i);
        for (i, off, bytes) in &private {
            let Some(gi) = groups.iter().position(|(_, g)| g.iter().any(|e| e.0 == *i)) else {
                continue;
            };
            let (Some(orig), Some(guard)) = (pristine[gi].as_ref(), guards.get_mut(gi)) else {
                continue;
            };
            let dst = &mut guard[..];
            for (j, &b) in bytes.iter().enumerate() {
                if b != orig[off + j] {
                    dst[off + j] = b;
                }
            }
        }
        r
    }
}
