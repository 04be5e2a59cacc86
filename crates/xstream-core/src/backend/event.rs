//! The `EventImpl` and `GraphImpl` traits: what a backend implements for its events
//! (markers in a stream) and graphs (captured work replayed).

#[allow(unused_imports)]
use super::*;

/// The backend's event. Every method is required and does no checks of its own: users call
/// [`Event`] (`crate::api::event`), implemented for every `EventImpl` by core, which has
/// refused calls from inside a stream-blocking host callback and zero timeouts before it calls
/// a method here. `x_impl` is the backend's side of `Event::x`, whose docs say what it does.
pub trait EventImpl: Sized + Send + Sync + fmt::Debug + 'static {
    /// The backend.
    type B: Backend<Event = Self>;
    /// The native handle type.
    type Raw: Copy + fmt::Debug;

    /// [`Event::device`].
    fn device_impl(&self) -> &DeviceOf<Self::B>;
    /// [`Event::flags`].
    fn flags_impl(&self) -> EventFlags;
    /// [`Event::report`].
    fn report_impl(&self) -> &FlagReport;
    /// [`Event::as_raw`].
    fn as_raw_impl(&self) -> Self::Raw;

    /// [`Event::record`]: the backend checks that the stream may record this event.
    fn record_impl(&self, stream: &StreamOf<Self::B>) -> Result<()>;

    /// [`Event::query`].
    fn query_impl(&self) -> Result<Status>;

    /// [`Event::synchronize`] (`timeout: None`) and [`Event::synchronize_timeout`] (a non-zero
    /// timeout).
    fn synchronize_impl(&self, timeout: Option<Duration>) -> Result<()>;

    /// [`Event::elapsed_ms`].
    fn elapsed_ms_impl(&self, end: &Self) -> Result<f32>;

    /// [`Event::completed`].
    fn completed_impl(&self) -> Result<Completion>;
}

/// The backend's replayable graph; as [`EventImpl`], the checked layer is [`Graph`].
pub trait GraphImpl: Sized + Send + Sync + fmt::Debug + 'static {
    /// The backend.
    type B: Backend<Graph = Self>;

    /// [`Graph::node_count`].
    fn node_count_impl(&self) -> usize;

    /// [`Graph::replay`]: the backend checks that the stream may replay this graph.
    fn replay_impl(&self, stream: &StreamOf<Self::B>) -> Result<()>;
}
