//! Flag translation tables, the strict / best-effort policy and priority mapping.

use xstream_core::{
    Backend, Combination, Device, Error, Event, EventDesc, Priority, Stream, StreamAttr,
    StreamAttrValue, StreamDesc, StreamFlags, Translation, TranslationPolicy,
};

use crate::{nb, pass, CheckResult, Ctx, Env};

pub(crate) fn flag_table_total<B: Backend>(_env: &Env<B>) -> CheckResult {
    B::flag_table().check_total()?;
    pass(format!(
        "{} stream rows, {} event rows",
        B::flag_table().stream.rows.len(),
        B::flag_table().event.rows.len()
    ))
}

pub(crate) fn flag_policy<B: Backend>(env: &Env<B>) -> CheckResult {
    let t = B::flag_table();
    check_portable_kinds(t)?;
    let dev = &env.device;
    let mut tried = 0;
    for row in t.stream.rows {
        let name = row.flag.name();
        match row.translation {
            Translation::Unsupported(_) => {
                match dev.create_stream(&StreamDesc::new().flags(row.flag)) {
                    Err(Error::UnsupportedFlag { flag, .. }) => {
                        ensure!(flag == name, "strict error names {flag}, expected {name}")
                    }
                    other => {
                        return Err(format!(
                            "strict {name}: expected UnsupportedFlag, got {other:?}"
                        ))
                    }
                }
                let s = dev
                    .create_stream(
                        &StreamDesc::new()
                            .flags(row.flag)
                            .policy(TranslationPolicy::BestEffort),
                    )
                    .ctx("best-effort create")?;
                ensure!(
                    s.report().flags.dropped.iter().any(|(f, _)| *f == name),
                    "best effort did not report {name} as dropped: {:?}",
                    s.report().flags
                );
                ensure!(
                    !s.flags().contains(row.flag),
                    "dropped {name} still in flags()"
                );
            }
            Translation::Hint(_) | Translation::Emulated(_) | Translation::Native { .. } => {
                let s = dev
                    .create_stream(&StreamDesc::new().flags(row.flag))
                    .ctx(&format!("strict create with {name}"))?;
                ensure!(
                    s.flags().contains(row.flag),
                    "{name} missing from flags(): {:?}",
                    s.flags()
                );
                if let Translation::Hint(_) = row.translation {
                    ensure!(
                        s.report().flags.hints.iter().any(|(f, _)| *f == name),
                        "hint {name} not reported"
                    );
                }
                if let Translation::Emulated(_) = row.translation {
                    ensure!(
                        s.report().flags.emulated.iter().any(|(f, _)| *f == name),
                        "emulated {name} not reported"
                    );
                }
            }
        }
        tried += 1;
    }
    let mut rules = 0;
    for rule in t.stream.rules {
        if let Combination::Alone(f, _) = rule {
            let other = if *f == StreamFlags::FAST_LAUNCH {
                StreamFlags::FAST_SYNC
            } else {
                StreamFlags::FAST_LAUNCH
            };
            match dev.create_stream(&StreamDesc::new().flags(*f | other)) {
                Err(Error::RejectedCombination { .. }) => rules += 1,
                got => {
                    return Err(format!(
                        "strict {f:?} with another flag: expected RejectedCombination, got {got:?}"
                    ))
                }
            }
            // Best effort creates anyway, keeping the rule's flag and reporting the drop.
            let s = dev
                .create_stream(
                    &StreamDesc::new()
                        .flags(*f | other)
                        .policy(TranslationPolicy::BestEffort),
                )
                .ctx(&format!("best-effort {f:?} with another flag"))?;
            let name = other.name();
            ensure!(
                s.flags().contains(*f) && !s.flags().contains(other),
                "best effort kept the wrong flag: {:?}",
                s.flags()
            );
            ensure!(
                s.report().flags.dropped.iter().any(|(d, _)| *d == name),
                "best effort did not report {name} as dropped: {:?}",
                s.report().flags
            );
        }
    }
    for row in t.event.rows {
        if let Translation::Unsupported(_) = row.translation {
            match dev.create_event(&EventDesc::new().flags(row.flag)) {
                Err(Error::UnsupportedFlag { .. }) | Err(Error::RejectedCombination { .. }) => {}
                other => {
                    return Err(format!(
                        "event {}: expected UnsupportedFlag, got {other:?}",
                        row.flag.name()
                    ))
                }
            }
            // Best effort creates the event anyway and its report names the drop.
            let e = dev
                .create_event(
                    &EventDesc::new()
                        .flags(row.flag)
                        .policy(TranslationPolicy::BestEffort),
                )
                .ctx("best-effort event")?;
            ensure!(
                e.report()
                    .dropped
                    .iter()
                    .any(|(f, _)| *f == row.flag.name()),
                "best-effort event did not report {} as dropped: {:?}",
                row.flag.name(),
                e.report()
            );
        }
    }
    pass(format!(
        "{tried} stream flags created, {rules} combination rules enforced"
    ))
}

/// A kind of translation row, for [`portable_kinds`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Native bits.
    Native,
    /// Always the backend's behaviour (`Native { set: 0, clear: 0 }`).
    Inherent,
    /// Emulated by xstream.
    Emulated,
    /// Accepted with no effect.
    Hint,
    /// Refused under strict, dropped under best effort.
    Unsupported,
}

/// The kind of a translation row.
pub fn kind_of(t: Translation) -> Kind {
    match t {
        Translation::Native { set: 0, clear: 0 } => Kind::Inherent,
        Translation::Native { .. } => Kind::Native,
        Translation::Emulated(_) => Kind::Emulated,
        Translation::Hint(_) => Kind::Hint,
        Translation::Unsupported(_) => Kind::Unsupported,
    }
}

/// The portable rule for flag `name` (a stream flag when `stream`): the kinds any backend may
/// give it, and why. A flag whose behaviour a program can observe (ordering, timing, whether
/// work runs, sharing) must never be a hint: a backend that cannot provide it must refuse it
/// (strict) or report it dropped (best effort).
pub fn portable_kinds(stream: bool, name: &str) -> (&'static [Kind], &'static str) {
    use Kind::*;
    const ANY: &[Kind] = &[Native, Inherent, Emulated, Hint, Unsupported];
    const OBSERVABLE: &[Kind] = &[Native, Inherent, Emulated, Unsupported];
    match (stream, name) {
        (true, "NON_BLOCKING") => (
            &[Native, Inherent],
            "ordering against the default stream is core semantics on every backend",
        ),
        (true, "PERSISTENT") => (OBSERVABLE, "decides whether enqueued work runs"),
        (true, "CPU_SCHEDULE") | (true, "DEVICE_USE_ONLY") => {
            (OBSERVABLE, "decides who may use the stream")
        }
        (false, "DISABLE_TIMING") => (OBSERVABLE, "elapsed time must be refused"),
        (false, "INTERPROCESS") => (OBSERVABLE, "another process must be able to open the event"),
        (false, "DEVICE_USE_ONLY") => (OBSERVABLE, "decides who may use the event"),
        _ => (
            ANY,
            "a performance request: accepting it with no effect is harmless",
        ),
    }
}

/// Checks one backend's table against [`portable_kinds`].
///
/// # Errors
/// Names the rows that break a portable rule.
pub fn check_portable_kinds(t: &xstream_core::FlagTable) -> Result<(), String> {
    let mut bad = Vec::new();
    for row in t.stream.rows {
        let (ok, why) = portable_kinds(true, row.flag.name());
        let k = kind_of(row.translation);
        if !ok.contains(&k) {
            bad.push(format!("stream {} is {k:?} ({why})", row.flag.name()));
        }
    }
    for row in t.event.rows {
        let (ok, why) = portable_kinds(false, row.flag.name());
        let k = kind_of(row.translation);
        if !ok.contains(&k) {
            bad.push(format!("event {} is {k:?} ({why})", row.flag.name()));
        }
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("{} table: {}", t.backend, bad.join("; ")))
    }
}

pub(crate) fn priority_mapping<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let r = dev.info().priority_range;
    let hi = dev
        .create_stream(&nb().priority(Priority::Highest))
        .ctx("highest")?;
    let lo = dev
        .create_stream(&nb().priority(Priority::Lowest))
        .ctx("lowest")?;
    ensure!(
        hi.priority() == r.greatest,
        "Highest gave {} not {}",
        hi.priority(),
        r.greatest
    );
    ensure!(
        lo.priority() == r.least,
        "Lowest gave {} not {}",
        lo.priority(),
        r.least
    );
    // A value beyond the least-urgent end.
    let beyond = if r.least >= r.greatest {
        r.least + 100
    } else {
        r.least - 100
    };
    match dev.create_stream(&nb().priority(Priority::Native(beyond))) {
        Err(Error::InvalidArgument(_)) => {}
        other => {
            return Err(format!(
                "strict out-of-range priority: expected InvalidArgument, got {other:?}"
            ))
        }
    }
    let c = dev
        .create_stream(
            &nb()
                .priority(Priority::Native(beyond))
                .policy(TranslationPolicy::BestEffort),
        )
        .ctx("best-effort out-of-range priority")?;
    ensure!(
        c.priority() == r.least,
        "clamped to {} not {}",
        c.priority(),
        r.least
    );
    ensure!(
        c.report().priority.clamped_from == Some(beyond),
        "clamp not reported: {:?}",
        c.report().priority
    );
    // A class the range cannot tell from Normal says so in the creation report.
    let mut collapsed = Vec::new();
    for p in [
        Priority::Lowest,
        Priority::Low,
        Priority::Normal,
        Priority::High,
        Priority::Highest,
    ] {
        let s = dev.create_stream(&nb().priority(p)).ctx("class")?;
        let same = s.report().priority.native == r.default && p != Priority::Normal;
        ensure!(
            s.report().priority.collapsed_into == same.then_some(Priority::Normal),
            "{p:?} → native {}: collapse report {:?}",
            s.report().priority.native,
            s.report().priority.collapsed_into
        );
        if same {
            collapsed.push(format!("{p:?}"));
        }
    }
    pass(format!(
        "range least {} greatest {} default {}; {beyond} clamped to {}; equal to Normal: [{}]",
        r.least,
        r.greatest,
        r.default,
        c.priority(),
        collapsed.join(", ")
    ))
}

/// `set_attribute(Priority(v))` follows the creation rule's strict side on every backend: a value
/// outside the device's range is refused with `InvalidArgument` and leaves the stream's priority
/// as it was (the CUDA driver would clamp it silently; set_attribute has no report to tell a
/// clamp in). An in-range value is applied and read back, or refused as `Unsupported` where the
/// runtime cannot change a priority after creation.
pub(crate) fn priority_attribute<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let r = dev.info().priority_range;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let read = |s: &B::Stream| match s.attribute(StreamAttr::Priority) {
        Ok(StreamAttrValue::Priority(p)) => Ok(p),
        other => Err(format!("attribute(Priority): {other:?}")),
    };
    let before = read(&s)?;
    // One value beyond each end of the range.
    let (below, above) = if r.least >= r.greatest {
        (r.least + 100, r.greatest - 100)
    } else {
        (r.least - 100, r.greatest + 100)
    };
    for v in [below, above] {
        match s.set_attribute(StreamAttrValue::Priority(v)) {
            Err(Error::InvalidArgument(_)) => {}
            other => {
                return Err(format!(
                    "set_attribute(Priority({v})) outside [least {}, greatest {}]: expected \
                     InvalidArgument, got {other:?}",
                    r.least, r.greatest
                ))
            }
        }
        let now = read(&s)?;
        ensure!(
            now == before && s.priority() == before,
            "a refused priority {v} changed the stream: attribute {now}, priority() {}, was {before}",
            s.priority()
        );
    }
    // An in-range value other than the current one (where the range has one).
    let target = if before == r.greatest {
        r.least
    } else {
        r.greatest
    };
    let applied = match s.set_attribute(StreamAttrValue::Priority(target)) {
        Ok(()) => {
            let now = read(&s)?;
            ensure!(
                now == target && s.priority() == target,
                "set_attribute(Priority({target})) read back attribute {now}, priority() {}",
                s.priority()
            );
            format!("{target} applied and read back")
        }
        Err(e) if e.is_unsupported() && target != before => {
            format!("changing the priority is unsupported here ({target} refused as Unsupported)")
        }
        Err(e) => return Err(format!("set_attribute(Priority({target})) in range: {e}")),
    };
    pass(format!(
        "{below} and {above} refused with InvalidArgument, priority stays {before}; {applied}"
    ))
}
