//! The external per-stream allocator registry: allocator descriptors
//! (`aclrtAllocatorCreateDesc`, `aclrtAllocatorSet*ToDesc`, `aclrtAllocatorDestroyDesc`) and their
//! registration on streams (`aclrtAllocatorRegister`, `aclrtAllocatorGetByStream`,
//! `aclrtAllocatorUnregister`). The simulator stores the functions and never calls them.

use crate::codes::*;
use crate::error::*;
use crate::faults::*;
use std::collections::HashMap;
use std::ffi::c_void;
use std::panic::catch_unwind;
use std::sync::Mutex;
use std::sync::OnceLock;

/// C `aclrtAllocatorAllocFunc`: `void* (*)(aclrtAllocator, size_t)`, nullable.
pub type AclrtAllocatorAllocFunc = Option<unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void>;

/// C `aclrtAllocatorFreeFunc`: `void (*)(aclrtAllocator, aclrtAllocatorBlock)`, nullable.
pub type AclrtAllocatorFreeFunc = Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>;

/// C `aclrtAllocatorAllocAdviseFunc`: `void* (*)(aclrtAllocator, size_t, aclrtAllocatorAddr)`.
pub type AclrtAllocatorAllocAdviseFunc =
    Option<unsafe extern "C" fn(*mut c_void, usize, *mut c_void) -> *mut c_void>;

/// C `aclrtAllocatorGetAddrFromBlockFunc`: `void* (*)(aclrtAllocatorBlock)`, nullable.
pub type AclrtAllocatorGetAddrFromBlockFunc =
    Option<unsafe extern "C" fn(*mut c_void) -> *mut c_void>;

#[derive(Clone, Copy, Default)]
struct Desc {
    obj: usize,
    alloc: AclrtAllocatorAllocFunc,
    free: AclrtAllocatorFreeFunc,
    advise: AclrtAllocatorAllocAdviseFunc,
    get_addr: AclrtAllocatorGetAddrFromBlockFunc,
}

#[derive(Default)]
struct AllocReg {
    descs: HashMap<usize, Desc>,
    by_stream: HashMap<usize, (usize, Desc)>,
}

fn areg() -> &'static Mutex<AllocReg> {
    static A: OnceLock<Mutex<AllocReg>> = OnceLock::new();
    A.get_or_init(Default::default)
}

fn with_desc(h: *mut c_void, f: impl FnOnce(&mut Desc)) -> R {
    non_null(h, "allocatorDesc")?;
    let mut g = lock(areg());
    let d = g.descs.get_mut(&(h as usize)).map_or_else(
        || err(ACL_ERROR_INVALID_PARAM, "unknown allocator desc"),
        Ok,
    )?;
    f(d);
    Ok(())
}

/// `aclrtAllocatorDesc aclrtAllocatorCreateDesc()`: NULL on failure.
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclrtAllocatorCreateDesc() -> *mut c_void {
    count_call("aclrtAllocatorCreateDesc");
    catch_unwind(|| {
        let h = Box::into_raw(Box::new(0u64)) as usize;
        lock(areg()).descs.insert(h, Desc::default());
        h as *mut c_void
    })
    .unwrap_or(std::ptr::null_mut())
}

/// `aclError aclrtAllocatorDestroyDesc(aclrtAllocatorDesc allocatorDesc)`.
///
/// # Safety
/// `desc` must be NULL or a handle from `aclrtAllocatorCreateDesc`.
#[no_mangle]
pub unsafe extern "C" fn aclrtAllocatorDestroyDesc(desc: *mut c_void) -> i32 {
    ffi("aclrtAllocatorDestroyDesc", false, || {
        non_null(desc, "allocatorDesc")?;
        if lock(areg()).descs.remove(&(desc as usize)).is_none() {
            return err(ACL_ERROR_INVALID_PARAM, "unknown allocator desc");
        }
        // SAFETY: the handle was produced by Box::into_raw in aclrtAllocatorCreateDesc and has
        // just been removed from the registry, so it is freed exactly once.
        drop(unsafe { Box::from_raw(desc as *mut u64) });
        Ok(())
    })
}

/// `aclError aclrtAllocatorSetObjToDesc(aclrtAllocatorDesc, aclrtAllocator)`.
///
/// # Safety
/// `desc` is a lookup key; `allocator` is stored, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn aclrtAllocatorSetObjToDesc(
    desc: *mut c_void,
    allocator: *mut c_void,
) -> i32 {
    ffi("aclrtAllocatorSetObjToDesc", false, || {
        with_desc(desc, |d| d.obj = allocator as usize)
    })
}

/// One `aclrtAllocatorSet*FuncToDesc(aclrtAllocatorDesc, <function type>)` setter: stores the
/// function in the desc's field.
macro_rules! func_setter {
    ($($name:ident($ty:ty, $c_ty:literal $(,)?) => $field:ident;)*) => {$(
        #[doc = concat!("`aclError ", stringify!($name), "(aclrtAllocatorDesc, ", $c_ty, ")`.")]
        ///
        /// # Safety
        /// `desc` is a lookup key; the function is stored, never called.
        #[no_mangle]
        pub unsafe extern "C" fn $name(desc: *mut c_void, func: $ty) -> i32 {
            ffi(stringify!($name), false, || with_desc(desc, |d| d.$field = func))
        }
    )*};
}

func_setter! {
    aclrtAllocatorSetAllocFuncToDesc(AclrtAllocatorAllocFunc, "aclrtAllocatorAllocFunc") => alloc;
    aclrtAllocatorSetFreeFuncToDesc(AclrtAllocatorFreeFunc, "aclrtAllocatorFreeFunc") => free;
    aclrtAllocatorSetAllocAdviseFuncToDesc(
        AclrtAllocatorAllocAdviseFunc,
        "aclrtAllocatorAllocAdviseFunc",
    ) => advise;
    aclrtAllocatorSetGetAddrFromBlockFuncToDesc(
        AclrtAllocatorGetAddrFromBlockFunc,
        "aclrtAllocatorGetAddrFromBlockFunc",
    ) => get_addr;
}

/// `aclError aclrtAllocatorRegister(aclrtStream stream, aclrtAllocatorDesc allocatorDesc)`:
/// copies the desc into a map keyed by the stream pointer; stream, obj, alloc, free and getAddr
/// must be non-NULL (100000); re-register replaces.
///
/// # Safety
/// Handles are lookup keys.
#[no_mangle]
pub unsafe extern "C" fn aclrtAllocatorRegister(stream: *mut c_void, desc: *mut c_void) -> i32 {
    ffi("aclrtAllocatorRegister", false, || {
        non_null(stream, "stream")?;
        non_null(desc, "allocatorDesc")?;
        let mut g = lock(areg());
        let d = *g.descs.get(&(desc as usize)).map_or_else(
            || err(ACL_ERROR_INVALID_PARAM, "unknown allocator desc"),
            Ok,
        )?;
        if d.obj == 0 || d.alloc.is_none() || d.free.is_none() || d.get_addr.is_none() {
            return err(
                ACL_ERROR_INVALID_PARAM,
                "allocator desc lacks obj/alloc/free/getAddrFromBlock",
            );
        }
        g.by_stream.insert(stream as usize, (desc as usize, d));
        Ok(())
    })
}

/// `aclError aclrtAllocatorGetByStream(aclrtStream, aclrtAllocatorDesc*, aclrtAllocator*,
/// aclrtAllocatorAllocFunc*, aclrtAllocatorFreeFunc*, aclrtAllocatorAllocAdviseFunc*,
/// aclrtAllocatorGetAddrFromBlockFunc*)`: stream and desc out-pointer required; others optional;
/// unknown stream → 100000.
///
/// # Safety
/// Every non-NULL out-pointer must be valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtAllocatorGetByStream(
    stream: *mut c_void,
    desc: *mut *mut c_void,
    allocator: *mut *mut c_void,
    alloc_func: *mut AclrtAllocatorAllocFunc,
    free_func: *mut AclrtAllocatorFreeFunc,
    advise_func: *mut AclrtAllocatorAllocAdviseFunc,
    get_addr_func: *mut AclrtAllocatorGetAddrFromBlockFunc,
) -> i32 {
    ffi("aclrtAllocatorGetByStream", false, || {
        non_null(stream, "stream")?;
        non_null(desc, "allocatorDesc")?;
        let (h, d) = lock(areg())
            .by_stream
            .get(&(stream as usize))
            .copied()
            .map_or_else(
                || err(ACL_ERROR_INVALID_PARAM, "no allocator registered"),
                Ok,
            )?;
        // SAFETY: caller contract; optional outputs are written only when non-NULL.
        unsafe {
            put(desc, h as *mut c_void)?;
            if !allocator.is_null() {
                put(allocator, d.obj as *mut c_void)?;
            }
            if !alloc_func.is_null() {
                put(alloc_func, d.alloc)?;
            }
            if !free_func.is_null() {
                put(free_func, d.free)?;
            }
            if !advise_func.is_null() {
                put(advise_func, d.advise)?;
            }
            if !get_addr_func.is_null() {
                put(get_addr_func, d.get_addr)?;
            }
        }
        Ok(())
    })
}

/// `aclError aclrtAllocatorUnregister(aclrtStream stream)`: NULL → 100000; unknown or repeated
/// → 0.
///
/// # Safety
/// `stream` is a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtAllocatorUnregister(stream: *mut c_void) -> i32 {
    ffi("aclrtAllocatorUnregister", false, || {
        non_null(stream, "stream")?;
        lock(areg()).by_stream.remove(&(stream as usize));
        Ok(())
    })
}
