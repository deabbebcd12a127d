//! What an evaluation counts: findings right and wrong, planted values caught whole or not, and
//! the figures made of them (precision, recall, F2).

use std::ops::AddAssign;

/// Counts for one entity type, one locale or all of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Findings that overlap a planted value of their own kind.
    pub found_right: u64,
    /// Findings that do not (a look-alike redacted, or a value given the wrong kind).
    pub found_wrong: u64,
    /// Planted values.
    pub planted: u64,
    /// Planted values whose every non-blank character was redacted (by findings of any kind).
    pub caught: u64,
}

impl Tally {
    /// Of what was found, the share that was right (1 when nothing was found).
    pub fn precision(&self) -> f64 {
        ratio(self.found_right, self.found_right + self.found_wrong)
    }

    /// Of what was planted, the share caught whole (1 when nothing was planted).
    pub fn recall(&self) -> f64 {
        ratio(self.caught, self.planted)
    }

    /// F-beta with beta 2: recall weighs four times precision (a leak costs more than a
    /// redacted look-alike).
    pub fn f2(&self) -> f64 {
        let (precision, recall) = (self.precision(), self.recall());
        if precision + recall == 0.0 { 0.0 } else { 5.0 * precision * recall / (4.0 * precision + recall) }
    }
}

impl AddAssign for Tally {
    fn add_assign(&mut self, other: Tally) {
        self.found_right += other.found_right;
        self.found_wrong += other.found_wrong;
        self.planted += other.planted;
        self.caught += other.caught;
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 { 1.0 } else { part as f64 / whole as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// F2 weighs recall over precision, and empty counts read as perfect, not as NaN.
    #[test]
    fn f2_weighs_recall_over_precision() {
        let leaky = Tally { found_right: 8, found_wrong: 0, planted: 10, caught: 8 };
        let eager = Tally { found_right: 10, found_wrong: 2, planted: 10, caught: 10 };
        assert!(eager.f2() > leaky.f2());
        assert!((leaky.precision() - 1.0).abs() < 1e-9 && (leaky.recall() - 0.8).abs() < 1e-9);
        assert_eq!(Tally::default().f2(), 1.0);
    }
}
