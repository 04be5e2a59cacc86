//! Flag translations of stream and event creation, remembered per request.
//!
//! [`CUDA_FLAGS`] translates a request by walking its rows and building a [`FlagReport`] (a
//! list of names: a heap allocation for any flag that has a native bit). Creation needs only
//! the native bits and the flags the object gets; the report is read by few callers. So the
//! result of each accepted request (flag bits × policy: 128 × 2 for streams, 32 × 2 for
//! events) is remembered in an atomic word after its first translation, and the report is
//! made again from the same request when it is first asked for ([`LazyReport`]): the
//! translation is a pure function of the static table, so the second run gives the same
//! report. A refused request is never remembered (it is translated again, error and all).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use xstream_core::{
    CreationReport, EventFlags, FlagReport, PriorityOutcome, Result, StreamFlags, TranslationPolicy,
};

use crate::conv::CUDA_FLAGS;

/// Set in a remembered word; a zero word was never filled.
const VALID: u64 = 1 << 63;

/// One word per (flag bits, policy): `VALID | emulated << 40 | flags << 32 | native`.
struct Memo<const N: usize>([AtomicU64; N]);

impl<const N: usize> Memo<N> {
    const fn new() -> Self {
        Self([const { AtomicU64::new(0) }; N])
    }

    /// The remembered (native, flags, emulated) of `idx`, or the value `slow` computes, which
    /// is remembered when it succeeds.
    fn get(
        &self,
        idx: usize,
        slow: impl FnOnce() -> Result<(u32, u8, u8)>,
    ) -> Result<(u32, u8, u8)> {
        let w = self.0[idx].load(Ordering::Relaxed);
        if w & VALID != 0 {
            return Ok((w as u32, (w >> 32) as u8, (w >> 40) as u8));
        }
        let v = slow()?;
        let w = VALID | u64::from(v.2) << 40 | u64::from(v.1) << 32 | u64::from(v.0);
        self.0[idx].store(w, Ordering::Relaxed);
        Ok(v)
    }
}

fn policy_bit(p: TranslationPolicy) -> usize {
    match p {
        TranslationPolicy::Strict => 0,
        TranslationPolicy::BestEffort => 1,
    }
}

/// Portable stream flags fit in the memo's 8 bits (checked at compile time).
const _: () = assert!(StreamFlags::all().bits() <= 0xff && EventFlags::all().bits() <= 0xff);

static STREAMS: Memo<512> = Memo::new();
static EVENTS: Memo<512> = Memo::new();

/// What a stream creation needs of its flags: native bits, effective and emulated flags.
pub(crate) struct StreamBits {
    pub native: u32,
    pub effective: StreamFlags,
    pub emulated: StreamFlags,
}

/// `CUDA_FLAGS.stream_to_native` without its report (remembered per request).
pub(crate) fn stream_bits(flags: StreamFlags, policy: TranslationPolicy) -> Result<StreamBits> {
    let slow = || {
        let t = CUDA_FLAGS.stream_to_native(flags, policy)?;
        Ok((t.native, t.effective.bits() as u8, t.emulated.bits() as u8))
    };
    // Unknown bits (past 8) go the slow way, which refuses them.
    let (native, eff, emu) = match usize::try_from(flags.bits()) {
        Ok(b) if b <= 0xff => STREAMS.get(b << 1 | policy_bit(policy), slow)?,
        _ => slow()?,
    };
    Ok(StreamBits {
        native,
        effective: StreamFlags::from_bits_retain(eff.into()),
        emulated: StreamFlags::from_bits_retain(emu.into()),
    })
}

/// An event creation's native bits and the flags the event reports: the native bits read
/// back, plus the requested hints (`EXTERNAL`), as `CudaEvent::create` computes them.
pub(crate) fn event_bits(
    flags: EventFlags,
    policy: TranslationPolicy,
) -> Result<(u32, EventFlags)> {
    let slow = || {
        let t = CUDA_FLAGS.event_to_native(flags, policy)?;
        let (native, _) = CUDA_FLAGS.event_from_native(t.native);
        // Hints (EXTERNAL) stay in the effective flags; native bits are read from what was
        // passed (INTERPROCESS implies DISABLE_TIMING).
        let hints = t.effective.difference(
            EventFlags::BLOCKING_SYNC | EventFlags::DISABLE_TIMING | EventFlags::INTERPROCESS,
        );
        Ok((t.native, (native | hints).bits() as u8, 0))
    };
    let (native, f, _) = match usize::try_from(flags.bits()) {
        Ok(b) if b <= 0xff => EVENTS.get(b << 1 | policy_bit(policy), slow)?,
        _ => slow()?,
    };
    Ok((native, EventFlags::from_bits_retain(f.into())))
}

/// A flag report made on first request from the request that created the object (or given
/// at once).
pub(crate) struct LazyReport {
    request: Option<(EventFlags, TranslationPolicy)>,
    /// Boxed: the event stays small (the report is made, and allocated, only when read).
    report: OnceLock<Box<FlagReport>>,
}

impl LazyReport {
    /// A report known now.
    pub(crate) fn ready(r: FlagReport) -> Self {
        Self {
            request: None,
            report: OnceLock::from(Box::new(r)),
        }
    }

    /// The report of an accepted event request, made when first read.
    pub(crate) fn event(flags: EventFlags, policy: TranslationPolicy) -> Self {
        Self {
            request: Some((flags, policy)),
            report: OnceLock::new(),
        }
    }

    /// The report.
    pub(crate) fn get(&self) -> &FlagReport {
        self.report.get_or_init(|| {
            Box::new(match self.request {
                Some((f, p)) => CUDA_FLAGS
                    .event_to_native(f, p)
                    .map(|t| t.report)
                    .unwrap_or_default(),
                None => FlagReport::default(),
            })
        })
    }
}

/// A stream's [`CreationReport`], its flag part made on first request.
pub(crate) struct LazyCreationReport {
    request: Option<(StreamFlags, TranslationPolicy)>,
    priority: PriorityOutcome,
    /// Boxed: the stream stays small (the report is made, and allocated, only when read).
    report: OnceLock<Box<CreationReport>>,
}

impl LazyCreationReport {
    /// A report known now.
    pub(crate) fn ready(r: CreationReport) -> Self {
        Self {
            request: None,
            priority: r.priority,
            report: OnceLock::from(Box::new(r)),
        }
    }

    /// The report of an accepted stream request, its flag part made when first read.
    pub(crate) fn stream(
        flags: StreamFlags,
        policy: TranslationPolicy,
        priority: PriorityOutcome,
    ) -> Self {
        Self {
            request: Some((flags, policy)),
            priority,
            report: OnceLock::new(),
        }
    }

    /// The priority outcome (never deferred).
    pub(crate) fn priority(&self) -> &PriorityOutcome {
        &self.priority
    }

    /// The report.
    pub(crate) fn get(&self) -> &CreationReport {
        self.report.get_or_init(|| {
            Box::new(CreationReport {
                flags: match self.request {
                    Some((f, p)) => CUDA_FLAGS
                        .stream_to_native(f, p)
                        .map(|t| t.report)
                        .unwrap_or_default(),
                    None => FlagReport::default(),
                },
                priority: self.priority,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every request, remembered or not, gives what the table gives: the same bits, the same
    /// refusals, and the same report made later.
    #[test]
    fn remembered_translations_match_the_table() {
        for policy in [TranslationPolicy::Strict, TranslationPolicy::BestEffort] {
            for bits in 0..=0xffu32 {
                let f = StreamFlags::from_bits_retain(bits);
                for _ in 0..2 {
                    match (
                        CUDA_FLAGS.stream_to_native(f, policy),
                        stream_bits(f, policy),
                    ) {
                        (Ok(t), Ok(b)) => {
                            assert_eq!(
                                (t.native, t.effective, t.emulated),
                                (b.native, b.effective, b.emulated)
                            );
                            let prio = PriorityOutcome {
                                requested: xstream_core::Priority::Normal,
                                native: 0,
                                clamped_from: None,
                                collapsed_into: None,
                            };
                            let lazy = LazyCreationReport::stream(f, policy, prio);
                            assert_eq!(lazy.get().flags, t.report);
                        }
                        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                        (a, b) => panic!(
                            "{f:?} {policy:?}: table {:?} memo {:?}",
                            a.is_ok(),
                            b.is_ok()
                        ),
                    }
                }
            }
            for bits in 0..=0xffu32 {
                let f = EventFlags::from_bits_retain(bits);
                for _ in 0..2 {
                    match (CUDA_FLAGS.event_to_native(f, policy), event_bits(f, policy)) {
                        (Ok(t), Ok((native, flags))) => {
                            assert_eq!(t.native, native);
                            let (back, _) = CUDA_FLAGS.event_from_native(t.native);
                            assert!(flags.contains(back), "{f:?}: {flags:?} lacks {back:?}");
                            assert_eq!(LazyReport::event(f, policy).get(), &t.report);
                        }
                        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                        (a, b) => panic!(
                            "{f:?} {policy:?}: table {:?} memo {:?}",
                            a.is_ok(),
                            b.is_ok()
                        ),
                    }
                }
            }
        }
    }
}
