//! The `Module` and `Function` traits: loaded kernel modules and their functions.

#[allow(unused_imports)]
use super::*;

/// A loaded module of kernels. Its functions keep it loaded (see [`crate::module`]).
pub trait Module: Send + Sync + fmt::Debug + 'static {
    /// The backend.
    type B: Backend<Module = Self>;

    /// The function called `name`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming it when the module has no such function; vendor
    /// errors.
    fn function(&self, name: &str) -> Result<FunctionOf<Self::B>>;
}

/// A kernel of a loaded module; cheap to clone, keeps its module loaded.
pub trait Function: Clone + Send + Sync + fmt::Debug + 'static {
    /// The backend.
    type B: Backend<Function = Self>;

    /// Its name in the module.
    fn name(&self) -> &str;

    /// Its parameters, when the backend can know them (`None` otherwise: arguments are then
    /// passed unchecked, as the vendor API does).
    fn params(&self) -> Option<&[ParamKind]>;
}
