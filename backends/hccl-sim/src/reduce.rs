//! Element-wise reductions of the simulator (sum, prod, max, min) over every data type, fp16
//! and bf16 computed in f32 and rounded to nearest-even after each step.

use crate::types::*;

/// f16 bits → f32.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = if exp == 0 {
        if man == 0 {
            sign
        } else {
            // Subnormal: value = man · 2^-24.
            let v = man as f32 * f32::from_bits(0x3380_0000);
            return if sign != 0 { -v } else { v };
        }
    } else if exp == 0x1f {
        sign | 0x7f80_0000 | (man << 13)
    } else {
        sign | ((exp + 112) << 23) | (man << 13)
    };
    f32::from_bits(bits)
}

/// f32 → f16 bits, round to nearest-even, overflow to infinity.
pub fn f32_to_f16(f: f32) -> u16 {
    let x = f.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let man = x & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1 << shift) - 1);
        let mut v = m >> shift;
        if rest > half || (rest == half && v & 1 == 1) {
            v += 1;
        }
        return sign | v as u16;
    }
    let mut v = ((e as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && v & 1 == 1) {
        v += 1;
    }
    sign | v as u16
}

/// bf16 bits → f32.
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// f32 → bf16 bits, round to nearest-even.
pub fn f32_to_bf16(f: f32) -> u16 {
    let x = f.to_bits();
    if f.is_nan() {
        return ((x >> 16) | 0x40) as u16;
    }
    let round = 0x7fff + ((x >> 16) & 1);
    (x.wrapping_add(round) >> 16) as u16
}

macro_rules! int_fold {
    ($t:ty, $acc:expr, $src:expr, $op:expr) => {{
        let n = std::mem::size_of::<$t>();
        for (a, s) in $acc.chunks_exact_mut(n).zip($src.chunks_exact(n)) {
            let x = <$t>::from_le_bytes(a.try_into().unwrap_or_default());
            let y = <$t>::from_le_bytes(s.try_into().unwrap_or_default());
            let r = match $op {
                HCCL_REDUCE_SUM => x.wrapping_add(y),
                HCCL_REDUCE_PROD => x.wrapping_mul(y),
                HCCL_REDUCE_MAX => x.max(y),
                _ => x.min(y),
            };
            a.copy_from_slice(&r.to_le_bytes());
        }
    }};
}

fn float_op(x: f64, y: f64, op: i32) -> f64 {
    match op {
        HCCL_REDUCE_SUM => x + y,
        HCCL_REDUCE_PROD => x * y,
        HCCL_REDUCE_MAX => x.max(y),
        _ => x.min(y),
    }
}

/// A pair of half-precision conversions (to f32, from f32).
type Conv = (fn(u16) -> f32, fn(f32) -> u16);

/// `acc[i] = op(acc[i], src[i])` for every element of type `dtype` (equal lengths, a multiple
/// of the element size; the type and op were validated).
pub fn fold(acc: &mut [u8], src: &[u8], dtype: i32, op: i32) {
    match dtype {
        HCCL_DATA_TYPE_INT8 => int_fold!(i8, acc, src, op),
        HCCL_DATA_TYPE_UINT8 => int_fold!(u8, acc, src, op),
        HCCL_DATA_TYPE_INT16 => int_fold!(i16, acc, src, op),
        HCCL_DATA_TYPE_UINT16 => int_fold!(u16, acc, src, op),
        HCCL_DATA_TYPE_INT32 => int_fold!(i32, acc, src, op),
        HCCL_DATA_TYPE_UINT32 => int_fold!(u32, acc, src, op),
        HCCL_DATA_TYPE_INT64 => int_fold!(i64, acc, src, op),
        HCCL_DATA_TYPE_UINT64 => int_fold!(u64, acc, src, op),
        HCCL_DATA_TYPE_FP32 => {
            for (a, s) in acc.chunks_exact_mut(4).zip(src.chunks_exact(4)) {
                let x = f32::from_le_bytes([a[0], a[1], a[2], a[3]]);
                let y = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
                let r = float_op(f64::from(x), f64::from(y), op) as f32;
                a.copy_from_slice(&r.to_le_bytes());
            }
        }
        HCCL_DATA_TYPE_FP64 => {
            for (a, s) in acc.chunks_exact_mut(8).zip(src.chunks_exact(8)) {
                let x = f64::from_le_bytes(a.try_into().unwrap_or_default());
                let y = f64::from_le_bytes(s.try_into().unwrap_or_default());
                a.copy_from_slice(&float_op(x, y, op).to_le_bytes());
            }
        }
        HCCL_DATA_TYPE_FP16 | HCCL_DATA_TYPE_BFP16 => {
            let (to, from): Conv = if dtype == HCCL_DATA_TYPE_FP16 {
                (f16_to_f32, f32_to_f16)
            } else {
                (bf16_to_f32, f32_to_bf16)
            };
            for (a, s) in acc.chunks_exact_mut(2).zip(src.chunks_exact(2)) {
                let x = to(u16::from_le_bytes([a[0], a[1]]));
                let y = to(u16::from_le_bytes([s[0], s[1]]));
                let r = float_op(f64::from(x), f64::from(y), op) as f32;
                a.copy_from_slice(&from(r).to_le_bytes());
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_conversions_round_trip_and_round_to_nearest_even() {
        for v in [
            0.0f32,
            1.0,
            -2.5,
            0.333_251_95,
            65504.0,
            6.103_515_6e-5,
            5.960_464_5e-8,
        ] {
            assert_eq!(f16_to_f32(f32_to_f16(v)), v, "{v}");
        }
        assert_eq!(f32_to_f16(1.0 + 1.0 / 2048.0), 0x3c00); // tie → even
        assert_eq!(f32_to_f16(1e6), 0x7c00);
        assert_eq!(bf16_to_f32(f32_to_bf16(3.0)), 3.0);
        assert_eq!(f32_to_bf16(1.0 + 1.0 / 256.0), 0x3f80); // tie → even
    }

    #[test]
    fn integer_folds_wrap_and_pick() {
        let mut a = [250u8, 3];
        fold(&mut a, &[10, 4], HCCL_DATA_TYPE_UINT8, HCCL_REDUCE_SUM);
        assert_eq!(a, [4, 7]);
        let mut b = (-5i32).to_le_bytes();
        fold(
            &mut b,
            &7i32.to_le_bytes(),
            HCCL_DATA_TYPE_INT32,
            HCCL_REDUCE_MAX,
        );
        assert_eq!(i32::from_le_bytes(b), 7);
    }
}
