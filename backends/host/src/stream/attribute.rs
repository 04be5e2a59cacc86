//! Stream attributes (kept per queue: priority, sync policy, failure mode, user tag) and the
//! per-stream allocator slot.

use std::sync::Arc;

use xstream_core::{Allocator, BackendKind, Error, Result, StreamAttr, StreamAttrValue};

use super::HostStream;
use crate::conv::HOST_PRIORITY_RANGE;

pub(super) fn attribute(s: &HostStream, attr: StreamAttr) -> Result<StreamAttrValue> {
    let a = *s.queue.attrs();
    match attr {
        StreamAttr::Priority => Ok(StreamAttrValue::Priority(a.priority)),
        StreamAttr::SyncPolicy => Ok(StreamAttrValue::SyncPolicy(a.sync)),
        StreamAttr::FailureMode => Ok(StreamAttrValue::FailureMode(a.failure)),
        StreamAttr::UserTag => Ok(StreamAttrValue::UserTag(a.tag)),
        StreamAttr::AccessPolicyWindow => Err(Error::unsupported(
            BackendKind::Host,
            "the AccessPolicyWindow attribute (host memory has no L2 window to steer)",
        )),
    }
}

pub(super) fn set_attribute(s: &HostStream, value: StreamAttrValue) -> Result<()> {
    s.check_owned("set_attribute")?;
    value.validate()?;
    let mut a = s.queue.attrs();
    match value {
        StreamAttrValue::Priority(p) => {
            if !HOST_PRIORITY_RANGE.contains(p) {
                return Err(Error::invalid(format!(
                    "priority {p} is outside the host range [least {}, greatest {}]",
                    HOST_PRIORITY_RANGE.least, HOST_PRIORITY_RANGE.greatest
                )));
            }
            a.priority = p;
        }
        StreamAttrValue::SyncPolicy(s) => a.sync = s,
        StreamAttrValue::FailureMode(f) => a.failure = f,
        StreamAttrValue::UserTag(t) => a.tag = t,
        StreamAttrValue::AccessPolicyWindow(_) => {
            return Err(Error::unsupported(
                BackendKind::Host,
                "the AccessPolicyWindow attribute (host memory has no L2 window to steer)",
            ))
        }
    }
    Ok(())
}

pub(super) fn copy_attributes_from(s: &HostStream, src: &HostStream) -> Result<()> {
    s.check_owned("copy_attributes_from")?;
    let v = *src.queue.attrs();
    *s.queue.attrs() = v;
    Ok(())
}

pub(super) fn set_allocator(s: &HostStream, allocator: Option<Arc<dyn Allocator>>) -> Result<()> {
    s.check_owned("set_allocator")?;
    s.queue.allocator.set(allocator);
    Ok(())
}

pub(super) fn allocator(s: &HostStream) -> Result<Option<Arc<dyn Allocator>>> {
    Ok(s.queue.allocator.get())
}
