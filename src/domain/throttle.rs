//! Rate-limit rules as pure functions: given a counter's stored state, the time and the cost of
//! one more attempt, either the counter's next state or how long to wait.
//!
//! Two kinds of rule:
//! - [`Policy::Window`]: at most `max_hits` attempts (and `max_amount` units, e.g. bytes) per
//!   fixed window of `window_secs`, counted from the window's first attempt. Used per source
//!   address for sign-in failures and for dynamic registrations.
//! - [`Policy::Backoff`]: NIST SP 800-63B §5.2.2 per-account limit. The first `free` failures
//!   cost nothing; from then on each attempt must come at least
//!   `min(cap, base × 2^(failures − free))` seconds after the previous failure. Delays rather than
//!   a lock: the owner can always get in once the delay has passed, and a success clears the
//!   counter. After `reset_secs` without failures the count starts again.

use std::net::IpAddr;

/// What per-address limits count by: an IPv4 address itself (also when it arrives
/// IPv4-mapped on an IPv6 socket), and for IPv6 the address's /64 network, since one
/// subscriber usually holds a whole /64 and could otherwise use a new address per attempt.
pub fn source_key(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
    }
}

/// A counter as stored: all times are Unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterState {
    /// Attempts counted (window) or consecutive failures (backoff).
    pub hits: i64,
    /// Units counted in the window (bytes); 0 for backoff.
    pub amount: i64,
    /// Start of the window (window) or time of the last failure (backoff).
    pub since: i64,
    /// No attempt is allowed before this time.
    pub blocked_until: i64,
    /// When the row has no effect any more and housekeeping may delete it.
    pub expires_at: i64,
}

/// A rate-limit rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// At most `max_hits` attempts and `max_amount` units per fixed window.
    Window {
        /// Attempts per window.
        max_hits: i64,
        /// Units per window (`i64::MAX` for no limit).
        max_amount: i64,
        /// Length of the window, seconds.
        window_secs: i64,
    },
    /// Exponentially growing delays after `free` consecutive failures.
    Backoff {
        /// Failures that cost no delay.
        free: i64,
        /// First delay, seconds.
        base_secs: i64,
        /// Longest delay, seconds.
        cap_secs: i64,
        /// Quiet time after which the count starts again, seconds.
        reset_secs: i64,
    },
}

/// What [`Policy::admit`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Count the attempt: store this state.
    Admit(CounterState),
    /// Refuse without counting; the caller may retry after this many seconds (at least 1).
    Refuse {
        /// Seconds until an attempt can be admitted.
        retry_after: i64,
    },
}

impl Policy {
    /// Decides one attempt of cost `amount` at `now` against `stored` (`None`: no row yet).
    /// A refused attempt leaves the state unchanged, so refusing writes nothing.
    pub fn admit(&self, stored: Option<CounterState>, now: i64, amount: i64) -> Decision {
        match *self {
            Policy::Window {
                max_hits,
                max_amount,
                window_secs,
            } => {
                let current = stored.filter(|s| now < s.since.saturating_add(window_secs));
                let (hits, used, since) =
                    current.map_or((0, 0, now), |s| (s.hits, s.amount, s.since));
                let end = since.saturating_add(window_secs);
                if hits >= max_hits || used.saturating_add(amount) > max_amount {
                    return Decision::Refuse {
                        retry_after: (end - now).max(1),
                    };
                }
                let hits = hits + 1;
                Decision::Admit(CounterState {
                    hits,
                    amount: used + amount,
                    since,
                    blocked_until: if hits >= max_hits { end } else { 0 },
                    expires_at: end,
                })
            }
            Policy::Backoff { reset_secs, .. } => {
                let current = stored.filter(|s| now < s.since.saturating_add(reset_secs));
                if let Some(s) = current
                    && now < s.blocked_until
                {
                    return Decision::Refuse {
                        retry_after: (s.blocked_until - now).max(1),
                    };
                }
                let hits = current.map_or(0, |s| s.hits) + 1;
                // Times are whole seconds: the failure happened somewhere in second `now`, so
                // the first second by which `d` full seconds have surely passed is `now + d + 1`.
                let blocked_until = match self.delay(hits) {
                    0 => 0,
                    d => now + d + 1,
                };
                Decision::Admit(CounterState {
                    hits,
                    amount: 0,
                    since: now,
                    blocked_until,
                    expires_at: now.saturating_add(reset_secs).max(blocked_until),
                })
            }
        }
    }

    /// The wait after `failures` consecutive failures, in seconds (backoff only; 0 otherwise).
    pub fn delay(&self, failures: i64) -> i64 {
        match *self {
            Policy::Window { .. } => 0,
            Policy::Backoff {
                free,
                base_secs,
                cap_secs,
                ..
            } => {
                if failures < free {
                    return 0;
                }
                // 2^62 already exceeds any cap: the exponent is bounded, so this cannot overflow.
                let doublings = (failures - free).min(62) as u32;
                base_secs.saturating_mul(1i64 << doublings).min(cap_secs)
            }
        }
    }

    /// Whether `state` (just admitted) makes the next attempt wait: the moment a limit is
    /// reached, worth an audit record.
    pub fn blocks(state: &CounterState) -> bool {
        state.blocked_until > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Policy = Policy::Window {
        max_hits: 3,
        max_amount: 100,
        window_secs: 60,
    };
    const BACKOFF: Policy = Policy::Backoff {
        free: 10,
        base_secs: 1,
        cap_secs: 900,
        reset_secs: 86_400,
    };

    fn admit(p: &Policy, s: Option<CounterState>, now: i64, amount: i64) -> CounterState {
        match p.admit(s, now, amount) {
            Decision::Admit(s) => s,
            other => panic!("refused: {other:?}"),
        }
    }

    #[test]
    fn a_window_counts_hits_and_amount_and_then_starts_again() {
        let mut s = None;
        for now in [1000, 1001, 1002] {
            s = Some(admit(&WINDOW, s, now, 10));
        }
        assert_eq!(s.unwrap().hits, 3);
        assert!(Policy::blocks(&s.unwrap()));
        assert_eq!(
            WINDOW.admit(s, 1010, 0),
            Decision::Refuse { retry_after: 50 }
        );
        // The window ends 60 s after its first attempt.
        let fresh = admit(&WINDOW, s, 1060, 10);
        assert_eq!((fresh.hits, fresh.amount, fresh.since), (1, 10, 1060));
        // The amount has its own budget.
        let big = admit(&WINDOW, None, 0, 90);
        assert!(matches!(
            WINDOW.admit(Some(big), 1, 20),
            Decision::Refuse { .. }
        ));
        assert!(matches!(WINDOW.admit(Some(big), 1, 10), Decision::Admit(_)));
        assert!(matches!(
            WINDOW.admit(None, 0, 101),
            Decision::Refuse { .. }
        ));
    }

    #[test]
    fn ipv6_sources_count_by_their_64_network() {
        let key = |s: &str| source_key(s.parse().unwrap());
        assert_eq!(key("192.0.2.7"), "192.0.2.7");
        assert_eq!(key("::ffff:192.0.2.7"), "192.0.2.7");
        assert_eq!(key("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64");
        assert_eq!(key("2001:db8:1:2:bbbb::9"), key("2001:db8:1:2::1"));
        assert_ne!(key("2001:db8:1:3::1"), key("2001:db8:1:2::1"));
    }

    #[test]
    fn backoff_is_free_then_doubles_up_to_the_cap() {
        assert_eq!(BACKOFF.delay(9), 0);
        assert_eq!(BACKOFF.delay(10), 1);
        assert_eq!(BACKOFF.delay(11), 2);
        assert_eq!(BACKOFF.delay(14), 16);
        assert_eq!(BACKOFF.delay(20), 900);
        assert_eq!(BACKOFF.delay(i64::MAX), 900);
        let mut s = None;
        for n in 1..=9 {
            s = Some(admit(&BACKOFF, s, 1000, 0));
            assert_eq!(s.unwrap().hits, n);
            assert_eq!(s.unwrap().blocked_until, 0);
        }
        let tenth = admit(&BACKOFF, s, 1000, 0);
        // At least one whole second after the tenth failure.
        assert_eq!(tenth.blocked_until, 1002);
        assert!(Policy::blocks(&tenth));
        assert_eq!(
            BACKOFF.admit(Some(tenth), 1001, 0),
            Decision::Refuse { retry_after: 1 }
        );
        let eleventh = admit(&BACKOFF, Some(tenth), 1002, 0);
        assert_eq!(eleventh.blocked_until, 1005);
        // A day without failures: the count starts again.
        let later = admit(&BACKOFF, Some(eleventh), 1002 + 86_400, 0);
        assert_eq!((later.hits, later.blocked_until), (1, 0));
    }
}
