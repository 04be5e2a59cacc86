//! Flag translation tables, as data.
//!
//! Every backend publishes one [`FlagTable`]: for each portable flag, one [`Translation`], the
//! combination rules its vendor enforces, and the native bits a stream or event starts from.
//! The same data drives creation ([`FlagTable::stream_to_native`]), the reverse map
//! ([`FlagTable::stream_from_native`]), the `xstream flags` command and `docs/FLAGS.md`.

use bitflags::Flags;

use crate::{BackendKind, Error, EventFlags, Result, StreamFlags};

/// How one portable flag is realised on one backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Translation {
    /// A native flag: `set` bits are OR-ed in, `clear` bits are removed from the base bits.
    /// `Native { set: 0, clear: 0 }` means the behaviour is inherent to the backend (always
    /// on), so the flag costs nothing and is always reported back.
    Native {
        /// Native bits set by this flag.
        set: u32,
        /// Native bits removed from the base by this flag.
        clear: u32,
    },
    /// xstream provides the behaviour itself; the text says how.
    Emulated(&'static str),
    /// Accepted, has no effect on this backend; the text says why that is harmless.
    Hint(&'static str),
    /// The backend cannot provide the behaviour; the text says why.
    Unsupported(&'static str),
}

impl Translation {
    /// One word for tables: `native`, `inherent`, `emulated`, `hint`, `unsupported`.
    pub fn kind(&self) -> &'static str {
        match self {
            Translation::Native { set: 0, clear: 0 } => "inherent",
            Translation::Native { .. } => "native",
            Translation::Emulated(_) => "emulated",
            Translation::Hint(_) => "hint",
            Translation::Unsupported(_) => "unsupported",
        }
    }
}

/// One row of a table: a portable flag, its native name(s), and its translation.
#[derive(Debug, Clone, Copy)]
pub struct FlagRow<F: 'static> {
    /// The portable flag (exactly one bit).
    pub flag: F,
    /// The native constant(s) involved, for display (e.g. `"CU_STREAM_NON_BLOCKING"`).
    pub native_name: &'static str,
    /// How the backend realises it.
    pub translation: Translation,
}

impl<F> FlagRow<F> {
    /// A [`Translation::Native`] row: `set` bits OR-ed in, `clear` bits removed from the base.
    pub const fn native(flag: F, native_name: &'static str, set: u32, clear: u32) -> Self {
        let translation = Translation::Native { set, clear };
        Self {
            flag,
            native_name,
            translation,
        }
    }

    /// A [`Translation::Emulated`] row; `how` says how xstream provides the behaviour.
    pub const fn emulated(flag: F, native_name: &'static str, how: &'static str) -> Self {
        let translation = Translation::Emulated(how);
        Self {
            flag,
            native_name,
            translation,
        }
    }

    /// A [`Translation::Hint`] row; `why` says why having no effect is harmless.
    pub const fn hint(flag: F, native_name: &'static str, why: &'static str) -> Self {
        let translation = Translation::Hint(why);
        Self {
            flag,
            native_name,
            translation,
        }
    }

    /// A [`Translation::Unsupported`] row; `why` says why the backend cannot.
    pub const fn unsupported(flag: F, native_name: &'static str, why: &'static str) -> Self {
        let translation = Translation::Unsupported(why);
        Self {
            flag,
            native_name,
            translation,
        }
    }
}

/// A combination rule a vendor enforces at creation, checked on the **native bits** a request
/// produces, never on the portable set: a flag with no native bit (an inherent flag, a hint, an
/// emulated flag, or one that only clears base bits the rule's flag clears anyway) never breaks
/// a rule.
///
/// Under [`TranslationPolicy::Strict`] a broken rule is [`Error::RejectedCombination`]. Under
/// [`TranslationPolicy::BestEffort`] the object is created anyway: the rule's own flag is kept
/// (it selects the kind of object) and each flag that breaks the rule is dropped and listed in
/// [`FlagReport::dropped`] with the rule's reason.
#[derive(Debug, Clone, Copy)]
pub enum Combination<F: 'static> {
    /// The flag's native bits must be the only native bits of the request.
    Alone(F, &'static str),
    /// These flags may not all be set together (best effort keeps the first in table order).
    NotTogether(F, &'static str),
}

/// The flag rows and rules for one kind of object (streams or events) on one backend.
#[derive(Debug, Clone, Copy)]
pub struct FlagSet<F: 'static> {
    /// Native bits every object starts from (e.g. ACL events: `SYNC | TIME_LINE`).
    pub base: u32,
    /// One row per portable flag; [`FlagTable::check_total`] proves it.
    pub rows: &'static [FlagRow<F>],
    /// Rules checked (on the native bits) before the vendor is called.
    pub rules: &'static [Combination<F>],
}

/// A backend's whole translation table.
#[derive(Debug, Clone, Copy)]
pub struct FlagTable {
    /// The backend it describes.
    pub backend: BackendKind,
    /// Stream flags.
    pub stream: FlagSet<StreamFlags>,
    /// Event flags.
    pub event: FlagSet<EventFlags>,
}

/// What to do with a flag the backend cannot honour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TranslationPolicy {
    /// Refuse creation with [`Error::UnsupportedFlag`] naming the flag and backend.
    #[default]
    Strict,
    /// Create anyway; the [`FlagReport`] lists what was emulated, hinted or dropped.
    BestEffort,
}

/// What happened to each requested flag during translation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlagReport {
    /// Flags realised by native bits (including inherent ones).
    pub native: Vec<&'static str>,
    /// Flags realised by xstream, with how.
    pub emulated: Vec<(&'static str, &'static str)>,
    /// Flags accepted with no effect, with why.
    pub hints: Vec<(&'static str, &'static str)>,
    /// Flags dropped under [`TranslationPolicy::BestEffort`], with why. Always empty under
    /// [`TranslationPolicy::Strict`].
    pub dropped: Vec<(&'static str, &'static str)>,
}

impl FlagReport {
    /// True when every flag was honoured natively.
    pub fn is_exact(&self) -> bool {
        self.emulated.is_empty() && self.hints.is_empty() && self.dropped.is_empty()
    }
}

/// The result of translating portable flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translated<F> {
    /// The native bits to pass to the vendor.
    pub native: u32,
    /// The portable flags the object will actually have (requested minus dropped, plus
    /// inherent flags).
    pub effective: F,
    /// The flags that need xstream's emulation.
    pub emulated: F,
    /// What happened to each flag.
    pub report: FlagReport,
}

impl<F> FlagSet<F>
where
    F: Flags<Bits = u32> + Copy + PartialEq + std::fmt::Debug + 'static,
{
    /// The row of one portable flag.
    pub fn row(&self, flag: F) -> Option<&FlagRow<F>> {
        self.rows.iter().find(|r| r.flag == flag)
    }

    fn translate(
        &self,
        backend: BackendKind,
        flags: F,
        policy: TranslationPolicy,
    ) -> Result<Translated<F>> {
        let unknown = flags.bits() & !F::all().bits();
        if unknown != 0 {
            return Err(Error::invalid(format!("unknown flag bits {unknown:#x}")));
        }
        let mut dropped = Vec::new();
        let flags = self.apply_rules(backend, flags, policy, &mut dropped)?;
        let mut native = self.base;
        let mut effective = F::empty();
        let mut emulated = F::empty();
        let mut report = FlagReport {
            dropped,
            ..FlagReport::default()
        };
        for row in self.rows {
            let name = flag_name(row.flag);
            let requested = flags.contains(row.flag);
            match row.translation {
                Translation::Native { set: 0, clear: 0 } => {
                    // Inherent: the backend always behaves this way.
                    effective = effective.union(row.flag);
                    if requested {
                        report.native.push(name);
                    }
                }
                Translation::Native { set, clear } if requested => {
                    native = (native | set) & !clear;
                    effective = effective.union(row.flag);
                    report.native.push(name);
                }
                Translation::Emulated(how) if requested => {
                    effective = effective.union(row.flag);
                    emulated = emulated.union(row.flag);
                    report.emulated.push((name, how));
                }
                Translation::Hint(why) if requested => {
                    effective = effective.union(row.flag);
                    report.hints.push((name, why));
                }
                Translation::Unsupported(why) if requested => match policy {
                    TranslationPolicy::Strict => {
                        return Err(Error::UnsupportedFlag {
                            backend,
                            flag: name,
                            reason: why,
                        })
                    }
                    TranslationPolicy::BestEffort => report.dropped.push((name, why)),
                },
                _ => {}
            }
        }
        Ok(Translated {
            native,
            effective,
            emulated,
            report,
        })
    }

    /// The native bits `flags` would produce (base bits, then each native row in order).
    fn native_of(&self, flags: F) -> u32 {
        self.rows
            .iter()
            .filter(|r| flags.contains(r.flag))
            .fold(self.base, |n, r| match r.translation {
                Translation::Native { set, clear } => (n | set) & !clear,
                _ => n,
            })
    }

    /// Checks the combination rules on the **native bits** the request produces (a flag with no
    /// native bit, such as an inherent flag or a hint, never breaks a rule). Strict refuses a
    /// broken rule; best effort keeps the rule's flag and drops the flags that break it, each
    /// reported in `dropped` with the rule's reason.
    fn apply_rules(
        &self,
        backend: BackendKind,
        mut flags: F,
        policy: TranslationPolicy,
        dropped: &mut Vec<(&'static str, &'static str)>,
    ) -> Result<F> {
        for rule in self.rules {
            let (keep, breakers, reason) = match *rule {
                Combination::Alone(f, why) => {
                    if !flags.contains(f) || self.native_of(flags) == self.native_of(f) {
                        continue;
                    }
                    // Every other flag that changes the native bits breaks the rule.
                    let breakers: Vec<F> = self
                        .rows
                        .iter()
                        .filter(|r| r.flag != f && flags.contains(r.flag))
                        .filter(|r| self.native_of(f.union(r.flag)) != self.native_of(f))
                        .map(|r| r.flag)
                        .collect();
                    (f, breakers, why)
                }
                Combination::NotTogether(set, why) => {
                    if !flags.contains(set) {
                        continue;
                    }
                    // Keep the first flag of the set (table order), drop the rest.
                    let members: Vec<F> = self
                        .rows
                        .iter()
                        .filter(|r| set.contains(r.flag))
                        .map(|r| r.flag)
                        .collect();
                    let keep = members.first().copied().unwrap_or(set);
                    (keep, members.into_iter().skip(1).collect(), why)
                }
            };
            match policy {
                TranslationPolicy::Strict => {
                    return Err(Error::RejectedCombination {
                        backend,
                        flags: format!("{flags:?}"),
                        reason,
                    })
                }
                TranslationPolicy::BestEffort => {
                    for b in breakers {
                        if b != keep && flags.contains(b) {
                            flags = flags.difference(b);
                            dropped.push((flag_name(b), reason));
                        }
                    }
                }
            }
        }
        Ok(flags)
    }

    fn decode_native(&self, native: u32) -> (F, u32) {
        let mut out = F::empty();
        let mut known = self.base;
        for row in self.rows {
            if let Translation::Native { set, clear } = row.translation {
                known |= set | clear;
                let present = native & set == set && native & clear == 0;
                if present {
                    out = out.union(row.flag);
                }
            }
        }
        (out, native & !known)
    }

    fn missing_rows(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        for f in F::FLAGS {
            let n = self.rows.iter().filter(|r| r.flag == *f.value()).count();
            if n != 1 {
                missing.push(f.name());
            }
        }
        missing
    }
}

fn flag_name<F: Flags + Copy + PartialEq>(f: F) -> &'static str {
    F::FLAGS
        .iter()
        .find(|x| *x.value() == f)
        .map(|x| x.name())
        .unwrap_or("<combination>")
}

impl FlagTable {
    /// Translates portable stream flags to native bits under `policy`.
    ///
    /// # Errors
    /// [`Error::RejectedCombination`] for a combination the vendor refuses,
    /// [`Error::UnsupportedFlag`] for an unsupported flag under
    /// [`TranslationPolicy::Strict`], [`Error::InvalidArgument`] for unknown bits.
    pub fn stream_to_native(
        &self,
        flags: StreamFlags,
        policy: TranslationPolicy,
    ) -> Result<Translated<StreamFlags>> {
        self.stream.translate(self.backend, flags, policy)
    }

    /// Translates portable event flags to native bits under `policy`.
    ///
    /// # Errors
    /// As [`FlagTable::stream_to_native`].
    pub fn event_to_native(
        &self,
        flags: EventFlags,
        policy: TranslationPolicy,
    ) -> Result<Translated<EventFlags>> {
        self.event.translate(self.backend, flags, policy)
    }

    /// Maps native stream bits back to portable flags; returns the bits it did not know.
    pub fn stream_from_native(&self, native: u32) -> (StreamFlags, u32) {
        self.stream.decode_native(native)
    }

    /// Maps native event bits back to portable flags; returns the bits it did not know.
    pub fn event_from_native(&self, native: u32) -> (EventFlags, u32) {
        self.event.decode_native(native)
    }

    /// Checks that every portable flag has exactly one row.
    ///
    /// # Errors
    /// Names the flags without exactly one row.
    pub fn check_total(&self) -> std::result::Result<(), String> {
        let mut missing = self.stream.missing_rows();
        missing.extend(self.event.missing_rows());
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} table lacks a single row for: {}",
                self.backend,
                missing.join(", ")
            ))
        }
    }

    /// Renders the table as Markdown (used by `xstream flags` and `docs/FLAGS.md`).
    pub fn to_markdown(&self) -> String {
        let mut s = format!("### {} backend\n\n", self.backend);
        s.push_str(&format!(
            "Stream base bits: `{:#x}`; event base bits: `{:#x}`.\n\n",
            self.stream.base, self.event.base
        ));
        s.push_str("| object | portable flag | kind | native | note |\n|---|---|---|---|---|\n");
        fn rows<F: Flags + Copy + PartialEq>(s: &mut String, what: &str, rows: &[FlagRow<F>]) {
            for r in rows {
                let native = r.native_name.replace('|', "\\|");
                let (native, note) = match r.translation {
                    Translation::Native { set: 0, clear: 0 } => (
                        native,
                        "inherent: every object of this backend behaves this way",
                    ),
                    Translation::Native { set, clear: 0 } => (format!("{native} (`{set:#x}`)"), ""),
                    Translation::Native { set, clear } => {
                        (format!("{native} (set `{set:#x}`, clear `{clear:#x}`)"), "")
                    }
                    Translation::Emulated(t)
                    | Translation::Hint(t)
                    | Translation::Unsupported(t) => (native, t),
                };
                s.push_str(&format!(
                    "| {what} | `{}` | {} | {} | {} |\n",
                    flag_name(r.flag),
                    r.translation.kind(),
                    native,
                    note.replace('|', "\\|")
                ));
            }
        }
        rows(&mut s, "stream", self.stream.rows);
        rows(&mut s, "event", self.event.rows);
        let rules: Vec<String> = self
            .stream
            .rules
            .iter()
            .map(|r| match r {
                Combination::Alone(f, why) => format!("stream `{f:?}` must be the only native bit (flags without a native bit may accompany it; best effort drops the others): {why}"),
                Combination::NotTogether(f, why) => format!("stream `{f:?}` not together (best effort keeps the first): {why}"),
            })
            .chain(self.event.rules.iter().map(|r| match r {
                Combination::Alone(f, why) => format!("event `{f:?}` must be the only native bit (flags without a native bit may accompany it; best effort drops the others): {why}"),
                Combination::NotTogether(f, why) => format!("event `{f:?}` not together (best effort keeps the first): {why}"),
            }))
            .collect();
        if !rules.is_empty() {
            s.push_str("\nRejected combinations:\n\n");
            for r in rules {
                s.push_str(&format!("- {r}\n"));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static ROWS: &[FlagRow<StreamFlags>] = &[
        FlagRow::native(StreamFlags::NON_BLOCKING, "NB", 1, 0),
        FlagRow::hint(StreamFlags::FAST_LAUNCH, "-", "no effect"),
        FlagRow::emulated(StreamFlags::FAST_SYNC, "-", "spin"),
        FlagRow::unsupported(StreamFlags::PERSISTENT, "-", "no"),
        FlagRow::native(StreamFlags::HUGE, "-", 0, 0),
        FlagRow::native(StreamFlags::CPU_SCHEDULE, "-", 0x10, 0),
        FlagRow::native(StreamFlags::DEVICE_USE_ONLY, "-", 0x20, 0),
    ];
    static EROWS: &[FlagRow<EventFlags>] = &[];
    const T: FlagTable = FlagTable {
        backend: BackendKind::Host,
        stream: FlagSet {
            base: 0,
            rows: ROWS,
            rules: &[Combination::Alone(StreamFlags::DEVICE_USE_ONLY, "alone")],
        },
        event: FlagSet {
            base: 0,
            rows: EROWS,
            rules: &[],
        },
    };

    #[test]
    fn strict_rejects_unsupported_and_names_it() {
        let e = T
            .stream_to_native(StreamFlags::PERSISTENT, TranslationPolicy::Strict)
            .unwrap_err();
        match e {
            Error::UnsupportedFlag { flag, .. } => assert_eq!(flag, "PERSISTENT"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn best_effort_reports_everything() {
        let t = T
            .stream_to_native(
                StreamFlags::all() - StreamFlags::DEVICE_USE_ONLY,
                TranslationPolicy::BestEffort,
            )
            .unwrap();
        assert_eq!(t.native, 0x11);
        assert_eq!(t.report.dropped, vec![("PERSISTENT", "no")]);
        assert_eq!(t.report.hints, vec![("FAST_LAUNCH", "no effect")]);
        assert_eq!(t.report.emulated, vec![("FAST_SYNC", "spin")]);
        assert_eq!(t.emulated, StreamFlags::FAST_SYNC);
        assert!(!t.effective.contains(StreamFlags::PERSISTENT));
        assert!(t.effective.contains(StreamFlags::HUGE));
        assert!(!t.report.is_exact());
    }

    #[test]
    fn combination_rule_and_unknown_bits() {
        // NON_BLOCKING sets a native bit here: strict refuses, best effort drops it.
        assert!(matches!(
            T.stream_to_native(
                StreamFlags::DEVICE_USE_ONLY | StreamFlags::NON_BLOCKING,
                TranslationPolicy::Strict
            ),
            Err(Error::RejectedCombination { .. })
        ));
        let t = T
            .stream_to_native(
                StreamFlags::DEVICE_USE_ONLY | StreamFlags::NON_BLOCKING,
                TranslationPolicy::BestEffort,
            )
            .unwrap();
        assert_eq!(t.native, 0x20);
        assert_eq!(t.report.dropped, vec![("NON_BLOCKING", "alone")]);
        assert!(!t.effective.contains(StreamFlags::NON_BLOCKING));
        assert!(t.effective.contains(StreamFlags::DEVICE_USE_ONLY));
        // The rule is about native bits: a hint, an emulated flag and an inherent flag carry
        // none, so they may accompany the lone flag even under strict.
        let t = T
            .stream_to_native(
                StreamFlags::DEVICE_USE_ONLY
                    | StreamFlags::FAST_LAUNCH
                    | StreamFlags::FAST_SYNC
                    | StreamFlags::HUGE,
                TranslationPolicy::Strict,
            )
            .unwrap();
        assert_eq!(t.native, 0x20);
        assert!(t.report.dropped.is_empty());
        assert!(T
            .stream_to_native(StreamFlags::DEVICE_USE_ONLY, TranslationPolicy::Strict)
            .is_ok());
        assert!(matches!(
            T.stream_to_native(
                StreamFlags::from_bits_retain(1 << 20),
                TranslationPolicy::Strict
            ),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn reverse_map_and_totality() {
        let (f, unknown) = T.stream_from_native(0x1 | 0x20 | 0x100);
        assert_eq!(
            f,
            StreamFlags::NON_BLOCKING | StreamFlags::DEVICE_USE_ONLY | StreamFlags::HUGE
        );
        assert_eq!(unknown, 0x100);
        assert!(T.check_total().unwrap_err().contains("BLOCKING_SYNC"));
        assert!(T.to_markdown().contains("`FAST_SYNC` | emulated"));
    }
}
