//! A capture made after each kind of copy and allocation of the data path survives: the
//! operation is made on one stream and synchronized, then another stream captures a kernel
//! launch, in RELAXED mode. Nothing of the earlier operation may leak into the capture (a late
//! release, a lazy driver call on a background thread). Skips (prints `SKIP: <test>: <reason>`)
//! without a CUDA device.
//!
//! `XSTREAM_CAPTURE_AFTER=<name>` limits the run to one operation, so that each can run in its
//! own process (scripts/gpu/run36.sh runs them so under compute-sanitizer memcheck, where
//! data_path's first capture after `allocations_are_rounded_to_the_granule` was invalidated).

use xstream_core::{Backend, Buffer, CaptureMode, Device, Kernel, Stream, StreamDesc, StreamFlags};
use xstream_cuda::{CudaBackend, CudaDevice, CudaStream};

const LEN: usize = 2062;

/// One operation made before the capture, on a stream of its own, then synchronized.
type Op = fn(&CudaDevice, &CudaStream);

fn ops() -> Vec<(&'static str, Op)> {
    vec![
        ("none", |_, _| {}),
        ("pageable_write", |d, s| {
            let a = d.alloc(LEN).unwrap();
            s.write(&a, 0, vec![3; LEN]).unwrap();
        }),
        ("pageable_read", |d, s| {
            let a = d.alloc(LEN).unwrap();
            s.memset(&a, 0, LEN, 7).unwrap();
            let rb = s.read(&a, 0, LEN).unwrap();
            s.synchronize().unwrap();
            assert_eq!(rb.take().unwrap(), vec![7; LEN]);
        }),
        ("device_copy", |d, s| {
            let (a, b) = (d.alloc(LEN).unwrap(), d.alloc(LEN).unwrap());
            s.copy(&a, 0, &b, 0, LEN).unwrap();
        }),
        ("alloc_async_free_async", |_, s| {
            let o = s.alloc_async(LEN).unwrap();
            s.free_async(o).unwrap();
        }),
        ("alloc_async_range_free_async", |_, s| {
            let o = s.alloc_async(LEN).unwrap();
            let (base, size) = o.address_range().unwrap();
            assert!(base <= o.device_address() && o.device_address() < base + size as u64);
            s.free_async(o).unwrap();
        }),
        ("all_of_them", |d, s| {
            // In the order data_path's allocations_are_rounded_to_the_granule makes them.
            let (a, b) = (d.alloc(LEN).unwrap(), d.alloc(LEN).unwrap());
            let _ = a.address_range().unwrap();
            s.write(&a, 0, vec![3; LEN]).unwrap();
            s.copy(&a, 0, &b, 0, LEN).unwrap();
            let whole = s.read(&b, 0, LEN).unwrap();
            s.synchronize().unwrap();
            assert_eq!(whole.take().unwrap(), vec![3; LEN]);
            let o = s.alloc_async(LEN).unwrap();
            let _ = o.address_range().unwrap();
            s.free_async(o).unwrap();
        }),
        ("address_range", |d, _| {
            let a = d.alloc(LEN).unwrap();
            let (base, _) = a.address_range().unwrap();
            assert_eq!(base, a.device_address());
        }),
    ]
}

#[test]
fn a_capture_survives_each_copy_and_allocation_made_before_it() {
    if let Err(e) = CudaBackend::availability() {
        xstream_conformance::report_skip(
            "a_capture_survives_each_copy_and_allocation_made_before_it",
            &e,
        );
        return;
    }
    let only = std::env::var("XSTREAM_CAPTURE_AFTER").ok();
    let all = ops();
    let chosen: Vec<_> = all
        .iter()
        .filter(|(name, _)| only.as_deref().is_none_or(|o| o == *name))
        .collect();
    assert!(
        !chosen.is_empty(),
        "XSTREAM_CAPTURE_AFTER={only:?} names no operation"
    );
    let mut failed = Vec::new();
    for (name, op) in chosen {
        for how in How::ALL {
            let what = format!("{name}{}", how.suffix());
            if !capture_survives_after(*op, how, &what) {
                failed.push(what);
            }
        }
    }
    assert!(failed.is_empty(), "captures invalidated after: {failed:?}");
}

/// How the operation and the capture share a device handle and a thread.
#[derive(Clone, Copy)]
enum How {
    /// One device handle and one thread for both.
    Same,
    /// Every handle of the operation's device dropped, the device opened again for the capture.
    Reopened,
    /// As consecutive tests of one process run: the operation on a thread of its own with its
    /// own device handle, the thread ended, then the capture on a new thread with a new handle.
    OwnThreads,
}

impl How {
    const ALL: [How; 3] = [How::Same, How::Reopened, How::OwnThreads];

    fn suffix(self) -> &'static str {
        match self {
            How::Same => "",
            How::Reopened => " (device reopened)",
            How::OwnThreads => " (own threads)",
        }
    }
}

fn nb() -> StreamDesc {
    StreamDesc::new().flags(StreamFlags::NON_BLOCKING)
}

/// Makes `op` on a stream of its own and synchronizes it, then captures a launch on another
/// stream in RELAXED mode; prints what the launch and the end of the capture returned, and
/// says whether both succeeded.
fn capture_survives_after(op: Op, how: How, what: &str) -> bool {
    let run_op = move |d: &CudaDevice| {
        let s = d.create_stream(&nb()).unwrap();
        op(d, &s);
        s.synchronize().unwrap();
    };
    let open = || CudaBackend::open(0).expect("CUDA is available but open(0) failed");
    let capture = |d: &CudaDevice| {
        // The builtin module is loaded before the capture, so the capture does not load it.
        let warm = d.create_stream(&nb()).unwrap();
        warm.launch_builtin(Kernel::Delay(std::time::Duration::ZERO))
            .unwrap();
        warm.synchronize().unwrap();
        let c = d.create_stream(&nb()).unwrap();
        c.begin_capture(CaptureMode::Relaxed).unwrap();
        let launched = c.launch_builtin(Kernel::Delay(std::time::Duration::ZERO));
        let graph = c.end_capture();
        println!(
            "capture after {what}: launch {:?}, end {:?}",
            launched.as_ref().err(),
            graph.as_ref().err()
        );
        c.synchronize().unwrap();
        launched.is_ok() && graph.is_ok()
    };
    match how {
        How::Same => {
            let d = open();
            run_op(&d);
            capture(&d)
        }
        How::Reopened => {
            run_op(&open());
            capture(&open())
        }
        How::OwnThreads => {
            std::thread::spawn(move || run_op(&open()))
                .join()
                .expect("the operation's thread");
            std::thread::scope(|sc| {
                sc.spawn(|| capture(&open()))
                    .join()
                    .expect("the capture's thread")
            })
        }
    }
}
