//! Statistics of the repeats and the rows of the table: median / p10 / p90, targets, verdicts and
//! cell formatting.

/// Median, p10 and p90 of per-operation nanoseconds over the repeats.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stat {
    pub(crate) med: f64,
    pub(crate) p10: f64,
    pub(crate) p90: f64,
}

pub(crate) fn stat(v: &[f64]) -> Stat {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
    Stat {
        med: at(0.5),
        p10: at(0.1),
        p90: at(0.9),
    }
}

/// What a row is checked against (the project's performance targets, `docs/performance.md`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target {
    /// Informational only.
    Info,
    /// xstream − raw ≤ this many ns.
    OverheadNs(f64),
    /// xstream − raw ≤ this percentage of raw.
    OverheadPct(f64),
    /// xstream ≤ this many ns, absolute.
    AbsNs(f64),
    /// xstream's rate (operations, or bytes, per second) ≥ this percentage of raw's: raw
    /// ns / xstream ns × 100 ≥ p (for the same bytes per operation).
    RatePct(f64),
    /// No slower than cudarc's safe API (the row's third column; issue 29's target for event
    /// creation, where cudarc's own wrapper is above raw): only the cudarc check below.
    NotSlowerThanSafe,
}

impl Target {
    pub(crate) fn label(self) -> String {
        match self {
            Target::Info => "info".into(),
            Target::OverheadNs(n) => format!("≤ +{n:.0} ns vs raw"),
            Target::OverheadPct(p) => format!("≤ +{p:.0}% vs raw"),
            Target::AbsNs(n) => format!("≤ {}", fmt_ns(n)),
            Target::RatePct(p) => format!("≥ {p:.0}% of raw rate"),
            Target::NotSlowerThanSafe => "≤ cudarc safe".into(),
        }
    }
}

pub(crate) struct Row {
    pub(crate) op: String,
    pub(crate) iters: u64,
    /// Interleaved repeats the cells are the median of (`REPS` unless the row asked for more).
    pub(crate) reps: usize,
    pub(crate) x: Option<Stat>,
    pub(crate) raw: Option<Stat>,
    pub(crate) safe: Option<Stat>,
    pub(crate) target: Target,
}

impl Row {
    pub(crate) fn overhead(&self) -> Option<(f64, f64)> {
        let (x, r) = (self.x?, self.raw?);
        Some((x.med - r.med, (x.med - r.med) / r.med * 100.0))
    }

    /// `PASS` / `FAIL` / `-`, against the target and (where cudarc has the op) "no slower than
    /// cudarc's safe API" (medians, 3% tolerance for noise).
    pub(crate) fn verdict(&self) -> String {
        let Some(x) = self.x else {
            // A row with a target whose xstream side did not run (it failed its first call)
            // is a miss; informational raw-only rows have no verdict.
            return match self.target {
                Target::Info => "-".into(),
                _ => "FAIL (xstream did not run)".into(),
            };
        };
        let mut fails = Vec::new();
        let checked = match self.target {
            Target::Info | Target::NotSlowerThanSafe => false,
            Target::OverheadNs(n) => {
                if let Some((d, _)) = self.overhead() {
                    if d > n {
                        fails.push("overhead");
                    }
                }
                true
            }
            Target::OverheadPct(p) => {
                if let Some((_, pct)) = self.overhead() {
                    if pct > p {
                        fails.push("overhead");
                    }
                }
                true
            }
            Target::AbsNs(n) => {
                if x.med > n {
                    fails.push("absolute");
                }
                true
            }
            Target::RatePct(p) => {
                match self.raw {
                    Some(r) if r.med / x.med * 100.0 >= p => {}
                    Some(_) => fails.push("rate"),
                    None => fails.push("no raw"),
                }
                true
            }
        };
        let checked = checked || matches!(self.target, Target::NotSlowerThanSafe);
        if matches!(self.target, Target::NotSlowerThanSafe) && self.safe.is_none() {
            fails.push("no cudarc row");
        }
        let mut vs_safe = false;
        if let Some(s) = self.safe {
            vs_safe = true;
            if x.med > s.med * 1.03 {
                fails.push("slower than cudarc");
            }
        }
        if !checked && !vs_safe {
            "-".into()
        } else if fails.is_empty() {
            "PASS".into()
        } else {
            format!("FAIL ({})", fails.join(", "))
        }
    }
}

pub(crate) fn fmt_ns(v: f64) -> String {
    if v.abs() < 10_000.0 {
        format!("{v:.0} ns")
    } else if v.abs() < 10_000_000.0 {
        format!("{:.1} µs", v / 1e3)
    } else {
        format!("{:.2} ms", v / 1e6)
    }
}

pub(crate) fn fmt_cell(s: Option<Stat>) -> String {
    let Some(s) = s else {
        return "n/a".into();
    };
    let (div, unit) = if s.med < 10_000.0 {
        (1.0, "ns")
    } else if s.med < 10_000_000.0 {
        (1e3, "µs")
    } else {
        (1e6, "ms")
    };
    let prec = usize::from(div > 1.0);
    format!(
        "{:.p$} {unit} ({:.p$}–{:.p$})",
        s.med / div,
        s.p10 / div,
        s.p90 / div,
        p = prec
    )
}
