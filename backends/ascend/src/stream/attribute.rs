//! Stream attributes (`aclrtGetStreamAttribute` / `aclrtSetStreamAttribute`: failure mode,
//! user tag, priority) and the per-stream allocator (`aclrtAllocatorRegister`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use xstream_core::sync::lock;

use xstream_core::{
    Allocator, BackendKind, Error, FailureMode, Ownership, Result, Stream, StreamAttr,
    StreamAttrValue,
};

use super::AscendStream;
use crate::callback;
use crate::result;
use crate::sys::{aclrtStreamAttrValue, consts};

impl AscendStream {
    /// Sets the priority with `aclrtSetStreamAttribute(ACL_STREAM_ATTR_PRIORITY)` (CANN 9.1 and
    /// later): refused as [`Error::Unsupported`] without the symbol or when the runtime does
    /// not know the attribute; out of the device range is [`Error::InvalidArgument`].
    pub(super) fn set_priority(&self, p: i32) -> Result<()> {
        let d = &self.device.inner;
        let range = d.info.priority_range;
        if !range.contains(p) {
            return Err(Error::invalid(format!(
                "native priority {p} is outside the device range [least {}, greatest {}]",
                range.least, range.greatest
            )));
        }
        if p == self.priority() {
            return Ok(());
        }
        let unsupported = || {
            Error::unsupported(
                BackendKind::Ascend,
                "changing a stream's priority after creation (needs aclrtSetStreamAttribute with ACL_STREAM_ATTR_PRIORITY, CANN 9.1 or later)",
            )
        };
        // A runtime package known to predate 9.1.0 lacks the attribute: refuse without trying.
        let too_old = d.t.package.as_ref().is_some_and(|p| p.older_than(9, 1, 0));
        if d.t.aclrtSetStreamAttribute.is_none() || self.state.raw.0.is_null() || too_old {
            return Err(unsupported());
        }
        let v = aclrtStreamAttrValue {
            streamPriority: p as u32,
        };
        match result::stream::set_attribute(
            d.t,
            self.state.raw,
            consts::ACL_STREAM_ATTR_PRIORITY,
            v,
        ) {
            Ok(()) => {}
            // A runtime older than the attribute refuses the unknown attribute value.
            Err(e)
                if e.is_unsupported()
                    || matches!(e.native().map(|n| n.code), Some(100_000 | 107_000)) =>
            {
                return Err(unsupported())
            }
            Err(e) => return Err(e),
        }
        let now = match d.t.aclrtStreamGetPriority {
            Some(_) => result::stream::get_priority(d.t, self.state.raw)? as i32,
            None => p,
        };
        self.priority.store(now, Ordering::Relaxed);
        Ok(())
    }
}

pub(super) fn attribute(s: &AscendStream, attr: StreamAttr) -> Result<StreamAttrValue> {
    let d = &s.device.inner;
    match attr {
        StreamAttr::Priority => {
            if d.t.aclrtStreamGetPriority.is_some() && !s.state.raw.0.is_null() {
                d.bind()?;
                let p = result::stream::get_priority(d.t, s.state.raw)? as i32;
                s.priority.store(p, Ordering::Relaxed);
            }
            Ok(StreamAttrValue::Priority(s.priority()))
        }
        StreamAttr::FailureMode => {
            d.bind()?;
            let v = result::stream::get_attribute(
                d.t,
                s.state.raw,
                consts::ACL_STREAM_ATTR_FAILURE_MODE,
            )?;
            let m = attr_u64(v);
            Ok(StreamAttrValue::FailureMode(
                if m == consts::ACL_STOP_ON_FAILURE {
                    FailureMode::Stop
                } else {
                    FailureMode::Continue
                },
            ))
        }
        StreamAttr::UserTag => {
            d.bind()?;
            let v = result::stream::get_attribute(
                d.t,
                s.state.raw,
                consts::ACL_STREAM_ATTR_USER_CUSTOM_TAG,
            )?;
            Ok(StreamAttrValue::UserTag(attr_u32(v)))
        }
        StreamAttr::SyncPolicy | StreamAttr::AccessPolicyWindow => Err(Error::unsupported(
            BackendKind::Ascend,
            format!("stream attribute {attr:?} (CUDA-only)"),
        )),
    }
}

pub(super) fn set_attribute(s: &AscendStream, value: StreamAttrValue) -> Result<()> {
    value.validate()?;
    if s.ownership == Ownership::Borrowed {
        return Err(Error::NotOwned {
            kind: xstream_core::NotOwnedKind::Borrowed,
            op: "set attributes",
        });
    }
    let d = &s.device.inner;
    d.bind()?;
    match value {
        StreamAttrValue::FailureMode(m) => {
            let mode = match m {
                FailureMode::Continue => consts::ACL_CONTINUE_ON_FAILURE,
                FailureMode::Stop => consts::ACL_STOP_ON_FAILURE,
            };
            if d.t.aclrtSetStreamAttribute.is_some() {
                result::stream::set_attribute(
                    d.t,
                    s.state.raw,
                    consts::ACL_STREAM_ATTR_FAILURE_MODE,
                    aclrtStreamAttrValue { failureMode: mode },
                )
            } else {
                result::stream::set_failure_mode(d.t, s.state.raw, mode)
            }
        }
        StreamAttrValue::UserTag(tag) => result::stream::set_attribute(
            d.t,
            s.state.raw,
            consts::ACL_STREAM_ATTR_USER_CUSTOM_TAG,
            u32_attr(tag),
        ),
        StreamAttrValue::Priority(p) => s.set_priority(p),
        StreamAttrValue::SyncPolicy(_) | StreamAttrValue::AccessPolicyWindow(_) => {
            Err(Error::unsupported(
                BackendKind::Ascend,
                format!("stream attribute {:?} (CUDA-only)", value.attr()),
            ))
        }
    }
}

pub(super) fn copy_attributes_from(s: &AscendStream, src: &AscendStream) -> Result<()> {
    for a in [StreamAttr::FailureMode, StreamAttr::UserTag] {
        match src.attribute(a) {
            Ok(StreamAttrValue::FailureMode(FailureMode::Continue)) => {}
            Ok(v) => s.set_attribute(v)?,
            Err(e) if e.is_unsupported() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub(super) fn set_allocator(s: &AscendStream, allocator: Option<Arc<dyn Allocator>>) -> Result<()> {
    if s.ownership != Ownership::Owned {
        return Err(Error::NotOwned {
            kind: s.kind_name(),
            op: "register an allocator",
        });
    }
    let d = &s.device.inner;
    d.bind()?;
    let mut g = lock(&s.state.alloc);
    match allocator {
        Some(a) => {
            let obj = callback::alloc_obj_into_raw(Arc::clone(&a));
            if let Err(e) =
                result::allocator::register(d.t, s.state.raw, obj, &callback::alloc_funcs())
            {
                callback::alloc_obj_free(obj as usize);
                return Err(e);
            }
            if let Some((old, _)) = g.replace((obj as usize, a)) {
                callback::alloc_obj_free(old);
            }
        }
        None => {
            result::allocator::unregister(d.t, s.state.raw)?;
            if let Some((old, _)) = g.take() {
                callback::alloc_obj_free(old);
            }
        }
    }
    Ok(())
}

pub(super) fn allocator(s: &AscendStream) -> Result<Option<Arc<dyn Allocator>>> {
    let d = &s.device.inner;
    let g = lock(&s.state.alloc);
    if s.state.raw.0.is_null() || d.t.aclrtAllocatorGetByStream.is_none() {
        return Ok(g.as_ref().map(|(_, a)| Arc::clone(a)));
    }
    d.bind()?;
    let obj = match result::allocator::get_by_stream(d.t, s.state.raw) {
        Ok(o) => o,
        Err(_) if g.is_none() => return Ok(None),
        Err(e) => return Err(e),
    };
    match g.as_ref() {
        None if obj.is_null() => Ok(None),
        Some((mine, _)) if *mine == obj as usize => Ok(callback::alloc_obj_get(obj)),
        _ => Err(Error::invalid(
            "aclrtAllocatorGetByStream returned an allocator xstream did not register on this stream",
        )),
    }
}

fn attr_u64(v: aclrtStreamAttrValue) -> u64 {
    result::attr_u64(v)
}

fn attr_u32(v: aclrtStreamAttrValue) -> u32 {
    result::attr_u32(v)
}

fn u32_attr(x: u32) -> aclrtStreamAttrValue {
    aclrtStreamAttrValue {
        reserve: [x, 0, 0, 0],
    }
}
