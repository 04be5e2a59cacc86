//! What users call: one checked layer over every backend.
//!
//! A backend implements the unchecked traits of [`crate::backend`]; each handle's user-facing
//! trait here is implemented for them by a blanket impl, holds every check of its operations
//! once, and then calls the backend. `stream` ([`Stream`] over
//! [`StreamImpl`](crate::StreamImpl)), `event` ([`Event`] over
//! [`EventImpl`](crate::EventImpl), [`Graph`] over [`GraphImpl`](crate::GraphImpl)),
//! `device` ([`Device`] over [`DeviceImpl`](crate::DeviceImpl)).

pub mod device;
pub mod event;
pub mod stream;

pub use device::Device;
pub use event::{Event, Graph};
pub use stream::Stream;
