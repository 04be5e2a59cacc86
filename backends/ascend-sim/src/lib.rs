//! # xstream-ascend-sim: a CPU **simulator / test double** of Huawei's `libascendcl.so`
//!
//! This crate is **not** an NPU driver and does not talk to Ascend hardware. It builds a
//! `libascendcl.so` (cdylib, `[lib] name = "ascendcl"`) that implements, on the CPU, the subset of
//! the ACL runtime C ABI that the xstream Ascend backend uses: init, devices and contexts,
//! streams, events, report-style and host-func callbacks, host-func subscriptions, the
//! per-stream allocator registry, synchronous and async memory copies, value wait / write,
//! stream configuration handles, exception info, capture / model run instances (`aclmdlRI*`),
//! the runtime version and error reporting. Each newer vendor area lives in a module named after
//! it (`hostfunc`, `exception`, `value`, `stream_config`, `memory`). The
//! semantics follow the project facts sheet (`shared/reference/ascend-acl-runtime.md`,
//! section 6); every choice made where the sheet is UNCONFIRMED is listed in the crate's
//! `README.md`.
//!
//! Model of the simulated device:
//! * "Device memory" is plain host memory; `aclrtMalloc` returns host pointers.
//! * Each stream runs its tasks in order on a worker thread that is spawned when work is queued
//!   and exits once the stream is idle (so thousands of streams can exist).
//! * Simulated kernels (`xsimLaunchDelay`, `xsimLaunchLcg`, `xsimLaunchFault`) and fault
//!   injection (`XSIM_FAULTS`, `xsimSetFaults`) are simulator-only extensions, **not part of
//!   ACL**.
//!
//! Every exported function catches panics and returns 507000 (`ACL_ERROR_RT_INTERNAL_ERROR`)
//! instead of unwinding across the FFI boundary. The exported functions are also callable from
//! Rust through this rlib (they are `unsafe` because they take raw C pointers).

mod capture;
pub mod codes;
mod device;
pub mod exception;
mod faults;
mod host_mem;
pub mod hostfunc;
pub mod memory;
mod stream;
pub mod stream_config;
mod task;
pub mod value;

pub use capture::*;
pub use device::*;
pub use exception::*;
pub use faults::*;
pub use hostfunc::*;
pub use memory::*;
pub use stream_config::*;
pub use value::*;

use std::ffi::c_void;

/// C `aclrtCallback` / `aclrtHostFunc`: `void (*)(void*)`, nullable.
pub type AclrtCallback = Option<unsafe extern "C" fn(*mut c_void)>;
/// C `aclrtAllocatorAllocFunc`: `void* (*)(aclrtAllocator, size_t)`, nullable.
pub type AclrtAllocatorAllocFunc = Option<unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void>;
/// C `aclrtAllocatorFreeFunc`: `void (*)(aclrtAllocator, aclrtAllocatorBlock)`, nullable.
pub type AclrtAllocatorFreeFunc = Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>;
/// C `aclrtAllocatorAllocAdviseFunc`: `void* (*)(aclrtAllocator, size_t, aclrtAllocatorAddr)`.
pub type AclrtAllocatorAllocAdviseFunc =
    Option<unsafe extern "C" fn(*mut c_void, usize, *mut c_void) -> *mut c_void>;
/// C `aclrtAllocatorGetAddrFromBlockFunc`: `void* (*)(aclrtAllocatorBlock)`, nullable.
pub type AclrtAllocatorGetAddrFromBlockFunc =
    Option<unsafe extern "C" fn(*mut c_void) -> *mut c_void>;

/// C `aclrtStreamAttrValue` (16 bytes, align 8).
#[repr(C)]
#[derive(Clone, Copy)]
pub union AclrtStreamAttrValue {
    /// `failureMode` (attribute 1).
    pub failure_mode: u64,
    /// `overflowSwitch` (attribute 2).
    pub overflow_switch: u32,
    /// `userCustomTag` (attribute 3).
    pub user_custom_tag: u32,
    /// `cacheOpInfoSwitch` (attribute 4).
    pub cache_op_info_switch: u32,
    /// `streamPriority` (attribute 5).
    pub stream_priority: u32,
    /// `reserve[4]`.
    pub reserve: [u32; 4],
}

const _: () = assert!(std::mem::size_of::<AclrtStreamAttrValue>() == 16);
const _: () = assert!(std::mem::align_of::<AclrtStreamAttrValue>() == 8);
