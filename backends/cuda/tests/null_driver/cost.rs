//! The CPU cost of xstream's wrapper against a raw cudarc `sys` call into the same double:
//! printed, never asserted.

use super::*;

pub(crate) fn ck(r: sys::CUresult, what: &str) {
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "{what}");
}

/// Raw `cuLaunchKernel` of one block of one thread with `params` (null for none).
pub(crate) fn raw_launch(f: sys::CUfunction, s: sys::CUstream, params: *mut *mut c_void) {
    // SAFETY: `f` is a live function of the double whose parameters `params` covers (one
    // pointer to a live value of each parameter's size, or null for none); `s` is live.
    ck(
        unsafe { sys::cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, std::ptr::null_mut()) },
        "cuLaunchKernel",
    );
}

/// ns per call of `xs` and `raw` (each runs `n` calls and returns the time they took), the two
/// interleaved, less the time the calling thread's driver calls spent evicting the caches in
/// the double's eviction mode (`XNULL_EVICT_KB`, docs/null-driver.md), and the part of `xs`'s time spent blocked in the double waiting for host
/// functions (`xnull_wait_ns`): medians over the repeats.
pub(crate) fn compare(
    null: &Null,
    reps: usize,
    n: usize,
    mut xs: impl FnMut(usize) -> Duration,
    mut raw: impl FnMut(usize) -> Duration,
) -> [f64; 3] {
    let (mut a, mut w, mut b) = (Vec::new(), Vec::new(), Vec::new());
    xs(n / 10 + 1);
    raw(n / 10 + 1);
    // Time outside the double's eviction (`XNULL_EVICT_KB`; nothing to subtract without it).
    let outside = |f: &mut dyn FnMut(usize) -> Duration| {
        let e = null.evict_ns();
        let d = f(n).as_nanos() as f64;
        (d - (null.evict_ns() - e) as f64) / n as f64
    };
    for _ in 0..reps {
        null.reset();
        a.push(outside(&mut xs));
        w.push(null.wait_ns() as f64 / n as f64);
        b.push(outside(&mut raw));
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    [median(a), median(w), median(b)]
}

/// Calls per repeat of an optimised build: [`CALLS`], or `XSTREAM_NULL_TIMING_CALLS` (at least
/// 100; the eviction mode of the double makes every call slow).
pub(crate) fn timing_calls() -> usize {
    std::env::var("XSTREAM_NULL_TIMING_CALLS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .map_or(CALLS, |n| n.max(100))
}

pub(crate) fn timed(n: usize, mut f: impl FnMut()) -> Duration {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed()
}

/// Prints a CPU-cost table (`rows`: label, xstream ns, blocked ns, raw ns) under `title`.
fn print_cpu(title: &str, rows: &[(String, [f64; 3])]) {
    let optimised = !cfg!(debug_assertions);
    println!(
        "\n{title}, {} build{}",
        if optimised { "optimised" } else { "debug" },
        if optimised {
            ""
        } else {
            " (numbers mean nothing: run with --release)"
        }
    );
    println!(
        "| operation | xstream ns | of which blocked in the double | raw ns | xstream - raw ns | \
         xstream - blocked - raw ns |"
    );
    println!("|---|---|---|---|---|---|");
    for (label, [x, w, r]) in rows {
        println!(
            "| {label} | {x:.0} | {w:.0} | {r:.0} | {:+.0} | {:+.0} |",
            x - r,
            x - w - r
        );
    }
}

/// Empty raw host function (the raw side of the host-callback row).
unsafe extern "C" fn empty_host_fn(_user: *mut c_void) {}

/// The other `gpu_ops` rows of issue 29 (event create + destroy, stream create + destroy,
/// stream-ordered alloc + free, host-callback enqueue, idle stream query and synchronize, the 4-stream chain) and issue 28's virtual-memory cycle, against raw
/// calls into the double, and cudarc's safe event API against the same raw calls (the event
/// row's target is cudarc).
pub(crate) fn more_timing(
    null: &Null,
    dev: &xstream_cuda::CudaDevice,
    s: &CudaStream,
    delay: &xstream_cuda::CudaFunction,
) {
    use xstream_core::{Event, EventDesc, EventFlags};
    let optimised = !cfg!(debug_assertions);
    let (reps, n) = if optimised {
        (REPEATS, timing_calls())
    } else {
        (3, 1000)
    };
    const DISABLE_TIMING: u32 = 2;
    let raw_event = |flags: u32| {
        let mut e: sys::CUevent = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current on this thread.
        ck(
            unsafe { sys::cuEventCreate(&mut e, flags) },
            "cuEventCreate",
        );
        e
    };
    let raw_stream = || {
        let mut rs: sys::CUstream = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current on this thread.
        ck(unsafe { sys::cuStreamCreate(&mut rs, 1) }, "cuStreamCreate");
        rs
    };
    let ctx = std::sync::Arc::clone(dev.cudarc_context());
    let mut rows: Vec<(String, [f64; 3])> = Vec::new();
    for (label, xflags, rflags) in [
        (
            "event create+destroy (DISABLE_TIMING) vs cuEventCreate + cuEventDestroy",
            EventFlags::DISABLE_TIMING,
            DISABLE_TIMING,
        ),
        (
            "event create+destroy (default, timing) vs cuEventCreate + cuEventDestroy",
            EventFlags::empty(),
            0,
        ),
    ] {
        let d = EventDesc::new().flags(xflags);
        let raw = |n: usize| {
            timed(n, || {
                let e = raw_event(rflags);
                // SAFETY: `e` was just created and is not used again.
                ck(unsafe { sys::cuEventDestroy_v2(e) }, "cuEventDestroy");
            })
        };
        rows.push((
            label.to_string(),
            compare(
                null,
                reps,
                n,
                |n| {
                    timed(n, || {
                        drop(std::hint::black_box(dev.create_event(&d).unwrap()))
                    })
                },
                raw,
            ),
        ));
    }
    rows.push((
        "cudarc safe new_event(DISABLE_TIMING) + drop vs cuEventCreate + cuEventDestroy (reference)"
            .to_string(),
        compare(
            null,
            reps,
            n,
            |n| {
                timed(n, || {
                    let f = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING;
                    drop(std::hint::black_box(ctx.new_event(Some(f)).unwrap()))
                })
            },
            |n| {
                timed(n, || {
                    let e = raw_event(DISABLE_TIMING);
                    // SAFETY: `e` was just created and is not used again.
                    ck(unsafe { sys::cuEventDestroy_v2(e) }, "cuEventDestroy");
                })
            },
        ),
    ));
    rows.push((
        "stream create+destroy (NON_BLOCKING) vs cuStreamCreate + cuStreamDestroy".to_string(),
        compare(
            null,
            reps,
            n,
            |n| {
                timed(n, || {
                    drop(std::hint::black_box(dev.create_stream(&nb()).unwrap()))
                })
            },
            |n| {
                timed(n, || {
                    let rs = raw_stream();
                    // SAFETY: `rs` was just created and is not used again.
                    ck(unsafe { sys::cuStreamDestroy_v2(rs) }, "cuStreamDestroy");
                })
            },
        ),
    ));
    let rs = raw_stream();
    rows.push((
        "alloc_async + free_async (4 KiB, default pool) vs cuMemAllocAsync + cuMemFreeAsync"
            .to_string(),
        compare(
            null,
            reps,
            n,
            |n| timed(n, || s.free_async(s.alloc_async(LEN).unwrap()).unwrap()),
            |n| {
                timed(n, || {
                    let mut p: sys::CUdeviceptr = 0;
                    // SAFETY: valid out-pointer; `rs` is live; `p` is freed once, right after.
                    unsafe {
                        ck(sys::cuMemAllocAsync(&mut p, LEN, rs), "cuMemAllocAsync");
                        ck(sys::cuMemFreeAsync(p, rs), "cuMemFreeAsync");
                    }
                })
            },
        ),
    ));
    let rsync = |st: sys::CUstream| {
        // SAFETY: `st` is live until the end of this function.
        ck(
            unsafe { sys::cuStreamSynchronize(st) },
            "cuStreamSynchronize",
        )
    };
    rows.push((
        "host callback enqueue (empty) vs cuLaunchHostFunc (blocked: the synchronize after the batch, untimed)".to_string(),
        compare(
            null,
            reps,
            n,
            |n| {
                let d = timed(n, || s.host_callback(|_| {}).unwrap());
                s.synchronize().unwrap();
                d
            },
            |n| {
                let d = timed(n, || {
                    // SAFETY: live stream; the function ignores its (null) argument.
                    ck(
                        unsafe {
                            sys::cuLaunchHostFunc(rs, Some(empty_host_fn), std::ptr::null_mut())
                        },
                        "cuLaunchHostFunc",
                    )
                });
                rsync(rs);
                d
            },
        ),
    ));
    // The idle rows of gpu_ops (target raw + 20 ns): both streams have run work and are
    // synchronized, so each call is the entry checks plus one driver call.
    s.synchronize().unwrap();
    rsync(rs);
    for (label, query) in [
        ("idle stream query vs cuStreamQuery", true),
        ("idle stream synchronize vs cuStreamSynchronize", false),
    ] {
        rows.push((
            label.to_string(),
            compare(
                null,
                reps,
                n,
                |n| {
                    timed(n, || {
                        if query {
                            assert_eq!(s.query().unwrap(), xstream_core::Status::Ready);
                        } else {
                            s.synchronize().unwrap();
                        }
                    })
                },
                |n| {
                    timed(n, || {
                        // SAFETY: `rs` is live until the end of this function.
                        let r = unsafe {
                            if query {
                                sys::cuStreamQuery(rs)
                            } else {
                                sys::cuStreamSynchronize(rs)
                            }
                        };
                        ck(r, "cuStreamQuery / cuStreamSynchronize");
                    })
                },
            ),
        ));
    }
    rows.push(map_cycle_timing(null, dev, reps, n));
    // The chain of gpu_ops: per round and stream, a launch of xstream_delay(0), a record and a
    // wait of the next stream; then every stream synchronized. One call = one whole chain.
    const ROUNDS: usize = 16;
    let xs4: Vec<CudaStream> = (0..4).map(|_| dev.create_stream(&nb()).unwrap()).collect();
    let xe4: Vec<xstream_cuda::CudaEvent> = (0..4)
        .map(|_| {
            dev.create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))
                .unwrap()
        })
        .collect();
    let rs4: Vec<sys::CUstream> = (0..4).map(|_| raw_stream()).collect();
    let re4: Vec<sys::CUevent> = (0..4).map(|_| raw_event(DISABLE_TIMING)).collect();
    let f_delay = delay.raw().as_ptr();
    rows.push((
        format!("chain: 4 streams × {ROUNDS} rounds (launch, record, wait) + sync vs raw"),
        compare(
            null,
            reps,
            n / 100,
            |n| {
                timed(n, || {
                    for _ in 0..ROUNDS {
                        for i in 0..4 {
                            xs4[i]
                                .launch_builtin(Kernel::Delay(Duration::ZERO))
                                .unwrap();
                            xe4[i].record(&xs4[i]).unwrap();
                            xs4[(i + 1) % 4].wait_event(&xe4[i]).unwrap();
                        }
                    }
                    for x in &xs4 {
                        x.synchronize().unwrap();
                    }
                })
            },
            |n| {
                timed(n, || {
                    for _ in 0..ROUNDS {
                        for i in 0..4 {
                            let mut ns = 0u64;
                            let mut params = [&mut ns as *mut u64 as *mut c_void];
                            raw_launch(f_delay, rs4[i], params.as_mut_ptr());
                            // SAFETY: live handles of the double.
                            ck(
                                unsafe { sys::cuEventRecord(re4[i], rs4[i]) },
                                "cuEventRecord",
                            );
                            // SAFETY: live handles of the double.
                            ck(
                                unsafe { sys::cuStreamWaitEvent(rs4[(i + 1) % 4], re4[i], 0) },
                                "cuStreamWaitEvent",
                            );
                        }
                    }
                    for &r in &rs4 {
                        rsync(r);
                    }
                })
            },
        ),
    ));
    // SAFETY: the double's handles, unused from here on.
    unsafe {
        for e in re4 {
            ck(sys::cuEventDestroy_v2(e), "cuEventDestroy");
        }
        for r in rs4 {
            ck(sys::cuStreamDestroy_v2(r), "cuStreamDestroy");
        }
        ck(sys::cuStreamDestroy_v2(rs), "cuStreamDestroy");
    }
    print_cpu(
        &format!(
            "CPU cost per call of the other gpu_ops rows against the null driver (a test double, \
             not a GPU): median of {reps} repeats of {n} calls ({} for the chain)",
            n / 100
        ),
        &rows,
    );
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn timing_table(
    null: &Null,
    s: &CudaStream,
    empty: &xstream_cuda::CudaFunction,
    args3: &xstream_cuda::CudaFunction,
    delay: &xstream_cuda::CudaFunction,
    buf: &xstream_cuda::CudaBuffer,
    hb: &mut xstream_core::PinnedBuffer<CudaBackend>,
) {
    let optimised = !cfg!(debug_assertions);
    let (reps, n) = if optimised {
        (REPEATS, timing_calls())
    } else {
        (3, 1000)
    };
    let mut rs: sys::CUstream = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the context is current on this thread (xstream bound it).
    ck(unsafe { sys::cuStreamCreate(&mut rs, 1) }, "cuStreamCreate");
    let mut rd: sys::CUdeviceptr = 0;
    // SAFETY: valid out-pointer.
    ck(unsafe { sys::cuMemAlloc_v2(&mut rd, LEN) }, "cuMemAlloc");
    let mut rh: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    ck(
        unsafe { sys::cuMemHostAlloc(&mut rh, LEN, 0) },
        "cuMemHostAlloc",
    );
    let xsync = || s.synchronize().unwrap();
    let rsync = || {
        ck(
            // SAFETY: `rs` is live until the end of this function.
            unsafe { sys::cuStreamSynchronize(rs) },
            "cuStreamSynchronize",
        )
    };
    let single = LaunchConfig::single();
    let addr = buf.device_address();
    let scalars = [KernelArg::U64(addr), KernelArg::U32(7), KernelArg::F32(0.5)];
    let with_buf = [
        KernelArg::Buffer(buf),
        KernelArg::U32(7),
        KernelArg::F32(0.5),
    ];
    let f_empty = empty.raw().as_ptr();
    let f_args3 = args3.raw().as_ptr();
    let f_delay = delay.raw().as_ptr();
    let raw_args3 = |n: usize| {
        let d = timed(n, || {
            let (mut p, mut k, mut x) = (rd, 7u32, 0.5f32);
            let mut params = [
                &mut p as *mut u64 as *mut c_void,
                &mut k as *mut u32 as *mut c_void,
                &mut x as *mut f32 as *mut c_void,
            ];
            raw_launch(f_args3, rs, params.as_mut_ptr())
        });
        rsync();
        d
    };
    let mut rows: Vec<(&str, [f64; 3])> = Vec::new();
    rows.push((
        "launch_kernel: no parameters vs cuLaunchKernel",
        compare(
            null,
            reps,
            n,
            |n| {
                let d = timed(n, || s.launch_kernel(empty, &single, &[]).unwrap());
                xsync();
                d
            },
            |n| {
                let d = timed(n, || raw_launch(f_empty, rs, std::ptr::null_mut()));
                rsync();
                d
            },
        ),
    ));
    rows.push((
        "launch_kernel: u64, u32, f32 vs cuLaunchKernel",
        compare(
            null,
            reps,
            n,
            |n| {
                let d = timed(n, || s.launch_kernel(args3, &single, &scalars).unwrap());
                xsync();
                d
            },
            raw_args3,
        ),
    ));
    rows.push((
        "launch builder: u64, u32, f32 vs cuLaunchKernel",
        compare(
            null,
            reps,
            n,
            |n| {
                let d = timed(n, || {
                    s.launch_builder(args3)
                        .arg(addr)
                        .arg(7u32)
                        .arg(0.5f32)
                        .launch()
                        .unwrap()
                });
                xsync();
                d
            },
            raw_args3,
        ),
    ));
    rows.push((
        "launch_kernel: buffer, u32, f32 vs cuLaunchKernel",
        compare(
            null,
            reps,
            n,
            |n| {
                let d = timed(n, || s.launch_kernel(args3, &single, &with_buf).unwrap());
                xsync();
                d
            },
            raw_args3,
        ),
    ));
    rows.push((
        "launch builder: buffer, u32, f32 vs cuLaunchKernel (run 17's builder row)",
        compare(
            null,
            reps,
            n,
            |n| {
                let d = timed(n, || {
                    s.launch_builder(args3)
                        .arg(buf)
                        .arg(7u32)
                        .arg(0.5f32)
                        .launch()
                        .unwrap()
                });
                xsync();
                d
            },
            raw_args3,
        ),
    ));
    rows.push((
        "launch(Kernel::Delay(0)) vs cuLaunchKernel of xstream_delay",
        compare(
            null,
            reps,
            n,
            |n| {
                let d = timed(n, || {
                    s.launch_builtin(Kernel::Delay(Duration::ZERO)).unwrap()
                });
                xsync();
                d
            },
            |n| {
                let d = timed(n, || {
                    let mut ns = 0u64;
                    let mut params = [&mut ns as *mut u64 as *mut c_void];
                    raw_launch(f_delay, rs, params.as_mut_ptr())
                });
                rsync();
                d
            },
        ),
    ));
    rows.push((
        "write_from_host 4 KiB (batch + sync) vs cuMemcpyHtoDAsync",
        compare(
            null,
            reps,
            n,
            |n| {
                let t = Instant::now();
                for _ in 0..n {
                    s.write_from_host(hb, 0, buf).unwrap();
                }
                xsync();
                t.elapsed()
            },
            |n| {
                let t = Instant::now();
                for _ in 0..n {
                    // SAFETY: `rh` and `rd` are live blocks of `LEN` bytes of the double.
                    ck(
                        unsafe { sys::cuMemcpyHtoDAsync_v2(rd, rh, LEN, rs) },
                        "cuMemcpyHtoDAsync",
                    );
                }
                rsync();
                t.elapsed()
            },
        ),
    ));
    let hbm = std::cell::RefCell::new(hb);
    rows.push((
        "read_into_host 4 KiB (batch + sync) vs cuMemcpyDtoHAsync",
        compare(
            null,
            reps,
            n,
            |n| {
                let mut h = hbm.borrow_mut();
                let t = Instant::now();
                for _ in 0..n {
                    s.read_into_host(buf, &mut h, 0).unwrap();
                }
                xsync();
                t.elapsed()
            },
            |n| {
                let t = Instant::now();
                for _ in 0..n {
                    // SAFETY: as above.
                    ck(
                        unsafe { sys::cuMemcpyDtoHAsync_v2(rh, rd, LEN, rs) },
                        "cuMemcpyDtoHAsync",
                    );
                }
                rsync();
                t.elapsed()
            },
        ),
    ));
    // SAFETY: all three are the double's, and nothing uses them any more.
    unsafe {
        ck(sys::cuMemFreeHost(rh), "cuMemFreeHost");
        ck(sys::cuMemFree_v2(rd), "cuMemFree");
        ck(sys::cuStreamDestroy_v2(rs), "cuStreamDestroy");
    }
    let rows: Vec<(String, [f64; 3])> = rows.into_iter().map(|(l, v)| (l.to_string(), v)).collect();
    print_cpu(
        &format!(
            "CPU cost per call against the null driver (a test double, not a GPU): median of \
             {reps} repeats of {n} calls"
        ),
        &rows,
    );
}
