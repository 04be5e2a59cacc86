//! The synchronization primitives of the callback slot and the completion future: `std`'s, or
//! loom's when built with `--cfg loom` so `tests/loom.rs` can model-check those protocols.

#[cfg(loom)]
pub(crate) use loom::sync::{atomic::AtomicBool, Arc, Mutex};
#[cfg(not(loom))]
pub(crate) use std::sync::{atomic::AtomicBool, Arc, Mutex};
