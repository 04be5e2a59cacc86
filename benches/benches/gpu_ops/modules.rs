//! The module launch path against the raw driver: `Stream::launch_kernel` of a function of a
//! loaded module vs `cuLaunchKernel` of the same kernel (same PTX, loaded separately), and
//! heap allocations per launch, counted by this bench's `#[global_allocator]` (per thread, so
//! only the launching thread's allocations are seen).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::c_void;
use std::ptr;
use std::time::Duration;

use cudarc::driver::sys;
use xstream_core::module::{lcg_launch, BUILTIN_LCG};
use xstream_core::{Buffer, Device, Kernel, KernelArg, LaunchConfig, Module, ModuleSource, Stream};
use xstream_cuda::{CudaDevice, CudaStream};

use super::{
    ck, compare, raw_function, raw_launch_empty, raw_sync, timed, xs, BenchResult, Row, Target,
    EMPTY_PTX,
};

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

/// Counts the calling thread's heap allocations; forwards to `System`.
struct Counting;

// SAFETY: forwards every call to `System`; the counter is a const-initialised `Cell` without
// destructor, so counting never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded contract.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded contract.
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Launches counted per variant.
const COUNT_LAUNCHES: u64 = 10_000;

/// Heap allocations per launch, after a warm-up, of each launch variant.
pub(crate) struct AllocCounts {
    /// (variant, allocations per launch)
    pub rows: Vec<(&'static str, f64)>,
}

fn per_launch(mut f: impl FnMut()) -> f64 {
    for _ in 0..100 {
        f();
    }
    let before = ALLOCS.with(Cell::get);
    for _ in 0..COUNT_LAUNCHES {
        f();
    }
    (ALLOCS.with(Cell::get) - before) as f64 / COUNT_LAUNCHES as f64
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

/// The module rows (empty kernel: ≤ raw + 2%; LCG over a 4 KiB buffer: information) and the
/// allocation counts.
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
    let mut rows = Vec::new();
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
        &mut || xs(xa.launch(Kernel::Delay(Duration::ZERO))),
        &xsync,
    );
    count(
        "xstream launch_kernel (xstream_lcg, one buffer)",
        &mut || xs(xa.launch_kernel(&lcg, &cfg, &args)),
        &xsync,
    );
    count(
        "raw cuLaunchKernel (empty kernel)",
        &mut || raw_launch_empty(raw_empty, ra),
        &rsync,
    );
    Ok((rows, AllocCounts { rows: counts }))
}
