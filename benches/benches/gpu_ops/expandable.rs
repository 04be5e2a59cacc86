//! The expandable caching allocator's hot path on CUDA (issue 28): an allocation and its free
//! that a warm segment serves from memory it has already mapped (no chunk is mapped, no driver
//! call is made), with the same allocator the `expandable` example runs
//! (`xstream_examples::expandable`). Target: at most 1 µs per allocation + free pair.
//!
//! The segment is warmed the way the host criterion bench (`examples/benches/
//! expandable_alloc.rs`) warms it: 8 MiB mapped, then 64 blocks of 4 to 32 KiB with every
//! other one freed, so a request meets holes of several sizes. The raw column is the driver's
//! own caching allocator on the same request, `cuMemAllocAsync` + `cuMemFreeAsync` from the
//! device's default pool on a raw stream: a reference, not the target (the target is
//! absolute). The rows fail the bench if the segment mapped a chunk while they ran. Skipped
//! (no rows) on a device without `VIRTUAL_MEMORY`.

use super::*;
use xstream_core::Capabilities;
use xstream_examples::expandable::Expandable;

/// Request sizes of the rows.
const SIZES: [(&str, usize); 3] = [("512 B", 512), ("64 KiB", 64 << 10), ("1 MiB", 1 << 20)];

/// The rows, or none (with a note on stderr) where the device has no virtual memory.
pub(crate) fn rows(dev: &CudaDevice, xa: &CudaStream, ra: sys::CUstream) -> BenchResult<Vec<Row>> {
    let info = xstream_core::Device::info(dev);
    if !info.capabilities.contains(Capabilities::VIRTUAL_MEMORY) {
        eprintln!("gpu_ops: no expandable-allocator rows (the device lacks VIRTUAL_MEMORY)");
        return Ok(Vec::new());
    }
    let err = |e: Error| format!("expandable: {e}");
    let mut seg = Expandable::<CudaBackend>::new(dev).map_err(err)?;
    let big = seg.alloc(8 << 20, xa).map_err(err)?;
    seg.free(big, None).map_err(err)?;
    let mut keep = Vec::new();
    for i in 0..64 {
        let blk = seg.alloc(4096 << (i % 4), xa).map_err(err)?;
        if i % 2 == 0 {
            seg.free(blk, None).map_err(err)?;
        } else {
            keep.push(blk);
        }
    }
    let maps = seg.maps;
    let mut out = Vec::new();
    for (label, len) in SIZES {
        out.push(compare(
            &format!("expandable alloc + free, cached block ({label})"),
            50_000,
            Target::AbsNs(1000.0),
            Some(Box::new(|n| {
                timed(n, || {
                    let blk = seg.alloc(black_box(len), xa).expect("expandable alloc");
                    seg.free(blk, None).expect("expandable free");
                })
            })),
            Some(Box::new(|n| {
                let d = timed(n, || {
                    let mut p = 0;
                    // SAFETY: valid out-pointer, live stream; the block is freed right after
                    // in stream order and never touched.
                    unsafe {
                        ck(sys::cuMemAllocAsync(&mut p, len, ra), "cuMemAllocAsync");
                        ck(sys::cuMemFreeAsync(black_box(p), ra), "cuMemFreeAsync");
                    }
                });
                raw_sync(ra);
                d
            })),
            None,
        ));
    }
    if seg.maps != maps {
        return Err(format!(
            "expandable: the warm segment mapped {} chunk(s) during the hot-path rows",
            seg.maps - maps
        ));
    }
    for blk in keep {
        seg.free(blk, None).map_err(err)?;
    }
    Ok(out)
}
