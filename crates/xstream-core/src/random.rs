//! The built-in random fill: a stream writes random numbers of a given distribution into a
//! byte range of a buffer, in stream order, with no kernel binary. It is the portable form of
//! ACL's `aclrtRandomNumAsync` (a task of the CANN runtime itself on Atlas A2/A3 products) and
//! is enqueued as [`Kernel::Random`](crate::Kernel::Random) through
//! [`Stream::launch_builtin`](crate::Stream::launch).
//!
//! Rules every backend follows:
//! * The generator is counter based: the output depends only on the distribution, the element
//!   type, the `seed`, the starting counter `offset` and the position in the range. The same
//!   fill twice on a backend writes the same bytes; fills at different offsets (or seeds) write
//!   different numbers. In the reference one counter block gives four elements (four mask
//!   bits for [`Distribution::DropoutMask`]): a fill of `n` elements uses the blocks
//!   `offset .. offset + ceil(n / 4)`, so the next independent fill starts at
//!   [`RandomFill::next_offset`]. Ascend's engine takes the same 128-bit counter, but how many
//!   blocks it uses per element is not documented: there, fills at offsets that far apart
//!   differ, and independence beyond that is the engine's (distinct seeds are the safe way).
//! * The bits are **not** promised identical across vendors: the host reference below is
//!   Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011)
//!   with the published round and key constants and the conversions written here; Ascend's
//!   engine is documented as Philox4_32_10 too, but its conversion to the element type is
//!   the hardware's. What every backend promises is the distribution: the range of
//!   [`Distribution::Uniform`], the mean and spread of the normal ones, the bound of
//!   [`Distribution::TruncatedNormal`] and the drop probability of a mask.
//! * Element types are `f32`, `f16` and `bf16` ([`RandomType`]), little-endian. The range
//!   (`offset`, `len` in bytes) must lie in the buffer, and for the value distributions both
//!   must be multiples of the element size (a mask is bytes: any range). A zero length is a
//!   no-op once the range passes these rules.
//! * Bad parameters are [`Error::InvalidArgument`] on every backend, checked once in
//!   xstream-core ([`check`]): a parameter that is not finite or not representable in the
//!   element type, `min > max`, `std < 0`, a drop probability outside `[0, 1]`.
//! * [`Capabilities::RANDOM`](crate::Capabilities::RANDOM) says the device has the fill; a
//!   backend without it answers [`Error::Unsupported`].
//!
//! | Backend | How |
//! | --- | --- |
//! | host | [`generate`] on the stream's worker (the reference) |
//! | CUDA | not available: `Unsupported`, capability unset |
//! | Ascend | `aclrtRandomNumAsync` when the runtime exports it and the chip has the task |

use crate::{BackendKind, Error, Result};

/// The element type of a random fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RandomType {
    /// IEEE-754 binary32.
    F32,
    /// IEEE-754 binary16 (`half::f16`).
    F16,
    /// bfloat16 (`half::bf16`).
    BF16,
}

impl RandomType {
    /// Every type.
    pub const ALL: [RandomType; 3] = [Self::F32, Self::F16, Self::BF16];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::F16 | Self::BF16 => 2,
        }
    }

    /// ACL's `aclDataType` value (`ACL_FLOAT` 0, `ACL_FLOAT16` 1, `ACL_BF16` 27).
    pub fn acl(self) -> i32 {
        match self {
            Self::F32 => 0,
            Self::F16 => 1,
            Self::BF16 => 27,
        }
    }

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::F16 => "f16",
            Self::BF16 => "bf16",
        }
    }

    /// `x` rounded to this type (to nearest even), as little-endian bytes in the first
    /// [`RandomType::size`] bytes of the result.
    pub fn encode(self, x: f64) -> [u8; 4] {
        let mut b = [0u8; 4];
        match self {
            Self::F32 => b.copy_from_slice(&(x as f32).to_le_bytes()),
            Self::F16 => b[..2].copy_from_slice(&half::f16::from_f64(x).to_le_bytes()),
            Self::BF16 => b[..2].copy_from_slice(&half::bf16::from_f64(x).to_le_bytes()),
        }
        b
    }

    /// The element at the start of `b` (at least [`RandomType::size`] bytes) as `f64`.
    pub fn decode(self, b: &[u8]) -> f64 {
        match (self, b) {
            (Self::F32, [a, c, d, e, ..]) => f64::from(f32::from_le_bytes([*a, *c, *d, *e])),
            (Self::F16, [a, c, ..]) => half::f16::from_le_bytes([*a, *c]).to_f64(),
            (Self::BF16, [a, c, ..]) => half::bf16::from_le_bytes([*a, *c]).to_f64(),
            _ => f64::NAN,
        }
    }

    /// `x` survives rounding to this type as a finite value.
    fn represents(self, x: f32) -> bool {
        self.decode(&self.encode(f64::from(x))).is_finite()
    }
}

/// What the numbers follow. The discriminant names are ACL's `aclrtRandomNumFuncType`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    /// Uniform over `[min, max]` (the reference draws from `[min, max)` and rounding to the
    /// element type may reach `max`). `ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS`.
    Uniform {
        /// The lower bound.
        min: f32,
        /// The upper bound (`>= min`).
        max: f32,
    },
    /// Normal with this mean and standard deviation. `ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS`.
    Normal {
        /// The mean.
        mean: f32,
        /// The standard deviation (`>= 0`).
        std: f32,
    },
    /// Normal, redrawn outside `mean ± 2·std` (so every value lies within two standard
    /// deviations). `ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS`; ACL does not
    /// document the engine's bound, two standard deviations is the common definition.
    TruncatedNormal {
        /// The mean.
        mean: f32,
        /// The standard deviation before truncation (`>= 0`).
        std: f32,
    },
    /// A dropout bitmask: one bit per element, least significant bit first; a bit is 0
    /// (dropped) with probability `drop_prob` and 1 (kept) otherwise. The range is bytes of
    /// mask (8 elements per byte); the element type is the type the probability is passed
    /// in. `ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK` (ACL's `dropoutRation`).
    DropoutMask {
        /// The probability that an element is dropped, in `[0, 1]`.
        drop_prob: f32,
    },
}

impl Distribution {
    /// ACL's `aclrtRandomNumFuncType` value.
    pub fn acl(&self) -> u32 {
        match self {
            Self::DropoutMask { .. } => 0,
            Self::Uniform { .. } => 1,
            Self::Normal { .. } => 2,
            Self::TruncatedNormal { .. } => 3,
        }
    }

    /// Its name in messages.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Uniform { .. } => "uniform",
            Self::Normal { .. } => "normal",
            Self::TruncatedNormal { .. } => "truncated normal",
            Self::DropoutMask { .. } => "dropout mask",
        }
    }

    /// The two parameters in ACL's order (min/max, mean/stddev; a mask has only the first).
    pub fn params(&self) -> (f32, Option<f32>) {
        match *self {
            Self::Uniform { min, max } => (min, Some(max)),
            Self::Normal { mean, std } | Self::TruncatedNormal { mean, std } => (mean, Some(std)),
            Self::DropoutMask { drop_prob } => (drop_prob, None),
        }
    }
}

/// One random fill: distribution, element type and the generator's position.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomFill {
    /// The distribution.
    pub dist: Distribution,
    /// The element type (for a mask, the type its probability is passed in).
    pub ty: RandomType,
    /// The generator's key.
    pub seed: u64,
    /// The first counter block (see the module documentation).
    pub offset: u64,
}

impl RandomFill {
    /// `dist` over `ty` with `seed`, from counter block 0.
    pub fn new(dist: Distribution, ty: RandomType, seed: u64) -> Self {
        Self {
            dist,
            ty,
            seed,
            offset: 0,
        }
    }

    /// The same fill from counter block `offset`.
    pub fn at(self, offset: u64) -> Self {
        Self { offset, ..self }
    }

    /// The elements (mask bits for a mask) a range of `len` bytes holds.
    pub fn elements(&self, len: usize) -> u64 {
        match self.dist {
            Distribution::DropoutMask { .. } => len as u64 * 8,
            _ => (len / self.ty.size()) as u64,
        }
    }

    /// The counter blocks a fill of `len` bytes uses.
    pub fn blocks(&self, len: usize) -> u64 {
        self.elements(len).div_ceil(4)
    }

    /// The offset of the next fill that shares no counter block with this one of `len`
    /// bytes.
    pub fn next_offset(&self, len: usize) -> u64 {
        self.offset.wrapping_add(self.blocks(len))
    }
}

/// Validates a fill of `len` bytes at `offset` of a `buf_len`-byte buffer (the rules of the
/// module documentation).
///
/// # Errors
/// [`Error::InvalidArgument`] naming the broken rule.
pub fn check(f: &RandomFill, buf_len: usize, offset: usize, len: usize) -> Result<()> {
    let ty = f.ty;
    let (a, b) = f.dist.params();
    let bad = |what: String| {
        Err(Error::invalid(format!(
            "random fill ({}): {what}",
            f.dist.name()
        )))
    };
    for x in std::iter::once(a).chain(b) {
        if !x.is_finite() {
            return bad(format!("parameter {x} is not finite"));
        }
        if !ty.represents(x) {
            return bad(format!(
                "parameter {x} is not representable in {}",
                ty.name()
            ));
        }
    }
    match f.dist {
        Distribution::Uniform { min, max } if min > max => {
            return bad(format!("min {min} is greater than max {max}"));
        }
        Distribution::Normal { std, .. } | Distribution::TruncatedNormal { std, .. }
            if std < 0.0 =>
        {
            return bad(format!("standard deviation {std} is negative"));
        }
        Distribution::DropoutMask { drop_prob } if !(0.0..=1.0).contains(&drop_prob) => {
            return bad(format!("drop probability {drop_prob} is outside [0, 1]"));
        }
        _ => {}
    }
    if !matches!(f.dist, Distribution::DropoutMask { .. }) {
        let size = ty.size();
        for (what, v) in [("offset", offset), ("len", len)] {
            if !v.is_multiple_of(size) {
                return bad(format!(
                    "{what} {v} is not a multiple of the {size}-byte {} element",
                    ty.name()
                ));
            }
        }
    }
    crate::check_range("random fill", buf_len, offset, len)
}

/// The error of a backend without the fill.
pub fn unsupported(backend: BackendKind, what: &str) -> Error {
    Error::unsupported(backend, format!("built-in random fill: {what}"))
}

/// Philox4x32's multipliers and Weyl key increments (the published constants).
const PHILOX_M: [u32; 2] = [0xD251_1F53, 0xCD9E_8D57];
const PHILOX_W: [u32; 2] = [0x9E37_79B9, 0xBB67_AE85];

/// One Philox4x32-10 block: the four output words for counter `ctr` (word 0 least
/// significant) and key `key`.
pub fn philox4x32_10(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (ctr, key);
    for round in 0..10 {
        if round > 0 {
            k = [
                k[0].wrapping_add(PHILOX_W[0]),
                k[1].wrapping_add(PHILOX_W[1]),
            ];
        }
        let p0 = u64::from(PHILOX_M[0]) * u64::from(c[0]);
        let p1 = u64::from(PHILOX_M[1]) * u64::from(c[2]);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// The block at 128-bit counter `ctr` under `seed`.
fn block(seed: u64, ctr: u128) -> [u32; 4] {
    let w = |i: u32| (ctr >> (32 * i)) as u32;
    philox4x32_10([w(0), w(1), w(2), w(3)], [seed as u32, (seed >> 32) as u32])
}

/// A word as a uniform number in `[0, 1)` (its top 24 bits).
fn unit(w: u32) -> f64 {
    f64::from(w >> 8) * (1.0 / 16_777_216.0)
}

/// The standard normal of lane `lane` of a block: Box–Muller on the lane pair (0, 1) or
/// (2, 3), cosine for the even lane, sine for the odd one.
fn normal_lane(b: &[u32; 4], lane: usize) -> f64 {
    let pair = lane & !1;
    let u1 = f64::from((b[pair] >> 8) + 1) * (1.0 / 16_777_216.0); // (0, 1]
    let u2 = unit(b[pair + 1]);
    let r = (-2.0 * u1.ln()).sqrt();
    let t = std::f64::consts::TAU * u2;
    if lane & 1 == 0 {
        r * t.cos()
    } else {
        r * t.sin()
    }
}

/// Redraws of a truncated normal before the value is clamped to the bound (each redraw
/// falls outside with probability below 0.05).
pub const TRUNCATED_REDRAWS: u32 = 16;

/// The reference generator: fills `out` as [`Kernel::Random`](crate::Kernel::Random) does
/// with `dist`, `ty` and `seed` from the 128-bit counter `ctr` (a portable fill starts at its
/// `offset`). Element `i` (mask bit `i` for a mask) takes lane `i % 4` of block `ctr + i / 4`:
///
/// * uniform: `min + u · (max - min)` with `u` the lane's top 24 bits over 2^24;
/// * normal: `mean + std · z`, `z` from Box–Muller on the lane pair (see the source);
/// * truncated normal: as normal; where `|z| > 2` redraw `r` (1, 2, ...) takes the same lane
///   of the block whose top counter word is XORed with `r`; after [`TRUNCATED_REDRAWS`] the
///   value is clamped to `mean ± 2·std`;
/// * mask: bit `i` (byte `i / 8`, bit `i % 8`) is 1 when `u >= drop_prob`.
///
/// Values are computed in `f64` and rounded once to `ty` (to nearest even). A trailing part
/// of `out` shorter than one element is left unchanged.
pub fn generate(dist: Distribution, ty: RandomType, seed: u64, ctr: u128, out: &mut [u8]) {
    let size = ty.size();
    let lane_at = |i: u64| -> ([u32; 4], usize) {
        (
            block(seed, ctr.wrapping_add(u128::from(i / 4))),
            (i % 4) as usize,
        )
    };
    let value = |i: u64| -> f64 {
        let (b, lane) = lane_at(i);
        match dist {
            Distribution::Uniform { min, max } => {
                let (min, max) = (f64::from(min), f64::from(max));
                min + unit(b[lane]) * (max - min)
            }
            Distribution::Normal { mean, std } => {
                f64::from(mean) + f64::from(std) * normal_lane(&b, lane)
            }
            Distribution::TruncatedNormal { mean, std } => {
                let mut z = normal_lane(&b, lane);
                let mut r = 1u32;
                while z.abs() > 2.0 && r <= TRUNCATED_REDRAWS {
                    let c = ctr.wrapping_add(u128::from(i / 4)) ^ (u128::from(r) << 96);
                    z = normal_lane(&block(seed, c), lane);
                    r += 1;
                }
                f64::from(mean) + f64::from(std) * z.clamp(-2.0, 2.0)
            }
            Distribution::DropoutMask { .. } => 0.0,
        }
    };
    match dist {
        Distribution::DropoutMask { drop_prob } => {
            let p = f64::from(drop_prob);
            for (byte_i, byte) in out.iter_mut().enumerate() {
                let mut m = 0u8;
                for bit in 0..8u64 {
                    let (b, lane) = lane_at(byte_i as u64 * 8 + bit);
                    if unit(b[lane]) >= p {
                        m |= 1 << bit;
                    }
                }
                *byte = m;
            }
        }
        _ => {
            for (i, e) in out.chunks_exact_mut(size).enumerate() {
                e.copy_from_slice(&ty.encode(value(i as u64))[..size]);
            }
        }
    }
}

/// [`generate`] for a portable fill (the counter is its `offset`).
pub fn fill(f: &RandomFill, out: &mut [u8]) {
    generate(f.dist, f.ty, f.seed, u128::from(f.offset), out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_known_answers() {
        // Random123's published known-answer vectors for Philox4x32-10.
        assert_eq!(
            philox4x32_10([0; 4], [0; 2]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    fn uniform() -> RandomFill {
        RandomFill::new(
            Distribution::Uniform {
                min: -1.0,
                max: 3.0,
            },
            RandomType::F32,
            7,
        )
    }

    #[test]
    fn checks() {
        let u = uniform();
        assert!(check(&u, 64, 0, 64).is_ok());
        assert!(check(&u, 64, 64, 0).is_ok(), "zero length at the end");
        assert!(check(&u, 64, 68, 0).is_err(), "zero length past the end");
        assert!(check(&u, 64, 2, 8).is_err(), "misaligned offset");
        assert!(check(&u, 64, 0, 6).is_err(), "partial element");
        assert!(check(&u, 64, 8, 60).is_err(), "outside the buffer");
        let h = RandomFill {
            ty: RandomType::F16,
            ..u
        };
        assert!(check(&h, 64, 2, 6).is_ok(), "2-byte alignment for f16");
        let d = |dist| RandomFill { dist, ..u };
        let bad = [
            Distribution::Uniform { min: 2.0, max: 1.0 },
            Distribution::Uniform {
                min: f32::NAN,
                max: 1.0,
            },
            Distribution::Normal {
                mean: 0.0,
                std: -1.0,
            },
            Distribution::TruncatedNormal {
                mean: f32::INFINITY,
                std: 1.0,
            },
            Distribution::DropoutMask { drop_prob: 1.5 },
            Distribution::DropoutMask { drop_prob: -0.1 },
        ];
        for dist in bad {
            let e = check(&d(dist), 64, 0, 64).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidValue, "{dist:?}");
        }
        let big = RandomFill {
            ty: RandomType::F16,
            ..d(Distribution::Uniform {
                min: 0.0,
                max: 1.0e6,
            })
        };
        assert!(check(&big, 64, 0, 64).is_err(), "1e6 overflows f16");
        let mask = d(Distribution::DropoutMask { drop_prob: 0.5 });
        assert!(check(&mask, 64, 3, 5).is_ok(), "a mask is bytes");
    }

    #[test]
    fn deterministic_and_offset_dependent() {
        let u = uniform();
        let (mut a, mut b, mut c) = (vec![0u8; 256], vec![0u8; 256], vec![0u8; 256]);
        fill(&u, &mut a);
        fill(&u, &mut b);
        fill(&u.at(u.next_offset(256)), &mut c);
        assert_eq!(a, b);
        assert_ne!(a, c);
        // A fill at offset k equals the tail of a fill at 0 from element 4k.
        let mut tail = vec![0u8; 128];
        fill(&u.at(8), &mut tail);
        assert_eq!(tail, a[128..]);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "statistics over 240 000 generated values take many minutes under Miri; the \
                  generator has no unsafe code and its known-answer and determinism tests run \
                  under Miri"
    )]
    fn distributions() {
        let n = 20_000usize;
        let stats = |dist, ty: RandomType| {
            let f = RandomFill::new(dist, ty, 0x1234_5678_9abc_def0);
            let mut out = vec![0u8; n * ty.size()];
            fill(&f, &mut out);
            let v: Vec<f64> = out.chunks_exact(ty.size()).map(|e| ty.decode(e)).collect();
            let mean = v.iter().sum::<f64>() / n as f64;
            let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
            let (lo, hi) = v
                .iter()
                .fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(*x), h.max(*x)));
            (mean, var, lo, hi)
        };
        for ty in RandomType::ALL {
            let (m, v, lo, hi) = stats(
                Distribution::Uniform {
                    min: -1.0,
                    max: 3.0,
                },
                ty,
            );
            assert!(lo >= -1.0 && hi <= 3.0, "{ty:?} range {lo}..{hi}");
            assert!((m - 1.0).abs() < 0.05, "{ty:?} uniform mean {m}");
            assert!(
                (v - 16.0 / 12.0).abs() < 0.05,
                "{ty:?} uniform variance {v}"
            );
            let (m, v, ..) = stats(
                Distribution::Normal {
                    mean: 2.0,
                    std: 0.5,
                },
                ty,
            );
            assert!((m - 2.0).abs() < 0.02, "{ty:?} normal mean {m}");
            assert!((v - 0.25).abs() < 0.02, "{ty:?} normal variance {v}");
            let (m, v, lo, hi) = stats(
                Distribution::TruncatedNormal {
                    mean: -1.0,
                    std: 2.0,
                },
                ty,
            );
            assert!(
                lo >= -5.0 - 1e-2 && hi <= 3.0 + 1e-2,
                "{ty:?} truncated {lo}..{hi}"
            );
            assert!((m + 1.0).abs() < 0.05, "{ty:?} truncated mean {m}");
            // Variance of a normal truncated at two standard deviations: 0.774 σ².
            assert!(
                (v - 0.774 * 4.0).abs() < 0.15,
                "{ty:?} truncated variance {v}"
            );
        }
        let f = RandomFill::new(
            Distribution::DropoutMask { drop_prob: 0.25 },
            RandomType::F32,
            3,
        );
        let mut m = vec![0u8; 4096];
        fill(&f, &mut m);
        let kept: u32 = m.iter().map(|b| b.count_ones()).sum();
        let frac = f64::from(kept) / (4096.0 * 8.0);
        assert!((frac - 0.75).abs() < 0.01, "kept fraction {frac}");
        for (p, all) in [(0.0f32, 0xFFu8), (1.0, 0x00)] {
            let mut m = vec![0x5Au8; 64];
            fill(
                &RandomFill {
                    dist: Distribution::DropoutMask { drop_prob: p },
                    ..f
                },
                &mut m,
            );
            assert!(m.iter().all(|b| *b == all), "drop_prob {p}");
        }
    }
}
