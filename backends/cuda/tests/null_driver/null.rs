//! The double's counters, read through its `xnull_*` exports (the same loaded instance
//! cudarc calls).

use super::*;

pub(crate) struct Null {
    lib: libloading::Library,
}

impl Null {
    pub(crate) fn open(p: &Path) -> Self {
        // SAFETY: the double's initialisers are Rust statics without preconditions; the path
        // is the one cudarc opens (the same loaded instance).
        let lib = unsafe { libloading::Library::new(p) }.expect("dlopen the null driver");
        Self { lib }
    }

    /// `xnull_functions`: the exported driver functions.
    pub(crate) fn names(&self) -> Vec<String> {
        // SAFETY: `size_t xnull_functions(const char **names, size_t cap)` (cuda-null docs).
        let f = unsafe {
            *self
                .lib
                .get::<unsafe extern "C" fn(*mut *const c_char, usize) -> usize>(
                    b"xnull_functions\0",
                )
                .expect("xnull_functions")
        };
        // SAFETY: a null array with capacity 0 only asks for the count.
        let n = unsafe { f(std::ptr::null_mut(), 0) };
        let mut v = vec![std::ptr::null::<c_char>(); n];
        // SAFETY: `v` holds `n` writable entries.
        let got = unsafe { f(v.as_mut_ptr(), n) };
        assert_eq!(got, n);
        v.into_iter()
            // SAFETY: static NUL-terminated names of the double.
            .map(|p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
            .collect()
    }

    pub(crate) fn count(&self, symbol: &[u8], name: &str) -> u64 {
        // SAFETY: `uint64_t xnull_calls(const char*)` / `xnull_thread_calls` (cuda-null docs).
        let f = unsafe {
            *self
                .lib
                .get::<unsafe extern "C" fn(*const c_char) -> u64>(symbol)
                .expect("xnull counter")
        };
        let c = CString::new(name).expect("no NUL in a name");
        // SAFETY: a valid C string for the call.
        let v = unsafe { f(c.as_ptr()) };
        assert_ne!(v, u64::MAX, "the null driver does not export {name}");
        v
    }

    /// Calls of `name` by every thread since the last reset.
    pub(crate) fn calls(&self, name: &str) -> u64 {
        self.count(b"xnull_calls\0", name)
    }

    /// This thread's calls, by name, of every function it called since its last reset.
    pub(crate) fn thread_counts(&self, names: &[String]) -> BTreeMap<String, u64> {
        names
            .iter()
            .map(|n| (n.clone(), self.count(b"xnull_thread_calls\0", n)))
            .filter(|(_, c)| *c > 0)
            .collect()
    }

    /// `xnull_last_call`: where the latest call of `name` stands in the order of every driver
    /// call since the process started (0: never called).
    pub(crate) fn last_call(&self, name: &str) -> u64 {
        self.count(b"xnull_last_call\0", name)
    }

    /// `xnull_wait_ns`: ns callers spent blocked waiting for host functions since the reset.
    pub(crate) fn wait_ns(&self) -> u64 {
        // SAFETY: `uint64_t xnull_wait_ns(void)` (cuda-null docs).
        let f = unsafe {
            *self
                .lib
                .get::<unsafe extern "C" fn() -> u64>(b"xnull_wait_ns\0")
                .expect("xnull_wait_ns")
        };
        // SAFETY: no arguments.
        unsafe { f() }
    }

    /// `xnull_thread_evict_ns`: ns this thread's driver calls spent evicting the caches
    /// (`XNULL_EVICT_KB`) since its last reset; 0 when that mode is off.
    pub(crate) fn evict_ns(&self) -> u64 {
        // SAFETY: `uint64_t xnull_thread_evict_ns(void)` (cuda-null docs).
        let f = unsafe {
            *self
                .lib
                .get::<unsafe extern "C" fn() -> u64>(b"xnull_thread_evict_ns\0")
                .expect("xnull_thread_evict_ns")
        };
        // SAFETY: no arguments.
        unsafe { f() }
    }

    /// `xnull_fail_next`: the next `n` calls of `name` (any thread) return `code`.
    pub(crate) fn fail_next(&self, name: &str, n: u64, code: u32) {
        // SAFETY: `uint32_t xnull_fail_next(const char*, uint64_t, uint32_t)` (cuda-null docs).
        let f = unsafe {
            *self
                .lib
                .get::<unsafe extern "C" fn(*const c_char, u64, u32) -> u32>(b"xnull_fail_next\0")
                .expect("xnull_fail_next")
        };
        let c = CString::new(name).expect("no NUL in a name");
        // SAFETY: a valid C string for the call.
        let r = unsafe { f(c.as_ptr(), n, code) };
        assert_eq!(r, 0, "the null driver does not export {name}");
    }

    /// `xnull_host_fn_calls`: driver calls made from inside a host function since the reset.
    pub(crate) fn host_fn_calls(&self) -> u64 {
        // SAFETY: `uint64_t xnull_host_fn_calls(void)` (cuda-null docs).
        let f = unsafe {
            *self
                .lib
                .get::<unsafe extern "C" fn() -> u64>(b"xnull_host_fn_calls\0")
                .expect("xnull_host_fn_calls")
        };
        // SAFETY: no arguments.
        unsafe { f() }
    }

    /// `xnull_stream_host_fns`: host functions launched on the stream `h`.
    pub(crate) fn stream_host_fns(&self, h: sys::CUstream) -> u64 {
        // SAFETY: `uint64_t xnull_stream_host_fns(CUstream)` (cuda-null docs).
        let f = unsafe {
            *self
                .lib
                .get::<unsafe extern "C" fn(sys::CUstream) -> u64>(b"xnull_stream_host_fns\0")
                .expect("xnull_stream_host_fns")
        };
        // SAFETY: `h` is a stream handle the double returned (the callers pass a live
        // stream's handle).
        let v = unsafe { f(h) };
        assert_ne!(v, u64::MAX, "not a stream of the null driver");
        v
    }

    pub(crate) fn reset(&self) {
        // SAFETY: `void xnull_reset(void)`.
        let f = unsafe {
            *self
                .lib
                .get::<unsafe extern "C" fn()>(b"xnull_reset\0")
                .expect("xnull_reset")
        };
        // SAFETY: no arguments.
        unsafe { f() }
    }
}
