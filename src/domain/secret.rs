//! Bearer secrets: generation, prefixes, redaction, hashing for storage and
//! constant-time comparison.
//!
//! Every credential Gatehouse issues is `prefix + BASE64URL-NOPAD(32 random
//! bytes)`, i.e. 256 bits of entropy from the OS RNG, which satisfies the
//! ≥128-bit guessing resistance of RFC 6749 §10.10 and OAuth 2.1 draft-13
//! §7.1. Only the SHA-256 of a secret is stored (RFC 6819 §5.1.4.1.3), so a
//! database leak does not reveal usable tokens.
//!
//! Access and refresh tokens, which the server mints at every rotation, also carry the time
//! they were issued in the clear, between the prefix and the random part (`prefix + 12
//! lowercase hex digits of Unix milliseconds + 43 base64url characters`), and their storage
//! key ([`TokenHash`]) starts with that time. The time is no secret (the row stores it as
//! `created_at` anyway) and adds nothing to guess; what it buys is where new keys go in the
//! database's index: next to each other, in issue order, instead of at random places — a
//! rotation then dirties two index pages fewer, which halved refresh rotation's p99 on
//! `SQLite` and made it about a third faster (docs/benchmarks.md). Tokens issued before, without
//! the time, keep their plain-hash keys and still work.

use std::fmt;

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use rand::{RngCore as _, rngs::OsRng};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// Number of random bytes in every generated secret (256 bits).
const SECRET_BYTES: usize = 32;

/// Hex digits of the issue time (Unix milliseconds) in a time-ordered secret
/// ([`TokenKind::is_time_ordered`]): 48 bits, enough until the year 10889.
const TIME_DIGITS: usize = 12;

/// Base64url characters of [`SECRET_BYTES`] random bytes.
const RANDOM_CHARS: usize = 43;

/// The kind of credential a [`Secret`] is, recognisable from its prefix
/// (helps secret scanners and makes a token pasted in the wrong place fail
/// early).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenKind {
    /// OAuth access token (RFC 6749 §1.4), prefix `gate_at_`.
    AccessToken,
    /// OAuth refresh token (RFC 6749 §1.5), prefix `gate_rt_`.
    RefreshToken,
    /// OAuth authorization code (RFC 6749 §4.1.2), prefix `gate_ac_`.
    AuthorizationCode,
    /// Confidential client secret (RFC 6749 §2.3.1, RFC 7591 §3.2.1), prefix `gate_cs_`.
    ClientSecret,
    /// Long-lived API key for non-OAuth clients, prefix `gate_key_`.
    ApiKey,
    /// One-time token to create the first administrator, prefix `gate_setup_`.
    SetupToken,
    /// The secret path segment of a personal MCP URL (`<MCP path>/<secret>`), prefix `gate_pu_`.
    PersonalUrl,
    /// One-time token of a password-reset link (`/reset?token=…`), prefix `gate_reset_`.
    ResetToken,
    /// Device verification code of the device authorization grant (RFC 8628 §3.2), prefix
    /// `gate_dc_`.
    DeviceCode,
    /// One-time token of a project invitation link (`/invite?token=…`), prefix `gate_inv_`.
    Invitation,
}

impl TokenKind {
    const ALL: [TokenKind; 10] = [
        TokenKind::AccessToken,
        TokenKind::RefreshToken,
        TokenKind::AuthorizationCode,
        TokenKind::ClientSecret,
        TokenKind::ApiKey,
        TokenKind::SetupToken,
        TokenKind::PersonalUrl,
        TokenKind::ResetToken,
        TokenKind::DeviceCode,
        TokenKind::Invitation,
    ];

    /// Whether secrets of this kind carry their issue time and have time-ordered storage
    /// keys (module docs): access and refresh tokens, which the server mints in bulk.
    pub fn is_time_ordered(self) -> bool {
        matches!(self, TokenKind::AccessToken | TokenKind::RefreshToken)
    }

    /// The ASCII prefix of secrets of this kind, e.g. `"gate_at_"` for
    /// [`TokenKind::AccessToken`]. No prefix is a prefix of another.
    pub fn prefix(self) -> &'static str {
        match self {
            TokenKind::AccessToken => "gate_at_",
            TokenKind::RefreshToken => "gate_rt_",
            TokenKind::AuthorizationCode => "gate_ac_",
            TokenKind::ClientSecret => "gate_cs_",
            TokenKind::ApiKey => "gate_key_",
            TokenKind::SetupToken => "gate_setup_",
            TokenKind::PersonalUrl => "gate_pu_",
            TokenKind::ResetToken => "gate_reset_",
            TokenKind::DeviceCode => "gate_dc_",
            TokenKind::Invitation => "gate_inv_",
        }
    }
}

/// A secret value (token, code, client secret, key). Its `Debug` output is
/// `Secret(<redacted>)` so it cannot leak into logs; read it only through
/// [`Secret::expose`]. It deliberately has no `PartialEq`: compare hashes
/// ([`Secret::hash`]) or use [`constant_time_eq`].
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// Generates a new secret of `kind`: `kind.prefix()` followed by 43
    /// base64url characters (no padding) encoding 32 bytes from the OS RNG
    /// (RFC 6749 §10.10: ≥256 bits of entropy); for a time-ordered kind
    /// ([`TokenKind::is_time_ordered`]) the current time goes between the two
    /// ([`Secret::generate_issued_at`]).
    pub fn generate(kind: TokenKind) -> Secret {
        let unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Secret::generate_issued_at(kind, unix_ms)
    }

    /// [`Secret::generate`] with the issue time `unix_ms` (Unix milliseconds, kept modulo
    /// 2^48) for a time-ordered kind: `prefix`, 12 lowercase hex digits of the time, then the
    /// 43 random characters. Other kinds ignore the time.
    pub fn generate_issued_at(kind: TokenKind, unix_ms: u64) -> Secret {
        let random = random_urlsafe(SECRET_BYTES);
        if kind.is_time_ordered() {
            let time = unix_ms & ((1 << (4 * TIME_DIGITS)) - 1);
            Secret(format!("{}{time:012x}{random}", kind.prefix()))
        } else {
            Secret(format!("{}{random}", kind.prefix()))
        }
    }

    /// Wraps a value presented by a client (e.g. from an `Authorization:
    /// Bearer` header, RFC 6750 §2.1) without checking it.
    pub fn from_presented(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }

    /// The secret in the clear, for sending it to its holder exactly once.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The storage form of this secret: SHA-256 of the full string, prefix
    /// included, after the issue time of a time-ordered secret (see [`TokenHash::of`]).
    pub fn hash(&self) -> TokenHash {
        TokenHash::of(&self.0)
    }

    /// The kind named by the secret's prefix, or `None` if it carries no
    /// known prefix. Says nothing about whether the secret is valid.
    pub fn kind(&self) -> Option<TokenKind> {
        TokenKind::ALL
            .into_iter()
            .find(|kind| self.0.starts_with(kind.prefix()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// The storage key of a secret string: its lowercase hexadecimal SHA-256 (FIPS 180-4), 64
/// characters `[0-9a-f]`, preceded for a time-ordered secret (module docs) by the 12 hex
/// digits of its issue time, 76 characters in all. This is what the database stores and looks
/// up (RFC 6819 §5.1.4.1.3); it is not secret, so `Debug` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenHash(String);

/// The issue-time digits of `s` when it has the shape of a time-ordered secret: a
/// time-ordered kind's prefix, [`TIME_DIGITS`] lowercase hex digits, then exactly
/// [`RANDOM_CHARS`] more characters.
fn issue_time_of(s: &str) -> Option<&str> {
    let rest = TokenKind::ALL
        .into_iter()
        .filter(|kind| kind.is_time_ordered())
        .find_map(|kind| s.strip_prefix(kind.prefix()))?;
    let time = rest.get(..TIME_DIGITS)?;
    (rest.len() == TIME_DIGITS + RANDOM_CHARS
        && time.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
    .then_some(time)
}

impl TokenHash {
    /// The storage key of `s`: the SHA-256 of its UTF-8 bytes as 64 lowercase hex
    /// characters, after its issue-time digits when `s` has the shape of a time-ordered
    /// secret (whether or not it is a real one: an unknown key matches no row).
    pub fn of(s: &str) -> TokenHash {
        let digest = Sha256::digest(s.as_bytes());
        let mut digits = [0u8; 64];
        // 32 bytes always fit 64 hex digits.
        let _ = hex::encode_to_slice(digest, &mut digits);
        let mut key = String::with_capacity(TIME_DIGITS + 64);
        if let Some(time) = issue_time_of(s) {
            key.push_str(time);
        }
        // Hex digits are ASCII.
        key.push_str(std::str::from_utf8(&digits).unwrap_or_default());
        TokenHash(key)
    }

    /// The stored form: 64 lowercase hex characters, or 76 for a time-ordered secret.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Wraps a hash read back from the database, as previously stored from
    /// [`TokenHash::as_str`]. Not validated.
    pub fn from_hex(s: String) -> TokenHash {
        TokenHash(s)
    }
}

/// Compares two byte strings in time that does not depend on where they
/// differ (RFC 6819 §5.1.4.2.2 style timing-attack protection). Returns
/// `false` for different lengths; the length itself is not hidden.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// `bytes` random bytes from the OS RNG, encoded base64url without padding
/// (RFC 4648 §5): `ceil(bytes * 4 / 3)` characters of `[A-Za-z0-9_-]`. For
/// CSRF tokens, `state`-like values and opaque identifiers.
pub fn random_urlsafe(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    OsRng.fill_bytes(&mut buf);
    URL_SAFE_NO_PAD.encode(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_the_documented_ones() {
        assert_eq!(TokenKind::AccessToken.prefix(), "gate_at_");
        assert_eq!(TokenKind::RefreshToken.prefix(), "gate_rt_");
        assert_eq!(TokenKind::AuthorizationCode.prefix(), "gate_ac_");
        assert_eq!(TokenKind::ClientSecret.prefix(), "gate_cs_");
        assert_eq!(TokenKind::ApiKey.prefix(), "gate_key_");
        assert_eq!(TokenKind::SetupToken.prefix(), "gate_setup_");
    }

    #[test]
    fn generated_secret_is_prefix_plus_32_random_bytes() {
        for kind in TokenKind::ALL {
            let secret = Secret::generate(kind);
            let body = secret.expose().strip_prefix(kind.prefix()).unwrap();
            let body = if kind.is_time_ordered() {
                &body[TIME_DIGITS..]
            } else {
                body
            };
            assert_eq!(body.len(), 43, "32 bytes are 43 base64url chars");
            assert_eq!(URL_SAFE_NO_PAD.decode(body).unwrap().len(), 32);
            assert_eq!(secret.kind(), Some(kind));
        }
        let a = Secret::generate(TokenKind::AccessToken);
        let b = Secret::generate(TokenKind::AccessToken);
        assert_ne!(a.expose(), b.expose());
    }

    #[test]
    fn kind_comes_from_prefix_only() {
        assert_eq!(
            Secret::from_presented("gate_rt_abc").kind(),
            Some(TokenKind::RefreshToken)
        );
        assert_eq!(
            Secret::from_presented("gate_key_abc").kind(),
            Some(TokenKind::ApiKey)
        );
        assert_eq!(Secret::from_presented("gh_at_abc").kind(), None);
        assert_eq!(Secret::from_presented("").kind(), None);
    }

    #[test]
    fn debug_is_redacted() {
        let secret = Secret::from_presented("gate_at_supersecretvalue");
        let shown = format!("{secret:?}");
        assert_eq!(shown, "Secret(<redacted>)");
        assert!(!shown.contains("supersecret"));
    }

    #[test]
    fn hash_is_lowercase_hex_sha256() {
        // FIPS 180-2 Appendix B.1: SHA-256("abc").
        assert_eq!(
            TokenHash::of("abc").as_str(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        // SHA-256 of the empty string.
        assert_eq!(
            Secret::from_presented("").hash().as_str(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let secret = Secret::generate(TokenKind::AccessToken);
        assert_eq!(secret.hash(), TokenHash::of(secret.expose()));
        assert_eq!(
            TokenHash::from_hex(secret.hash().as_str().to_owned()),
            secret.hash()
        );
    }

    /// Access and refresh tokens carry their issue time after the prefix, and their keys
    /// start with it, so keys sort in issue order; other kinds, tokens issued before (no
    /// time) and look-alikes that do not have the exact shape are keyed by the hash alone.
    #[test]
    fn time_ordered_tokens_carry_their_issue_time_into_their_key() {
        let at = Secret::generate_issued_at(TokenKind::AccessToken, 0x0193_5f2a_1b2c);
        assert!(at.expose().starts_with("gate_at_01935f2a1b2c"));
        assert_eq!(at.expose().len(), "gate_at_".len() + 12 + 43);
        let plain = |s: &str| format!("{:x}", Sha256::digest(s.as_bytes()));
        assert_eq!(at.hash().as_str().len(), 76);
        assert_eq!(&at.hash().as_str()[..12], "01935f2a1b2c");
        assert_eq!(&at.hash().as_str()[12..], plain(at.expose()));
        let rt = Secret::generate_issued_at(TokenKind::RefreshToken, 1);
        assert_eq!(&rt.hash().as_str()[..12], "000000000001");
        // Later tokens sort after earlier ones, whatever their random parts.
        let earlier = Secret::generate_issued_at(TokenKind::RefreshToken, 1_700_000_000_000);
        let later = Secret::generate_issued_at(TokenKind::RefreshToken, 1_700_000_000_001);
        assert!(earlier.hash().as_str() < later.hash().as_str());
        // Kept modulo 2^48.
        let wrapped = Secret::generate_issued_at(TokenKind::AccessToken, (1 << 48) + 5);
        assert!(wrapped.expose().starts_with("gate_at_000000000005"));
        // Not time-ordered: the hash alone, even given a time.
        let key = Secret::generate_issued_at(TokenKind::ApiKey, 0x0193_5f2a_1b2c);
        assert_eq!(key.expose().len(), "gate_key_".len() + 43);
        assert_eq!(key.hash().as_str().len(), 64);
        // An access token of the earlier shape (no time).
        let old = format!("gate_at_{}", random_urlsafe(32));
        assert_eq!(TokenHash::of(&old).as_str(), plain(&old));
        // Look-alikes: upper-case digits, one character short, another kind's prefix.
        let body = random_urlsafe(32);
        for s in [
            format!("gate_at_01935F2A1B2C{body}"),
            format!("gate_at_01935f2a1b2{body}"),
            format!("gate_ac_01935f2a1b2c{body}"),
        ] {
            assert_eq!(TokenHash::of(&s).as_str(), plain(&s), "{s}");
        }
    }

    #[test]
    fn constant_time_eq_compares_content_and_length() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(constant_time_eq(b"", b""));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }

    #[test]
    fn random_urlsafe_has_expected_length_and_alphabet() {
        let value = random_urlsafe(16);
        assert_eq!(value.len(), 22);
        assert!(
            value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_eq!(random_urlsafe(0), "");
        assert_ne!(random_urlsafe(16), random_urlsafe(16));
    }
}
