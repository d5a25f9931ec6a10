//! DPoP proofs (RFC 9449): the JWT a client signs with a key of its own and sends in the `DPoP`
//! header, so that a token issued to it can be used only with that key.
//!
//! [`verify_proof`] carries out RFC 9449 §4.3: one JWT, header `typ` [`PROOF_TYPE`], an
//! asymmetric `alg` of [`SIGNING_ALGS`], a public key in `jwk` (no private member) that
//! verifies the signature (checked by the `jsonwebtoken` crate), claims `jti`, `htm` equal to
//! the request's method, `htu` equal to the request's URL without query and fragment, `iat`
//! within [`PROOF_WINDOW_SECS`] of now either way, and at a resource `ath` equal to
//! [`access_token_hash`] of the presented token. The key is named by its RFC 7638 thumbprint
//! ([`thumbprint`]), the `jkt` a bound token carries (`cnf.jkt`, RFC 9449 §6). Whether the
//! `jti` was seen before is the caller's to check (it needs storage).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use url::Url;

use super::client_assertion::PRIVATE_KEY_MEMBERS;

/// The `typ` header of a DPoP proof (RFC 9449 §4.2).
pub const PROOF_TYPE: &str = "dpop+jwt";
/// The request header that carries a proof (RFC 9449 §4.1).
pub const HEADER: &str = "DPoP";
/// The `token_type` of a bound access token, and the `Authorization` scheme it is sent with
/// (RFC 9449 §5, §7.1).
pub const TOKEN_TYPE: &str = "DPoP";
/// The signature algorithms accepted (RFC 7518 §3.1, RFC 8037 §3.1): asymmetric only, as
/// advertised in `dpop_signing_alg_values_supported`.
pub const SIGNING_ALGS: [&str; 4] = super::client_assertion::SIGNING_ALGS;
/// How far a proof's `iat` may be from the server's clock, either way, in seconds. A `jti` is
/// remembered this long after its `iat`, which is as long as the proof could be accepted.
pub const PROOF_WINDOW_SECS: i64 = 60;
/// Longest proof read, in bytes.
pub const MAX_PROOF_BYTES: usize = 8 * 1024;
/// Longest `jti`, in bytes.
pub const MAX_JTI_BYTES: usize = 256;

/// Why a proof is refused (`invalid_dpop_proof`, with this text; RFC 9449 §5, §7.1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    /// More than one `DPoP` header, or one that is not text.
    #[error("send exactly one DPoP header")]
    NotOne,
    /// Not a signed JWT, or larger than [`MAX_PROOF_BYTES`].
    #[error("the DPoP proof is not a signed JWT")]
    NotJwt,
    /// `typ` is not [`PROOF_TYPE`].
    #[error("the DPoP proof's typ must be dpop+jwt")]
    WrongType,
    /// `alg` outside [`SIGNING_ALGS`].
    #[error("the DPoP proof's alg is not accepted (use RS256, PS256, ES256 or EdDSA)")]
    WrongAlgorithm,
    /// No `jwk`, a private key in it, or a key without the members its type needs.
    #[error("the DPoP proof's jwk must be a public key")]
    BadKey,
    /// An RSA `jwk` whose modulus is shorter than [`MIN_RSA_BITS`].
    #[error("the DPoP proof's RSA key is too small: use at least 2048 bits")]
    WeakKey,
    /// The signature does not verify with the `jwk`, or the claims are incomplete.
    #[error(
        "the DPoP proof's signature does not verify with its jwk, or its claims are incomplete"
    )]
    BadSignature,
    /// `htm` is not the request's method.
    #[error("the DPoP proof's htm is not this request's method")]
    WrongMethod,
    /// `htu` is not the request's URL.
    #[error("the DPoP proof's htu is not this request's URL")]
    WrongUrl,
    /// `iat` further than [`PROOF_WINDOW_SECS`] from now.
    #[error("the DPoP proof's iat is too far from the server's time")]
    Stale,
    /// `jti` empty or too long.
    #[error("the DPoP proof needs a jti of 1 to 256 bytes")]
    BadJti,
    /// `ath` missing or not the hash of the presented access token.
    #[error("the DPoP proof's ath is not the hash of the access token")]
    WrongTokenHash,
    /// The `jti` was used before within the window.
    #[error("the DPoP proof was already used")]
    Replayed,
    /// The key is not the one the token (or the authorization code) is bound to.
    #[error("the DPoP proof is signed with another key than the token is bound to")]
    WrongKey,
}

/// The claims of a proof (RFC 9449 §4.2).
#[derive(Debug, Deserialize)]
struct ProofClaims {
    jti: String,
    htm: String,
    htu: String,
    iat: i64,
    #[serde(default)]
    ath: Option<String>,
}

/// A proof that passed [`verify_proof`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedProof {
    /// The RFC 7638 thumbprint of the proof's key (base64url of a SHA-256).
    pub jkt: String,
    /// The proof's `jti`, as sent.
    pub jti: String,
    /// The proof's `iat`, Unix seconds.
    pub iat: i64,
}

impl VerifiedProof {
    /// Until when (Unix seconds) this proof's `jti` must be remembered: as long as a proof with
    /// its `iat` is accepted.
    pub fn remember_until(&self) -> i64 {
        self.iat.saturating_add(PROOF_WINDOW_SECS + 1)
    }

    /// The key a replay record is stored under: the SHA-256 (hex) of the thumbprint and the
    /// `jti` (`jti` values are unique per key, RFC 9449 §11.1).
    pub fn replay_key(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(self.jkt.as_bytes());
        hasher.update(b".");
        hasher.update(self.jti.as_bytes());
        hex::encode(hasher.finalize())
    }
}

/// What the request a proof comes with is.
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    /// The request's method, e.g. `POST`.
    pub method: &'a str,
    /// The request's URL as published (the token endpoint, the MCP URL), without query or
    /// fragment.
    pub url: &'a str,
    /// At a resource, the access token presented with the proof (its hash must be `ath`).
    pub access_token: Option<&'a str>,
    /// Now, Unix seconds.
    pub now: i64,
}

/// `ath`: base64url (no padding) of the SHA-256 of the access token's ASCII (RFC 9449 §4.2).
pub fn access_token_hash(token: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(token.as_bytes()))
}

/// The RFC 7638 thumbprint of a public JWK: base64url of the SHA-256 of the JSON object of its
/// required members (`EC`: `crv`, `kty`, `x`, `y`; `RSA`: `e`, `kty`, `n`; `OKP` (RFC 8037
/// §2): `crv`, `kty`, `x`), in lexicographic order, without white space. `None` for another
/// key type or a required member that is missing or not a string.
pub fn thumbprint(jwk: &Value) -> Option<String> {
    let member = |name: &str| -> Option<String> {
        let value = jwk.get(name)?.as_str()?;
        serde_json::to_string(value).ok()
    };
    let kty = jwk.get("kty")?.as_str()?;
    let canonical = match kty {
        "EC" => format!(
            "{{\"crv\":{},\"kty\":\"EC\",\"x\":{},\"y\":{}}}",
            member("crv")?,
            member("x")?,
            member("y")?
        ),
        "RSA" => format!(
            "{{\"e\":{},\"kty\":\"RSA\",\"n\":{}}}",
            member("e")?,
            member("n")?
        ),
        "OKP" => format!(
            "{{\"crv\":{},\"kty\":\"OKP\",\"x\":{}}}",
            member("crv")?,
            member("x")?
        ),
        _ => return None,
    };
    Some(URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes())))
}

/// The smallest RSA modulus accepted in a proof's `jwk`, bits (RFC 7518 §3.3: 2048 or larger).
pub const MIN_RSA_BITS: usize = 2048;

/// The size in bits of an RSA modulus given as base64url (`n`, RFC 7518 §6.3.1.1); 0 when it
/// does not decode.
fn rsa_bits(n: &str) -> usize {
    let Ok(bytes) = URL_SAFE_NO_PAD.decode(n) else {
        return 0;
    };
    match bytes.iter().position(|b| *b != 0) {
        Some(first) => (bytes.len() - first - 1) * 8 + (8 - bytes[first].leading_zeros() as usize),
        None => 0,
    }
}

/// `url` without query and fragment, as `Url` normalizes it (scheme and host in lower case,
/// the default port left out), for the `htu` comparison of RFC 9449 §4.3 step 9.
fn normalized(url: &str) -> Option<Url> {
    let mut url = Url::parse(url).ok()?;
    url.set_query(None);
    url.set_fragment(None);
    Some(url)
}

/// Checks the proof `proof` for the request `expected` (RFC 9449 §4.3 steps 1–11 and, with an
/// access token, step 12's `ath`; not the `jti` replay, not the key binding): the verified
/// key's thumbprint, `jti` and `iat`.
///
/// Errors: [`ProofError`], the first check that fails.
pub fn verify_proof(proof: &str, expected: &Expected<'_>) -> Result<VerifiedProof, ProofError> {
    if proof.len() > MAX_PROOF_BYTES || proof.split('.').count() != 3 {
        return Err(ProofError::NotJwt);
    }
    let header_json: Value = proof
        .split('.')
        .next()
        .and_then(|h| URL_SAFE_NO_PAD.decode(h).ok())
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or(ProofError::NotJwt)?;
    let header = jsonwebtoken::decode_header(proof).map_err(|_| ProofError::NotJwt)?;
    if header.typ.as_deref() != Some(PROOF_TYPE) {
        return Err(ProofError::WrongType);
    }
    let alg = header_json
        .get("alg")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !SIGNING_ALGS.contains(&alg) {
        return Err(ProofError::WrongAlgorithm);
    }
    let raw_jwk = header_json
        .get("jwk")
        .and_then(Value::as_object)
        .ok_or(ProofError::BadKey)?;
    if PRIVATE_KEY_MEMBERS.iter().any(|m| raw_jwk.contains_key(*m)) {
        return Err(ProofError::BadKey);
    }
    let jkt = thumbprint(&header_json["jwk"]).ok_or(ProofError::BadKey)?;
    if raw_jwk.get("kty").and_then(Value::as_str) == Some("RSA")
        && rsa_bits(raw_jwk.get("n").and_then(Value::as_str).unwrap_or_default()) < MIN_RSA_BITS
    {
        return Err(ProofError::WeakKey);
    }
    let jwk = header.jwk.as_ref().ok_or(ProofError::BadKey)?;
    let key = DecodingKey::from_jwk(jwk).map_err(|_| ProofError::BadKey)?;
    let mut validation = Validation::new(header.alg);
    validation.validate_exp = false;
    validation.validate_aud = false;
    validation.required_spec_claims.clear();
    let claims = jsonwebtoken::decode::<ProofClaims>(proof, &key, &validation)
        .map_err(|_| ProofError::BadSignature)?
        .claims;
    if claims.htm != expected.method {
        return Err(ProofError::WrongMethod);
    }
    match (normalized(&claims.htu), normalized(expected.url)) {
        (Some(sent), Some(want)) if sent == want => {}
        _ => return Err(ProofError::WrongUrl),
    }
    // `abs_diff`: any `iat` a proof carries (i64::MIN included) is compared without overflow.
    if claims.iat.abs_diff(expected.now) > PROOF_WINDOW_SECS.unsigned_abs() {
        return Err(ProofError::Stale);
    }
    if claims.jti.is_empty() || claims.jti.len() > MAX_JTI_BYTES {
        return Err(ProofError::BadJti);
    }
    if let Some(token) = expected.access_token {
        let want = access_token_hash(token);
        let sent = claims.ath.as_deref().unwrap_or_default();
        if !super::secret::constant_time_eq(sent.as_bytes(), want.as_bytes()) {
            return Err(ProofError::WrongTokenHash);
        }
    }
    Ok(VerifiedProof {
        jkt,
        jti: claims.jti,
        iat: claims.iat,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn thumbprint_of_rfc_7638_example() {
        // RFC 7638 §3.1.
        let jwk = json!({
            "kty": "RSA",
            "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
            "e": "AQAB",
            "alg": "RS256",
            "kid": "2011-04-29"
        });
        assert_eq!(
            thumbprint(&jwk).as_deref(),
            Some("NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs")
        );
        assert_eq!(thumbprint(&json!({"kty": "oct", "k": "abc"})), None);
        assert_eq!(thumbprint(&json!({"kty": "EC", "crv": "P-256"})), None);
    }

    #[test]
    fn ath_is_base64url_sha256() {
        // SHA-256 of "abc" (FIPS 180-2 example), base64url without padding.
        assert_eq!(
            access_token_hash("abc"),
            "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0"
        );
    }

    #[test]
    fn malformed_proofs_are_refused_before_any_key_is_used() {
        let expected = Expected {
            method: "POST",
            url: "https://as.example/oauth/token",
            access_token: None,
            now: 1000,
        };
        assert_eq!(verify_proof("a.b", &expected), Err(ProofError::NotJwt));
        let header = |h: Value| URL_SAFE_NO_PAD.encode(h.to_string());
        let jwt = |h: Value| format!("{}.e30.c2ln", header(h));
        let jwk = json!({"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"});
        assert_eq!(
            verify_proof(
                &jwt(json!({"alg": "EdDSA", "typ": "JWT", "jwk": jwk})),
                &expected
            ),
            Err(ProofError::WrongType)
        );
        assert_eq!(
            verify_proof(
                &jwt(json!({"alg": "HS256", "typ": "dpop+jwt", "jwk": jwk})),
                &expected
            ),
            Err(ProofError::WrongAlgorithm)
        );
        let mut private = jwk.clone();
        private["d"] = json!("secret");
        assert_eq!(
            verify_proof(
                &jwt(json!({"alg": "EdDSA", "typ": "dpop+jwt", "jwk": private})),
                &expected
            ),
            Err(ProofError::BadKey)
        );
        assert_eq!(
            verify_proof(&jwt(json!({"alg": "EdDSA", "typ": "dpop+jwt"})), &expected),
            Err(ProofError::BadKey)
        );
        // A 1024-bit RSA modulus is named as too small (RFC 7518 §3.3); a 2048-bit one (RFC
        // 7638's example key) passes that check and fails later, on its signature.
        let mut small = vec![0x80u8];
        small.extend([0x5a; 127]);
        let small = json!({"kty": "RSA", "n": URL_SAFE_NO_PAD.encode(&small), "e": "AQAB"});
        assert_eq!(
            verify_proof(
                &jwt(json!({"alg": "RS256", "typ": "dpop+jwt", "jwk": small})),
                &expected
            ),
            Err(ProofError::WeakKey)
        );
        let full = json!({"kty": "RSA", "e": "AQAB", "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"});
        assert_eq!(rsa_bits(full["n"].as_str().unwrap()), 2048);
        assert_eq!(
            verify_proof(
                &jwt(json!({"alg": "RS256", "typ": "dpop+jwt", "jwk": full})),
                &expected
            ),
            Err(ProofError::BadSignature)
        );
        assert_eq!(
            verify_proof(
                &jwt(json!({"alg": "EdDSA", "typ": "dpop+jwt", "jwk": jwk})),
                &expected
            ),
            Err(ProofError::BadSignature)
        );
    }

    #[test]
    fn htu_ignores_query_fragment_and_case_of_host() {
        assert_eq!(
            normalized("HTTPS://AS.example:443/oauth/token?x=1#f"),
            normalized("https://as.example/oauth/token")
        );
        assert_ne!(
            normalized("https://as.example/oauth/token/"),
            normalized("https://as.example/oauth/token")
        );
    }
}
