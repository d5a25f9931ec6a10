//! Proof Key for Code Exchange, S256 method only (RFC 7636; OAuth 2.1
//! draft-13 §4.1.1 requires PKCE and S256 for every client).

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use sha2::{Digest as _, Sha256};

use super::secret::constant_time_eq;

/// True if `v` is a well-formed `code_verifier` (RFC 7636 §4.1): 43 to 128
/// characters, each an unreserved character `[A-Z] / [a-z] / [0-9] / "-" /
/// "." / "_" / "~"`.
pub fn is_valid_verifier(v: &str) -> bool {
    (43..=128).contains(&v.len())
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// True if `c` has the shape of an S256 `code_challenge` (RFC 7636 §4.2):
/// exactly 43 characters of the base64url alphabet `[A-Za-z0-9_-]`, the
/// unpadded encoding of a 32-byte SHA-256 digest.
pub fn is_valid_challenge(c: &str) -> bool {
    c.len() == 43
        && c.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

/// The S256 challenge of `verifier` (RFC 7636 §4.2):
/// `BASE64URL-NOPAD(SHA256(ASCII(code_verifier)))`, 43 characters.
pub fn s256_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Server-side check of the token request (RFC 7636 §4.6): `verifier` must be
/// well formed ([`is_valid_verifier`]) and its S256 challenge must equal the
/// stored `challenge`, compared in constant time.
pub fn verify_s256(verifier: &str, challenge: &str) -> bool {
    is_valid_verifier(verifier)
        && constant_time_eq(s256_challenge(verifier).as_bytes(), challenge.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 7636 Appendix B.
    const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

    #[test]
    fn s256_matches_rfc7636_appendix_b() {
        assert_eq!(s256_challenge(VERIFIER), CHALLENGE);
        assert!(verify_s256(VERIFIER, CHALLENGE));
    }

    #[test]
    fn verify_rejects_wrong_pairs_and_plain_method() {
        // Differs only in bits the decoder would discard: still refused.
        assert!(!verify_s256(
            VERIFIER,
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cN"
        ));
        assert!(!verify_s256(
            VERIFIER,
            "F9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        ));
        // "plain" (challenge == verifier) must not be accepted.
        assert!(!verify_s256(VERIFIER, VERIFIER));
        let other = "a".repeat(43);
        assert!(!verify_s256(&other, CHALLENGE));
        assert!(!verify_s256(VERIFIER, ""));
    }

    #[test]
    fn verify_rejects_malformed_verifier_even_if_hash_matches() {
        let short = "a".repeat(42);
        assert!(!verify_s256(&short, &s256_challenge(&short)));
        let bad_char = format!("{}+", "a".repeat(42));
        assert!(!verify_s256(&bad_char, &s256_challenge(&bad_char)));
    }

    #[test]
    fn verifier_length_and_alphabet() {
        assert!(is_valid_verifier(VERIFIER));
        assert!(!is_valid_verifier(&"a".repeat(42)));
        assert!(is_valid_verifier(&"a".repeat(43)));
        assert!(is_valid_verifier(&"a".repeat(128)));
        assert!(!is_valid_verifier(&"a".repeat(129)));
        assert!(is_valid_verifier(&format!("{}-._~", "Az09".repeat(10))));
        for bad in ['+', '/', '=', ' ', '%', 'é'] {
            let v = format!("{}{bad}", "a".repeat(42));
            assert!(!is_valid_verifier(&v), "{bad:?} must be rejected");
        }
    }

    #[test]
    fn challenge_shape() {
        assert!(is_valid_challenge(CHALLENGE));
        assert!(!is_valid_challenge(&CHALLENGE[..42]));
        assert!(!is_valid_challenge(&format!("{CHALLENGE}A")));
        assert!(!is_valid_challenge(&format!("{}+", &CHALLENGE[..42])));
        assert!(!is_valid_challenge(&format!("{}=", &CHALLENGE[..42])));
        assert!(!is_valid_challenge(&format!("{}.", &CHALLENGE[..42])));
    }
}
