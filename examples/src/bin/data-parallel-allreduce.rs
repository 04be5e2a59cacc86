//! Data-parallel all-reduce on every device it is given; see
//! `xstream_examples::data_parallel`.
//!
//! ```text
//! data-parallel-allreduce [--backend auto|host|cuda] [--ranks N] [--elems N] [--steps N]
//! ```
//! Under a torchrun-style environment (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, and
//! `XSTREAM_UNIQUE_ID`, `XSTREAM_UNIQUE_ID_FILE` or `MASTER_ADDR`/`MASTER_PORT`) the process is
//! one rank of the job.

use std::process::ExitCode;

use xstream_examples::data_parallel::{run, Config};

fn main() -> ExitCode {
    xstream_examples::init_tracing();
    let mut cfg = Config::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        let r = match a.as_str() {
            "--backend" => value("--backend").map(|v| cfg.backend = v),
            "--ranks" => value("--ranks")
                .and_then(|v| v.parse().map_err(|e| format!("--ranks: {e}")))
                .map(|n| cfg.ranks = Some(n)),
            "--elems" => value("--elems")
                .and_then(|v| v.parse().map_err(|e| format!("--elems: {e}")))
                .map(|n| cfg.elems = n),
            "--steps" => value("--steps")
                .and_then(|v| v.parse().map_err(|e| format!("--steps: {e}")))
                .map(|n| cfg.steps = n),
            "-h" | "--help" => {
                println!(
                    "data-parallel-allreduce [--backend auto|host|cuda] [--ranks N] [--elems N] [--steps N]"
                );
                return ExitCode::SUCCESS;
            }
            other => Err(format!("unknown argument {other:?} (see --help)")),
        };
        if let Err(e) = r {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    match run(&cfg) {
        Ok(r) => {
            println!("{r}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
