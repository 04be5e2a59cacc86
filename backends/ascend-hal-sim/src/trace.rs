//! Optional call trace (`XSTREAM_HAL_SIM_TRACE=1`), for following the runtime through start-up.

use std::sync::OnceLock;

/// Whether tracing is on (read once from the environment).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("XSTREAM_HAL_SIM_TRACE").is_some_and(|v| v == "1"))
}

/// Prints one trace line to stderr when tracing is on.
pub fn line(args: std::fmt::Arguments<'_>) {
    if enabled() {
        eprintln!("[hal-sim] {args}");
    }
}

/// `trace!("fmt", args)`: one trace line when `XSTREAM_HAL_SIM_TRACE=1`.
#[macro_export]
macro_rules! trace {
    ($($t:tt)*) => { $crate::trace::line(format_args!($($t)*)) };
}
