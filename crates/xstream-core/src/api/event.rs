//! The `Event` and `Graph` traits: what users call on events and graphs, with every check of
//! their operations (the callback gate, the timeout rule), implemented for every backend's
//! [`EventImpl`] and [`GraphImpl`] by the blanket impls below and by nothing else.

use std::time::Duration;

use crate::backend::{check_timeout, DeviceOf, EventImpl, GraphImpl, Status, StreamOf};
use crate::callback::ensure_not_in_callback;
use crate::completion::Completion;
#[allow(unused_imports)]
use crate::{Error, Stream};
use crate::{EventFlags, FlagReport, Result};

/// A synchronization marker.
pub trait Event: EventImpl {
    /// Its device.
    fn device(&self) -> &DeviceOf<Self::B> {
        self.device_impl()
    }
    /// Its effective flags.
    fn flags(&self) -> EventFlags {
        self.flags_impl()
    }
    /// What happened to each requested flag at creation (native, hinted, emulated, or
    /// dropped under best effort), as [`Stream::report`] says for streams.
    fn report(&self) -> &FlagReport {
        self.report_impl()
    }

    /// Captures the stream's work so far; waits and queries refer to the latest record.
    ///
    /// # Errors
    /// [`Error::WrongDevice`]; capture errors.
    fn record(&self, stream: &StreamOf<Self::B>) -> Result<()> {
        ensure_not_in_callback()?;
        self.record_impl(stream)
    }

    /// Whether the recorded work completed ([`Status::Ready`] for a never-recorded event).
    ///
    /// # Errors
    /// Capture errors; sticky errors.
    fn query(&self) -> Result<Status> {
        ensure_not_in_callback()?;
        self.query_impl()
    }

    /// Blocks until the recorded work completed (at once if never recorded).
    ///
    /// # Errors
    /// Work errors.
    fn synchronize(&self) -> Result<()> {
        ensure_not_in_callback()?;
        self.synchronize_impl(None)
    }

    /// As [`Event::synchronize`], giving up after `timeout`.
    ///
    /// # Errors
    /// [`Error::Timeout`]; [`Error::InvalidArgument`] for zero.
    fn synchronize_timeout(&self, timeout: Duration) -> Result<()> {
        ensure_not_in_callback()?;
        check_timeout(timeout)?;
        self.synchronize_impl(Some(timeout))
    }

    /// Milliseconds from `self` (start) to `end`. Both must be timing-enabled, recorded and
    /// complete.
    ///
    /// # Errors
    /// [`Error::TimingDisabled`], [`Error::EventNotRecorded`], [`Error::NotReady`].
    fn elapsed_ms(&self, end: &Self) -> Result<f32> {
        ensure_not_in_callback()?;
        self.elapsed_ms_impl(end)
    }

    /// A future resolving when the recorded work completed, driven by the shared poller.
    ///
    /// # Errors
    /// Vendor errors.
    fn completed(&self) -> Result<Completion> {
        ensure_not_in_callback()?;
        self.completed_impl()
    }

    /// The native handle.
    fn as_raw(&self) -> Self::Raw {
        self.as_raw_impl()
    }
}

impl<E: EventImpl> Event for E {}

/// A replayable graph of captured work.
pub trait Graph: GraphImpl {
    /// How many operations the graph holds.
    fn node_count(&self) -> usize {
        self.node_count_impl()
    }

    /// Enqueues one replay of the graph on `stream`.
    ///
    /// # Errors
    /// Vendor errors; capture errors.
    fn replay(&self, stream: &StreamOf<Self::B>) -> Result<()> {
        ensure_not_in_callback()?;
        self.replay_impl(stream)
    }

    /// The former name of [`Graph::replay`].
    ///
    /// # Errors
    /// As [`Graph::replay`].
    #[deprecated(since = "0.2.0", note = "renamed `replay`")]
    fn launch(&self, stream: &StreamOf<Self::B>) -> Result<()> {
        self.replay(stream)
    }
}

impl<G: GraphImpl> Graph for G {}
