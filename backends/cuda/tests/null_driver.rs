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
    Backend, Buffer, Device, HostAllocDesc, Kernel, KernelArg, LaunchConfig, Module, ModuleSource,
    Stream, StreamDesc, StreamFlags,
};
use xstream_cuda::cudarc::driver::sys;
use xstream_cuda::{CudaBackend, CudaStream};

#[global_allocator]
static GLOBAL: xstream_conformance::alloc_count::CountingAlloc =
    xstream_conformance::alloc_count::CountingAlloc;
use xstream_conformance::alloc_count::allocs;

/// The environment variable that marks the child and names the linked double.
const CHILD: &str = "XSTREAM_NULL_DRIVER";
/// Operations per counted window (a multiple of 256, the keep-list hand-off).
const N: u64 = 1024;
/// Calls before each counted window.
const WARM: u64 = 300;
/// Bytes of the buffers and copies.
const LEN: usize = 4096;
/// The keep-alive entries after which a stream hands its list to a host function
/// (`KEEP_FLUSH` in backends/cuda/src/stream/memory.rs).
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

// ---- The double's counters ----------------------------------------------------------------

struct Null {
    lib: libloading::Library,
}

impl Null {
    fn open(p: &Path) -> Self {
        // SAFETY: the double's initialisers are Rust statics without preconditions; the path
        // is the one cudarc opens (the same loaded instance).
        let lib = unsafe { libloading::Library::new(p) }.expect("dlopen the null driver");
        Self { lib }
    }

    /// `xnull_functions`: the exported driver functions.
    fn names(&self) -> Vec<String> {
        // SAFETY: `size_t xnull_functions(const char **names, size_t cap)` (cuda-null docs).
        let f = unsafe {
            *self
                .lib
                .get::<unsafe extern "C" fn(*mut *const c_char, usize) -> usize>(
                    b"xnull_functions\0",
                )
                .expect("xnull_functions")
        };
        // SAFETY: a null array with capacity 0 only asks for the count.
        let n = unsafe { f(std::ptr::null_mut(), 0) };
        let mut v = vec![std::ptr::null::<c_char>(); n];
        // SAFETY: `v` holds `n` writable entries.
        let got = unsafe { f(v.as_mut_ptr(), n) };
        assert_eq!(got, n);
        v.into_iter()
            // SAFETY: static NUL-terminated names of the double.
            .map(|p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
            .collect()
    }

    fn count(&self, symbol: &[u8], name: &str) -> u64 {
        // SAFETY: `uint64_t xnull_calls(const char*)` / `xnull_thread_calls` (cuda-null docs).
        let f = unsafe {
            *self
                .lib
                .get::<unsafe extern "C" fn(*const c_char) -> u64>(symbol)
                .expect("xnull counter")
        };
        let c = CString::new(name).expect("no NUL in a name");
        // SAFETY: a valid C string for the call.
        let v = unsafe { f(c.as_ptr()) };
        assert_ne!(v, u64::MAX, "the null driver does not export {name}");
        v
    }

    /// Calls of `name` by every thread since the last reset.
    fn calls(&self, name: &str) -> u64 {
        self.count(b"xnull_calls\0", name)
    }

    /// This thread's calls, by name, of every function it called since its last reset.
    fn thread_counts(&self, names: &[String]) -> BTreeMap<String, u64> {
        names
            .iter()
            .map(|n| (n.clone(), self.count(b"xnull_thread_calls\0", n)))
            .filter(|(_, c)| *c > 0)
            .collect()
    }

    /// `xnull_wait_ns`: ns callers spent blocked waiting for host functions since the reset.
    fn wait_ns(&self) -> u64 {
        // SAFETY: `uint64_t xnull_wait_ns(void)` (cuda-null docs).
        let f = unsafe {
            *self
                .lib
                .get::<unsafe extern "C" fn() -> u64>(b"xnull_wait_ns\0")
                .expect("xnull_wait_ns")
        };
        // SAFETY: no arguments.
        unsafe { f() }
    }

    fn reset(&self) {
        // SAFETY: `void xnull_reset(void)`.
        let f = unsafe {
            *self
                .lib
                .get::<unsafe extern "C" fn()>(b"xnull_reset\0")
                .expect("xnull_reset")
        };
        // SAFETY: no arguments.
        unsafe { f() }
    }
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
        .alloc_host(LEN, &HostAllocDesc::new())
        .expect("alloc_host");
    let single = LaunchConfig::single();
    let addr = buf.device_address();

    // The copies move the bytes (device memory is host memory in the double).
    let pattern: Vec<u32> = (0..(LEN / 4) as u32).map(|i| i ^ 0x5a5a_5a5a).collect();
    let mut back = vec![0u32; LEN / 4];
    s.write_from(&buf, &pattern[..]).expect("write_from");
    s.read_into(&buf, &mut back[..]).expect("read_into");
    assert_eq!(back, pattern, "write_from + read_into round trip");
    hb.typed_mut::<u32>()
        .expect("typed_mut")
        .iter_mut()
        .for_each(|w| *w = 7);
    s.write_from_host(&hb, 0, &buf).expect("write_from_host");
    s.read_into(&buf, &mut back[..]).expect("read_into");
    assert!(back.iter().all(|&w| w == 7), "write_from_host");
    s.write_from(&buf, &pattern[..]).expect("write_from");
    s.read_into_host(&buf, &mut hb, 0).expect("read_into_host");
    assert_eq!(hb.typed::<u32>().expect("typed"), &pattern[..]);
    // A launch with a wrong argument is refused before the driver sees it.
    assert!(s
        .launch_kernel(&args3, &single, &[KernelArg::U32(1)])
        .is_err());

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
        || s.launch(Kernel::Delay(Duration::ZERO)).unwrap(),
    ));
    rows.push(measure(
        &null,
        &names,
        &s,
        "write_from 4 KiB (pageable)",
        || s.write_from(&buf, &data[..]).unwrap(),
    ));
    rows.push(measure(
        &null,
        &names,
        &s,
        "read_into 4 KiB (pageable)",
        || s.read_into(&buf, &mut data[..]).unwrap(),
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
        s.join(&other).unwrap()
    }));
    print_rows(&rows);
    check_rows(&rows);
    raw_buffers(&null, &dev, &s);
    dropped_stream_releases(&null, &dev, &args3);

    timing_table(&null, &s, &empty, &args3, &delay, &buf, &mut hb);
    more_timing(&null, &dev, &s, &delay);
}

/// Waits until every thread made `want` calls of `name` since the last reset, at most `guard`
/// (not a timing bound: a buffer's `cuMemFree` may run behind its stream's work, off the
/// dropping thread). Returns the count then.
fn wait_calls(null: &Null, name: &str, want: u64, guard: Duration) -> u64 {
    let end = Instant::now() + guard;
    loop {
        let n = null.calls(name);
        if n >= want || Instant::now() > end {
            return n;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What a dropped stream does with the buffers its work used (`backends/cuda/src/stream/drop.rs`):
/// when its work is known complete (here observed through an event only, so its keep-alive
/// list was never trimmed, as in the conformance check `record_event_orders`), the last
/// reference's `cuMemFree` runs on the dropping thread before `drop` returns, never later on
/// another thread (where it would wait for the whole device at a moment no caller controls);
/// while its work is still held, the drop frees nothing and returns, and the memory is freed
/// once the work ran. Behaviour of this crate's code only: the double is not a GPU.
fn dropped_stream_releases(
    null: &Null,
    dev: &xstream_cuda::CudaDevice,
    f: &xstream_cuda::CudaFunction,
) {
    use xstream_core::Event;
    let single = LaunchConfig::single();
    let launch = |s: &CudaStream, b: &xstream_cuda::CudaBuffer| {
        s.launch_kernel(
            f,
            &single,
            &[KernelArg::Buffer(b), KernelArg::U32(1), KernelArg::F32(1.0)],
        )
        .expect("launch with a buffer")
    };

    // Completed work, seen through an event: freed inline, on this thread.
    let a = dev.create_stream(&nb()).expect("create_stream");
    let b = dev.alloc(LEN).expect("alloc");
    launch(&a, &b);
    let e = a.record_event().expect("record_event");
    drop(b);
    e.synchronize().expect("event synchronize");
    drop(e);
    null.reset();
    drop(a);
    assert_eq!(
        null.count(b"xnull_thread_calls\0", "cuMemFree_v2"),
        1,
        "a dropped stream whose work had completed left its buffer's cuMemFree to another \
         thread (it runs later, at a time the caller does not control)"
    );
    // This thread's calls only: another thread's late release of an earlier check's work
    // may launch a host function meanwhile (seen once on a loaded CI machine).
    assert_eq!(
        null.count(b"xnull_thread_calls\0", "cuLaunchHostFunc"),
        0,
        "a completed stream's release went through a host function"
    );

    // Work held by a host callback: the drop frees nothing and returns; the free follows the
    // work.
    let a = dev.create_stream(&nb()).expect("create_stream");
    let b = dev.alloc(LEN).expect("alloc");
    let (open, held) = std::sync::mpsc::channel::<()>();
    a.host_callback(move |_| {
        // A guard, not a timing bound: the test opens it below.
        let _ = held.recv_timeout(Duration::from_secs(30));
    })
    .expect("host_callback");
    launch(&a, &b);
    drop(b);
    null.reset();
    drop(a);
    assert_eq!(
        null.calls("cuMemFree_v2"),
        0,
        "a dropped stream freed a buffer its held work still uses"
    );
    open.send(()).expect("open the held callback");
    assert_eq!(
        wait_calls(null, "cuMemFree_v2", 1, Duration::from_secs(10)),
        1,
        "the buffer of a dropped stream was not freed once its work ran"
    );
    println!("dropped streams: completed work released inline, held work released after it ran");
}

/// `Buffer::into_raw` / `from_raw` / `from_raw_borrowed` through the CUDA backend's own code
/// (`backends/cuda/src/memory.rs`), against the double's allocation table: the bytes survive
/// the round trip, `into_raw` frees nothing, a borrowed buffer never frees, the owner frees
/// exactly once, and the descriptors the driver can check (`cuMemGetAddressRange`) are refused
/// when wrong. Behaviour of this crate's code only: the double is not a GPU.
fn raw_buffers(null: &Null, dev: &xstream_cuda::CudaDevice, s: &CudaStream) {
    use xstream_core::{BackendKind, Error, RawAlloc, RawBuffer};
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
    let b = dev.alloc(1000).expect("alloc");
    s.write_from(&b, &data).expect("write_from");
    null.reset();
    let raw = b.into_raw();
    s.synchronize().expect("synchronize");
    assert_eq!(
        raw.len, 1000,
        "the descriptor's length is not the requested one"
    );
    assert_eq!(raw.alloc, RawAlloc::Plain);
    assert_eq!(raw.backend, BackendKind::Cuda);
    assert_eq!(null.calls("cuMemFree_v2"), 0, "into_raw freed the memory");

    // Descriptors the backend must refuse (checked before anything is taken over).
    let refused = |r: xstream_core::Result<xstream_cuda::CudaBuffer>, what: &str| match r {
        Err(Error::InvalidArgument(_) | Error::WrongDevice(_) | Error::Unsupported { .. }) => {}
        other => panic!("{what}: expected a refusal, got {other:?}"),
    };
    let bad = [
        (
            RawBuffer {
                backend: BackendKind::Host,
                ..raw
            },
            "another backend",
        ),
        (
            RawBuffer {
                ordinal: raw.ordinal + 1,
                ..raw
            },
            "another device",
        ),
        (RawBuffer { address: 0, ..raw }, "a null address"),
        (
            RawBuffer {
                address: raw.address + 16,
                len: 16,
                ..raw
            },
            "owned, not at the allocation's base",
        ),
        (
            RawBuffer {
                len: raw.len + (1 << 20),
                ..raw
            },
            "past the allocation's end",
        ),
        (
            RawBuffer {
                address: 0x10,
                len: 16,
                ..raw
            },
            "no allocation there",
        ),
    ];
    for (r, what) in bad {
        // SAFETY: each descriptor is refused before any memory is taken over (the assertion).
        refused(unsafe { xstream_cuda::CudaBuffer::from_raw(dev, r) }, what);
    }
    // A part of a live allocation may be borrowed; past its end may not.
    // SAFETY: the range lies inside the live allocation, which outlives the borrow.
    let part = unsafe {
        xstream_cuda::CudaBuffer::from_raw_borrowed(
            dev,
            RawBuffer {
                address: raw.address + 16,
                len: 16,
                ..raw
            },
        )
    }
    .expect("borrow a part of a live allocation");
    assert_eq!(part.len(), 16);
    // SAFETY: refused before anything is taken over (the assertion).
    refused(
        unsafe {
            xstream_cuda::CudaBuffer::from_raw_borrowed(
                dev,
                RawBuffer {
                    len: raw.len + (1 << 20),
                    ..raw
                },
            )
        },
        "borrowed past the allocation's end",
    );

    // SAFETY: `raw` came from `into_raw` of a live plain allocation of this device; nothing
    // else frees it.
    let back = unsafe { xstream_cuda::CudaBuffer::from_raw(dev, raw) }.expect("from_raw");
    // SAFETY: the same allocation, owned by `back`, which outlives `alias`.
    let alias = unsafe { xstream_cuda::CudaBuffer::from_raw_borrowed(dev, raw) }
        .expect("from_raw_borrowed");
    let mut got = vec![0u8; 1000];
    s.read_into(&alias, &mut got).expect("read_into");
    assert_eq!(got, data, "the bytes did not survive into_raw / from_raw");
    s.memset(&back, 0, 8, 0xee)
        .expect("memset through the owner");
    s.read_into(&alias, &mut got).expect("read_into");
    assert_eq!(
        &got[..8],
        &[0xee; 8],
        "the alias does not see the owner's write"
    );
    drop(alias);
    drop(part);
    s.synchronize().expect("synchronize");
    assert_eq!(
        // A short window: a free would come from the drops just made (the owner's, below,
        // takes the same path and is waited for up to 10 s).
        wait_calls(null, "cuMemFree_v2", 1, Duration::from_millis(300)),
        0,
        "a borrowed buffer freed its owner's memory"
    );
    drop(back);
    s.synchronize().expect("synchronize");
    assert_eq!(
        wait_calls(null, "cuMemFree_v2", 1, Duration::from_secs(10)),
        1,
        "the buffer taken back by from_raw was not freed exactly once"
    );
    println!("raw buffers: round trip, refusals and frees as intended");
}

/// What the code is meant to do, per operation (read from its paths; see each comment).
fn check_rows(rows: &[Row]) {
    let by = |label: &str| {
        rows.iter()
            .find(|r| r.label == label)
            .unwrap_or_else(|| panic!("no row {label}"))
    };
    // A launch is one `cuLaunchKernel` (module.rs `launch_ex` → ffi `launch_values`); the
    // context binding is cached per thread (no `cuCtxSetCurrent`), the layout was read at
    // `function()`, and up to 32 values and pointers live on the stack: no allocation.
    for label in [
        "launch_kernel: no parameters (user PTX)",
        "launch_kernel: u64, u32, f32 (scalars)",
        "launch builder: u64, u32, f32 (scalars)",
        "launch(Kernel::Delay(0)) (builtin module)",
    ] {
        let r = by(label);
        expect_calls(r, &[("cuLaunchKernel", N)]);
        assert_eq!(r.allocs, 0, "{label}: heap allocations over {N} launches");
    }
    // A buffer argument adds one entry to the stream's keep-alive list (stream/memory.rs
    // `keep`): every KEEP_FLUSH entries the list is handed to a host function (one
    // `cuLaunchHostFunc`) and replaced by a list allocated at full size.
    let keep_flushes = |entries_per_op: u64| N * entries_per_op / KEEP_FLUSH;
    for label in [
        "launch_kernel: buffer, u32, f32",
        "launch builder: buffer, u32, f32",
    ] {
        let r = by(label);
        expect_calls(
            r,
            &[("cuLaunchKernel", N), ("cuLaunchHostFunc", keep_flushes(1))],
        );
        expect_flush_allocs(r, keep_flushes(1));
    }
    // Pageable typed copies: the copy and a `cuStreamSynchronize` (the slice is free again on
    // return), no allocation (stream/memory.rs `write_bytes_now` / `read_bytes_now`).
    for (label, copy) in [
        ("write_from 4 KiB (pageable)", "cuMemcpyHtoDAsync_v2"),
        ("read_into 4 KiB (pageable)", "cuMemcpyDtoHAsync_v2"),
    ] {
        let r = by(label);
        expect_calls(r, &[(copy, N), ("cuStreamSynchronize", N)]);
        assert_eq!(r.allocs, 0, "{label}: heap allocations over {N} copies");
    }
    // Page-locked copies: the copy, then the host buffer's fence event recorded behind it
    // (xstream-core hostmem.rs `fenced_copy`; created once, no wait on the same stream), and
    // two keep-alive entries per copy (the device buffer and the host span).
    for (label, copy) in [
        (
            "write_from_host 4 KiB (page-locked)",
            "cuMemcpyHtoDAsync_v2",
        ),
        ("read_into_host 4 KiB (page-locked)", "cuMemcpyDtoHAsync_v2"),
    ] {
        let r = by(label);
        expect_calls(
            r,
            &[
                (copy, N),
                ("cuEventRecord", N),
                ("cuLaunchHostFunc", keep_flushes(2)),
            ],
        );
        expect_flush_allocs(r, keep_flushes(2));
    }
    // `record_event` (the trait's default): a new timing-disabled event, recorded, then
    // destroyed inline when dropped; one allocation per event (the `Arc` of its handle: the
    // flag translation is remembered per request and the flag report made only when read,
    // backends/cuda/src/flag_memo.rs).
    let r = by("record_event");
    expect_calls(
        r,
        &[
            ("cuEventCreate", N),
            ("cuEventRecord", N),
            ("cuEventDestroy_v2", N),
        ],
    );
    assert_eq!(r.allocs, N, "record_event: heap allocations");
    // `join`: one pooled event (event_pool.rs `order_after`), recorded on the other stream
    // and waited for here; the pool is warm, so nothing is created or allocated.
    let r = by("join (another stream)");
    expect_calls(r, &[("cuEventRecord", N), ("cuStreamWaitEvent", N)]);
    assert_eq!(r.allocs, 0, "join: heap allocations");
}

/// Allocations of `flushes` keep-list hand-offs (stream/memory.rs `keep`, stream/drop.rs
/// `release_after`). Five per hand-off are fixed by the code and asserted as the floor: the
/// new list, the holder `Arc`, the boxed callback, the panic slot `Arc`, the callback slot
/// `Arc`. Above that, up to four more per hand-off are allowed, and they are not pinned because
/// they depend on when other threads run, which this test does not control (it uses no timed
/// waits): the device's pending-callback list grows (1) when the driver's callback thread has
/// not yet retired the earlier slots, and the fault watcher registers again (its boxed check,
/// its completion state, the poller queue's growth: 3) when it went idle between two
/// hand-offs.
fn expect_flush_allocs(r: &Row, flushes: u64) {
    let fixed = 5 * flushes;
    assert!(
        (fixed..=fixed + 4 * flushes).contains(&r.allocs),
        "{}: {} heap allocations over {N} operations ({flushes} keep-list hand-offs): expected \
         the {fixed} fixed ones (5 per hand-off) plus at most 4 per hand-off from the \
         pending-callback list and the fault watcher",
        r.label,
        r.allocs
    );
    println!(
        "{}: {} allocations = {fixed} fixed (5 per hand-off) + {} from the callback list / watcher",
        r.label,
        r.allocs,
        r.allocs - fixed
    );
}

// ---- CPU cost -----------------------------------------------------------------------------

fn ck(r: sys::CUresult, what: &str) {
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "{what}");
}

/// Raw `cuLaunchKernel` of one block of one thread with `params` (null for none).
fn raw_launch(f: sys::CUfunction, s: sys::CUstream, params: *mut *mut c_void) {
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
fn compare(
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

fn timed(n: usize, mut f: impl FnMut()) -> Duration {
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
/// host-callback enqueue, the 4-stream chain), against raw calls into the double, and
/// cudarc's safe event API against the same raw calls (the event row's target is cudarc).
fn more_timing(
    null: &Null,
    dev: &xstream_cuda::CudaDevice,
    s: &CudaStream,
    delay: &xstream_cuda::CudaFunction,
) {
    use xstream_core::{Event, EventDesc, EventFlags};
    let optimised = !cfg!(debug_assertions);
    let (reps, n) = if optimised {
        (REPEATS, CALLS)
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
                            xs4[i].launch(Kernel::Delay(Duration::ZERO)).unwrap();
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
fn timing_table(
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
