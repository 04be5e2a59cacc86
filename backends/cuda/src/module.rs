//! Modules and kernels on CUDA (`cuModuleLoadData`, `cuModuleGetFunction`,
//! `cuFuncGetParamInfo`, `cuLaunchKernel`).

use xstream_core::{BackendKind, Error, Function, Module, ParamKind, Result};

use crate::CudaBackend;

/// A loaded CUDA module (PTX, cubin or fatbin).
#[derive(Debug)]
pub struct CudaModule {
    _private: (),
}

impl Module for CudaModule {
    type B = CudaBackend;

    fn function(&self, name: &str) -> Result<CudaFunction> {
        Err(Error::unsupported(
            BackendKind::Cuda,
            format!("kernel functions (`{name}`): not yet"),
        ))
    }
}

/// A kernel of a loaded CUDA module; keeps its module loaded.
#[derive(Debug, Clone)]
pub struct CudaFunction {
    name: String,
}

impl Function for CudaFunction {
    type B = CudaBackend;

    fn name(&self) -> &str {
        &self.name
    }

    fn params(&self) -> Option<&[ParamKind]> {
        None
    }
}
