//! The module launch path against the raw driver: `Stream::launch_kernel` of a function of a
//! loaded module vs `cuLaunchKernel` of the same kernel (same PTX, loaded separately), and
//! heap allocations per launch, counted by this bench's `#[global_allocator]` (per thread, so
//! only the launching thread's allocations are seen).

use std::ffi::c_void;
use std::ptr;
use std::time::Duration;

use cudarc::driver::sys;
use xstream_core::module::{lcg_launch, BUILTIN_LCG};
use xstream_core::{Buffer, Device, Kernel, KernelArg, LaunchConfig, Module, ModuleSource, Stream};
use xstream_cuda::{CudaDevice, CudaStream};

use super::measure::Batch;
use super::{
    ck, compare, raw_function, raw_launch_empty, raw_sync, timed, xs, BenchResult, Row, Target,
    EMPTY_PTX,
};

#[global_allocator]
static GLOBAL: xstream_conformance::alloc_count::CountingAlloc =
    xstream_conformance::alloc_count::CountingAlloc;

/// Launches counted per variant.
const COUNT_LAUNCHES: u64 = 10_000;

/// Heap allocations per launch, after a warm-up, of each launch variant.
pub(crate) struct AllocCounts {
    /// (variant, allocations per launch)
    pub rows: Vec<(&'static str, f64)>,
}

/// Heap allocations per call of `f` on this thread, after 100 warm-up calls, over
/// [`COUNT_LAUNCHES`] calls.
pub(crate) fn per_launch(mut f: impl FnMut()) -> f64 {
    for _ in 0..100 {
        f();
    }
    let before = xstream_conformance::alloc_count::allocs();
    for _ in 0..COUNT_LAUNCHES {
        f();
    }
    (xstream_conformance::alloc_count::allocs() - before) as f64 / COUNT_LAUNCHES as f64
}

/// `xstream_lcg(u64 data, u32 words, u32 rounds)` through the raw driver.
fn raw_launch_lcg(f: sys::CUfunction, s: sys::CUstream, data: u64, words: u32, grid: u32) {
    let (mut d, mut w, mut r) = (data, words, 1u32);
    let mut params = [
        &mut d as *mut u64 as *mut c_void,
        &mut w as *mut u32 as *mut c_void,
        &mut r as *mut u32 as *mut c_void,
    ];
    // SAFETY: `f` is `xstream_lcg` (u64, u32, u32); `params` points to one live value of each
    // parameter's size (the driver copies them); `s` is live; `data` holds `words` words.
    ck(
        unsafe {
            sys::cuLaunchKernel(
                f,
                grid,
                1,
                1,
                256,
                1,
                1,
                0,
                s,
                params.as_mut_ptr(),
                ptr::null_mut(),
            )
        },
        "cuLaunchKernel",
    );
}

/// A hand-written kernel of three parameters (a device pointer, a `u32`, an `f32`) that does
/// nothing, for the launch-builder rows (what is timed is the launch, not the kernel).
const ARGS3_PTX: &str = ".version 8.0\n.target sm_90\n.address_size 64\n\n\
.visible .entry xs_bench_args3(.param .u64 xs_bench_args3_p, .param .u32 xs_bench_args3_n, \
.param .f32 xs_bench_args3_x)\n{\n    ret;\n}\n\0";

/// `xs_bench_args3(u64 ptr, u32 n, f32 x)` through the raw driver, one thread.
fn raw_launch_args3(f: sys::CUfunction, s: sys::CUstream, ptr: u64, n: u32, x: f32) {
    let (mut p, mut n, mut x) = (ptr, n, x);
    let mut params = [
        &mut p as *mut u64 as *mut c_void,
        &mut n as *mut u32 as *mut c_void,
        &mut x as *mut f32 as *mut c_void,
    ];
    // SAFETY: `f` is `xs_bench_args3` (u64, u32, f32), which reads none of them; `params`
    // points to one live value of each parameter's size (the driver copies them); `s` is live.
    ck(
        unsafe {
            sys::cuLaunchKernel(
                f,
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                s,
                params.as_mut_ptr(),
                ptr::null_mut(),
            )
        },
        "cuLaunchKernel",
    );
}

/// The module rows (empty kernel: ≤ raw + 2%; the launch builder with three arguments:
/// ≤ raw + 2%, and `launch_kernel` of the same kernel for reference; LCG over a 4 KiB buffer:
/// information) and the allocation counts.
pub(crate) fn module_rows(
    dev: &CudaDevice,
    xa: &CudaStream,
    ra: sys::CUstream,
) -> BenchResult<(Vec<Row>, AllocCounts)> {
    let err = |e: xstream_core::Error| e.to_string();
    let empty_mod = dev
        .load_module(&ModuleSource::Ptx(EMPTY_PTX))
        .map_err(err)?;
    let empty = empty_mod.function("xs_bench_empty").map_err(err)?;
    let raw_empty = raw_function(EMPTY_PTX, c"xs_bench_empty");
    let lcg = dev
        .builtin_module()
        .map_err(err)?
        .function(BUILTIN_LCG)
        .map_err(err)?;
    let lcg_ptx = xstream_cuda::ptx_source("sm_90") + "\0";
    let raw_lcg = raw_function(&lcg_ptx, c"xstream_lcg");
    const LEN: usize = 4096;
    let buf = dev.alloc(LEN).map_err(err)?;
    let (words, cfg) = lcg_launch(LEN).map_err(err)?;
    let single = LaunchConfig::single();
    let args3_mod = dev
        .load_module(&ModuleSource::Ptx(ARGS3_PTX))
        .map_err(err)?;
    let args3 = args3_mod.function("xs_bench_args3").map_err(err)?;
    let raw_args3 = raw_function(ARGS3_PTX, c"xs_bench_args3");
    let (a3_n, a3_x) = (7u32, 0.5f32);
    let builder = || {
        xa.launch_builder(&args3)
            .arg(&buf)
            .arg(a3_n)
            .arg(a3_x)
            .launch()
    };
    // One checked launch before timing. If it fails (an unknown parameter layout, say), the
    // builder row has no xstream cell (it reads FAIL, the error in its label) and the rest of
    // the bench still runs.
    let builder_err = builder().err().map(|e| e.to_string());
    xs(xa.synchronize());
    let mut builder_label =
        "launch builder: 3 args (buffer, u32, f32), empty kernel vs cuLaunchKernel, same PTX"
            .to_string();
    if let Some(e) = &builder_err {
        eprintln!("  launch builder: xstream failed: {e}");
        builder_label = format!("{builder_label} — xstream failed: {e}");
    }
    let args3_list = [
        KernelArg::Buffer(&buf),
        KernelArg::U32(a3_n),
        KernelArg::F32(a3_x),
    ];
    let launch_kernel_ok = xa.launch_kernel(&args3, &single, &args3_list).is_ok();
    xs(xa.synchronize());
    let mut rows = Vec::new();
    rows.push(compare(
        &builder_label,
        2000,
        Target::OverheadPct(2.0),
        builder_err.is_none().then(|| -> Batch<'_> {
            Box::new(|n| {
                let d = timed(n, || xs(builder()));
                xs(xa.synchronize());
                d
            })
        }),
        Some(Box::new(|n| {
            let d = timed(n, || {
                raw_launch_args3(raw_args3, ra, buf.device_address(), a3_n, a3_x)
            });
            raw_sync(ra);
            d
        })),
        None,
    ));
    rows.push(compare(
        "launch_kernel: same 3-arg kernel and args (reference) vs cuLaunchKernel",
        2000,
        Target::Info,
        launch_kernel_ok.then(|| -> Batch<'_> {
            Box::new(|n| {
                let d = timed(n, || xs(xa.launch_kernel(&args3, &single, &args3_list)));
                xs(xa.synchronize());
                d
            })
        }),
        Some(Box::new(|n| {
            let d = timed(n, || {
                raw_launch_args3(raw_args3, ra, buf.device_address(), a3_n, a3_x)
            });
            raw_sync(ra);
            d
        })),
        None,
    ));
    rows.push(compare(
        "module launch: empty kernel (launch_kernel vs cuLaunchKernel, same PTX)",
        2000,
        Target::OverheadPct(2.0),
        Some(Box::new(|n| {
            let d = timed(n, || xs(xa.launch_kernel(&empty, &single, &[])));
            xs(xa.synchronize());
            d
        })),
        Some(Box::new(|n| {
            let d = timed(n, || raw_launch_empty(raw_empty, ra));
            raw_sync(ra);
            d
        })),
        None,
    ));
    let args = [
        KernelArg::Buffer(&buf),
        KernelArg::U32(words),
        KernelArg::U32(1),
    ];
    rows.push(compare(
        "module launch: xstream_lcg over 4 KiB (buffer kept alive) vs cuLaunchKernel",
        2000,
        Target::Info,
        Some(Box::new(|n| {
            let d = timed(n, || xs(xa.launch_kernel(&lcg, &cfg, &args)));
            xs(xa.synchronize());
            d
        })),
        Some(Box::new(|n| {
            let d = timed(n, || {
                raw_launch_lcg(raw_lcg, ra, buf.device_address(), words, cfg.grid[0])
            });
            raw_sync(ra);
            d
        })),
        None,
    ));
    // Allocations per launch, each variant followed by a synchronize outside the count.
    let mut counts = Vec::new();
    let mut count = |name: &'static str, f: &mut dyn FnMut(), sync: &dyn Fn()| {
        let a = per_launch(f);
        sync();
        eprintln!("  allocations per launch: {name}: {a:.4}");
        counts.push((name, a));
    };
    let xsync = || xs(xa.synchronize());
    let rsync = || raw_sync(ra);
    count(
        "xstream launch_kernel (empty kernel, user module)",
        &mut || xs(xa.launch_kernel(&empty, &single, &[])),
        &xsync,
    );
    count(
        "xstream launch(Kernel::Delay(0)) (builtin module)",
        &mut || xs(xa.launch_builtin(Kernel::Delay(Duration::ZERO))),
        &xsync,
    );
    count(
        "xstream launch_kernel (xstream_lcg, one buffer)",
        &mut || xs(xa.launch_kernel(&lcg, &cfg, &args)),
        &xsync,
    );
    if builder_err.is_none() {
        count(
            "xstream launch_builder (3 args: buffer, u32, f32)",
            &mut || xs(builder()),
            &xsync,
        );
    }
    count(
        "raw cuLaunchKernel (empty kernel)",
        &mut || raw_launch_empty(raw_empty, ra),
        &rsync,
    );
    Ok((rows, AllocCounts { rows: counts }))
}
