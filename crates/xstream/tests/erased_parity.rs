//! The erased path keeps up with the generic one: every method of the core's `Device`,
//! `Stream`, `Event`, `Buffer`, `Graph`, `Module` and `Function` traits has a method of the same
//! name on the matching `Any*` type, unless it is on the short exclusion list below with its
//! reason. The lists are read from the sources, so a trait method added without its erased
//! counterpart fails this test.

use std::collections::BTreeSet;

/// Methods with no erased counterpart of the same name, and why.
const EXCLUDED: &[(&str, &str, &str)] = &[
    (
        "Device",
        "register_host_range",
        "the backend side of `with_registered_host` (unsafe, raw pointer): `AnyDevice::with_registered_host`",
    ),
    (
        "Stream",
        "as_raw",
        "the native handle's type differs per backend: `AnyStream::downcast_ref` gives the typed stream",
    ),
    (
        "Stream",
        "from_raw",
        "wraps a native handle of one backend: call it on the typed stream, then `AnyStream::from`",
    ),
    (
        "Event",
        "as_raw",
        "the native handle's type differs per backend: `AnyEvent::downcast_ref`",
    ),
    (
        "Stream",
        "launch_builder",
        "the builder collects typed arguments; the erased path takes the same arguments as a slice \
         (`AnyStream::launch_kernel`, `AnyStream::launch_checked`)",
    ),
    (
        "Stream",
        "enqueue_launch",
        "the builder's checked launch is `AnyStream::launch_checked` on the erased path",
    ),
    (
        "Stream",
        "enqueue_launch_unchecked",
        "an unchecked launch needs the kernel's layout from its caller: use the typed stream",
    ),
];

fn source(rel: &str) -> String {
    let p = format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// The body of the first `{ ... }` block after `at` in `src`.
fn block(src: &str, at: usize) -> &str {
    let open = at + src[at..].find('{').expect("a block");
    let mut depth = 0usize;
    for (i, c) in src[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &src[open + 1..open + i];
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced block")
}

/// Names of the methods declared at the block's own level (four spaces in) with `prefix`.
fn methods(body: &str, prefix: &str) -> BTreeSet<String> {
    body.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("    ")?;
            if rest.starts_with(' ') {
                return None;
            }
            let rest = rest.strip_prefix(prefix)?;
            let rest = rest.strip_prefix("unsafe ").unwrap_or(rest);
            let name = rest.strip_prefix("fn ")?;
            let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
            Some(name[..end].to_string())
        })
        .collect()
}

/// The public methods of every `impl {ty} {` block of the erased sources.
fn erased_methods(erased: &str, ty: &str) -> BTreeSet<String> {
    let mut have = BTreeSet::new();
    let head = format!("\nimpl {ty} {{");
    let mut from = 0;
    while let Some(i) = erased[from..].find(&head) {
        have.extend(methods(block(erased, from + i), "pub "));
        from += i + head.len();
    }
    have
}

#[test]
fn every_trait_method_has_an_erased_counterpart() {
    let core = source("../xstream-core/src/backend.rs");
    let erased: String = [
        "src/any/mod.rs",
        "src/any/views.rs",
        "src/any/raw.rs",
        "src/any/vmm.rs",
    ]
    .iter()
    .map(|f| source(f))
    .collect();
    let mut missing = Vec::new();
    let mut counted = 0;
    for t in [
        "Device", "Stream", "Event", "Buffer", "Graph", "Module", "Function",
    ] {
        let at = core
            .find(&format!("\npub trait {t}:"))
            .or_else(|| core.find(&format!("\npub trait {t} ")))
            .unwrap_or_else(|| panic!("trait {t} not found in backend.rs"));
        let want = methods(block(&core, at), "");
        assert!(!want.is_empty(), "no method found in trait {t}");
        let have = erased_methods(&erased, &format!("Any{t}"));
        for m in &want {
            counted += 1;
            let excluded = EXCLUDED.iter().any(|(tt, mm, _)| *tt == t && mm == m);
            if !have.contains(m) && !excluded {
                missing.push(format!("{t}::{m}"));
            }
            if have.contains(m) && excluded {
                missing.push(format!(
                    "{t}::{m} is excluded but exists: drop the exclusion"
                ));
            }
        }
    }
    // Virtual memory (xstream-core's vmm.rs): the user-facing methods of the `VirtualMemory`
    // trait on `AnyDevice` (its `raw_*` hooks are the backends' part, reached only through the
    // checked methods), and the methods of `VirtualRange` / `PhysicalMemory` on their erased
    // types (except `raw` and `device`, whose types differ per backend).
    let vmm = source("../xstream-core/src/vmm.rs");
    for (item, erased_ty) in [
        ("\npub trait VirtualMemory:", "AnyDevice"),
        (
            "\nimpl<D: VirtualMemory> VirtualRange<D> {",
            "AnyVirtualRange",
        ),
        (
            "\nimpl<D: VirtualMemory> PhysicalMemory<D> {",
            "AnyPhysicalMemory",
        ),
    ] {
        let at = vmm
            .find(item)
            .unwrap_or_else(|| panic!("`{item}` not found in vmm.rs"));
        let body = block(&vmm, at);
        // Trait methods have no `pub`; of the inherent impls, only the public ones count.
        let want = methods(body, if erased_ty == "AnyDevice" { "" } else { "pub " });
        assert!(!want.is_empty(), "no method found in `{item}`");
        let have = erased_methods(&erased, erased_ty);
        for m in want {
            if m.starts_with("raw") || m == "device" {
                continue;
            }
            counted += 1;
            if !have.contains(&m) {
                missing.push(format!("{erased_ty}::{m} (vmm.rs)"));
            }
        }
    }
    assert!(
        counted > 80,
        "only {counted} trait methods found: the parser lost its way"
    );
    assert!(
        missing.is_empty(),
        "trait methods without an erased counterpart: {missing:?}"
    );
}
