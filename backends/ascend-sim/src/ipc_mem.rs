//! IPC memory: `aclrtIpcMemGetExportKey`, `aclrtIpcMemSetImportPid`,
//! `aclrtIpcMemImportByKey`, `aclrtIpcMemClose` (prototypes: `include/external/acl/acl_rt.h`;
//! checks: `src/acl/aclrt_impl/memory.cpp`, `src/runtime/api/api_c_memory.cc`,
//! `src/runtime/api/impl/api_error.cc`, `api_impl_standard_soc.cc`, `api_impl.cc`).
//!
//! Order of checks, as the runtime: the ACL layer's NULL checks (100000); the runtime's
//! argument checks (107000: size or key length 0, export flags above
//! `DISABLE_PID_VALIDATION`, import flags above `ENABLE_PEER_ACCESS`, a PID count ≤ 0); the
//! product's `RT_FEATURE_IPC_MEMORY` (207000, the case with `XSIM_IPC=0`); then the driver.
//! The driver is closed source: the simulator answers its refusals (a key it does not know, a
//! closed or freed export, an exporter that exited, a PID not on the whitelist, a key buffer
//! too short, an address that is not the start of an `aclrtMalloc` block) with 107000, the
//! runtime's mapping of the driver's "invalid value".
//!
//! With IPC on (the default) every `aclrtMalloc` block lives in a `memfd` after a one-page header
//! (export state, nonce, PID whitelist); a key is `xsim-<pid>-<fd>-<nonce>`, and an import
//! maps the same file, so reads and writes in either process touch the same bytes.
//! `aclrtIpcMemClose(key)` in an importing process unmaps its oldest import of the key; in the
//! exporting process (no import of the key there) it withdraws the export. `aclrtFree` of
//! the exported block withdraws it too; imports already open keep their mapping.

use crate::codes::*;
use crate::error::*;
use crate::ipc_shm::*;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64};
use std::sync::{Mutex, OnceLock};

const MAGIC: u64 = u64::from_le_bytes(*b"XSIMIPCM");
const MAX_PIDS: usize = 256;
const STATE_PRIVATE: u32 = 0;
const STATE_EXPORTED: u32 = 1;
const STATE_WITHDRAWN: u32 = 2;

/// The header page of a shared block.
#[repr(C)]
struct Hdr {
    magic: AtomicU64,
    nonce: AtomicU64,
    state: AtomicU32,
    no_pid_check: AtomicU32,
    size: AtomicU64,
    npids: AtomicU32,
    _pad: AtomicU32,
    pids: [AtomicI32; MAX_PIDS],
}

const _: () = assert!(std::mem::size_of::<Hdr>() <= PAGE);

fn hdr(s: &Shm) -> &Hdr {
    // SAFETY: every mapping is at least one page, page-aligned, and the header is only
    // accessed through atomics.
    unsafe { &*(s.base as *const Hdr) }
}

/// Blocks of this process by device address.
fn blocks() -> &'static Mutex<BTreeMap<usize, Shm>> {
    static B: OnceLock<Mutex<BTreeMap<usize, Shm>>> = OnceLock::new();
    B.get_or_init(Default::default)
}

/// Open imports of one key: (device address, mapping), oldest first.
type Imports = HashMap<String, Vec<(usize, Shm)>>;

/// Imports of this process by key.
fn imports() -> &'static Mutex<Imports> {
    static I: OnceLock<Mutex<Imports>> = OnceLock::new();
    I.get_or_init(Default::default)
}

/// Whether `aclrtMalloc` puts device blocks in shared memory.
pub(crate) fn shared_backing() -> bool {
    ipc_memory_supported()
}

/// Allocates a shared device block of `size` bytes; its device address.
pub(crate) fn alloc_shared(size: usize) -> R<*mut u8> {
    let len = size
        .checked_add(2 * PAGE - 1)
        .map(|n| n / PAGE * PAGE)
        .ok_or(AclErr {
            code: ACL_ERROR_INVALID_PARAM,
            msg: "size too large".into(),
        })?;
    let s = Shm::create(len)?;
    let h = hdr(&s);
    h.magic.store(MAGIC, SeqCst);
    h.nonce.store(nonce(), SeqCst);
    h.size.store(size as u64, SeqCst);
    // SAFETY: the mapping is `len >= PAGE + size` bytes.
    let p = unsafe { s.base.add(PAGE) };
    lock(blocks()).insert(p as usize, s);
    Ok(p)
}

/// Frees a shared block (withdrawing its export); `false` when `p` is not one.
pub(crate) fn free_shared(p: usize) -> bool {
    match lock(blocks()).remove(&p) {
        Some(s) => {
            hdr(&s).state.store(STATE_WITHDRAWN, SeqCst);
            true
        }
        None => false,
    }
}

/// Whether `p` is an import (which `aclrtFree` must not free).
pub(crate) fn is_import(p: usize) -> bool {
    lock(imports())
        .values()
        .any(|v| v.iter().any(|(q, _)| *q == p))
}

fn bad<T>(msg: impl Into<String>) -> R<T> {
    err(ACL_ERROR_RT_PARAM_INVALID, msg)
}

fn parse_key(key: &str) -> Option<(i32, i32, u64)> {
    let mut it = key.strip_prefix("xsim-")?.split('-');
    let pid = it.next()?.parse().ok()?;
    let fd = it.next()?.parse().ok()?;
    let nonce = u64::from_str_radix(it.next()?, 16).ok()?;
    it.next().is_none().then_some((pid, fd, nonce))
}

/// This process's exported block for `key`.
fn own_export(key: &str) -> R<usize> {
    let Some((pid, fd, n)) = parse_key(key) else {
        return bad(format!("unknown IPC memory key {key:?}"));
    };
    if pid != my_pid() {
        return bad("the key was exported by another process");
    }
    let g = lock(blocks());
    g.iter()
        .find(|(_, s)| s.fd == fd && hdr(s).nonce.load(SeqCst) == n)
        .map(|(p, _)| *p)
        .map_or_else(|| bad(format!("no live export for key {key:?}")), Ok)
}

unsafe fn key_arg(key: *const c_char) -> R<String> {
    // SAFETY: caller contract (non-NULL checked by the caller).
    match unsafe { opt_str(key) } {
        Ok(Some(s)) => Ok(s),
        _ => bad("the key is not a valid string"),
    }
}

/// `aclError aclrtIpcMemGetExportKey(void* devPtr, size_t size, char* key, size_t len,
/// uint64_t flags)`.
///
/// # Safety
/// `key` must be NULL or valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcMemGetExportKey(
    dev_ptr: *mut c_void,
    size: usize,
    key: *mut c_char,
    len: usize,
    flags: u64,
) -> i32 {
    ffi("aclrtIpcMemGetExportKey", true, || {
        non_null(dev_ptr, "devPtr")?;
        non_null(key, "key")?;
        if size == 0 || len == 0 || len > u32::MAX as usize {
            return bad("size and key length must be non-zero");
        }
        if flags > ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION {
            return bad(format!("export flags {flags:#x} out of [0, 1]"));
        }
        if !ipc_memory_supported() {
            return err(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                "the simulated product has no IPC memory (XSIM_IPC=0)",
            );
        }
        let g = lock(blocks());
        let Some(s) = g.get(&(dev_ptr as usize)) else {
            return bad("not the start of a live aclrtMalloc block");
        };
        let h = hdr(s);
        if size as u64 > h.size.load(SeqCst) {
            return bad("size beyond the block");
        }
        let text = format!("xsim-{}-{}-{:x}", my_pid(), s.fd, h.nonce.load(SeqCst));
        if text.len() + 1 > len {
            return bad(format!(
                "key buffer of {len} bytes, the key needs {}",
                text.len() + 1
            ));
        }
        if h.state.load(SeqCst) != STATE_EXPORTED {
            h.npids.store(0, SeqCst);
            h.no_pid_check.store(0, SeqCst);
        }
        if flags & ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION != 0 {
            h.no_pid_check.store(1, SeqCst);
        }
        h.state.store(STATE_EXPORTED, SeqCst);
        // SAFETY: `key` is valid for `len` bytes and the text plus NUL fits.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), key as *mut u8, text.len());
            *key.add(text.len()) = 0;
        }
        Ok(())
    })
}

/// `aclError aclrtIpcMemSetImportPid(const char* key, int32_t* pid, size_t num)`: adds to the
/// export's whitelist (the exporting process only).
///
/// # Safety
/// `key` a C string or NULL; `pid` NULL or valid for `num` reads.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcMemSetImportPid(
    key: *const c_char,
    pid: *mut i32,
    num: usize,
) -> i32 {
    ffi("aclrtIpcMemSetImportPid", true, || {
        non_null(key, "key")?;
        non_null(pid, "pid")?;
        if (num as i32) <= 0 {
            return bad(format!("PID count {num} out of (0, {}]", i32::MAX));
        }
        if !ipc_memory_supported() {
            return err(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                "the simulated product has no IPC memory (XSIM_IPC=0)",
            );
        }
        // SAFETY: caller contract.
        let k = unsafe { key_arg(key) }?;
        let p = own_export(&k)?;
        let g = lock(blocks());
        let Some(s) = g.get(&p) else {
            return bad("export withdrawn");
        };
        let h = hdr(s);
        if h.state.load(SeqCst) != STATE_EXPORTED {
            return bad("export withdrawn");
        }
        // SAFETY: caller contract: `num` readable PIDs.
        let list = unsafe { std::slice::from_raw_parts(pid, num) };
        let n = h.npids.load(SeqCst) as usize;
        if n + list.len() > MAX_PIDS {
            return bad(format!("more than {MAX_PIDS} PIDs on one whitelist"));
        }
        for (i, &q) in list.iter().enumerate() {
            h.pids[n + i].store(q, SeqCst);
        }
        h.npids.store((n + list.len()) as u32, SeqCst);
        Ok(())
    })
}

/// `aclError aclrtIpcMemImportByKey(void** devPtr, const char* key, uint64_t flags)`.
///
/// # Safety
/// `dev_ptr` NULL or valid for a write; `key` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcMemImportByKey(
    dev_ptr: *mut *mut c_void,
    key: *const c_char,
    flags: u64,
) -> i32 {
    ffi("aclrtIpcMemImportByKey", true, || {
        non_null(dev_ptr, "devPtr")?;
        non_null(key, "key")?;
        if flags > ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS {
            return bad(format!("import flags {flags:#x} out of [0, 1]"));
        }
        let ctx = crate::device::cur_ctx()?;
        if !ipc_memory_supported() {
            return err(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                "the simulated product has no IPC memory (XSIM_IPC=0)",
            );
        }
        // SAFETY: caller contract.
        let k = unsafe { key_arg(key) }?;
        let Some((pid, fd, n)) = parse_key(&k) else {
            return bad(format!("unknown IPC memory key {k:?}"));
        };
        let Some(s) = Shm::open(pid, fd, PAGE) else {
            return bad(format!(
                "IPC memory key {k:?}: the exporting process or its export is gone"
            ));
        };
        let h = hdr(&s);
        if h.magic.load(SeqCst) != MAGIC || h.nonce.load(SeqCst) != n {
            return bad(format!("unknown IPC memory key {k:?}"));
        }
        if h.state.load(SeqCst) != STATE_EXPORTED {
            return bad(format!("IPC memory key {k:?} was closed or freed"));
        }
        if h.no_pid_check.load(SeqCst) == 0 {
            let me = my_pid();
            let np = (h.npids.load(SeqCst) as usize).min(MAX_PIDS);
            if !h.pids[..np].iter().any(|q| q.load(SeqCst) == me) {
                return bad(format!(
                    "process {me} is not on the whitelist of IPC memory key {k:?} \
                     (aclrtIpcMemSetImportPid)"
                ));
            }
        }
        let size = h.size.load(SeqCst) as usize;
        if PAGE + size > s.len {
            return bad("corrupt IPC memory header");
        }
        // SAFETY: the mapping holds the header page and `size` bytes.
        let p = unsafe { s.base.add(PAGE) } as usize;
        crate::memory::register_import(p, size, ctx.device);
        lock(imports()).entry(k).or_default().push((p, s));
        // SAFETY: checked non-NULL; caller contract.
        unsafe { put(dev_ptr, p as *mut c_void) }
    })
}

/// `aclError aclrtIpcMemClose(const char* key)`: closes this process's oldest import of
/// `key`, or, with none, withdraws this process's export of it.
///
/// # Safety
/// `key` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcMemClose(key: *const c_char) -> i32 {
    ffi("aclrtIpcMemClose", true, || {
        non_null(key, "key")?;
        if !ipc_memory_supported() {
            return err(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                "the simulated product has no IPC memory (XSIM_IPC=0)",
            );
        }
        crate::device::cur_ctx()?;
        // SAFETY: caller contract.
        let k = unsafe { key_arg(key) }?;
        let import = {
            let mut g = lock(imports());
            match g.get_mut(&k) {
                Some(v) if !v.is_empty() => {
                    let x = v.remove(0);
                    if v.is_empty() {
                        g.remove(&k);
                    }
                    Some(x)
                }
                _ => None,
            }
        };
        if let Some((p, s)) = import {
            crate::memory::unregister_import(p);
            drop(s);
            return Ok(());
        }
        let p = own_export(&k)?;
        let g = lock(blocks());
        let Some(s) = g.get(&p) else {
            return bad("export withdrawn");
        };
        let h = hdr(s);
        if h.state.load(SeqCst) != STATE_EXPORTED {
            return bad(format!(
                "IPC memory key {k:?} is not exported (closed twice?)"
            ));
        }
        h.state.store(STATE_PRIVATE, SeqCst);
        h.nonce.store(nonce(), SeqCst);
        Ok(())
    })
}
