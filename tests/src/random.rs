//! Conformance check of the built-in random fill (`Kernel::Random`, `xstream_core::random`):
//! statistics with fixed seeds (deterministic on a backend, so never flaky), determinism,
//! the counter, bad input and capture. Bits are not compared across backends: only the
//! distribution is portable.

use xstream_core::{
    Backend, Capabilities, CaptureMode, Device, Distribution, Error, Graph, Kernel, RandomFill,
    RandomType, Stream,
};

use crate::{nb, pass, read_all, CheckResult, Ctx, Env};

/// Elements per statistical fill.
const N: usize = 4096;
/// Bytes before the filled range (its offset in the buffer), and after it.
const PAD: usize = 16;
/// The byte the untouched bytes keep.
const SENTINEL: u8 = 0xA5;

/// `x` within `tol` of `want`.
fn near(x: f64, want: f64, tol: f64) -> bool {
    (x - want).abs() < tol
}

/// `[lo, hi]` inside `[min, max]`.
fn inside(lo: f64, hi: f64, min: f64, max: f64) -> bool {
    lo >= min && hi <= max
}

fn stats(v: &[f64]) -> (f64, f64, f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (mean, var, lo, hi)
}

/// Fills `len` bytes at [`PAD`] of a buffer pre-set to [`SENTINEL`], reads the buffer back and
/// checks that the padding kept its bytes; returns the filled bytes.
fn filled<B: Backend>(
    dev: &B::Device,
    s: &B::Stream,
    fill: RandomFill,
    len: usize,
) -> Result<Vec<u8>, String> {
    let buf = dev.alloc(len + 2 * PAD).ctx("alloc")?;
    s.memset(&buf, 0, len + 2 * PAD, SENTINEL).ctx("memset")?;
    s.launch_builtin(Kernel::Random {
        buf: &buf,
        offset: PAD,
        len,
        fill,
    })
    .ctx("random fill")?;
    let all = read_all::<B>(s, &buf)?;
    ensure!(
        all[..PAD]
            .iter()
            .chain(&all[PAD + len..])
            .all(|b| *b == SENTINEL),
        "a {} fill wrote outside its range",
        fill.dist.name()
    );
    Ok(all[PAD..PAD + len].to_vec())
}

/// Every distribution over every element type: range, mean and variance within loose bounds
/// (and a mask's kept fraction); the same fill twice gives the same bytes, another offset or
/// seed other bytes; bad parameters and ranges are `InvalidArgument`; a zero length is a
/// no-op; a captured fill runs only on replay and writes what a direct one does.
pub(crate) fn random_fill<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let caps = dev.info().capabilities;
    let uniform = RandomFill::new(
        Distribution::Uniform {
            min: -1.0,
            max: 3.0,
        },
        RandomType::F32,
        0x5EED,
    );
    if !caps.contains(Capabilities::RANDOM) {
        let b = dev.alloc(16).ctx("alloc")?;
        return match s.launch_builtin(Kernel::Random {
            buf: &b,
            offset: 0,
            len: 16,
            fill: uniform,
        }) {
            Err(e) if e.is_unsupported() => Ok(crate::Outcome::Skip(
                "device lacks capability RANDOM (refused with Unsupported)".into(),
            )),
            other => Err(format!("random fill without RANDOM: {other:?}")),
        };
    }
    let dists = [
        Distribution::Uniform {
            min: -1.0,
            max: 3.0,
        },
        Distribution::Normal {
            mean: 2.0,
            std: 0.5,
        },
        Distribution::TruncatedNormal {
            mean: -1.0,
            std: 2.0,
        },
    ];
    let mut done = 0;
    for ty in RandomType::ALL {
        for (i, dist) in dists.into_iter().enumerate() {
            let f = RandomFill::new(dist, ty, 1000 + i as u64);
            let bytes = filled::<B>(dev, &s, f, N * ty.size())?;
            let v: Vec<f64> = bytes
                .chunks_exact(ty.size())
                .map(|e| ty.decode(e))
                .collect();
            let (mean, var, lo, hi) = stats(&v);
            let what = format!("{} {}", dist.name(), ty.name());
            ensure!(
                v.iter().all(|x| x.is_finite()),
                "{what}: a value is not finite"
            );
            // Loose bounds: with 4096 samples the standard error of the mean is below 2% of
            // the standard deviation; the bounds allow ten times more (and the half types'
            // rounding).
            match dist {
                Distribution::Uniform { min, max } => {
                    let (min, max) = (f64::from(min), f64::from(max));
                    ensure!(inside(lo, hi, min, max), "{what}: range {lo}..{hi}");
                    ensure!(near(mean, 1.0, 0.2), "{what}: mean {mean}");
                    ensure!(near(var, 16.0 / 12.0, 0.2), "{what}: variance {var}");
                    ensure!(near(hi - lo, 4.0, 0.5), "{what}: spread {lo}..{hi}");
                }
                Distribution::Normal { .. } => {
                    ensure!(near(mean, 2.0, 0.1), "{what}: mean {mean}");
                    ensure!(near(var, 0.25, 0.05), "{what}: variance {var}");
                }
                Distribution::TruncatedNormal { .. } => {
                    // Two standard deviations of 2 around -1, and the rounding of bf16.
                    ensure!(
                        inside(lo, hi, -5.05, 3.05),
                        "{what}: outside mean ± 2·std: {lo}..{hi}"
                    );
                    ensure!(near(mean, -1.0, 0.2), "{what}: mean {mean}");
                    // A normal truncated at two standard deviations keeps 0.774 of σ².
                    ensure!(near(var, 0.774 * 4.0, 0.4), "{what}: variance {var}");
                }
                Distribution::DropoutMask { .. } => {}
            }
            done += 1;
        }
        // A mask: 8 elements per byte, the ratio passed in `ty`.
        let f = RandomFill::new(Distribution::DropoutMask { drop_prob: 0.25 }, ty, 77);
        let m = filled::<B>(dev, &s, f, N / 8)?;
        let kept: u32 = m.iter().map(|b| b.count_ones()).sum();
        let frac = f64::from(kept) / N as f64;
        ensure!(
            near(frac, 0.75, 0.05),
            "dropout mask {}: kept fraction {frac} at drop_prob 0.25",
            ty.name()
        );
        done += 1;
    }

    // Determinism and the counter.
    let len = 256;
    let a = filled::<B>(dev, &s, uniform, len)?;
    ensure!(
        a == filled::<B>(dev, &s, uniform, len)?,
        "the same seed and offset gave different bytes"
    );
    ensure!(
        a != filled::<B>(dev, &s, uniform.at(uniform.next_offset(len)), len)?,
        "the next offset gave the same bytes"
    );
    ensure!(
        a != filled::<B>(dev, &s, RandomFill { seed: 1, ..uniform }, len)?,
        "another seed gave the same bytes"
    );

    // Bad input: nothing written.
    let buf = dev.alloc(64).ctx("alloc")?;
    s.memset(&buf, 0, 64, SENTINEL).ctx("memset")?;
    let with = |dist| RandomFill { dist, ..uniform };
    let bad: [(&str, RandomFill, usize, usize); 9] = [
        (
            "min > max",
            with(Distribution::Uniform { min: 2.0, max: 1.0 }),
            0,
            64,
        ),
        (
            "a NaN mean",
            with(Distribution::Normal {
                mean: f32::NAN,
                std: 1.0,
            }),
            0,
            64,
        ),
        (
            "a negative std",
            with(Distribution::TruncatedNormal {
                mean: 0.0,
                std: -1.0,
            }),
            0,
            64,
        ),
        (
            "drop_prob 1.5",
            with(Distribution::DropoutMask { drop_prob: 1.5 }),
            0,
            64,
        ),
        (
            "a max beyond f16",
            RandomFill {
                ty: RandomType::F16,
                ..with(Distribution::Uniform {
                    min: 0.0,
                    max: 1.0e6,
                })
            },
            0,
            64,
        ),
        ("a misaligned offset", uniform, 2, 8),
        ("a partial element", uniform, 0, 6),
        ("a range past the end", uniform, 48, 32),
        ("a zero length past the end", uniform, 68, 0),
    ];
    for (why, f, offset, len) in bad {
        match s.launch_builtin(Kernel::Random {
            buf: &buf,
            offset,
            len,
            fill: f,
        }) {
            Err(Error::InvalidArgument(_)) => {}
            other => return Err(format!("random fill with {why}: {other:?}")),
        }
    }
    s.launch_builtin(Kernel::Random {
        buf: &buf,
        offset: 8,
        len: 0,
        fill: uniform,
    })
    .ctx("a zero-length fill is a no-op")?;
    ensure!(
        read_all::<B>(&s, &buf)?.iter().all(|b| *b == SENTINEL),
        "a refused or zero-length fill wrote"
    );

    // Capture: runs only on replay, with the fill's own counter.
    let mut captured = "capture not available";
    if caps.contains(Capabilities::CAPTURE) {
        let f = uniform.at(5);
        let direct = filled::<B>(dev, &s, f, 64)?;
        let c = dev.alloc(64).ctx("alloc")?;
        s.memset(&c, 0, 64, SENTINEL).ctx("memset")?;
        s.synchronize().ctx("sync")?;
        s.begin_capture(CaptureMode::ThreadLocal)
            .ctx("begin_capture")?;
        s.launch_builtin(Kernel::Random {
            buf: &c,
            offset: 0,
            len: 64,
            fill: f,
        })
        .ctx("fill in capture")?;
        let g = s.end_capture().ctx("end_capture")?;
        ensure!(
            read_all::<B>(&s, &c)?.iter().all(|b| *b == SENTINEL),
            "a captured fill ran before replay"
        );
        g.replay(&s).ctx("replay")?;
        ensure!(
            read_all::<B>(&s, &c)? == direct,
            "the replayed fill differs from the direct one"
        );
        captured = "a captured fill runs on replay and matches a direct one";
    }
    pass(format!(
        "{done} distribution/type pairs within bounds; deterministic, offset- and \
         seed-dependent; bad input refused; {captured}"
    ))
}
