//! ACL-only extensions of [`AscendStream`]: the runtime's stream id, native flags, the failure mode
//! (`aclrtSetStreamFailureMode`) and `aclrtDestroyStreamForce`.

use std::sync::atomic::Ordering;

use xstream_core::{ensure_not_in_callback, Error, FailureMode, Ownership, Result};

use super::AscendStream;
use crate::result;
use crate::sys::consts;

impl AscendStream {
    /// The runtime's own stream id (`aclrtStreamGetId`, read at creation; `None` when the runtime
    /// lacks the call), the id device exceptions name. Unlike [`Stream::id`](xstream_core::Stream::id)
    /// it is unique only among live streams: the runtime hands a destroyed stream's id out again.
    /// ACL-only extension.
    pub fn native_id(&self) -> Option<i32> {
        self.native_id
    }

    /// The stream's native ACL flags (`aclrtStreamGetFlags` when present, else what xstream
    /// passed to `aclrtCreateStreamWithConfig`). ACL-only extension.
    ///
    /// # Errors
    /// Vendor errors.
    pub fn native_flags(&self) -> Result<u32> {
        ensure_not_in_callback()?;
        let d = &self.device.inner;
        match d.t.aclrtStreamGetFlags {
            Some(_) => {
                d.bind()?;
                result::stream::get_flags(d.t, self.state.raw)
            }
            None => Ok(self.native_flags),
        }
    }

    /// Sets the failure mode with `aclrtSetStreamFailureMode` (once per stream; applies to the
    /// whole context). ACL-only extension.
    ///
    /// # Errors
    /// Vendor errors.
    pub fn set_failure_mode(&self, mode: FailureMode) -> Result<()> {
        ensure_not_in_callback()?;
        let d = &self.device.inner;
        d.bind()?;
        let m = match mode {
            FailureMode::Continue => consts::ACL_CONTINUE_ON_FAILURE,
            FailureMode::Stop => consts::ACL_STOP_ON_FAILURE,
        };
        result::stream::set_failure_mode(d.t, self.state.raw, m)
    }

    /// Destroys the stream now with `aclrtDestroyStreamForce`, dropping queued work: this
    /// stream's callbacks not yet run are failed with [`Error::CallbackCancelled`]; other
    /// streams of the device are not touched. ACL-only extension.
    ///
    /// # Errors
    /// [`Error::NotOwned`] for default/borrowed streams; vendor errors.
    pub fn destroy_force(self) -> Result<()> {
        ensure_not_in_callback()?;
        if self.ownership != Ownership::Owned {
            return Err(Error::NotOwned {
                kind: self.kind_name(),
                op: "be force-destroyed",
            });
        }
        let device = self.device.clone();
        let d = &device.inner;
        d.bind()?;
        if let Some(tid) = self.state.take_subscription() {
            let _ = result::callback::unsubscribe(d.t, tid, self.state.raw);
        }
        result::stream::destroy_force(d.t, self.state.raw)?;
        // The handle is gone: keep the state from destroying it again.
        self.state.gone.store(true, Ordering::Release);
        // The runtime dropped the queued callbacks: fail them and free their data.
        crate::callback::cancel_outstanding(
            &self.state,
            &Error::CallbackCancelled("stream force-destroyed"),
        );
        Ok(())
    }
}
