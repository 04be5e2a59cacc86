//! Exception information: `aclrtSetExceptionInfoCallback` and the `aclrtGet*FromExceptionInfo`
//! getters.
//!
//! When a simulated device fault task runs (`xsimLaunchFault`; a context poisoned by the
//! `poison:` fault rule has no faulting task and reports nothing), the registered callback is
//! called once on the stream's worker thread, before the context is poisoned (so a synchronize
//! that returns the fault's code runs after the callback) and before any later task of that
//! stream, with an `aclrtExceptionInfo*` that is valid only during the call. Its fields, read through the getters:
//!
//! | Getter | Value in the simulator |
//! | --- | --- |
//! | task id | 1-based index of the faulting task among the tasks the stream's worker started |
//! | stream id | `aclrtStreamGetId` of the stream |
//! | thread id | the id of the host thread that launched the faulting task |
//! | device id | the context's device |
//! | error code | the fault's code |
//!
//! A NULL `info` gives `0xFFFFFFFF` from every getter. Setting the callback again replaces it;
//! NULL clears it. The callback is process-wide, as in ACL.

use crate::error::*;
use crate::stream::*;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Mutex;

/// C `aclrtExceptionInfoCallback`: `void (*)(aclrtExceptionInfo*)`, nullable.
pub type AclrtExceptionInfoCallback = Option<unsafe extern "C" fn(*mut AclrtExceptionInfo)>;

/// The simulator's `aclrtExceptionInfo` (opaque to C callers: read it through the getters).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AclrtExceptionInfo {
    /// Task id (see the module docs).
    pub task_id: u32,
    /// Stream id.
    pub stream_id: u32,
    /// Launching thread id (truncated to 32 bits, as the getter returns `uint32_t`).
    pub thread_id: u32,
    /// Device id.
    pub device_id: u32,
    /// Error code.
    pub error_code: u32,
}

/// What the getters return for a NULL `info`.
const INVALID: u32 = 0xFFFF_FFFF;

static CALLBACK: Mutex<AclrtExceptionInfoCallback> = Mutex::new(None);
/// Stream id → the thread that launched its latest fault task.
static LAUNCHERS: Mutex<Option<HashMap<i32, u64>>> = Mutex::new(None);

/// Remembers that the calling thread launched a fault task on `stream_id`.
pub(crate) fn note_launcher(stream_id: i32) {
    lock(&LAUNCHERS)
        .get_or_insert_with(HashMap::new)
        .insert(stream_id, self_tid());
}

/// Called by a stream worker when a fault task ran: fills the info and calls the callback.
pub(crate) fn raise(stream: &Stream, code: i32) {
    let Some(cb) = *lock(&CALLBACK) else {
        return;
    };
    let tid = lock(&LAUNCHERS)
        .as_ref()
        .and_then(|m| m.get(&stream.id).copied())
        .unwrap_or(0);
    let mut info = AclrtExceptionInfo {
        task_id: stream.tasks_run.load(SeqCst),
        stream_id: stream.rt_id as u32,
        thread_id: tid as u32,
        device_id: stream.ctx.device as u32,
        error_code: code as u32,
    };
    // SAFETY: the user registered `cb` as an aclrtExceptionInfoCallback; `info` outlives the call.
    let _ = catch_unwind(AssertUnwindSafe(|| unsafe { cb(&mut info) }));
}

/// `aclError aclrtSetExceptionInfoCallback(aclrtExceptionInfoCallback callback)`: replaces the
/// process-wide callback; NULL clears it.
///
/// # Safety
/// `callback` must be NULL or a function safe to call from any thread.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetExceptionInfoCallback(
    callback: AclrtExceptionInfoCallback,
) -> i32 {
    ffi("aclrtSetExceptionInfoCallback", true, || {
        *lock(&CALLBACK) = callback;
        Ok(())
    })
}

/// The `uint32_t aclrtGet*FromExceptionInfo(const aclrtExceptionInfo* info)` getters: one
/// field each, `0xFFFFFFFF` for NULL.
macro_rules! getters {
    ($($name:ident => $field:ident;)*) => {$(
        #[doc = concat!("`uint32_t ", stringify!($name), "(const aclrtExceptionInfo* info)`.")]
        ///
        /// # Safety
        /// `info` must be NULL or the pointer passed to the exception callback, during the
        /// call.
        #[no_mangle]
        pub unsafe extern "C" fn $name(info: *const AclrtExceptionInfo) -> u32 {
            // SAFETY: the caller's contract.
            unsafe { info.as_ref() }.map_or(INVALID, |i| i.$field)
        }
    )*};
}

getters! {
    aclrtGetTaskIdFromExceptionInfo => task_id;
    aclrtGetStreamIdFromExceptionInfo => stream_id;
    aclrtGetThreadIdFromExceptionInfo => thread_id;
    aclrtGetDeviceIdFromExceptionInfo => device_id;
    aclrtGetErrorCodeFromExceptionInfo => error_code;
}
