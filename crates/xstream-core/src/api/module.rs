//! The `Module` and `Function` traits: what users call on loaded modules and their kernels,
//! with every check of their operations (the callback gate, the function name), implemented
//! for every backend's [`ModuleImpl`] and [`FunctionImpl`] by the blanket impls below and by
//! nothing else.

use std::ffi::{CStr, CString};

use crate::backend::{FunctionImpl, FunctionOf, ModuleImpl};
use crate::callback::ensure_not_in_callback;
use crate::module::ParamKind;
use crate::{Error, Result};

/// A loaded module of kernels. Its functions keep it loaded (see [`crate::module`]).
pub trait Module: ModuleImpl {
    /// The function called `name`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty name, a name holding a NUL byte, and, naming
    /// it, a name the module has no function of; [`Error::NotPermitted`] inside a
    /// stream-blocking host callback; vendor errors.
    fn function(&self, name: &str) -> Result<FunctionOf<Self::B>> {
        ensure_not_in_callback()?;
        self.function_impl(&FunctionName::new(name)?)
    }
}

impl<M: ModuleImpl> Module for M {}

/// A kernel of a loaded module; cheap to clone, keeps its module loaded.
pub trait Function: FunctionImpl {
    /// Its name in the module.
    fn name(&self) -> &str {
        self.name_impl()
    }

    /// Its parameters, when the backend can know them (`None` otherwise: arguments are then
    /// passed unchecked, as the vendor API does).
    fn params(&self) -> Option<&[ParamKind]> {
        self.params_impl()
    }
}

impl<F: FunctionImpl> Function for F {}

/// A kernel function's name as [`Module::function`] checked it: not empty, no NUL byte, and
/// also held NUL-terminated for the vendor's lookup call.
#[derive(Debug, Clone)]
pub struct FunctionName<'a> {
    name: &'a str,
    c: CString,
}

impl<'a> FunctionName<'a> {
    /// Checks `name`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty name or one holding a NUL byte.
    pub fn new(name: &'a str) -> Result<Self> {
        if name.is_empty() {
            return Err(Error::invalid("an empty function name"));
        }
        let c = CString::new(name).map_err(|e| {
            Error::invalid(format!(
                "function name {name:?} holds a NUL byte at {}",
                e.nul_position()
            ))
        })?;
        Ok(Self { name, c })
    }

    /// The name.
    pub fn as_str(&self) -> &'a str {
        self.name
    }

    /// The name, NUL-terminated.
    pub fn as_c_str(&self) -> &CStr {
        &self.c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        let n = FunctionName::new("xs_fill").unwrap();
        assert_eq!((n.as_str(), n.as_c_str()), ("xs_fill", c"xs_fill"));
        for bad in ["", "xs\0fill", "\0"] {
            assert!(
                matches!(FunctionName::new(bad), Err(Error::InvalidArgument(_))),
                "{bad:?} accepted"
            );
        }
    }
}
