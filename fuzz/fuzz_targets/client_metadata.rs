//! Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document): the
//! `client_id` URL (first line of the input), the fetched document (the rest) and the
//! `Cache-Control` lifetime.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == b'\n').unwrap_or(data.len());
    let client_id = String::from_utf8_lossy(&data[..split]);
    let body = data.get(split + 1..).unwrap_or(&[]);
    let _ = gatehouse::domain::cimd::validate_client_id_url(&client_id);
    if let Ok(doc) = gatehouse::domain::cimd::validate_document(&client_id, body) {
        let _ = doc;
    }
    let _ = gatehouse::domain::cimd::cache_lifetime(std::str::from_utf8(body).ok());
});
