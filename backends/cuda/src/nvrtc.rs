//! Run-time compilation of CUDA C++ through NVRTC (cargo feature `nvrtc`): the source is
//! compiled to PTX by cudarc's NVRTC bindings, then loaded like any PTX module. libnvrtc is
//! opened at run time; when it is absent the call fails with [`Error::Load`] instead of
//! cudarc's panic (probed first, like the driver).

use std::sync::Arc;

use xstream_core::{Error, ModuleSource, Result};

use crate::ffi;
use crate::{CudaDevice, CudaModule};

/// Why NVRTC could not be used.
#[derive(Debug)]
struct NvrtcMissing;

impl std::fmt::Display for NvrtcMissing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "libnvrtc could not be opened (tried libnvrtc.so, libnvrtc.so.<major>, ..., libnvrtc.so.1); install \
             the CUDA toolkit's NVRTC and put its directory on LD_LIBRARY_PATH",
        )
    }
}

impl std::error::Error for NvrtcMissing {}

impl CudaDevice {
    /// Compiles CUDA C++ `source` with NVRTC (`options`: NVRTC command-line options, e.g.
    /// `--gpu-architecture=compute_90`) and loads the PTX as a module.
    ///
    /// # Errors
    /// [`Error::Load`] when libnvrtc is absent; [`Error::InvalidArgument`] with the NVRTC log
    /// when the source does not compile; the errors of
    /// [`Device::load_module`](xstream_core::Device::load_module).
    pub fn compile_module(&self, source: &str, options: &[&str]) -> Result<CudaModule> {
        if !ffi::nvrtc_present() {
            return Err(Error::Load {
                library: "libnvrtc".into(),
                source: Arc::new(NvrtcMissing),
            });
        }
        let opts = cudarc::nvrtc::CompileOptions {
            options: options.iter().map(|s| (*s).to_string()).collect(),
            ..Default::default()
        };
        let ptx = cudarc::nvrtc::compile_ptx_with_opts(source, opts).map_err(|e| match e {
            cudarc::nvrtc::CompileError::CompileError { nvrtc, log, .. } => {
                Error::invalid(format!(
                    "NVRTC compilation failed ({nvrtc:?}): {}",
                    log.to_string_lossy().trim()
                ))
            }
            other => Error::invalid(format!("NVRTC failed: {other:?}")),
        })?;
        // Through the checked layer: this CUDA-only entry point gets its callback gate there.
        xstream_core::Device::load_module(self, &ModuleSource::Ptx(&ptx.to_src()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xstream_core::Backend;

    #[test]
    fn compile_without_gpu_or_nvrtc_is_a_clear_error() {
        let Ok(dev) = crate::CudaBackend::open(0) else {
            eprintln!("SKIP: compile_without_gpu_or_nvrtc_is_a_clear_error: no CUDA device");
            return;
        };
        let r = dev.compile_module(
            "extern \"C\" __global__ void k(unsigned* p) { p[threadIdx.x] = 1; }",
            &[],
        );
        match r {
            Ok(m) => assert!(xstream_core::Module::function(&m, "k").is_ok()),
            Err(Error::Load { library, .. }) => {
                assert_eq!(library, "libnvrtc");
                assert!(!ffi::nvrtc_present());
            }
            Err(e) => panic!("{e}"),
        }
        match dev.compile_module("this is not C++", &[]) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("NVRTC"), "{m}"),
            Err(Error::Load { .. }) => {}
            other => panic!("{other:?}"),
        }
    }
}
