//! The registration document of `POST /oauth/register` (RFC 7591 §2), without storage.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = gatehouse::oauth::register::check_document(data);
});
