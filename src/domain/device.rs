//! Rules of the device authorization grant (RFC 8628): the user code's alphabet and form, the
//! lifetimes, and what the token endpoint answers to a poll.
//!
//! The user code is 8 characters of the 20 consonants RFC 8628 §6.1 recommends
//! (`BCDFGHJKLMNPQRSTVWXZ`: no vowels, so no words, nothing to confuse with digits), shown as
//! `XXXX-XXXX`: 20^8 ≈ 2^34.5 codes. With at most [`USER_CODE_ATTEMPTS`] tries per account and
//! per address in each [`USER_CODE_WINDOW_SECS`] and codes living [`DEVICE_CODE_TTL_SECS`], a
//! guesser's chance of hitting one live code stays far below 2^-20 (RFC 8628 §5.1). What a
//! person types is read leniently ([`normalize_user_code`]): case, spaces and dashes do not
//! matter.

use rand::{Rng as _, rngs::OsRng};

/// `grant_type` of the device access token request (RFC 8628 §3.4).
pub const DEVICE_CODE_GRANT: &str = super::grant::GrantType::DeviceCode.as_str();

/// Lifetime of a device code and its user code, in seconds (RFC 8628 §3.2 `expires_in`).
pub const DEVICE_CODE_TTL_SECS: i64 = 600;

/// The polling interval given to the client, in seconds (RFC 8628 §3.2 `interval`; the RFC's
/// default).
pub const POLL_INTERVAL_SECS: i64 = 5;

/// How much every `slow_down` adds to the interval, in seconds (RFC 8628 §3.5).
pub const SLOW_DOWN_STEP_SECS: i64 = 5;

/// Longest interval a client is asked to keep, in seconds (`slow_down` stops growing it there).
pub const MAX_POLL_INTERVAL_SECS: i64 = 60;

/// User-code attempts allowed per account and per source address in each window
/// ([`USER_CODE_WINDOW_SECS`]); RFC 8628 §5.1.
pub const USER_CODE_ATTEMPTS: i64 = 10;

/// The window of [`USER_CODE_ATTEMPTS`], in seconds.
pub const USER_CODE_WINDOW_SECS: i64 = 600;

/// The user-code alphabet of RFC 8628 §6.1 (base 20, no vowels).
pub const USER_CODE_ALPHABET: &[u8; 20] = b"BCDFGHJKLMNPQRSTVWXZ";

/// Characters of a user code, without its separator.
pub const USER_CODE_CHARS: usize = 8;

/// A new random user code from the OS RNG, as shown to the person: `XXXX-XXXX`.
pub fn generate_user_code() -> String {
    let mut code = String::with_capacity(USER_CODE_CHARS + 1);
    for i in 0..USER_CODE_CHARS {
        if i == USER_CODE_CHARS / 2 {
            code.push('-');
        }
        let at = OsRng.gen_range(0..USER_CODE_ALPHABET.len());
        code.push(char::from(USER_CODE_ALPHABET[at]));
    }
    code
}

/// The normal form of a typed user code: ASCII letters upper-cased, spaces and dashes left out
/// (RFC 8628 §6.1: case-insensitive, punctuation ignored). `None` when what remains is not
/// [`USER_CODE_CHARS`] characters of the alphabet, so a typing mistake is refused without a
/// lookup (and without spending a guess on it).
pub fn normalize_user_code(typed: &str) -> Option<String> {
    let mut code = String::with_capacity(USER_CODE_CHARS);
    for c in typed.chars() {
        if c == '-' || c == ' ' || c == '\u{2010}' || c == '\u{2013}' {
            continue;
        }
        let upper = c.to_ascii_uppercase();
        if !upper.is_ascii() || !USER_CODE_ALPHABET.contains(&(upper as u8)) {
            return None;
        }
        code.push(upper);
        if code.len() > USER_CODE_CHARS {
            return None;
        }
    }
    (code.len() == USER_CODE_CHARS).then_some(code)
}

/// Where a device authorization stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceStatus {
    /// Waiting for the person.
    Pending,
    /// The person approved: an authorization code waits for the client.
    Approved,
    /// The person denied.
    Denied,
}

impl DeviceStatus {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceStatus::Pending => "pending",
            DeviceStatus::Approved => "approved",
            DeviceStatus::Denied => "denied",
        }
    }

    /// The status of a stored word (`None` for another).
    pub fn parse(s: &str) -> Option<DeviceStatus> {
        match s {
            "pending" => Some(DeviceStatus::Pending),
            "approved" => Some(DeviceStatus::Approved),
            "denied" => Some(DeviceStatus::Denied),
            _ => None,
        }
    }
}

/// A device authorization as a poll sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollFacts {
    /// Its status.
    pub status: DeviceStatus,
    /// When it expires, Unix seconds.
    pub expires_at: i64,
    /// The interval the client must keep, seconds.
    pub interval: i64,
    /// The previous poll, Unix seconds.
    pub last_polled_at: Option<i64>,
}

/// What the token endpoint answers a poll (RFC 8628 §3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollAnswer {
    /// Approved: redeem the authorization code and answer with tokens.
    Issue,
    /// `access_denied`.
    Denied,
    /// `expired_token`.
    Expired,
    /// `slow_down`; the client must poll at this new interval (seconds) from now on.
    SlowDown(i64),
    /// `authorization_pending`.
    Pending,
}

/// Decides a poll at `now`: an approval is answered at once, however soon it comes; a denial
/// is `access_denied`; a request past its lifetime is `expired_token`; a poll sooner than the
/// interval after the previous one is `slow_down`, with the interval grown by
/// [`SLOW_DOWN_STEP_SECS`] (at most [`MAX_POLL_INTERVAL_SECS`]); else `authorization_pending`.
pub fn decide_poll(facts: &PollFacts, now: i64) -> PollAnswer {
    match facts.status {
        DeviceStatus::Approved => PollAnswer::Issue,
        DeviceStatus::Denied => PollAnswer::Denied,
        DeviceStatus::Pending if facts.expires_at <= now => PollAnswer::Expired,
        DeviceStatus::Pending => match facts.last_polled_at {
            Some(last) if now - last < facts.interval => PollAnswer::SlowDown(
                (facts.interval + SLOW_DOWN_STEP_SECS).min(MAX_POLL_INTERVAL_SECS),
            ),
            _ => PollAnswer::Pending,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_code_is_eight_letters_of_the_alphabet_split_in_two() {
        for _ in 0..200 {
            let code = generate_user_code();
            assert_eq!(code.len(), 9);
            assert_eq!(&code[4..5], "-");
            assert!(
                code.bytes()
                    .filter(|b| *b != b'-')
                    .all(|b| USER_CODE_ALPHABET.contains(&b))
            );
            assert_eq!(
                normalize_user_code(&code).as_deref(),
                Some(code.replace('-', "").as_str())
            );
        }
    }

    #[test]
    fn typed_codes_are_read_without_case_or_separators() {
        assert_eq!(
            normalize_user_code("wdjb-mjht").as_deref(),
            Some("WDJBMJHT")
        );
        assert_eq!(
            normalize_user_code(" WDJB MJHT ").as_deref(),
            Some("WDJBMJHT")
        );
        assert_eq!(normalize_user_code("WDJBMJHT").as_deref(), Some("WDJBMJHT"));
        // A vowel, a digit, a short or long code, or another script are not codes.
        for bad in [
            "WDJA-MJHT",
            "WDJB-MJH1",
            "WDJB-MJH",
            "WDJB-MJHTX",
            "WDJB-MJHŤ",
            "",
        ] {
            assert_eq!(normalize_user_code(bad), None, "{bad}");
        }
    }

    fn facts(status: DeviceStatus, last: Option<i64>) -> PollFacts {
        PollFacts {
            status,
            expires_at: 1_600,
            interval: 5,
            last_polled_at: last,
        }
    }

    #[test]
    fn polls_are_answered_as_rfc_8628_section_3_5_says() {
        use DeviceStatus::*;
        assert_eq!(
            decide_poll(&facts(Pending, None), 1_000),
            PollAnswer::Pending
        );
        assert_eq!(
            decide_poll(&facts(Pending, Some(995)), 1_000),
            PollAnswer::Pending
        );
        assert_eq!(
            decide_poll(&facts(Pending, Some(996)), 1_000),
            PollAnswer::SlowDown(10)
        );
        assert_eq!(
            decide_poll(&facts(Pending, Some(999)), 1_600),
            PollAnswer::Expired
        );
        assert_eq!(
            decide_poll(&facts(Denied, Some(999)), 1_000),
            PollAnswer::Denied
        );
        // An approval is answered even to a client that polls too fast.
        assert_eq!(
            decide_poll(&facts(Approved, Some(999)), 1_000),
            PollAnswer::Issue
        );
        let mut slow = facts(Pending, Some(999));
        slow.interval = 58;
        assert_eq!(decide_poll(&slow, 1_000), PollAnswer::SlowDown(60));
    }
}
