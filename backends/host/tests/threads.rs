//! Streams hold no thread once dropped and drained (own process: counts this process's
//! threads).

use std::time::{Duration, Instant};

use xstream_core::{Device, Kernel, Stream, StreamDesc, StreamFlags};
use xstream_host::HostDevice;

fn threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

#[test]
#[cfg_attr(
    miri,
    ignore = "reads /proc and spawns a thousand threads; too slow under Miri"
)]
fn thousand_streams_leave_no_threads() {
    let d = HostDevice::new_isolated(0);
    let buf = d.alloc(16).unwrap();
    let before = threads();
    for i in 0..1000 {
        let flags = if i % 2 == 0 {
            StreamFlags::NON_BLOCKING
        } else {
            StreamFlags::empty()
        };
        let s = d.create_stream(&StreamDesc::new().flags(flags)).unwrap();
        if i % 3 != 0 {
            s.memset(&buf, 0, 16, i as u8).unwrap();
        }
        if i % 10 == 0 {
            s.launch_builtin(Kernel::Delay(Duration::from_millis(1)))
                .unwrap();
            drop(s.completed().unwrap());
        }
        // Dropped with work possibly still queued.
    }
    d.synchronize().unwrap();
    // Allow the xstream dispatcher/poller and the default stream's lingering worker.
    let t0 = Instant::now();
    let mut now = threads();
    while now > before + 2 && t0.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(10));
        now = threads();
    }
    eprintln!("threads before {before}, after {now}");
    assert!(now <= before + 2, "threads before {before}, after {now}");

    // The count is real: live streams with work do hold worker threads.
    let live: Vec<_> = (0..5)
        .map(|_| {
            let s = d.create_stream(&StreamDesc::new()).unwrap();
            s.launch_builtin(Kernel::Delay(Duration::from_millis(100)))
                .unwrap();
            s
        })
        .collect();
    assert!(before > 0, "no /proc/self/status");
    assert!(threads() >= before + 5, "workers are threads");
    drop(live);
    d.synchronize().unwrap();
    let t0 = Instant::now();
    while threads() > before + 2 && t0.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(threads() <= before + 2);
}
