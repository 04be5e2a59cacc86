//! What users call: one checked layer over every backend.
//!
//! A backend implements the unchecked traits of [`crate::backend`]; each handle's user-facing
//! trait here is implemented for them by a blanket impl, holds every check of its operations
//! once, and then calls the backend. `stream` ([`Stream`] over
//! [`StreamImpl`](crate::StreamImpl)), `event` ([`Event`] over
//! [`EventImpl`](crate::EventImpl), [`Graph`] over [`GraphImpl`](crate::GraphImpl)),
//! `device` ([`Device`] over [`DeviceImpl`](crate::DeviceImpl)), `buffer` ([`Buffer`] over
//! [`BufferImpl`](crate::BufferImpl)), `module` ([`Module`] over
//! [`ModuleImpl`](crate::ModuleImpl), [`Function`] over [`FunctionImpl`](crate::FunctionImpl)).

pub mod buffer;
pub mod device;
pub mod event;
pub mod module;
pub mod stream;

pub use buffer::Buffer;
pub use device::Device;
pub use event::{Event, Graph};
pub use module::{Function, FunctionName, Module};
pub use stream::Stream;
