//! Property tests (proptest) of the pure domain rules: redirect-URI matching, scope sets,
//! PKCE and the sealing of refresh successors. Each property states what must hold for every
//! generated input, not for a few hand-picked ones.

use proptest::prelude::*;

use super::pkce::{is_valid_challenge, is_valid_verifier, s256_challenge, verify_s256};
use super::redirect_uri::{matches, uses_only_uri_characters, validate_registration};
use super::scope::{Scope, ScopeSet};
use super::successor::{open, seal};
use crate::oauth::authorize::redirect_url;

fn host() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9]{0,9}(\\.[a-z]{2,6}){1,2}"
}

fn path() -> impl Strategy<Value = String> {
    proptest::collection::vec("[A-Za-z0-9_~-]{1,8}", 0..4).prop_map(|s| format!("/{}", s.join("/")))
}

fn https_uri() -> impl Strategy<Value = String> {
    (host(), path()).prop_map(|(h, p)| format!("https://{h}{p}"))
}

/// A candidate redirect URI: a scheme and authority of each accepted form, then a tail of
/// URI characters mixed with characters RFC 3986 does not allow (non-ASCII, space, double
/// quote, backtick, `<>^{|}`) and bare `%`.
fn redirect_candidate() -> impl Strategy<Value = String> {
    (
        prop_oneof![
            Just("https://good.example"),
            Just("HTTPS://Good.Example:443"),
            Just("http://127.0.0.1:3000"),
            Just("http://localhost"),
            Just("http://[::1]:8080"),
            Just("cursor://anysphere.cursor-retrieval"),
            Just("com.example.app:"),
            Just("cc:"),
        ],
        "[a-zA-Z0-9%:/?@!$&'()*+,;=._~\\-\\[\\]\"<>^`{|} \u{80}-\u{10FFFF}]{0,24}",
    )
        .prop_map(|(head, tail)| format!("{head}{tail}"))
}

fn verifier() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._~-]{43,128}"
}

fn scope() -> impl Strategy<Value = Scope> {
    prop_oneof![
        Just(Scope::McpRead),
        Just(Scope::McpWrite),
        Just(Scope::OfflineAccess)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    // RFC 9700 §4.1.3: a registered URI matches itself, and case of scheme and host or the
    // default port make no difference (RFC 3986 §6.2.2, §6.2.3).
    #[test]
    fn a_registered_uri_matches_itself_and_its_normal_forms(uri in https_uri()) {
        prop_assert!(validate_registration(&uri).is_ok(), "{}", uri);
        prop_assert!(matches(&uri, &uri));
        let upper = uri.replacen("https://", "HTTPS://", 1);
        prop_assert!(matches(&uri, &upper));
        let rest = &uri["https://".len()..];
        let (h, p) = rest.split_once('/').map_or((rest, ""), |(h, p)| (h, p));
        let with_port = format!("https://{}:443/{}", h.to_ascii_uppercase(), p);
        prop_assert!(matches(&uri, &with_port), "{} vs {}", uri, with_port);
    }

    // RFC 3986 §2: a redirect URI accepted at registration is made of URI characters only,
    // and the client is sent to that very string with the parameters appended to its query
    // (RFC 6749 §4.1.2, RFC 9207 §2), which a URL parser reads back.
    #[test]
    fn an_accepted_redirect_uri_is_sent_back_unchanged(
        uri in redirect_candidate(),
        state in "[ -~\u{80}-\u{10FFFF}]{0,12}",
    ) {
        if validate_registration(&uri).is_ok() {
            prop_assert!(uses_only_uri_characters(&uri), "{}", uri);
            let url = redirect_url(&uri, "https://issuer.example", &[("code", "c"), ("state", &state)]);
            prop_assert!(url.starts_with(&uri), "{} -> {}", uri, url);
            let parsed = url::Url::parse(&url);
            prop_assert!(parsed.is_ok(), "{}", url);
            let pairs: Vec<(String, String)> = parsed.unwrap().query_pairs().into_owned().collect();
            let last: Vec<(&str, &str)> = pairs.iter().rev().take(3).rev().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            prop_assert_eq!(last, vec![("code", "c"), ("state", state.as_str()), ("iss", "https://issuer.example")]);
        }
    }

    // RFC 3986 §2.1, §2.4, Appendix A: a bare `%` or a character outside the URI characters
    // anywhere in a redirect URI of any form is refused at registration.
    #[test]
    fn a_redirect_uri_with_a_character_rfc_3986_does_not_allow_is_refused(
        uri in https_uri(),
        at in any::<prop::sample::Index>(),
        bad in prop_oneof!["[ \"<>^`{|}\u{80}-\u{10FFFF}]", "%[g-zG-Z%]", "%[0-9a-fA-F][g-zG-Z%]"],
    ) {
        let cut = "https://".len() + at.index(uri.len() - "https://".len());
        for head in ["", "http://127.0.0.1:3000/cb", "com.example.app:/cb"] {
            let candidate = if head.is_empty() {
                format!("{}{}{}", &uri[..cut], bad, &uri[cut..])
            } else {
                format!("{head}{bad}")
            };
            prop_assert!(validate_registration(&candidate).is_err(), "{}", candidate);
        }
    }

    // No prefix, suffix, query, fragment, other host or other port matches.
    #[test]
    fn nothing_looser_than_exact_matching(
        uri in https_uri(),
        extra in "[a-z0-9]{1,6}",
        other in host(),
        port in 1u16..=65535,
    ) {
        let candidate = format!("{uri}{extra}");
        prop_assert!(!matches(&uri, &candidate), "{} vs {}", uri, candidate);
        let candidate = format!("{uri}/{extra}");
        prop_assert!(!matches(&uri, &candidate), "{} vs {}", uri, candidate);
        let candidate = format!("{uri}?{extra}");
        prop_assert!(!matches(&uri, &candidate), "{} vs {}", uri, candidate);
        let candidate = format!("{uri}#{extra}");
        prop_assert!(!matches(&uri, &candidate), "{} vs {}", uri, candidate);
        let rest = &uri["https://".len()..];
        let (h, p) = rest.split_once('/').map_or((rest, ""), |(h, p)| (h, p));
        if other != h {
            let candidate = format!("https://{other}/{p}");
            prop_assert!(!matches(&uri, &candidate), "{} vs {}", uri, candidate);
        }
        if port != 443 {
            let candidate = format!("https://{h}:{port}/{p}");
            prop_assert!(!matches(&uri, &candidate), "{} vs {}", uri, candidate);
        }
        let candidate = format!("http://{h}/{p}");
        prop_assert!(!matches(&uri, &candidate), "{} vs {}", uri, candidate);
    }

    // RFC 8252 §7.3: an http loopback redirect matches on any port, but nothing else varies.
    #[test]
    fn loopback_redirects_match_on_any_port(
        p in path(),
        a in 1u16..=65535,
        b in 1u16..=65535,
        ip in prop_oneof![Just("127.0.0.1"), Just("[::1]")],
    ) {
        let registered = format!("http://{ip}{p}");
        let candidate = format!("http://{ip}:{b}{p}");
        prop_assert!(matches(&registered, &candidate), "{} vs {}", registered, candidate);
        let candidate = format!("http://{ip}:{b}{p}");
        prop_assert!(matches(&format!("http://{ip}:{a}{p}"), &candidate), "{} vs {}", format!("http://{ip}:{a}{p}"), candidate);
        let candidate = format!("http://{ip}:{b}{p}x");
        prop_assert!(!matches(&registered, &candidate), "{} vs {}", registered, candidate);
    }

    // RFC 6749 §3.3: order, repeats and extra whitespace do not change a scope set, and its
    // display parses back to itself.
    #[test]
    fn scope_sets_ignore_order_repeats_and_spacing(
        scopes in proptest::collection::vec(scope(), 0..8),
        seps in proptest::collection::vec(prop_oneof![Just(" "), Just("  "), Just("\t"), Just("\n")], 8),
    ) {
        let expected: ScopeSet = scopes.iter().copied().collect();
        let mut text = String::new();
        for (i, s) in scopes.iter().enumerate() {
            text.push_str(seps[i % seps.len()]);
            text.push_str(s.as_str());
        }
        let parsed = ScopeSet::parse(&text).unwrap();
        prop_assert_eq!(&parsed, &expected);
        let mut reversed = scopes.clone();
        reversed.reverse();
        let again = ScopeSet::parse(
            &reversed.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" "),
        ).unwrap();
        prop_assert_eq!(&again, &expected);
        prop_assert_eq!(ScopeSet::parse(&expected.to_string()).unwrap(), expected);
    }

    // RFC 7636 §4.1–4.2, §4.6: every valid verifier gives a valid 43-character S256
    // challenge that it and only it verifies.
    #[test]
    fn pkce_challenges_verify_only_their_verifier(v in verifier(), w in verifier()) {
        prop_assert!(is_valid_verifier(&v));
        let challenge = s256_challenge(&v);
        prop_assert_eq!(challenge.len(), 43);
        prop_assert!(is_valid_challenge(&challenge));
        prop_assert!(verify_s256(&v, &challenge));
        if v != w {
            prop_assert!(!verify_s256(&w, &challenge));
        }
    }

    // RFC 7636 §4.1: shorter or longer verifiers, or ones with other characters, are refused.
    #[test]
    fn pkce_verifiers_outside_the_grammar_are_refused(
        short in "[A-Za-z0-9]{0,42}",
        long in "[A-Za-z0-9]{129,200}",
        bad in "[A-Za-z0-9]{20,40}[^A-Za-z0-9._~-][A-Za-z0-9]{20,40}",
    ) {
        prop_assert!(!is_valid_verifier(&short));
        prop_assert!(!is_valid_verifier(&long));
        prop_assert!(!is_valid_verifier(&bad));
    }

    // Sealing: what is sealed under a token opens with that token only, altered bytes never
    // open, and the size is the plaintext's plus 28 bytes (nonce and tag, RFC 8439 §2.8).
    #[test]
    fn sealed_successors_open_only_with_their_token_and_unaltered(
        token in "[A-Za-z0-9_]{1,64}",
        other in "[A-Za-z0-9_]{1,64}",
        plaintext in proptest::collection::vec(any::<u8>(), 0..512),
        flip in any::<usize>(),
        bit in 0u8..8,
    ) {
        let sealed = seal(&token, &plaintext);
        prop_assert_eq!(sealed.len(), plaintext.len() + 28);
        prop_assert_eq!(open(&token, &sealed), Some(plaintext.clone()));
        if other != token {
            prop_assert_eq!(open(&other, &sealed), None);
        }
        let mut altered = sealed.clone();
        let i = flip % altered.len();
        altered[i] ^= 1 << bit;
        prop_assert_eq!(open(&token, &altered), None);
        prop_assert_eq!(open(&token, &sealed[..sealed.len() - 1]), None);
    }
}
