//! Configuration of the simulated device: product (`XSIM_PRODUCT`, `xsimSetProduct`), stream
//! and event limits (`XSIM_MAX_STREAMS` / `XSIM_MAX_EVENTS`, `xsimSetLimits`), device count
//! (`XSIM_DEVICES`), the device clock, and the runtime version (`aclrtGetVersion`,
//! `xsimSetVersion`, `xsimVersion`).

use crate::codes::*;
use crate::error::*;
use std::ffi::c_char;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::OnceLock;
use std::time::Instant;

/// Simulated product.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Product {
    A2,
    P310,
    T910,
}

static PRODUCT_OVERRIDE: AtomicU8 = AtomicU8::new(0);

static LIMIT_STREAMS: AtomicU32 = AtomicU32::new(0);

static LIMIT_EVENTS: AtomicU32 = AtomicU32::new(0);

fn env_u32(name: &str) -> Option<u32> {
    std::env::var(name).ok()?.trim().parse().ok()
}

pub(crate) fn parse_product(s: &str) -> Option<Product> {
    match s.trim().to_ascii_lowercase().as_str() {
        "a2" | "a3" | "910b" | "910c" | "950" | "" => Some(Product::A2),
        "310p" => Some(Product::P310),
        "910" => Some(Product::T910),
        _ => None,
    }
}

/// Sets (Some) or clears (None) the programmatic product override.
pub(crate) fn set_product(p: Option<Product>) {
    let v = match p {
        None => 0,
        Some(Product::A2) => 1,
        Some(Product::P310) => 2,
        Some(Product::T910) => 3,
    };
    PRODUCT_OVERRIDE.store(v, SeqCst);
}

pub(crate) fn product() -> Product {
    static ENV: OnceLock<Product> = OnceLock::new();
    match PRODUCT_OVERRIDE.load(SeqCst) {
        1 => Product::A2,
        2 => Product::P310,
        3 => Product::T910,
        _ => *ENV.get_or_init(|| {
            std::env::var("XSIM_PRODUCT")
                .ok()
                .and_then(|s| parse_product(&s))
                .unwrap_or(Product::A2)
        }),
    }
}

/// Programmatic limit override (0 = back to env / product default).
pub(crate) fn set_limits(streams: u32, events: u32) {
    LIMIT_STREAMS.store(streams, SeqCst);
    LIMIT_EVENTS.store(events, SeqCst);
}

pub(crate) fn max_streams() -> u32 {
    static ENV: OnceLock<Option<u32>> = OnceLock::new();
    let o = LIMIT_STREAMS.load(SeqCst);
    if o != 0 {
        return o;
    }
    if let Some(v) = *ENV.get_or_init(|| env_u32("XSIM_MAX_STREAMS")) {
        return v;
    }
    match product() {
        Product::A2 => 1984,
        Product::P310 => 1024,
        Product::T910 => 2048,
    }
}

pub(crate) fn max_events() -> u32 {
    static ENV: OnceLock<Option<u32>> = OnceLock::new();
    let o = LIMIT_EVENTS.load(SeqCst);
    if o != 0 {
        return o;
    }
    if let Some(v) = *ENV.get_or_init(|| env_u32("XSIM_MAX_EVENTS")) {
        return v;
    }
    match product() {
        Product::A2 => 65536,
        Product::P310 => 1023,
        Product::T910 => 65535,
    }
}

pub(crate) fn device_count() -> u32 {
    static ENV: OnceLock<u32> = OnceLock::new();
    *ENV.get_or_init(|| env_u32("XSIM_DEVICES").unwrap_or(1).max(1))
}

/// Nanoseconds since the simulated device "booted" (first use of the library).
pub(crate) fn now_ns() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// `aclError xsimSetLimits(uint32_t maxStreams, uint32_t maxEvents)`: per-device limits
/// overriding `XSIM_MAX_STREAMS` / `XSIM_MAX_EVENTS` / the product; 0 restores the default.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn xsimSetLimits(max_streams: u32, max_events: u32) -> i32 {
    ffi("xsimSetLimits", false, || {
        set_limits(max_streams, max_events);
        Ok(())
    })
}

/// `aclError xsimSetProduct(const char* product)`: `"a2"`, `"310p"` or `"910"` overrides
/// `XSIM_PRODUCT`; NULL restores it. Unknown name → 100000.
///
/// # Safety
/// `product` must be NULL or a valid C string.
#[no_mangle]
pub unsafe extern "C" fn xsimSetProduct(product: *const c_char) -> i32 {
    ffi("xsimSetProduct", false, || {
        // SAFETY: caller contract.
        match unsafe { opt_str(product) }? {
            None => set_product(None),
            Some(s) => match parse_product(&s) {
                Some(p) => set_product(Some(p)),
                None => return err(ACL_ERROR_INVALID_PARAM, format!("unknown product '{s}'")),
            },
        }
        Ok(())
    })
}

static VERSION: std::sync::Mutex<Option<(i32, i32, i32)>> = std::sync::Mutex::new(None);

/// The version `aclrtGetVersion` reports (default 1.17.0).
pub(crate) fn acl_version() -> (i32, i32, i32) {
    lock(&VERSION).unwrap_or((1, 17, 0))
}

/// `aclError aclrtGetVersion(int32_t* majorVersion, int32_t* minorVersion, int32_t*
/// patchVersion)`: the ACL API version the simulator models, 1.17.0 (CANN 9.x). Needs no
/// `aclInit`.
///
/// # Safety
/// Each pointer must be NULL (→ 100000) or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetVersion(major: *mut i32, minor: *mut i32, patch: *mut i32) -> i32 {
    ffi("aclrtGetVersion", false, || {
        non_null(major, "majorVersion")?;
        non_null(minor, "minorVersion")?;
        non_null(patch, "patchVersion")?;
        let (a, b, c) = acl_version();
        // SAFETY: checked non-NULL; the caller guarantees validity for writes.
        unsafe {
            major.write(a);
            minor.write(b);
            patch.write(c);
        }
        Ok(())
    })
}

/// `aclError xsimSetVersion(int32_t major, int32_t minor, int32_t patch)`: the version
/// `aclrtGetVersion` reports from now on (so loaders can be tested against other releases);
/// `0, 0, 0` restores 1.17.0. Negative parts → 100000.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn xsimSetVersion(major: i32, minor: i32, patch: i32) -> i32 {
    ffi("xsimSetVersion", false, || {
        if major < 0 || minor < 0 || patch < 0 {
            return err(ACL_ERROR_INVALID_PARAM, "negative version part");
        }
        *lock(&VERSION) = (major, minor, patch)
            .ne(&(0, 0, 0))
            .then_some((major, minor, patch));
        Ok(())
    })
}

/// `const char* xsimVersion(void)`: static version string naming the simulator.
///
/// # Safety
/// No pointer arguments; the result is a static string.
#[no_mangle]
pub unsafe extern "C" fn xsimVersion() -> *const c_char {
    concat!(
        "xstream-ascend-sim ",
        env!("CARGO_PKG_VERSION"),
        " (ACL 1.17.0 CPU test double)\0"
    )
    .as_ptr()
    .cast()
}
