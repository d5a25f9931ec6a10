//! Connections to per-person upstreams ([`crate::upstream_oauth`]), for the signed-in person:
//!
//! - `GET /connections`: each per-person upstream, connected (when, last used, the scopes
//!   granted, disconnect) or not (connect);
//! - `GET /connections/{name}/start[?request=ID]`: the confirm page. A `request` is a link
//!   Gatehouse gave an MCP client; it works only for the person it was made for (anyone
//!   else gets a refusal page and nothing happens);
//! - `POST /connections/{name}/start`: a fresh `state` (stored hashed, single use, for
//!   [`STATE_TTL_SECS`], bound to the person and to a secret of this browser session) and
//!   PKCE verifier (sealed), then `303` to the upstream's authorization endpoint found at
//!   `upstream add` (RFC 6749 §4.1.1 with PKCE S256 and `resource`);
//! - `GET /connections/callback`: the state taken (once), checked against the person and
//!   the session, `iss` checked when sent (RFC 9207 §2.4), the code redeemed, the tokens
//!   sealed into the vault; the success page;
//! - `POST /connections/{name}/disconnect`: revocation at the upstream's RFC 7009 endpoint
//!   when it has one, then the tokens forgotten;
//! - `GET /connections/client-metadata.json`: the client ID metadata document of
//!   Gatehouse as a client of upstreams.

use askama::Template;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use oauth2::{AccessToken, RefreshToken, StandardRevocableToken};
use serde::Deserialize;
use tower_sessions::Session;

use super::session::{csrf_token, set_notice, signed_in, take_notice};
use super::{CsrfForm, PageQuery, error_page, render, see_other, when};
use crate::client_addr::ClientAddr;
use crate::domain::audit::{Event, Outcome};
use crate::domain::redirect_uri::host_for_display;
use crate::error::AppError;
use crate::state::AppState;
use crate::store::accounts::Account;
use crate::store::audit::AuditEvent;
use crate::store::now;
use crate::store::vault::{ConnectionState, Grant, UpstreamOAuth};
use crate::upstream_oauth::discovery::{CALLBACK_PATH, client_metadata_document, public_url};
use crate::upstream_oauth::vault::seal;
use crate::upstream_oauth::{
    FlowError, STATE_TTL_SECS, Tokens, authorization_request, exchange_code, grant_context,
    handle_hash, new_handle,
};

/// The session key of the secret that binds authorization requests to this browser session.
const BINDING_KEY: &str = "connections.binding";

struct Connected {
    at: String,
    last_used: Option<String>,
    scopes: Vec<String>,
}

struct Row {
    name: String,
    host: String,
    connected: Option<Connected>,
}

#[derive(Template)]
#[template(path = "connections.html")]
struct ConnectionsPage {
    rows: Vec<Row>,
    /// The person's own servers ([`super::personal_upstreams`]).
    own: Vec<super::personal_upstreams::OwnServer>,
    /// Whether the operator lets people add their own (`GATEHOUSE_PERSONAL_UPSTREAMS`).
    personal: bool,
    notice: Option<String>,
    csrf_token: String,
    oauth_enabled: bool,
    /// The signed-in account is an operator: the nav links the upstream page.
    operator: bool,
}

#[derive(Template)]
#[template(path = "connection_start.html")]
struct StartPage {
    name: String,
    host: String,
    client: Option<String>,
    request: Option<String>,
    csrf_token: String,
}

#[derive(Template)]
#[template(path = "connection_done.html")]
struct DonePage {
    name: String,
    host: String,
}

fn signin_to(path: &str) -> Response {
    let next: String = url::form_urlencoded::byte_serialize(path.as_bytes()).collect();
    see_other(&format!("/signin?next={next}"))
}

fn callback_url(state: &AppState) -> String {
    public_url(state.config.frontend_url.as_str(), CALLBACK_PATH)
}

/// `GET /connections`.
pub async fn list(State(state): State<AppState>, session: Session) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(signin_to("/connections"));
    };
    let grants = state.store.grants_of(&account.id).await?;
    let enabled: Vec<String> = state
        .store
        .upstreams()
        .await?
        .into_iter()
        .filter(|u| u.enabled && u.per_person)
        .map(|u| u.name)
        .collect();
    let rows = state
        .store
        .upstream_oauths()
        .await?
        .into_iter()
        .filter(|o| enabled.contains(&o.upstream))
        .map(|o| Row {
            host: host_for_display(&o.authorization_endpoint),
            connected: grants
                .iter()
                .find(|g| g.upstream == o.upstream)
                .map(|g| Connected {
                    at: when(g.connected_at),
                    last_used: g.last_used_at.map(when),
                    scopes: g
                        .scope
                        .as_deref()
                        .unwrap_or_default()
                        .split_whitespace()
                        .map(str::to_string)
                        .collect(),
                }),
            name: o.upstream,
        })
        .collect();
    render(
        StatusCode::OK,
        &ConnectionsPage {
            rows,
            own: super::personal_upstreams::own_servers(&state, &account.id).await?,
            personal: state.config.personal_upstreams,
            notice: take_notice(&session).await?,
            csrf_token: csrf_token(&session).await?,
            oauth_enabled: state.config.oauth_enabled,
            operator: account.admin,
        },
    )
}

/// The query of the start page.
#[derive(Debug, Deserialize)]
pub struct StartQuery {
    /// The link id of an MCP client's call, if the person came from one.
    pub request: Option<String>,
}

/// What a link id stands for, checked against the signed-in person: `Ok(None)` without a
/// link, `Ok(Some(client_id))` for one made for this person and upstream, `Err(page)` else.
async fn check_link(
    state: &AppState,
    account_id: &str,
    name: &str,
    request: Option<&str>,
) -> Result<Result<Option<Option<String>>, Response>, AppError> {
    let Some(id) = request else {
        return Ok(Ok(None));
    };
    let Some(link) = state
        .store
        .connection_request(&handle_hash(id), now())
        .await?
    else {
        return Ok(Err(error_page(
            StatusCode::BAD_REQUEST,
            "Link expired",
            "This connection link is unknown or has expired. Call the tool again in your app for a new one, or connect from your Connections page.",
        )));
    };
    if link.account_id != account_id || link.upstream != name {
        return Ok(Err(error_page(
            StatusCode::FORBIDDEN,
            "Not your link",
            "This connection link was made for someone else. Nothing was changed. Connect your own account from your Connections page.",
        )));
    }
    Ok(Ok(Some(link.client_id)))
}

fn unknown_upstream() -> Response {
    error_page(
        StatusCode::NOT_FOUND,
        "Unknown connection",
        "No server of that name needs a connection here.",
    )
}

/// `GET /connections/{name}/start`.
pub async fn start_page(
    State(state): State<AppState>,
    session: Session,
    Path(name): Path<String>,
    PageQuery(query): PageQuery<StartQuery>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        let mut path = format!("/connections/{name}/start");
        if let Some(r) = &query.request {
            path.push_str(&format!("?request={r}"));
        }
        return Ok(signin_to(&path));
    };
    let Some(oauth) = state.store.upstream_oauth(&name).await? else {
        return Ok(unknown_upstream());
    };
    let client_id = match check_link(&state, &account.id, &name, query.request.as_deref()).await? {
        Ok(c) => c.flatten(),
        Err(page) => return Ok(page),
    };
    let client = match client_id {
        Some(id) => Some(
            state
                .store
                .client(&id)
                .await?
                .and_then(|c| c.client_name)
                .filter(|n| crate::domain::text::check_line(n).is_ok())
                .unwrap_or(id),
        ),
        None => None,
    };
    render(
        StatusCode::OK,
        &StartPage {
            host: host_for_display(&oauth.authorization_endpoint),
            name,
            client,
            request: query.request,
            csrf_token: csrf_token(&session).await?,
        },
    )
}

/// The form of the start page.
#[derive(Debug, Deserialize)]
pub struct StartForm {
    /// The link id, when the person came from an MCP client's call.
    pub request: Option<String>,
}

/// This session's binding secret, made on first use.
async fn binding(session: &Session) -> Result<String, AppError> {
    if let Some(b) = session.get::<String>(BINDING_KEY).await? {
        return Ok(b);
    }
    let b = new_handle();
    session.insert(BINDING_KEY, &b).await?;
    Ok(b)
}

/// `POST /connections/{name}/start`.
pub async fn start(
    State(state): State<AppState>,
    session: Session,
    Path(name): Path<String>,
    CsrfForm(form): CsrfForm<StartForm>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(signin_to(&format!("/connections/{name}/start")));
    };
    let Some(oauth) = state.store.upstream_oauth(&name).await? else {
        return Ok(unknown_upstream());
    };
    let client_id = match check_link(&state, &account.id, &name, form.request.as_deref()).await? {
        Ok(c) => c.flatten(),
        Err(page) => return Ok(page),
    };
    let Ok(keys) = state.keyring() else {
        return Ok(error_page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Connections unavailable",
            "This Gatehouse has no server key, so it cannot keep connections. Tell its operator.",
        ));
    };
    let state_value = new_handle();
    let (url, verifier) = match authorization_request(&oauth, &callback_url(&state), &state_value) {
        Ok(x) => x,
        Err(e) => {
            tracing::error!(upstream = %name, error = %e, "a per-person upstream's settings are unusable");
            return Ok(error_page(
                StatusCode::BAD_GATEWAY,
                "Connection not possible",
                "This server's sign-in settings are unusable. Tell the operator of this Gatehouse.",
            ));
        }
    };
    let now = now();
    let record = ConnectionState {
        upstream: name.clone(),
        account_id: account.id.clone(),
        session_hash: handle_hash(&binding(&session).await?),
        client_id,
        verifier_sealed: keys.seal(
            &grant_context(&name, &account.id, "verifier"),
            verifier.as_bytes(),
        ),
    };
    state
        .store
        .create_connection_state(
            &handle_hash(&state_value),
            &record,
            now + STATE_TTL_SECS,
            now,
        )
        .await?;
    // The authorization endpoint is the one discovery checked when the upstream was added.
    Ok(see_other(url.as_str()))
}

/// The query of the callback (RFC 6749 §4.1.2, §4.1.2.1; RFC 9207 `iss`).
#[derive(Debug, Deserialize)]
pub struct CallbackQuery {
    /// The authorization code.
    pub code: Option<String>,
    /// The state sent.
    pub state: Option<String>,
    /// The error, when the person or the server refused.
    pub error: Option<String>,
    /// The issuer (RFC 9207).
    pub iss: Option<String>,
}

fn refused(title: &str, message: &str) -> Response {
    error_page(StatusCode::BAD_REQUEST, title, message)
}

/// `GET /connections/callback`: the state taken back (once) and checked ([`take_state`]), the
/// answer checked ([`answer_code`], 400 when refused), the code redeemed ([`redeem`]), then the tokens sealed
/// into the vault ([`keep_grant`]) and the success page.
pub async fn callback(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    PageQuery(query): PageQuery<CallbackQuery>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(error_page(
            StatusCode::FORBIDDEN,
            "Not signed in",
            "Sign in to Gatehouse first, then start the connection again from your Connections page. Nothing was stored.",
        ));
    };
    let (pending, now) =
        match take_state(&state, &session, &account, query.state.as_deref()).await? {
            Ok(taken) => taken,
            Err(refusal) => return Ok(refusal),
        };
    let Some(oauth) = state.store.upstream_oauth(&pending.upstream).await? else {
        return Ok(unknown_upstream());
    };
    let code = match answer_code(&query, &oauth) {
        Ok(code) => code,
        Err((title, message)) => return Ok(refused(title, &message)),
    };
    let tokens = match redeem(&state, &account, &pending, &oauth, code, now).await {
        Ok(tokens) => tokens,
        Err(refusal) => return Ok(refusal),
    };
    keep_grant(&state, &account, &pending, &oauth, &tokens, now).await?;
    state
        .store
        .audit(
            AuditEvent {
                event: Event::ConnectionConnected,
                outcome: Outcome::Success,
                account_id: Some(&account.id),
                client_id: pending.client_id.as_deref(),
                subject: Some(&pending.upstream),
                source_ip: Some(&client.to_string()),
                detail: None,
            },
            now,
        )
        .await;
    render(
        StatusCode::OK,
        &DonePage {
            host: host_for_display(&oauth.authorization_endpoint),
            name: pending.upstream,
        },
    )
}

/// Takes back (once) the authorization request in flight that the callback's `state` names,
/// and checks that `account` started it in this browser session (the session's binding
/// secret). Output: the request and the time it was taken (Unix seconds); or the refusal
/// page: no `state` (400), an unknown, used or expired one (400), someone else's or another
/// browser's (403). Errors: the store's, the session's.
async fn take_state(
    state: &AppState,
    session: &Session,
    account: &Account,
    state_value: Option<&str>,
) -> Result<Result<(ConnectionState, i64), Response>, AppError> {
    let Some(state_value) = state_value else {
        return Ok(Err(refused(
            "Connection refused",
            "The answer carried no state. Nothing was stored.",
        )));
    };
    let now = now();
    let Some(pending) = state
        .store
        .take_connection_state(&handle_hash(state_value), now)
        .await?
    else {
        return Ok(Err(refused(
            "Connection refused",
            "This answer is unknown, was already used, or came too late. Nothing was stored; start again from your Connections page.",
        )));
    };
    let session_hash = match session.get::<String>(BINDING_KEY).await? {
        Some(b) => handle_hash(&b),
        None => String::new(),
    };
    let same_session =
        subtle::ConstantTimeEq::ct_eq(session_hash.as_bytes(), pending.session_hash.as_bytes());
    if pending.account_id != account.id || !bool::from(same_session) {
        return Ok(Err(error_page(
            StatusCode::FORBIDDEN,
            "Connection refused",
            "This answer belongs to a connection started by someone else or in another browser. Nothing was stored.",
        )));
    }
    Ok(Ok((pending, now)))
}

/// The authorization code of the upstream's answer (RFC 6749 §4.1.2), or why it is refused
/// (the refusal page's title and words): an error answer (§4.1.2.1, its code shown), an `iss`
/// other than the upstream's issuer (RFC 9207 §2.4), no code.
fn answer_code<'q>(
    query: &'q CallbackQuery,
    oauth: &UpstreamOAuth,
) -> Result<&'q str, (&'static str, String)> {
    if let Some(error) = &query.error {
        let shown: String = error
            .chars()
            .filter(char::is_ascii_graphic)
            .take(64)
            .collect();
        return Err((
            "Not connected",
            format!("The service did not grant access ({shown}). Nothing was stored."),
        ));
    }
    if query.iss.as_deref().is_some_and(|iss| iss != oauth.issuer) {
        return Err((
            "Connection refused",
            "The answer came from another authorization server than this connection's (RFC 9207). Nothing was stored.".to_string(),
        ));
    }
    let Some(code) = query.code.as_deref() else {
        return Err((
            "Connection refused",
            "The answer carried no code. Nothing was stored.".to_string(),
        ));
    };
    Ok(code)
}

/// Redeems `code` at the upstream's token endpoint with the request's PKCE verifier (opened
/// with the server key). Output: the tokens; or the error page: no server key (503), the
/// upstream did not redeem the code (502, why).
async fn redeem(
    state: &AppState,
    account: &Account,
    pending: &ConnectionState,
    oauth: &UpstreamOAuth,
    code: &str,
    now: i64,
) -> Result<Tokens, Response> {
    let Ok(keys) = state.keyring() else {
        return Err(error_page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Connections unavailable",
            "This Gatehouse has no server key. Tell its operator.",
        ));
    };
    let verifier = keys
        .open(
            &grant_context(&pending.upstream, &account.id, "verifier"),
            &pending.verifier_sealed,
        )
        .ok()
        .and_then(|v| String::from_utf8(v).ok())
        .unwrap_or_default();
    match exchange_code(oauth, keys, &callback_url(state), code, &verifier, now).await {
        Ok(t) => Ok(t),
        Err(e) => {
            tracing::warn!(upstream = %pending.upstream, error = %e, "a connection's code was not redeemed");
            let why = match e {
                FlowError::InvalidGrant => "the service refused the code".to_string(),
                other => other.to_string(),
            };
            Err(error_page(
                StatusCode::BAD_GATEWAY,
                "Not connected",
                &format!(
                    "The service did not complete the connection: {why}. Nothing was stored; try again from your Connections page."
                ),
            ))
        }
    }
}

/// Seals `tokens` with the server key and stores them as the person's grant at the upstream
/// (the scope granted, else the one asked for). Errors: no server key, the store's.
async fn keep_grant(
    state: &AppState,
    account: &Account,
    pending: &ConnectionState,
    oauth: &UpstreamOAuth,
    tokens: &Tokens,
    now: i64,
) -> Result<(), AppError> {
    let sealed = |what: &str, value: &str| seal(state, &pending.upstream, &account.id, what, value);
    let (Ok(access_sealed), refresh_sealed) = (
        sealed("access", &tokens.access),
        tokens
            .refresh
            .as_deref()
            .map(|r| sealed("refresh", r))
            .transpose(),
    ) else {
        return Err(AppError::Other("no server key".into()));
    };
    let refresh_sealed = refresh_sealed.map_err(|e| AppError::Other(e.to_string()))?;
    state
        .store
        .put_grant(&Grant {
            account_id: account.id.clone(),
            upstream: pending.upstream.clone(),
            access_sealed,
            refresh_sealed,
            expires_at: tokens.expires_at,
            scope: tokens.scope.clone().or_else(|| oauth.scope.clone()),
            client_id: pending.client_id.clone(),
            connected_at: now,
            last_used_at: None,
            refresh_lease_until: 0,
        })
        .await?;
    Ok(())
}

/// `POST /connections/{name}/disconnect`.
pub async fn disconnect(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    Path(name): Path<String>,
    CsrfForm(_): CsrfForm<super::NoFields>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(signin_to("/connections"));
    };
    let Some(grant) = state.store.grant(&account.id, &name).await? else {
        return Ok(see_other("/connections"));
    };
    let mut revoked = "not_offered";
    if let (Some(oauth), Ok(keys)) = (state.store.upstream_oauth(&name).await?, state.keyring())
        && oauth.revocation_endpoint.is_some()
    {
        let open = |what: &str, sealed: &str| {
            keys.open(&grant_context(&name, &account.id, what), sealed)
                .ok()
                .and_then(|v| String::from_utf8(v).ok())
        };
        let token = match grant
            .refresh_sealed
            .as_deref()
            .and_then(|r| open("refresh", r))
        {
            Some(r) => Some(StandardRevocableToken::RefreshToken(RefreshToken::new(r))),
            None => open("access", &grant.access_sealed)
                .map(|a| StandardRevocableToken::AccessToken(AccessToken::new(a))),
        };
        if let Some(token) = token {
            revoked = match crate::upstream_oauth::revoke(&oauth, keys, token).await {
                Ok(()) => "revoked",
                Err(e) => {
                    tracing::warn!(upstream = %name, error = %e, "revocation at the upstream failed; the tokens are forgotten anyway");
                    "revocation_failed"
                }
            };
        }
    }
    state.store.delete_grant(&account.id, &name).await?;
    let detail = format!("upstream_revocation={revoked}");
    state
        .store
        .audit(
            AuditEvent {
                event: Event::ConnectionDisconnected,
                outcome: Outcome::Success,
                account_id: Some(&account.id),
                client_id: grant.client_id.as_deref(),
                subject: Some(&name),
                source_ip: Some(&client.to_string()),
                detail: Some(&detail),
            },
            now(),
        )
        .await;
    set_notice(
        &session,
        &match revoked {
            "revocation_failed" => format!(
                "{name} is disconnected here; the service could not be told, so you may also remove Gatehouse's access there."
            ),
            _ => format!("{name} is disconnected."),
        },
    )
    .await?;
    Ok(see_other("/connections"))
}

/// `GET /connections/client-metadata.json`.
pub async fn client_metadata(State(state): State<AppState>) -> Response {
    let name = format!("{} (Gatehouse)", state.config.surface.server_title);
    (
        [(header::CACHE_CONTROL, "public, max-age=3600")],
        Json(client_metadata_document(
            state.config.frontend_url.as_str(),
            &name,
        )),
    )
        .into_response()
}
