//! Building the vendor-style C programs of `tests/c/` against the simulated `libascendcl.so`
//! (shared by `c_sample.rs` and `c_sysinfo.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the simulated `libascendcl.so` is: `cargo test` builds the cdylib next to the test
/// binary (target/<profile>/deps) and `cargo build` one level up; the first that has it.
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir").to_path_buf();
    if deps.join("libascendcl.so").exists() {
        return deps;
    }
    deps.parent().expect("profile dir").to_path_buf()
}

/// The C compiler (`$CC`, else gcc) when it runs, else `None` (the caller prints SKIP).
pub fn compiler() -> Option<String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "gcc".into());
    let ok = Command::new(&cc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(cc)
}

/// Compiles `tests/c/<source>` with warnings as errors plus `flags`, links it against the
/// simulator in `lib` and `libs`, writing `out`; panics with the compiler's output on failure.
pub fn build(cc: &str, lib: &Path, out: &Path, source: &str, flags: &[&str], libs: &[&str]) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    let o = Command::new(cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
        .args(flags)
        .arg("-I")
        .arg(&src)
        .arg(src.join(source))
        .arg("-o")
        .arg(out)
        .arg("-L")
        .arg(lib)
        .arg("-lascendcl")
        .args(libs)
        .output()
        .expect("run the C compiler");
    assert!(
        o.status.success(),
        "{source} did not build:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
