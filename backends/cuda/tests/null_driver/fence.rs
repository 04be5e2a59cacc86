//! When a page-locked buffer records its fence (xstream-core hostmem.rs `fenced_copy` and
//! `wait_idle`, backends/cuda/src/stream/fence.rs): not behind each copy, but once per host
//! access and once per change of stream, through an anchor that keeps the native stream alive.
//! Behaviour of this crate's code only: the double is not a GPU.

use super::*;

/// The calling thread's calls of each of `names` since the last reset.
fn mine(null: &Null, names: &[&str]) -> BTreeMap<String, u64> {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    null.thread_counts(&names)
}

fn want(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs
        .iter()
        .filter(|(_, c)| *c > 0)
        .map(|(n, c)| (n.to_string(), *c))
        .collect()
}

const WATCHED: &[&str] = &[
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuStreamWaitEvent",
];

/// K same-stream copies make no record; the first host access records once and waits; a
/// second access records nothing; a copy on another stream first records the pending fence
/// on the old stream and makes the new stream wait; a buffer whose last stream was dropped
/// still records on it (its native stream is destroyed only when the buffer lets it go).
pub(crate) fn pinned_fence_on_demand(
    null: &Null,
    dev: &xstream_cuda::CudaDevice,
    s: &CudaStream,
    other: &CudaStream,
    buf: &xstream_cuda::CudaBuffer,
) {
    const K: u64 = 16;
    let mut h = dev
        .alloc_pinned(LEN, &PinnedAllocDesc::new())
        .expect("alloc_pinned");
    h.as_mut_slice().expect("as_mut_slice").fill(3);
    s.synchronize().expect("synchronize");
    null.reset();
    for _ in 0..K {
        s.write_from_host(&h, 0, buf).expect("write_from_host");
    }
    assert_eq!(
        mine(null, WATCHED),
        want(&[("cuMemcpyHtoDAsync_v2", K), ("cuEventCreate", 1)]),
        "{K} copies on one stream: the fence event is made once and never recorded"
    );
    null.reset();
    assert!(h.as_slice().expect("as_slice").iter().all(|&b| b == 3));
    assert_eq!(
        mine(null, WATCHED),
        want(&[("cuEventRecord", 1), ("cuEventSynchronize", 1)]),
        "host access after {K} copies: one record behind them, one wait"
    );
    null.reset();
    h.wait_idle().expect("wait_idle");
    assert_eq!(
        mine(null, WATCHED),
        want(&[("cuEventSynchronize", 1)]),
        "a second host access with no copy since: a wait, no record"
    );

    // A change of stream: the pending fence is recorded on the old stream, the new one waits.
    null.reset();
    for _ in 0..K {
        s.read_into_host(buf, &mut h, 0).expect("read_into_host");
    }
    other.write_from_host(&h, 0, buf).expect("write_from_host");
    assert_eq!(
        mine(null, WATCHED),
        want(&[
            ("cuMemcpyDtoHAsync_v2", K),
            ("cuMemcpyHtoDAsync_v2", 1),
            ("cuEventRecord", 1),
            ("cuStreamWaitEvent", 1),
        ]),
        "{K} copies on one stream, then one on another"
    );
    null.reset();
    h.wait_idle().expect("wait_idle");
    assert_eq!(
        mine(null, WATCHED),
        want(&[("cuEventRecord", 1), ("cuEventSynchronize", 1)]),
        "host access after the copy on the other stream"
    );

    // The stream of the pending copy is dropped before the host access.
    let s2 = dev.create_stream(&nb()).expect("create_stream");
    s2.write_from_host(&h, 0, buf).expect("write_from_host");
    s2.synchronize().expect("synchronize");
    null.reset();
    drop(s2);
    // Not a timing bound: the destroy would run on the reaper thread; it must not come (no
    // other stream is dropped meanwhile). The double also refuses a record on a destroyed
    // stream (INVALID_HANDLE), so the access below fails if it came.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        null.calls("cuStreamDestroy_v2"),
        0,
        "the native stream was destroyed while a buffer's fence still anchors on it"
    );
    h.wait_idle()
        .expect("host access after the last copy's stream was dropped");
    assert_eq!(
        mine(null, WATCHED),
        want(&[("cuEventRecord", 1), ("cuEventSynchronize", 1)]),
        "host access through the dropped stream's anchor"
    );
    drop(h);
    assert_eq!(
        wait_calls(null, "cuStreamDestroy_v2", 1, Duration::from_secs(5)),
        1,
        "the native stream was not destroyed once the buffer let it go"
    );
}
