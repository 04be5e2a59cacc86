//! Creating an [`AscendStream`]: owned streams (`aclrtCreateStream`,
//! `aclrtCreateStreamWithConfig`, with a reaper flush at the device's stream limit), the
//! default stream and unowned views; stream ids (process-unique, never the runtime's reusable
//! id).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use xstream_core::{
    CreationReport, Error, ErrorKind, FlagReport, Ownership, Priority, PriorityOutcome, Result,
    StreamDesc, StreamFlags,
};

use super::{AscendStream, StreamState};
use crate::callback;
use crate::conv::ACL_FLAGS;
use crate::device::AscendDevice;
use crate::result;
use crate::sys::{consts, RawStream};

/// How long stream creation at the device limit waits for queued destroys to finish.
const REAP_FLUSH_LIMIT: Duration = Duration::from_secs(10);

/// xstream's stream ids: a process-wide counter, never reused.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The xstream id of each live stream by (device ordinal, runtime id), so that views of a
/// stream (the default stream, `from_raw`) get the id of the stream they show. The runtime's id
/// (`aclrtStreamGetId`) cannot serve as xstream's id itself: it is unique only among live
/// streams, and the runtime takes it from its driver, which hands a destroyed stream's id out
/// again (the runtime's device-model driver gives the lowest free id).
fn by_native() -> &'static Mutex<HashMap<(usize, i32), u64>> {
    static M: OnceLock<Mutex<HashMap<(usize, i32), u64>>> = OnceLock::new();
    M.get_or_init(Mutex::default)
}

/// The runtime's id of `raw`, when the runtime can say.
fn native_id(d: &AscendDevice, raw: RawStream) -> Option<i32> {
    let t = d.inner.t;
    match t.aclrtStreamGetId.map(|_| result::stream::get_id(t, raw)) {
        Some(Ok(id)) if id >= 0 => Some(id),
        _ => None,
    }
}

/// The ids of a stream: a fresh xstream id for a stream xstream just created (`fresh`), else
/// the id of the live stream with the same runtime id (a fresh one the first time), and the
/// runtime's id. Without a runtime id every call gives a fresh id.
fn ids(d: &AscendDevice, raw: RawStream, fresh: bool) -> (u64, Option<i32>) {
    let next = || NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let Some(n) = native_id(d, raw) else {
        return (next(), None);
    };
    let mut m = by_native().lock().unwrap_or_else(|e| e.into_inner());
    let key = (d.inner.ordinal, n);
    let id = if fresh {
        let id = next();
        m.insert(key, id);
        id
    } else {
        *m.entry(key).or_insert_with(next)
    };
    (id, Some(n))
}

/// Forgets a released stream's entry (unless a newer stream already took its runtime id).
pub(super) fn forget_id(ordinal: usize, native: i32, id: u64) {
    let mut m = by_native().lock().unwrap_or_else(|e| e.into_inner());
    if m.get(&(ordinal, native)) == Some(&id) {
        m.remove(&(ordinal, native));
    }
}

impl AscendStream {
    pub(crate) fn create(device: &AscendDevice, desc: &StreamDesc) -> Result<Self> {
        let mut tr = ACL_FLAGS.stream_to_native(desc.flags, desc.policy)?;
        if !desc.flags.contains(StreamFlags::NON_BLOCKING) {
            // Ordering changes: report it, so `is_exact()` is false.
            tr.report.hints.push((
                "blocking (NON_BLOCKING not requested)",
                "ACL streams never synchronize implicitly with the default stream: the stream \
                 is non-blocking; order it against the default stream with events",
            ));
        }
        let d = &device.inner;
        let prio = d.info.priority_range.resolve(desc.priority, desc.policy)?;
        d.bind()?;
        let create = || {
            if tr.native == 0 && prio.native == d.info.priority_range.default {
                result::stream::create(d.t)
            } else {
                let p = u32::try_from(prio.native).map_err(|_| {
                    Error::invalid(format!("ACL priority {} is negative", prio.native))
                })?;
                result::stream_config::create(d.t, p, tr.native)
            }
        };
        let raw = match create() {
            // Dropped streams wait on the reaper to be destroyed: let those destroys finish
            // before reporting that the device is out of streams.
            Err(e)
                if e.kind() == ErrorKind::ResourceExhausted
                    && callback::reap_flush(REAP_FLUSH_LIMIT) =>
            {
                d.bind()?;
                create()?
            }
            r => r?,
        };
        let persistent = tr.native & consts::ACL_STREAM_PERSISTENT != 0;
        let (id, native_id) = ids(device, raw, true);
        let mut state = StreamState::new(raw, Some(device.clone()), true, tr.native);
        state.forget_id = native_id.map(|n| (d.ordinal, n, id));
        let state = Arc::new(state);
        if persistent {
            let _ = state.capture.begin();
        }
        let priority = match d.t.aclrtStreamGetPriority {
            Some(_) => result::stream::get_priority(d.t, raw)
                .map(|p| p as i32)
                .unwrap_or(prio.native),
            None => prio.native,
        };
        tracing::debug!(stream = ?raw, name = desc.name.as_deref(), flags = ?tr.effective, priority, "acl stream created");
        Ok(Self {
            id,
            native_id,
            device: device.clone(),
            state,
            ownership: Ownership::Owned,
            name: desc.name.clone(),
            flags: tr.effective,
            native_flags: tr.native,
            priority: AtomicI32::new(priority),
            report: CreationReport {
                flags: tr.report,
                priority: prio,
            },
            persistent,
        })
    }

    pub(super) fn unowned(
        device: &AscendDevice,
        state: Arc<StreamState>,
        ownership: Ownership,
        native: u32,
        priority: i32,
    ) -> Self {
        let (flags, _) = ACL_FLAGS.stream_from_native(native);
        let (id, native_id) = ids(device, state.raw, false);
        Self {
            id,
            native_id,
            device: device.clone(),
            persistent: native & consts::ACL_STREAM_PERSISTENT != 0,
            state,
            ownership,
            name: None,
            flags,
            native_flags: native,
            priority: AtomicI32::new(priority),
            report: CreationReport {
                flags: FlagReport::default(),
                priority: PriorityOutcome {
                    requested: Priority::Native(priority),
                    native: priority,
                    clamped_from: None,
                    collapsed_into: None,
                },
            },
        }
    }

    pub(crate) fn default_of(device: &AscendDevice) -> Self {
        let state = Arc::clone(&device.inner.default_state);
        let p = device.inner.info.priority_range.greatest;
        Self::unowned(device, state, Ownership::Default, 0, p)
    }
}
