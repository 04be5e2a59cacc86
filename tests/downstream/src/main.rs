//! Uses xstream the way a runtime does: the type-erased path chosen at run time, and cudarc
//! types passed between the runtime's own cudarc and xstream's.

use std::sync::Arc;

use xstream::any::AnyDevice;
use xstream::{BackendKind, EventDesc, StreamDesc};

/// Compiles only if this crate's cudarc and the one xstream re-exports are one crate.
fn same_cudarc(ctx: Arc<cudarc::driver::CudaContext>) -> Arc<xstream::cudarc::driver::CudaContext> {
    ctx
}

fn main() -> xstream::Result<()> {
    let _ = same_cudarc;
    let kind = std::env::args()
        .nth(1)
        .map(|n| n.parse::<BackendKind>())
        .transpose()?
        .unwrap_or_else(xstream::auto);
    let dev = AnyDevice::open(kind, 0)?;
    let s = dev.create_stream(&StreamDesc::new())?;
    let e = dev.create_event(&EventDesc::new())?;
    e.record(&s)?;
    e.synchronize()?;
    println!("downstream: {kind} stream {} synchronized", s.id());
    Ok(())
}
