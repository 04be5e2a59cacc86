//! The little the xstream examples share: choosing the backend at run time and reporting how a
//! program ended.
//!
//! Every example is a binary under `src/bin/` that takes the same choice:
//!
//! - `--backend NAME` (or `--backend=NAME`) on the command line, where `NAME` is `auto`,
//!   `host`, `cuda` or `ascend`;
//! - otherwise the `XSTREAM_BACKEND` environment variable, with the same names;
//! - otherwise `auto`: the first available of CUDA, Ascend, host whose device 0 has the
//!   capabilities the example needs ([`xstream::auto_for`]).
//!
//! The Ascend backend finds `libascendcl.so` on its own (see the README); to run an example
//! over the ACL runtime simulator that the workspace builds, point `XSTREAM_ACL_LIBRARY` at it:
//!
//! ```sh
//! cargo build -p xstream-ascend-sim
//! XSTREAM_ACL_LIBRARY="$PWD/target/debug/libascendcl.so" \
//!     cargo run -p xstream-examples --bin pipeline -- --backend ascend
//! ```

//!
//! Examples whose logic is a library module (so the crate's tests can run it in process):
//!
//! | example | binary | what |
//! |---|---|---|
//! | [`data_parallel`] | `data-parallel-allreduce` | data-parallel training steps: per-device gradients averaged with `all_reduce` on every device it is given, ordered by events, verified |
//! | [`expandable`] | `expandable` | the expandable caching allocator over virtual memory (also benchmarked: `benches/expandable_alloc.rs`) |

pub mod data_parallel;
pub mod expandable;

use std::process::ExitCode;

use xstream::{BackendKind, Capabilities, Error, Result};

/// The environment variable naming the backend when `--backend` is not given.
pub const BACKEND_ENV: &str = "XSTREAM_BACKEND";

/// Parses a backend name: `auto` resolves to the first available backend whose device 0 has
/// `needs` ([`xstream::auto_for`]); any other name must be a [`BackendKind`].
///
/// # Errors
/// [`Error::InvalidArgument`] for an unknown name.
pub fn parse_backend(name: &str, needs: Capabilities) -> Result<BackendKind> {
    if name.eq_ignore_ascii_case("auto") {
        Ok(xstream::auto_for(needs))
    } else {
        name.parse()
    }
}

/// The backend named by `args` (the program's arguments after its name) or else `env` (the
/// value of [`BACKEND_ENV`]), or else `auto`; see the crate documentation. Whether it is
/// available is not checked.
///
/// # Errors
/// [`Error::InvalidArgument`] for an unknown argument or backend name, or a `--backend`
/// without a value.
pub fn requested_backend_from(
    args: &[String],
    env: Option<&str>,
    needs: Capabilities,
) -> Result<BackendKind> {
    let mut name = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some(v) = a.strip_prefix("--backend=") {
            name = Some(v.to_string());
        } else if a == "--backend" {
            let v = it.next().ok_or_else(|| {
                Error::invalid("--backend needs a value: auto, host, cuda or ascend")
            })?;
            name = Some(v.clone());
        } else {
            return Err(Error::invalid(format!(
                "unknown argument `{a}` (usage: [--backend auto|host|cuda|ascend])"
            )));
        }
    }
    let name = name.or_else(|| env.map(str::to_string));
    parse_backend(name.as_deref().unwrap_or("auto"), needs)
}

/// [`requested_backend_from`] over this process's arguments and environment.
///
/// # Errors
/// As [`requested_backend_from`].
pub fn requested_backend(needs: Capabilities) -> Result<BackendKind> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let env = std::env::var(BACKEND_ENV).ok();
    requested_backend_from(&args, env.as_deref(), needs)
}

/// The backend an example runs on: [`requested_backend`], which must be available here.
///
/// # Errors
/// As [`requested_backend_from`]; the backend's reason when it is not available (or not
/// compiled in).
pub fn choose_backend(needs: Capabilities) -> Result<BackendKind> {
    let kind = requested_backend(needs)?;
    xstream::availability(kind)?;
    Ok(kind)
}

/// The exit status of an example that needs a kernel binary the device cannot load (an
/// Ascend runtime that refuses the simulator's test-only format and has no binary of the
/// example's kernel): 3, after a `needs a kernel binary:` line on stderr. Distinct from 1 (an
/// error) so scripts can tell "cannot run here" from "ran and failed".
pub const EXIT_NEEDS_KERNEL_BINARY: u8 = 3;

/// Prints why `example` cannot run here (it needs a kernel binary) and returns
/// [`EXIT_NEEDS_KERNEL_BINARY`].
pub fn needs_kernel_binary(example: &str, why: &str) -> ExitCode {
    eprintln!("needs a kernel binary: {example}: {why}");
    ExitCode::from(EXIT_NEEDS_KERNEL_BINARY)
}

/// The environment variable with the log filter of the examples (and of the `xstream` CLI):
/// `tracing-subscriber`'s env-filter syntax, e.g. `debug` or `xstream_cuda=debug,warn`.
/// `RUST_LOG` is read when it is not set; the default is `warn`.
pub const LOG_ENV: &str = "XSTREAM_LOG";

/// Installs a `tracing` subscriber that prints xstream's events to stderr, filtered by
/// [`LOG_ENV`] (else `RUST_LOG`, else `warn`): without one, the libraries' warnings (a flag
/// dropped under best effort, a device exception, a leaked buffer) go nowhere. A filter that
/// does not parse is reported and `warn` used. Call it first in `main`; later calls do
/// nothing.
pub fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let spec = std::env::var(LOG_ENV)
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

/// The exit status of an example: success, or the error on stderr and failure.
pub fn exit_code(r: Result<()>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_argument_wins_over_the_environment() {
        let none = Capabilities::empty();
        let k = requested_backend_from(&args(&["--backend", "host"]), Some("nonsense"), none);
        assert_eq!(k.unwrap(), BackendKind::Host);
        let k = requested_backend_from(&args(&["--backend=cpu"]), None, none);
        assert_eq!(k.unwrap(), BackendKind::Host);
        let k = requested_backend_from(&[], Some("host"), none);
        assert_eq!(k.unwrap(), BackendKind::Host);
    }

    #[test]
    fn bad_arguments_are_clear_errors() {
        let none = Capabilities::empty();
        let e = requested_backend_from(&args(&["--backend"]), None, none).unwrap_err();
        assert!(e.to_string().contains("needs a value"), "{e}");
        let e = requested_backend_from(&args(&["--fast"]), None, none).unwrap_err();
        assert!(e.to_string().contains("unknown argument `--fast`"), "{e}");
        let e = requested_backend_from(&[], Some("opencl"), none).unwrap_err();
        assert!(e.to_string().contains("opencl"), "{e}");
    }
}
