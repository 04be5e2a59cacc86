//! `xstream`: backend information, flag tables, the multi-stream pipeline demo (the main job)
//! and the portable conformance checks.
//!
//! Modules: `main.rs` (this file: the command line, `info`, `flags`, `conform`), `demo`
//! (the multi-stream pipeline demo) and `collectives` (the collective bandwidth sweep).

mod collectives;
mod demo;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use xstream::{Backend, BackendKind, Device, Error, Result};

/// Portable streams, events and host callbacks over CUDA, Ascend and CPU.
#[derive(Parser)]
#[command(name = "xstream", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Backends compiled in and available (or why not), devices (name, runtime and its
    /// version), priority ranges, capabilities.
    Info {
        /// One backend (host, cuda or ascend; default: every one).
        #[arg(long)]
        backend: Option<String>,
    },
    /// The flag translation tables, printed from the data the code uses.
    Flags {
        /// One backend (default: every compiled one).
        #[arg(long)]
        backend: Option<String>,
    },
    /// The main job: a multi-stream pipeline (copy in, compute, copy out) with events for
    /// dependencies and timing, callbacks for completion; prints a summary.
    Demo(demo::DemoArgs),
    /// Collective bandwidth sweep (nccl-tests style: time, algorithm and bus bandwidth per
    /// message size); one process for every rank, or one rank per process under a launcher's
    /// environment (torchrun `RANK`/`WORLD_SIZE`/`LOCAL_RANK`, Slurm, Open MPI, PMI: see
    /// `xstream bootstrap`), the id from `XSTREAM_UNIQUE_ID`, `XSTREAM_UNIQUE_ID_FILE` or the
    /// TCP rendezvous.
    Collectives(collectives::CollArgs),
    /// What the bootstrap finds in this process's environment and where from: the launcher
    /// (torchrun, Slurm, Open MPI, Hydra, PMI), rank, world size, local rank, job token and
    /// rank 0's rendezvous endpoint; starts nothing.
    Bootstrap,
    /// Runs the portable conformance checks against a backend.
    Conform {
        /// auto, host, cuda or ascend.
        #[arg(long, default_value = "auto")]
        backend: String,
        /// Only checks whose name contains this.
        #[arg(long)]
        filter: Option<String>,
    },
}

/// Parses `auto` or a backend name.
pub(crate) fn pick_backend(s: &str) -> Result<BackendKind> {
    if s == "auto" {
        // The demo and the conformance checks launch the built-in kernels: prefer a backend
        // that has them (an NPU runtime without them is used only when asked by name).
        Ok(xstream::auto_for(xstream::Capabilities::KERNELS))
    } else {
        s.parse()
    }
}

fn info(backend: Option<&str>) -> Result<()> {
    let kinds = match backend {
        Some(b) => vec![b.parse::<BackendKind>()?],
        None => BackendKind::ALL.to_vec(),
    };
    println!("xstream {}", env!("CARGO_PKG_VERSION"));
    for kind in kinds {
        match xstream::availability(kind) {
            Err(Error::NotCompiled(_)) => println!("\n[{kind}] not compiled in"),
            Err(e) => println!("\n[{kind}] compiled in, not available: {e}"),
            Ok(()) => {
                println!("\n[{kind}] available");
                xstream::dispatch!(kind, B => print_devices::<B>())?;
            }
        }
    }
    Ok(())
}

/// `xstream bootstrap`: the bootstrap's findings, one line each.
fn bootstrap() -> Result<()> {
    for line in bootstrap_lines(|k| std::env::var(k).ok())? {
        println!("{line}");
    }
    Ok(())
}

fn bootstrap_lines(get: impl Fn(&str) -> Option<String>) -> Result<Vec<String>> {
    use xstream::collective::bootstrap::Bootstrap;
    Ok(match Bootstrap::from_lookup(get)? {
        None => vec![
            "not launched as a job: no launcher's variables are set (torchrun RANK/WORLD_SIZE, Slurm SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID, Open MPI OMPI_COMM_WORLD_*, PMI_RANK/PMI_SIZE), or XSTREAM_LAUNCHER=none".to_string(),
        ],
        Some(b) => b.found,
    })
}

/// The `xstream info` line naming the priority classes a device cannot tell from `Normal`.
fn collapsed_line(r: &xstream::PriorityRange) -> Option<String> {
    let c = r.collapsed_classes();
    if c.is_empty() {
        return None;
    }
    let names: Vec<String> = c.iter().map(|p| format!("{p:?}")).collect();
    Some(format!(
        "priority classes equal to Normal (native {}): {}",
        r.default,
        names.join(", ")
    ))
}

/// The `xstream info` lines of a device's facts (chip, compute units, memory, identity); a
/// fact the vendor does not report is shown as `n/a`.
fn facts_lines(info: &xstream::DeviceInfo, mem: Result<xstream::MemoryInfo>) -> Vec<String> {
    let na = || "n/a".to_string();
    let mib = |b: u64| format!("{} MiB", b >> 20);
    let cc = info
        .compute_capability
        .map(|(a, b)| format!(", compute capability {a}.{b}"))
        .unwrap_or_default();
    let free = match mem {
        Ok(m) => mib(m.free),
        Err(e) => format!("n/a ({e})"),
    };
    vec![
        format!(
            "chip: {}{cc}; compute units: {}",
            info.chip.clone().unwrap_or_else(na),
            info.compute_units.map_or_else(na, |n| n.to_string())
        ),
        format!(
            "memory: {} total, {free} free",
            info.total_memory.map_or_else(na, mib)
        ),
        format!(
            "uuid: {}; pci bus id: {}",
            info.uuid.map_or_else(na, |u| u.to_string()),
            info.pci_bus_id.clone().unwrap_or_else(na)
        ),
    ]
}

fn print_devices<B: Backend>() -> Result<()> {
    let n = B::device_count()?;
    println!("  devices: {n}");
    for i in 0..n {
        let d = B::open(i)?;
        let info = d.info();
        let r = info.priority_range;
        println!("  #{i} {} ({})", info.name, info.driver);
        println!(
            "     priority range: least {} .. greatest {} (default {}){}",
            r.least,
            r.greatest,
            r.default,
            if r.is_flat() { ", single level" } else { "" }
        );
        if let Some(line) = collapsed_line(&r) {
            println!("     {line}");
        }
        if let Some(m) = info.max_streams {
            println!("     max streams: {m}");
        }
        for line in facts_lines(info, d.memory_info()) {
            println!("     {line}");
        }
        let caps: Vec<&str> = info
            .capabilities
            .iter_names()
            .map(|(name, _)| name)
            .collect();
        println!("     capabilities: {}", caps.join(", "));
        let missing: Vec<&str> = xstream::Capabilities::all()
            .difference(info.capabilities)
            .iter_names()
            .map(|(name, _)| name)
            .collect();
        if !missing.is_empty() {
            println!("     lacks: {}", missing.join(", "));
        }
    }
    Ok(())
}

/// The tables of `kinds` as Markdown, exactly as `docs/FLAGS.md` holds them.
fn flags_markdown(kinds: &[BackendKind]) -> Result<String> {
    let mut out = String::new();
    for k in kinds {
        out.push_str(&xstream::flag_table(*k)?.to_markdown());
        out.push('\n');
    }
    Ok(out)
}

fn flags(backend: Option<String>) -> Result<()> {
    let kinds = match backend {
        Some(b) => vec![b.parse()?],
        None => xstream::compiled(),
    };
    print!("{}", flags_markdown(&kinds)?);
    Ok(())
}

fn conform(backend: &str, filter: Option<&str>) -> Result<bool> {
    let kind = pick_backend(backend)?;
    xstream::availability(kind)?;
    println!("conformance on the {kind} backend");
    match kind {
        BackendKind::Host => conform_on::<xstream::HostBackend>(
            Some(|| Ok(xstream::host::HostDevice::new_isolated(0))),
            filter,
        ),
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => conform_on::<xstream::CudaBackend>(None, filter),
        #[cfg(feature = "ascend")]
        BackendKind::Ascend => conform_on::<xstream::AscendBackend>(
            Some(|| xstream::ascend::AscendDevice::new_isolated(0)),
            filter,
        ),
        #[allow(unreachable_patterns)]
        other => Err(Error::NotCompiled(other)),
    }
}

fn conform_on<B: Backend>(
    isolated: Option<fn() -> Result<B::Device>>,
    filter: Option<&str>,
) -> Result<bool> {
    let env = xstream_conformance::Env::<B> {
        device: B::open(0)?,
        isolated,
    };
    let info = env.device.info().clone();
    println!("device: {} ({})", info.name, info.driver);
    // Skips are judged against the backend's list of checks that may skip (each SKIP line
    // carries the listed reason); an unlisted skip is reported as a failure.
    let sum = xstream_conformance::run(&env, filter, xstream_conformance::print_line);
    println!(
        "{} passed, {} failed, {} skipped (listed for {}); {} listed as may-skip passed",
        sum.passed,
        sum.failed,
        sum.skipped,
        B::KIND,
        sum.listed_passed
    );
    Ok(sum.failed == 0)
}

/// Prints xstream's `tracing` events to stderr, filtered by `XSTREAM_LOG` (else `RUST_LOG`,
/// else `warn`; env-filter syntax such as `xstream_cuda=debug,warn`); a filter that does not
/// parse is reported and `warn` used.
fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let spec = std::env::var("XSTREAM_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_default();
    let filter = if spec.trim().is_empty() {
        EnvFilter::new("warn")
    } else {
        EnvFilter::try_new(&spec).unwrap_or_else(|e| {
            eprintln!("warning: log filter `{spec}` does not parse ({e}); using `warn`");
            EnvFilter::new("warn")
        })
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .try_init();
}

fn main() -> ExitCode {
    init_tracing();
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Info { backend } => info(backend.as_deref()).map(|_| true),
        Cmd::Flags { backend } => flags(backend).map(|_| true),
        Cmd::Demo(a) => demo::run(&a).map(|_| true),
        Cmd::Collectives(a) => collectives::run(&a).map(|_| true),
        Cmd::Bootstrap => bootstrap().map(|_| true),
        Cmd::Conform { backend, filter } => conform(&backend, filter.as_deref()),
    };
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/FLAGS.md` mirrors the tables in the backends' `conv.rs`: everything after the
    /// marker line is the output of `xstream flags`.
    #[test]
    fn flags_doc_matches_the_tables() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/FLAGS.md");
        let doc = std::fs::read_to_string(path).expect("docs/FLAGS.md");
        let marker = "<!-- generated by `xstream flags`; do not edit below -->\n";
        let at = doc.find(marker).expect("marker line in docs/FLAGS.md");
        let generated = flags_markdown(&xstream::compiled()).unwrap();
        assert!(
            doc[at + marker.len()..] == generated,
            "docs/FLAGS.md is stale: regenerate its tail with `cargo run -p xstream-cli -- flags`"
        );
    }

    #[test]
    fn bootstrap_prints_what_it_found_and_from_where() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let lines = bootstrap_lines(env(&[
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_JOB_ID", "55"),
            ("SLURM_STEP_ID", "0"),
            ("SLURM_JOB_NODELIST", "gpu[3-4]"),
        ]))
        .unwrap()
        .join("\n");
        assert!(
            lines.contains("rank 1 of 2 (local rank 1) from slurm"),
            "{lines}"
        );
        assert!(
            lines.contains("job token \"55.0\" from SLURM_JOB_ID.SLURM_STEP_ID"),
            "{lines}"
        );
        assert!(lines.contains("rendezvous at gpu3:"), "{lines}");
        assert!(
            lines.contains("first host of SLURM_JOB_NODELIST"),
            "{lines}"
        );
        let none = bootstrap_lines(env(&[])).unwrap().join("\n");
        assert!(none.contains("not launched as a job"), "{none}");
        let e = bootstrap_lines(env(&[
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("MASTER_ADDR"), "{e}");
    }

    #[test]
    fn info_names_collapsed_priorities() {
        let acl = xstream::PriorityRange {
            least: 7,
            greatest: 0,
            default: 0,
        };
        let line = collapsed_line(&acl).expect("ACL collapses High and Highest");
        assert!(line.contains("High, Highest"), "{line}");
        let wide = xstream::PriorityRange {
            least: 4,
            greatest: -4,
            default: 0,
        };
        assert_eq!(collapsed_line(&wide), None);
    }

    #[test]
    fn info_shows_facts_or_na() {
        let mut info = xstream::DeviceInfo {
            backend: BackendKind::Cuda,
            ordinal: 0,
            name: "test".into(),
            priority_range: xstream::PriorityRange {
                least: 0,
                greatest: 0,
                default: 0,
            },
            capabilities: xstream::Capabilities::empty(),
            max_streams: None,
            driver: String::new(),
            chip: None,
            base_alignment: 256,
            compute_capability: None,
            compute_units: None,
            total_memory: None,
            uuid: None,
            pci_bus_id: None,
        };
        info.chip = Some("sm_90".into());
        info.compute_capability = Some((9, 0));
        info.compute_units = Some(132);
        info.total_memory = Some(80 << 30);
        info.uuid = Some(xstream::DeviceUuid([0xab; 16]));
        info.pci_bus_id = None;
        let mem = Ok(xstream::MemoryInfo {
            free: 1 << 30,
            total: 80 << 30,
        });
        let l = facts_lines(&info, mem).join("\n");
        assert!(
            l.contains("chip: sm_90, compute capability 9.0; compute units: 132"),
            "{l}"
        );
        assert!(l.contains("memory: 81920 MiB total, 1024 MiB free"), "{l}");
        assert!(
            l.contains("uuid: abababab-abab-") && l.contains("pci bus id: n/a"),
            "{l}"
        );
        info.compute_units = None;
        let l = facts_lines(&info, Err(xstream::Error::invalid("x"))).join("\n");
        assert!(
            l.contains("compute units: n/a") && l.contains("n/a (invalid"),
            "{l}"
        );
    }

    #[test]
    fn backend_names_parse() {
        assert_eq!(pick_backend("host").unwrap(), BackendKind::Host);
        assert!(pick_backend("opencl").is_err());
        assert!(pick_backend("auto").is_ok());
    }
}
