//! Driver calls and heap allocations per xstream operation, counted against the **null
//! driver** (`backends/cuda-null`: a CPU test double of the CUDA driver functions xstream-cuda
//! calls, not a GPU and not a CUDA simulator; it verifies no CUDA behaviour), plus the CPU cost
//! of xstream's wrapper against a raw cudarc `sys` call into the same double.
//!
//! The test re-executes itself in a child process whose `LD_LIBRARY_PATH` starts with a
//! private directory holding `libcuda.so` / `libcuda.so.1` links to `libxstream_cuda_null.so`
//! (built next to this test as a dev-dependency). The child opens `CudaBackend` device 0, and
//! for each operation, after a warm-up and a synchronize, runs it [`N`] times and compares the
//! driver calls the calling thread made (every exported function, by name) and the heap
//! allocations it made with what the code is meant to do. The parent prints the child's
//! table. Off Linux it prints `SKIP: reason`; on Linux a missing double or a child that cannot
//! start is a failure (the workspace builds both: the double is this test's dev-dependency).
//!
//! The CPU-cost table is printed, never asserted (no timed assertions): median ns per call
//! over [`REPEATS`] repeats of [`CALLS`] calls in an optimised build (`--release`), a short
//! run of the same code in a debug build (its numbers mean nothing).
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use xstream_core::{
    Backend, Buffer, Device, Kernel, KernelArg, LaunchConfig, Module, ModuleSource,
    PinnedAllocDesc, Stream, StreamDesc, StreamFlags,
};
use xstream_cuda::cudarc::driver::sys;
use xstream_cuda::{CudaBackend, CudaStream};

#[global_allocator]
static GLOBAL: xstream_conformance::alloc_count::CountingAlloc =
    xstream_conformance::alloc_count::CountingAlloc;
use xstream_conformance::alloc_count::allocs;

mod checks;
mod cost;
mod dispatched;
mod fence;
mod keep;
mod null;
mod releases;
mod vmm;

use checks::*;
use cost::*;
use dispatched::*;
use fence::*;
use keep::*;
use null::*;
use releases::*;
use vmm::*;

/// The environment variable that marks the child and names the linked double.
const CHILD: &str = "XSTREAM_NULL_DRIVER";
/// Operations per counted window (a multiple of 256, the keep-list hand-off).
const N: u64 = 1024;
/// Calls before each counted window: more than two keep-list hand-overs for one entry per
/// call, so that the stream's side stream exists and the driver symbols a hand-over calls
/// (cudarc resolves each on first call) are resolved before the window.
const WARM: u64 = 600;
/// Bytes of the buffers and copies.
const LEN: usize = 4096;
/// The keep-alive entries after which a stream hands its list over on its side stream
/// (`KEEP_FLUSH` in backends/cuda/src/stream/keep.rs).
const KEEP_FLUSH: u64 = 256;
/// Timing: repeats (the median is reported) and calls per repeat, optimised build.
const REPEATS: usize = 7;
const CALLS: usize = 10_000;

const PTX: &str = ".version 8.0\n.target sm_90\n.address_size 64\n\n\
.visible .entry xs_null_empty()\n{\n    ret;\n}\n\n\
.visible .entry xs_null_args3(.param .u64 xs_null_args3_p, .param .u32 xs_null_args3_n, \
.param .f32 xs_null_args3_x)\n{\n    ret;\n}\n";

#[test]
fn driver_calls_and_allocations_per_operation() {
    match std::env::var_os(CHILD) {
        Some(lib) => child(Path::new(&lib)),
        None => parent(),
    }
}

// ---- Parent -------------------------------------------------------------------------------

/// `libxstream_cuda_null.so` next to this test (`target/<profile>/deps`, where cargo builds
/// it as a dev-dependency) or in the profile directory.
fn find_double() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    [deps.to_path_buf(), deps.parent()?.to_path_buf()]
        .into_iter()
        .map(|d| d.join("libxstream_cuda_null.so"))
        .find(|p| p.exists())
}

fn skip(reason: &str) {
    eprintln!("SKIP: driver_calls_and_allocations_per_operation: {reason}");
}

fn parent() {
    if !cfg!(target_os = "linux") {
        return skip(
            "the null driver is linked as libcuda.so through LD_LIBRARY_PATH (Linux only)",
        );
    }
    let lib = find_double().expect(
        "libxstream_cuda_null.so is not next to this test: cargo builds it as this test's \
         dev-dependency (cargo build -p xstream-cuda-null)",
    );
    let dir = std::env::temp_dir().join(format!("xstream-null-driver-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the private library directory");
    #[cfg(unix)]
    for name in ["libcuda.so", "libcuda.so.1"] {
        std::os::unix::fs::symlink(&lib, dir.join(name)).expect("link libcuda.so to the double");
    }
    let mut path = std::ffi::OsString::from(&dir);
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        path.push(":");
        path.push(old);
    }
    let exe = std::env::current_exe().expect("current_exe");
    let out = std::process::Command::new(exe)
        .args([
            "driver_calls_and_allocations_per_operation",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LD_LIBRARY_PATH", path)
        .env(CHILD, dir.join("libcuda.so"))
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    let out = out.unwrap_or_else(|e| panic!("cannot start the null-driver child process: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "the null-driver child failed ({})",
        out.status
    );
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "the child did not run the test exactly once"
    );
}

// ---- Child --------------------------------------------------------------------------------

/// One counted operation: driver calls and allocations over [`N`] runs.
struct Row {
    label: &'static str,
    calls: BTreeMap<String, u64>,
    others: BTreeMap<String, u64>,
    allocs: u64,
}

/// Warms `op` up, synchronizes, then counts [`N`] runs of it (the synchronize after is outside
/// the count).
fn measure(
    null: &Null,
    names: &[String],
    s: &CudaStream,
    label: &'static str,
    mut op: impl FnMut(),
) -> Row {
    for _ in 0..WARM {
        op();
    }
    s.synchronize().expect("synchronize after the warm-up");
    null.reset();
    let a0 = allocs();
    for _ in 0..N {
        op();
    }
    let allocs = allocs() - a0;
    let calls = null.thread_counts(names);
    // Calls other threads made meanwhile (xstream's fault watcher, host functions): timing
    // dependent, printed, not asserted.
    let others = names
        .iter()
        .map(|n| {
            let mine = calls.get(n).copied().unwrap_or(0);
            (n.clone(), null.calls(n).saturating_sub(mine))
        })
        .filter(|(_, c)| *c > 0)
        .collect();
    s.synchronize().expect("synchronize after the count");
    Row {
        label,
        calls,
        others,
        allocs,
    }
}

fn expect_calls(row: &Row, want: &[(&str, u64)]) {
    let want: BTreeMap<String, u64> = want
        .iter()
        .filter(|(_, c)| *c > 0)
        .map(|(n, c)| (n.to_string(), *c))
        .collect();
    assert_eq!(
        row.calls, want,
        "{}: driver calls over {N} operations",
        row.label
    );
}

fn per_op(n: u64) -> String {
    let v = n as f64 / N as f64;
    if v == v.trunc() {
        format!("{v}")
    } else {
        format!("{v:.4}")
    }
}

fn print_rows(rows: &[Row]) {
    println!(
        "\nDriver calls and heap allocations per operation (null driver, {N} operations after a \
         warm-up; calling thread only)"
    );
    println!(
        "| operation | driver calls per operation | heap allocations per operation | other \
         threads' driver calls in the window (total) |"
    );
    println!("|---|---|---|---|");
    for r in rows {
        let calls: Vec<String> = r
            .calls
            .iter()
            .map(|(n, c)| format!("{n} {}", per_op(*c)))
            .collect();
        let others: Vec<String> = r.others.iter().map(|(n, c)| format!("{n} {c}")).collect();
        let others = if others.is_empty() {
            "none".to_string()
        } else {
            others.join(", ")
        };
        println!(
            "| {} | {} | {} | {others} |",
            r.label,
            calls.join(", "),
            per_op(r.allocs)
        );
    }
}

fn nb() -> StreamDesc {
    StreamDesc::new().flags(StreamFlags::NON_BLOCKING)
}

fn child(lib: &Path) {
    let null = Null::open(lib);
    let names = null.names();
    let dev = CudaBackend::open(0).expect("CudaBackend::open(0) on the null driver");
    assert!(
        null.calls("cuInit") >= 1,
        "the library the test opened is not the one cudarc loaded"
    );
    assert!(
        dev.info().name.contains("null driver"),
        "device 0 is not the null driver: {}",
        dev.info().name
    );
    let s = dev.create_stream(&nb()).expect("create_stream");
    let other = dev.create_stream(&nb()).expect("create_stream");
    let m = dev
        .load_module(&ModuleSource::Ptx(PTX))
        .expect("load the test PTX");
    let empty = m.function("xs_null_empty").expect("xs_null_empty");
    let args3 = m.function("xs_null_args3").expect("xs_null_args3");
    assert_eq!(args3.param_sizes(), Some(&[8usize, 4, 4][..]));
    let delay = dev
        .builtin_module()
        .expect("builtin module")
        .function(xstream_core::module::BUILTIN_DELAY)
        .expect("xstream_delay");
    let buf = dev.alloc(LEN).expect("alloc");
    let mut hb = dev
        .alloc_pinned(LEN, &PinnedAllocDesc::new())
        .expect("alloc_pinned");
    let single = LaunchConfig::single();
    let addr = buf.device_address();

    // The copies move the bytes (device memory is host memory in the double).
    let pattern: Vec<u32> = (0..(LEN / 4) as u32).map(|i| i ^ 0x5a5a_5a5a).collect();
    let mut back = vec![0u32; LEN / 4];
    s.write_from_blocking(&buf, &pattern[..])
        .expect("write_from_blocking");
    s.read_into_blocking(&buf, &mut back[..])
        .expect("read_into_blocking");
    assert_eq!(
        back, pattern,
        "write_from_blocking + read_into_blocking round trip"
    );
    hb.typed_mut::<u32>()
        .expect("typed_mut")
        .iter_mut()
        .for_each(|w| *w = 7);
    s.write_from_host(&hb, 0, &buf).expect("write_from_host");
    s.read_into_blocking(&buf, &mut back[..])
        .expect("read_into_blocking");
    assert!(back.iter().all(|&w| w == 7), "write_from_host");

    // No random-number kernel: the device lacks RANDOM and the fill is Unsupported, before
    // any driver call.
    assert!(!dev
        .info()
        .capabilities
        .contains(xstream_core::Capabilities::RANDOM));
    let launches = null.calls("cuLaunchKernel");
    let r = s.launch_builtin(Kernel::Random {
        buf: &buf,
        offset: 0,
        len: 16,
        fill: xstream_core::RandomFill::new(
            xstream_core::Distribution::Uniform { min: 0.0, max: 1.0 },
            xstream_core::RandomType::F32,
            1,
        ),
    });
    assert!(r.as_ref().is_err_and(|e| e.is_unsupported()), "{r:?}");
    assert_eq!(
        null.calls("cuLaunchKernel"),
        launches,
        "a refused fill launched"
    );
    s.write_from_blocking(&buf, &pattern[..])
        .expect("write_from_blocking");
    s.read_into_host(&buf, &mut hb, 0).expect("read_into_host");
    assert_eq!(hb.typed::<u32>().expect("typed"), &pattern[..]);
    // A launch with a wrong argument is refused before the driver sees it.
    assert!(s
        .launch_kernel(&args3, &single, &[KernelArg::U32(1)])
        .is_err());
    wrong_arguments_are_refused(&null, &s, &args3, &buf);

    let scalars = [KernelArg::U64(addr), KernelArg::U32(7), KernelArg::F32(0.5)];
    let with_buf = [
        KernelArg::Buffer(&buf),
        KernelArg::U32(7),
        KernelArg::F32(0.5),
    ];
    let mut rows = Vec::new();
    let mut data = pattern.clone();

    rows.push(measure(
        &null,
        &names,
        &s,
        "launch_kernel: no parameters (user PTX)",
        || s.launch_kernel(&empty, &single, &[]).unwrap(),
    ));
    rows.push(measure(
        &null,
        &names,
        &s,
        "launch_kernel: u64, u32, f32 (scalars)",
        || s.launch_kernel(&args3, &single, &scalars).unwrap(),
    ));
    rows.push(measure(
        &null,
        &names,
        &s,
        "launch builder: u64, u32, f32 (scalars)",
        || {
            s.launch_builder(&args3)
                .arg(addr)
                .arg(7u32)
                .arg(0.5f32)
                .launch()
                .unwrap()
        },
    ));
    rows.push(measure(
        &null,
        &names,
        &s,
        "launch_kernel: buffer, u32, f32",
        || s.launch_kernel(&args3, &single, &with_buf).unwrap(),
    ));
    rows.push(measure(
        &null,
        &names,
        &s,
        "launch builder: buffer, u32, f32",
        || {
            s.launch_builder(&args3)
                .arg(&buf)
                .arg(7u32)
                .arg(0.5f32)
                .launch()
                .unwrap()
        },
    ));
    rows.push(measure(
        &null,
        &names,
        &s,
        "launch(Kernel::Delay(0)) (builtin module)",
        || s.launch_builtin(Kernel::Delay(Duration::ZERO)).unwrap(),
    ));
    rows.push(measure(
        &null,
        &names,
        &s,
        "write_from_blocking 4 KiB (pageable)",
        || s.write_from_blocking(&buf, &data[..]).unwrap(),
    ));
    rows.push(measure(
        &null,
        &names,
        &s,
        "read_into_blocking 4 KiB (pageable)",
        || s.read_into_blocking(&buf, &mut data[..]).unwrap(),
    ));
    rows.push(measure(
        &null,
        &names,
        &s,
        "write_from_host 4 KiB (page-locked)",
        || s.write_from_host(&hb, 0, &buf).unwrap(),
    ));
    rows.push(measure(
        &null,
        &names,
        &s,
        "read_into_host 4 KiB (page-locked)",
        || s.read_into_host(&buf, &mut hb, 0).unwrap(),
    ));
    rows.push(measure(&null, &names, &s, "record_event", || {
        drop(s.record_event().unwrap())
    }));
    rows.push(measure(&null, &names, &s, "join (another stream)", || {
        s.wait_stream(&other).unwrap()
    }));
    rows.push(measure(
        &null,
        &names,
        &s,
        "create_stream (NON_BLOCKING) + drop",
        || drop(dev.create_stream(&nb()).unwrap()),
    ));
    rows.push(measure(
        &null,
        &names,
        &s,
        "alloc_async 4 KiB + free_async (default pool)",
        || s.free_async(s.alloc_async(LEN).unwrap()).unwrap(),
    ));
    print_rows(&rows);
    check_rows(&rows);
    pinned_fence_on_demand(&null, &dev, &s, &other, &buf);
    raw_buffers(&null, &dev, &s);
    virtual_memory(&null, &dev, &s);
    sharing(&null, &dev);
    dropped_stream_releases(&null, &dev, &args3);
    event_outlives_its_future(&null, &dev);
    device_dropped_in_a_host_callback(&null, &s);
    vmm_dropped_in_a_host_callback(&null, &dev, &s);
    releases_outlive_their_device(&null, &s);
    allocator_in_a_host_callback(&null, &dev, &s);
    lazy_stream_state(&null, &dev);
    keep_hand_overs(&null, &dev, &args3);

    timing_table(&null, &s, &empty, &args3, &delay, &buf, &mut hb);
    more_timing(&null, &dev, &s, &delay);
}
