//! Conformance check of the built-in reduce (`xstream_core::reduce`), against a reference
//! written here on typed values (not the host backend's byte-level implementation).

use xstream_core::{
    Backend, Capabilities, CaptureMode, Device, Error, Graph, ReduceKind, ReduceType, Reduction,
    Stream,
};

use crate::{nb, pass, read_all, CheckResult, Ctx, Env};

/// Typed values of one element type, so the reference below is plain arithmetic.
#[derive(Clone, Debug, PartialEq)]
enum Vals {
    F32(Vec<f32>),
    I32(Vec<i32>),
    I16(Vec<i16>),
    I8(Vec<i8>),
    F16(Vec<half::f16>),
    BF16(Vec<half::bf16>),
    I64(Vec<i64>),
}

impl Vals {
    /// `n` deterministic values of `ty`, different per `seed`, small enough that sums of a few
    /// of them stay in range (integer overflow is backend-defined).
    fn seeded(ty: ReduceType, n: usize, seed: u32) -> Vals {
        let v = |i: usize| -> i32 {
            let x = (i as u32)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(seed.wrapping_mul(40_503));
            ((x >> 7) % 101) as i32 - 50
        };
        match ty {
            // Quarters are exact in binary32, so the sums below are exact too.
            ReduceType::F32 => Vals::F32((0..n).map(|i| v(i) as f32 * 0.25).collect()),
            ReduceType::I32 => Vals::I32((0..n).map(|i| v(i) * 1000).collect()),
            ReduceType::I16 => Vals::I16((0..n).map(|i| (v(i) * 10) as i16).collect()),
            ReduceType::I8 => Vals::I8((0..n).map(|i| (v(i) / 2) as i8).collect()),
            // Tenths are not exact in the half types, so sums need their rounding (to nearest
            // even, once).
            ReduceType::F16 => Vals::F16(
                (0..n)
                    .map(|i| half::f16::from_f32(v(i) as f32 * 0.1))
                    .collect(),
            ),
            ReduceType::BF16 => Vals::BF16(
                (0..n)
                    .map(|i| half::bf16::from_f32(v(i) as f32 * 0.1))
                    .collect(),
            ),
            // Past 32 bits.
            ReduceType::I64 => Vals::I64((0..n).map(|i| v(i) as i64 * 1_000_000_000_007).collect()),
        }
    }

    fn bytes(&self) -> Vec<u8> {
        match self {
            Vals::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Vals::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Vals::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Vals::I8(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Vals::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Vals::BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Vals::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }

    /// The reference: `self[i] = kind(self[i], src[i])`.
    fn combine(&mut self, kind: ReduceKind, src: &Vals) {
        fn pick<T: PartialOrd + Copy>(kind: ReduceKind, a: T, b: T) -> Option<T> {
            match kind {
                ReduceKind::Sum => None,
                ReduceKind::Max => Some(if b > a { b } else { a }),
                ReduceKind::Min => Some(if b < a { b } else { a }),
            }
        }
        match (self, src) {
            (Vals::F32(d), Vals::F32(s)) => {
                for (a, b) in d.iter_mut().zip(s) {
                    *a = pick(kind, *a, *b).unwrap_or(*a + *b);
                }
            }
            (Vals::I32(d), Vals::I32(s)) => {
                for (a, b) in d.iter_mut().zip(s) {
                    *a = pick(kind, *a, *b).unwrap_or(*a + *b);
                }
            }
            (Vals::I16(d), Vals::I16(s)) => {
                for (a, b) in d.iter_mut().zip(s) {
                    *a = pick(kind, *a, *b).unwrap_or(*a + *b);
                }
            }
            (Vals::I8(d), Vals::I8(s)) => {
                for (a, b) in d.iter_mut().zip(s) {
                    *a = pick(kind, *a, *b).unwrap_or(*a + *b);
                }
            }
            (Vals::I64(d), Vals::I64(s)) => {
                for (a, b) in d.iter_mut().zip(s) {
                    *a = pick(kind, *a, *b).unwrap_or(*a + *b);
                }
            }
            // The sum of two half-precision values, rounded once to nearest even (the f32 sum
            // is exact enough for that: docs of `ReduceType::F16`).
            (Vals::F16(d), Vals::F16(s)) => {
                for (a, b) in d.iter_mut().zip(s) {
                    *a = pick(kind, *a, *b)
                        .unwrap_or_else(|| half::f16::from_f32(a.to_f32() + b.to_f32()));
                }
            }
            (Vals::BF16(d), Vals::BF16(s)) => {
                for (a, b) in d.iter_mut().zip(s) {
                    *a = pick(kind, *a, *b)
                        .unwrap_or_else(|| half::bf16::from_f32(a.to_f32() + b.to_f32()));
                }
            }
            _ => unreachable!("one type per comparison"),
        }
    }
}

/// Every kind and type the device has matches the reference (types it lacks are refused with
/// `Unsupported`, and f32 sum is always there); offsets move the ranges inside their buffers;
/// bad ranges are `InvalidArgument`; under capture the reduce runs only on replay, once per
/// replay.
pub(crate) fn reduce_builtin<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let caps = dev.info().capabilities;
    if !caps.contains(Capabilities::REDUCE) {
        let a = dev.alloc(16).ctx("alloc")?;
        let b = dev.alloc(16).ctx("alloc")?;
        let r = Reduction::new(ReduceKind::Sum, ReduceType::F32);
        return match s.reduce(&a, 0, &b, 0, 16, r) {
            Err(e) if e.is_unsupported() => Ok(crate::Outcome::Skip(
                "device lacks capability REDUCE (refused with Unsupported)".into(),
            )),
            other => Err(format!("reduce without REDUCE: {other:?}")),
        };
    }
    let n = 300;
    let mut done = Vec::new();
    let mut refused = Vec::new();
    for ty in ReduceType::ALL {
        let size = ty.size();
        for kind in ReduceKind::ALL {
            let r = Reduction::new(kind, ty);
            // dst at element 4 of a larger buffer, src at element 8 of another.
            let (d_off, s_off) = (4 * size, 8 * size);
            let dst0 = Vals::seeded(ty, n + 6, 1);
            let src0 = Vals::seeded(ty, n + 9, 2);
            let dst = dev.alloc((n + 6) * size).ctx("alloc dst")?;
            let src = dev.alloc((n + 9) * size).ctx("alloc src")?;
            s.write(&dst, 0, dst0.bytes()).ctx("write dst")?;
            s.write(&src, 0, src0.bytes()).ctx("write src")?;
            match s.reduce(&dst, d_off, &src, s_off, n * size, r) {
                Ok(()) => {}
                // A pair the device lacks: xstream's own refusal, or the vendor's code classed
                // as unsupported (the ACL runtime's 207000 on a chip without the pair).
                Err(e)
                    if e.kind() == xstream_core::ErrorKind::Unsupported
                        && !(ty == ReduceType::F32 && kind == ReduceKind::Sum) =>
                {
                    refused.push(format!("{}/{}", kind.name(), ty.name()));
                    continue;
                }
                Err(e) => return Err(format!("reduce {}/{}: {e}", kind.name(), ty.name())),
            }
            // Twice: the second combines with the first's result.
            s.reduce(&dst, d_off, &src, s_off, n * size, r)
                .ctx("second reduce")?;
            let got = read_all::<B>(&s, &dst)?;
            let mut want = dst0.clone();
            let shifted = shift(&src0, 8, 4, n + 6);
            // Only elements 4..4+n change.
            let mut mid = slice(&want, 4, n);
            let src_mid = slice(&shifted, 4, n);
            mid.combine(kind, &src_mid);
            mid.combine(kind, &src_mid);
            want = splice(&want, 4, &mid);
            ensure!(
                got == want.bytes(),
                "reduce {}/{} differs from the reference",
                kind.name(),
                ty.name()
            );
            done.push(format!("{}/{}", kind.name(), ty.name()));
        }
    }

    // Bad input.
    let r = Reduction::new(ReduceKind::Sum, ReduceType::F32);
    let a = dev.alloc(64).ctx("alloc")?;
    let b = dev.alloc(64).ctx("alloc")?;
    let bad: [(&str, usize, usize, usize); 5] = [
        ("a zero length past the end", 68, 0, 0),
        ("partial element", 0, 0, 6),
        ("misaligned destination", 2, 0, 8),
        ("outside the source", 0, 48, 32),
        ("outside the destination", 40, 0, 32),
    ];
    for (why, d, o, len) in bad {
        match s.reduce(&a, d, &b, o, len, r) {
            Err(Error::InvalidArgument(_)) => {}
            other => return Err(format!("reduce with {why}: {other:?}")),
        }
    }
    // A zero length is a no-op, as in every other operation: nothing changes.
    let before = read_all::<B>(&s, &a)?;
    s.reduce(&a, 8, &b, 4, 0, r)
        .ctx("a zero-length reduce is a no-op")?;
    ensure!(
        read_all::<B>(&s, &a)? == before,
        "a zero-length reduce changed the destination"
    );
    match s.reduce(&a, 0, &a, 4, 16, r) {
        Err(Error::InvalidArgument(_)) => {}
        other => {
            return Err(format!(
                "reduce over partially overlapping ranges: {other:?}"
            ))
        }
    }

    // Capture: runs only on replay.
    let mut captured = "capture not available";
    if caps.contains(Capabilities::CAPTURE) {
        let ones = Vals::F32(vec![1.5; 16]);
        let base = Vals::F32((0..16).map(|i| i as f32).collect());
        s.write(&a, 0, base.bytes()).ctx("write")?;
        s.write(&b, 0, ones.bytes()).ctx("write")?;
        s.synchronize().ctx("sync")?;
        s.begin_capture(CaptureMode::ThreadLocal)
            .ctx("begin_capture")?;
        s.reduce(&a, 0, &b, 0, 64, r).ctx("reduce in capture")?;
        let g = s.end_capture().ctx("end_capture")?;
        let before = read_all::<B>(&s, &a)?;
        ensure!(
            before == base.bytes(),
            "a captured reduce ran before replay"
        );
        g.replay(&s).ctx("replay 1")?;
        g.replay(&s).ctx("replay 2")?;
        let got = read_all::<B>(&s, &a)?;
        let want = Vals::F32((0..16).map(|i| i as f32 + 3.0).collect());
        ensure!(got == want.bytes(), "two replays are not two reduces");
        captured = "captured reduce runs once per replay";
    }
    let mut msg = format!("{} kind/type pairs match the reference", done.len());
    if !refused.is_empty() {
        msg += &format!(
            " ({} refused as Unsupported: {})",
            refused.len(),
            refused.join(" ")
        );
    }
    pass(format!("{msg}; bad ranges refused; {captured}"))
}

fn slice(v: &Vals, at: usize, n: usize) -> Vals {
    match v {
        Vals::F32(x) => Vals::F32(x[at..at + n].to_vec()),
        Vals::I32(x) => Vals::I32(x[at..at + n].to_vec()),
        Vals::I16(x) => Vals::I16(x[at..at + n].to_vec()),
        Vals::I8(x) => Vals::I8(x[at..at + n].to_vec()),
        Vals::F16(x) => Vals::F16(x[at..at + n].to_vec()),
        Vals::BF16(x) => Vals::BF16(x[at..at + n].to_vec()),
        Vals::I64(x) => Vals::I64(x[at..at + n].to_vec()),
    }
}

/// `v` moved so that its element `from` lands at `to`, cut to `len` elements (zero-filled).
fn shift(v: &Vals, from: usize, to: usize, len: usize) -> Vals {
    fn mv<T: Copy + Default>(x: &[T], from: usize, to: usize, len: usize) -> Vec<T> {
        (0..len)
            .map(|i| {
                (i + from)
                    .checked_sub(to)
                    .and_then(|j| x.get(j).copied())
                    .unwrap_or_default()
            })
            .collect()
    }
    match v {
        Vals::F32(x) => Vals::F32(mv(x, from, to, len)),
        Vals::I32(x) => Vals::I32(mv(x, from, to, len)),
        Vals::I16(x) => Vals::I16(mv(x, from, to, len)),
        Vals::I8(x) => Vals::I8(mv(x, from, to, len)),
        Vals::F16(x) => Vals::F16(mv(x, from, to, len)),
        Vals::BF16(x) => Vals::BF16(mv(x, from, to, len)),
        Vals::I64(x) => Vals::I64(mv(x, from, to, len)),
    }
}

fn splice(v: &Vals, at: usize, mid: &Vals) -> Vals {
    fn sp<T: Copy>(x: &[T], at: usize, m: &[T]) -> Vec<T> {
        let mut out = x.to_vec();
        out[at..at + m.len()].copy_from_slice(m);
        out
    }
    match (v, mid) {
        (Vals::F32(x), Vals::F32(m)) => Vals::F32(sp(x, at, m)),
        (Vals::I32(x), Vals::I32(m)) => Vals::I32(sp(x, at, m)),
        (Vals::I16(x), Vals::I16(m)) => Vals::I16(sp(x, at, m)),
        (Vals::I8(x), Vals::I8(m)) => Vals::I8(sp(x, at, m)),
        (Vals::F16(x), Vals::F16(m)) => Vals::F16(sp(x, at, m)),
        (Vals::BF16(x), Vals::BF16(m)) => Vals::BF16(sp(x, at, m)),
        (Vals::I64(x), Vals::I64(m)) => Vals::I64(sp(x, at, m)),
        _ => unreachable!("one type per comparison"),
    }
}
