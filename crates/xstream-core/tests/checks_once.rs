//! Every check of a device, stream, event, graph, buffer, module or function operation lives
//! once, in the checked layer (`crates/xstream-core/src/api/`, and `src/ipc.rs` for the
//! interprocess operations), and the backend traits `DeviceImpl`, `StreamImpl`, `EventImpl`,
//! `GraphImpl`, `BufferImpl`, `ModuleImpl`, `FunctionImpl`, `IpcEventImpl` and `IpcBufferImpl`
//! have only required methods, so no backend can skip or override a check. Read
//! from the sources: a check helper called again in a backend's code for those handles, or a
//! provided method added to one of those traits, fails this test.

use std::path::{Path, PathBuf};

/// The helpers that enforce the portable rules of the handles' operations.
const CHECKS: &[&str] = &[
    "check_range(",
    "ensure_not_in_callback(",
    "check_timeout(",
    "check_word(",
    "check_buffer_device",
    "reduce::check(",
    "random::check(",
    "check_overlap(",
    "value.check(",
    ".check_for(",
    "FunctionName::new(",
];

/// Functions of the backends' files of those handles that keep a check, and why: none of them
/// is an operation of a checked trait, so no checked layer sits above it. (`backend`, `file`
/// under `src/`, the enclosing function, the reason.)
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
        "event.rs",
        "borrow_raw",
        "an ACL-only extension (an event over a raw handle)",
    ),
    (
        "cuda",
        "device.rs",
        "enter",
        "the gated bind of the entry points the checked layer does not reach (CUDA-only \
         extensions, collectives, virtual memory, `Backend::open`); the portable operations \
         use `Shared::bind`, without the gate",
    ),
    (
        "host",
        "device.rs",
        "open",
        "`Backend::open`, not an operation of `Device`",
    ),
    (
        "ascend",
        "device.rs",
        "open",
        "`Backend::open`, not an operation of `Device`",
    ),
    (
        "ascend",
        "device.rs",
        "device_count",
        "`Backend::device_count`, not an operation of `Device`",
    ),
    (
        "ascend",
        "device.rs",
        "new_isolated",
        "an ACL-only extension",
    ),
    (
        "ascend",
        "device.rs",
        "register_host",
        "an ACL-only extension",
    ),
    (
        "ascend",
        "device.rs",
        "bind",
        "an ACL-only extension (binds the device's context to the calling thread)",
    ),
    (
        "ascend",
        "device.rs",
        "set_saturation_mode",
        "an ACL-only extension",
    ),
    (
        "ascend",
        "device.rs",
        "has_feature",
        "an ACL-only extension",
    ),
    (
        "ascend",
        "device.rs",
        "set_pool_release_threshold",
        "an ACL-only extension",
    ),
    ("ascend", "device.rs", "trim_pool", "an ACL-only extension"),
    (
        "ascend",
        "module.rs",
        "load_builtin",
        "the builtin binary's own function names, looked up when a device opens",
    ),
];

/// The backends whose code the rule covers (the ACL simulator and the null CUDA driver are
/// vendor doubles: their checks are the vendor's behaviour, not xstream's).
const BACKENDS: &[&str] = &["host", "cuda", "ascend"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `backends/<b>/src/{stream,event,graph,device,buffer,memory,module,ipc_mem}.rs` where they exist
/// and every file under `backends/<b>/src/{stream,event,device,memory}/`.
fn sources(backend: &str) -> Vec<PathBuf> {
    let src = root().join("backends").join(backend).join("src");
    let mut files = Vec::new();
    for m in [
        "stream", "event", "graph", "device", "buffer", "memory", "module", "ipc_mem",
    ] {
        let file = src.join(format!("{m}.rs"));
        if file.exists() {
            files.push(file);
        }
        let Ok(dir) = std::fs::read_dir(src.join(m)) else {
            continue;
        };
        let mut more: Vec<PathBuf> = dir
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "rs"))
            .collect();
        more.sort();
        files.extend(more);
    }
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
fn backends_handle_code_calls_no_check() {
    let mut files = Vec::new();
    for b in BACKENDS {
        files.extend(sources(b));
    }
    assert!(files.len() > 35, "the backends' sources: {files:?}");
    for (b, f) in [
        ("host", "buffer.rs"),
        ("host", "module.rs"),
        ("cuda", "memory.rs"),
        ("cuda", "module.rs"),
        ("ascend", "device/buffer.rs"),
        ("ascend", "module.rs"),
        ("host", "ipc_mem.rs"),
        ("ascend", "ipc_mem.rs"),
        ("cuda", "memory/ipc.rs"),
        ("ascend", "event/ipc.rs"),
    ] {
        let want = format!("backends/{b}/src/{f}");
        assert!(
            files.iter().any(|p| p.to_string_lossy().ends_with(&want)),
            "{want} is not read"
        );
    }
    let found = check_calls(&files);
    assert!(
        found.is_empty(),
        "checks of the handles' operations belong to xstream-core's checked layer (src/api/), \
         not to a backend:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_checked_layer_holds_the_checks() {
    // The other side of the rule: the helpers are called by the checked layer.
    for (file, calls) in [
        (
            "api/stream.rs",
            &[
                "check_range(",
                "ensure_not_in_callback(",
                "check_buffer_device",
            ][..],
        ),
        (
            "api/event.rs",
            &["ensure_not_in_callback(", "check_timeout("][..],
        ),
        (
            "api/buffer.rs",
            &["ensure_not_in_callback(", ".check_for("][..],
        ),
        (
            "api/module.rs",
            &["ensure_not_in_callback(", "FunctionName::new("][..],
        ),
        (
            "ipc.rs",
            &["ensure_not_in_callback(", ".check_for(", "check_range("][..],
        ),
    ] {
        let api = root().join("crates/xstream-core/src").join(file);
        let found = check_calls(&[api]);
        for c in calls {
            assert!(
                found.iter().any(|l| l.contains(c)),
                "src/{file} no longer calls {c}"
            );
        }
    }
}

/// The signatures of the methods of `trait {name}` in `file` (under `crates/xstream-core/src/`)
/// that have a body.
fn provided_methods(file: &str, name: &str) -> Vec<String> {
    let path = root().join("crates/xstream-core/src").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let start = text
        .find(&format!("pub trait {name}"))
        .unwrap_or_else(|| panic!("trait {name} in {file}"));
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
    provided
}

#[test]
fn backend_traits_have_only_required_methods() {
    for (file, name) in [
        ("backend/stream.rs", "StreamImpl"),
        ("backend/event.rs", "EventImpl"),
        ("backend/event.rs", "GraphImpl"),
        ("backend/device.rs", "DeviceImpl"),
        ("backend/buffer.rs", "BufferImpl"),
        ("backend/module.rs", "ModuleImpl"),
        ("backend/module.rs", "FunctionImpl"),
        ("ipc.rs", "IpcEventImpl"),
        ("ipc.rs", "IpcBufferImpl"),
    ] {
        let provided = provided_methods(file, name);
        assert!(
            provided.is_empty(),
            "{name} is what a backend must implement: no provided methods (put shared \
             behaviour in the checked layer, src/api/): {provided:?}"
        );
    }
}
