//! Passkeys (issue 36, item 2): adding one on the account page, a discoverable sign-in with it
//! (no email) that continues a pending MCP authorization and asks no second factor, removal,
//! and the refusals: a replayed challenge, an answer to another challenge, another origin, an
//! unknown or removed credential, a disabled account. Ceremonies begin on one instance and
//! finish on a second sharing the database.
//!
//! The authenticator is a software one written here as the browser and a platform
//! authenticator would answer (`WebAuthn` Level 3 §6.1 authenticator data, §6.5 "none"
//! attestation, §6.3.3 assertion signature): a P-256 key from `ring`, its COSE key and
//! attestation object in hand-made CBOR.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::StatusCode;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair as _};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::helpers::{TestApp, html_unescape, new_client, spawn_app_with, spawn_instance};
use crate::oauth_helpers::{EMAIL, PASSWORD, authorize_url, pkce, register_public};

/// A passkey held by a software authenticator.
struct SoftPasskey {
    key: EcdsaKeyPair,
    credential_id: Vec<u8>,
    user_handle: Vec<u8>,
    counter: u32,
}

fn cbor_head(major: u8, n: usize) -> Vec<u8> {
    let m = major << 5;
    match n {
        0..24 => vec![m | n as u8],
        24..256 => vec![m | 24, n as u8],
        _ => vec![m | 25, (n >> 8) as u8, n as u8],
    }
}

fn cbor_bytes(b: &[u8]) -> Vec<u8> {
    [cbor_head(2, b.len()), b.to_vec()].concat()
}

fn cbor_text(s: &str) -> Vec<u8> {
    [cbor_head(3, s.len()), s.as_bytes().to_vec()].concat()
}

fn client_data(kind: &str, challenge: &str, origin: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": kind, "challenge": challenge, "origin": origin, "crossOrigin": false
    }))
    .unwrap()
}

/// User present, user verified, backup eligible and backed up (a synced passkey).
const FLAGS: u8 = 0x01 | 0x04 | 0x08 | 0x10;

impl SoftPasskey {
    fn new() -> SoftPasskey {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        let credential_id = Sha256::digest(pkcs8.as_ref())[..16].to_vec();
        SoftPasskey {
            key,
            credential_id,
            user_handle: Vec::new(),
            counter: 0,
        }
    }

    /// The answer to `navigator.credentials.create` with `options` (the `publicKey` JSON).
    fn create(&mut self, options: &Value, origin: &str) -> Value {
        let rp_id = options["rp"]["id"].as_str().unwrap();
        let challenge = options["challenge"].as_str().unwrap();
        self.user_handle = URL_SAFE_NO_PAD
            .decode(options["user"]["id"].as_str().unwrap())
            .unwrap();
        let public = self.key.public_key().as_ref();
        let (x, y) = (&public[1..33], &public[33..65]);
        // COSE_Key (RFC 9053): kty EC2, alg ES256, crv P-256, x, y.
        let cose = [
            vec![0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21],
            cbor_bytes(x),
            vec![0x22],
            cbor_bytes(y),
        ]
        .concat();
        let mut auth_data = Sha256::digest(rp_id.as_bytes()).to_vec();
        auth_data.push(FLAGS | 0x40);
        auth_data.extend(self.counter.to_be_bytes());
        auth_data.extend([0u8; 16]);
        auth_data.extend((self.credential_id.len() as u16).to_be_bytes());
        auth_data.extend(&self.credential_id);
        auth_data.extend(cose);
        let attestation = [
            vec![0xa3],
            cbor_text("fmt"),
            cbor_text("none"),
            cbor_text("attStmt"),
            vec![0xa0],
            cbor_text("authData"),
            cbor_bytes(&auth_data),
        ]
        .concat();
        let id = URL_SAFE_NO_PAD.encode(&self.credential_id);
        json!({
            "id": id, "rawId": id, "type": "public-key",
            "response": {
                "attestationObject": URL_SAFE_NO_PAD.encode(attestation),
                "clientDataJSON": URL_SAFE_NO_PAD.encode(client_data("webauthn.create", challenge, origin)),
            },
            "extensions": {}
        })
    }

    /// The answer to `navigator.credentials.get` with `options`, signed for `origin`.
    fn get(&mut self, options: &Value, origin: &str) -> Value {
        let rp_id = options["rpId"].as_str().unwrap();
        let challenge = options["challenge"].as_str().unwrap();
        self.counter += 1;
        let mut auth_data = Sha256::digest(rp_id.as_bytes()).to_vec();
        auth_data.push(FLAGS);
        auth_data.extend(self.counter.to_be_bytes());
        let client_data = client_data("webauthn.get", challenge, origin);
        let signed = [auth_data.clone(), Sha256::digest(&client_data).to_vec()].concat();
        let signature = self.key.sign(&SystemRandom::new(), &signed).unwrap();
        let id = URL_SAFE_NO_PAD.encode(&self.credential_id);
        json!({
            "id": id, "rawId": id, "type": "public-key",
            "response": {
                "authenticatorData": URL_SAFE_NO_PAD.encode(&auth_data),
                "clientDataJSON": URL_SAFE_NO_PAD.encode(&client_data),
                "signature": URL_SAFE_NO_PAD.encode(signature.as_ref()),
                "userHandle": URL_SAFE_NO_PAD.encode(&self.user_handle),
            },
            "extensions": {}
        })
    }
}

/// The `data-csrf` of the passkey box `id` on a page.
fn box_csrf(page: &str, id: &str) -> String {
    let start = page
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("#{id} on the page: {page}"));
    let rest = &page[start..];
    let at = rest.find("data-csrf=\"").unwrap() + 11;
    html_unescape(&rest[at..at + rest[at..].find('"').unwrap()])
}

async fn post_json(
    browser: &reqwest::Client,
    url: &str,
    csrf: &str,
    body: &Value,
) -> (StatusCode, Value) {
    let r = browser
        .post(url)
        .header("x-csrf-token", csrf)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Two instances of one deployment sharing a database, whose console is at
/// `http://localhost:PORT` (a relying party id must be a domain, not an IP address); the
/// second requires a second factor (`GATEHOUSE_REQUIRE_2FA=on`), which a passkey satisfies.
async fn deployment() -> (TestApp, TestApp, String) {
    let a = spawn_app_with(|v| {
        let port = v["GATEHOUSE_BIND"].rsplit(':').next().unwrap().to_string();
        v.insert("FRONTEND_URL".into(), format!("http://localhost:{port}"));
    })
    .await;
    let frontend = a.config.frontend_url.url().origin().ascii_serialization();
    let (mcp, issuer, front) = (
        a.config.mcp_server_url.clone(),
        a.config.issuer.clone(),
        frontend.clone(),
    );
    let b = spawn_instance(&a, move |v| {
        v.insert("MCP_SERVER_URL".into(), mcp);
        v.insert("GATEHOUSE_ISSUER".into(), issuer);
        v.insert("FRONTEND_URL".into(), front);
        v.insert("GATEHOUSE_REQUIRE_2FA".into(), "on".into());
        v.insert(
            "GATEHOUSE_SECRET_KEY".into(),
            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY".into(),
        );
    })
    .await;
    (a, b, frontend)
}

/// Begins a passkey sign-in on `app` for `browser` (the sign-in page's token): (csrf,
/// ceremony, options).
async fn begin_sign_in(
    app: &TestApp,
    browser: &reqwest::Client,
    next: &str,
) -> (String, String, Value) {
    let q: String = url::form_urlencoded::byte_serialize(next.as_bytes()).collect();
    let page = browser
        .get(app.url(&format!("/signin?next={q}")))
        .send()
        .await
        .unwrap();
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline'; script"),
        "{csp}"
    );
    let page = page.text().await.unwrap();
    assert!(page.contains("Sign in with a passkey"), "{page}");
    assert!(page.contains("<script src=\"/static/passkey.js\""));
    let csrf = box_csrf(&page, "passkey-signin");
    let (status, options) = post_json(
        browser,
        &app.url("/signin/passkey/options"),
        &csrf,
        &json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{options}");
    assert!(
        options["publicKey"]
            .get("allowCredentials")
            .is_none_or(|a| a.as_array().is_some_and(Vec::is_empty)),
        "a discoverable sign-in names no credential: {options}"
    );
    assert_eq!(options["publicKey"]["userVerification"], "required");
    let ceremony = options["ceremony"].as_str().unwrap().to_string();
    (csrf, ceremony, options["publicKey"].clone())
}

#[tokio::test]
async fn a_passkey_added_on_the_account_page_signs_in_without_an_email_on_any_instance() {
    let (a, b, origin) = deployment().await;
    let account_id = a.create_account(EMAIL, PASSWORD).await;
    let owner = new_client();
    a.sign_in(&owner, EMAIL, PASSWORD).await;

    // Added on the account page: options from A, the answer finished on B.
    let page = owner.get(a.url("/account")).send().await.unwrap();
    assert!(
        page.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("script-src 'self'")
    );
    let page = page.text().await.unwrap();
    assert!(page.contains("No passkeys yet."), "{page}");
    let csrf = box_csrf(&page, "passkey-add");
    let (status, options) = post_json(
        &owner,
        &a.url("/account/passkeys/options"),
        &csrf,
        &json!({ "name": "  Laptop\n" }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{options}");
    let public_key = &options["publicKey"];
    assert_eq!(public_key["rp"]["id"], "localhost");
    assert_eq!(
        public_key["authenticatorSelection"]["residentKey"], "required",
        "a discoverable credential: {public_key}"
    );
    assert_eq!(
        public_key["authenticatorSelection"]["userVerification"],
        "required"
    );
    assert_eq!(
        URL_SAFE_NO_PAD
            .decode(public_key["user"]["id"].as_str().unwrap())
            .unwrap(),
        uuid::Uuid::parse_str(&account_id).unwrap().as_bytes(),
        "the user handle is the account id"
    );
    let mut passkey = SoftPasskey::new();
    let credential = passkey.create(public_key, &origin);
    let ceremony = options["ceremony"].clone();
    let (status, done) = post_json(
        &owner,
        &b.url("/account/passkeys"),
        &csrf,
        &json!({ "ceremony": ceremony, "credential": credential }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["redirect"], "/account");
    // Single use: the same answer again adds nothing.
    let (status, again) = post_json(
        &owner,
        &a.url("/account/passkeys"),
        &csrf,
        &json!({ "ceremony": ceremony, "credential": credential }),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{again}");
    assert!(again["error"].as_str().unwrap().contains("already used"));
    let page = owner
        .get(a.url("/account"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("Passkey \u{201c}Laptop\u{201d} added."),
        "{page}"
    );
    assert!(
        page.contains("<td data-label=\"Name\">Laptop</td>"),
        "{page}"
    );
    assert!(
        page.contains("<td data-label=\"Last used\">never</td>"),
        "{page}"
    );
    let stored = a.store.passkeys_of(&account_id).await.unwrap();
    assert_eq!(stored.len(), 1);

    // An MCP client's authorization, in a browser that never typed an email: the passkey
    // sign-in begins on A, finishes on B (which requires a second factor: none is asked).
    let client_id = register_public(&a, &[crate::oauth_helpers::REDIRECT]).await;
    let (_verifier, challenge) = pkce();
    let browser = new_client();
    let r = browser
        .get(authorize_url(&a, &client_id, &challenge, &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let to_signin = r.headers()["location"].to_str().unwrap().to_string();
    let next = url::Url::parse(&a.url(&to_signin))
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "next")
        .unwrap()
        .1
        .into_owned();
    let (csrf, ceremony, options) = begin_sign_in(&a, &browser, &next).await;
    let answer = passkey.get(&options, &origin);
    let body = json!({ "ceremony": ceremony, "credential": answer, "next": next });
    let (status, done) = post_json(&browser, &b.url("/signin/passkey"), &csrf, &body).await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["redirect"].as_str().unwrap(), next);
    let consent = browser.get(b.url(&next)).send().await.unwrap();
    assert_eq!(consent.status(), StatusCode::OK, "the consent page");
    assert!(consent.text().await.unwrap().contains("decision"));

    // The same answer again, from another browser: without the page's token it is refused
    // unread; with its own token, the challenge was already taken. Nobody signs in.
    let replay = new_client();
    let (status, refused) = post_json(&replay, &a.url("/signin/passkey"), &csrf, &body).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "another browser's token: {refused}"
    );
    let (own_csrf, _, _) = begin_sign_in(&a, &replay, "/").await;
    let (status, refused) = post_json(&replay, &a.url("/signin/passkey"), &own_csrf, &body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("already used"));
    assert_eq!(
        replay.get(a.url("/account")).send().await.unwrap().status(),
        StatusCode::SEE_OTHER,
        "the replay signed nobody in"
    );

    // The counter and the time of use were kept.
    let used = a.store.passkeys_of(&account_id).await.unwrap();
    assert!(used[0].last_used_at.is_some());
    assert_ne!(
        used[0].passkey, stored[0].passkey,
        "the new counter is stored"
    );

    // An answer signed for another challenge, or for another origin, or by a passkey this
    // server never saw: refused, nobody signed in.
    let stranger = new_client();
    let (csrf, _first, first_options) = begin_sign_in(&a, &stranger, "/").await;
    let (_, second, _) = begin_sign_in(&a, &stranger, "/").await;
    let for_first = passkey.get(&first_options, &origin);
    let (status, refused) = post_json(
        &stranger,
        &a.url("/signin/passkey"),
        &csrf,
        &json!({ "ceremony": second, "credential": for_first }),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "another challenge: {refused}"
    );
    let (_, third, options) = begin_sign_in(&a, &stranger, "/").await;
    let elsewhere = passkey.get(&options, "http://evil.localhost:1");
    let (status, refused) = post_json(
        &stranger,
        &a.url("/signin/passkey"),
        &csrf,
        &json!({ "ceremony": third, "credential": elsewhere }),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "another origin: {refused}"
    );
    let (_, fourth, options) = begin_sign_in(&a, &stranger, "/").await;
    let mut unknown = SoftPasskey::new();
    unknown.user_handle = uuid::Uuid::parse_str(&account_id)
        .unwrap()
        .as_bytes()
        .to_vec();
    let (status, refused) = post_json(
        &stranger,
        &a.url("/signin/passkey"),
        &csrf,
        &json!({ "ceremony": fourth, "credential": unknown.get(&options, &origin) }),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("not registered")
    );
    assert_eq!(
        stranger
            .get(a.url("/account"))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::SEE_OTHER,
        "still signed out"
    );

    // A disabled account stays out, passkey or not.
    let email = gatehouse::domain::account::Email::parse(EMAIL).unwrap();
    a.store
        .set_account_status(&email, gatehouse::domain::account::AccountStatus::Disabled)
        .await
        .unwrap();
    let (_, fifth, options) = begin_sign_in(&a, &stranger, "/").await;
    let (status, refused) = post_json(
        &stranger,
        &a.url("/signin/passkey"),
        &csrf,
        &json!({ "ceremony": fifth, "credential": passkey.get(&options, &origin) }),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    a.store
        .set_account_status(&email, gatehouse::domain::account::AccountStatus::Active)
        .await
        .unwrap();

    // Audited with the method, never a challenge or credential.
    let rows = a.store.recent_audit(200).await.unwrap();
    assert!(rows.iter().any(|r| r.event == "signin"
        && r.outcome == "success"
        && r.detail.as_deref() == Some("method=passkey")));
    assert!(
        rows.iter()
            .any(|r| r.event == "passkey_added" && r.outcome == "success")
    );
    assert!(
        rows.iter()
            .any(|r| r.event == "signin" && r.outcome == "failure")
    );
    let all = format!("{rows:?}");
    assert!(!all.contains(options["challenge"].as_str().unwrap()));
    assert!(!all.contains(&URL_SAFE_NO_PAD.encode(&passkey.credential_id)));

    // Removed after a confirmation page: it no longer signs in.
    let owner = new_client();
    a.sign_in(&owner, EMAIL, PASSWORD).await;
    let confirm = owner
        .get(a.url(&format!("/account/passkeys/remove?id={}", used[0].id)))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        confirm.contains("Remove the passkey \u{201c}Laptop\u{201d}?"),
        "{confirm}"
    );
    let form_csrf = crate::helpers::hidden_input(&confirm, "csrf_token").unwrap();
    let r = owner
        .post(a.url("/account/passkeys/remove"))
        .form(&[
            ("csrf_token", form_csrf.as_str()),
            ("id", used[0].id.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(a.store.passkeys_of(&account_id).await.unwrap().is_empty());
    let (_, sixth, options) = begin_sign_in(&a, &stranger, "/").await;
    let (status, refused) = post_json(
        &stranger,
        &b.url("/signin/passkey"),
        &csrf,
        &json!({ "ceremony": sixth, "credential": passkey.get(&options, &origin) }),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a removed passkey: {refused}"
    );
    assert!(
        a.store
            .recent_audit(50)
            .await
            .unwrap()
            .iter()
            .any(|r| r.event == "passkey_removed")
    );
}

#[tokio::test]
async fn ceremonies_refuse_what_they_do_not_understand_and_ip_hosts_offer_no_passkeys() {
    let (a, _b, _origin) = deployment().await;
    let browser = new_client();
    let (csrf, _ceremony, _options) = begin_sign_in(&a, &browser, "/").await;
    // No token, a wrong token, not JSON, an unknown ceremony: JSON errors, no 500.
    let r = browser
        .post(a.url("/signin/passkey/options"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let (status, _) = post_json(&browser, &a.url("/signin/passkey/options"), "x", &json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let r = browser
        .post(a.url("/signin/passkey"))
        .header("x-csrf-token", &csrf)
        .body("ceremony=1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let (status, body) = post_json(
        &browser,
        &a.url("/signin/passkey"),
        &csrf,
        &json!({ "ceremony": "nope", "credential": {} }),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"].is_string());
    // Adding a passkey needs a signed-in account.
    let (status, _) = post_json(
        &browser,
        &a.url("/account/passkeys/options"),
        &csrf,
        &json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // A console at an IP address cannot be a relying party: no passkey button, no script.
    let ip = spawn_app_with(|_| {}).await;
    let page = new_client().get(ip.url("/signin")).send().await.unwrap();
    assert!(
        !page.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("script-src")
    );
    assert!(!page.text().await.unwrap().contains("passkey"));
    let script = new_client()
        .get(ip.url("/static/passkey.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(script.status(), StatusCode::OK);
    assert!(
        script
            .text()
            .await
            .unwrap()
            .contains("navigator.credentials")
    );
}
