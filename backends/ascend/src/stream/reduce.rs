//! The built-in reduce on Ascend: one `aclrtReduceAsync` (a runtime task, no kernel binary),
//! used when the runtime exports it ([`Capabilities::REDUCE`]). A kind or type the chip lacks
//! comes back from the runtime as 207000, i.e. [`Error::Unsupported`] (64-bit integers, which
//! the ACL layer has no type for, are refused before the call); MAX and MIN on products
//! whose reduce is SUM only come back as 107000 and are reported as [`Error::Unsupported`] too.

use std::sync::Arc;

use xstream_core::{
    BackendKind, Capabilities, Device, Error, ErrorKind, ReduceKind, ReduceType, Reduction, Result,
};

use super::AscendStream;
use crate::result;

pub(super) fn reduce(
    s: &AscendStream,
    dst_span: super::Span<'_>,
    src_span: super::Span<'_>,
    r: Reduction,
) -> Result<()> {
    if !s.device.info().capabilities.contains(Capabilities::REDUCE) {
        return Err(Error::unsupported(
            BackendKind::Ascend,
            "built-in reduce: this libascendcl.so does not export aclrtReduceAsync",
        ));
    }
    if r.ty == ReduceType::I64 {
        // The ACL layer takes no 64-bit integer type (100000 from aclrtReduceAsync).
        return Err(Error::unsupported(
            BackendKind::Ascend,
            "built-in reduce i64: aclrtReduceAsync has no 64-bit integer type",
        ));
    }
    let len = dst_span.len();
    let (dst, src) = (dst_span.buffer(), src_span.buffer());
    s.enter("reduce")?;
    s.note_use(dst)?;
    s.note_use(src)?;
    let d = result::memory::at(dst.inner.ptr, dst_span.offset());
    let so = result::memory::at(src.inner.ptr, src_span.offset());
    match result::reduce::reduce_async(s.device.inner.t, d, so, len, r, s.state.raw) {
        Ok(()) => {}
        // Every portable rule was checked by xstream-core, so a parameter error for a kind other than
        // SUM is the runtime's rule for products whose reduce takes its "V2" task (Atlas
        // training and inference products): SUM only.
        // The code stays native; in this context it means unsupported.
        Err(mut e)
            if r.kind != ReduceKind::Sum && e.native().is_some_and(|n| n.code == 107_000) =>
        {
            if let Some(n) = e.native_mut() {
                n.kind = ErrorKind::Unsupported;
                n.message = Some(format!(
                    "built-in reduce {}: this product reduces with SUM only",
                    r.kind.name()
                ));
            }
            return Err(e);
        }
        Err(e) => return Err(e),
    }
    s.state.enqueued(Some(Box::new((
        Arc::clone(&src.inner),
        Arc::clone(&dst.inner),
    ))));
    Ok(())
}
