//! The hot path of the expandable caching allocator (`xstream_examples::expandable`): one
//! allocation and its free from a warm segment (mapped memory holds the request, so nothing is
//! mapped), the case a training step hits after its first iterations. Target (issue 28):
//! at most 1 µs per allocation + free pair.
//!
//! Rows:
//! - `bookkeeping 4 KiB`: the allocator's own work ([`Blocks::take`] and
//!   [`Blocks::give_back`]: best fit, split, coalesce) among 256 blocks, every other one free;
//! - `host NNN`: [`Expandable::alloc`] + [`Expandable::free`] of NNN bytes on the host
//!   backend: the bookkeeping plus the block's buffer ([`VirtualRange::buffer`]: the range's
//!   checks and the backend's buffer; on the host that buffer has a staging copy of the
//!   block's length, which a GPU buffer does not have).
//!
//! ```sh
//! cargo bench -p xstream-examples --bench expandable_alloc
//! ```
//!
//! [`Blocks::take`]: xstream_examples::expandable::Blocks::take
//! [`Blocks::give_back`]: xstream_examples::expandable::Blocks::give_back
//! [`Expandable::alloc`]: xstream_examples::expandable::Expandable::alloc
//! [`Expandable::free`]: xstream_examples::expandable::Expandable::free
//! [`VirtualRange::buffer`]: xstream::VirtualRange::buffer
// criterion_group! generates undocumented public functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use xstream::{Backend, Device, HostBackend, StreamDesc};
use xstream_examples::expandable::{Blocks, Expandable};

/// 256 blocks of 4 KiB .. 64 KiB, every other one freed (holes of several sizes), in a free
/// tail of 64 MiB.
fn fragmented() -> Blocks {
    let mut b = Blocks::default();
    b.extend(0, 64 << 20);
    let offs: Vec<(usize, usize)> = (0..256)
        .map(|i| {
            let size = 4096 << (i % 5);
            (b.take(size).expect("room"), size)
        })
        .collect();
    for (off, size) in offs.into_iter().step_by(2) {
        b.give_back(off, size);
    }
    b
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("expandable_alloc");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50);

    let mut blocks = fragmented();
    g.bench_function("bookkeeping 4 KiB", |b| {
        b.iter(|| {
            let off = blocks.take(black_box(4096)).expect("a hole holds it");
            blocks.give_back(off, 4096);
        })
    });

    let dev = HostBackend::open(0).expect("host device");
    let s = dev.create_stream(&StreamDesc::new()).expect("stream");
    let mut seg = Expandable::<HostBackend>::new(&dev).expect("segment");
    // Warm: map 8 MiB once, then leave blocks of several sizes live around holes.
    let big = seg.alloc(8 << 20, &s).expect("warm-up block");
    seg.free(big, None).expect("free");
    let live: Vec<_> = (0..64)
        .map(|i| seg.alloc(4096 << (i % 4), &s).expect("block"))
        .collect();
    let mut keep = Vec::new();
    for (i, blk) in live.into_iter().enumerate() {
        if i % 2 == 0 {
            seg.free(blk, None).expect("free");
        } else {
            keep.push(blk);
        }
    }
    let maps = seg.maps;
    for (label, len) in [("host 512 B", 512usize), ("host 64 KiB", 64 << 10)] {
        g.bench_function(label, |b| {
            b.iter(|| {
                let blk = seg.alloc(black_box(len), &s).expect("alloc");
                seg.free(blk, None).expect("free");
            })
        });
    }
    assert_eq!(seg.maps, maps, "the warm segment mapped more memory");
    drop(keep);
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
