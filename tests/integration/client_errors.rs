//! Errors clients can act on: a client metadata document that cannot be fetched right now is a
//! temporary failure (503 `temporarily_unavailable` at the token endpoint, a "try again" page
//! at authorize), never `invalid_client`, which makes clients throw their identity away; an
//! unknown client and a wrong secret are described alike.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::spawn_app;
use crate::oauth_helpers::*;

/// `.invalid` never resolves (RFC 6761 §6.4): the real fetcher's DNS lookup fails.
const UNRESOLVABLE: &str = "https://app.gatehouse-test.invalid/oauth/client.json";

#[tokio::test]
async fn a_document_that_cannot_be_fetched_now_is_a_temporary_failure() {
    let app = spawn_app().await;
    // Token endpoint: RFC 6749 §5.2 shape, 503 with Retry-After (RFC 9110 §10.2.3).
    let (s, b, h) = exchange(&app, UNRESOLVABLE, "gate_ac_x", "v", &[]).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{b}");
    assert_eq!(b["error"], "temporarily_unavailable");
    assert!(
        b["error_description"]
            .as_str()
            .unwrap()
            .contains("try again")
    );
    assert_eq!(h["retry-after"], "5");
    assert_eq!(h["cache-control"], "no-store");
    let (s, b) = refresh(&app, UNRESOLVABLE, "gate_rt_x", &[]).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(b["error"], "temporarily_unavailable");
    // Authorization endpoint: a page saying to try again, never a redirect.
    let (_, challenge) = pkce();
    let r = app
        .client
        .get(authorize_url(&app, UNRESOLVABLE, &challenge, &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.headers().get("location").is_none());
    assert!(r.headers().get("retry-after").is_some());
    let page = r.text().await.unwrap();
    assert!(page.contains("Try again"), "{page}");
    // A document refused for what it says stays a request error (400 page).
    let r = app
        .client
        .get(authorize_url(
            &app,
            "https://app.example.com/",
            &challenge,
            &[],
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn an_unknown_client_and_a_wrong_secret_are_described_alike() {
    let app = spawn_app().await;
    let reg: Value = app
        .client
        .post(app.url("/oauth/register"))
        .json(&json!({"redirect_uris": [REDIRECT], "client_name": "Test Client"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = reg["client_id"].as_str().unwrap();
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", "gate_rt_x"),
    ];
    let mut answers = Vec::new();
    for (who, secret) in [
        (id, "gate_cs_wrong"),
        ("gc_unknown", "gate_cs_wrong"),
        ("gc_unknown", reg["client_secret"].as_str().unwrap()),
    ] {
        let r = app
            .client
            .post(app.url("/oauth/token"))
            .basic_auth(who, Some(secret))
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let b: Value = r.json().await.unwrap();
        assert_eq!(b["error"], "invalid_client");
        answers.push(b["error_description"].clone());
        // The same in the body (client_secret_post).
        let r = app
            .client
            .post(app.url("/oauth/token"))
            .form(&[
                form[0],
                form[1],
                ("client_id", who),
                ("client_secret", secret),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        answers.push(r.json::<Value>().await.unwrap()["error_description"].clone());
    }
    assert!(
        answers.iter().all(|a| *a == answers[0]),
        "one description: {answers:?}"
    );
    assert_eq!(answers[0], "client authentication failed");
}
