//! Data types: `aclDataTypeSize` and the half-precision conversions `aclFloat16ToFloat` /
//! `aclFloatToFloat16`, with the rules of the CANN runtime (`hicann/runtime`,
//! `src/acl/aclrt_impl/data_buffer.cpp` and `src/acl/aclrt_impl/types/fp16_impl.cpp`).
//!
//! None of the three returns an error code, so none has bad input in the usual sense:
//! * `aclDataTypeSize` answers every `aclDataType` value, known or not. `ACL_STRING` and
//!   `ACL_DT_UNDEFINED` are 0; the packed types `ACL_UINT1` / `ACL_INT4` are 1; `ACL_COMPLEX32`
//!   is 4 and `ACL_COMPLEX128` 16; every other value (`ACL_FLOAT6_*`, `ACL_FLOAT4_*`, and any
//!   out-of-range number) falls to the runtime's default of 8.
//! * The conversions saturate instead of keeping infinities and NaN: float to half maps NaN
//!   and +Inf (and anything at or above 65520) to 65504 (`0x7BFF`) and -Inf to -65504
//!   (`0xFBFF`); half to float reads the all-ones exponent as an ordinary one, so half +Inf
//!   (`0x7C00`) is 65536.0 and the half NaN `0x7E00` is 98304.0. Float to half rounds to nearest
//!   with ties to even, except that magnitudes in the open interval (2^-25, 2^-24) become the
//!   smallest subnormal (`0x0001`) and 2^-25 itself becomes zero.
//!
//! They need no `aclInit` (the runtime's implementations touch no state).

use crate::faults::count_call;
use std::panic::catch_unwind;

/// `aclDataType` values named by `acl_base_rt.h`.
pub mod types {
    /// `ACL_DT_UNDEFINED`.
    pub const ACL_DT_UNDEFINED: i32 = -1;
    /// `ACL_FLOAT`.
    pub const ACL_FLOAT: i32 = 0;
    /// `ACL_FLOAT16`.
    pub const ACL_FLOAT16: i32 = 1;
    /// `ACL_INT8`.
    pub const ACL_INT8: i32 = 2;
    /// `ACL_INT32`.
    pub const ACL_INT32: i32 = 3;
    /// `ACL_UINT8`.
    pub const ACL_UINT8: i32 = 4;
    /// `ACL_INT16`.
    pub const ACL_INT16: i32 = 6;
    /// `ACL_UINT16`.
    pub const ACL_UINT16: i32 = 7;
    /// `ACL_UINT32`.
    pub const ACL_UINT32: i32 = 8;
    /// `ACL_INT64`.
    pub const ACL_INT64: i32 = 9;
    /// `ACL_UINT64`.
    pub const ACL_UINT64: i32 = 10;
    /// `ACL_DOUBLE`.
    pub const ACL_DOUBLE: i32 = 11;
    /// `ACL_BOOL`.
    pub const ACL_BOOL: i32 = 12;
    /// `ACL_STRING`.
    pub const ACL_STRING: i32 = 13;
    /// `ACL_COMPLEX64`.
    pub const ACL_COMPLEX64: i32 = 16;
    /// `ACL_COMPLEX128`.
    pub const ACL_COMPLEX128: i32 = 17;
    /// `ACL_BF16`.
    pub const ACL_BF16: i32 = 27;
    /// `ACL_INT4`.
    pub const ACL_INT4: i32 = 29;
    /// `ACL_UINT1`.
    pub const ACL_UINT1: i32 = 30;
    /// `ACL_COMPLEX32`.
    pub const ACL_COMPLEX32: i32 = 33;
    /// `ACL_HIFLOAT8`.
    pub const ACL_HIFLOAT8: i32 = 34;
    /// `ACL_FLOAT8_E5M2`.
    pub const ACL_FLOAT8_E5M2: i32 = 35;
    /// `ACL_FLOAT8_E4M3FN`.
    pub const ACL_FLOAT8_E4M3FN: i32 = 36;
    /// `ACL_FLOAT8_E8M0`.
    pub const ACL_FLOAT8_E8M0: i32 = 37;
    /// `ACL_FLOAT6_E3M2`.
    pub const ACL_FLOAT6_E3M2: i32 = 38;
    /// `ACL_FLOAT6_E2M3`.
    pub const ACL_FLOAT6_E2M3: i32 = 39;
    /// `ACL_FLOAT4_E2M1`.
    pub const ACL_FLOAT4_E2M1: i32 = 40;
    /// `ACL_FLOAT4_E1M2`.
    pub const ACL_FLOAT4_E1M2: i32 = 41;
}

/// The byte size the runtime gives `dt` (see the module docs).
pub fn type_size(dt: i32) -> usize {
    use types::*;
    match dt {
        ACL_STRING | ACL_DT_UNDEFINED => 0,
        ACL_UINT1 | ACL_INT4 => 1,
        ACL_BOOL | ACL_INT8 | ACL_UINT8 | ACL_HIFLOAT8 | ACL_FLOAT8_E5M2 | ACL_FLOAT8_E4M3FN
        | ACL_FLOAT8_E8M0 => 1,
        ACL_FLOAT16 | ACL_INT16 | ACL_UINT16 | ACL_BF16 => 2,
        ACL_FLOAT | ACL_INT32 | ACL_UINT32 | ACL_COMPLEX32 => 4,
        ACL_COMPLEX128 => 16,
        _ => 8,
    }
}

/// Half (IEEE binary16 bits) to float, reading the all-ones exponent as a normal exponent.
pub fn half_to_float(h: u16) -> f32 {
    let sign = u32::from(h >> 15);
    let exp_bits = i32::from((h >> 10) & 0x1F);
    // The significand with its hidden bit when the exponent field is non-zero; a zero exponent
    // field is read as exponent 1 without the hidden bit (a subnormal).
    let mut man = u32::from(h & 0x3FF) | if exp_bits > 0 { 0x400 } else { 0 };
    let mut exp = exp_bits.max(1);
    while man != 0 && man & 0x400 == 0 {
        man <<= 1;
        exp -= 1;
    }
    let bits = if man == 0 {
        sign << 31
    } else {
        // Re-bias from 15 to 127; the hidden bit is dropped by the 23-bit mask.
        let e = (exp + 112) as u32;
        (sign << 31) | (e << 23) | ((man & 0x3FF) << 13)
    };
    f32::from_bits(bits)
}

/// Whether dropping the low `cut` bits of `m` rounds up (to nearest, ties to even).
fn round_up(m: u64, cut: u32) -> bool {
    let half = 1u64 << (cut - 1);
    let kept_lsb = m & (1u64 << cut) != 0;
    let below = m & (half - 1) != 0;
    m & half != 0 && (below || kept_lsb)
}

/// Float to half bits, saturating (see the module docs).
pub fn float_to_half(f: f32) -> u16 {
    let bits = f.to_bits();
    let sign = (bits >> 31) as u16;
    let e = (bits >> 23) & 0xFF;
    let m = bits & 0x7F_FFFF;
    let (mut he, mut hm): (u16, u16);
    if e > 142 {
        // Exponent beyond half's range, Inf and NaN: the largest finite half.
        he = 30;
        hm = 0x3FF;
    } else if e <= 112 {
        he = 0;
        if e >= 103 {
            // A subnormal half: shift the full significand into place and round.
            let full = u64::from(m | 0x80_0000) << (e - 103);
            hm = (full >> 23) as u16;
            if round_up(full, 23) {
                hm += 1;
            }
        } else if e == 102 && m > 0 {
            hm = 1;
        } else {
            hm = 0;
        }
    } else {
        he = (e - 112) as u16;
        hm = (m >> 13) as u16;
        if round_up(u64::from(m), 13) {
            hm += 1;
        }
        if hm & 0x400 != 0 {
            he += 1;
        }
    }
    // Normalise: an exponent at or past the top saturates; a subnormal that rounded up to the
    // hidden bit becomes the smallest normal.
    if he >= 31 {
        he = 30;
        hm = 0x3FF;
    } else if he == 0 && hm == 0x400 {
        he = 1;
        hm = 0;
    }
    (sign << 15) | (he << 10) | (hm & 0x3FF)
}

/// `size_t aclDataTypeSize(aclDataType dataType)`: the element size in bytes (see the module
/// docs for the values that are not a plain element size).
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclDataTypeSize(data_type: i32) -> usize {
    count_call("aclDataTypeSize");
    catch_unwind(|| type_size(data_type)).unwrap_or(0)
}

/// `float aclFloat16ToFloat(aclFloat16 value)`: half bits to float (no Inf / NaN: see the
/// module docs).
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclFloat16ToFloat(value: u16) -> f32 {
    count_call("aclFloat16ToFloat");
    catch_unwind(|| half_to_float(value)).unwrap_or(0.0)
}

/// `aclFloat16 aclFloatToFloat16(float value)`: float to half bits, saturating (see the
/// module docs).
///
/// # Safety
/// No pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn aclFloatToFloat16(value: f32) -> u16 {
    count_call("aclFloatToFloat16");
    catch_unwind(|| float_to_half(value)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_round_trip_of_every_finite_half() {
        for h in 0u16..=0xFFFF {
            if (h >> 10) & 0x1F == 0x1F {
                continue;
            }
            let f = half_to_float(h);
            let back = float_to_half(f);
            // -0 and +0 keep their sign; every finite half survives the round trip.
            assert_eq!(back, h, "{h:#06x} -> {f} -> {back:#06x}");
        }
    }

    #[test]
    fn saturation_and_special_values() {
        assert_eq!(half_to_float(0x7C00), 65536.0);
        assert_eq!(half_to_float(0xFC00), -65536.0);
        assert_eq!(half_to_float(0x7E00), 98304.0);
        assert_eq!(float_to_half(f32::INFINITY), 0x7BFF);
        assert_eq!(float_to_half(f32::NEG_INFINITY), 0xFBFF);
        assert_eq!(float_to_half(f32::NAN), 0x7BFF);
        assert_eq!(float_to_half(65520.0), 0x7BFF);
        assert_eq!(float_to_half(65504.0), 0x7BFF);
        assert_eq!(float_to_half(1.0), 0x3C00);
        assert_eq!(float_to_half(-2.5), 0xC100);
        // Ties to even: 1 + 2^-11 sits halfway between 1 and the next half.
        assert_eq!(float_to_half(1.0 + 2f32.powi(-11)), 0x3C00);
        assert_eq!(float_to_half(1.0 + 3.0 * 2f32.powi(-11)), 0x3C02);
        // Below the smallest subnormal.
        assert_eq!(float_to_half(2f32.powi(-24)), 0x0001);
        assert_eq!(float_to_half(1.5 * 2f32.powi(-25)), 0x0001);
        assert_eq!(float_to_half(2f32.powi(-25)), 0x0000);
        assert_eq!(float_to_half(2f32.powi(-26)), 0x0000);
        // The largest subnormal rounds up into the smallest normal.
        assert_eq!(float_to_half(2f32.powi(-14) - 2f32.powi(-26)), 0x0400);
    }

    #[test]
    fn sizes() {
        use types::*;
        assert_eq!(type_size(ACL_FLOAT), 4);
        assert_eq!(type_size(ACL_FLOAT16), 2);
        assert_eq!(type_size(ACL_BF16), 2);
        assert_eq!(type_size(ACL_INT64), 8);
        assert_eq!(type_size(ACL_COMPLEX32), 4);
        assert_eq!(type_size(ACL_COMPLEX128), 16);
        assert_eq!(type_size(ACL_STRING), 0);
        assert_eq!(type_size(ACL_DT_UNDEFINED), 0);
        assert_eq!(type_size(ACL_INT4), 1);
        assert_eq!(type_size(ACL_FLOAT4_E2M1), 8);
        assert_eq!(type_size(5), 8);
        assert_eq!(type_size(-7), 8);
        assert_eq!(type_size(9999), 8);
    }
}
