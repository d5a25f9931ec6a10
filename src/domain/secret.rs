//! Bearer secrets: generation, prefixes, redaction, hashing for storage and
//! constant-time comparison.
//!
//! Every credential Gatehouse issues is `prefix + BASE64URL-NOPAD(32 random
//! bytes)`, i.e. 256 bits of entropy from the OS RNG, which satisfies the
//! ≥128-bit guessing resistance of RFC 6749 §10.10 and OAuth 2.1 draft-13
//! §7.1. Only the SHA-256 of a secret is stored (RFC 6819 §5.1.4.1.3), so a
//! database leak does not reveal usable tokens.

use std::fmt::{self, Write as _};

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use rand::{RngCore as _, rngs::OsRng};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// Number of random bytes in every generated secret (256 bits).
const SECRET_BYTES: usize = 32;

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
}

impl TokenKind {
    const ALL: [TokenKind; 7] = [
        TokenKind::AccessToken,
        TokenKind::RefreshToken,
        TokenKind::AuthorizationCode,
        TokenKind::ClientSecret,
        TokenKind::ApiKey,
        TokenKind::SetupToken,
        TokenKind::PersonalUrl,
    ];

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
    /// (RFC 6749 §10.10: ≥256 bits of entropy).
    pub fn generate(kind: TokenKind) -> Secret {
        Secret(format!("{}{}", kind.prefix(), random_urlsafe(SECRET_BYTES)))
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
    /// included (see [`TokenHash::of`]).
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

/// Lowercase hexadecimal SHA-256 (FIPS 180-4) of a secret string: always 64
/// characters `[0-9a-f]`. This is what the database stores and looks up
/// (RFC 6819 §5.1.4.1.3); it is not secret, so `Debug` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenHash(String);

impl TokenHash {
    /// SHA-256 of the UTF-8 bytes of `s`, as 64 lowercase hex characters.
    pub fn of(s: &str) -> TokenHash {
        let digest = Sha256::digest(s.as_bytes());
        let mut hex = String::with_capacity(64);
        for byte in digest {
            // Writing to a String cannot fail.
            let _ = write!(hex, "{byte:02x}");
        }
        TokenHash(hex)
    }

    /// The 64-character lowercase hex form.
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
