//! `aclrtRandomNumAsync` through the C ABI: the runtime's codes and check order, the
//! `dataType` write-back of its ACL layer, stream order, parameters by address, products
//! without the task, and the distributions' ranges.

mod common;

use ascendcl::codes::*;
use ascendcl::random::*;
use ascendcl::*;
use common::*;
use std::ffi::c_void;
use std::ptr::null_mut;

const ACL_FLOAT: i32 = 0;
const ACL_FLOAT16: i32 = 1;
const ACL_INT32: i32 = 3;
const ACL_INT8: i32 = 2;
const ACL_MEMCPY_HOST_TO_DEVICE: i32 = 1;

fn val(bytes: &[u8]) -> AclrtRandomParaInfo {
    let mut p = AclrtRandomParaInfo {
        size: bytes.len() as u8,
        ..Default::default()
    };
    p.value_or_addr[..bytes.len()].copy_from_slice(bytes);
    p
}

/// A task info for `num` numbers of `func` with f32 parameters `a`, `b`.
fn task(
    func: u32,
    a: f32,
    b: f32,
    num: u64,
    out: *mut c_void,
    ctr: *mut c_void,
) -> AclrtRandomNumTaskInfo {
    AclrtRandomNumTaskInfo {
        data_type: ACL_FLOAT,
        func: AclrtRandomNumFuncParaInfo {
            func_type: func,
            params: [val(&a.to_le_bytes()), val(&b.to_le_bytes())],
        },
        random_para_addr: null_mut(),
        random_result_addr: out,
        random_counter_addr: ctr,
        random_seed: val(&42u64.to_le_bytes()),
        random_num: val(&num.to_le_bytes()),
        rsv: [0; 8],
    }
}

fn p<T>(v: &mut [T]) -> *mut c_void {
    v.as_mut_ptr().cast()
}

#[test]
fn codes_and_check_order() {
    let _g = shared();
    let s = stream();
    let mut out = [0f32; 16];
    let mut ctr = [0u8; 16];
    let (po, pc) = (p(&mut out), p(&mut ctr));
    let junk = 0x10usize as *mut c_void;
    let call = |mut t: AclrtRandomNumTaskInfo, st: *mut c_void, r: *mut c_void| {
        // SAFETY: `t` is a live local; the output and counter outlive the synchronize below.
        unsafe { aclrtRandomNumAsync(&mut t, st, r) }
    };
    let good = || task(UNIFORM_DIS, 0.0, 1.0, 16, po, pc);
    assert_eq!(
        // SAFETY: NULL task info.
        unsafe { aclrtRandomNumAsync(null_mut(), s, null_mut()) },
        ACL_ERROR_INVALID_PARAM
    );
    // ACL layer: an unmapped type beats a bad stream and reserve.
    assert_eq!(
        call(
            AclrtRandomNumTaskInfo {
                data_type: ACL_INT8,
                ..good()
            },
            junk,
            junk
        ),
        ACL_ERROR_INVALID_PARAM
    );
    // Runtime layer: the stream handle, then reserve.
    assert_eq!(call(good(), junk, junk), ACL_ERROR_INVALID_PARAM);
    assert_eq!(call(good(), s, junk), ACL_ERROR_RT_PARAM_INVALID);
    // The task info: function type, type per function, NULL addresses, sizes.
    let bad = [
        (
            "function type 4",
            AclrtRandomNumTaskInfo {
                func: AclrtRandomNumFuncParaInfo {
                    func_type: 4,
                    ..good().func
                },
                ..good()
            },
        ),
        (
            "normal over int32",
            AclrtRandomNumTaskInfo {
                data_type: ACL_INT32,
                ..task(NORMAL_DIS, 0.0, 1.0, 16, po, pc)
            },
        ),
        (
            "NULL counter",
            task(UNIFORM_DIS, 0.0, 1.0, 16, po, null_mut()),
        ),
        (
            "NULL result",
            task(UNIFORM_DIS, 0.0, 1.0, 16, null_mut(), pc),
        ),
        (
            "seed size 0",
            AclrtRandomNumTaskInfo {
                random_seed: AclrtRandomParaInfo::default(),
                ..good()
            },
        ),
        (
            "num isAddr 2",
            AclrtRandomNumTaskInfo {
                random_num: AclrtRandomParaInfo {
                    is_addr: 2,
                    ..val(&16u64.to_le_bytes())
                },
                ..good()
            },
        ),
        (
            "f16 min of 4 bytes",
            AclrtRandomNumTaskInfo {
                data_type: ACL_FLOAT16,
                ..good()
            },
        ),
    ];
    for (what, t) in bad {
        assert_eq!(call(t, s, null_mut()), ACL_ERROR_RT_PARAM_INVALID, "{what}");
    }
    // Integer uniform passes the runtime's checks; the simulator does not model it.
    let mut iu = good();
    iu.data_type = ACL_INT32;
    assert_eq!(call(iu, s, null_mut()), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    assert_eq!(call(good(), s, null_mut()), 0);
    // SAFETY: a live stream.
    assert_eq!(unsafe { aclrtSynchronizeStream(s) }, 0);
    assert!(out.iter().all(|x| (0.0..=1.0).contains(x)));
    assert!(out.iter().any(|x| *x != 0.0));
    destroy(s);
}

#[test]
fn the_acl_layer_rewrites_data_type() {
    let _g = shared();
    let s = stream();
    let mut out = [0f32; 4];
    let mut ctr = [0u8; 16];
    let mut t = task(UNIFORM_DIS, 0.0, 1.0, 4, p(&mut out), p(&mut ctr));
    // SAFETY: live locals, synchronized before they drop.
    unsafe {
        assert_eq!(aclrtRandomNumAsync(&mut t, s, null_mut()), 0);
        assert_eq!(t.data_type, 6, "RT_RANDOM_NUM_DATATYPE_FP32");
        // 6 is ACL_INT16, which the ACL layer does not map.
        assert_eq!(
            aclrtRandomNumAsync(&mut t, s, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtSynchronizeStream(s), 0);
    }
    destroy(s);
}

#[test]
fn stream_order_counter_and_address_parameters() {
    let _g = shared();
    let s = stream();
    let mut a = [0f32; 64];
    let mut b = [0f32; 64];
    let mut c = [0f32; 64];
    let mut ctr = [0u8; 16];
    let pc = p(&mut ctr);
    // The maximum by address: 8 bytes at `max`.
    let mut max = [100.0f32];
    let addr = (max.as_mut_ptr() as u64).to_le_bytes();
    // SAFETY: every array outlives the synchronize; the counter is rewritten by a copy in
    // stream order before the third task.
    unsafe {
        let mut t = task(UNIFORM_DIS, 10.0, 0.0, 64, p(&mut a), pc);
        t.func.params[1] = AclrtRandomParaInfo {
            is_addr: 1,
            ..val(&addr)
        };
        let mut t2 = t;
        t2.random_result_addr = p(&mut b);
        assert_eq!(aclrtRandomNumAsync(&mut t, s, null_mut()), 0);
        assert_eq!(aclrtRandomNumAsync(&mut t2, s, null_mut()), 0);
        let one = 1u128.to_le_bytes();
        assert_eq!(
            aclrtMemcpyAsync(
                pc,
                16,
                one.as_ptr().cast(),
                16,
                ACL_MEMCPY_HOST_TO_DEVICE,
                s
            ),
            0
        );
        let mut t3 = task(UNIFORM_DIS, 10.0, 100.0, 64, p(&mut c), pc);
        assert_eq!(aclrtRandomNumAsync(&mut t3, s, null_mut()), 0);
        assert_eq!(aclrtSynchronizeStream(s), 0);
    }
    assert!(a.iter().all(|x| (10.0..=100.0).contains(x)), "{a:?}");
    assert_eq!(a, b, "same seed and counter: same numbers");
    // Counter 1 starts four elements later.
    assert_eq!(c[..60], a[4..], "the counter read in stream order");
    destroy(s);
}

#[test]
fn dropout_mask_and_products_without_the_task() {
    let _g = exclusive();
    let s = stream();
    let mut m = [0u8; 32];
    let mut ctr = [0u8; 16];
    let (pm, pc) = (p(&mut m), p(&mut ctr));
    // SAFETY: live locals, synchronized before they drop; product names are C strings.
    unsafe {
        let mut t = task(DROPOUT_BITMASK, 0.5, 0.0, 200, pm, pc);
        // The second parameter is not read for a mask: a bad one passes.
        t.func.params[1] = AclrtRandomParaInfo::default();
        assert_eq!(aclrtRandomNumAsync(&mut t, s, null_mut()), 0);
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(xsimSetProduct(c"910".as_ptr()), 0);
        let mut t = task(UNIFORM_DIS, 0.0, 1.0, 4, pm, pc);
        assert_eq!(
            aclrtRandomNumAsync(&mut t, s, null_mut()),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        assert_eq!(xsimSetProduct(c"310p".as_ptr()), 0);
        let mut t = task(UNIFORM_DIS, 0.0, 1.0, 4, pm, pc);
        assert_eq!(
            aclrtRandomNumAsync(&mut t, s, null_mut()),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        assert_eq!(xsimSetProduct(std::ptr::null()), 0);
    }
    // 200 bits: 25 bytes written, the rest untouched.
    assert!(m[25..].iter().all(|b| *b == 0));
    let kept: u32 = m[..25].iter().map(|b| b.count_ones()).sum();
    assert!(
        (60..=140).contains(&kept),
        "kept {kept} of 200 at ratio 0.5"
    );
    destroy(s);
}
