//! Whether a CUDA library can be opened, asked without cudarc's loader functions
//! (`is_culib_present`, `get_lib_name_candidates`), which exist only when cudarc loads its
//! libraries at run time. The probes here work however the build chose to get them: cudarc's
//! `dynamic-loading` or `fallback-dynamic-loading` (opened at the first call), or
//! `dynamic-linking` / `static-linking` (linked by the build; opening an already mapped
//! library again only returns it).
//!
//! The names tried are a subset of the names cudarc's loader tries for the same library, in
//! its order: `lib<name>.so`, then `lib<name>.so.<CUDA major of the bindings>` and
//! `lib<name>.so.{12,11,10,9,1}` on Linux (`<name>.dll` and the same suffixes elsewhere). So a
//! library found here is one cudarc's own loader opens too. cudarc also tries Windows-style
//! versioned names (`<name>64_12.dll`, ...), which this subset leaves out: a library present
//! only under such a name reads as absent (a clear `Error::NotAvailable`, not a panic).

use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};

/// The file names tried for library `name` (e.g. `"cuda"`), in cudarc's order: the plain
/// name, then the name with the CUDA major version of cudarc's bindings
/// (`cudarc::driver::sys::CUDA_VERSION`), then with 12, 11, 10, 9 and 1.
pub(crate) fn candidates(name: &str) -> Vec<String> {
    let base = format!("{DLL_PREFIX}{name}{DLL_SUFFIX}");
    let major = (cudarc::driver::sys::CUDA_VERSION / 1000).to_string();
    let mut v = vec![base.clone()];
    for s in [major.as_str(), "12", "11", "10", "9", "1"] {
        let f = format!("{base}.{s}");
        if !v.contains(&f) {
            v.push(f);
        }
    }
    v
}

/// Opens the first of `names`' candidates that loads: its file name and handle.
pub(crate) fn open_first(names: &[&str]) -> Option<(String, libloading::Library)> {
    names.iter().flat_map(|n| candidates(n)).find_map(|file| {
        // SAFETY: opening a CUDA library runs its initialisers, which have no preconditions;
        // the handle is only used to look symbols up (or dropped at once).
        unsafe { libloading::Library::new(&file) }
            .ok()
            .map(|lib| (file, lib))
    })
}

/// Whether one of `names` can be opened (the handle is dropped again).
pub(crate) fn present(names: &[&str]) -> bool {
    open_first(names).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_are_the_plain_name_then_versioned_ones() {
        let c = candidates("cuda");
        assert_eq!(c[0], format!("{DLL_PREFIX}cuda{DLL_SUFFIX}"));
        let major = cudarc::driver::sys::CUDA_VERSION / 1000;
        assert_eq!(c[1], format!("{DLL_PREFIX}cuda{DLL_SUFFIX}.{major}"));
        assert_eq!(c.last(), Some(&format!("{DLL_PREFIX}cuda{DLL_SUFFIX}.1")));
        // No name twice (the bindings' major may be 12).
        let mut d = c.clone();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), c.len());
    }

    #[test]
    fn a_library_that_does_not_exist_is_absent() {
        assert!(!present(&["xstream_no_such_library_9f3a"]));
    }
}
