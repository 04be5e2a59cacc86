//! Portable stream priorities mapped through each device's native range.
//!
//! Vendors disagree: CUDA uses signed values where a *lower* number is a *higher* priority
//! (range `[least, greatest]` = `[0, -5]` on an H200) and clamps out-of-range values silently;
//! ACL uses `0..=7` with `0` highest (clamped by recent runtimes, rejected on 310P, reserved to
//! 0 on A2/A3). xstream never clamps silently: [`PriorityRange::resolve`] returns the
//! effective native value and says whether it clamped.

use crate::{Error, Result, TranslationPolicy};

/// An ordered portable priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Priority {
    /// The least urgent priority the device has.
    Lowest,
    /// Between [`Priority::Lowest`] and [`Priority::Normal`].
    Low,
    /// The device's default priority (what a stream created without one gets).
    #[default]
    Normal,
    /// Between [`Priority::Normal`] and [`Priority::Highest`].
    High,
    /// The most urgent priority the device has.
    Highest,
    /// A vendor-native value, passed through the range check.
    Native(i32),
}

/// A device's native priority range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PriorityRange {
    /// Native value of the least urgent priority.
    pub least: i32,
    /// Native value of the most urgent priority.
    pub greatest: i32,
    /// Native value a stream gets by default.
    pub default: i32,
}

/// The outcome of mapping a [`Priority`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorityOutcome {
    /// What the caller asked for.
    pub requested: Priority,
    /// The native value the stream gets.
    pub native: i32,
    /// The requested native value, when it was out of range and clamped.
    pub clamped_from: Option<i32>,
    /// Set when the requested class lands on the same native value as [`Priority::Normal`]
    /// although it asks for something else (the device's range cannot tell them apart, e.g.
    /// ACL, where the default is already the most urgent value, so `High` and `Highest` equal
    /// `Normal`): `Some(Priority::Normal)`.
    pub collapsed_into: Option<Priority>,
}

impl PriorityRange {
    /// A single-value range (priority not supported: everything maps to `value`).
    pub const fn fixed(value: i32) -> Self {
        Self {
            least: value,
            greatest: value,
            default: value,
        }
    }

    /// Whether the device has more than one priority level.
    pub fn is_flat(&self) -> bool {
        self.least == self.greatest
    }

    /// Whether `native` lies within the range.
    pub fn contains(&self, native: i32) -> bool {
        let (lo, hi) = self.bounds();
        (lo..=hi).contains(&native)
    }

    fn bounds(&self) -> (i32, i32) {
        (self.least.min(self.greatest), self.least.max(self.greatest))
    }

    /// Clamps a native value into the range.
    pub fn clamp(&self, native: i32) -> i32 {
        let (lo, hi) = self.bounds();
        native.clamp(lo, hi)
    }

    /// Maps a portable priority to a native value under `policy`.
    ///
    /// # Errors
    /// Under [`TranslationPolicy::Strict`], a [`Priority::Native`] value outside the range is
    /// [`Error::InvalidArgument`]; under best effort it is clamped and reported.
    pub fn resolve(&self, p: Priority, policy: TranslationPolicy) -> Result<PriorityOutcome> {
        let mid = |a: i32, b: i32| a + (b - a) / 2;
        let native = match p {
            Priority::Lowest => self.least,
            Priority::Low => mid(self.default, self.least),
            Priority::Normal => self.default,
            Priority::High => mid(self.default, self.greatest),
            Priority::Highest => self.greatest,
            Priority::Native(v) => v,
        };
        if self.contains(native) {
            return Ok(PriorityOutcome {
                requested: p,
                native,
                clamped_from: None,
                collapsed_into: self.collapses(p).then_some(Priority::Normal),
            });
        }
        match policy {
            TranslationPolicy::Strict => Err(Error::invalid(format!(
                "native priority {native} is outside the device range [least {}, greatest {}]",
                self.least, self.greatest
            ))),
            TranslationPolicy::BestEffort => Ok(PriorityOutcome {
                requested: p,
                native: self.clamp(native),
                clamped_from: Some(native),
                collapsed_into: None,
            }),
        }
    }

    /// Whether the class `p` maps to the default (`Normal`) native value although it names
    /// another class: the device cannot make it more (or less) urgent than a default stream.
    pub fn collapses(&self, p: Priority) -> bool {
        let native = match p {
            Priority::Lowest => self.least,
            Priority::Low => self.default + (self.least - self.default) / 2,
            Priority::High => self.default + (self.greatest - self.default) / 2,
            Priority::Highest => self.greatest,
            Priority::Normal | Priority::Native(_) => return false,
        };
        native == self.default
    }

    /// The portable classes that collapse onto `Normal` on this range (empty when every class
    /// is distinct from the default), for reports such as `xstream info`.
    pub fn collapsed_classes(&self) -> Vec<Priority> {
        [
            Priority::Lowest,
            Priority::Low,
            Priority::High,
            Priority::Highest,
        ]
        .into_iter()
        .filter(|p| self.collapses(*p))
        .collect()
    }

    /// Orders two native values: `Greater` when `a` is more urgent than `b`.
    pub fn compare(&self, a: i32, b: i32) -> std::cmp::Ordering {
        if self.greatest >= self.least {
            a.cmp(&b)
        } else {
            b.cmp(&a)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering;

    const CUDA: PriorityRange = PriorityRange {
        least: 0,
        greatest: -5,
        default: 0,
    };
    const ACL: PriorityRange = PriorityRange {
        least: 7,
        greatest: 0,
        default: 0,
    };

    #[test]
    fn cuda_scale() {
        let r = |p| CUDA.resolve(p, TranslationPolicy::Strict).unwrap().native;
        assert_eq!(r(Priority::Lowest), 0);
        assert_eq!(r(Priority::Highest), -5);
        assert_eq!(r(Priority::Normal), 0);
        assert_eq!(r(Priority::High), -2);
        assert_eq!(CUDA.compare(-5, 0), Ordering::Greater);
    }

    #[test]
    fn acl_scale() {
        let r = |p| ACL.resolve(p, TranslationPolicy::Strict).unwrap().native;
        assert_eq!(r(Priority::Lowest), 7);
        assert_eq!(r(Priority::Highest), 0);
        assert_eq!(r(Priority::Low), 3);
        assert_eq!(ACL.compare(0, 7), Ordering::Greater);
    }

    #[test]
    fn collapse_onto_normal_is_reported() {
        let o = |p| ACL.resolve(p, TranslationPolicy::Strict).unwrap();
        assert_eq!(o(Priority::High).collapsed_into, Some(Priority::Normal));
        assert_eq!(o(Priority::Highest).collapsed_into, Some(Priority::Normal));
        assert_eq!(o(Priority::Normal).collapsed_into, None);
        assert_eq!(o(Priority::Low).collapsed_into, None);
        assert_eq!(
            ACL.collapsed_classes(),
            vec![Priority::High, Priority::Highest]
        );
        // CUDA's default is its least urgent value: Lowest and Low are Normal there.
        assert_eq!(
            CUDA.collapsed_classes(),
            vec![Priority::Lowest, Priority::Low]
        );
        let c = |p| CUDA.resolve(p, TranslationPolicy::Strict).unwrap();
        assert_eq!(c(Priority::Highest).collapsed_into, None);
    }

    #[test]
    fn clamp_is_reported_or_refused() {
        let o = CUDA
            .resolve(Priority::Native(-100), TranslationPolicy::BestEffort)
            .unwrap();
        assert_eq!(o.native, -5);
        assert_eq!(o.clamped_from, Some(-100));
        assert!(CUDA
            .resolve(Priority::Native(3), TranslationPolicy::Strict)
            .is_err());
        let flat = PriorityRange::fixed(0);
        assert!(flat.is_flat());
        assert_eq!(
            flat.resolve(Priority::Highest, TranslationPolicy::Strict)
                .unwrap()
                .native,
            0
        );
    }
}
