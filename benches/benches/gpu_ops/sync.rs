//! The synchronize-latency section: launch-and-wait variants, wall time and the waiting thread's
//! CPU share.

use std::time::Instant;

use super::{fmt_cell, stat, thread_cpu_ns, Stat, REPS};

/// A named launch-and-wait iteration of the synchronize-latency section.
pub(crate) type SyncVariant<'a> = (&'static str, Box<dyn Fn() + 'a>);

pub(crate) struct SyncRow {
    pub(crate) name: &'static str,
    pub(crate) wall: Stat,
    pub(crate) cpu_pct: f64,
}

/// Per variant: a warm-up, then [`REPS`] interleaved repeats of 12 launch+wait iterations;
/// wall ns per iteration (median, p10, p90) and the waiting thread's CPU share (median).
pub(crate) fn sync_section(variants: &[SyncVariant<'_>]) -> Vec<SyncRow> {
    const N: u32 = 12;
    for (_, f) in variants {
        f();
    }
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    for rep in 0..REPS {
        for k in 0..variants.len() {
            let i = (k + rep) % variants.len();
            let (c0, t0) = (thread_cpu_ns(), Instant::now());
            for _ in 0..N {
                (variants[i].1)();
            }
            let w = t0.elapsed().as_nanos() as f64;
            let c = thread_cpu_ns().saturating_sub(c0) as f64;
            wall[i].push(w / f64::from(N));
            cpu[i].push(c / w * 100.0);
        }
    }
    variants
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
            let r = SyncRow {
                name,
                wall: stat(&wall[i]),
                cpu_pct: stat(&cpu[i]).med,
            };
            eprintln!(
                "  {:<58} wall {:>24}  cpu {:>3.0}%",
                r.name,
                fmt_cell(Some(r.wall)),
                r.cpu_pct
            );
            r
        })
        .collect()
}
