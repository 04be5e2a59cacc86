//! `aclrtReduceAsync` through the C ABI: results against typed arithmetic written here, the
//! runtime's codes and check order per product, capture.

mod common;

use ascendcl::codes::*;
use ascendcl::*;
use common::*;
use std::ffi::c_void;
use std::ptr::null_mut;

const SUM: u32 = ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM;
const MAX: u32 = ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX;
const MIN: u32 = ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN;
const EQUAL: u32 = ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL;
const ACL_FLOAT: i32 = 0;
const ACL_FLOAT16: i32 = 1;
const ACL_INT8: i32 = 2;
const ACL_INT32: i32 = 3;
const ACL_UINT8: i32 = 4;
const ACL_INT16: i32 = 6;
const ACL_UINT32: i32 = 8;
const ACL_INT64: i32 = 9;
const ACL_BF16: i32 = 27;

fn p<T>(v: &mut [T]) -> *mut c_void {
    v.as_mut_ptr().cast()
}

#[test]
fn results_match_typed_arithmetic() {
    let _g = shared();
    let s = stream();
    let mut d = [1.5f32, -2.0, 10.0, 0.25];
    let mut src = [2.0f32, 3.5, -20.0, 0.5];
    let want: Vec<f32> = d.iter().zip(&src).map(|(a, b)| a + b).collect();
    let mut di = [5i32, -7, i32::MAX, 0];
    let mut si = [-9i32, 4, 1, 0];
    let want_max: Vec<i32> = di.iter().zip(&si).map(|(a, b)| *a.max(b)).collect();
    let mut dh = [100i16, -3, 7, 8];
    let mut sh = [-50i16, -4, 9, 8];
    let want_min: Vec<i16> = dh.iter().zip(&sh).map(|(a, b)| *a.min(b)).collect();
    // SAFETY: every array outlives the synchronize below.
    unsafe {
        assert_eq!(
            aclrtReduceAsync(p(&mut d), p(&mut src), 16, SUM, ACL_FLOAT, s, null_mut()),
            0
        );
        assert_eq!(
            aclrtReduceAsync(p(&mut di), p(&mut si), 16, MAX, ACL_INT32, s, null_mut()),
            0
        );
        assert_eq!(
            aclrtReduceAsync(p(&mut dh), p(&mut sh), 8, MIN, ACL_INT16, s, null_mut()),
            0
        );
        assert_eq!(aclrtSynchronizeStream(s), 0);
    }
    assert_eq!(d.to_vec(), want);
    assert_eq!(di.to_vec(), want_max);
    assert_eq!(dh.to_vec(), want_min);
    // bf16 1.0 (0x3F80) + 2.0 (0x4000) = 3.0 (0x4040).
    let mut b = [0x3F80u16];
    let mut c = [0x4000u16];
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            aclrtReduceAsync(p(&mut b), p(&mut c), 2, SUM, ACL_BF16, s, null_mut()),
            0
        );
        assert_eq!(aclrtSynchronizeStream(s), 0);
    }
    assert_eq!(b[0], 0x4040);
    destroy(s);
}

#[test]
fn codes_and_check_order_on_a2() {
    let _g = shared();
    let s = stream();
    let mut a = [0u32; 8];
    let mut b = [0u32; 8];
    let (pa, pb) = (p(&mut a), p(&mut b));
    let odd = pa.cast::<u8>().wrapping_add(2).cast::<c_void>();
    let junk = 0x10usize as *mut c_void;
    // SAFETY: valid ranges; every call that succeeds is synchronized before the arrays drop.
    unsafe {
        // ACL layer first: NULL dst beats everything else wrong.
        assert_eq!(
            aclrtReduceAsync(null_mut(), pb, 0, 99, 99, junk, junk),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtReduceAsync(pa, std::ptr::null(), 16, SUM, ACL_FLOAT, s, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtReduceAsync(pa, pb, 16, SUM, ACL_FLOAT, s, junk),
            ACL_ERROR_INVALID_PARAM,
            "reserve"
        );
        // An unmapped type is an ACL-layer error even with count 0 and a bad kind.
        assert_eq!(
            aclrtReduceAsync(pa, pb, 0, 99, ACL_INT64, s, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        // Runtime layer: count 0, then the kind range.
        assert_eq!(
            aclrtReduceAsync(pa, pb, 0, 99, ACL_FLOAT, s, null_mut()),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(
            aclrtReduceAsync(pa, pb, 16, 9, ACL_FLOAT, s, null_mut()),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(
            aclrtReduceAsync(pa, pb, 16, 14, ACL_FLOAT, s, null_mut()),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(
            aclrtReduceAsync(pa, pb, MAX_REDUCE_BYTES + 1, SUM, ACL_FLOAT, s, null_mut()),
            ACL_ERROR_RT_PARAM_INVALID,
            "over 4 GiB with SUM"
        );
        // A mapped type the product lacks: 207000, before alignment.
        assert_eq!(
            aclrtReduceAsync(odd, pb, 16, SUM, ACL_UINT32, s, null_mut()),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        assert_eq!(
            aclrtReduceAsync(pa, pb, 16, SUM, ACL_UINT8, s, null_mut()),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        assert_eq!(
            aclrtReduceAsync(pa, pb, 16, EQUAL, ACL_FLOAT, s, null_mut()),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        // Alignment: 4 bytes for 32-bit types, 2 for 16-bit ones, none for 8-bit.
        assert_eq!(
            aclrtReduceAsync(odd, pb, 8, SUM, ACL_FLOAT, s, null_mut()),
            ACL_ERROR_RT_ADDR_UNALIGNED
        );
        assert_eq!(
            aclrtReduceAsync(pa, odd, 8, SUM, ACL_INT32, s, null_mut()),
            ACL_ERROR_RT_ADDR_UNALIGNED
        );
        assert_eq!(
            aclrtReduceAsync(odd, pb, 8, SUM, ACL_FLOAT16, s, null_mut()),
            0
        );
        let odd1 = pa.cast::<u8>().wrapping_add(1).cast::<c_void>();
        assert_eq!(
            aclrtReduceAsync(odd1, pb, 8, SUM, ACL_FLOAT16, s, null_mut()),
            ACL_ERROR_RT_ADDR_UNALIGNED
        );
        assert_eq!(
            aclrtReduceAsync(odd1, pb, 8, MAX, ACL_INT8, s, null_mut()),
            0
        );
        assert_eq!(aclrtSynchronizeStream(s), 0);
    }
    destroy(s);
}

#[test]
fn products_910_and_310p_reduce_sum_of_their_types_only() {
    let _g = exclusive();
    let s = stream();
    let mut a = [1.0f32; 4];
    let mut b = [2.0f32; 4];
    let (pa, pb) = (p(&mut a), p(&mut b));
    // SAFETY: valid ranges, synchronized before they drop; product names are C strings.
    unsafe {
        assert_eq!(xsimSetProduct(c"910".as_ptr()), 0);
        assert_eq!(
            aclrtReduceAsync(pa, pb, 16, MAX, ACL_FLOAT, s, null_mut()),
            ACL_ERROR_RT_PARAM_INVALID,
            "V2: SUM only"
        );
        assert_eq!(
            aclrtReduceAsync(pa, pb, 16, SUM, ACL_FLOAT16, s, null_mut()),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        assert_eq!(
            aclrtReduceAsync(pa, pb, 16, SUM, ACL_FLOAT, s, null_mut()),
            0
        );
        assert_eq!(xsimSetProduct(c"310p".as_ptr()), 0);
        assert_eq!(
            aclrtReduceAsync(pa, pb, 16, MIN, ACL_FLOAT, s, null_mut()),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(
            aclrtReduceAsync(pa, pb, 16, SUM, ACL_INT32, s, null_mut()),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        assert_eq!(
            aclrtReduceAsync(pa, pb, 16, SUM, ACL_FLOAT, s, null_mut()),
            0
        );
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(xsimSetProduct(std::ptr::null()), 0);
    }
    assert_eq!(a, [5.0; 4], "two sums of 2.0 into 1.0");
    destroy(s);
}

#[test]
fn captured_reduce_runs_once_per_replay() {
    let _g = shared();
    let s = stream();
    let mut a = [1i32, 2, 3, 4];
    let mut b = [10i32, 20, 30, 40];
    let (pa, pb) = (p(&mut a), p(&mut b));
    // SAFETY: valid ranges, synchronized before they drop.
    unsafe {
        assert_eq!(
            aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED),
            0
        );
        assert_eq!(
            aclrtReduceAsync(pa, pb, 16, SUM, ACL_INT32, s, null_mut()),
            0
        );
        let mut ri = null_mut();
        assert_eq!(aclmdlRICaptureEnd(s, &mut ri), 0);
        assert_eq!(
            std::ptr::read_volatile(pa.cast::<i32>()),
            1,
            "captured reduce ran"
        );
        assert_eq!(aclmdlRIExecuteAsync(ri, s), 0);
        assert_eq!(aclmdlRIExecuteAsync(ri, s), 0);
        assert_eq!(aclrtSynchronizeStream(s), 0);
        assert_eq!(aclmdlRIDestroy(ri), 0);
    }
    assert_eq!(a, [21, 42, 63, 84]);
    destroy(s);
}
