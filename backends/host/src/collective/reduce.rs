//! The element arithmetic of host collectives: the reference results.
//!
//! Ranks are combined in rank order (0, 1, ...), so every rank computes bit-identical
//! results. Integers wrap (sum, prod) like the vendors' kernels; `avg` is the sum divided by
//! the world size (integers: the wrapping sum, truncated toward zero). f16 and bf16 are
//! accumulated in f32 and rounded once at the end; f32 in f32, f64 in f64.

use half::{bf16, f16};
use std::ops::{Add, Mul};
use xstream_core::{DataType, ReduceOp};

/// Element access and the arithmetic in the accumulator type.
trait Elem: Copy {
    const SIZE: usize;
    fn load(b: &[u8]) -> Self;
    fn store(self, b: &mut [u8]);
    fn combine(self, other: Self, op: ReduceOp) -> Self;
    fn div(self, n: usize) -> Self;
}

/// `Elem` for a primitive type: `$add` and `$mul` combine, `$div` divides by a world size.
macro_rules! elem {
    ($t:ty, $add:ident, $mul:ident, |$x:ident, $n:ident| $div:expr) => {
        impl Elem for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn load(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..Self::SIZE]);
                <$t>::from_le_bytes(a)
            }
            fn store(self, b: &mut [u8]) {
                b[..Self::SIZE].copy_from_slice(&self.to_le_bytes());
            }
            fn combine(self, o: Self, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => self.$add(o),
                    ReduceOp::Prod => self.$mul(o),
                    ReduceOp::Max => self.max(o),
                    ReduceOp::Min => self.min(o),
                }
            }
            fn div(self, $n: usize) -> Self {
                let $x = self;
                $div
            }
        }
    };
}

// `n` is a world size (>= 1), small enough for every integer type but u8, where a world above
// 255 divides by at least 256: the result is 0.
elem!(i32, wrapping_add, wrapping_mul, |x, n| i32::try_from(n)
    .map_or(0, |d| x / d));
elem!(i64, wrapping_add, wrapping_mul, |x, n| i64::try_from(n)
    .map_or(0, |d| x / d));
elem!(u8, wrapping_add, wrapping_mul, |x, n| u8::try_from(n)
    .map_or(0, |d| x / d));
elem!(f32, add, mul, |x, n| x / n as f32);
elem!(f64, add, mul, |x, n| x / n as f64);

/// A 16-bit float stored as `$t`, accumulated in f32.
#[derive(Clone, Copy)]
struct Wide<const BF: bool>(f32);

impl<const BF: bool> Elem for Wide<BF> {
    const SIZE: usize = 2;
    fn load(b: &[u8]) -> Self {
        let bits = u16::from_le_bytes([b[0], b[1]]);
        Wide(if BF {
            bf16::from_bits(bits).to_f32()
        } else {
            f16::from_bits(bits).to_f32()
        })
    }
    fn store(self, b: &mut [u8]) {
        let bits = if BF {
            bf16::from_f32(self.0).to_bits()
        } else {
            f16::from_f32(self.0).to_bits()
        };
        b[..2].copy_from_slice(&bits.to_le_bytes());
    }
    fn combine(self, o: Self, op: ReduceOp) -> Self {
        Wide(self.0.combine(o.0, op))
    }
    fn div(self, n: usize) -> Self {
        Wide(self.0 / n as f32)
    }
}

fn reduce_typed<T: Elem>(op: ReduceOp, inputs: &[&[u8]], out: &mut [u8]) {
    let n = inputs.len();
    for (i, o) in out.chunks_exact_mut(T::SIZE).enumerate() {
        let at = i * T::SIZE;
        let mut acc = T::load(&inputs[0][at..]);
        for inp in &inputs[1..] {
            acc = acc.combine(T::load(&inp[at..]), op);
        }
        if op == ReduceOp::Avg {
            acc = acc.div(n);
        }
        acc.store(o);
    }
}

/// `out[i] = op over inputs of input[i]`, elementwise; `out.len()` bytes are written and every
/// input holds at least as many. `inputs` is never empty.
pub(crate) fn reduce(dtype: DataType, op: ReduceOp, inputs: &[&[u8]], out: &mut [u8]) {
    if inputs.is_empty() {
        return;
    }
    match dtype {
        DataType::F32 => reduce_typed::<f32>(op, inputs, out),
        DataType::F64 => reduce_typed::<f64>(op, inputs, out),
        DataType::F16 => reduce_typed::<Wide<false>>(op, inputs, out),
        DataType::BF16 => reduce_typed::<Wide<true>>(op, inputs, out),
        DataType::I32 => reduce_typed::<i32>(op, inputs, out),
        DataType::I64 => reduce_typed::<i64>(op, inputs, out),
        DataType::U8 => reduce_typed::<u8>(op, inputs, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_i32(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn integer_ops_wrap_and_truncate() {
        let a = bytes_i32(&[1, -7, i32::MAX, 3]);
        let b = bytes_i32(&[2, 2, 1, -4]);
        let mut out = vec![0u8; 16];
        let r = |op, out: &mut Vec<u8>| {
            reduce(DataType::I32, op, &[&a, &b], out);
            out.chunks(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                .collect::<Vec<_>>()
        };
        assert_eq!(r(ReduceOp::Sum, &mut out), [3, -5, i32::MIN, -1]);
        assert_eq!(r(ReduceOp::Prod, &mut out), [2, -14, i32::MAX, -12]);
        assert_eq!(r(ReduceOp::Max, &mut out), [2, 2, i32::MAX, 3]);
        assert_eq!(r(ReduceOp::Min, &mut out), [1, -7, 1, -4]);
        assert_eq!(r(ReduceOp::Avg, &mut out), [1, -2, i32::MIN / 2, 0]);
    }

    #[test]
    fn half_types_accumulate_in_f32() {
        let h = |x: f32| f16::from_f32(x).to_bits().to_le_bytes().to_vec();
        let bh = |x: f32| bf16::from_f32(x).to_bits().to_le_bytes().to_vec();
        let mut out = vec![0u8; 2];
        reduce(DataType::F16, ReduceOp::Avg, &[&h(1.0), &h(2.0)], &mut out);
        assert_eq!(f16::from_le_bytes([out[0], out[1]]).to_f32(), 1.5);
        reduce(
            DataType::BF16,
            ReduceOp::Prod,
            &[&bh(3.0), &bh(-2.0)],
            &mut out,
        );
        assert_eq!(bf16::from_le_bytes([out[0], out[1]]).to_f32(), -6.0);
        let mut out = vec![0u8; 1];
        reduce(DataType::U8, ReduceOp::Sum, &[&[200], &[100]], &mut out);
        assert_eq!(out, [44], "u8 sums wrap");
    }
}
