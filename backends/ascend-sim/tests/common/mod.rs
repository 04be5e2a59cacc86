//! Helpers shared by the simulator's ABI tests (`tests/*.rs`, one file per ACL area), which call
//! the exported functions through the rlib.
//!
//! The tests of one file run in parallel threads of one process. Tests that change
//! process-global state (init ref count, limits, product, fault rules) take the exclusive side of
//! `GLOBAL`; the others take the shared side.
#![allow(dead_code)] // each test file uses a subset

use ascendcl::codes::*;
use ascendcl::*;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

pub static GLOBAL: RwLock<()> = RwLock::new(());

pub fn shared() -> RwLockReadGuard<'static, ()> {
    let g = GLOBAL.read().unwrap_or_else(|e| e.into_inner());
    setup();
    g
}

pub fn exclusive() -> RwLockWriteGuard<'static, ()> {
    let g = GLOBAL.write().unwrap_or_else(|e| e.into_inner());
    setup();
    g
}

pub fn setup() {
    // SAFETY: plain calls without pointers into the simulator.
    unsafe {
        let r = aclInit(std::ptr::null());
        assert!(r == 0 || r == ACL_ERROR_REPEAT_INITIALIZE, "aclInit {r}");
        assert_eq!(aclrtSetDevice(0), 0);
    }
}

pub fn teardown() {
    // SAFETY: no pointers.
    unsafe { assert_eq!(aclrtResetDevice(0), 0) };
}

pub fn stream() -> *mut c_void {
    let mut s = null_mut();
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { aclrtCreateStream(&mut s) }, 0);
    s
}

pub fn destroy(s: *mut c_void) {
    // SAFETY: handle from aclrtCreateStream.
    assert_eq!(unsafe { aclrtDestroyStream(s) }, 0);
}

pub fn event(flags: Option<u32>) -> *mut c_void {
    let mut e = null_mut();
    // SAFETY: valid out-pointer.
    let r = unsafe {
        match flags {
            None => aclrtCreateEvent(&mut e),
            Some(f) => aclrtCreateEventExWithFlag(&mut e, f),
        }
    };
    assert_eq!(r, 0);
    e
}

pub fn lcg(mut x: u32, rounds: u32) -> u32 {
    for _ in 0..rounds {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
    }
    x
}

pub fn tid() -> u64 {
    // SAFETY: no preconditions.
    unsafe { libc::pthread_self() as u64 }
}

pub static HITS: AtomicUsize = AtomicUsize::new(0);

pub unsafe extern "C" fn count_cb(data: *mut c_void) {
    // SAFETY: tests pass a pointer to an AtomicUsize.
    let c = unsafe { &*(data as *const AtomicUsize) };
    c.fetch_add(1, Ordering::SeqCst);
    HITS.fetch_add(1, Ordering::SeqCst);
}

/// One kernel entry of a simulator kernel binary: name, built-in id, parameter kinds.
pub type BinEntry<'a> = (&'a str, u32, &'a [u8]);

/// Encodes a simulator kernel binary (the format of `ascendcl::binary`).
pub fn xsim_binary(entries: &[BinEntry<'_>]) -> Vec<u8> {
    let mut v = ascendcl::binary::XSIM_BINARY_MAGIC.to_vec();
    v.extend_from_slice(&ascendcl::binary::XSIM_BINARY_VERSION.to_le_bytes());
    v.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for (name, id, kinds) in entries {
        v.extend_from_slice(&(name.len() as u16).to_le_bytes());
        v.extend_from_slice(name.as_bytes());
        v.extend_from_slice(&id.to_le_bytes());
        v.push(kinds.len() as u8);
        v.extend_from_slice(kinds);
    }
    v
}
