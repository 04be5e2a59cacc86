//! One launch variant run many times, for counting xstream's instructions per launch under
//! `valgrind --tool=callgrind` over the null driver (`backends/cuda-null`; no GPU needed).
//!
//! ```sh
//! cargo build -p xstream-cuda-null
//! cargo build --release -p xstream-benches --bin launch_count
//! LD_LIBRARY_PATH=<dir with libcuda.so(.1) -> libxstream_cuda_null.so> \
//!   valgrind --tool=callgrind --toggle-collect='*launch_count::measured*' \
//!   target/release/launch_count <variant>
//! ```
//!
//! Only [`measured`] is counted: `BATCHES` batches of `BATCH` launches, each batch followed
//! by an uncounted synchronize; the instructions per launch are the count over
//! `BATCHES * BATCH`. The kernels are those of `launch_profile`: an empty one, one of three
//! parameters (`.u64`, `.u32`, `.f32`), and the builtin `xstream_delay`. Variants (the first
//! argument): `raw-empty`, `empty` (`Stream::launch_kernel`), `raw-args3`, `args3-scalars`
//! (`launch_kernel` with `u64, u32, f32`), `args3` (`launch_kernel` with a buffer, `u32`,
//! `f32`), `builder-args3` (the launch builder with a buffer, `u32`, `f32`), `raw-delay`,
//! `delay` (`Stream::launch_builtin(Kernel::Delay(0))`). Prints the variant and the launch
//! count; without a CUDA driver `SKIP: ...` and exit 0.

use std::ffi::c_void;
use std::ptr;
use std::time::Duration;

use xstream_core::{
    Backend, Buffer, Device, Kernel, KernelArg, LaunchConfig, Module, ModuleSource, Stream,
    StreamDesc, StreamFlags,
};
use xstream_cuda::{ptx_source, CudaBackend};

/// Launches per counted batch.
const BATCH: u64 = 2000;
/// Counted batches (one warm-up batch runs before them, uncounted).
const BATCHES: u64 = 5;

#[path = "launch_profile/raw.rs"]
mod raw;

use raw::{raw_function, raw_launch, ARGS3_PTX, EMPTY_PTX};

fn main() {
    let variant = std::env::args().nth(1).unwrap_or_default();
    if CudaBackend::availability().is_err() {
        println!("SKIP: no CUDA driver");
        return;
    }
    if let Err(e) = run(&variant) {
        eprintln!("launch_count: FAILED: {e}");
        std::process::exit(1);
    }
}

/// The counted part: `n` calls of `f` (kept out of line so that callgrind can toggle on it).
#[inline(never)]
fn measured(n: u64, f: &mut dyn FnMut()) {
    for _ in 0..n {
        f();
    }
}

fn run(variant: &str) -> Result<(), String> {
    let err = |e: xstream_core::Error| e.to_string();
    let dev = CudaBackend::open(0).map_err(err)?;
    dev.rebind_thread().map_err(err)?;
    let xs = dev
        .create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING))
        .map_err(err)?;
    let rs = xs.as_raw().as_ptr();
    let empty_mod = dev
        .load_module(&ModuleSource::Ptx(EMPTY_PTX))
        .map_err(err)?;
    let empty = empty_mod.function("xs_prof_empty").map_err(err)?;
    let args3_mod = dev
        .load_module(&ModuleSource::Ptx(ARGS3_PTX))
        .map_err(err)?;
    let args3 = args3_mod.function("xs_prof_args3").map_err(err)?;
    let buf = dev.alloc(4096).map_err(err)?;
    let addr = buf.device_address();
    let single = LaunchConfig::single();
    let (n3, x3) = (7u32, 0.5f32);
    // The same three values, the first as a `u64` and as the buffer it is the address of.
    let scalars3 = [KernelArg::U64(addr), KernelArg::U32(n3), KernelArg::F32(x3)];
    let list3 = [KernelArg::Buffer(&buf), scalars3[1], scalars3[2]];
    let mut f: Box<dyn FnMut() + '_> = match variant {
        "raw-empty" => {
            let k = raw_function(EMPTY_PTX, c"xs_prof_empty")?;
            Box::new(move || raw_launch(k, rs, ptr::null_mut()))
        }
        "empty" => Box::new(|| xs.launch_kernel(&empty, &single, &[]).expect("launch")),
        "raw-args3" => {
            let k = raw_function(ARGS3_PTX, c"xs_prof_args3")?;
            Box::new(move || {
                let (mut p, mut n, mut x) = (addr, n3, x3);
                let mut params = [
                    &mut p as *mut u64 as *mut c_void,
                    &mut n as *mut u32 as *mut c_void,
                    &mut x as *mut f32 as *mut c_void,
                ];
                raw_launch(k, rs, params.as_mut_ptr());
            })
        }
        "args3-scalars" => Box::new(|| {
            xs.launch_kernel(&args3, &single, &scalars3)
                .expect("launch")
        }),
        "args3" => Box::new(|| xs.launch_kernel(&args3, &single, &list3).expect("launch")),
        "builder-args3" => Box::new(|| {
            xs.launch_builder(&args3)
                .arg(&buf)
                .arg(n3)
                .arg(x3)
                .launch()
                .expect("launch")
        }),
        "raw-delay" => {
            let ptx = ptx_source("sm_90") + "\0";
            let k = raw_function(&ptx, c"xstream_delay")?;
            Box::new(move || {
                let mut ns = 0u64;
                let mut params = [&mut ns as *mut u64 as *mut c_void];
                raw_launch(k, rs, params.as_mut_ptr());
            })
        }
        "delay" => Box::new(|| {
            xs.launch_builtin(Kernel::Delay(Duration::ZERO))
                .expect("launch")
        }),
        other => return Err(format!("unknown variant `{other}` (see the file's docs)")),
    };
    for round in 0..=BATCHES {
        if round == 0 {
            // Warm-up: the first launches list the module, make the builtin module, and so on.
            (f)();
            for _ in 1..BATCH {
                (f)();
            }
        } else {
            measured(BATCH, &mut f);
        }
        xs.synchronize().map_err(err)?;
    }
    println!("{variant}: {} launches counted", BATCHES * BATCH);
    Ok(())
}
