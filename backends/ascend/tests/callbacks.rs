//! Host callbacks through the report thread.
mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use xstream_core::{Device, Error, Kernel, Stream, StreamDesc};

#[test]
fn exactly_once_in_order() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    for i in 0..20 {
        let log = log.clone();
        if i % 5 == 0 {
            s.launch_builtin(Kernel::Delay(Duration::from_millis(2)))
                .unwrap();
        }
        s.host_callback(move |r| {
            r.unwrap();
            log.lock().unwrap().push(i);
        })
        .unwrap();
    }
    s.synchronize().unwrap();
    assert_eq!(*log.lock().unwrap(), (0..20).collect::<Vec<_>>());
    // The default stream too.
    let def = d.default_stream().unwrap();
    let hit = Arc::new(Mutex::new(0));
    let h = hit.clone();
    def.host_callback(move |_| *h.lock().unwrap() += 1).unwrap();
    def.synchronize().unwrap();
    assert_eq!(*hit.lock().unwrap(), 1);
}

#[test]
fn panic_surfaces_at_next_sync_and_not_permitted_inside() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let inner = Arc::new(Mutex::new(None));
    let i2 = inner.clone();
    let d2 = d.clone();
    s.host_callback(move |_| {
        *i2.lock().unwrap() = Some(d2.create_stream(&StreamDesc::new()).err());
    })
    .unwrap();
    s.host_callback(|_| panic!("boom in callback")).unwrap();
    let e = s.synchronize().unwrap_err();
    assert!(
        matches!(&e, Error::CallbackPanicked(m) if m.contains("boom")),
        "{e:?}"
    );
    s.synchronize().unwrap();
    assert!(matches!(
        inner.lock().unwrap().take().flatten(),
        Some(Error::NotPermitted(_))
    ));
}

#[test]
fn notify_completed_and_host_func_mixing() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let d2 = d.clone();
    s.notify(move |r| {
        // Second tier may call xstream.
        let ok = d2.create_stream(&StreamDesc::new()).is_ok();
        tx.send((r.is_ok(), ok)).unwrap();
    })
    .unwrap();
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        (true, true)
    );
    s.launch_builtin(Kernel::Delay(Duration::from_millis(10)))
        .unwrap();
    s.completed().unwrap().wait().unwrap();
    assert!(matches!(
        s.launch_host_func(|_| {}),
        Err(Error::InvalidArgument(_))
    ));
    let h = d.create_stream(&StreamDesc::new()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    h.launch_host_func(move |r| tx.send(r.is_ok()).unwrap())
        .unwrap();
    h.synchronize().unwrap();
    assert!(rx.recv_timeout(Duration::from_secs(5)).unwrap());
    assert!(matches!(
        h.host_callback(|_| {}),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn dropped_stream_still_runs_callbacks() {
    if !common::in_sim_process() {
        return;
    }
    let d = common::device(1);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    s.launch_builtin(Kernel::Delay(Duration::from_millis(50)))
        .unwrap();
    s.host_callback(move |r| tx.send(r.is_ok()).unwrap())
        .unwrap();
    drop(s);
    assert!(rx.recv_timeout(Duration::from_secs(5)).unwrap());
}

/// Callbacks enqueued one after another, each waited for, reuse the slot of the one before
/// (a fired slot nothing references any more): the slots this process allocates stay bounded,
/// in both callback styles, on a stream and on the default stream, and every callback still
/// runs exactly once with `Ok`. In a process of its own (`in_own_sim_process`): the slot count
/// and the device's pending callbacks are process-wide.
#[test]
fn sequential_callbacks_reuse_their_slots() {
    if !common::in_own_sim_process() {
        return;
    }
    const N: usize = 200;
    let d = common::device(0);
    let report = d.create_stream(&StreamDesc::new()).unwrap();
    let host_func = d.create_stream(&StreamDesc::new()).unwrap();
    let def = d.default_stream().unwrap();
    let ran = Arc::new(Mutex::new(Vec::new()));
    let before = xstream_core::callback::slots_allocated();
    for i in 0..N {
        let r2 = ran.clone();
        let f = move |r: xstream_core::Result<()>| r2.lock().unwrap().push((i, r.is_ok()));
        match i % 3 {
            0 => {
                report.host_callback(f).unwrap();
                report.synchronize().unwrap();
            }
            1 => {
                host_func.launch_host_func(f).unwrap();
                host_func.synchronize().unwrap();
            }
            _ => {
                def.host_callback(f).unwrap();
                def.synchronize().unwrap();
            }
        }
    }
    let made = xstream_core::callback::slots_allocated() - before;
    assert_eq!(
        *ran.lock().unwrap(),
        (0..N).map(|i| (i, true)).collect::<Vec<_>>(),
        "each callback ran once, in order, with Ok"
    );
    assert!(
        made <= 4,
        "{made} callback slots allocated for {N} callbacks waited for one by one"
    );
    assert_eq!(d.pending_callbacks(), 0);
}

/// A force-destroyed stream's queued callbacks run exactly once, in order (failed with
/// `CallbackCancelled`, unless the runtime ran them first), and their slots then serve later
/// callbacks of another stream without running the old callbacks again. In a process of its
/// own, as the test above.
#[test]
fn force_destroyed_callbacks_run_once_and_their_slots_serve_later_ones() {
    if !common::in_own_sim_process() {
        return;
    }
    const N: usize = 8;
    let d = common::device(0);
    let a = d.create_stream(&StreamDesc::new()).unwrap();
    let b = d.create_stream(&StreamDesc::new()).unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    b.launch_builtin(Kernel::Delay(Duration::from_millis(300)))
        .unwrap();
    for i in 0..N {
        let g = got.clone();
        b.host_callback(move |r| {
            let cancelled = matches!(r, Err(Error::CallbackCancelled(_)));
            g.lock().unwrap().push((i, r.is_ok() || cancelled));
        })
        .unwrap();
    }
    b.destroy_force().unwrap();
    let before = xstream_core::callback::slots_allocated();
    let ran = Arc::new(Mutex::new(0));
    for _ in 0..50 {
        let r2 = ran.clone();
        a.host_callback(move |r| {
            r.unwrap();
            *r2.lock().unwrap() += 1;
        })
        .unwrap();
        a.synchronize().unwrap();
    }
    let made = xstream_core::callback::slots_allocated() - before;
    assert_eq!(
        *got.lock().unwrap(),
        (0..N).map(|i| (i, true)).collect::<Vec<_>>(),
        "each callback of the destroyed stream ran once, in order, cancelled or Ok"
    );
    assert_eq!(*ran.lock().unwrap(), 50);
    assert!(made <= 4, "{made} slots allocated for 50 callbacks");
    assert_eq!(d.pending_callbacks(), 0);
}
