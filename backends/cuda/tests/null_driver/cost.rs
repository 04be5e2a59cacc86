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
/// interleaved, and the part of `xs`'s time spent blocked in the double waiting for host
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
    for _ in 0..reps {
        null.reset();
        a.push(xs(n).as_nanos() as f64 / n as f64);
        w.push(null.wait_ns() as f64 / n as f64);
        b.push(raw(n).as_nanos() as f64 / n as f64);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    [median(a), median(w), median(b)]
}

pub(crate) fn timed(n: usize, mut f: impl FnMut()) -> Duration {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed()
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn timing_table(
    null: &Null,
    s: &CudaStream,
    empty: &xstream_cuda::CudaFunction,
    args3: &xstream_cuda::CudaFunction,
    delay: &xstream_cuda::CudaFunction,
    buf: &xstream_cuda::CudaBuffer,
    hb: &mut xstream_core::HostBuffer<CudaBackend>,
) {
    let optimised = !cfg!(debug_assertions);
    let (reps, n) = if optimised {
        (REPEATS, CALLS)
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
                let d = timed(n, || s.launch(Kernel::Delay(Duration::ZERO)).unwrap());
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
    println!(
        "\nCPU cost per call against the null driver (a test double, not a GPU): median of {reps} \
         repeats of {n} calls, {} build{}",
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
