//! The host-callback variants that split xstream's enqueue into its parts, each on raw
//! `cuLaunchHostFunc`: a host function that takes a given time on the driver's thread, one that
//! frees a block allocated by the enqueuing thread, and the core's `CallbackSlot` fired by a
//! trampoline of the same shape as the CUDA backend's: a new slot per callback, untracked or
//! tracked in a `PendingCallbacks` list, and a slot from the list (a fired one reused, as the
//! CUDA backend takes them), tracked.

use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::sys;
use xstream_core::callback::{CallbackSlot, PanicSlot, PendingCallbacks};

/// Busy-waits the nanoseconds in `user` on the driver's callback thread.
unsafe extern "C" fn spin_host_fn(user: *mut c_void) {
    let d = Duration::from_nanos(user as u64);
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Frees the `Box<u64>` in `user` (allocated by the enqueuing thread).
unsafe extern "C" fn box_host_fn(user: *mut c_void) {
    // SAFETY: `user` is `Box::into_raw` of a `Box<u64>` from `raw_box`, consumed once.
    drop(unsafe { Box::from_raw(user as *mut u64) });
}

/// Fires and releases the `Arc<CallbackSlot>` in `user` (the CUDA backend's trampoline minus
/// its span).
unsafe extern "C" fn slot_host_fn(user: *mut c_void) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: `user` is `Arc::into_raw` of a slot from `raw_slot`, consumed once.
        let slot = unsafe { Arc::from_raw(user as *const CallbackSlot) };
        slot.fire(Ok(()));
    });
}

fn launch(s: sys::CUstream, f: unsafe extern "C" fn(*mut c_void), user: *mut c_void) {
    // SAFETY: `s` is a live stream; `f` matches `CUhostFn` and accepts `user`.
    let r = unsafe { sys::cuLaunchHostFunc(s, Some(f), user) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuLaunchHostFunc");
}

/// `cuLaunchHostFunc` of a host function spinning `ns` on the driver's thread.
pub(crate) fn raw_spin(s: sys::CUstream, ns: u64) {
    launch(s, spin_host_fn, ns as usize as *mut c_void);
}

/// `cuLaunchHostFunc` of a host function freeing a block allocated here.
pub(crate) fn raw_box(s: sys::CUstream) {
    launch(s, box_host_fn, Box::into_raw(Box::new(7u64)) as *mut c_void);
}

/// Where [`raw_slot`] gets its slot and whether it is tracked.
#[derive(Clone, Copy)]
pub(crate) enum SlotFrom<'a> {
    /// `CallbackSlot::new` (an allocation per callback), not tracked.
    New,
    /// `CallbackSlot::new`, tracked in the list.
    NewTracked(&'a PendingCallbacks),
    /// `PendingCallbacks::slot` (a fired slot of the list reused when it has one), tracked:
    /// what the CUDA backend does.
    Reused(&'a PendingCallbacks),
}

/// `cuLaunchHostFunc` of a core `CallbackSlot` holding an empty callback, made and tracked as
/// `from` says.
pub(crate) fn raw_slot(s: sys::CUstream, panics: &Arc<PanicSlot>, from: SlotFrom<'_>) {
    let slot = match from {
        SlotFrom::Reused(p) => p.slot(Box::new(|_| {}), panics),
        SlotFrom::New | SlotFrom::NewTracked(_) => {
            CallbackSlot::new(Box::new(|_| {}), Arc::clone(panics))
        }
    };
    launch(
        s,
        slot_host_fn,
        Arc::into_raw(Arc::clone(&slot)) as *mut c_void,
    );
    if let SlotFrom::NewTracked(p) | SlotFrom::Reused(p) = from {
        p.track(&slot);
    }
}
