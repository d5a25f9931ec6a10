//! The pure checks of an authorization request's query (RFC 6749 §4.1.1, RFC 7636 §4.3):
//! parameters, `scope`, `code_challenge`, `redirect_uri`, `client_id` as a metadata URL.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(params) = gatehouse::oauth::client_auth::parse_params(url::form_urlencoded::parse(data))
    else {
        return;
    };
    if let Some(scope) = params.get("scope") {
        if gatehouse::domain::scope::ScopeSet::parse(scope).is_ok() {
            let _ = gatehouse::oauth::authorize::consent_covers(scope, scope);
        }
    }
    if let Some(challenge) = params.get("code_challenge") {
        let _ = gatehouse::domain::pkce::is_valid_challenge(challenge);
    }
    if let Some(uri) = params.get("redirect_uri") {
        if gatehouse::domain::redirect_uri::validate_registration(uri).is_ok() {
            let url = gatehouse::oauth::authorize::redirect_url(
                uri,
                "https://issuer.example",
                &[
                    ("code", "c"),
                    ("state", params.get("state").map_or("", |s| s)),
                ],
            );
            // The client is sent to the very string it registered, its parameters after it.
            assert!(url.starts_with(uri.as_str()), "{uri} -> {url}");
            assert!(
                matches!(url.as_bytes().get(uri.len()), Some(b'?' | b'&' | b'c')),
                "{uri} -> {url}"
            );
        }
    }
    if let Some(client_id) = params.get("client_id") {
        if gatehouse::domain::cimd::is_url_client_id(client_id) {
            let _ = gatehouse::domain::cimd::validate_client_id_url(client_id);
        }
    }
});
