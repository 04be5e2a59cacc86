//! The handle registry: every live stream, event, context and model run instance by address,
//! the primary contexts, per-device stream / event counts, handle lookups, and the live-object
//! counters (`xsimLiveStreams`, `xsimLiveEvents`, `xsimLiveThreads`).

use crate::capture::*;
use crate::codes::*;
use crate::device::*;
use crate::error::*;
use crate::event::*;
use crate::faults::*;
use crate::stream::*;
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::ffi::c_void;
use std::panic::catch_unwind;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::OnceLock;

/// Threads the simulator runs (stream workers and per-context host-func threads).
pub(crate) static LIVE_THREADS: AtomicU64 = AtomicU64::new(0);

/// Every live handle, by address.
#[derive(Default)]
pub(crate) struct Reg {
    pub(crate) streams: HashMap<usize, Arc<Stream>>,
    pub(crate) events: HashMap<usize, Arc<Event>>,
    pub(crate) ctxs: HashMap<usize, Arc<Context>>,
    pub(crate) ris: HashMap<usize, Arc<Ri>>,
    pub(crate) primary: HashMap<i32, (Arc<Context>, u64)>,
    pub(crate) stream_count: HashMap<i32, u32>,
    pub(crate) event_count: HashMap<i32, u32>,
    /// The runtime stream ids in use (see [`Reg::alloc_stream_id`]).
    pub(crate) stream_ids: BTreeSet<i32>,
}

impl Reg {
    /// The lowest stream id not in use. The runtime takes a stream's id from the driver
    /// (`halResourceIdAlloc`), and both the runtime's own device-model driver
    /// (`src/cmodel_driver`) and its unit-test driver stub hand out the lowest free id, so a
    /// destroyed stream's id comes back. Those keep one pool per device; the simulator keeps one
    /// for all devices, so an id (in `hang:ID`, in exception info) names a single live stream.
    pub(crate) fn alloc_stream_id(&mut self) -> i32 {
        let id = (0..i32::MAX)
            .find(|i| !self.stream_ids.contains(i))
            .unwrap_or(i32::MAX);
        self.stream_ids.insert(id);
        id
    }
}

pub(crate) fn reg() -> &'static Mutex<Reg> {
    static REG: OnceLock<Mutex<Reg>> = OnceLock::new();
    REG.get_or_init(|| Mutex::new(Reg::default()))
}

/// Looks up a stream handle; NULL means the current context's default stream.
pub(crate) fn stream_of(h: *mut c_void) -> R<Arc<Stream>> {
    if h.is_null() {
        return cur_ctx()?.default_stream();
    }
    lock(reg())
        .streams
        .get(&(h as usize))
        .cloned()
        .map_or_else(|| err(ACL_ERROR_INVALID_PARAM, "unknown stream handle"), Ok)
}

pub(crate) fn event_of(h: *mut c_void) -> R<Arc<Event>> {
    if h.is_null() {
        return err(ACL_ERROR_INVALID_PARAM, "event is NULL");
    }
    lock(reg())
        .events
        .get(&(h as usize))
        .cloned()
        .map_or_else(|| err(ACL_ERROR_INVALID_PARAM, "unknown event handle"), Ok)
}

pub(crate) fn ri_of(h: *mut c_void) -> R<Arc<Ri>> {
    if h.is_null() {
        return err(ACL_ERROR_INVALID_PARAM, "modelRI is NULL");
    }
    lock(reg()).ris.get(&(h as usize)).cloned().map_or_else(
        || err(ACL_ERROR_INVALID_PARAM, "unknown modelRI handle"),
        Ok,
    )
}

/// Number of streams / events per device (for available-number queries).
pub(crate) fn counts(device: i32) -> (u32, u32) {
    let r = lock(reg());
    (
        r.stream_count.get(&device).copied().unwrap_or(0),
        r.event_count.get(&device).copied().unwrap_or(0),
    )
}

/// Live (explicit, non-default) streams and live events.
pub(crate) fn live_counts() -> (u64, u64) {
    let r = lock(reg());
    (
        r.streams.values().filter(|s| !s.is_default).count() as u64,
        r.events.len() as u64,
    )
}

/// `uint64_t xsimLiveStreams(void)`: live explicit streams (default streams excluded).
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn xsimLiveStreams() -> u64 {
    count_call("xsimLiveStreams");
    catch_unwind(|| live_counts().0).unwrap_or(u64::MAX)
}

/// `uint64_t xsimLiveEvents(void)`: live events.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn xsimLiveEvents() -> u64 {
    count_call("xsimLiveEvents");
    catch_unwind(|| live_counts().1).unwrap_or(u64::MAX)
}

/// `uint64_t xsimLiveThreads(void)`: threads the simulator runs right now (stream workers,
/// which exit when their stream is idle, and per-context host-func threads).
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn xsimLiveThreads() -> u64 {
    count_call("xsimLiveThreads");
    LIVE_THREADS.load(SeqCst)
}
