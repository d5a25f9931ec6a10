//! The JSON-RPC check of a `POST /mcp` body (`gatehouse::mcp::body::check`): any bytes give
//! either a message or a refusal with a 4xx or in-band status and a JSON-RPC error body.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(refusal) = gatehouse::mcp::body::check(data) {
        assert!(refusal.status.is_client_error() || refusal.status.is_success());
        let body = refusal.body();
        assert!(body["error"]["code"].is_i64());
    }
});
