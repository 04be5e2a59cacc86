//! The element arithmetic of the SDMA reduce, written once for both Ascend test doubles: the
//! ACL simulator (this crate) and the driver emulation (`xstream-ascend-hal-sim`, which
//! includes this file by path), so the two compute the same results. Integer sums wrap; fp16
//! and bf16 are combined in `f32` and rounded to nearest even once; MAX and MIN keep the
//! destination's element on a tie or an unordered pair; a trailing partial element is left
//! untouched.

/// The combining operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Add,
    Max,
    Min,
}

/// The element types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    F16,
    F32,
    Bf16,
}

impl Ty {
    /// Bytes per element.
    pub(crate) fn size(self) -> usize {
        match self {
            Ty::I8 | Ty::U8 => 1,
            Ty::I16 | Ty::U16 | Ty::F16 | Ty::Bf16 => 2,
            Ty::I32 | Ty::U32 | Ty::F32 => 4,
        }
    }
}

/// `k` of `a` (the destination's element) and `b`.
fn pick<T: PartialOrd>(k: Kind, a: T, b: T, sum: impl Fn(T, T) -> T) -> T {
    match k {
        Kind::Add => sum(a, b),
        Kind::Max if b > a => b,
        Kind::Min if b < a => b,
        Kind::Max | Kind::Min => a,
    }
}

/// Combines `src` into `dst` element by element (whole `N`-byte elements read as `T`).
fn each<const N: usize, T: PartialOrd>(
    dst: &mut [u8],
    src: &[u8],
    k: Kind,
    from: impl Fn([u8; N]) -> T,
    to: impl Fn(T) -> [u8; N],
    sum: impl Fn(T, T) -> T,
) {
    for (d, s) in dst.chunks_exact_mut(N).zip(src.chunks_exact(N)) {
        let a = from(d.try_into().unwrap_or([0; N]));
        let b = from(s.try_into().unwrap_or([0; N]));
        d.copy_from_slice(&to(pick(k, a, b, &sum)));
    }
}

/// Combines `s` into `d` (whole elements): `d[i] = k(d[i], s[i])`.
pub(crate) fn apply(d: &mut [u8], s: &[u8], ty: Ty, k: Kind) {
    macro_rules! int {
        ($t:ty) => {
            each(
                d,
                s,
                k,
                <$t>::from_le_bytes,
                <$t>::to_le_bytes,
                <$t>::wrapping_add,
            )
        };
    }
    macro_rules! half {
        ($t:ty) => {
            each(
                d,
                s,
                k,
                |b| <$t>::from_le_bytes(b).to_f32(),
                |x| <$t>::from_f32(x).to_le_bytes(),
                |a, b| a + b,
            )
        };
    }
    match ty {
        Ty::I8 => int!(i8),
        Ty::U8 => int!(u8),
        Ty::I16 => int!(i16),
        Ty::U16 => int!(u16),
        Ty::I32 => int!(i32),
        Ty::U32 => int!(u32),
        Ty::F32 => each(d, s, k, f32::from_le_bytes, f32::to_le_bytes, |a, b| a + b),
        Ty::F16 => half!(half::f16),
        Ty::Bf16 => half!(half::bf16),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_round_through_f32_and_integers_compare_by_sign() {
        let one = half::f16::from_f32(1.0).to_le_bytes();
        let third = half::f16::from_f32(0.333).to_le_bytes();
        let mut d = one.to_vec();
        apply(&mut d, &third, Ty::F16, Kind::Add);
        let got = half::f16::from_le_bytes([d[0], d[1]]).to_f32();
        assert!((got - 1.333).abs() < 1e-3, "{got}");
        let mut d = vec![0xFFu8, 0x01];
        apply(&mut d, &[0x01, 0xFF], Ty::I8, Kind::Max);
        assert_eq!(d, [0x01, 0x01], "signed max");
        let mut d = vec![0xFFu8, 0x01];
        apply(&mut d, &[0x01, 0xFF], Ty::U8, Kind::Max);
        assert_eq!(d, [0xFF, 0xFF], "unsigned max");
        let mut d = 1.0f32.to_le_bytes().to_vec();
        apply(&mut d, &f32::NAN.to_le_bytes(), Ty::F32, Kind::Min);
        assert_eq!(
            d,
            1.0f32.to_le_bytes(),
            "an unordered pair keeps the destination"
        );
    }
}
