//! Modules and kernels on Ascend: placeholder types until the ACL kernel-binary path
//! (`aclrtBinaryLoadFromData` / `aclrtBinaryGetFunction` / `aclrtLaunchKernelWithConfig`)
//! is wired; [`xstream_core::Device::load_module`] and
//! [`xstream_core::Stream::launch_kernel`] return [`Error::Unsupported`] until then.

use xstream_core::{BackendKind, Error, Function, Module, ParamKind, Result};

use crate::AscendBackend;

/// A loaded ACL kernel binary (not available yet: no value of this type is ever made).
#[derive(Debug)]
pub struct AscendModule {
    _private: (),
}

impl Module for AscendModule {
    type B = AscendBackend;

    fn function(&self, name: &str) -> Result<AscendFunction> {
        Err(Error::unsupported(
            BackendKind::Ascend,
            format!("kernel functions (`{name}`): modules are not yet supported"),
        ))
    }
}

/// A kernel function of an ACL kernel binary (not available yet).
#[derive(Debug, Clone)]
pub struct AscendFunction {
    name: String,
}

impl Function for AscendFunction {
    type B = AscendBackend;

    fn name(&self) -> &str {
        &self.name
    }

    fn params(&self) -> Option<&[ParamKind]> {
        None
    }
}
