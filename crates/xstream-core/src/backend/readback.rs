//! The result slot of an asynchronous device-to-host copy.

use crate::sync::lock;
use std::sync::{Arc, Mutex};

use crate::{Error, Result};

/// The result of an asynchronous device-to-host copy.
#[derive(Debug, Clone)]
pub struct Readback {
    slot: Arc<Mutex<Option<Result<Vec<u8>>>>>,
}

/// Fills a [`Readback`] (backend side).
#[derive(Debug)]
pub struct ReadbackFill {
    slot: Arc<Mutex<Option<Result<Vec<u8>>>>>,
}

impl Readback {
    /// A connected pair.
    pub fn new() -> (Readback, ReadbackFill) {
        let slot = Arc::new(Mutex::new(None));
        (
            Readback {
                slot: Arc::clone(&slot),
            },
            ReadbackFill { slot },
        )
    }

    /// Takes the bytes once the copy completed (after synchronizing the stream).
    ///
    /// # Errors
    /// [`Error::NotReady`] before completion; the copy's error if it failed.
    pub fn take(&self) -> Result<Vec<u8>> {
        lock(&self.slot).take().unwrap_or(Err(Error::NotReady))
    }
}

impl ReadbackFill {
    /// Delivers the result.
    pub fn fill(self, r: Result<Vec<u8>>) {
        *lock(&self.slot) = Some(r);
    }
}
