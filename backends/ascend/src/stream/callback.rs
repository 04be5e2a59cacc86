//! Host callbacks on an [`AscendStream`]: the report style (`aclrtLaunchCallback`, lazily
//! subscribed to the device's report thread) and `aclrtLaunchHostFunc`, never mixed on one
//! stream. The report thread, the reaper and the trampolines are in `crate::callback`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use xstream_core::callback::{BoxedCallback, CallbackSlot};
use xstream_core::{ensure_not_in_callback, Error, Result};

use super::AscendStream;
use crate::callback::{self, CbData};
use crate::result;

pub(super) const STYLE_NONE: u8 = 0;

pub(super) const STYLE_REPORT: u8 = 1;

pub(super) const STYLE_HOSTFUNC: u8 = 2;

impl AscendStream {
    /// Enqueues a callback through `aclrtLaunchHostFunc` (the runtime's own thread) instead
    /// of the report thread. ACL forbids mixing both styles on one stream; xstream refuses it
    /// with [`Error::InvalidArgument`]. ACL-only extension.
    ///
    /// # Errors
    /// As [`Stream::enqueue_callback`](xstream_core::Stream::enqueue_callback); [`Error::Unsupported`] without the symbol.
    pub fn launch_host_func<F>(&self, f: F) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
    {
        ensure_not_in_callback()?;
        self.state.capture.gate("launch_host_func")?;
        self.claim_style(STYLE_HOSTFUNC)?;
        let d = &self.device.inner;
        d.bind()?;
        let slot = d.pending.slot(Box::new(f), &self.state.panics);
        let data = CbData {
            slot: Arc::clone(&slot),
            state: Arc::clone(&self.state),
            t: d.t,
            pos: self.callback_pos(),
            tracked: true,
        };
        callback::launch_host_func(d.t, self.state.raw, data)?;
        d.pending.track(&slot);
        Ok(())
    }

    /// Counts a callback's enqueue; its position for [`CbData::pos`], or 0 while capturing (a
    /// replayed callback says nothing about the work before the capture).
    fn callback_pos(&self) -> u64 {
        let pos = self.state.touch();
        if self.state.capture.is_capturing() {
            0
        } else {
            pos
        }
    }

    pub(super) fn claim_style(&self, want: u8) -> Result<()> {
        match self.state.style.compare_exchange(STYLE_NONE, want, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Ok(()),
            Err(s) if s == want => Ok(()),
            Err(_) => Err(Error::invalid(
                "ACL forbids mixing aclrtLaunchHostFunc and aclrtLaunchCallback callbacks on one stream",
            )),
        }
    }

    /// Launches an exactly-once callback (report style), subscribing the stream first.
    pub(super) fn launch_cb(&self, f: BoxedCallback) -> Result<()> {
        self.launch_report(f, true)
    }

    /// As [`Self::launch_cb`]; `track: false` keeps the callback away from xstream's failure
    /// path, so only the runtime runs it: for callbacks that free memory a queued copy may
    /// still use (failing them early was a use-after-free found by the fault sweep).
    pub(super) fn launch_report(&self, f: BoxedCallback, track: bool) -> Result<()> {
        self.claim_style(STYLE_REPORT)?;
        let d = &self.device.inner;
        {
            let mut sub = self
                .state
                .subscribed
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if sub.is_none() {
                let tid = d.reporter_tid()?;
                result::callback::subscribe(d.t, tid, self.state.raw)?;
                *sub = Some(tid);
            }
        }
        // An untracked slot never comes back to the list: a new one, leaving the list's fired
        // slots to the tracked callbacks.
        let slot = if track {
            d.pending.slot(f, &self.state.panics)
        } else {
            CallbackSlot::new(f, Arc::clone(&self.state.panics))
        };
        let data = CbData {
            slot: Arc::clone(&slot),
            state: Arc::clone(&self.state),
            t: d.t,
            pos: self.callback_pos(),
            tracked: track,
        };
        callback::launch(d.t, self.state.raw, data).map_err(|e| d.observe(e))?;
        if track {
            d.pending.track(&slot);
        }
        Ok(())
    }
}
