//! The token request form (RFC 6749 §3.2, application/x-www-form-urlencoded): parameter
//! collection, repeats refused, and the scope and PKCE verifier checks it feeds.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(params) =
        gatehouse::oauth::client_auth::parse_params(url::form_urlencoded::parse(data))
    {
        if let Some(scope) = params.get("scope") {
            let _ = gatehouse::domain::scope::ScopeSet::parse(scope);
        }
        if let Some(verifier) = params.get("code_verifier") {
            if gatehouse::domain::pkce::is_valid_verifier(verifier) {
                let challenge = gatehouse::domain::pkce::s256_challenge(verifier);
                assert!(gatehouse::domain::pkce::is_valid_challenge(&challenge));
                assert!(gatehouse::domain::pkce::verify_s256(verifier, &challenge));
            }
        }
    }
});
