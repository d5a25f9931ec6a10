//! The default endpoints of MCP 2025-03-26 ("Fallbacks for Servers without Metadata
//! Discovery"): `/authorize`, `/token`, `/register` at the root of the MCP server's origin, and
//! the RFC 8414 document with the MCP path inserted.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{new_client, spawn_app};
use crate::oauth_helpers::*;

#[tokio::test]
async fn root_authorize_redirects_to_the_real_endpoint_with_the_query_kept() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (_, challenge) = pkce();
    let real = authorize_url(&app, &client_id, &challenge, &[]);
    let query = real.split_once('?').unwrap().1;
    let browser = new_client();
    let r = browser
        .get(app.url(&format!("/authorize?{query}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(r.headers()["location"].to_str().unwrap(), real);
    // A POST is redirected with 307 too, so the browser posts the same form again.
    let r = browser
        .post(app.url("/authorize"))
        .form(&[("client_id", client_id.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(
        r.headers()["location"].to_str().unwrap(),
        app.url("/oauth/authorize")
    );
}

#[tokio::test]
async fn a_client_using_only_the_fallback_paths_completes_the_flow() {
    let app = spawn_app().await;
    // Registration at /register answers as /oauth/register does (RFC 7591 §3.2.1: 201).
    let r = app
        .client
        .post(app.url("/register"))
        .json(&json!({
            "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "none",
            "client_name": "Test Client",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let client_id = r.json::<Value>().await.unwrap()["client_id"]
        .as_str()
        .unwrap()
        .to_string();
    // The browser follows /authorize's redirect to the consent page.
    let (verifier, challenge) = pkce();
    let real = authorize_url(&app, &client_id, &challenge, &[]);
    let fallback = app.url(&format!("/authorize?{}", real.split_once('?').unwrap().1));
    let browser = new_client();
    let r = browser.get(&fallback).send().await.unwrap();
    let location = r.headers()["location"].to_str().unwrap().to_string();
    let loc = walk(&app, &browser, &location, "approve").await;
    let code = query_of(&loc)["code"].clone();
    // The code is redeemed at /token, and the refresh token too.
    let r = app
        .client
        .post(app.url("/token"))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("code_verifier", verifier.as_str()),
            ("client_id", client_id.as_str()),
            ("redirect_uri", REDIRECT),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["cache-control"], "no-store");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["token_type"], "Bearer");
    let r = app
        .client
        .post(app.url("/token"))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", body["refresh_token"].as_str().unwrap()),
            ("client_id", client_id.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // Errors keep the RFC 6749 §5.2 shape.
    let r = app
        .client
        .post(app.url("/token"))
        .form(&[
            ("grant_type", "password"),
            ("client_id", client_id.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"],
        "unsupported_grant_type"
    );
}

#[tokio::test]
async fn the_server_metadata_is_also_published_under_the_mcp_path() {
    let app = spawn_app().await;
    let at_root: Value = app
        .client
        .get(app.url("/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let r = app
        .client
        .get(app.url("/.well-known/oauth-authorization-server/mcp"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let under_mcp: Value = r.json().await.unwrap();
    assert_eq!(under_mcp, at_root);
    assert_eq!(
        under_mcp["issuer"], app.address,
        "the issuer stays the origin"
    );
    // The machine endpoints' CORS covers it like the other documents.
    let r = app
        .client
        .get(app.url("/.well-known/oauth-authorization-server/mcp"))
        .header("origin", "http://localhost:6274")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["access-control-allow-origin"], "*");
}
