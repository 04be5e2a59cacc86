//! The `ModuleImpl` and `FunctionImpl` traits: what a backend implements for its loaded
//! modules of kernels and their functions.

#[allow(unused_imports)]
use super::*;

/// The backend's loaded module. Its one method is required and checks nothing: users call
/// [`Module`] (`crate::api::module`), implemented for every `ModuleImpl` by core, which has
/// refused calls from inside a stream-blocking host callback and checked the name.
pub trait ModuleImpl: Send + Sync + fmt::Debug + 'static {
    /// The backend.
    type B: Backend<Module = Self>;

    /// [`Module::function`]: `name` is not empty and holds no NUL byte.
    fn function_impl(&self, name: &FunctionName<'_>) -> Result<FunctionOf<Self::B>>;
}

/// The backend's kernel function; cheap to clone, keeps its module loaded. As
/// [`ModuleImpl`], the checked layer is [`Function`].
pub trait FunctionImpl: Clone + Send + Sync + fmt::Debug + 'static {
    /// The backend.
    type B: Backend<Function = Self>;

    /// [`Function::name`].
    fn name_impl(&self) -> &str;

    /// [`Function::params`].
    fn params_impl(&self) -> Option<&[ParamKind]>;
}
