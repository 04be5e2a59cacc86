//! The built-in reduce operation: a stream combines a source range element by element into a
//! destination range, `dst[i] = op(dst[i], src[i])`, in stream order. It needs no kernel binary:
//! it is the portable form of ACL's `aclrtReduceAsync` (a task of the runtime itself, present on
//! every Ascend NPU), and the host and CUDA backends give it the same meaning.
//!
//! Rules every backend follows:
//! * `len` is in bytes (as ACL's `count`) and a multiple of the element size (zero is a
//!   no-op, as in every other operation, once the offsets pass these rules); both
//!   offsets are multiples of the element size (ACL's alignment rule: 4 bytes for 32-bit types,
//!   2 for 16-bit ones); both ranges lie inside their buffers. Else [`Error::InvalidArgument`].
//! * `src` and `dst` belong to the stream's device ([`Error::WrongDevice`] otherwise). The two
//!   ranges are either the same range or disjoint; a partial overlap is
//!   [`Error::InvalidArgument`].
//! * Elements are little-endian. [`ReduceKind::Sum`] of floats is one IEEE-754 addition per
//!   element (round to nearest even); integer sums that overflow are backend-defined (the host
//!   and CUDA wrap; ACL does not document it), so portable code keeps them in range.
//!   [`ReduceKind::Max`] / [`ReduceKind::Min`] with a NaN operand are backend-defined.
//! * It is stream work like a copy: ordered with the stream, recorded by a capture where the
//!   backend captures (host and CUDA; Ascend: the runtime records it like its other tasks).
//! * [`Capabilities::REDUCE`](crate::Capabilities) says the device has the operation; a
//!   device may still refuse a kind or a type it lacks ([`Error::Unsupported`]; e.g. ACL on
//!   Atlas training products reduces `f32` only). [`ReduceType::F32`] with
//!   [`ReduceKind::Sum`] is available wherever the capability is.
//!
//! | Backend | How |
//! | --- | --- |
//! | host | [`apply`] on the stream's worker (the reference) |
//! | CUDA | the kernels `xstream_reduce_{f32,s32,s16,s8,f16,bf16,s64}` of the builtin PTX module |
//! | Ascend | `aclrtReduceAsync` when the runtime exports it |

use crate::{BackendKind, Error, Result};

/// The combining operation. The discriminants are ACL's `aclrtReduceKind` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ReduceKind {
    /// `dst + src` (`ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM`).
    Sum = 10,
    /// The larger of the two (`ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX`).
    Max = 11,
    /// The smaller of the two (`ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN`).
    Min = 12,
}

impl ReduceKind {
    /// Every kind.
    pub const ALL: [ReduceKind; 3] = [Self::Sum, Self::Max, Self::Min];

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sum => "sum",
            Self::Max => "max",
            Self::Min => "min",
        }
    }
}

/// The element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceType {
    /// IEEE-754 binary32.
    F32,
    /// Two's complement 32-bit integer.
    I32,
    /// Two's complement 16-bit integer.
    I16,
    /// Two's complement 8-bit integer.
    I8,
    /// IEEE-754 binary16 (`half::f16`). Sums are rounded to nearest even once (computed in
    /// `f32`, which represents the exact sum of two binary16 values closely enough that the
    /// one rounding to binary16 is the correctly rounded result).
    F16,
    /// bfloat16 (`half::bf16`), rounded as [`ReduceType::F16`] (`f32` again suffices).
    BF16,
    /// Two's complement 64-bit integer.
    I64,
}

impl ReduceType {
    /// Every type.
    pub const ALL: [ReduceType; 7] = [
        Self::F32,
        Self::I32,
        Self::I16,
        Self::I8,
        Self::F16,
        Self::BF16,
        Self::I64,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Self::I64 => 8,
            Self::F32 | Self::I32 => 4,
            Self::I16 | Self::F16 | Self::BF16 => 2,
            Self::I8 => 1,
        }
    }

    /// ACL's `aclDataType` value (`ACL_FLOAT` 0, `ACL_INT32` 3, `ACL_INT16` 6, `ACL_INT8` 2,
    /// `ACL_FLOAT16` 1, `ACL_BF16` 27, `ACL_INT64` 9).
    pub fn acl(self) -> i32 {
        match self {
            Self::F32 => 0,
            Self::I32 => 3,
            Self::I16 => 6,
            Self::I8 => 2,
            Self::F16 => 1,
            Self::BF16 => 27,
            Self::I64 => 9,
        }
    }

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::I32 => "i32",
            Self::I16 => "i16",
            Self::I8 => "i8",
            Self::F16 => "f16",
            Self::BF16 => "bf16",
            Self::I64 => "i64",
        }
    }
}

/// One reduce operation: what to combine and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reduction {
    /// How elements combine.
    pub kind: ReduceKind,
    /// The element type.
    pub ty: ReduceType,
}

impl Reduction {
    /// `kind` over elements of `ty`.
    pub fn new(kind: ReduceKind, ty: ReduceType) -> Self {
        Self { kind, ty }
    }
}

/// Validates a reduce of `len` bytes from `src_len`-byte buffer at `src_offset` into
/// `dst_len`-byte buffer at `dst_offset` (the rules of the module documentation, but the
/// overlap rule, which needs addresses: see [`check_overlap`]).
///
/// # Errors
/// [`Error::InvalidArgument`] naming the broken rule.
pub fn check(
    r: Reduction,
    dst_len: usize,
    dst_offset: usize,
    src_len: usize,
    src_offset: usize,
    len: usize,
) -> Result<()> {
    let size = r.ty.size();
    if !len.is_multiple_of(size) {
        return Err(Error::invalid(format!(
            "reduce: len {len} is not a multiple of the {size}-byte {} element",
            r.ty.name()
        )));
    }
    for (what, off) in [("destination", dst_offset), ("source", src_offset)] {
        if !off.is_multiple_of(size) {
            return Err(Error::invalid(format!(
                "reduce: {what} offset {off} is not a multiple of the {size}-byte {} element",
                r.ty.name()
            )));
        }
    }
    crate::check_range("reduce destination", dst_len, dst_offset, len)?;
    crate::check_range("reduce source", src_len, src_offset, len)
}

/// Refuses partially overlapping ranges `[dst, dst+len)` and `[src, src+len)` (addresses in
/// one address space); identical ranges and disjoint ranges pass.
///
/// # Errors
/// [`Error::InvalidArgument`].
pub fn check_overlap(dst: u64, src: u64, len: usize) -> Result<()> {
    let len = len as u64;
    if dst == src || dst.saturating_add(len) <= src || src.saturating_add(len) <= dst {
        Ok(())
    } else {
        Err(Error::invalid(
            "reduce: source and destination ranges overlap partially",
        ))
    }
}

/// The error of a backend without the operation.
pub fn unsupported(backend: BackendKind, what: &str) -> Error {
    Error::unsupported(backend, format!("built-in reduce: {what}"))
}

/// The host implementation: `dst[i] = op(dst[i], src[i])` over little-endian elements.
/// `dst.len()` and `src.len()` must be equal multiples of the element size (whole elements of
/// the shorter one are combined otherwise). Integer sums wrap.
pub fn apply(r: Reduction, dst: &mut [u8], src: &[u8]) {
    fn each<const N: usize>(dst: &mut [u8], src: &[u8], f: impl Fn([u8; N], [u8; N]) -> [u8; N]) {
        for (d, s) in dst.chunks_exact_mut(N).zip(src.chunks_exact(N)) {
            let a: [u8; N] = d.try_into().unwrap_or([0; N]);
            let b: [u8; N] = s.try_into().unwrap_or([0; N]);
            d.copy_from_slice(&f(a, b));
        }
    }
    macro_rules! int {
        ($t:ty, $n:literal) => {
            each::<$n>(dst, src, |a, b| {
                let (a, b) = (<$t>::from_le_bytes(a), <$t>::from_le_bytes(b));
                match r.kind {
                    ReduceKind::Sum => a.wrapping_add(b),
                    ReduceKind::Max => a.max(b),
                    ReduceKind::Min => a.min(b),
                }
                .to_le_bytes()
            })
        };
    }
    match r.ty {
        ReduceType::F32 => each::<4>(dst, src, |a, b| {
            let (a, b) = (f32::from_le_bytes(a), f32::from_le_bytes(b));
            match r.kind {
                ReduceKind::Sum => a + b,
                ReduceKind::Max => a.max(b),
                ReduceKind::Min => a.min(b),
            }
            .to_le_bytes()
        }),
        ReduceType::I32 => int!(i32, 4),
        ReduceType::I16 => int!(i16, 2),
        ReduceType::I8 => int!(i8, 1),
        ReduceType::I64 => int!(i64, 8),
        ReduceType::F16 => each::<2>(dst, src, |a, b| {
            let (a, b) = (half::f16::from_le_bytes(a), half::f16::from_le_bytes(b));
            half::f16::from_f32(combine_f32(r.kind, a.to_f32(), b.to_f32())).to_le_bytes()
        }),
        ReduceType::BF16 => each::<2>(dst, src, |a, b| {
            let (a, b) = (half::bf16::from_le_bytes(a), half::bf16::from_le_bytes(b));
            half::bf16::from_f32(combine_f32(r.kind, a.to_f32(), b.to_f32())).to_le_bytes()
        }),
    }
}

/// `kind` of two `f32` values (the half-precision types are combined in `f32`: exact for max
/// and min; for sums, `f32` has more than twice the precision of both half types plus two
/// bits, so rounding the `f32` sum to them is the correctly rounded half-precision sum).
fn combine_f32(kind: ReduceKind, a: f32, b: f32) -> f32 {
    match kind {
        ReduceKind::Sum => a + b,
        ReduceKind::Max => a.max(b),
        ReduceKind::Min => a.min(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks() {
        let r = Reduction::new(ReduceKind::Sum, ReduceType::F32);
        assert!(check(r, 16, 0, 16, 0, 16).is_ok());
        assert!(check(r, 16, 0, 16, 0, 0).is_ok(), "zero length (a no-op)");
        assert!(
            check(r, 16, 20, 16, 0, 0).is_err(),
            "zero length past the end"
        );
        assert!(check(r, 16, 0, 16, 0, 6).is_err(), "partial element");
        assert!(check(r, 16, 2, 16, 0, 4).is_err(), "misaligned destination");
        assert!(check(r, 16, 0, 16, 2, 4).is_err(), "misaligned source");
        assert!(
            check(r, 16, 8, 16, 0, 12).is_err(),
            "outside the destination"
        );
        let h = Reduction::new(ReduceKind::Max, ReduceType::I16);
        assert!(
            check(h, 16, 2, 16, 6, 10).is_ok(),
            "2-byte alignment for i16"
        );
        assert!(check_overlap(0, 0, 8).is_ok() && check_overlap(0, 8, 8).is_ok());
        assert!(check_overlap(0, 4, 8).is_err() && check_overlap(4, 0, 8).is_err());
    }

    #[test]
    fn half_precision_sums_round_to_nearest_even_once() {
        use half::{bf16, f16};
        // 1 + 2^-11 is halfway between two binary16 values: ties to even gives 1.
        let (a, b) = (f16::from_f32(1.0), f16::from_f32(2f32.powi(-11)));
        let mut d = a.to_le_bytes().to_vec();
        apply(
            Reduction::new(ReduceKind::Sum, ReduceType::F16),
            &mut d,
            &b.to_le_bytes(),
        );
        assert_eq!(f16::from_le_bytes([d[0], d[1]]), f16::from_f32(1.0));
        // Just above halfway rounds up.
        let c = f16::from_f32(2f32.powi(-11) + 2f32.powi(-20));
        let mut d = a.to_le_bytes().to_vec();
        apply(
            Reduction::new(ReduceKind::Sum, ReduceType::F16),
            &mut d,
            &c.to_le_bytes(),
        );
        assert_eq!(
            f16::from_le_bytes([d[0], d[1]]).to_f32(),
            1.0 + 2f32.powi(-10)
        );
        let (x, y) = (bf16::from_f32(3.0), bf16::from_f32(-7.5));
        let mut d = x.to_le_bytes().to_vec();
        apply(
            Reduction::new(ReduceKind::Min, ReduceType::BF16),
            &mut d,
            &y.to_le_bytes(),
        );
        assert_eq!(bf16::from_le_bytes([d[0], d[1]]).to_f32(), -7.5);
        let mut d = i64::MAX.to_le_bytes().to_vec();
        apply(
            Reduction::new(ReduceKind::Sum, ReduceType::I64),
            &mut d,
            &1i64.to_le_bytes(),
        );
        assert_eq!(i64::from_le_bytes(d.try_into().unwrap()), i64::MIN, "wraps");
    }

    #[test]
    fn apply_matches_typed_arithmetic() {
        let a = [1.5f32, -2.0, 7.25];
        let b = [0.25f32, 3.0, -8.0];
        let mut d: Vec<u8> = a.iter().flat_map(|x| x.to_le_bytes()).collect();
        let s: Vec<u8> = b.iter().flat_map(|x| x.to_le_bytes()).collect();
        apply(Reduction::new(ReduceKind::Sum, ReduceType::F32), &mut d, &s);
        let got: Vec<f32> = d
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, [1.75, 1.0, -0.75]);
        let mut d = vec![5u8, 0x80, 0x7f];
        apply(
            Reduction::new(ReduceKind::Min, ReduceType::I8),
            &mut d,
            &[6, 0x7f, 0x80],
        );
        assert_eq!(d, [5, 0x80, 0x80], "signed comparison");
        let kinds: Vec<u32> = ReduceKind::ALL.iter().map(|k| *k as u32).collect();
        assert_eq!(kinds, [10, 11, 12]);
    }
}
