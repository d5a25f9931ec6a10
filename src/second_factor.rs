//! The second factor (issue 36, item 3): TOTP codes (RFC 6238, with `totp-rs`) and recovery
//! codes, asked after a password sign-in of an account that has one, and the limits on
//! guessing them.
//!
//! TOTP: HMAC-SHA-1, 6 digits, 30-second steps (RFC 6238 §4, the parameters every
//! authenticator app supports), a 160-bit random secret (RFC 4226 §4 R6). A code is accepted
//! for the step before, the current and the next one (§5.2: one step of clock drift each way)
//! and only for a step later than the last accepted one, so no code works twice.
//!
//! Recovery codes: [`RECOVERY_CODES`] random codes of 10 characters (50 bits) shown once at
//! enrolment, kept as SHA-256, each good once.
//!
//! Guessing: a code is counted against the sign-in limits before it is checked — the source
//! address's and the (address, email) pair's counters that wrong passwords fill — and against a
//! per-account delay like the password's ([`limits`]). Only someone who knows the password can
//! reach the code step, so strangers cannot run the account's code delay up and lock its owner
//! out.

use std::net::IpAddr;

use rand::RngCore;
use totp_rs::{Algorithm, TOTP};

use crate::domain::secret::TokenHash;
use crate::domain::throttle::Policy;
use crate::signin::{
    ACCOUNT_FIRST_DELAY_SECS, ACCOUNT_FREE_FAILURES, ACCOUNT_MAX_DELAY_SECS, ACCOUNT_RESET_SECS,
};
use crate::store::limits::Limit;

/// Length of a TOTP step, seconds (RFC 6238 §4.1 `X`, the default).
pub const TOTP_STEP_SECS: u64 = 30;
/// Digits of a TOTP code.
pub const TOTP_DIGITS: usize = 6;
/// Bytes of a TOTP secret (160 bits, RFC 4226 §4 R6).
pub const TOTP_SECRET_BYTES: usize = 20;
/// Recovery codes made at enrolment.
pub const RECOVERY_CODES: usize = 10;
/// How long a sign-in waits for its second factor after the password, seconds.
pub const PENDING_SECS: i64 = 10 * 60;

/// The characters of recovery codes: lowercase letters and digits without the look-alikes
/// `0 o 1 l i` (31 characters, almost 5 bits each).
const RECOVERY_ALPHABET: &[u8; 31] = b"abcdefghjkmnpqrstuvwxyz23456789";

/// A new random TOTP secret.
pub fn new_totp_secret() -> Vec<u8> {
    let mut secret = vec![0u8; TOTP_SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut secret);
    secret
}

/// The TOTP of `secret` for the account `email`, labelled `issuer` in authenticator apps
/// (`:` are replaced, the `otpauth` URI uses them as separators). Errors: a secret shorter
/// than 128 bits.
pub fn totp(secret: Vec<u8>, issuer: &str, email: &str) -> Result<TOTP, String> {
    TOTP::new(
        Algorithm::SHA1,
        TOTP_DIGITS,
        0,
        TOTP_STEP_SECS,
        secret,
        Some(issuer.replace(':', " ")),
        email.replace(':', "_"),
    )
    .map_err(|e| e.to_string())
}

/// The time step (Unix seconds / 30) whose code `code` is, among the step before `now`, the
/// current one and the next (one step of drift each way, RFC 6238 §5.2); `None` when it is
/// none of them or not 6 digits (spaces are ignored). Compared in constant time by `totp-rs`.
pub fn matching_step(totp: &TOTP, code: &str, now: i64) -> Option<i64> {
    let code: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    if code.len() != TOTP_DIGITS || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let now = u64::try_from(now).ok()?;
    let step = TOTP_STEP_SECS;
    [now.saturating_sub(step), now, now + step]
        .into_iter()
        .find(|t| totp.check(&code, *t))
        .and_then(|t| i64::try_from(t / step).ok())
}

/// Whether `input` has the shape of a TOTP code (6 digits, spaces ignored) rather than a
/// recovery code.
pub fn looks_like_totp(input: &str) -> bool {
    let digits: Vec<char> = input.chars().filter(|c| !c.is_whitespace()).collect();
    digits.len() == TOTP_DIGITS && digits.iter().all(char::is_ascii_digit)
}

/// [`RECOVERY_CODES`] new recovery codes, shown as `xxxxx-xxxxx`.
pub fn new_recovery_codes() -> Vec<String> {
    let mut rng = rand::rngs::OsRng;
    (0..RECOVERY_CODES)
        .map(|_| {
            let mut chars = String::with_capacity(10);
            while chars.len() < 10 {
                let mut byte = [0u8; 1];
                rng.fill_bytes(&mut byte);
                // Bytes from 248 up are drawn again, so every character is equally likely.
                if byte[0] < 248 {
                    chars.push(char::from(RECOVERY_ALPHABET[usize::from(byte[0] % 31)]));
                }
            }
            format!("{}-{}", &chars[..5], &chars[5..])
        })
        .collect()
}

/// The stored hash of a recovery code as typed: lowercased, without spaces and dashes.
pub fn recovery_code_hash(input: &str) -> TokenHash {
    let normal: String = input
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .flat_map(char::to_lowercase)
        .collect();
    TokenHash::of(&normal)
}

/// The counters a second-factor attempt for `account_id` from `source` is checked against:
/// the sign-in page's per-address and per-(address, email) counters (shared with wrong
/// passwords, see [`crate::signin::limits`]) and a per-account delay with the password's
/// numbers.
pub fn limits(source: IpAddr, email_key: &str, account_id: &str) -> [Limit; 3] {
    let [address, address_email, _] = crate::signin::limits(source, email_key);
    let account = Limit::new(
        "signin-second-factor",
        account_id,
        Policy::Backoff {
            free: ACCOUNT_FREE_FAILURES,
            base_secs: ACCOUNT_FIRST_DELAY_SECS,
            cap_secs: ACCOUNT_MAX_DELAY_SECS,
            reset_secs: ACCOUNT_RESET_SECS,
        },
        0,
    );
    [address, address_email, account]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6238 Appendix B, SHA-1 with the 20-byte ASCII secret "12345678901234567890": at
    /// T = 59 s the 8-digit code is 94287082, whose last 6 digits are the 6-digit code.
    #[test]
    fn codes_match_the_rfc_6238_test_vector_within_one_step() {
        let t = totp(b"12345678901234567890".to_vec(), "Gatehouse", "a@b").unwrap();
        assert_eq!(matching_step(&t, "287082", 59), Some(1));
        // One step of drift each way: at 89 s (step 2) the code of step 1 still matches.
        assert_eq!(matching_step(&t, "287 082", 89), Some(1));
        // Two steps later it does not.
        assert_eq!(matching_step(&t, "287082", 119), None);
        assert_eq!(matching_step(&t, "28708", 59), None);
        assert_eq!(matching_step(&t, "abcdef", 59), None);
    }

    #[test]
    fn recovery_codes_are_ten_distinct_and_typed_loosely() {
        let codes = new_recovery_codes();
        assert_eq!(codes.len(), RECOVERY_CODES);
        let mut unique = codes.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), RECOVERY_CODES);
        let code = &codes[0];
        assert_eq!(code.len(), 11);
        assert_eq!(
            recovery_code_hash(code),
            recovery_code_hash(&format!(" {} ", code.to_uppercase().replace('-', " ")))
        );
        assert!(!looks_like_totp(code));
        assert!(looks_like_totp("123 456"));
    }
}
