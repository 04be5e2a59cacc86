//! Every backend's flag translation against the portable rules and against the other
//! backends' tables, through `FlagTable::stream_to_native` / `event_to_native` (the code each
//! backend runs before calling its vendor; no device needed, so the CUDA and Ascend tables
//! are checked on any machine). The conformance check `flag_policy` then proves, on a real
//! device, that creation follows the table.

use xstream_conformance::{check_portable_kinds, kind_of, Kind};
use xstream_core::{Backend, Error, FlagTable, Translation, TranslationPolicy};

fn tables() -> [&'static FlagTable; 3] {
    [
        xstream_host::HostBackend::flag_table(),
        xstream_cuda::CudaBackend::flag_table(),
        xstream_ascend::AscendBackend::flag_table(),
    ]
}

#[test]
fn every_table_follows_the_portable_rules() {
    for t in tables() {
        t.check_total().unwrap();
        check_portable_kinds(t).unwrap();
    }
}

/// A flag alone, on every backend: where it is unsupported, strict refuses it by name and
/// best effort drops and reports it; elsewhere both policies keep it. Checked for every flag
/// that some other backend supports (native, inherent or emulated) and for every other.
#[test]
fn a_flag_supported_elsewhere_is_refused_or_reported_here() {
    let all = tables();
    let mut cross = 0;
    for t in all {
        for row in t.stream.rows {
            let name = row.flag.name();
            let elsewhere = all.iter().any(|o| {
                o.backend != t.backend
                    && o.stream.rows.iter().any(|r| {
                        r.flag == row.flag
                            && matches!(
                                kind_of(r.translation),
                                Kind::Native | Kind::Inherent | Kind::Emulated
                            )
                    })
            });
            let strict = t.stream_to_native(row.flag, TranslationPolicy::Strict);
            let best = t.stream_to_native(row.flag, TranslationPolicy::BestEffort);
            if let Translation::Unsupported(_) = row.translation {
                cross += usize::from(elsewhere);
                assert!(
                    matches!(&strict, Err(Error::UnsupportedFlag { flag, backend, .. }) if *flag == name && *backend == t.backend),
                    "{} strict {name}: {strict:?}",
                    t.backend
                );
                let b = best.unwrap_or_else(|e| panic!("{} best effort {name}: {e}", t.backend));
                assert!(
                    b.report.dropped.iter().any(|(f, _)| *f == name),
                    "{} best effort did not report {name} dropped",
                    t.backend
                );
                assert!(!b.effective.contains(row.flag), "{} kept {name}", t.backend);
            } else {
                for (policy, r) in [("strict", strict), ("best effort", best)] {
                    let r = r.unwrap_or_else(|e| panic!("{} {policy} {name}: {e}", t.backend));
                    assert!(
                        r.effective.contains(row.flag),
                        "{} {policy} lost {name}",
                        t.backend
                    );
                    assert!(r.report.dropped.is_empty(), "{} {policy} {name}", t.backend);
                }
            }
        }
        for row in t.event.rows {
            let name = row.flag.name();
            let strict = t.event_to_native(row.flag, TranslationPolicy::Strict);
            let best = t.event_to_native(row.flag, TranslationPolicy::BestEffort);
            if let Translation::Unsupported(_) = row.translation {
                cross += 1;
                assert!(
                    matches!(&strict, Err(Error::UnsupportedFlag { flag, .. }) if *flag == name),
                    "{} strict event {name}: {strict:?}",
                    t.backend
                );
                let b =
                    best.unwrap_or_else(|e| panic!("{} best effort event {name}: {e}", t.backend));
                assert!(b.report.dropped.iter().any(|(f, _)| *f == name));
                assert!(!b.effective.contains(row.flag));
            } else {
                assert!(
                    strict.unwrap().effective.contains(row.flag),
                    "{} event {name}",
                    t.backend
                );
                assert!(
                    best.unwrap().effective.contains(row.flag),
                    "{} event {name}",
                    t.backend
                );
            }
        }
    }
    assert!(
        cross > 0,
        "no flag is unsupported anywhere: the check checked nothing"
    );
}

/// Native bits read back: every native (non-inherent) row's bits decode to its flag, on
/// every backend.
#[test]
fn native_bits_decode_to_their_flag() {
    for t in tables() {
        for row in t.stream.rows {
            if let Translation::Native { set, .. } = row.translation {
                if set != 0 {
                    let (flags, unknown) = t.stream_from_native(set);
                    assert!(
                        flags.contains(row.flag),
                        "{} {}: {flags:?}",
                        t.backend,
                        row.flag.name()
                    );
                    assert_eq!(unknown, 0, "{} {}", t.backend, row.flag.name());
                }
            }
        }
    }
}
