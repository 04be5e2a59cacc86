//! Where a kernel launch's time goes: xstream's launch paths against `cuLaunchKernel`, with an
//! in-process sampling profiler that splits each variant's CPU time between xstream's code
//! (this executable), the CUDA driver (`libcuda`) and the rest (libc, the vDSO).
//!
//! ```sh
//! cargo build --release -p xstream-benches --bin launch_profile   # here (no GPU needed)
//! gpu-bundle/bench/launch_profile                                 # on the GPU machine
//! ```
//!
//! Issue 29's launch rows are a few hundred ns over raw on an H100 while xstream's own work per
//! launch, timed against the null driver, is a few tens of ns. This program answers which side
//! the rest is on. Variants (each a batch of [`BATCH`] launches then one synchronize, the
//! batches of all variants interleaved, [`ROUNDS`] rounds, the order rotating each round):
//! the empty kernel through `cuLaunchKernel` and through `Stream::launch_kernel`; a kernel of
//! three arguments (a device pointer, a `u32`, an `f32`) through `cuLaunchKernel`,
//! `launch_kernel` and the launch builder; `xstream_delay(0)` through `cuLaunchKernel` and
//! `Stream::launch_builtin(Kernel::Delay)`.
//!
//! The profiler (`sampler.rs`) is a `SIGPROF` timer of wall time (`CLOCK_MONOTONIC`, 20 kHz)
//! sent to the launching thread alone. Its handler stores the interrupted instruction address
//! under the variant that is running, only while a batch is timed. After the
//! run each address is placed in its mapping (`/proc/self/maps`): this executable, `libcuda`,
//! or other. Samples in this executable are also listed by offset from its load address
//! (`$OUT/launch_profile_offsets.tsv`) so they can be named afterwards with
//! `addr2line -f -C -e <the same executable>` where it was built.
//!
//! Output: a Markdown table on stdout and in `$OUT/launch_profile.md` (ns per launch, median
//! and p10–p90 over the batches; samples per launch in each place, as ns at the sampling
//! period). Without a CUDA driver: `SKIP: ...` and exit 0. Exit 1 when the run itself failed.

use std::ffi::c_void;
use std::fmt::Write as _;
use std::ptr;
use std::time::{Duration, Instant};

use cudarc::driver::sys;
use xstream_core::{
    Backend, Buffer, Device, Error, Kernel, KernelArg, LaunchConfig, Module, ModuleSource, Stream,
    StreamDesc, StreamFlags,
};
use xstream_cuda::{ptx_source, CudaBackend};

mod sampler;

/// Launches per timed batch (then one synchronize, outside the time).
const BATCH: u64 = 2000;
/// Interleaved rounds: every variant runs one batch per round.
const ROUNDS: usize = 15;

const EMPTY_PTX: &str = ".version 8.0\n.target sm_90\n.address_size 64\n\n\
.visible .entry xs_prof_empty()\n{\n    ret;\n}\n\0";

const ARGS3_PTX: &str = ".version 8.0\n.target sm_90\n.address_size 64\n\n\
.visible .entry xs_prof_args3(.param .u64 xs_prof_args3_p, .param .u32 xs_prof_args3_n, \
.param .f32 xs_prof_args3_x)\n{\n    ret;\n}\n\0";

fn main() {
    if let Err(e) = CudaBackend::availability() {
        let reason = match e {
            Error::NotAvailable { reason, .. } => reason,
            other => other.to_string(),
        };
        println!("SKIP: no CUDA device: {reason}");
        return;
    }
    if let Err(e) = run() {
        eprintln!("launch_profile: FAILED: {e}");
        std::process::exit(1);
    }
}

fn ck(r: sys::CUresult, what: &str) -> Result<(), String> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what}: {r:?}"))
    }
}

fn raw_function(ptx_nul: &str, name: &std::ffi::CStr) -> Result<sys::CUfunction, String> {
    let mut m = ptr::null_mut();
    // SAFETY: `ptx_nul` is NUL-terminated PTX text; valid out-pointer; no JIT options (null
    // arrays of length 0); the context is current.
    let r = unsafe {
        sys::cuModuleLoadDataEx(
            &mut m,
            ptx_nul.as_ptr() as *const c_void,
            0,
            ptr::null_mut(),
            ptr::null_mut(),
        )
    };
    ck(r, "cuModuleLoadDataEx")?;
    let mut f = ptr::null_mut();
    // SAFETY: `m` is a loaded module (kept for the life of the process); `name` is
    // NUL-terminated; valid out-pointer.
    let r = unsafe { sys::cuModuleGetFunction(&mut f, m, name.as_ptr()) };
    ck(r, "cuModuleGetFunction")?;
    Ok(f)
}

/// `cuLaunchKernel` of `f` on one thread with `params` (null for none).
fn raw_launch(f: sys::CUfunction, s: sys::CUstream, params: *mut *mut c_void) {
    // SAFETY: callers pass a function whose parameter list `params` matches (null for a
    // kernel without parameters), pointing at live values the driver copies during the call;
    // `s` is a live stream of the current context.
    let r = unsafe { sys::cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, ptr::null_mut()) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuLaunchKernel");
}

fn raw_sync(s: sys::CUstream) {
    // SAFETY: `s` is a live stream of the current context.
    let r = unsafe { sys::cuStreamSynchronize(s) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuStreamSynchronize");
}

/// One variant: a name and a batch (launches, then the synchronize the caller does not time).
struct Variant<'a> {
    name: &'static str,
    launch: Box<dyn FnMut() + 'a>,
    sync: Box<dyn Fn() + 'a>,
    ns: Vec<f64>,
}

#[allow(clippy::too_many_lines)]
fn run() -> Result<(), String> {
    let err = |e: xstream_core::Error| e.to_string();
    let dev = CudaBackend::open(0).map_err(err)?;
    dev.rebind_thread().map_err(err)?;
    let info = dev.info().clone();
    let xs = dev
        .create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING))
        .map_err(err)?;
    let mut rs = ptr::null_mut();
    // SAFETY: valid out-pointer; the device's primary context is current (rebind_thread).
    let r = unsafe {
        sys::cuStreamCreate(&mut rs, 1 /* CU_STREAM_NON_BLOCKING */)
    };
    ck(r, "cuStreamCreate")?;
    let empty_mod = dev
        .load_module(&ModuleSource::Ptx(EMPTY_PTX))
        .map_err(err)?;
    let empty = empty_mod.function("xs_prof_empty").map_err(err)?;
    let raw_empty = raw_function(EMPTY_PTX, c"xs_prof_empty")?;
    let args3_mod = dev
        .load_module(&ModuleSource::Ptx(ARGS3_PTX))
        .map_err(err)?;
    let args3 = args3_mod.function("xs_prof_args3").map_err(err)?;
    let raw_args3 = raw_function(ARGS3_PTX, c"xs_prof_args3")?;
    let delay_ptx = ptx_source("sm_90") + "\0";
    let raw_delay = raw_function(&delay_ptx, c"xstream_delay")?;
    let buf = dev.alloc(4096).map_err(err)?;
    let addr = buf.device_address();
    let single = LaunchConfig::single();
    let (n3, x3) = (7u32, 0.5f32);
    let list3 = [
        KernelArg::Buffer(&buf),
        KernelArg::U32(n3),
        KernelArg::F32(x3),
    ];
    let xsync = || xs.synchronize().expect("synchronize");
    let rsync = || raw_sync(rs);
    let xs_ref = &xs;
    let mut vs = vec![
        Variant {
            name: "empty kernel: cuLaunchKernel",
            launch: Box::new(|| raw_launch(raw_empty, rs, ptr::null_mut())),
            sync: Box::new(rsync),
            ns: Vec::new(),
        },
        Variant {
            name: "empty kernel: Stream::launch_kernel",
            launch: Box::new(|| xs_ref.launch_kernel(&empty, &single, &[]).expect("launch")),
            sync: Box::new(xsync),
            ns: Vec::new(),
        },
        Variant {
            name: "3 args: cuLaunchKernel",
            launch: Box::new(move || {
                let (mut p, mut n, mut x) = (addr, n3, x3);
                let mut params = [
                    &mut p as *mut u64 as *mut c_void,
                    &mut n as *mut u32 as *mut c_void,
                    &mut x as *mut f32 as *mut c_void,
                ];
                raw_launch(raw_args3, rs, params.as_mut_ptr());
            }),
            sync: Box::new(rsync),
            ns: Vec::new(),
        },
        Variant {
            name: "3 args: Stream::launch_kernel",
            launch: Box::new(|| {
                xs_ref
                    .launch_kernel(&args3, &single, &list3)
                    .expect("launch")
            }),
            sync: Box::new(xsync),
            ns: Vec::new(),
        },
        Variant {
            name: "3 args: launch builder",
            launch: Box::new(|| {
                xs_ref
                    .launch_builder(&args3)
                    .arg(&buf)
                    .arg(n3)
                    .arg(x3)
                    .launch()
                    .expect("launch")
            }),
            sync: Box::new(xsync),
            ns: Vec::new(),
        },
        Variant {
            name: "xstream_delay(0): cuLaunchKernel",
            launch: Box::new(move || {
                let mut ns = 0u64;
                let mut params = [&mut ns as *mut u64 as *mut c_void];
                raw_launch(raw_delay, rs, params.as_mut_ptr());
            }),
            sync: Box::new(rsync),
            ns: Vec::new(),
        },
        Variant {
            name: "xstream_delay(0): Stream::launch_builtin(Kernel::Delay)",
            launch: Box::new(|| {
                xs_ref
                    .launch_builtin(Kernel::Delay(Duration::ZERO))
                    .expect("launch")
            }),
            sync: Box::new(xsync),
            ns: Vec::new(),
        },
    ];
    // Warm-up: every variant twice, untimed, unsampled.
    for v in vs.iter_mut() {
        for _ in 0..2 {
            for _ in 0..BATCH {
                (v.launch)();
            }
            (v.sync)();
        }
    }
    let prof = sampler::Sampler::start(vs.len()).map_err(|e| format!("sampler: {e}"))?;
    let nv = vs.len();
    for round in 0..ROUNDS {
        for k in 0..nv {
            let i = (k + round) % nv;
            let v = &mut vs[i];
            prof.set_variant(Some(i));
            let t = Instant::now();
            for _ in 0..BATCH {
                (v.launch)();
            }
            let d = t.elapsed();
            prof.set_variant(None);
            (v.sync)();
            v.ns.push(d.as_nanos() as f64 / BATCH as f64);
        }
    }
    let samples = prof.stop();
    let places = sampler::Places::of_this_process().map_err(|e| format!("/proc/self/maps: {e}"))?;
    let period_ns = sampler::PERIOD.as_nanos() as f64;
    let launches = (ROUNDS as u64 * BATCH) as f64;

    let mut md = String::new();
    let _ = writeln!(
        md,
        "# launch_profile: {} ({}), {ROUNDS} rounds of {BATCH} launches per variant\n",
        info.name, info.driver
    );
    let _ = writeln!(
        md,
        "Sampling: SIGPROF every {} µs of the launching thread's wall time; \
         a sample's ns = samples × period / launches.\n",
        sampler::PERIOD.as_micros()
    );
    let _ = writeln!(
        md,
        "| variant | ns per launch (p10–p90) | samples | xstream binary ns | libcuda ns | other ns | other threads' samples |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|");
    let mut offsets = String::from("variant\toffset\tsamples\n");
    for (i, v) in vs.iter().enumerate() {
        let (med, p10, p90) = stat(&v.ns);
        let s = &samples.per_variant[i];
        let split = places.split(s);
        let per = |n: usize| n as f64 * period_ns / launches;
        let _ = writeln!(
            md,
            "| {} | {med:.0} ({p10:.0}–{p90:.0}) | {} | {:.0} | {:.0} | {:.0} | {} |",
            v.name,
            s.len(),
            per(split.exe),
            per(split.cuda),
            per(split.other),
            samples.other_threads[i],
        );
        for (off, n) in places.exe_offsets(s).into_iter().take(40) {
            let _ = writeln!(offsets, "{}\t{off:#x}\t{n}", v.name);
        }
    }
    let _ = writeln!(
        md,
        "\nMappings: executable {}, driver {}.",
        places.exe_name(),
        places.cuda_name()
    );
    print!("{md}");
    if let Ok(out) = std::env::var("OUT") {
        let dir = std::path::PathBuf::from(out);
        std::fs::write(dir.join("launch_profile.md"), &md).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("launch_profile_offsets.tsv"), &offsets)
            .map_err(|e| e.to_string())?;
    }
    drop(vs);
    // SAFETY: `rs` is the raw stream created above; nothing is queued on it after its sync.
    let _ = unsafe { sys::cuStreamDestroy_v2(rs) };
    Ok(())
}

/// Median, p10 and p90 (nearest rank).
fn stat(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let at = |q: f64| s[((q * (s.len() - 1) as f64).round() as usize).min(s.len() - 1)];
    (at(0.5), at(0.1), at(0.9))
}
