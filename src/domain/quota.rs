//! The per-account budget of tool calls per rolling hour (issue "The rest of the MCP surface",
//! part 3): a sliding window of per-minute counts. Pure: the caller brings the clock and the
//! counts read back from the tool-call audit rows.

use std::collections::VecDeque;

/// The window the budget covers, in seconds.
pub const WINDOW_SECS: i64 = 3600;
/// Width of one counting bucket, in seconds: a call stops counting between 59 and 60 minutes
/// after it was made (at the end of the 60th minute from its own minute).
pub const BUCKET_SECS: i64 = 60;

/// An account's budget: calls per rolling hour, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// No limit (a configured or per-account value of 0).
    Unlimited,
    /// At most this many calls in any rolling hour (≥ 1).
    PerHour(u64),
}

impl Budget {
    /// The budget a configured number means: 0 is unlimited.
    pub fn from_calls_per_hour(n: u64) -> Budget {
        if n == 0 {
            Budget::Unlimited
        } else {
            Budget::PerHour(n)
        }
    }
}

/// Calls counted per minute over the last hour, oldest first. At most 60 buckets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Window {
    /// `(minute, calls)`: minute = Unix seconds / [`BUCKET_SECS`], strictly increasing.
    buckets: VecDeque<(i64, u64)>,
}

/// The minute of a Unix time.
fn minute(at: i64) -> i64 {
    at.div_euclid(BUCKET_SECS)
}

impl Window {
    /// A window from `(minute, calls)` counts (as read from the audit rows), in any order;
    /// counts outside the hour ending at `now` are left out.
    pub fn from_counts(counts: impl IntoIterator<Item = (i64, u64)>, now: i64) -> Window {
        let mut sorted: Vec<(i64, u64)> = counts.into_iter().filter(|(_, n)| *n > 0).collect();
        sorted.sort_unstable();
        let mut window = Window::default();
        for (m, n) in sorted {
            window.add_at_minute(m, n);
        }
        window.expire(now);
        window
    }

    fn add_at_minute(&mut self, m: i64, n: u64) {
        match self.buckets.back_mut() {
            Some((last, count)) if *last == m => *count += n,
            Some((last, _)) if *last > m => {
                // Out of order (a clock step back): count it in the newest bucket.
                if let Some((_, count)) = self.buckets.back_mut() {
                    *count += n;
                }
            }
            _ => self.buckets.push_back((m, n)),
        }
    }

    /// Forgets the minutes that left the hour ending at `now`.
    fn expire(&mut self, now: i64) {
        let first_kept = minute(now) - (WINDOW_SECS / BUCKET_SECS) + 1;
        while self.buckets.front().is_some_and(|(m, _)| *m < first_kept) {
            self.buckets.pop_front();
        }
    }

    /// Calls counted in the hour ending at `now`.
    pub fn count(&mut self, now: i64) -> u64 {
        self.expire(now);
        self.buckets.iter().map(|(_, n)| n).sum()
    }

    /// Counts one call made at `now`.
    pub fn record(&mut self, now: i64) {
        self.expire(now);
        self.add_at_minute(minute(now), 1);
    }

    /// Takes back one call counted at `at` (a call refused for its reach or role after it was
    /// admitted); nothing when none is counted in that minute.
    pub fn unrecord(&mut self, at: i64) {
        let m = minute(at);
        if let Some((_, count)) = self.buckets.iter_mut().rev().find(|(b, _)| *b == m)
            && *count > 0
        {
            *count -= 1;
        }
    }

    /// Whether a call at `now` fits `budget`; if it does not, the Unix time from which one
    /// more call fits again (when enough of the oldest counted calls leave the window).
    pub fn check(&mut self, budget: Budget, now: i64) -> Result<(), i64> {
        let Budget::PerHour(limit) = budget else {
            return Ok(());
        };
        let count = self.count(now);
        if count < limit {
            return Ok(());
        }
        // `count - limit + 1` calls must leave the window before one more fits.
        let must_leave = count - limit + 1;
        let mut left = 0;
        for (m, n) in &self.buckets {
            left += n;
            if left >= must_leave {
                return Err((m + 1) * BUCKET_SECS + WINDOW_SECS - BUCKET_SECS);
            }
        }
        // Unreachable while count ≥ limit ≥ 1: the whole window leaves by then.
        Err(now + WINDOW_SECS)
    }

    /// Whether nothing is counted in the hour ending at `now`.
    pub fn is_idle(&mut self, now: i64) -> bool {
        self.count(now) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_means_unlimited() {
        assert_eq!(Budget::from_calls_per_hour(0), Budget::Unlimited);
        assert_eq!(Budget::from_calls_per_hour(5), Budget::PerHour(5));
        let mut w = Window::default();
        for _ in 0..10_000 {
            w.record(1_000_000);
        }
        assert_eq!(w.check(Budget::Unlimited, 1_000_000), Ok(()));
    }

    #[test]
    fn the_budget_holds_over_a_rolling_hour_and_says_when_it_resets() {
        let t0 = 1_700_000_000 - 1_700_000_000 % 60; // the start of a minute
        let mut w = Window::default();
        let budget = Budget::PerHour(3);
        for at in [t0 + 5, t0 + 70, t0 + 130] {
            assert_eq!(w.check(budget, at), Ok(()));
            w.record(at);
        }
        // The fourth call waits until the first one's minute leaves the hour.
        assert_eq!(w.check(budget, t0 + 200), Err(t0 + 3600));
        assert_eq!(w.check(budget, t0 + 3599), Err(t0 + 3600));
        assert_eq!(w.check(budget, t0 + 3600), Ok(()));
        assert_eq!(w.count(t0 + 3600), 2);
        // An hour after the last call nothing counts.
        assert!(w.is_idle(t0 + 130 + 3600));
    }

    #[test]
    fn seeded_counts_count_and_old_ones_do_not() {
        let now = 1_700_000_000;
        let m = now / 60;
        let mut w = Window::from_counts([(m, 2), (m - 59, 3), (m - 60, 100), (m - 5, 0)], now);
        assert_eq!(w.count(now), 5);
        // Budget 5 is spent: one call must leave, and the 3 of minute m-59 leave first.
        assert_eq!(w.check(Budget::PerHour(5), now), Err((m + 1) * 60));
        assert_eq!(w.check(Budget::PerHour(6), now), Ok(()));
        // Over budget by more than the oldest bucket: the reset waits for the newer one too.
        assert_eq!(w.check(Budget::PerHour(1), now), Err((m + 60) * 60));
    }

    #[test]
    fn a_refused_call_is_taken_back() {
        let mut w = Window::default();
        w.record(600);
        w.record(601);
        w.unrecord(601);
        assert_eq!(w.count(610), 1);
        w.unrecord(601);
        w.unrecord(601);
        assert_eq!(w.count(610), 0, "never below zero");
        w.unrecord(6000);
        assert_eq!(w.count(610), 0);
    }
}
