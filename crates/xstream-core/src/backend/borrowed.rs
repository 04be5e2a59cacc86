//! A stream or event over a native handle somebody else owns.

use std::marker::PhantomData;

/// A value borrowed for `'a`: a stream or event wrapping a native handle that somebody else
/// owns. Dereferences to the value; dropping it never destroys the handle.
#[derive(Debug)]
pub struct Borrowed<'a, T> {
    inner: T,
    _owner: PhantomData<&'a ()>,
}

impl<T> Borrowed<'_, T> {
    /// Wraps a value built over a borrowed handle.
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            _owner: PhantomData,
        }
    }
}

impl<T> std::ops::Deref for Borrowed<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}
