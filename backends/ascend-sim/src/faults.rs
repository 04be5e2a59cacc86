//! Fault injection (simulator-only, NOT part of ACL): the fault rules (`XSIM_FAULTS`,
//! `xsimSetFaults`), call counting (`xsimCallCount`), `hang:` streams (`xsimReleaseHang`), poison
//! (`poison:`, `xsimLaunchFault`) and `xsimReset`. The README gives the spec grammar.

use crate::codes::*;
use crate::device::*;
use crate::error::*;
use crate::registry::*;
use crate::stream::*;
use crate::task::*;
use std::collections::HashMap;
use std::ffi::c_char;
use std::ffi::c_void;
use std::panic::catch_unwind;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::AtomicI32;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::sync::Condvar;
use std::sync::Mutex;
use std::sync::OnceLock;

struct Rule {
    sym: String,
    nth: Option<u64>,
    code: i32,
    seen: u64,
}

#[derive(Default)]
struct Faults {
    rules: Vec<Rule>,
    counts: HashMap<String, u64>,
}

fn faults() -> &'static Mutex<Faults> {
    static F: OnceLock<Mutex<Faults>> = OnceLock::new();
    F.get_or_init(|| {
        let f = Mutex::new(Faults::default());
        if let Ok(spec) = std::env::var("XSIM_FAULTS") {
            // Bad entries in the environment are ignored (there is nobody to report them to).
            let mut g = lock(&f);
            let _ = apply_spec(&mut g, &spec);
        }
        f
    })
}

/// Global poison code (from `poison:CODE`), consulted by every context.
pub(crate) static GLOBAL_POISON: AtomicI32 = AtomicI32::new(0);

pub(crate) static HANGS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

pub(crate) static HANG_CV: Condvar = Condvar::new();

fn apply_spec(f: &mut Faults, spec: &str) -> R {
    let mut rules = Vec::new();
    let mut hangs = Vec::new();
    let mut poison = None;
    for entry in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let parts: Vec<&str> = entry.split(':').map(str::trim).collect();
        let bad = || AclErr {
            code: ACL_ERROR_INVALID_PARAM,
            msg: format!("bad fault entry '{entry}'"),
        };
        match parts.as_slice() {
            ["hang", id] => hangs.push(id.parse::<i32>().map_err(|_| bad())?),
            ["poison", code] => poison = Some(code.parse::<i32>().map_err(|_| bad())?),
            [sym, n, code] => {
                let nth = if *n == "*" {
                    None
                } else {
                    match n.parse::<u64>() {
                        Ok(v) if v >= 1 => Some(v),
                        _ => return Err(bad()),
                    }
                };
                let code = code.parse::<i32>().map_err(|_| bad())?;
                rules.push(Rule {
                    sym: sym.to_string(),
                    nth,
                    code,
                    seen: 0,
                });
            }
            _ => return Err(bad()),
        }
    }
    f.rules = rules;
    if !hangs.is_empty() {
        lock(&HANGS).extend(hangs);
    }
    if let Some(p) = poison {
        GLOBAL_POISON.store(p, SeqCst);
    }
    Ok(())
}

/// Replaces the fault rules with `spec` (see README for the grammar).
pub(crate) fn set_faults(spec: &str) -> R {
    let mut g = lock(faults());
    apply_spec(&mut g, spec)
}

/// Counts a call of `name` and returns the injected code if a rule fires.
pub(crate) fn fault_hit(name: &str) -> Option<i32> {
    let mut g = lock(faults());
    *g.counts.entry(name.to_string()).or_insert(0) += 1;
    let mut hit = None;
    for r in g.rules.iter_mut().filter(|r| r.sym == name) {
        r.seen += 1;
        if hit.is_none() && r.nth.is_none_or(|n| n == r.seen) {
            hit = Some(r.code);
        }
    }
    hit
}

/// Counts a call without applying faults (for xsim helpers).
pub(crate) fn count_call(name: &str) {
    let mut g = lock(faults());
    *g.counts.entry(name.to_string()).or_insert(0) += 1;
}

pub(crate) fn call_count(name: &str) -> u64 {
    lock(faults()).counts.get(name).copied().unwrap_or(0)
}

/// Clears rules, counters, hangs and poison.
pub(crate) fn reset_faults() {
    {
        let mut g = lock(faults());
        g.rules.clear();
        g.counts.clear();
    }
    GLOBAL_POISON.store(0, SeqCst);
    release_hangs();
    let ctxs: Vec<Arc<Context>> = lock(reg()).ctxs.values().cloned().collect();
    for c in ctxs {
        c.poison.store(0, SeqCst);
    }
}

pub(crate) fn release_hangs() {
    lock(&HANGS).clear();
    HANG_CV.notify_all();
}

/// `aclError xsimLaunchFault(aclrtStream stream, aclError code)`: when executed, poisons the
/// stream's context with `code` (non-zero): later queued work is skipped (records still
/// complete, callbacks still run) and every later sync/query/enqueue in that context returns
/// `code` until the context is destroyed or `xsimReset()` is called.
///
/// # Safety
/// `stream` is a lookup key.
#[no_mangle]
pub unsafe extern "C" fn xsimLaunchFault(stream: *mut c_void, code: i32) -> i32 {
    ffi("xsimLaunchFault", true, || {
        if code == 0 {
            return err(ACL_ERROR_INVALID_PARAM, "fault code must be non-zero");
        }
        let s = enqueue_stream(stream)?;
        crate::exception::note_launcher(s.id);
        s.push(Task::Fault(code))
    })
}

/// `aclError xsimSetFaults(const char* spec)`: replaces the fault rules (NULL or "" clears
/// them). Grammar: `;`-separated `SYMBOL:N:CODE`, `SYMBOL:*:CODE`, `hang:STREAM_ID`,
/// `poison:CODE`. Malformed spec → 100000 (rules unchanged).
///
/// # Safety
/// `spec` must be NULL or a valid C string.
#[no_mangle]
pub unsafe extern "C" fn xsimSetFaults(spec: *const c_char) -> i32 {
    ffi("xsimSetFaults", false, || {
        // SAFETY: caller contract.
        let s = unsafe { opt_str(spec) }?.unwrap_or_default();
        set_faults(&s)
    })
}

/// `aclError xsimReleaseHang(void)`: releases every `hang:` stream.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn xsimReleaseHang() -> i32 {
    ffi("xsimReleaseHang", false, || {
        release_hangs();
        Ok(())
    })
}

/// `aclError xsimReset(void)`: clears fault rules, call counters, hangs and poison (global and
/// per context).
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn xsimReset() -> i32 {
    ffi("xsimReset", false, || {
        reset_faults();
        Ok(())
    })
}

/// `uint64_t xsimCallCount(const char* symbol)`: calls of `symbol` since load or `xsimReset()`
/// (failed and fault-injected calls included). NULL or unknown → 0.
///
/// # Safety
/// `symbol` must be NULL or a valid C string.
#[no_mangle]
pub unsafe extern "C" fn xsimCallCount(symbol: *const c_char) -> u64 {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: caller contract.
        match unsafe { opt_str(symbol) } {
            Ok(Some(s)) => call_count(&s),
            _ => 0,
        }
    }))
    .unwrap_or(0)
}
