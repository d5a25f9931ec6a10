//! `Authorization` header parsing: Bearer on the MCP route (RFC 6750 §2.1) and Basic client
//! credentials on the token endpoint (RFC 7617, RFC 6749 §2.3.1).
#![no_main]
use http::{HeaderMap, HeaderValue, header};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = HeaderValue::from_bytes(data) else {
        return;
    };
    let mut headers = HeaderMap::new();
    headers.insert(header::AUTHORIZATION, value);
    let _ = gatehouse::mcp::auth::presented_credential(&headers);
    let _ = gatehouse::mcp::auth::bearer_token(&headers);
    let _ = gatehouse::oauth::client_auth::basic_credentials(&headers);
});
