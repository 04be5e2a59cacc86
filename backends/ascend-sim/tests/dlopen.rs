//! Loads the built `libascendcl.so` with `dlopen` (as the xstream Ascend backend does with
//! libloading) and calls a few entry points through function pointers.

use std::ffi::{c_char, c_void, CStr, CString};

fn lib_path() -> std::path::PathBuf {
    // `cargo test` builds the cdylib as a dependency of this test, next to it in
    // target/<profile>/deps; `cargo build -p xstream-ascend-sim` puts it in target/<profile>.
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir");
    let in_deps = deps.join("libascendcl.so");
    if in_deps.exists() {
        return in_deps;
    }
    deps.parent().expect("profile dir").join("libascendcl.so")
}

unsafe fn sym(h: *mut c_void, name: &str) -> *mut c_void {
    let c = CString::new(name).unwrap();
    // SAFETY: `h` is a live dlopen handle and `c` a valid C string.
    let p = unsafe { libc::dlsym(h, c.as_ptr()) };
    assert!(!p.is_null(), "missing symbol {name}");
    p
}

#[test]
fn dlopen_cdylib_and_call_through_pointers() {
    let path = lib_path();
    assert!(path.exists(), "{} not built", path.display());
    let cpath = CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: loading our own cdylib; its initializers are Rust statics only.
    let h = unsafe { libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!h.is_null(), "dlopen failed");
    // SAFETY: the symbols have exactly these C prototypes (the CANN AscendCL API reference).
    unsafe {
        let init: unsafe extern "C" fn(*const c_char) -> i32 =
            std::mem::transmute(sym(h, "aclInit"));
        let count: unsafe extern "C" fn(*mut u32) -> i32 =
            std::mem::transmute(sym(h, "aclrtGetDeviceCount"));
        let version: unsafe extern "C" fn() -> *const c_char =
            std::mem::transmute(sym(h, "xsimVersion"));
        let mut n = 0u32;
        assert_eq!(count(&mut n), 100_001, "uninitialized before aclInit");
        assert_eq!(init(std::ptr::null()), 0);
        assert_eq!(count(&mut n), 0);
        assert!(n >= 1);
        assert!(CStr::from_ptr(version())
            .to_bytes()
            .starts_with(b"xstream-ascend-sim"));
        for name in [
            "aclrtCreateStreamWithConfig",
            "aclrtQueryEventStatus",
            "aclrtProcessReport",
            "aclmdlRICaptureBegin",
            "aclrtAllocatorGetByStream",
            "aclGetRecentErrMsg",
        ] {
            sym(h, name);
        }
    }
}
