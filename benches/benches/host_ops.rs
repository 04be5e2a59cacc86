//! Per-operation costs of the host backend.
// criterion_group! generates undocumented public functions.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion};
use xstream_core::Backend;
use xstream_host::HostBackend;

fn host(c: &mut Criterion) {
    let dev = HostBackend::open(0).expect("host device");
    xstream_benches::stream_ops::<HostBackend>(c, "host", &dev);
}

criterion_group!(benches, host);
criterion_main!(benches);
