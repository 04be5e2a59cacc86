//! Shared by the host backend's tests: a gate that holds a stream, so tests observe ordering
//! and completion instead of wall-clock time.
#![allow(dead_code)]

use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use xstream_core::{Device, Stream, StreamDesc, StreamFlags};
use xstream_host::{HostDevice, HostStream};

/// How long a gate holds its stream at most: a guard against hangs, never a timing bound (a
/// test fails when the gate gave up instead of being opened).
pub const GATE_LIMIT: Duration = Duration::from_secs(10);

/// A host callback that holds its stream until [`Gate::open`]: the work queued behind it stays
/// pending whatever the load of the machine.
pub struct Gate {
    tx: mpsc::Sender<()>,
    released: Arc<Mutex<Option<bool>>>,
}

impl Gate {
    /// Enqueues the holding callback on `s`.
    pub fn hold(s: &impl Stream) -> Gate {
        let (tx, rx) = mpsc::channel::<()>();
        let released = Arc::new(Mutex::new(None));
        let r2 = released.clone();
        s.host_callback(move |_| {
            let opened = rx.recv_timeout(GATE_LIMIT).is_ok();
            *r2.lock().unwrap() = Some(opened);
        })
        .expect("enqueue the gate callback");
        Gate { tx, released }
    }

    /// Lets the stream go on.
    pub fn open(&self) {
        let _ = self.tx.send(());
    }

    /// Whether the gate ran and was opened by [`Gate::open`] (not given up); call after the
    /// stream synchronized.
    pub fn released(&self) -> bool {
        *self.released.lock().unwrap() == Some(true)
    }
}

/// A device of its own (an isolated context), so tests do not share streams or faults.
pub fn dev() -> HostDevice {
    HostDevice::new_isolated(0)
}

/// A non-blocking stream on `d`.
pub fn nb(d: &HostDevice) -> HostStream {
    d.create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING))
        .unwrap()
}
