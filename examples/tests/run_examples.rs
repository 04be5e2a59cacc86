//! Runs every example binary as a user would, on the host backend and on the Ascend backend
//! over the ACL runtime simulator (a test double of `libascendcl.so`, started in the child
//! process's environment), and on CUDA where a GPU is present. Each run must exit 0 and print
//! its `verified:` line; the examples check their results against host references themselves
//! and exit non-zero on a mismatch.

use std::process::{Command, Output};

use xstream::BackendKind;
use xstream_conformance::{report_skip, simulator};

/// An example binary and the line it prints once its results are checked.
struct Example {
    name: &'static str,
    exe: &'static str,
    verified: &'static str,
}

const PIPELINE: Example = Example {
    name: "pipeline",
    exe: env!("CARGO_BIN_EXE_pipeline"),
    verified: "verified: 12 of 12 chunks match the host reference",
};

const ASYNC_STREAMS: Example = Example {
    name: "async_streams",
    exe: env!("CARGO_BIN_EXE_async_streams"),
    verified: "verified: 16 of 16 streams match the host reference",
};

const RUNTIME_SKELETON: Example = Example {
    name: "runtime_skeleton",
    exe: env!("CARGO_BIN_EXE_runtime_skeleton"),
    verified: "verified: the result (24576 bytes) matches the host reference",
};

const ERASED_RUNTIME: Example = Example {
    name: "erased_runtime",
    exe: env!("CARGO_BIN_EXE_erased_runtime"),
    verified: "verified: the gathered tensor (8192 bytes) matches the host reference",
};

const USER_KERNEL: Example = Example {
    name: "user_kernel",
    exe: env!("CARGO_BIN_EXE_user_kernel"),
    verified: "verified: the graph replayed 3 times matches the host reference",
};

const EXPANDABLE: Example = Example {
    name: "expandable",
    exe: env!("CARGO_BIN_EXE_expandable"),
    verified: "verified: 288 of 288 blocks held the bytes written into them",
};

/// Runs `ex` with `--backend kind`; for Ascend, in the simulator's environment.
fn run(ex: &Example, kind: BackendKind) -> Output {
    let mut cmd = Command::new(ex.exe);
    cmd.args(["--backend", kind.name()]);
    if kind == BackendKind::Ascend {
        cmd.envs(simulator::env(1));
    }
    cmd.output().expect("start the example")
}

/// Asserts that `ex` ran on `kind` and verified its results.
fn expect_verified(ex: &Example, kind: BackendKind) {
    let out = run(ex, kind);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} on {kind} failed ({}):\n{stdout}\n{stderr}",
        ex.name,
        out.status
    );
    assert!(
        stdout.starts_with(&format!("backend {kind}, device ")),
        "{} did not run on {kind}:\n{stdout}",
        ex.name
    );
    assert!(
        stdout.lines().any(|l| l == ex.verified),
        "{} on {kind} did not print `{}`:\n{stdout}",
        ex.name,
        ex.verified
    );
}

/// On a machine with a CUDA GPU, as [`expect_verified`]; elsewhere the example must refuse
/// `--backend cuda` with the backend's reason and a failing exit status (and the test prints
/// SKIP for the GPU run).
fn expect_verified_on_cuda(ex: &Example) {
    if xstream::availability(BackendKind::Cuda).is_ok() {
        expect_verified(ex, BackendKind::Cuda);
        return;
    }
    let out = run(ex, BackendKind::Cuda);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{} ran on a missing GPU", ex.name);
    assert!(
        stderr.starts_with("error: cuda backend is not available"),
        "{}: no clear reason for the missing GPU:\n{stderr}",
        ex.name
    );
    report_skip(
        &format!("{} on cuda", ex.name),
        &"needs a CUDA GPU (checked: the example refuses --backend cuda with the reason)",
    );
}

/// The three runs of an example: host, the ACL simulator, CUDA (or its SKIP).
macro_rules! everywhere {
    ($ex:expr => $host:ident, $sim:ident, $cuda:ident) => {
        #[test]
        fn $host() {
            expect_verified(&$ex, BackendKind::Host);
        }

        #[test]
        fn $sim() {
            expect_verified(&$ex, BackendKind::Ascend);
        }

        #[test]
        fn $cuda() {
            expect_verified_on_cuda(&$ex);
        }
    };
}

everywhere!(PIPELINE => pipeline_on_host, pipeline_on_the_acl_simulator, pipeline_on_cuda);
everywhere!(EXPANDABLE => expandable_on_host, expandable_on_the_acl_simulator, expandable_on_cuda);

/// The expandable segment reserves no more than the per-block caching allocator on the
/// fragmenting workload, maps only chunks and never unmaps (host: a run of its own).
#[test]
fn expandable_reserves_less_than_per_block_caching() {
    let out = run(&EXPANDABLE, BackendKind::Host);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let peak = |prefix: &str| -> f64 {
        let l = stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` line:\n{stdout}"));
        l[prefix.len()..]
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no number in `{l}`"))
    };
    let exp = peak("expandable segment: peak reserved ");
    let per_block = peak("per-block caching: peak reserved ");
    let live = peak("peak live: ");
    assert!(
        live <= exp && exp <= per_block,
        "live {live} MiB, expandable {exp} MiB, per-block {per_block} MiB:\n{stdout}"
    );
    assert!(stdout.contains(", 0 unmapped;"), "{stdout}");
}
everywhere!(ASYNC_STREAMS =>
    async_streams_on_host, async_streams_on_the_acl_simulator, async_streams_on_cuda);
everywhere!(RUNTIME_SKELETON =>
    runtime_skeleton_on_host, runtime_skeleton_on_the_acl_simulator, runtime_skeleton_on_cuda);
everywhere!(ERASED_RUNTIME =>
    erased_runtime_on_host, erased_runtime_on_the_acl_simulator, erased_runtime_on_cuda);

/// On a backend other than host, the erased example also shows that mixing backends is a
/// clear error (the simulator here; a GPU where there is one).
#[test]
fn erased_runtime_refuses_mixed_backends() {
    let out = run(&ERASED_RUNTIME, BackendKind::Ascend);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("mixing refused: AnyEvent::record")
                && l.contains("ascend")
                && l.contains("host")),
        "{stdout}"
    );
}

/// The backend can also be chosen through `XSTREAM_BACKEND`; a bad name is a clear error.
#[test]
fn the_backend_comes_from_the_environment_too() {
    let out = Command::new(PIPELINE.exe)
        .env("XSTREAM_BACKEND", "host")
        .output()
        .expect("start the example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.starts_with("backend host, "), "{stdout}");

    let out = Command::new(PIPELINE.exe)
        .env("XSTREAM_BACKEND", "opencl")
        .output()
        .expect("start the example");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("unknown backend `opencl`"), "{stderr}");
}

#[test]
fn user_kernel_on_host() {
    expect_verified(&USER_KERNEL, BackendKind::Host);
    // The direct launch is checked before the graph.
    let out = run(&USER_KERNEL, BackendKind::Host);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("kernel `affine_u32` from a host module")
            && stdout.contains("verified: the direct launch matches the host reference"),
        "{stdout}"
    );
}

/// Whether the simulator library of this build exports the ACL kernel-binary entry point
/// (its dynamic symbol table then names `aclrtBinaryLoadFromData`); read as bytes, the
/// library is not loaded into this process.
fn simulator_has_kernel_binaries() -> bool {
    let lib = std::fs::read(simulator::path()).expect("read the simulator library");
    let name = b"aclrtBinaryLoadFromData";
    lib.windows(name.len()).any(|w| w == name)
}

/// On Ascend the example launches the builtin module's kernel. Where the simulator has the
/// ACL kernel-binary entry points, the launch and the replays must verify; a build without
/// them must refuse clearly (and the test prints SKIP).
#[test]
fn user_kernel_on_the_acl_simulator() {
    if simulator_has_kernel_binaries() {
        expect_verified(&USER_KERNEL, BackendKind::Ascend);
        return;
    }
    let out = run(&USER_KERNEL, BackendKind::Ascend);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let refused = "error: ascend backend does not support kernel modules on this device";
    assert!(
        !out.status.success() && stderr.trim_end() == refused,
        "without kernel binaries the example must refuse clearly:\n{stderr}"
    );
    report_skip(
        "user_kernel on the ACL simulator",
        &"this build's simulator has no ACL kernel-binary entry points (checked: a clear refusal)",
    );
}

#[test]
fn user_kernel_on_cuda() {
    expect_verified_on_cuda(&USER_KERNEL);
}

/// On a GPU both directions verify; elsewhere the example explains itself, prints its SKIP
/// line and exits 0, whichever backend was asked for.
#[test]
fn cudarc_interop_runs_or_says_it_needs_a_gpu() {
    let exe = env!("CARGO_BIN_EXE_cudarc_interop");
    let gpu = xstream::availability(BackendKind::Cuda).is_ok();
    for args in [&[][..], &["--backend", "host"][..]] {
        let out = Command::new(exe)
            .args(args)
            .output()
            .expect("start the example");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{args:?}: {}\n{stdout}", out.status);
        if gpu && args.is_empty() {
            assert!(stdout.contains("verified: xstream -> cudarc"), "{stdout}");
            assert!(stdout.contains("verified: cudarc -> xstream"), "{stdout}");
        } else {
            assert!(
                stdout.starts_with("on a CUDA GPU this example would:"),
                "{stdout}"
            );
            let prefix = "SKIP: cudarc_interop needs a CUDA GPU: ";
            let reason = stdout
                .lines()
                .find_map(|l| l.strip_prefix(prefix))
                .unwrap_or_else(|| panic!("{args:?}: no SKIP line:\n{stdout}"));
            if args.is_empty() {
                report_skip("cudarc_interop", &format!("needs a CUDA GPU: {reason}"));
            }
        }
    }
    let out = Command::new(exe)
        .args(["--backend", "opencl"])
        .output()
        .expect("start the example");
    assert!(!out.status.success(), "a bad backend name must fail");
}

/// Runs `ex` on the ACL simulator with `XSIM_REAL_KERNELS=1` (the simulator refuses its
/// test-only kernel format as a real CANN runtime does).
fn run_real_kernels(exe: &str, args: &[&str]) -> Output {
    Command::new(exe)
        .args(args)
        .envs(simulator::env(1))
        .env("XSIM_REAL_KERNELS", "1")
        .output()
        .expect("start the example")
}

/// With kernel binaries refused, the examples that need no kernel binary still run on the
/// Ascend backend (never another backend) and verify.
#[test]
fn examples_on_the_acl_simulator_with_real_kernels() {
    for ex in [&PIPELINE, &ASYNC_STREAMS, &RUNTIME_SKELETON] {
        let out = run_real_kernels(ex.exe, &["--backend", "ascend"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{} failed ({}):\n{stdout}\n{stderr}",
            ex.name,
            out.status
        );
        assert!(
            stdout.starts_with("backend ascend, device "),
            "{} did not run on ascend:\n{stdout}",
            ex.name
        );
        assert!(
            stdout.lines().any(|l| l == ex.verified),
            "{} did not verify:\n{stdout}",
            ex.name
        );
        if ex.name == "pipeline" {
            assert!(
                stdout
                    .lines()
                    .any(|l| l.starts_with("compute stage: built-in reduce (")),
                "the pipeline's compute stage was not the built-in reduce:\n{stdout}"
            );
        }
    }
}

/// With kernel binaries refused, `user_kernel` (which launches a kernel binary) says so and
/// exits with its documented status 3, on the Ascend backend.
#[test]
fn user_kernel_needs_a_kernel_binary_with_real_kernels() {
    let out = run_real_kernels(USER_KERNEL.exe, &["--backend", "ascend"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(i32::from(xstream_examples::EXIT_NEEDS_KERNEL_BINARY)),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.starts_with("backend ascend, device "), "{stdout}");
    assert!(
        stderr.starts_with("needs a kernel binary: user_kernel: "),
        "{stderr}"
    );
}

const IPC_PRODUCER_CONSUMER: Example = Example {
    name: "ipc_producer_consumer",
    exe: env!("CARGO_BIN_EXE_ipc_producer_consumer"),
    verified: "verified: the consumer's result (262144 bytes) matches the host reference",
};

/// Two processes (the example starts its consumer itself) sharing a buffer and two events.
#[test]
fn ipc_producer_consumer_on_host() {
    expect_verified(&IPC_PRODUCER_CONSUMER, BackendKind::Host);
    let out = run(&IPC_PRODUCER_CONSUMER, BackendKind::Host);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("consumer: enqueued: wait on the producer"),
        "the consumer enqueued its wait without blocking:\n{stdout}"
    );
}

#[test]
fn ipc_producer_consumer_on_cuda() {
    expect_verified_on_cuda(&IPC_PRODUCER_CONSUMER);
}

/// On the ACL simulator (a test double) as its default A2, which has IPC events and memory:
/// the same two processes over the ACL IPC calls, verified.
#[test]
fn ipc_producer_consumer_on_the_acl_simulator() {
    let out = Command::new(IPC_PRODUCER_CONSUMER.exe)
        .args(["--backend", "ascend"])
        .envs(simulator::env(1))
        .env_remove("XSIM_IPC")
        .output()
        .expect("start the example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.starts_with("backend ascend, device "),
        "{}:\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains(IPC_PRODUCER_CONSUMER.verified), "{stdout}");
    assert!(
        stdout.contains("consumer: enqueued: wait on the producer"),
        "the consumer enqueued its wait without blocking:\n{stdout}"
    );
}

/// With `XSIM_IPC=0` the simulated chip has no IPC events: a clear refusal.
#[test]
fn ipc_producer_consumer_is_refused_on_a_simulated_chip_without_ipc() {
    let out = Command::new(IPC_PRODUCER_CONSUMER.exe)
        .args(["--backend", "ascend"])
        .envs(simulator::env(1))
        .env("XSIM_IPC", "0")
        .output()
        .expect("start the example");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("this chip has no IPC events"),
        "{stderr}"
    );
}

/// The examples install a `tracing` subscriber: xstream's events reach stderr under the
/// filter in `XSTREAM_LOG` (here `debug`: the host backend's stream and event creation), none
/// below `warn` by default, and a filter that does not parse is reported.
#[test]
fn examples_print_xstream_tracing_events_by_filter() {
    let run_with = |filter: Option<&str>| {
        let mut cmd = Command::new(ERASED_RUNTIME.exe);
        cmd.args(["--backend", "host"])
            .env_remove("XSTREAM_LOG")
            .env_remove("RUST_LOG");
        if let Some(f) = filter {
            cmd.env("XSTREAM_LOG", f);
        }
        let out = cmd.output().expect("start the example");
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let debug = run_with(Some("debug"));
    assert!(debug.contains("create host event"), "{debug}");
    let quiet = run_with(None);
    assert!(!quiet.contains("create host event"), "{quiet}");
    let bad = run_with(Some("xstream_host=loud"));
    assert!(
        bad.starts_with("warning: log filter `xstream_host=loud` does not parse"),
        "{bad}"
    );
}

/// The tensor example: every check verified on host; on the ACL simulator the i64 sum is
/// skipped (ACL's reduce has no 64-bit integers) and said so; on CUDA every check verified (or
/// the GPU's SKIP).
fn expect_tensor(kind: BackendKind, verified: &str, skipped: Option<&str>) {
    let ex = Example {
        name: "tensor",
        exe: env!("CARGO_BIN_EXE_tensor"),
        verified: "",
    };
    let out = run(&ex, kind);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "tensor on {kind} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with(&format!("backend {kind}, device ")),
        "{stdout}"
    );
    assert!(
        stdout.lines().any(|l| l == verified),
        "tensor on {kind}:\n{stdout}"
    );
    if let Some(s) = skipped {
        assert!(
            stdout.lines().any(|l| l.starts_with(s)),
            "tensor on {kind}:\n{stdout}"
        );
    }
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("allocator: ") && !l.contains(" 0 reused")),
        "tensor on {kind}: the caching allocator reused nothing:\n{stdout}"
    );
}

#[test]
fn tensor_on_host() {
    expect_tensor(
        BackendKind::Host,
        "verified: 6 of 6 tensor checks match the host reference (0 skipped)",
        None,
    );
}

#[test]
fn tensor_on_the_acl_simulator() {
    expect_tensor(
        BackendKind::Ascend,
        "verified: 5 of 6 tensor checks match the host reference (1 skipped)",
        Some("skipped: i64 sum: built-in reduce i64"),
    );
}

#[test]
fn tensor_on_cuda() {
    if let Err(e) = xstream::availability(BackendKind::Cuda) {
        report_skip("tensor on cuda", &e);
        return;
    }
    expect_tensor(
        BackendKind::Cuda,
        "verified: 6 of 6 tensor checks match the host reference (0 skipped)",
        None,
    );
}
