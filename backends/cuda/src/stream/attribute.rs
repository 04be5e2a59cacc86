//! Stream attributes (`cuStreamGetAttribute`, `cuStreamSetAttribute`,
//! `cuStreamCopyAttributes`) and the per-stream allocator slot.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use xstream_core::{
    Allocator, Error, Ownership, Priority, Result, StreamAttr, StreamAttrValue, TranslationPolicy,
};

use cudarc::driver::sys;

use super::CudaStream;
use crate::conv;
use crate::ffi;

pub(super) fn attribute(s: &CudaStream, attr: StreamAttr) -> Result<StreamAttrValue> {
    use sys::CUstreamAttrID as Id;
    s.bind()?;
    let get = |id| {
        s.check(
            "cuStreamGetAttribute",
            ffi::stream_get_attribute(s.raw(), id),
        )
    };
    match attr {
        StreamAttr::Priority => {
            let v = get(Id::CU_LAUNCH_ATTRIBUTE_PRIORITY)?;
            Ok(StreamAttrValue::Priority(ffi::attr_priority(&v)))
        }
        StreamAttr::SyncPolicy => {
            let v = get(Id::CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY)?;
            Ok(StreamAttrValue::SyncPolicy(conv::sync_policy_from_native(
                ffi::attr_sync_policy(&v),
            )))
        }
        StreamAttr::AccessPolicyWindow => {
            let v = get(Id::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW)?;
            Ok(StreamAttrValue::AccessPolicyWindow(
                conv::access_policy_window_from_native(&ffi::attr_access_policy_window(&v)),
            ))
        }
        StreamAttr::FailureMode | StreamAttr::UserTag => Err(Error::unsupported(
            xstream_core::BackendKind::Cuda,
            format!("stream attribute {attr:?} (ACL only)"),
        )),
    }
}

pub(super) fn set_attribute(s: &CudaStream, value: StreamAttrValue) -> Result<()> {
    use sys::CUstreamAttrID as Id;
    value.validate()?;
    s.bind()?;
    match s.ownership {
        Ownership::Owned => {}
        Ownership::Borrowed => {
            return Err(Error::NotOwned {
                kind: xstream_core::NotOwnedKind::Borrowed,
                op: "set attributes",
            })
        }
        Ownership::Default => {
            return Err(Error::NotOwned {
                kind: xstream_core::NotOwnedKind::Default,
                op: "set attributes",
            })
        }
    }
    let (id, v) = match value {
        StreamAttrValue::Priority(p) => {
            // The driver clamps an out-of-range value silently (docs/semantics.md); the portable
            // rule refuses it, as host and Ascend do: set_attribute has no report in which a
            // clamp could be told, so it takes the strict side of creation's rule.
            s.handle
                .dev
                .shared
                .info
                .priority_range
                .resolve(Priority::Native(p), TranslationPolicy::Strict)?;
            (Id::CU_LAUNCH_ATTRIBUTE_PRIORITY, ffi::attr_from_priority(p))
        }
        StreamAttrValue::SyncPolicy(p) => (
            Id::CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY,
            ffi::attr_from_sync_policy(conv::map_sync_policy(p)),
        ),
        StreamAttrValue::AccessPolicyWindow(w) => (
            Id::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW,
            ffi::attr_from_access_policy_window(conv::map_access_policy_window(&w)),
        ),
        StreamAttrValue::FailureMode(_) | StreamAttrValue::UserTag(_) => {
            return Err(Error::unsupported(
                xstream_core::BackendKind::Cuda,
                format!("stream attribute {:?} (ACL only)", value.attr()),
            ))
        }
    };
    s.check(
        "cuStreamSetAttribute",
        ffi::stream_set_attribute(s.raw(), id, &v),
    )?;
    if matches!(value, StreamAttrValue::Priority(_)) {
        let p = s.check("cuStreamGetPriority", ffi::stream_get_priority(s.raw()))?;
        s.state.priority.store(p, Ordering::Relaxed);
    }
    Ok(())
}

pub(super) fn copy_attributes_from(s: &CudaStream, src: &CudaStream) -> Result<()> {
    s.bind()?;
    if s.ownership != Ownership::Owned {
        return Err(Error::NotOwned {
            kind: if s.ownership == Ownership::Borrowed {
                xstream_core::NotOwnedKind::Borrowed
            } else {
                xstream_core::NotOwnedKind::Default
            },
            op: "set attributes",
        });
    }
    s.check(
        "cuStreamCopyAttributes",
        ffi::stream_copy_attributes(s.raw(), src.raw()),
    )?;
    let p = s.check("cuStreamGetPriority", ffi::stream_get_priority(s.raw()))?;
    s.state.priority.store(p, Ordering::Relaxed);
    Ok(())
}

pub(super) fn set_allocator(s: &CudaStream, allocator: Option<Arc<dyn Allocator>>) -> Result<()> {
    if s.ownership == Ownership::Borrowed {
        return Err(Error::NotOwned {
            kind: xstream_core::NotOwnedKind::Borrowed,
            op: "register an allocator",
        });
    }
    s.state.allocator.set(allocator);
    Ok(())
}

pub(super) fn allocator(s: &CudaStream) -> Result<Option<Arc<dyn Allocator>>> {
    Ok(s.state.allocator.get())
}
