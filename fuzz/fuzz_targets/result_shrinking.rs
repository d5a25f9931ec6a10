//! Tool-result shrinking (`gatehouse::mcp::output::render`): any JSON value and any limit of
//! at least 1024 bytes give a result whose JSON is never larger than the limit.
#![no_main]
use gatehouse::mcp::catalog::Produced;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let max_bytes = 1024 + usize::from(u16::from_le_bytes([data[0], data[1]]) % 8192);
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(&data[2..]) else {
        return;
    };
    let result = gatehouse::mcp::output::render(
        Ok(Produced {
            value,
            links: Vec::new(),
            paging: None,
        }),
        max_bytes,
    );
    let size = serde_json::to_vec(&result).unwrap().len();
    assert!(size <= max_bytes, "{size} > {max_bytes}");
});
