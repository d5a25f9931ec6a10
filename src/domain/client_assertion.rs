//! The rules of a client assertion, the JWT a client signs with its private key to
//! authenticate (`private_key_jwt`: RFC 7523 §2.2 and §3, RFC 7521 §4.2, `OpenID` Connect Core
//! §9), once its signature has been checked: who issued it, for whom, until when, and that its
//! `jti` can be spent once. Also what a client's published keys (`jwks_uri`, `jwks`) must be.

use serde::Deserialize;
use serde_json::Value;
use url::Url;

/// `client_assertion_type` of a JWT client assertion (RFC 7523 §2.2).
pub const CLIENT_ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// The `token_endpoint_auth_method` of clients that authenticate with a signed JWT.
pub const PRIVATE_KEY_JWT: &str = "private_key_jwt";
/// The JWT-bearer authorization grant type (RFC 7523 §2.1), as ID-JAGs are redeemed with.
pub const JWT_BEARER_GRANT: &str = super::grant::GrantType::JwtBearer.as_str();
/// The signature algorithms accepted (RFC 7518 §3.1, RFC 8037 §3.1): asymmetric only, so
/// nothing the server holds can make an assertion.
pub const SIGNING_ALGS: [&str; 4] = ["RS256", "PS256", "ES256", "EdDSA"];
/// Longest an assertion may be valid ahead, in seconds (`exp` at most this far from now).
pub const MAX_LIFETIME_SECS: i64 = 300;
/// Clock difference tolerated between the client and the server, in seconds.
pub const CLOCK_SKEW_SECS: i64 = 30;
/// Longest `jti`, in bytes.
pub const MAX_JTI_BYTES: usize = 256;
/// Most keys in a client's key set.
pub const MAX_KEYS: usize = 20;
/// JWK members that only a private (or symmetric) key has (RFC 7518 §6.2.2, §6.3.2, §6.4.1,
/// RFC 8037 §2): a published key set holding one is refused.
pub const PRIVATE_KEY_MEMBERS: [&str; 8] = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];

/// The claims of a client assertion (RFC 7523 §3).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AssertionClaims {
    /// Issuer: the `client_id`.
    pub iss: String,
    /// Subject: the `client_id`.
    pub sub: String,
    /// Audience: a string or a list of strings.
    pub aud: Audience,
    /// Expiry, Unix seconds.
    pub exp: i64,
    /// Issued at, Unix seconds.
    #[serde(default)]
    pub iat: Option<i64>,
    /// Not before, Unix seconds.
    #[serde(default)]
    pub nbf: Option<i64>,
    /// The assertion's unique id, spent once.
    pub jti: String,
}

/// An `aud` claim: one string or several (RFC 7519 §4.1.3).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Audience {
    /// One audience.
    One(String),
    /// Several.
    Many(Vec<String>),
}

impl Audience {
    /// Whether any value equals one of `accepted`.
    pub fn names_any(&self, accepted: &[&str]) -> bool {
        match self {
            Audience::One(a) => accepted.contains(&a.as_str()),
            Audience::Many(list) => list.iter().any(|a| accepted.contains(&a.as_str())),
        }
    }
}

/// Why an assertion's claims are refused (`invalid_client`, with this text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssertionError {
    /// `iss` or `sub` is not the client.
    #[error("the client assertion's iss and sub must both be the client_id")]
    WrongClient,
    /// `aud` names neither the token endpoint nor the issuer.
    #[error("the client assertion's aud must name the token endpoint or the issuer")]
    WrongAudience,
    /// `exp` has passed.
    #[error("the client assertion has expired")]
    Expired,
    /// `exp` is more than [`MAX_LIFETIME_SECS`] ahead.
    #[error("the client assertion's exp must be at most 5 minutes ahead")]
    TooLong,
    /// `nbf` or `iat` is in the future.
    #[error("the client assertion is not valid yet")]
    NotYet,
    /// `jti` is empty or too long.
    #[error("the client assertion needs a jti of 1 to 256 bytes")]
    BadJti,
}

/// Checks the claims of an assertion whose signature was verified with `client_id`'s key:
/// `iss` = `sub` = `client_id`, `aud` naming one of `audiences` (the token endpoint, the
/// issuer), `exp` not passed and at most [`MAX_LIFETIME_SECS`] ahead, `nbf` and `iat` not in
/// the future, and a `jti` of 1 to [`MAX_JTI_BYTES`] bytes; each time with
/// [`CLOCK_SKEW_SECS`] of tolerance. `now` is Unix seconds.
pub fn check_claims(
    claims: &AssertionClaims,
    client_id: &str,
    audiences: &[&str],
    now: i64,
) -> Result<(), AssertionError> {
    if claims.iss != client_id || claims.sub != client_id {
        return Err(AssertionError::WrongClient);
    }
    if !claims.aud.names_any(audiences) {
        return Err(AssertionError::WrongAudience);
    }
    if claims.exp <= now.saturating_sub(CLOCK_SKEW_SECS) {
        return Err(AssertionError::Expired);
    }
    if claims.exp > now.saturating_add(MAX_LIFETIME_SECS + CLOCK_SKEW_SECS) {
        return Err(AssertionError::TooLong);
    }
    if [claims.nbf, claims.iat]
        .into_iter()
        .flatten()
        .any(|t| t > now + CLOCK_SKEW_SECS)
    {
        return Err(AssertionError::NotYet);
    }
    if claims.jti.is_empty() || claims.jti.len() > MAX_JTI_BYTES {
        return Err(AssertionError::BadJti);
    }
    Ok(())
}

/// Checks a `jwks_uri` (RFC 7591 §2): an absolute `https` URL with a host, without user
/// information or fragment. Errors: what is wrong, in words.
pub fn validate_jwks_uri(uri: &str) -> Result<Url, &'static str> {
    let url = Url::parse(uri).map_err(|_| "jwks_uri is not a URL")?;
    if url.scheme() != "https" {
        return Err("jwks_uri must be an https URL");
    }
    if url.host_str().is_none() {
        return Err("jwks_uri has no host");
    }
    if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
        return Err("jwks_uri must not contain user information or a fragment");
    }
    Ok(url)
}

/// Checks a URL an operator named for a key set or discovery document: https (with a host, no
/// user information or fragment), or plain http on a loopback host
/// ([`super::loopback::is_loopback_host`]). Errors: what is wrong, in words.
pub fn validate_trusted_uri(uri: &str) -> Result<Url, &'static str> {
    if let Ok(url) = Url::parse(uri)
        && url.scheme() == "http"
        && url
            .host_str()
            .is_some_and(super::loopback::is_loopback_host)
    {
        if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
            return Err("the URL must not contain user information or a fragment");
        }
        return Ok(url);
    }
    validate_jwks_uri(uri).map_err(|_| "the URL must be https (plain http only on a loopback host)")
}

/// Checks a key set given inline (`jwks`, RFC 7591 §2): an object with a `keys` array of 1 to
/// [`MAX_KEYS`] objects, each with a `kty`, none holding a private member
/// ([`PRIVATE_KEY_MEMBERS`]). Errors: what is wrong, in words.
pub fn validate_public_jwks(jwks: &Value) -> Result<(), &'static str> {
    let keys = jwks
        .get("keys")
        .and_then(Value::as_array)
        .ok_or("jwks must be an object with a keys array")?;
    if keys.is_empty() || keys.len() > MAX_KEYS {
        return Err("jwks must hold 1 to 20 keys");
    }
    for key in keys {
        let key = key
            .as_object()
            .ok_or("each key in jwks must be an object")?;
        if !key.get("kty").is_some_and(Value::is_string) {
            return Err("each key in jwks needs a kty");
        }
        if PRIVATE_KEY_MEMBERS.iter().any(|m| key.contains_key(*m)) {
            return Err("jwks must hold public keys only (a private or symmetric key was sent)");
        }
    }
    Ok(())
}

/// A JWT claim that is one string or an array of strings (`aud`, RFC 7519 §4.1.3; the
/// ID-JAG's `resource`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    /// A single string.
    One(String),
    /// An array of strings.
    Many(Vec<String>),
}

impl OneOrMany {
    /// Every value, in order.
    pub fn values(&self) -> Vec<&str> {
        match self {
            OneOrMany::One(s) => vec![s.as_str()],
            OneOrMany::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_operators_url_is_https_or_plain_http_on_a_loopback_host() {
        for ok in [
            "https://idp.example/jwks",
            "http://127.0.0.1:8080/jwks",
            "http://localhost/.well-known/openid-configuration",
            "http://[::1]:9/keys",
        ] {
            assert!(validate_trusted_uri(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://idp.example/jwks",
            "http://10.0.0.1/jwks",
            "http://user@127.0.0.1/jwks",
            "http://127.0.0.1/jwks#k",
            "ftp://127.0.0.1/jwks",
            "not a url",
        ] {
            assert!(validate_trusted_uri(bad).is_err(), "{bad}");
        }
        // A client's own jwks_uri stays https only.
        assert!(validate_jwks_uri("http://127.0.0.1:8080/jwks").is_err());
    }

    fn claims(aud: Audience, exp: i64) -> AssertionClaims {
        AssertionClaims {
            iss: "c1".into(),
            sub: "c1".into(),
            aud,
            exp,
            iat: Some(1000),
            nbf: None,
            jti: "j".into(),
        }
    }

    #[test]
    fn claims_name_the_client_and_this_server_and_live_briefly() {
        let token = "https://as.example/oauth/token";
        let issuer = "https://as.example";
        let ok = |c: &AssertionClaims| check_claims(c, "c1", &[token, issuer], 1000);
        assert_eq!(ok(&claims(Audience::One(token.into()), 1100)), Ok(()));
        assert_eq!(
            ok(&claims(
                Audience::Many(vec!["x".into(), issuer.into()]),
                1100
            )),
            Ok(())
        );
        assert_eq!(
            ok(&claims(Audience::One("https://other.example".into()), 1100)),
            Err(AssertionError::WrongAudience)
        );
        assert_eq!(
            ok(&claims(Audience::One(token.into()), 1000 - CLOCK_SKEW_SECS)),
            Err(AssertionError::Expired)
        );
        assert_eq!(
            ok(&claims(Audience::One(token.into()), 1000 + 600)),
            Err(AssertionError::TooLong)
        );
        let mut other = claims(Audience::One(token.into()), 1100);
        other.sub = "c2".into();
        assert_eq!(ok(&other), Err(AssertionError::WrongClient));
        let mut future = claims(Audience::One(token.into()), 1100);
        future.iat = Some(1000 + 120);
        assert_eq!(ok(&future), Err(AssertionError::NotYet));
        let mut long = claims(Audience::One(token.into()), 1100);
        long.jti = "x".repeat(MAX_JTI_BYTES + 1);
        assert_eq!(ok(&long), Err(AssertionError::BadJti));
    }

    #[test]
    fn published_keys_are_public_and_https() {
        assert!(validate_jwks_uri("https://app.example/jwks.json").is_ok());
        assert!(validate_jwks_uri("http://app.example/jwks.json").is_err());
        assert!(validate_jwks_uri("https://u@app.example/j").is_err());
        let public = json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "abc"}]});
        assert!(validate_public_jwks(&public).is_ok());
        let private = json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "abc", "d": "s"}]});
        assert!(validate_public_jwks(&private).is_err());
        let symmetric = json!({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]});
        assert!(validate_public_jwks(&symmetric).is_err());
        assert!(validate_public_jwks(&json!({"keys": []})).is_err());
        assert!(validate_public_jwks(&json!([1])).is_err());
    }
}
