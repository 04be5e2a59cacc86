//! ABI tests of the ACL simulator through the rlib. Kernel loading and execution:
//! `aclrtBinaryLoadFromData` / `aclrtBinaryGetFunction` / `aclrtBinaryUnLoad`, the argument list
//! (`aclrtKernelArgsInit` / `Append` / `Finalize`), `aclrtLaunchKernelWithConfig` and
//! `aclrtLaunchKernel` over the simulator's test-only binary format.

mod common;

use ascendcl::binary::*;
use ascendcl::codes::*;
use ascendcl::*;
use common::*;
use std::ffi::c_void;
use std::ptr::{null, null_mut};

const LCG: BinEntry<'static> = (
    "my_lcg",
    2,
    &[XSIM_PARAM_PTR, XSIM_PARAM_U32, XSIM_PARAM_U32],
);
const DELAY: BinEntry<'static> = ("my_delay", 1, &[XSIM_PARAM_U64]);
const FAULT: BinEntry<'static> = ("my_fault", 3, &[XSIM_PARAM_I32]);
const FILL: BinEntry<'static> = (
    "my_fill",
    4,
    &[XSIM_PARAM_PTR, XSIM_PARAM_U32, XSIM_PARAM_U32],
);

/// Loads `entries` as a binary; returns the handle.
fn load(entries: &[BinEntry<'_>]) -> *mut c_void {
    let b = xsim_binary(entries);
    let mut h = null_mut();
    // SAFETY: `b` is readable for its length; `h` is writable.
    let rc = unsafe { aclrtBinaryLoadFromData(b.as_ptr().cast(), b.len(), null(), &mut h) };
    assert_eq!(rc, 0);
    assert!(!h.is_null());
    h
}

fn function(bin: *mut c_void, name: &std::ffi::CStr) -> *mut c_void {
    let mut f = null_mut();
    // SAFETY: live handle, NUL-terminated name, writable out-pointer.
    let rc = unsafe { aclrtBinaryGetFunction(bin, name.as_ptr(), &mut f) };
    assert_eq!(rc, 0);
    f
}

/// Builds the calling thread's argument list for `f` from `params` (each appended as is).
fn args(f: *mut c_void, params: &[&[u8]], finalize: bool) -> *mut c_void {
    let mut a = null_mut();
    // SAFETY: live handles; each param is readable for its length.
    unsafe {
        assert_eq!(aclrtKernelArgsInit(f, &mut a), 0);
        for p in params {
            let mut ph = null_mut();
            assert_eq!(
                aclrtKernelArgsAppend(a, p.as_ptr() as *mut c_void, p.len(), &mut ph),
                0
            );
            assert!(!ph.is_null());
        }
        if finalize {
            assert_eq!(aclrtKernelArgsFinalize(a), 0);
        }
    }
    a
}

fn launch(f: *mut c_void, s: *mut c_void, a: *mut c_void) -> i32 {
    // SAFETY: handles are lookup keys; cfg and reserve are NULL.
    unsafe { aclrtLaunchKernelWithConfig(f, 1, s, null(), a, null_mut()) }
}

#[test]
fn bad_binaries_are_refused() {
    let _g = shared();
    let mut h = null_mut();
    let good = xsim_binary(&[LCG]);
    let elf = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0";
    // SAFETY: every data pointer is readable for the length passed; out-pointers are writable.
    unsafe {
        assert_eq!(
            aclrtBinaryLoadFromData(elf.as_ptr().cast(), elf.len(), null(), &mut h),
            ACL_ERROR_RT_PARAM_INVALID,
            "a real kernel object is not the simulator's format"
        );
        assert_eq!(
            aclrtBinaryLoadFromData(good.as_ptr().cast(), good.len() - 1, null(), &mut h),
            ACL_ERROR_RT_PARAM_INVALID,
            "truncated"
        );
        let wrong_kinds = xsim_binary(&[("k", 2, &[XSIM_PARAM_PTR, XSIM_PARAM_U64])]);
        assert_eq!(
            aclrtBinaryLoadFromData(
                wrong_kinds.as_ptr().cast(),
                wrong_kinds.len(),
                null(),
                &mut h
            ),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(
            aclrtBinaryLoadFromData(good.as_ptr().cast(), 0, null(), &mut h),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(
            aclrtBinaryLoadFromData(null(), good.len(), null(), &mut h),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtBinaryLoadFromData(good.as_ptr().cast(), good.len(), null(), null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        // Load options: a known magic and lazy load pass; others are refused.
        let mut opts = [
            AclrtBinaryLoadOption {
                kind: ACL_RT_BINARY_LOAD_OPT_LAZY_LOAD,
                value: [1, 0, 0, 0],
            },
            AclrtBinaryLoadOption {
                kind: ACL_RT_BINARY_LOAD_OPT_MAGIC,
                value: [ACL_RT_BINARY_MAGIC_ELF_AICORE, 0, 0, 0],
            },
        ];
        let o = AclrtBinaryLoadOptions {
            options: opts.as_mut_ptr(),
            num_opt: 2,
        };
        assert_eq!(
            aclrtBinaryLoadFromData(good.as_ptr().cast(), good.len(), &o, &mut h),
            0
        );
        assert_eq!(aclrtBinaryUnLoad(h), 0);
        (*o.options.add(1)).value[0] = 0x1234;
        assert_eq!(
            aclrtBinaryLoadFromData(good.as_ptr().cast(), good.len(), &o, &mut h),
            ACL_ERROR_RT_PARAM_INVALID
        );
        *o.options.add(1) = AclrtBinaryLoadOption {
            kind: ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE,
            value: [2, 0, 0, 0],
        };
        assert_eq!(
            aclrtBinaryLoadFromData(good.as_ptr().cast(), good.len(), &o, &mut h),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        // A thread without a current context cannot load.
        let (p, n) = (good.as_ptr() as usize, good.len());
        let r = std::thread::spawn(move || {
            let mut h = null_mut();
            aclrtBinaryLoadFromData(p as *const c_void, n, null(), &mut h)
        })
        .join()
        .unwrap();
        assert_eq!(r, ACL_ERROR_RT_CONTEXT_NULL);
    }
    teardown();
}

#[test]
fn function_lookup_and_unload() {
    let _g = shared();
    let bin = load(&[LCG, DELAY]);
    let f = function(bin, c"my_lcg");
    assert_ne!(f, function(bin, c"my_delay"));
    assert_eq!(f, function(bin, c"my_lcg"), "one handle per kernel");
    let mut out = null_mut();
    let mut a = null_mut();
    // SAFETY: names are NUL-terminated; out-pointers writable; handles are lookup keys.
    unsafe {
        assert_eq!(
            aclrtBinaryGetFunction(bin, c"xstream_lcg".as_ptr(), &mut out),
            ACL_ERROR_RT_PARAM_INVALID,
            "unknown name"
        );
        assert_eq!(
            aclrtBinaryGetFunction(bin, null(), &mut out),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtBinaryGetFunction(null_mut(), c"my_lcg".as_ptr(), &mut out),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtBinaryGetFunction(bin, c"my_lcg".as_ptr(), null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtBinaryUnLoad(bin), 0);
        assert_eq!(aclrtBinaryUnLoad(bin), ACL_ERROR_RT_INVALID_HANDLE);
        assert_eq!(aclrtBinaryUnLoad(null_mut()), ACL_ERROR_INVALID_PARAM);
        assert_eq!(
            aclrtBinaryGetFunction(bin, c"my_lcg".as_ptr(), &mut out),
            ACL_ERROR_RT_INVALID_HANDLE
        );
        assert_eq!(
            aclrtKernelArgsInit(f, &mut a),
            ACL_ERROR_RT_INVALID_HANDLE,
            "functions of an unloaded binary are stale"
        );
    }
    teardown();
}

#[test]
fn argument_rules() {
    let _g = shared();
    let s = stream();
    let bin = load(&[LCG, DELAY]);
    let (f, d) = (function(bin, c"my_lcg"), function(bin, c"my_delay"));
    let mut words = [0u32; 2];
    let ptr = (words.as_mut_ptr() as u64).to_le_bytes();
    let (n, r) = (2u32.to_le_bytes(), 1u32.to_le_bytes());
    // Wrong size: rounds as u64.
    let a = args(f, &[&ptr, &n, &2u64.to_le_bytes()], true);
    assert_eq!(launch(f, s, a), ACL_ERROR_RT_PARAM_INVALID);
    // Too few parameters.
    let a = args(f, &[&ptr, &n], true);
    assert_eq!(launch(f, s, a), ACL_ERROR_RT_PARAM_INVALID);
    // Not finalized.
    let a = args(f, &[&ptr, &n, &r], false);
    assert_eq!(launch(f, s, a), ACL_ERROR_RT_PARAM_INVALID);
    // Initialised for another function.
    let a = args(d, &[&5u64.to_le_bytes()], true);
    assert_eq!(launch(f, s, a), ACL_ERROR_RT_PARAM_INVALID);
    let mut ph = null_mut();
    // SAFETY: live handles; params readable; out-pointers writable.
    unsafe {
        // Appending after finalize.
        assert_eq!(
            aclrtKernelArgsAppend(a, r.as_ptr() as *mut c_void, 4, &mut ph),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        assert_eq!(
            aclrtKernelArgsAppend(a, r.as_ptr() as *mut c_void, 0, &mut ph),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtKernelArgsAppend(null_mut(), r.as_ptr() as *mut c_void, 4, &mut ph),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtKernelArgsAppend(a, null_mut(), 4, &mut ph),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtKernelArgsAppend(0x10 as *mut c_void, r.as_ptr() as *mut c_void, 4, &mut ph),
            ACL_ERROR_RT_INVALID_HANDLE
        );
        // More than 128 parameters.
        let mut a2 = null_mut();
        assert_eq!(aclrtKernelArgsInit(f, &mut a2), 0);
        assert_eq!(a2, a, "one argument list per thread");
        for i in 0..129 {
            let rc = aclrtKernelArgsAppend(a2, r.as_ptr() as *mut c_void, 4, &mut ph);
            assert_eq!(
                rc,
                if i < 128 {
                    0
                } else {
                    ACL_ERROR_RT_PARAM_INVALID
                }
            );
        }
        // More than 64 KiB.
        let big = vec![0u8; 64 * 1024 + 1];
        assert_eq!(aclrtKernelArgsInit(f, &mut a2), 0);
        assert_eq!(
            aclrtKernelArgsAppend(a2, big.as_ptr() as *mut c_void, big.len(), &mut ph),
            ACL_ERROR_RT_PARAM_INVALID
        );
        // aclrtLaunchKernel: the block must have the layout's size.
        let block = [0u64; 3];
        assert_eq!(
            aclrtLaunchKernel(f, 1, block.as_ptr().cast(), 16, s),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(aclrtBinaryUnLoad(bin), 0);
    }
    assert_eq!(words, [0, 0], "nothing refused ran");
    destroy(s);
    teardown();
}

#[test]
fn null_handles_are_refused() {
    let _g = shared();
    let s = stream();
    let bin = load(&[LCG]);
    let f = function(bin, c"my_lcg");
    let mut w = [0u32; 1];
    let ptr = (w.as_mut_ptr() as u64).to_le_bytes();
    let a = args(f, &[&ptr, &1u32.to_le_bytes(), &1u32.to_le_bytes()], true);
    let cfg = AclrtLaunchKernelCfg {
        attrs: null_mut(),
        num_attrs: 1,
    };
    let mut out = null_mut();
    // SAFETY: NULL / bogus handles are lookup keys; `cfg` is valid.
    unsafe {
        assert_eq!(
            aclrtLaunchKernelWithConfig(null_mut(), 1, s, null(), a, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtLaunchKernelWithConfig(f, 1, s, null(), null_mut(), null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtLaunchKernelWithConfig(f, 0, s, null(), a, null_mut()),
            ACL_ERROR_INVALID_PARAM,
            "numBlocks 0"
        );
        assert_eq!(
            aclrtLaunchKernelWithConfig(f, 1, s, null(), a, 8 as *mut c_void),
            ACL_ERROR_INVALID_PARAM,
            "reserve must be NULL"
        );
        assert_eq!(
            aclrtLaunchKernelWithConfig(f, 1, s, &cfg, a, null_mut()),
            ACL_ERROR_RT_PARAM_INVALID
        );
        let mut attr = AclrtLaunchKernelAttr {
            id: 10,
            value: [0; 4],
        };
        let cfg = AclrtLaunchKernelCfg {
            attrs: &mut attr,
            num_attrs: 1,
        };
        assert_eq!(
            aclrtLaunchKernelWithConfig(f, 1, s, &cfg, a, null_mut()),
            ACL_ERROR_RT_PARAM_INVALID,
            "unknown attribute id"
        );
        assert_eq!(
            aclrtLaunchKernelWithConfig(0x20 as *mut c_void, 1, s, null(), a, null_mut()),
            ACL_ERROR_RT_INVALID_HANDLE
        );
        assert_eq!(
            aclrtLaunchKernelWithConfig(f, 1, 0x30 as *mut c_void, null(), a, null_mut()),
            ACL_ERROR_INVALID_PARAM,
            "unknown stream"
        );
        assert_eq!(
            aclrtKernelArgsInit(null_mut(), &mut out),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtKernelArgsInit(f, null_mut()), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtKernelArgsFinalize(null_mut()), ACL_ERROR_INVALID_PARAM);
        assert_eq!(
            aclrtLaunchKernel(null_mut(), 1, w.as_ptr().cast(), 20, s),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtLaunchKernel(f, 1, null(), 20, s),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(aclrtBinaryUnLoad(bin), 0);
    }
    assert_eq!(w, [0], "nothing refused ran");
    destroy(s);
    teardown();
}

#[test]
fn kernels_run_in_stream_order() {
    let _g = shared();
    let s = stream();
    let bin = load(&[LCG, DELAY]);
    let (f, d) = (function(bin, c"my_lcg"), function(bin, c"my_delay"));
    // SAFETY: buffers outlive the synchronize; handles are live.
    unsafe {
        let mut dev = null_mut();
        assert_eq!(aclrtMalloc(&mut dev, 16, 0), 0);
        let src: [u32; 4] = [1, 2, 3, 4];
        let mut out = [0u32; 4];
        // copy in → delay → lcg (args handle) → lcg again (args reused at once) → copy out.
        assert_eq!(aclrtMemcpyAsync(dev, 16, src.as_ptr().cast(), 16, 1, s), 0);
        let a = args(d, &[&20_000_000u64.to_le_bytes()], true);
        assert_eq!(launch(d, s, a), 0);
        let ptr = (dev as u64).to_le_bytes();
        let a = args(f, &[&ptr, &4u32.to_le_bytes(), &3u32.to_le_bytes()], true);
        assert_eq!(launch(f, s, a), 0);
        let a = args(f, &[&ptr, &4u32.to_le_bytes(), &2u32.to_le_bytes()], true);
        assert_eq!(launch(f, s, a), 0);
        assert_eq!(
            aclrtMemcpyAsync(out.as_mut_ptr().cast(), 16, dev, 16, 2, s),
            0
        );
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(out, src.map(|x| lcg(x, 5)));
        // aclrtLaunchKernel reads its argument block when the kernel runs: the block is
        // written by a copy queued before the launch on the same stream.
        let mut block = null_mut();
        assert_eq!(aclrtMalloc(&mut block, 24, 0), 0);
        let mut host = [0u8; 24];
        host[..8].copy_from_slice(&ptr);
        host[8..12].copy_from_slice(&4u32.to_le_bytes());
        host[16..20].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(
            aclrtMemcpyAsync(block, 24, host.as_ptr().cast(), 24, 1, s),
            0
        );
        assert_eq!(aclrtLaunchKernel(f, 1, block, 20, s), 0);
        assert_eq!(
            aclrtMemcpyAsync(out.as_mut_ptr().cast(), 16, dev, 16, 2, s),
            0
        );
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(out, src.map(|x| lcg(x, 6)));
        // Unloading does not cancel queued launches.
        let a = args(d, &[&10_000_000u64.to_le_bytes()], true);
        assert_eq!(launch(d, s, a), 0);
        let a = args(f, &[&ptr, &4u32.to_le_bytes(), &1u32.to_le_bytes()], true);
        assert_eq!(launch(f, s, a), 0);
        assert_eq!(aclrtBinaryUnLoad(bin), 0);
        assert_eq!(
            aclrtMemcpyAsync(out.as_mut_ptr().cast(), 16, dev, 16, 2, s),
            0
        );
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(out, src.map(|x| lcg(x, 7)));
        // The fill kernel stores its value into the first `words` words only.
        let fill = load(&[FILL]);
        let ff = function(fill, c"my_fill");
        let a = args(
            ff,
            &[&ptr, &3u32.to_le_bytes(), &0xA5A5_0001u32.to_le_bytes()],
            true,
        );
        assert_eq!(launch(ff, s, a), 0);
        assert_eq!(
            aclrtMemcpyAsync(out.as_mut_ptr().cast(), 16, dev, 16, 2, s),
            0
        );
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(out, [0xA5A5_0001, 0xA5A5_0001, 0xA5A5_0001, lcg(4, 7)]);
        assert_eq!(aclrtBinaryUnLoad(fill), 0);
        assert_eq!(aclrtFree(block), 0);
        assert_eq!(aclrtFree(dev), 0);
    }
    destroy(s);
    teardown();
}

#[test]
fn kernels_are_captured_and_replayed() {
    let _g = shared();
    let s = stream();
    let bin = load(&[LCG]);
    let f = function(bin, c"my_lcg");
    let mut buf = [7u32; 4];
    let ptr = (buf.as_mut_ptr() as u64).to_le_bytes();
    // SAFETY: buf outlives every replay (synchronized); handles are live.
    unsafe {
        let mut ri = null_mut();
        assert_eq!(aclmdlRICaptureBegin(s, 0), 0);
        let a = args(f, &[&ptr, &4u32.to_le_bytes(), &1u32.to_le_bytes()], true);
        assert_eq!(launch(f, s, a), 0);
        assert_eq!(aclmdlRICaptureEnd(s, &mut ri), 0);
        assert_eq!(buf, [7; 4], "captured, not run");
        assert_eq!(aclmdlRIExecuteAsync(ri, s), 0);
        assert_eq!(aclmdlRIExecuteAsync(ri, s), 0);
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(buf, [lcg(7, 2); 4]);
        assert_eq!(aclmdlRIDestroy(ri), 0);
        assert_eq!(aclrtBinaryUnLoad(bin), 0);
    }
    destroy(s);
    teardown();
}

#[test]
fn fault_kernel_and_injected_faults() {
    let _g = exclusive();
    let s = stream();
    let bin = load(&[LCG, FAULT]);
    let (f, x) = (function(bin, c"my_lcg"), function(bin, c"my_fault"));
    let mut w = [1u32; 1];
    let ptr = (w.as_mut_ptr() as u64).to_le_bytes();
    // SAFETY: `w` outlives the synchronize; handles are live; the spec is NUL-terminated.
    unsafe {
        assert_eq!(xsimReset(), 0);
        assert_eq!(
            xsimSetFaults(
                c"aclrtLaunchKernelWithConfig:1:507033;aclrtBinaryLoadFromData:*:207001".as_ptr()
            ),
            0
        );
        let a = args(f, &[&ptr, &1u32.to_le_bytes(), &1u32.to_le_bytes()], true);
        assert_eq!(launch(f, s, a), 507_033, "injected");
        assert_eq!(launch(f, s, a), 0, "only the first call");
        let b = xsim_binary(&[LCG]);
        let mut h = null_mut();
        assert_eq!(
            aclrtBinaryLoadFromData(b.as_ptr().cast(), b.len(), null(), &mut h),
            207_001
        );
        assert_eq!(xsimCallCount(c"aclrtLaunchKernelWithConfig".as_ptr()), 2);
        assert_eq!(xsimSetFaults(null()), 0);
        // A fault kernel poisons the context; later kernels are skipped.
        let a = args(x, &[&ACL_ERROR_RT_AICORE_EXCEPTION.to_le_bytes()], true);
        assert_eq!(launch(x, s, a), 0);
        let a = args(f, &[&ptr, &1u32.to_le_bytes(), &1u32.to_le_bytes()], true);
        let _ = launch(f, s, a);
        assert_eq!(aclrtSynchronizeStream(s), ACL_ERROR_RT_AICORE_EXCEPTION);
        assert_eq!(w, [lcg(1, 1)], "the kernel after the fault did not run");
        assert_eq!(xsimReset(), 0);
        // A NULL pointer argument is a device fault, not a crash.
        let null_ptr = 0u64.to_le_bytes();
        let a = args(
            f,
            &[&null_ptr, &1u32.to_le_bytes(), &1u32.to_le_bytes()],
            true,
        );
        assert_eq!(launch(f, s, a), 0);
        assert_eq!(aclrtSynchronizeStream(s), ACL_ERROR_RT_AICORE_EXCEPTION);
        assert_eq!(xsimReset(), 0);
        assert_eq!(aclrtBinaryUnLoad(bin), 0);
    }
    destroy(s);
    teardown();
}
