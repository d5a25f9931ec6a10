//! Text that a person reads on a page (a client's name and other registration members, project
//! and client names from the command line) never holds invisible or formatting characters, and
//! a name has something visible in it.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::config_startup::run;
use crate::helpers::{TestDb, spawn_app, spawn_app_with};

/// Characters that render as nothing or as a blank, seen in the field: zero width space, word
/// joiner, soft hyphen, Mongolian vowel separator, Hangul filler, Hangul choseong filler,
/// braille pattern blank.
const INVISIBLE: [char; 7] = [
    '\u{200B}', '\u{2060}', '\u{00AD}', '\u{180E}', '\u{3164}', '\u{115F}', '\u{2800}',
];

#[tokio::test]
async fn registration_refuses_invisible_characters_in_every_display_member() {
    // Many registrations from one address: lift the per-address hourly limits for this test.
    let app = spawn_app_with(|env| {
        env.insert("GATEHOUSE_REGISTRATIONS_PER_HOUR".into(), "1000000".into());
        env.insert(
            "GATEHOUSE_REGISTRATION_BYTES_PER_HOUR".into(),
            "1000000000".into(),
        );
    })
    .await;
    let register = |body: Value| {
        let app = &app;
        async move {
            let r = app
                .client
                .post(app.url("/oauth/register"))
                .json(&body)
                .send()
                .await
                .unwrap();
            (r.status(), r.json::<Value>().await.unwrap())
        }
    };
    for c in INVISIBLE {
        for name in [format!("{c}"), format!("Cla{c}ude"), format!("{c} {c}")] {
            let (s, b) = register(json!({
                "redirect_uris": ["https://app.example/cb"],
                "token_endpoint_auth_method": "none",
                "client_name": name,
            }))
            .await;
            assert_eq!(s, StatusCode::BAD_REQUEST, "{name:?} → {b}");
            assert_eq!(b["error"], "invalid_client_metadata", "{name:?}");
            let description = b["error_description"].as_str().unwrap();
            assert!(
                description.contains("client_name")
                    && description.contains(&format!("U+{:04X}", c as u32)),
                "names the member and the character: {description}"
            );
        }
        for member in ["software_id", "software_version", "client_uri", "logo_uri"] {
            let value = if member.ends_with("_uri") {
                format!("https://app.example/{c}x")
            } else {
                format!("x{c}")
            };
            let (s, b) = register(json!({
                "redirect_uris": ["https://app.example/cb"],
                "client_name": "App",
                member: value,
            }))
            .await;
            assert_eq!(s, StatusCode::BAD_REQUEST, "{member} {value:?} → {b}");
            assert_eq!(b["error"], "invalid_client_metadata");
            assert!(
                b["error_description"].as_str().unwrap().contains(member),
                "{b}"
            );
        }
        let (s, b) = register(json!({
            "redirect_uris": ["https://app.example/cb"],
            "contacts": [format!("ops{c}@app.example")],
        }))
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "contacts {c:?} → {b}");
        assert_eq!(b["error"], "invalid_client_metadata");
    }
    // A name of nothing visible (a lone combining mark) is refused too.
    let (s, b) = register(json!({
        "redirect_uris": ["https://app.example/cb"],
        "client_name": "\u{0301}",
    }))
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert_eq!(b["error"], "invalid_client_metadata");
    assert!(
        b["error_description"].as_str().unwrap().contains("visible"),
        "{b}"
    );
    // Ordinary names in any script, with emoji, still register.
    for name in [
        "Claude",
        "Café Σ 日本語 ☕",
        "MCP Inspector (dev)",
        "한국어 앱",
    ] {
        let (s, b) = register(json!({
            "redirect_uris": ["https://app.example/cb"],
            "client_name": name,
        }))
        .await;
        assert_eq!(s, StatusCode::CREATED, "{name} → {b}");
        assert_eq!(b["client_name"], name);
    }
}

#[tokio::test]
async fn command_line_names_refuse_invisible_characters() {
    let db = TestDb::for_app().await;
    let env = [("DATABASE_URL", db.url.as_str())];
    let r = run(
        &["account", "add", "alice@example.com", "--password-stdin"],
        &env,
        Some("a-long-password\n"),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    for c in INVISIBLE {
        let name = format!("Re{c}search");
        let r = run(
            &["project", "add", &name, "--owner", "alice@example.com"],
            &env,
            None,
        );
        assert_eq!(r.code, 1, "project {name:?}: {}", r.stdout);
        assert!(
            r.stderr.contains(&format!("U+{:04X}", c as u32)),
            "{}",
            r.stderr
        );
        let r = run(&["client", "add", &format!("{c}")], &env, None);
        assert_eq!(r.code, 1, "client {c:?}: {}", r.stdout);
        assert!(r.stderr.contains("client name"), "{}", r.stderr);
    }
    let r = run(
        &[
            "project",
            "add",
            "Recherche café",
            "--owner",
            "alice@example.com",
        ],
        &env,
        None,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[tokio::test]
async fn a_name_stored_before_the_rule_never_reaches_the_consent_page() {
    use crate::oauth_helpers::{REDIRECT, authorize_url, code_in, pkce, signed_in_browser};
    let app = spawn_app().await;
    // A client registered while such names were still accepted.
    let stored = gatehouse::store::oauth::ClientRecord {
        client_id: "gc_registered_earlier".into(),
        client_secret_hash: None,
        token_endpoint_auth_method: "none".into(),
        client_name: Some("\u{3164}".into()),
        redirect_uris: vec![REDIRECT.into()],
        grant_types: vec!["authorization_code".into(), "refresh_token".into()],
        scope: None,
        metadata: json!({}),
        can_introspect: false,
        created_at: gatehouse::store::now(),
    };
    app.store.create_client(&stored).await.unwrap();
    let browser = signed_in_browser(&app).await;
    let (_, challenge) = pkce();
    let r = browser
        .get(authorize_url(&app, &stored.client_id, &challenge, &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let page = r.text().await.unwrap();
    assert!(
        !page.contains('\u{3164}'),
        "the invisible name is not shown"
    );
    assert!(page.contains("An unnamed application"), "{page}");

    // Once approved, the Connected apps page follows the same rule.
    code_in(&app, &browser, &stored.client_id, &[]).await;
    let apps = browser
        .get(app.url("/apps"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(apps.contains("consent_id"), "the app is listed: {apps}");
    assert!(
        !apps.contains('\u{3164}'),
        "the invisible name is not shown on /apps"
    );
    assert!(apps.contains("An unnamed application"), "{apps}");
}
