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
//! The same run also samples the other rows issue 29 found slower than raw, each in batches of
//! the size `gpu_ops` uses for it: 4 KiB copies from and into page-locked memory
//! (`cuMemcpyHtoDAsync` / `cuMemcpyDtoHAsync` between `cuMemHostAlloc` and `cuMemAlloc` blocks
//! against `Stream::write_from_host` / `Stream::read_into_host` with `PinnedBuffer`s, 1000 per
//! batch, the synchronize that ends the batch timed and sampled with it, as `gpu_ops` times
//! them); event create + destroy with `CU_EVENT_DISABLE_TIMING` (`cuEventCreate` +
//! `cuEventDestroy` against `Device::create_event` + drop, 20 000 per batch); the enqueue of an
//! empty host callback (`cuLaunchHostFunc` against `Stream::host_callback`, 2000 per batch).
//!
//! The host-callback enqueue is split further (`cbexp.rs`), each variant on raw
//! `cuLaunchHostFunc`: with xstream's fault watcher running (one xstream callback just before
//! the batch starts it; it lingers 50 ms), with a host function that spins 500 ns or 1500 ns on
//! the driver's callback thread, with one that frees a block the enqueuing thread allocated,
//! and with the core's `CallbackSlot` fired by a trampoline shaped as the CUDA backend's: a new
//! slot per callback untracked and tracked in a `PendingCallbacks` list, and a slot taken from
//! the list (a fired one reused, as the CUDA backend takes them) and tracked. Every callback
//! variant's batch starts 60 ms after the last one (outside its time), so xstream's watcher is
//! stopped unless the variant starts it. `LP_ONLY=<text>` keeps only the variants whose name contains the text
//! (`LP_ONLY="host callback"`: the callback variants alone, about 10 s).
//!
//! Each variant's last column (`threads.rs`) is every thread's CPU time and voluntary context
//! switches ("sleeps") per operation over its sampled batches, synchronize included, read from
//! `/proc/self/task` outside the timed part: the enqueuing thread, the driver's threads
//! (`cuda-EvtHandlr` and the host-function thread, named as the executable) and xstream's.
//!
//! The profiler (`sampler.rs`) is a `SIGPROF` timer of wall time (`CLOCK_MONOTONIC`, 20 kHz)
//! sent to the launching thread alone. Its handler stores the interrupted instruction address
//! under the variant that is running, only while a batch is timed. After the
//! run each address is placed in its mapping (`/proc/self/maps`): this executable, `libcuda`,
//! or other. Samples in this executable are also listed by offset from its load address
//! (`$OUT/launch_profile_offsets.tsv`) so they can be named afterwards with
//! `addr2line -f -C -e <the same executable>` where it was built.
//!
//! Output: a Markdown table on stdout and in `$OUT/launch_profile.md` (ns per operation,
//! median and p10–p90 over the batches; samples per operation in each place, as ns at the
//! sampling period); the offsets file also gives each variant's operations over the run. Without a CUDA driver: `SKIP: ...` and exit 0. Exit 1 when the run itself failed.

use std::ffi::c_void;
use std::fmt::Write as _;
use std::ptr;
use std::time::{Duration, Instant};

use cudarc::driver::sys;
use xstream_core::{
    Backend, Buffer, Device, Error, EventDesc, EventFlags, Kernel, KernelArg, LaunchConfig, Module,
    ModuleSource, PinnedAllocDesc, Stream, StreamDesc, StreamFlags,
};
use xstream_cuda::{ptx_source, CudaBackend};

mod cbexp;
mod raw;
mod sampler;
mod threads;

use cbexp::SlotFrom;
use raw::{ck, raw_function, raw_launch, ARGS3_PTX, EMPTY_PTX};

/// Launches per timed batch (then one synchronize, outside the time).
const BATCH: u64 = 2000;
/// Interleaved rounds: every variant runs one batch per round.
const ROUNDS: usize = 15;

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

fn raw_sync(s: sys::CUstream) {
    // SAFETY: `s` is a live stream of the current context.
    let r = unsafe { sys::cuStreamSynchronize(s) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuStreamSynchronize");
}

/// Bytes per copy of the copy variants (`gpu_ops`' 4 KiB typed-copy rows).
const COPY_BYTES: usize = 4 << 10;
/// Copies per batch (`gpu_ops`: 1000 at 4 KiB), the synchronize timed with them.
const COPY_BATCH: u64 = 1000;
/// Event create + destroy pairs per batch (`gpu_ops`: 20 000).
const EVENT_BATCH: u64 = 20_000;
/// Host-callback enqueues per batch (`gpu_ops`: 2000).
const CALLBACK_BATCH: u64 = 2000;
/// `CU_EVENT_DISABLE_TIMING`.
const CU_EVENT_DISABLE_TIMING: u32 = 2;

/// A page-locked host block (`cuMemHostAlloc`) and a device block (`cuMemAlloc`) of
/// [`COPY_BYTES`] each, for the raw copies.
fn raw_copy_blocks() -> Result<(*mut c_void, sys::CUdeviceptr), String> {
    let mut h = ptr::null_mut();
    // SAFETY: valid out-pointer; no flags; the context is current.
    let r = unsafe { sys::cuMemHostAlloc(&mut h, COPY_BYTES, 0) };
    ck(r, "cuMemHostAlloc")?;
    let mut d = 0;
    // SAFETY: valid out-pointer; the context is current.
    let r = unsafe { sys::cuMemAlloc_v2(&mut d, COPY_BYTES) };
    ck(r, "cuMemAlloc")?;
    Ok((h, d))
}

/// `cuMemcpyHtoDAsync` of [`COPY_BYTES`] from `h` to `d` on `s`.
fn raw_htod(d: sys::CUdeviceptr, h: *mut c_void, s: sys::CUstream) {
    // SAFETY: `h` (page-locked) and `d` are blocks of COPY_BYTES from raw_copy_blocks, live
    // until the end of the run; nothing else touches `h` while copies are pending (the batch
    // ends with a synchronize); `s` is a live stream.
    let r = unsafe { sys::cuMemcpyHtoDAsync_v2(d, h as *const c_void, COPY_BYTES, s) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuMemcpyHtoDAsync");
}

/// `cuMemcpyDtoHAsync` of [`COPY_BYTES`] from `d` to `h` on `s`.
fn raw_dtoh(h: *mut c_void, d: sys::CUdeviceptr, s: sys::CUstream) {
    // SAFETY: as raw_htod, the other direction.
    let r = unsafe { sys::cuMemcpyDtoHAsync_v2(h, d, COPY_BYTES, s) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuMemcpyDtoHAsync");
}

/// `cuEventCreate` (`CU_EVENT_DISABLE_TIMING`) then `cuEventDestroy`.
fn raw_event_pair() {
    let mut e = ptr::null_mut();
    // SAFETY: valid out-pointer; the context is current.
    let r = unsafe { sys::cuEventCreate(&mut e, CU_EVENT_DISABLE_TIMING) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuEventCreate");
    // SAFETY: `e` was just created and is not used again.
    let r = unsafe { sys::cuEventDestroy_v2(e) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuEventDestroy");
}

/// The raw host function: does nothing (no panic can leave it).
unsafe extern "C" fn empty_host_fn(_user: *mut c_void) {}

/// `cuLaunchHostFunc` of [`empty_host_fn`] on `s`.
fn raw_host_func(s: sys::CUstream) {
    // SAFETY: `s` is a live stream; the function ignores its (null) argument.
    let r = unsafe { sys::cuLaunchHostFunc(s, Some(empty_host_fn), ptr::null_mut()) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuLaunchHostFunc");
}

/// One variant: a name and a batch (`ops` operations, then the synchronize, timed and sampled
/// only where `sync_timed`).
struct Variant<'a> {
    name: &'static str,
    launch: Box<dyn FnMut() + 'a>,
    sync: Box<dyn Fn() + 'a>,
    /// Run before each batch, outside its time.
    prep: Option<Box<dyn FnMut() + 'a>>,
    /// Every thread's CPU time and sleeps over the sampled batches (synchronize included).
    threads: threads::Totals,
    ns: Vec<f64>,
    /// Operations per batch.
    ops: u64,
    /// Whether the synchronize that ends a batch is inside its time (the copy rows of
    /// `gpu_ops`: "batch + sync").
    sync_timed: bool,
}

impl<'a> Variant<'a> {
    /// A variant of `ops` operations per batch whose synchronize is not timed.
    fn new(
        name: &'static str,
        ops: u64,
        launch: impl FnMut() + 'a,
        sync: impl Fn() + 'a,
    ) -> Variant<'a> {
        Variant {
            name,
            launch: Box::new(launch),
            sync: Box::new(sync),
            prep: None,
            threads: threads::Totals::default(),
            ns: Vec::new(),
            ops,
            sync_timed: false,
        }
    }

    /// The same with the synchronize timed (and sampled) as part of the batch.
    fn sync_timed(mut self) -> Variant<'a> {
        self.sync_timed = true;
        self
    }

    /// The same with `prep` run before each batch, outside its time.
    fn prep(mut self, prep: impl FnMut() + 'a) -> Variant<'a> {
        self.prep = Some(Box::new(prep));
        self
    }

    /// One batch; returns its time when `timed` (the synchronize inside it where `sync_timed`).
    fn batch(&mut self, prof: Option<(&sampler::Sampler, usize)>) -> Duration {
        if let Some(p) = self.prep.as_mut() {
            p();
        }
        let before = prof.is_some().then(threads::Snapshot::now);
        if let Some((p, i)) = prof {
            p.set_variant(Some(i));
        }
        let t = Instant::now();
        for _ in 0..self.ops {
            (self.launch)();
        }
        if self.sync_timed {
            (self.sync)();
        }
        let d = t.elapsed();
        if let Some((p, _)) = prof {
            p.set_variant(None);
        }
        if !self.sync_timed {
            (self.sync)();
        }
        if let Some(a) = before {
            self.threads
                .add(&a, &threads::Snapshot::now(), sampler::gettid());
        }
        d
    }
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
    // The copies: xstream's page-locked buffers and device buffer, and the raw blocks of the
    // same size (`cuMemHostAlloc`, `cuMemAlloc`), each side its own memory as in `gpu_ops`.
    let cbuf = dev.alloc(COPY_BYTES).map_err(err)?;
    let cref = &cbuf;
    let pin_in = dev
        .alloc_pinned(COPY_BYTES, &PinnedAllocDesc::new())
        .map_err(err)?;
    let mut pin_out = dev
        .alloc_pinned(COPY_BYTES, &PinnedAllocDesc::new())
        .map_err(err)?;
    let (rh, rd) = raw_copy_blocks()?;
    let no_timing = EventDesc::new().flags(EventFlags::DISABLE_TIMING);
    let xsync = || xs.synchronize().expect("synchronize");
    let rsync = || raw_sync(rs);
    let xs_ref = &xs;
    // The callback variants start with xstream's fault watcher stopped (it lingers 50 ms after
    // the last callback) unless the variant starts it on purpose.
    // SIGPROF is blocked meanwhile: a sleep interrupted every 50 µs never ends.
    let settle = || {
        let _blocked = threads::BlockProf::new();
        std::thread::sleep(Duration::from_millis(60));
    };
    let panics = std::sync::Arc::new(xstream_core::callback::PanicSlot::default());
    let pending = xstream_core::callback::PendingCallbacks::default();
    let reusing = xstream_core::callback::PendingCallbacks::default();
    let (panics, pending, reusing) = (&panics, &pending, &reusing);
    let mut vs = vec![
        Variant::new(
            "empty kernel: cuLaunchKernel",
            BATCH,
            || raw_launch(raw_empty, rs, ptr::null_mut()),
            rsync,
        ),
        Variant::new(
            "empty kernel: Stream::launch_kernel",
            BATCH,
            || xs_ref.launch_kernel(&empty, &single, &[]).expect("launch"),
            xsync,
        ),
        Variant::new(
            "3 args: cuLaunchKernel",
            BATCH,
            move || {
                let (mut p, mut n, mut x) = (addr, n3, x3);
                let mut params = [
                    &mut p as *mut u64 as *mut c_void,
                    &mut n as *mut u32 as *mut c_void,
                    &mut x as *mut f32 as *mut c_void,
                ];
                raw_launch(raw_args3, rs, params.as_mut_ptr());
            },
            rsync,
        ),
        Variant::new(
            "3 args: Stream::launch_kernel",
            BATCH,
            || {
                xs_ref
                    .launch_kernel(&args3, &single, &list3)
                    .expect("launch")
            },
            xsync,
        ),
        Variant::new(
            "3 args: launch builder",
            BATCH,
            || {
                xs_ref
                    .launch_builder(&args3)
                    .arg(&buf)
                    .arg(n3)
                    .arg(x3)
                    .launch()
                    .expect("launch")
            },
            xsync,
        ),
        Variant::new(
            "xstream_delay(0): cuLaunchKernel",
            BATCH,
            move || {
                let mut ns = 0u64;
                let mut params = [&mut ns as *mut u64 as *mut c_void];
                raw_launch(raw_delay, rs, params.as_mut_ptr());
            },
            rsync,
        ),
        Variant::new(
            "xstream_delay(0): Stream::launch_builtin(Kernel::Delay)",
            BATCH,
            || {
                xs_ref
                    .launch_builtin(Kernel::Delay(Duration::ZERO))
                    .expect("launch")
            },
            xsync,
        ),
        Variant::new(
            "4 KiB HtoD page-locked (1000 + sync): cuMemcpyHtoDAsync",
            COPY_BATCH,
            move || raw_htod(rd, rh, rs),
            rsync,
        )
        .sync_timed(),
        Variant::new(
            "4 KiB HtoD page-locked (1000 + sync): Stream::write_from_host",
            COPY_BATCH,
            || {
                xs_ref
                    .write_from_host(&pin_in, 0, cref)
                    .expect("write_from_host")
            },
            xsync,
        )
        .sync_timed(),
        Variant::new(
            "4 KiB DtoH page-locked (1000 + sync): cuMemcpyDtoHAsync",
            COPY_BATCH,
            move || raw_dtoh(rh, rd, rs),
            rsync,
        )
        .sync_timed(),
        Variant::new(
            "4 KiB DtoH page-locked (1000 + sync): Stream::read_into_host",
            COPY_BATCH,
            move || {
                xs_ref
                    .read_into_host(cref, &mut pin_out, 0)
                    .expect("read_into_host")
            },
            xsync,
        )
        .sync_timed(),
        Variant::new(
            "event create+destroy DISABLE_TIMING (20000): cuEventCreate + cuEventDestroy",
            EVENT_BATCH,
            raw_event_pair,
            rsync,
        ),
        Variant::new(
            "event create+destroy DISABLE_TIMING (20000): Device::create_event + drop",
            EVENT_BATCH,
            || {
                drop(std::hint::black_box(
                    dev.create_event(&no_timing).expect("create_event"),
                ))
            },
            xsync,
        ),
        Variant::new(
            "host callback enqueue, empty (2000): cuLaunchHostFunc",
            CALLBACK_BATCH,
            move || raw_host_func(rs),
            rsync,
        )
        .prep(settle),
        Variant::new(
            "host callback enqueue, empty (2000): Stream::host_callback",
            CALLBACK_BATCH,
            || xs_ref.host_callback(|_| {}).expect("host_callback"),
            xsync,
        )
        .prep(settle),
        Variant::new(
            "host callback enqueue, empty (2000): cuLaunchHostFunc, xstream's watcher running",
            CALLBACK_BATCH,
            move || raw_host_func(rs),
            rsync,
        )
        .prep(|| {
            settle();
            xs_ref.host_callback(|_| {}).expect("host_callback");
            xs_ref.synchronize().expect("synchronize");
        }),
        Variant::new(
            "host callback enqueue, 500 ns on the callback thread (2000): cuLaunchHostFunc",
            CALLBACK_BATCH,
            move || cbexp::raw_spin(rs, 500),
            rsync,
        )
        .prep(settle),
        Variant::new(
            "host callback enqueue, 1500 ns on the callback thread (2000): cuLaunchHostFunc",
            CALLBACK_BATCH,
            move || cbexp::raw_spin(rs, 1500),
            rsync,
        )
        .prep(settle),
        Variant::new(
            "host callback enqueue, a block freed on the callback thread (2000): cuLaunchHostFunc",
            CALLBACK_BATCH,
            move || cbexp::raw_box(rs),
            rsync,
        )
        .prep(settle),
        Variant::new(
            "host callback enqueue, CallbackSlot untracked (2000): cuLaunchHostFunc",
            CALLBACK_BATCH,
            move || cbexp::raw_slot(rs, panics, SlotFrom::New),
            rsync,
        )
        .prep(settle),
        Variant::new(
            "host callback enqueue, CallbackSlot + PendingCallbacks (2000): cuLaunchHostFunc",
            CALLBACK_BATCH,
            move || cbexp::raw_slot(rs, panics, SlotFrom::NewTracked(pending)),
            move || {
                rsync();
                pending.pending();
            },
        )
        .prep(settle),
        Variant::new(
            "host callback enqueue, CallbackSlot reused from PendingCallbacks + tracked (2000): cuLaunchHostFunc",
            CALLBACK_BATCH,
            move || cbexp::raw_slot(rs, panics, SlotFrom::Reused(reusing)),
            move || {
                rsync();
                reusing.pending();
            },
        )
        .prep(settle),
    ];
    if let Ok(only) = std::env::var("LP_ONLY") {
        vs.retain(|v| v.name.contains(only.as_str()));
    }
    // Warm-up: every variant twice, unsampled.
    for v in vs.iter_mut() {
        for _ in 0..2 {
            v.batch(None);
        }
    }
    let prof = sampler::Sampler::start(vs.len()).map_err(|e| format!("sampler: {e}"))?;
    let nv = vs.len();
    for round in 0..ROUNDS {
        for k in 0..nv {
            let i = (k + round) % nv;
            let v = &mut vs[i];
            let d = v.batch(Some((&prof, i)));
            v.ns.push(d.as_nanos() as f64 / v.ops as f64);
        }
    }
    let samples = prof.stop();
    let places = sampler::Places::of_this_process().map_err(|e| format!("/proc/self/maps: {e}"))?;
    let period_ns = sampler::PERIOD.as_nanos() as f64;

    let mut md = String::new();
    let _ = writeln!(
        md,
        "# launch_profile: {} ({}), {ROUNDS} rounds of {BATCH} launches per variant \
         (the other variants: the operations per batch in their name)\n",
        info.name, info.driver
    );
    let _ = writeln!(
        md,
        "Sampling: SIGPROF every {} µs of the launching thread's wall time; \
         a sample's ns = samples × period / operations. The copy variants' batches end with \
         the synchronize inside their time (as `gpu_ops`' copy rows); the others' do not.\n",
        sampler::PERIOD.as_micros()
    );
    let _ = writeln!(
        md,
        "| variant | ns per operation (p10–p90) | samples | xstream binary ns | libcuda ns | other ns | other threads' samples | every thread's CPU ns and sleeps per operation (synchronize included) |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---|");
    let mut offsets = String::from("variant\toffset\tsamples\toperations\n");
    for (i, v) in vs.iter().enumerate() {
        let (med, p10, p90) = stat(&v.ns);
        let s = &samples.per_variant[i];
        let split = places.split(s);
        let ops = ROUNDS as u64 * v.ops;
        let per = |n: usize| n as f64 * period_ns / ops as f64;
        let _ = writeln!(
            md,
            "| {} | {med:.0} ({p10:.0}–{p90:.0}) | {} | {:.0} | {:.0} | {:.0} | {} | {} |",
            v.name,
            s.len(),
            per(split.exe),
            per(split.cuda),
            per(split.other),
            samples.other_threads[i],
            v.threads.describe(ops),
        );
        for (off, n) in places.exe_offsets(s).into_iter().take(40) {
            let _ = writeln!(offsets, "{}\t{off:#x}\t{n}\t{ops}", v.name);
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
    // `rh` and `rd` are the raw copy blocks, released once, no copy pending (synchronized).
    unsafe {
        let _ = sys::cuStreamDestroy_v2(rs);
        let _ = sys::cuMemFreeHost(rh);
        let _ = sys::cuMemFree_v2(rd);
    }
    Ok(())
}

/// Median, p10 and p90 (nearest rank).
fn stat(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let at = |q: f64| s[((q * (s.len() - 1) as f64).round() as usize).min(s.len() - 1)];
    (at(0.5), at(0.1), at(0.9))
}
