//! The `Event` and `Graph` traits: markers in a stream, and captured work replayed.

#[allow(unused_imports)]
use super::*;

/// A synchronization marker.
pub trait Event: Send + Sync + fmt::Debug + 'static {
    /// The backend.
    type B: Backend<Event = Self>;
    /// The native handle type.
    type Raw: Copy + fmt::Debug;

    /// Its device.
    fn device(&self) -> &DeviceOf<Self::B>;
    /// Its effective flags.
    fn flags(&self) -> EventFlags;
    /// What happened to each requested flag at creation (native, hinted, emulated, or
    /// dropped under best effort), as [`Stream::report`] says for streams.
    fn report(&self) -> &FlagReport;

    /// Captures the stream's work so far; waits and queries refer to the latest record.
    ///
    /// # Errors
    /// [`Error::WrongDevice`]; capture errors.
    fn record(&self, stream: &StreamOf<Self::B>) -> Result<()>;

    /// Whether the recorded work completed ([`Status::Ready`] for a never-recorded event).
    ///
    /// # Errors
    /// Capture errors; sticky errors.
    fn query(&self) -> Result<Status>;

    /// Blocks until the recorded work completed (at once if never recorded).
    ///
    /// # Errors
    /// Work errors.
    fn synchronize(&self) -> Result<()>;

    /// As [`Event::synchronize`], giving up after `timeout`.
    ///
    /// # Errors
    /// [`Error::Timeout`]; [`Error::InvalidArgument`] for zero.
    fn synchronize_timeout(&self, timeout: Duration) -> Result<()>;

    /// Milliseconds from `self` (start) to `end`. Both must be timing-enabled, recorded and
    /// complete.
    ///
    /// # Errors
    /// [`Error::TimingDisabled`], [`Error::EventNotRecorded`], [`Error::NotReady`].
    fn elapsed_ms(&self, end: &Self) -> Result<f32>
    where
        Self: Sized;

    /// A future resolving when the recorded work completed, driven by the shared poller.
    ///
    /// # Errors
    /// Vendor errors.
    fn completed(&self) -> Result<Completion>;

    /// The native handle.
    fn as_raw(&self) -> Self::Raw;
}

/// A replayable graph of captured work.
pub trait Graph: Send + Sync + fmt::Debug + 'static {
    /// The backend.
    type B: Backend<Graph = Self>;

    /// How many operations the graph holds.
    fn node_count(&self) -> usize;

    /// Enqueues one replay of the graph on `stream`.
    ///
    /// # Errors
    /// Vendor errors; capture errors.
    fn launch(&self, stream: &StreamOf<Self::B>) -> Result<()>;
}
