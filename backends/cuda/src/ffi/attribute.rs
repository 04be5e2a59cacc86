//! Stream attribute values: reading and writing members of the `CUstreamAttrValue` C union.

use std::ffi::c_void;
use std::mem::MaybeUninit;

use cudarc::driver::sys;

/// Reads the `priority` member of an attribute value written for `CU_LAUNCH_ATTRIBUTE_PRIORITY`.
pub(crate) fn attr_priority(v: &sys::CUstreamAttrValue) -> i32 {
    // SAFETY: plain-data union, zero-initialised before the driver wrote it; any bit pattern
    // is a valid `c_int`.
    unsafe { v.priority }
}

/// Reads the `syncPolicy` member (written for `CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY`).
pub(crate) fn attr_sync_policy(v: &sys::CUstreamAttrValue) -> sys::CUsynchronizationPolicy {
    // SAFETY: read as a raw `u32` first so an unexpected value cannot produce an invalid enum.
    let raw: u32 = unsafe { v.priority } as u32;
    match raw {
        2 => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_SPIN,
        3 => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_YIELD,
        4 => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_BLOCKING_SYNC,
        _ => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_AUTO,
    }
}

/// Reads the `accessPolicyWindow` member (for `CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW`).
pub(crate) fn attr_access_policy_window(v: &sys::CUstreamAttrValue) -> sys::CUaccessPolicyWindow {
    // SAFETY: the window's enum fields are read as raw integers below, so no invalid enum
    // value is ever materialised; the pointer and numbers are plain data.
    let w: &RawWindow = unsafe { &*(v as *const sys::CUstreamAttrValue as *const RawWindow) };
    let prop = |p: u32| match p {
        1 => sys::CUaccessProperty::CU_ACCESS_PROPERTY_STREAMING,
        2 => sys::CUaccessProperty::CU_ACCESS_PROPERTY_PERSISTING,
        _ => sys::CUaccessProperty::CU_ACCESS_PROPERTY_NORMAL,
    };
    sys::CUaccessPolicyWindow {
        base_ptr: w.base_ptr,
        num_bytes: w.num_bytes,
        hitRatio: w.hit_ratio,
        hitProp: prop(w.hit_prop),
        missProp: prop(w.miss_prop),
    }
}

/// `CUaccessPolicyWindow` with its enums as raw integers (same layout: `repr(C)`, `u32` enums).
#[repr(C)]
struct RawWindow {
    base_ptr: *mut c_void,
    num_bytes: usize,
    hit_ratio: f32,
    hit_prop: u32,
    miss_prop: u32,
}

const _: () =
    assert!(std::mem::size_of::<RawWindow>() == std::mem::size_of::<sys::CUaccessPolicyWindow>());
const _: () =
    assert!(std::mem::size_of::<RawWindow>() <= std::mem::size_of::<sys::CUstreamAttrValue>());

fn zeroed_attr() -> sys::CUstreamAttrValue {
    // SAFETY: the union is plain C data (integers, floats, pointers, u32 enums whose 0 ... is
    // not read back as an enum by this crate); all-zero bytes are a valid `pad` member.
    unsafe { MaybeUninit::<sys::CUstreamAttrValue>::zeroed().assume_init() }
}

/// An attribute value holding a priority.
pub(crate) fn attr_from_priority(p: i32) -> sys::CUstreamAttrValue {
    let mut v = zeroed_attr();
    v.priority = p;
    v
}

/// An attribute value holding a sync policy.
pub(crate) fn attr_from_sync_policy(p: sys::CUsynchronizationPolicy) -> sys::CUstreamAttrValue {
    let mut v = zeroed_attr();
    v.syncPolicy = p;
    v
}

/// An attribute value holding an access-policy window.
pub(crate) fn attr_from_access_policy_window(
    w: sys::CUaccessPolicyWindow,
) -> sys::CUstreamAttrValue {
    let mut v = zeroed_attr();
    v.accessPolicyWindow = w;
    v
}
