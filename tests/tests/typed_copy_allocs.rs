//! Heap allocations of the typed copies (`Stream::write_from_blocking`, `Stream::read_into_blocking`): none per
//! call on the host backend and on the Ascend backend over the ACL runtime simulator (a test
//! double of `libascendcl.so`, not hardware).
//!
//! A counting global allocator counts the allocations made on the calling thread while a
//! measurement is armed. What it sees is the xstream code of this process (the portable layer
//! and the backend); the simulator is a separate shared library with its own allocator, so
//! what the vendor runtime allocates is outside the count, as it would be on an NPU.

use xstream_core::{Backend, Buffer, Device, Stream, StreamDesc};

#[global_allocator]
static GLOBAL: xstream_conformance::alloc_count::CountingAlloc =
    xstream_conformance::alloc_count::CountingAlloc;
use xstream_conformance::alloc_count::allocations_during;

const ROUNDS: usize = 100;

/// Warms up, then counts the allocations of `ROUNDS` typed copies each way through a slice
/// of a buffer; returns the count, after checking the bytes went round.
fn typed_copy_allocations<B: Backend>(dev: &B::Device) -> u64 {
    let s = dev.create_stream(&StreamDesc::new()).expect("stream");
    let buf = dev.alloc(4096).expect("alloc");
    let src: Vec<f32> = (0..256).map(|i| i as f32 * 0.5).collect();
    let mut dst = vec![0f32; 256];
    let all = buf.typed::<f32>().expect("typed");
    let part = all.slice(256..512).expect("slice");
    // Warm-up: first-use initialisation (loader tables, thread-locals) is not per call.
    s.write_from_blocking(part, &src)
        .expect("write_from_blocking");
    s.read_into_blocking(part, &mut dst)
        .expect("read_into_blocking");
    dst.fill(0.0);
    let n = allocations_during(|| {
        for _ in 0..ROUNDS {
            if s.write_from_blocking(part, &src).is_err()
                || s.read_into_blocking(part, &mut dst).is_err()
            {
                return;
            }
        }
    });
    assert_eq!(dst, src, "the typed copies did not move the bytes");
    n
}

#[test]
fn typed_copies_allocate_nothing_on_host() {
    let dev = xstream_host::HostBackend::open(0).expect("host device");
    let n = typed_copy_allocations::<xstream_host::HostBackend>(&dev);
    println!("host: {n} allocations in {ROUNDS} write_from_blocking + read_into_blocking pairs");
    assert_eq!(
        n, 0,
        "host typed copies allocated {n} times in {ROUNDS} rounds"
    );
}

#[test]
fn typed_copies_allocate_nothing_on_ascend_simulator() {
    use xstream_conformance::simulator;
    if !simulator::run_in_child(1) {
        return;
    }
    simulator::setup(1);
    let dev = xstream_ascend::AscendBackend::open(0).expect("simulated Ascend device");
    let n = typed_copy_allocations::<xstream_ascend::AscendBackend>(&dev);
    println!("ascend (simulator): {n} allocations in {ROUNDS} write_from_blocking + read_into_blocking pairs");
    assert_eq!(
        n, 0,
        "Ascend typed copies allocated {n} times in {ROUNDS} rounds"
    );
}
