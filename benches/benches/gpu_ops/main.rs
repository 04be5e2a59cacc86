//! GPU per-operation costs, side by side: xstream's CUDA backend (through the `xstream_core`
//! traits), the raw driver (`cudarc::driver::sys`, same operation, same flags) and cudarc's safe
//! API (`CudaContext` / `CudaStream` / `CudaEvent`, where it has the operation).
//!
//! A plain `main` (no criterion), for the GPU machine: `bash gpu-bundle/gpu-run.sh` with
//! `BENCH=1`, or directly `gpu-bundle/bench/gpu_ops`. Without a usable CUDA device it prints
//! `SKIP: no CUDA device: <reason>` and exits 0.
//!
//! # Method
//! Every operation runs a warm-up batch per variant, then [`REPS`] repeats of a batch of `N`
//! iterations (a row whose target needs more, the virtual-memory row, says its own count under
//! the table and in its JSON `reps`); the variants are interleaved within each repeat (the
//! order rotates), so clock and thermal drift hit all of them alike. A cell is the host-side ns per operation: the
//! median over the repeats, with p10 and p90 (nearest rank). Work that an operation enqueues
//! is drained after each batch, outside the timed region, unless the row says "+ sync".
//!
//! Output: a Markdown table (printed last), a JSON line, and, when `$OUT` is set,
//! `$OUT/gpu_bench.md` and `$OUT/gpu_bench.json`.
//!
//! # Layout
//! - `main.rs` (this file): the constants, `main` and `run`, the one sequence of sections
//!   (idle paths, per-operation rows, 4-stream chains, graphs, synchronize latency, memory
//!   flatness) and the report. `run` stays one function, longer than the ~600-line rule,
//!   because every section reuses the long-lived streams, events and kernels created at its
//!   top in one context state, and the report reads every section's results.
//! - `stats.rs`: median / p10 / p90, rows, targets, verdicts, cell formatting.
//! - `measure.rs`: batches, interleaved repeats, the idle-path and `alloc_async` rows.
//! - `raw.rs`: the raw-driver side (`cudarc::driver::sys`) and memory readings.
//! - `sync.rs`: the synchronize-latency section.
//! - `json.rs`: the JSON writer.
//! - `gpu_data.rs`: the data path (pipelines, page-locked bandwidth, typed copies) against the
//!   raw driver.
//! - `nosync.rs`: allocation and frees while another stream is busy (no host synchronization),
//!   against the raw driver.
//! - `vmm.rs`: mapping a chunk of physical memory (map + set access + unmap) against the raw
//!   driver.
//! - `expandable.rs`: the expandable caching allocator's hot path (`xstream_examples::expandable`,
//!   a cached block allocated and freed), beside the driver's stream-ordered pool.
//! - `modules.rs`: the module launch path and the launch builder against raw `cuLaunchKernel`,
//!   and heap allocations per launch and per typed copy (this binary's counting
//!   `#[global_allocator]`).
//!
//! # Why one file of this size
//! `run` is the run order of every row: each row must run in the same context state as its raw
//! counterpart (after kernels, idle queries and synchronizes cost several times what they cost
//! before any), so the order is kept in one place a reader can follow top to bottom; the rows'
//! helpers live in the sibling modules.

use std::ffi::c_void;
use std::fmt::Write as _;
use std::hint::black_box;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::sys;
use xstream_core::{
    Backend, CaptureMode, Device, Error, Event, EventDesc, EventFlags, Graph, Kernel, PoolConfig,
    PriorityClass, Stream, StreamDesc, StreamFlags, StreamPool,
};
use xstream_cuda::{ptx_source, CudaBackend, CudaDevice, CudaEvent, CudaStream};

/// Repeats per operation (after one warm-up batch).
const REPS: usize = 7;
/// `CU_STREAM_NON_BLOCKING`.
const CU_STREAM_NON_BLOCKING: u32 = 1;
/// `CU_EVENT_DISABLE_TIMING`.
const CU_EVENT_DISABLE_TIMING: u32 = 2;
/// Rounds of the 4-stream launch/record/wait chain.
const CHAIN_ROUNDS: usize = 16;
/// Kernels in the captured graph (and in the direct-launch comparison).
const GRAPH_NODES: usize = 100;
/// The kernel length of the synchronize-latency section.
const SYNC_KERNEL: Duration = Duration::from_millis(2);
/// Streams and events created and dropped by the memory-flatness section.
const FLAT_COUNT: usize = 100_000;

/// A hand-written empty kernel (no nvcc needed), for the "empty PTX entry" row.
const EMPTY_PTX: &str = ".version 8.0\n.target sm_90\n.address_size 64\n\n\
.visible .entry xs_bench_empty()\n{\n    ret;\n}\n\0";

type BenchResult<T> = std::result::Result<T, String>;

mod expandable;
mod gpu_data;
mod json;
mod measure;
mod modules;
mod nosync;
mod raw;
mod stats;
mod sync;
mod vmm;

use json::{json_stat, json_str};
use measure::{alloc_async_row, compare, compare_reps, state_rows, timed};
use raw::{
    bump_host_fn, ck, device_free_bytes, empty_host_fn, raw_event, raw_function, raw_launch_delay,
    raw_launch_empty, raw_stream, raw_sync, rss_bytes, thread_cpu_ns, unpark_host_fn, xs, Parker,
    RAW_RT, XS_RT,
};
use stats::{fmt_cell, fmt_ns, stat, Row, Stat, Target};
use sync::sync_section;

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
        eprintln!("gpu_ops: FAILED: {e}");
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------------------------------------
// The run

#[allow(clippy::too_many_lines)]
fn run() -> BenchResult<()> {
    let wall0 = Instant::now();
    let dev: CudaDevice = CudaBackend::open(0).map_err(|e| format!("open(0): {e}"))?;
    let ctx = Arc::clone(dev.cudarc_context());
    let info = xstream_core::Device::info(&dev).clone();
    // Everything below runs on this thread, with the primary context current (xstream bound it).
    dev.rebind_thread().map_err(|e| e.to_string())?;
    let mut ctx_flags = 0u32;
    // SAFETY: valid out-pointer; context current.
    ck(
        unsafe { sys::cuCtxGetFlags(&mut ctx_flags) },
        "cuCtxGetFlags",
    );
    let sched = match ctx_flags & 0x7 {
        0 => "AUTO",
        1 => "SPIN",
        2 => "YIELD",
        4 => "BLOCKING_SYNC",
        _ => "?",
    };
    eprintln!(
        "gpu_ops: {} ({}), context sched {sched}; {REPS} repeats per op",
        info.name, info.driver
    );

    let nb = StreamDesc::new().flags(StreamFlags::NON_BLOCKING);
    let dt = EventDesc::new().flags(EventFlags::DISABLE_TIMING);
    let e = |r: xstream_core::Result<CudaStream>| r.map_err(|e| e.to_string());
    let ev = |r: xstream_core::Result<CudaEvent>| r.map_err(|e| e.to_string());
    let sf = |r: std::result::Result<
        Arc<cudarc::driver::CudaStream>,
        cudarc::driver::DriverError,
    >| { r.map_err(|e| format!("cudarc: {e:?}")) };

    // Long-lived objects, one set per variant.
    let xa = e(dev.create_stream(&nb))?;
    let xb = e(dev.create_stream(&nb))?;
    let xe = ev(dev.create_event(&dt))?;
    let ra = raw_stream();
    let rb = raw_stream();
    let re = raw_event(CU_EVENT_DISABLE_TIMING);
    let sa = sf(ctx.new_stream())?;
    let sb = sf(ctx.new_stream())?;
    let se = ctx
        .new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))
        .map_err(|e| format!("cudarc: {e:?}"))?;
    let delay_ptx = ptx_source("sm_90") + "\0";
    let delay_fn = raw_function(&delay_ptx, c"xstream_delay");
    let empty_fn = raw_function(EMPTY_PTX, c"xs_bench_empty");
    let mut rows: Vec<Row> = Vec::new();
    eprintln!("== idle-path costs in a context that has not run a kernel yet");
    rows.extend(state_rows("context never ran a kernel", &xa, &xe, ra, re));
    // Make sure xstream loaded its kernels (lazily or not) before timing.
    xs(xa.launch_builtin(Kernel::Delay(Duration::ZERO)));
    xs(xa.synchronize());
    eprintln!("== the same after a kernel ran");
    rows.extend(state_rows("after kernels", &xa, &xe, ra, re));
    rows.push(alloc_async_row(&xa, ra));

    eprintln!("== per-operation costs (median (p10–p90) per op)");

    rows.push(compare(
        "cheapest driver call (cuCtxGetCurrent)",
        100_000,
        Target::Info,
        None,
        Some(Box::new(|n| {
            timed(n, || {
                let mut c = ptr::null_mut();
                // SAFETY: valid out-pointer.
                black_box(unsafe { sys::cuCtxGetCurrent(&mut c) });
                black_box(c);
            })
        })),
        None,
    ));

    rows.push(compare(
        "stream create+destroy (NON_BLOCKING)",
        1000,
        Target::OverheadPct(2.0),
        Some(Box::new(|n| {
            timed(n, || {
                drop(black_box(dev.create_stream(&nb).expect("create_stream")))
            })
        })),
        Some(Box::new(|n| {
            timed(n, || {
                let s = raw_stream();
                // SAFETY: `s` was just created and is not used again.
                ck(unsafe { sys::cuStreamDestroy_v2(s) }, "cuStreamDestroy");
            })
        })),
        Some(Box::new(|n| {
            timed(n, || drop(black_box(ctx.new_stream().expect("new_stream"))))
        })),
    ));

    rows.extend(vmm::map_row(&dev)?);
    rows.extend(expandable::rows(&dev, &xa, ra)?);

    let pool = StreamPool::<CudaBackend>::new(dev.clone(), PoolConfig::default())
        .map_err(|e| e.to_string())?;
    for _ in 0..64 {
        pool.get(PriorityClass::Normal).map_err(|e| e.to_string())?;
    }
    rows.push(compare(
        "pooled stream acquire (StreamPool::get + drop)",
        200_000,
        Target::AbsNs(100.0),
        Some(Box::new(|n| {
            timed(n, || {
                drop(black_box(pool.get(PriorityClass::Normal).expect("pool")))
            })
        })),
        None,
        None,
    ));

    for (label, xflags, rflags, sflags) in [
        (
            "event create+destroy (DISABLE_TIMING)",
            EventFlags::DISABLE_TIMING,
            CU_EVENT_DISABLE_TIMING,
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING,
        ),
        (
            "event create+destroy (default, timing)",
            EventFlags::empty(),
            0,
            sys::CUevent_flags::CU_EVENT_DEFAULT,
        ),
    ] {
        let d = EventDesc::new().flags(xflags);
        rows.push(compare(
            label,
            20_000,
            // Issue 29: no slower than cudarc's safe API (itself above raw).
            Target::NotSlowerThanSafe,
            Some(Box::new(|n| {
                timed(n, || {
                    drop(black_box(dev.create_event(&d).expect("create_event")))
                })
            })),
            Some(Box::new(|n| {
                timed(n, || {
                    let ev = raw_event(rflags);
                    // SAFETY: `ev` was just created and is not used again.
                    ck(unsafe { sys::cuEventDestroy_v2(ev) }, "cuEventDestroy");
                })
            })),
            Some(Box::new(|n| {
                timed(n, || {
                    drop(black_box(ctx.new_event(Some(sflags)).expect("new_event")))
                })
            })),
        ));
    }

    rows.push(compare(
        "event record (idle stream)",
        50_000,
        Target::OverheadNs(20.0),
        Some(Box::new(|n| {
            let d = timed(n, || xs(xe.record(&xa)));
            xs(xa.synchronize());
            d
        })),
        Some(Box::new(|n| {
            let d = timed(n, || {
                // SAFETY: live event and stream.
                ck(unsafe { sys::cuEventRecord(re, ra) }, "cuEventRecord");
            });
            raw_sync(ra);
            d
        })),
        Some(Box::new(|n| {
            let d = timed(n, || se.record(&sa).expect("record"));
            sa.synchronize().expect("sync");
            d
        })),
    ));

    // The events are recorded and complete now.
    rows.push(compare(
        "event query (complete)",
        100_000,
        Target::OverheadNs(20.0),
        Some(Box::new(|n| {
            timed(n, || {
                black_box(xe.query().expect("query"));
            })
        })),
        Some(Box::new(|n| {
            timed(n, || {
                // SAFETY: live event.
                ck(unsafe { sys::cuEventQuery(re) }, "cuEventQuery");
            })
        })),
        Some(Box::new(|n| {
            timed(n, || {
                black_box(se.try_is_complete().expect("query"));
            })
        })),
    ));

    rows.push(compare(
        "stream query (idle)",
        100_000,
        Target::OverheadNs(20.0),
        Some(Box::new(|n| {
            timed(n, || {
                black_box(xa.query().expect("query"));
            })
        })),
        Some(Box::new(|n| {
            timed(n, || {
                // SAFETY: live stream.
                ck(unsafe { sys::cuStreamQuery(ra) }, "cuStreamQuery");
            })
        })),
        None,
    ));

    rows.push(compare(
        "record on A + wait on B",
        50_000,
        Target::OverheadNs(20.0),
        Some(Box::new(|n| {
            let d = timed(n, || {
                xs(xe.record(&xa));
                xs(xb.wait_event(&xe));
            });
            xs(xb.synchronize());
            d
        })),
        Some(Box::new(|n| {
            let d = timed(n, || {
                // SAFETY: live handles.
                ck(unsafe { sys::cuEventRecord(re, ra) }, "cuEventRecord");
                // SAFETY: live handles.
                ck(
                    unsafe { sys::cuStreamWaitEvent(rb, re, 0) },
                    "cuStreamWaitEvent",
                );
            });
            raw_sync(rb);
            d
        })),
        Some(Box::new(|n| {
            let d = timed(n, || {
                se.record(&sa).expect("record");
                sb.wait(&se).expect("wait");
            });
            sb.synchronize().expect("sync");
            d
        })),
    ));

    rows.push(compare(
        "synchronize (idle stream)",
        50_000,
        Target::OverheadNs(20.0),
        Some(Box::new(|n| timed(n, || xs(xa.synchronize())))),
        Some(Box::new(|n| timed(n, || raw_sync(ra)))),
        Some(Box::new(|n| timed(n, || sa.synchronize().expect("sync")))),
    ));

    rows.push(compare(
        "host callback enqueue (empty)",
        2000,
        // Issue 29's target for this row.
        Target::OverheadPct(5.0),
        Some(Box::new(|n| {
            let d = timed(n, || xs(xa.host_callback(|_| {})));
            xs(xa.synchronize());
            d
        })),
        Some(Box::new(|n| {
            let d = timed(n, || {
                // SAFETY: live stream; the function ignores its (null) argument.
                ck(
                    unsafe { sys::cuLaunchHostFunc(ra, Some(empty_host_fn), ptr::null_mut()) },
                    "cuLaunchHostFunc",
                );
            });
            raw_sync(ra);
            d
        })),
        None,
    ));

    rows.push(compare(
        "host callback round trip (enqueue → runs → seen)",
        2000,
        Target::AbsNs(7500.0),
        Some(Box::new(|n| {
            timed(n, || {
                let want = XS_RT.load(Ordering::Acquire) + 1;
                xs(xa.host_callback(|_| {
                    XS_RT.fetch_add(1, Ordering::Release);
                }));
                while XS_RT.load(Ordering::Acquire) < want {
                    std::hint::spin_loop();
                }
            })
        })),
        Some(Box::new(|n| {
            timed(n, || {
                let want = RAW_RT.load(Ordering::Acquire) + 1;
                // SAFETY: live stream; the user pointer is a static.
                ck(
                    unsafe {
                        sys::cuLaunchHostFunc(
                            ra,
                            Some(bump_host_fn),
                            &RAW_RT as *const AtomicU64 as *mut c_void,
                        )
                    },
                    "cuLaunchHostFunc",
                );
                while RAW_RT.load(Ordering::Acquire) < want {
                    std::hint::spin_loop();
                }
            })
        })),
        None,
    ));

    let parker = Box::new(Parker {
        done: AtomicBool::new(false),
        thread: std::thread::current(),
    });
    rows.push(compare(
        "future completion (completed().wait(), idle; raw: host fn + park)",
        2000,
        Target::AbsNs(8000.0),
        Some(Box::new(|n| {
            timed(n, || xs(xa.completed().expect("completed").wait()))
        })),
        Some(Box::new(|n| {
            let p: &Parker = &parker;
            timed(n, || {
                p.done.store(false, Ordering::Relaxed);
                // SAFETY: live stream; `parker` outlives the host function (synchronized
                // below before it is dropped).
                ck(
                    unsafe {
                        sys::cuLaunchHostFunc(
                            ra,
                            Some(unpark_host_fn),
                            p as *const Parker as *mut c_void,
                        )
                    },
                    "cuLaunchHostFunc",
                );
                while !p.done.load(Ordering::Acquire) {
                    std::thread::park();
                }
            })
        })),
        None,
    ));
    raw_sync(ra);
    drop(parker);

    rows.push(compare(
        "kernel launch (xstream_delay(0), same kernel)",
        2000,
        Target::OverheadPct(2.0),
        Some(Box::new(|n| {
            let d = timed(n, || xs(xa.launch_builtin(Kernel::Delay(Duration::ZERO))));
            xs(xa.synchronize());
            d
        })),
        Some(Box::new(|n| {
            let d = timed(n, || raw_launch_delay(delay_fn, ra, 0));
            raw_sync(ra);
            d
        })),
        None,
    ));
    rows.push(compare(
        "kernel launch (empty PTX entry, raw only)",
        2000,
        Target::Info,
        None,
        Some(Box::new(|n| {
            let d = timed(n, || raw_launch_empty(empty_fn, ra));
            raw_sync(ra);
            d
        })),
        None,
    ));
    rows.push(compare(
        "kernel launch + synchronize",
        1000,
        Target::OverheadPct(2.0),
        Some(Box::new(|n| {
            timed(n, || {
                xs(xa.launch_builtin(Kernel::Delay(Duration::ZERO)));
                xs(xa.synchronize());
            })
        })),
        Some(Box::new(|n| {
            timed(n, || {
                raw_launch_delay(delay_fn, ra, 0);
                raw_sync(ra);
            })
        })),
        None,
    ));

    eprintln!("== module launch path");
    let (module_rows, mut allocs) = modules::module_rows(&dev, &xa, ra)?;
    rows.extend(module_rows);

    eprintln!("== typed copies (write_from_blocking / read_into_blocking, write_from_host / read_into_host)");
    let (copy_rows, copy_allocs) = gpu_data::typed_copy_rows(&dev, &xa, ra)?;
    let typed_md = gpu_data::typed_markdown(&copy_rows);
    let held_md = gpu_data::held_enqueue(&dev, &xa)?;
    rows.extend(copy_rows.into_iter().map(|c| c.row));
    allocs.rows.extend(copy_allocs);

    // 4-stream chains.
    let xs4: Vec<CudaStream> = (0..4)
        .map(|_| e(dev.create_stream(&nb)))
        .collect::<BenchResult<_>>()?;
    let xe4: Vec<CudaEvent> = (0..4)
        .map(|_| ev(dev.create_event(&dt)))
        .collect::<BenchResult<_>>()?;
    let rs4: Vec<sys::CUstream> = (0..4).map(|_| raw_stream()).collect();
    let re4: Vec<sys::CUevent> = (0..4).map(|_| raw_event(CU_EVENT_DISABLE_TIMING)).collect();
    rows.push(compare(
        &format!("chain: 4 streams × {CHAIN_ROUNDS} rounds (launch, record, wait) + sync"),
        100,
        Target::OverheadPct(2.0),
        Some(Box::new(|n| {
            timed(n, || {
                for _ in 0..CHAIN_ROUNDS {
                    for i in 0..4 {
                        xs(xs4[i].launch_builtin(Kernel::Delay(Duration::ZERO)));
                        xs(xe4[i].record(&xs4[i]));
                        xs(xs4[(i + 1) % 4].wait_event(&xe4[i]));
                    }
                }
                for s in &xs4 {
                    xs(s.synchronize());
                }
            })
        })),
        Some(Box::new(|n| {
            timed(n, || {
                for _ in 0..CHAIN_ROUNDS {
                    for i in 0..4 {
                        raw_launch_delay(delay_fn, rs4[i], 0);
                        // SAFETY: live handles.
                        ck(
                            unsafe { sys::cuEventRecord(re4[i], rs4[i]) },
                            "cuEventRecord",
                        );
                        // SAFETY: live handles.
                        ck(
                            unsafe { sys::cuStreamWaitEvent(rs4[(i + 1) % 4], re4[i], 0) },
                            "cuStreamWaitEvent",
                        );
                    }
                }
                for &s in &rs4 {
                    raw_sync(s);
                }
            })
        })),
        None,
    ));

    // Graphs: capture GRAPH_NODES launches once, replay.
    let xg_stream = e(dev.create_stream(&nb))?;
    xs(xg_stream.begin_capture(CaptureMode::ThreadLocal));
    for _ in 0..GRAPH_NODES {
        xs(xg_stream.launch_builtin(Kernel::Delay(Duration::ZERO)));
    }
    let xgraph = xg_stream.end_capture().map_err(|e| e.to_string())?;
    if xgraph.node_count() != GRAPH_NODES {
        return Err(format!(
            "xstream graph has {} nodes, expected {GRAPH_NODES}",
            xgraph.node_count()
        ));
    }
    let rg_stream = raw_stream();
    // SAFETY: live stream, not capturing.
    ck(
        unsafe {
            sys::cuStreamBeginCapture_v2(
                rg_stream,
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        },
        "cuStreamBeginCapture",
    );
    for _ in 0..GRAPH_NODES {
        raw_launch_delay(delay_fn, rg_stream, 0);
    }
    let mut rgraph = ptr::null_mut();
    // SAFETY: the stream is capturing; valid out-pointer.
    ck(
        unsafe { sys::cuStreamEndCapture(rg_stream, &mut rgraph) },
        "cuStreamEndCapture",
    );
    let mut rexec = ptr::null_mut();
    // SAFETY: `rgraph` is the captured graph; valid out-pointer.
    ck(
        unsafe { sys::cuGraphInstantiateWithFlags(&mut rexec, rgraph, 0) },
        "cuGraphInstantiateWithFlags",
    );
    rows.push(compare(
        &format!("graph replay ({GRAPH_NODES} kernel nodes) + sync"),
        200,
        Target::OverheadPct(2.0),
        Some(Box::new(|n| {
            timed(n, || {
                xs(xgraph.replay(&xg_stream));
                xs(xg_stream.synchronize());
            })
        })),
        Some(Box::new(|n| {
            timed(n, || {
                // SAFETY: live executable graph and stream.
                ck(
                    unsafe { sys::cuGraphLaunch(rexec, rg_stream) },
                    "cuGraphLaunch",
                );
                raw_sync(rg_stream);
            })
        })),
        None,
    ));
    rows.push(compare(
        &format!("{GRAPH_NODES} direct kernel launches + sync"),
        100,
        Target::OverheadPct(2.0),
        Some(Box::new(|n| {
            timed(n, || {
                for _ in 0..GRAPH_NODES {
                    xs(xg_stream.launch_builtin(Kernel::Delay(Duration::ZERO)));
                }
                xs(xg_stream.synchronize());
            })
        })),
        Some(Box::new(|n| {
            timed(n, || {
                for _ in 0..GRAPH_NODES {
                    raw_launch_delay(delay_fn, rg_stream, 0);
                }
                raw_sync(rg_stream);
            })
        })),
        None,
    ));

    // Synchronize latency for a ~2 ms kernel.
    eprintln!("== synchronize latency for a {SYNC_KERNEL:?} kernel");
    let fast = e(dev.create_stream(
        &StreamDesc::new().flags(StreamFlags::NON_BLOCKING | StreamFlags::FAST_SYNC),
    ))?;
    let kernel_ns = u64::try_from(SYNC_KERNEL.as_nanos()).unwrap_or(u64::MAX);
    let sync_rows = sync_section(&[
        (
            "xstream synchronize (plain stream: cuStreamSynchronize)",
            Box::new(|| {
                xs(xa.launch_builtin(Kernel::Delay(SYNC_KERNEL)));
                xs(xa.synchronize());
            }),
        ),
        (
            "xstream synchronize (FAST_SYNC: spin on cuStreamQuery)",
            Box::new(|| {
                xs(fast.launch_builtin(Kernel::Delay(SYNC_KERNEL)));
                xs(fast.synchronize());
            }),
        ),
        (
            "xstream synchronize_timeout(1 s) (sleep-poll emulation)",
            Box::new(|| {
                xs(xa.launch_builtin(Kernel::Delay(SYNC_KERNEL)));
                xs(xa.synchronize_timeout(Duration::from_secs(1)));
            }),
        ),
        (
            "raw cuStreamSynchronize",
            Box::new(|| {
                raw_launch_delay(delay_fn, ra, kernel_ns);
                raw_sync(ra);
            }),
        ),
        (
            "raw spin on cuStreamQuery",
            Box::new(|| {
                raw_launch_delay(delay_fn, ra, kernel_ns);
                loop {
                    // SAFETY: live stream.
                    let r = unsafe { sys::cuStreamQuery(ra) };
                    if r == sys::CUresult::CUDA_SUCCESS {
                        break;
                    }
                    assert!(
                        r == sys::CUresult::CUDA_ERROR_NOT_READY,
                        "cuStreamQuery: {r:?}"
                    );
                    std::hint::spin_loop();
                }
            }),
        ),
    ]);

    // Memory flatness.
    eprintln!("== memory flatness ({FLAT_COUNT} streams, {FLAT_COUNT} events)");
    for _ in 0..1000 {
        drop(e(dev.create_stream(&nb))?);
        drop(ev(dev.create_event(&dt))?);
    }
    let flat_t0 = Instant::now();
    let (rss0, free0) = (rss_bytes(), device_free_bytes());
    for _ in 0..FLAT_COUNT {
        drop(e(dev.create_stream(&nb))?);
    }
    let (rss1, free1) = (rss_bytes(), device_free_bytes());
    for _ in 0..FLAT_COUNT {
        drop(ev(dev.create_event(&dt))?);
    }
    let (rss2, free2) = (rss_bytes(), device_free_bytes());
    eprintln!("   took {:?}", flat_t0.elapsed());

    // Clean up raw objects.
    // SAFETY: every handle below was created by this program, its work is synchronized, and
    // none is used again.
    unsafe {
        sys::cuGraphExecDestroy(rexec);
        sys::cuGraphDestroy(rgraph);
        sys::cuStreamDestroy_v2(rg_stream);
        for &s in &rs4 {
            sys::cuStreamDestroy_v2(s);
        }
        for &ev in &re4 {
            sys::cuEventDestroy_v2(ev);
        }
        sys::cuEventDestroy_v2(re);
        sys::cuStreamDestroy_v2(ra);
        sys::cuStreamDestroy_v2(rb);
    }
    xs(dev.synchronize());

    // ------------------------------------------------------------------ report
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let mut md = String::new();
    let _ = writeln!(
        md,
        "### xstream CUDA vs raw driver vs cudarc safe — {} ({}), sched {sched}, {REPS} reps, host ns/op median (p10–p90)\n",
        info.name, info.driver
    );
    md.push_str(
        "| operation | xstream | raw sys | cudarc safe | overhead vs raw | target | verdict |\n",
    );
    md.push_str("|---|---:|---:|---:|---:|---|---|\n");
    for r in &rows {
        let ov = match r.overhead() {
            Some((d, p)) => format!("{:+.0} ns ({p:+.1}%)", d),
            None => "-".into(),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {ov} | {} | {} |",
            r.op,
            fmt_cell(r.x),
            fmt_cell(r.raw),
            fmt_cell(r.safe),
            r.target.label(),
            r.verdict()
        );
    }
    for r in rows.iter().filter(|r| r.reps != REPS) {
        let _ = writeln!(
            md,
            "\nRow `{}`: median (p10–p90) of {} interleaved reps of {} iterations, not {REPS}.",
            r.op, r.reps, r.iters
        );
    }
    let _ = writeln!(
        md,
        "\n**Synchronize after a {} kernel** (median of {REPS} reps; latency = wall − kernel length; CPU = waiting thread's CPU time / wall)\n",
        fmt_ns(kernel_ns as f64)
    );
    md.push_str("| variant | wall | latency over kernel | thread CPU |\n|---|---:|---:|---:|\n");
    for s in &sync_rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.0}% |",
            s.name,
            fmt_cell(Some(s.wall)),
            fmt_ns(s.wall.med - kernel_ns as f64),
            s.cpu_pct
        );
    }
    let _ = writeln!(
        md,
        "\n**Memory flatness** (xstream create+drop): {FLAT_COUNT} streams: RSS {:.1} → {:.1} MiB, device free {:.1} → {:.1} MiB; {FLAT_COUNT} events: RSS → {:.1} MiB, device free → {:.1} MiB\n",
        mib(rss0),
        mib(rss1),
        mib(free0),
        mib(free1),
        mib(rss2),
        mib(free2)
    );
    let _ = writeln!(
        md,
        "**Heap allocations per launch or typed copy** (this thread, after 100 warm-up calls, over 10000)\n"
    );
    md.push_str("| variant | allocations per call |\n|---|---:|\n");
    for (name, a) in &allocs.rows {
        let _ = writeln!(md, "| {name} | {a:.4} |");
    }
    md.push_str(&typed_md);
    md.push('\n');
    md.push_str(&held_md);
    md.push('\n');
    eprintln!("== data path (page-locked copies, pipelines)");
    let bws = gpu_data::bandwidth(&dev)?;
    let pipes = gpu_data::pipelines(&dev)?;
    let data_md = gpu_data::markdown(&pipes, &bws);
    md.push_str(&data_md);
    eprintln!("== allocation and frees without host synchronization (another stream busy)");
    let nosync_rows = nosync::rows(&dev, delay_fn)?;
    md.push_str(&nosync::markdown(&nosync_rows));
    let _ = writeln!(
        md,
        "total bench time {:.1} s",
        wall0.elapsed().as_secs_f64()
    );

    let mut js = String::new();
    let _ = write!(
        js,
        "{{\"bench\":\"gpu_ops\",\"device\":{},\"driver\":{},\"sched\":{},\"reps\":{REPS},\"rows\":[",
        json_str(&info.name),
        json_str(&info.driver),
        json_str(sched)
    );
    for (i, r) in rows.iter().enumerate() {
        let (od, op) = r
            .overhead()
            .map_or(("null".to_string(), "null".to_string()), |(d, p)| {
                (format!("{d:.1}"), format!("{p:.2}"))
            });
        let _ = write!(
            js,
            "{}{{\"op\":{},\"iters\":{},\"reps\":{},\"xstream\":{},\"raw\":{},\"safe\":{},\"overhead_ns\":{od},\"overhead_pct\":{op},\"target\":{},\"verdict\":{}}}",
            if i > 0 { "," } else { "" },
            json_str(&r.op),
            r.iters,
            r.reps,
            json_stat(r.x),
            json_stat(r.raw),
            json_stat(r.safe),
            json_str(&r.target.label()),
            json_str(&r.verdict())
        );
    }
    js.push_str("],\"sync\":[");
    for (i, s) in sync_rows.iter().enumerate() {
        let _ = write!(
            js,
            "{}{{\"variant\":{},\"kernel_ns\":{kernel_ns},\"wall\":{},\"cpu_pct\":{:.1}}}",
            if i > 0 { "," } else { "" },
            json_str(s.name),
            json_stat(Some(s.wall)),
            s.cpu_pct
        );
    }
    js.push_str("],\"allocs_per_launch\":[");
    for (i, (name, a)) in allocs.rows.iter().enumerate() {
        let _ = write!(
            js,
            "{}{{\"variant\":{},\"allocs\":{a:.4}}}",
            if i > 0 { "," } else { "" },
            json_str(name)
        );
    }
    js.push_str("],\"nosync\":[");
    for (i, r) in nosync_rows.iter().enumerate() {
        let cell = |c: &Option<(Stat, usize)>| match c {
            Some((st, k)) => format!("{{\"ns\":{},\"still_busy\":{k}}}", json_stat(Some(*st))),
            None => "null".into(),
        };
        let _ = write!(
            js,
            "{}{{\"op\":{},\"xstream\":{},\"raw\":{}}}",
            if i > 0 { "," } else { "" },
            json_str(r.op),
            cell(&r.x),
            cell(&r.raw)
        );
    }
    let _ = write!(
        js,
        "],\"memory\":{{\"count\":{FLAT_COUNT},\"rss_before\":{rss0},\"rss_after_streams\":{rss1},\"rss_after_events\":{rss2},\"dev_free_before\":{free0},\"dev_free_after_streams\":{free1},\"dev_free_after_events\":{free2}}},\"total_s\":{:.2}}}",
        wall0.elapsed().as_secs_f64()
    );

    println!("{js}");
    println!();
    println!("{md}");
    if let Ok(out) = std::env::var("OUT") {
        let dir = std::path::Path::new(&out);
        let _ = std::fs::create_dir_all(dir);
        std::fs::write(dir.join("gpu_bench.md"), &md).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("gpu_bench.json"), js + "\n").map_err(|e| e.to_string())?;
    }
    Ok(())
}
