//! Redirect-URI parsing and matching (RFC 9700 §4.1.3 exact matching, RFC 8252 §7.3 loopback
//! ports): the input is `registered` and `requested`, split at the first NUL byte.
#![no_main]
use gatehouse::domain::redirect_uri::{host_for_display, matches, validate_registration};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (registered, requested) = text.split_once('\0').unwrap_or((&text, &text));
    let valid = validate_registration(registered).is_ok();
    let _ = validate_registration(requested);
    let m = matches(registered, requested);
    let _ = host_for_display(registered);
    // A URI that was accepted at registration is matched by itself.
    if valid {
        assert!(matches(registered, registered), "{registered:?}");
    }
    let _ = m;
});
