//! Connected apps: `GET /apps` lists the clients the signed-in person granted; `POST
//! /apps/revoke` revokes one, killing its live tokens at once.

use askama::Template;
use axum::extract::State;

use crate::client_addr::ClientAddr;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use tower_sessions::Session;

use super::session::{csrf_ok, csrf_token, signed_in};
use super::{PageForm, form_expired, render, see_other};
use crate::app::AppState;
use crate::domain::redirect_uri::host_for_display;
use crate::domain::text::check_line;
use crate::error::AppError;
use crate::store::audit::AuditEvent;
use crate::store::now;

struct AppRow {
    consent_id: String,
    client_id: String,
    name: String,
    host: String,
    scope: String,
}

#[derive(Template)]
#[template(path = "apps.html")]
struct AppsPage {
    apps: Vec<AppRow>,
    csrf_token: String,
}

/// `GET /apps`.
pub async fn list(State(state): State<AppState>, session: Session) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Fapps"));
    };
    let apps = state
        .store
        .connected_apps(&account.id)
        .await?
        .into_iter()
        .map(|a| AppRow {
            host: host_for_display(&a.redirect_uri),
            // A name stored before the visible-text rule is never shown (RFC 7591 §5).
            name: a
                .client_name
                .filter(|n| check_line(n).is_ok())
                .unwrap_or_else(|| "An unnamed application".into()),
            consent_id: a.consent_id,
            client_id: a.client_id,
            scope: a.scope,
        })
        .collect();
    render(
        StatusCode::OK,
        &AppsPage {
            apps,
            csrf_token: csrf_token(&session).await?,
        },
    )
}

/// Body of `POST /apps/revoke`.
#[derive(Deserialize)]
pub struct RevokeForm {
    #[serde(default)]
    csrf_token: String,
    #[serde(default)]
    consent_id: String,
}

/// `POST /apps/revoke`.
pub async fn revoke(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    PageForm(form): PageForm<RevokeForm>,
) -> Result<Response, AppError> {
    if !csrf_ok(&session, &form.csrf_token).await? {
        return Ok(form_expired());
    }
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Fapps"));
    };
    let now = now();
    if let Some(client_id) = state
        .store
        .revoke_consent(&account.id, &form.consent_id, now)
        .await?
    {
        state
            .store
            .audit(
                AuditEvent {
                    event: "consent_revoked",
                    outcome: "success",
                    account_id: Some(&account.id),
                    client_id: Some(&client_id),
                    source_ip: Some(&client.to_string()),
                    ..Default::default()
                },
                now,
            )
            .await;
    }
    Ok(see_other("/apps"))
}
