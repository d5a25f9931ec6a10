//! The authorization server end to end: metadata, registration, authorize, token, refresh.

use crate::helpers::{new_client, spawn_app, spawn_app_with};
use crate::oauth_helpers::*;
use oauth2::basic::BasicClient;
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, CsrfToken, PkceCodeChallenge, RedirectUrl, Scope,
    TokenResponse, TokenUrl,
};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Registers `body` (RFC 7591); the status and the JSON answer.
async fn register(app: &crate::helpers::TestApp, body: Value) -> (StatusCode, Value) {
    let r = app
        .client
        .post(app.url("/oauth/register"))
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap())
}

mod authorize;
mod metadata;
mod registration;
