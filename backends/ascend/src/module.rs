//! Modules and kernels on Ascend, over the ACL kernel-binary API: a module is a binary loaded
//! with `aclrtBinaryLoadFromData`, a function comes from `aclrtBinaryGetFunction`, and
//! [`Stream::launch_kernel`](xstream_core::Stream::launch_kernel) builds the argument list
//! (`aclrtKernelArgsInit` / `Append` / `Finalize`) and launches with
//! `aclrtLaunchKernelWithConfig` (see `stream/kernel.rs`). The API is used only when the
//! runtime exports every symbol of [`crate::loader::MODULES`] ([`Capabilities::MODULES`]).
//!
//! **The builtin module exists only for the simulator.** A real Ascend kernel binary is an
//! object built by the Ascend C compiler for one chip; xstream ships none. What
//! [`Device::builtin_module`](xstream_core::Device::builtin_module) loads is
//! [`builtin_binary`]: `xstream_delay` and `xstream_lcg` in the **test-only format of the CPU
//! simulator** `xstream-ascend-sim` ([`sim_binary`]), which only the simulator can run. A real
//! runtime refuses it, so on an NPU the builtin module, [`Kernel::Delay`] and [`Kernel::Lcg`]
//! are [`Error::Unsupported`] with a message saying so, and the device lacks
//! [`Capabilities::KERNELS`]; user binaries still load there through
//! [`ModuleSource::AscendBinary`](xstream_core::ModuleSource::AscendBinary).
//!
//! **Parameters.** ACL cannot tell a function's parameters, so
//! [`Function::params`](xstream_core::Function::params) is `None` for user binaries (arguments
//! go unchecked by xstream, as with the vendor API) and known for the builtin functions. **Lifetime.** A function keeps its module loaded; dropping the last
//! handle unloads the binary on the reaper thread after the device's queued work finished, and
//! a graph that captured a launch keeps the module until the graph drops.
//!
//! [`Kernel::Delay`]: xstream_core::Kernel::Delay
//! [`Kernel::Lcg`]: xstream_core::Kernel::Lcg

use std::borrow::Cow;
use std::sync::Arc;

use xstream_core::module::{builtin_params, BUILTIN_DELAY, BUILTIN_ECHO, BUILTIN_LCG};
use xstream_core::{
    BackendKind, Capabilities, Error, FunctionImpl, FunctionName, ModuleImpl, ParamKind, Result,
};

use crate::callback::reap;
use crate::device::AscendDevice;
use crate::result;
use crate::sys::{RawBinary, RawFunction};
use crate::AscendBackend;

/// A built-in CPU kernel of the simulator's test-only binary format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimKernel {
    /// `(u64 nanoseconds)`: occupies the stream that long.
    Delay,
    /// `(pointer, u32 words, u32 rounds)`: the LCG update on `u32` words.
    Lcg,
    /// `(i32 code)`: a device fault that poisons the context with `code`.
    Fault,
    /// `(pointer, u32 words, u32 value)`: stores `value` into `u32` words.
    Fill,
    /// `(pointer a, pointer b, pointer out, u32 words)`: `out[i] = a[i] + b[i]` over `u32`
    /// words (the pointers may alias).
    Add,
    /// `(pointer out, 16-byte struct, i8, u16, i64, f32)`: writes its arguments into `out`
    /// (the record of [`xstream_core::module::BUILTIN_ECHO`]).
    Echo,
}

impl SimKernel {
    fn id_and_kinds(self) -> (u32, &'static [u8]) {
        // Kind bytes of the format: 1 pointer, 2 u32, 3 u64, 4 i32.
        match self {
            Self::Delay => (1, &[3]),
            Self::Lcg => (2, &[1, 2, 2]),
            Self::Fault => (3, &[4]),
            Self::Fill => (4, &[1, 2, 2]),
            Self::Add => (5, &[1, 1, 1, 2]),
            // 16 a 16-byte block, 5 i8, 8 u16, 9 i64, 10 f32.
            Self::Echo => (6, &[1, 16, 5, 8, 9, 10]),
        }
    }
}

/// Encodes a kernel binary in the CPU simulator's **test-only format** (documented in
/// `xstream-ascend-sim`'s README and in `docs/semantics.md`): magic `XSIMKBIN`, version 1, then
/// each kernel's name mapped to one of the simulator's built-in CPU kernels with its parameter
/// kinds. Only the simulator loads it; a real ACL runtime refuses it.
///
/// The simulator accepts 1..=64 kernels with unique names of 1..=255 bytes; anything else
/// encodes a binary it refuses (useful for tests of bad binaries).
pub fn sim_binary(kernels: &[(&str, SimKernel)]) -> Vec<u8> {
    let mut v = b"XSIMKBIN".to_vec();
    v.extend_from_slice(&1u32.to_le_bytes());
    v.extend_from_slice(
        &u32::try_from(kernels.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    for (name, k) in kernels {
        let (id, kinds) = k.id_and_kinds();
        v.extend_from_slice(&u16::try_from(name.len()).unwrap_or(u16::MAX).to_le_bytes());
        v.extend_from_slice(name.as_bytes());
        v.extend_from_slice(&id.to_le_bytes());
        v.push(kinds.len() as u8);
        v.extend_from_slice(kinds);
    }
    v
}

/// The builtin module's binary: [`BUILTIN_DELAY`], [`BUILTIN_LCG`] and [`BUILTIN_ECHO`] in
/// the simulator's test-only format (see the module docs: it runs only on the simulator).
pub fn builtin_binary() -> Vec<u8> {
    sim_binary(&[
        (BUILTIN_DELAY, SimKernel::Delay),
        (BUILTIN_LCG, SimKernel::Lcg),
        (BUILTIN_ECHO, SimKernel::Echo),
    ])
}

/// The builtin binary as loaded by a device: its handle and its two functions.
#[derive(Debug)]
pub(crate) struct LoadedBuiltin {
    pub(crate) raw: RawBinary,
    pub(crate) delay: RawFunction,
    pub(crate) lcg: RawFunction,
}

/// Loads the builtin binary for the current context (called when a device opens).
pub(crate) fn load_builtin(t: &crate::sys::AclFns) -> Result<LoadedBuiltin> {
    let raw = result::kernel::load(t, &builtin_binary()).map_err(|e| {
        Error::unsupported(
            BackendKind::Ascend,
            format!(
                "the builtin module ({BUILTIN_DELAY}, {BUILTIN_LCG}): it exists only in the test-only \
                 binary format of the CPU simulator xstream-ascend-sim, and no NPU kernel binary of it is \
                 shipped; this runtime refused it ({e})"
            ),
        )
    })?;
    let f = |name| result::kernel::get_function(t, raw, &FunctionName::new(name)?);
    match (f(BUILTIN_DELAY), f(BUILTIN_LCG)) {
        (Ok(delay), Ok(lcg)) => Ok(LoadedBuiltin { raw, delay, lcg }),
        (Err(e), _) | (_, Err(e)) => {
            let _ = result::kernel::unload(t, raw);
            Err(e)
        }
    }
}

pub(crate) struct ModuleInner {
    pub(crate) device: AscendDevice,
    raw: RawBinary,
    /// The device's builtin binary: owned (and unloaded) by the device.
    builtin: bool,
}

impl std::fmt::Debug for ModuleInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AscendModule")
            .field("raw", &self.raw)
            .field("builtin", &self.builtin)
            .finish()
    }
}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        if self.builtin {
            return;
        }
        // Queued launches may still use the binary: unload it on the reaper thread once the
        // device's work is done (never blocks the dropping thread).
        let device = self.device.clone();
        let raw = self.raw;
        reap(Box::new(move || {
            let d = &device.inner;
            if d.bind().is_ok() {
                let _ = result::device::synchronize(d.t);
                let _ = result::kernel::unload(d.t, raw);
            }
        }));
    }
}

/// A loaded ACL kernel binary (`aclrtBinHandle`).
#[derive(Debug)]
pub struct AscendModule {
    pub(crate) inner: Arc<ModuleInner>,
}

impl AscendModule {
    /// Loads `data` with `aclrtBinaryLoadFromData` for `device`.
    pub(crate) fn load(device: &AscendDevice, data: &[u8]) -> Result<Self> {
        let d = &device.inner;
        if !d.info.capabilities.contains(Capabilities::MODULES) {
            return Err(Error::unsupported(
                BackendKind::Ascend,
                format!(
                    "kernel binaries: {} does not export the kernel-binary API ({})",
                    d.t.library,
                    crate::loader::MODULES.symbols.join(", ")
                ),
            ));
        }
        if data.is_empty() {
            return Err(Error::invalid("an empty ACL kernel binary"));
        }
        d.bind()?;
        let raw = result::kernel::load(d.t, data)?;
        Ok(Self {
            inner: Arc::new(ModuleInner {
                device: device.clone(),
                raw,
                builtin: false,
            }),
        })
    }

    /// The device's builtin module (loaded when the device opened).
    pub(crate) fn builtin(device: &AscendDevice) -> Result<Self> {
        let b = device.inner.builtin()?;
        Ok(Self {
            inner: Arc::new(ModuleInner {
                device: device.clone(),
                raw: b.raw,
                builtin: true,
            }),
        })
    }

    /// The `aclrtBinHandle` (ACL-only extension). It stays valid while this module or one of
    /// its functions lives.
    pub fn as_raw(&self) -> RawBinary {
        self.inner.raw
    }
}

impl ModuleImpl for AscendModule {
    type B = AscendBackend;

    fn function_impl(&self, name: &FunctionName<'_>) -> Result<AscendFunction> {
        let d = &self.inner.device.inner;
        d.bind()?;
        let raw = result::kernel::get_function(d.t, self.inner.raw, name)?;
        let params = if self.inner.builtin {
            builtin_params(name.as_str()).map(Cow::Borrowed)
        } else {
            None
        };
        Ok(AscendFunction {
            name: Cow::Owned(name.as_str().to_owned()),
            raw,
            params,
            owner: Owner::Module(Arc::clone(&self.inner)),
        })
    }
}

/// What keeps a function's binary loaded.
#[derive(Debug, Clone)]
pub(crate) enum Owner {
    /// A module handle.
    Module(Arc<ModuleInner>),
    /// The device, for its builtin binary.
    Device(AscendDevice),
}

/// A kernel function of a loaded ACL binary (`aclrtFuncHandle`); keeps its binary loaded.
#[derive(Debug, Clone)]
pub struct AscendFunction {
    name: Cow<'static, str>,
    pub(crate) raw: RawFunction,
    params: Option<Cow<'static, [ParamKind]>>,
    pub(crate) owner: Owner,
}

impl AscendFunction {
    /// A builtin function of `device` (no allocation: `Kernel::Delay` / `Kernel::Lcg`).
    pub(crate) fn builtin(device: &AscendDevice, name: &'static str) -> Result<Self> {
        let b = device.inner.builtin()?;
        Ok(Self {
            name: Cow::Borrowed(name),
            raw: if name == BUILTIN_DELAY {
                b.delay
            } else {
                b.lcg
            },
            params: builtin_params(name).map(Cow::Borrowed),
            owner: Owner::Device(device.clone()),
        })
    }

    /// The device the function was loaded on.
    pub fn device(&self) -> &AscendDevice {
        match &self.owner {
            Owner::Module(m) => &m.device,
            Owner::Device(d) => d,
        }
    }

    /// The `aclrtFuncHandle` (ACL-only extension), valid while this function lives.
    pub fn as_raw(&self) -> RawFunction {
        self.raw
    }

    /// The same function with declared parameter kinds (ACL cannot report them): launches
    /// then check each argument's kind and size, and the launch builder's checked (safe)
    /// launch accepts it.
    ///
    /// # Safety
    /// `kinds` must be the kernel's real parameters (count, sizes, meaning): xstream cannot
    /// verify them, and safe launches rely on them.
    #[allow(unsafe_code)]
    pub unsafe fn with_params(&self, kinds: &[ParamKind]) -> AscendFunction {
        AscendFunction {
            params: Some(Cow::Owned(kinds.to_vec())),
            ..self.clone()
        }
    }
}

impl FunctionImpl for AscendFunction {
    type B = AscendBackend;

    fn name_impl(&self) -> &str {
        &self.name
    }

    fn params_impl(&self) -> Option<&[ParamKind]> {
        self.params.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_binary_layout() {
        let b = builtin_binary();
        assert_eq!(&b[..8], b"XSIMKBIN");
        assert_eq!(u32::from_le_bytes([b[8], b[9], b[10], b[11]]), 1);
        assert_eq!(u32::from_le_bytes([b[12], b[13], b[14], b[15]]), 3);
        // First entry: name length, name, built-in id 1 (delay), one u64 parameter.
        let n = usize::from(u16::from_le_bytes([b[16], b[17]]));
        assert_eq!(&b[18..18 + n], BUILTIN_DELAY.as_bytes());
        assert_eq!(&b[18 + n..18 + n + 6], &[1, 0, 0, 0, 1, 3]);
    }
}
