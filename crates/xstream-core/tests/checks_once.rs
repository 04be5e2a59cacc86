//! Every check of a stream operation lives once, in the checked layer
//! (`crates/xstream-core/src/api/stream.rs`), and the backend trait `StreamImpl` has only
//! required methods, so no backend can skip or override a check. Read from the sources: a
//! check helper called again in a backend's stream code, or a provided method added to
//! `StreamImpl`, fails this test.

use std::path::{Path, PathBuf};

/// The helpers that enforce the portable rules of stream operations.
const CHECKS: &[&str] = &[
    "check_range(",
    "ensure_not_in_callback(",
    "check_timeout(",
    "check_word(",
    "check_buffer_device",
    "reduce::check(",
    "check_overlap(",
    "value.check(",
];

/// Functions of the backends' stream files that keep a check, and why: none of them is an
/// operation of `Stream`, so no checked layer sits above it. (`backend`, `file` under `src/`,
/// the enclosing function, the reason.)
const OWN_CHECKS: &[(&str, &str, &str, &str)] = &[
    (
        "cuda",
        "stream/capture.rs",
        "exchange_thread_capture_mode",
        "a CUDA-only function of the calling thread, no stream",
    ),
    (
        "ascend",
        "stream/callback.rs",
        "launch_host_func",
        "an ACL-only extension (`aclrtLaunchHostFunc`)",
    ),
    (
        "ascend",
        "stream/capture.rs",
        "native_capture_info",
        "an ACL-only extension (`aclmdlRICaptureGetInfo`)",
    ),
    (
        "ascend",
        "stream/native.rs",
        "native_flags",
        "an ACL-only extension",
    ),
    (
        "ascend",
        "stream/native.rs",
        "set_failure_mode",
        "an ACL-only extension",
    ),
    (
        "ascend",
        "stream/native.rs",
        "destroy_force",
        "an ACL-only extension",
    ),
    (
        "ascend",
        "stream/create.rs",
        "create",
        "`Device::create_stream`: the device's gate, until `Device` has its checked layer too",
    ),
];

/// The backends whose stream code the rule covers (the ACL simulator and the null CUDA driver
/// are vendor doubles: their checks are the vendor's behaviour, not xstream's).
const BACKENDS: &[&str] = &["host", "cuda", "ascend"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `backends/<b>/src/stream.rs` and every file under `backends/<b>/src/stream/`.
fn stream_sources(backend: &str) -> Vec<PathBuf> {
    let src = root().join("backends").join(backend).join("src");
    let mut files = vec![src.join("stream.rs")];
    let dir = src.join("stream");
    let mut more: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    more.sort();
    files.extend(more);
    files
}

/// `file:line: text` of every line of `files` that calls one of `CHECKS` (comments aside),
/// less those in a function of `OWN_CHECKS`.
fn check_calls(files: &[PathBuf]) -> Vec<String> {
    let mut found = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let path = f.to_string_lossy().replace('\\', "/");
        let mut func = String::new();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if let Some(at) = code.find("fn ") {
                let name = &code[at + 3..];
                let end = name
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(name.len());
                func = name[..end].to_string();
            }
            if !CHECKS.iter().any(|c| code.contains(c)) {
                continue;
            }
            let own = OWN_CHECKS.iter().any(|(b, file, fun, _)| {
                path.ends_with(&format!("backends/{b}/src/{file}")) && func == *fun
            });
            if !own {
                found.push(format!("{path}:{}: in `{func}`: {}", i + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn backends_stream_code_calls_no_check() {
    let mut files = Vec::new();
    for b in BACKENDS {
        files.extend(stream_sources(b));
    }
    assert!(files.len() > 20, "the backends' stream sources: {files:?}");
    let found = check_calls(&files);
    assert!(
        found.is_empty(),
        "checks of stream operations belong to xstream-core's checked layer \
         (src/api/stream.rs), not to a backend:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_checked_layer_holds_the_checks() {
    // The other side of the rule: the helpers are called by the checked layer.
    let api = root().join("crates/xstream-core/src/api/stream.rs");
    let found = check_calls(&[api]);
    for c in [
        "check_range(",
        "ensure_not_in_callback(",
        "check_buffer_device",
    ] {
        assert!(
            found.iter().any(|l| l.contains(c)),
            "src/api/stream.rs no longer calls {c}"
        );
    }
}

#[test]
fn stream_impl_has_only_required_methods() {
    let path = root().join("crates/xstream-core/src/backend/stream.rs");
    let text = std::fs::read_to_string(&path).expect("backend/stream.rs");
    let start = text
        .find("pub trait StreamImpl")
        .expect("the StreamImpl trait");
    let mut depth = 0usize;
    let mut provided = Vec::new();
    let mut in_fn: Option<String> = None;
    for line in text[start..].lines() {
        let code = line.split("//").next().unwrap_or("");
        if depth == 1 {
            let t = code.trim_start();
            if t.starts_with("fn ") || t.starts_with("unsafe fn ") {
                in_fn = Some(t.to_string());
            }
        }
        for ch in code.chars() {
            match ch {
                '{' => {
                    // An opening brace inside the trait's own level opens a method body.
                    if depth == 1 {
                        if let Some(f) = in_fn.take() {
                            provided.push(f);
                        }
                    }
                    depth += 1;
                }
                '}' => depth -= 1,
                ';' if depth == 1 => in_fn = None,
                _ => {}
            }
        }
        if depth == 0 && line.contains('}') {
            break;
        }
    }
    assert!(
        provided.is_empty(),
        "StreamImpl is what a backend must implement: no provided methods (put shared \
         behaviour in the checked layer, src/api/stream.rs): {provided:?}"
    );
}
