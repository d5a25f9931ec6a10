//! The console's credentials page: `GET /keys` lists the account's API keys and personal MCP
//! URLs (never their secrets); `POST /keys/create`, `POST /keys/urls/create` make one and
//! `POST /keys/revoke`, `POST /keys/urls/revoke` revoke one (303 back to `/keys`).
//!
//! A successful create answers the page itself (200) with the secret shown once: it is never
//! kept in the session or anywhere else, so reloading `/keys` no longer shows it. A key or URL
//! of another account answers exactly like a missing one (404). Validation is the CLI's
//! (`parse_name`, `parse_lifetime`, membership of the project); the member's role in a project
//! still limits every call a read-write credential makes.

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use tower_sessions::Session;

use super::session::{csrf_token, set_notice, signed_in, take_notice};
use super::{Confirmation, CsrfForm, PageQuery, confirm_page, error_page, render, see_other, when};
use crate::client_addr::ClientAddr;
use crate::credentials::{self, Actor, NewCredential, Revocation};
use crate::domain::api_key::{access_label, parse_lifetime, parse_name, status_label};
use crate::domain::principal::IssuedCredential;
use crate::domain::principal::ToolFilter;
use crate::error::AppError;
use crate::state::AppState;
use crate::store::accounts::Account;
use crate::store::now;
use crate::store::projects::ProjectMembership;

/// Longest lifetime of a personal URL made on this page, in days.
pub const MAX_URL_DAYS: i64 = 365;

/// Expiry choices of an API key made on this page (`none` or days).
const KEY_EXPIRIES: [&str; 4] = ["none", "30", "90", "365"];

/// One credential in a table of the page.
struct Row {
    id: String,
    name: String,
    kind: String,
    access: &'static str,
    created: String,
    expires: String,
    last_used: String,
    status: &'static str,
    /// The tools it may use, in words (`All tools`, `Only: a, b`, `All but: c`).
    tools: String,
}

/// The secret of a credential just made, shown once.
struct Created {
    what: &'static str,
    /// The key or the personal URL.
    secret: String,
    /// `claude mcp add …` for a key.
    claude: Option<String>,
    /// Cursor's `mcp.json` for a key.
    cursor: Option<String>,
}

/// What a create form sent (kept on an error).
#[derive(Deserialize, Default, Clone)]
pub struct CreateForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    project: String,
    #[serde(default)]
    access: String,
    #[serde(default)]
    expires: String,
}

#[derive(Template)]
#[template(path = "keys.html")]
struct KeysPage<'a> {
    keys: Vec<Row>,
    urls: Vec<Row>,
    projects: Vec<ProjectMembership>,
    notice: Option<String>,
    created: Option<Created>,
    key_error: Option<&'a str>,
    key_form: CreateForm,
    url_error: Option<&'a str>,
    url_form: CreateForm,
    key_expiries: [&'static str; 4],
    max_url_days: i64,
    csrf_token: &'a str,
    oauth_enabled: bool,
    /// The signed-in account is an operator: the nav links the upstream page.
    operator: bool,
}

fn kind(project_id: Option<&str>, projects: &[ProjectMembership]) -> String {
    match project_id {
        None => "account".to_string(),
        Some(id) => {
            let name = projects
                .iter()
                .find(|p| p.project_id == id)
                .map_or(id, |p| p.name.as_str());
            format!("project {name}")
        }
    }
}

/// Which form erred, its message and what it sent.
enum Refusal<'a> {
    Key(&'a str, CreateForm),
    Url(&'a str, CreateForm),
}

async fn keys_page(
    state: &AppState,
    session: &Session,
    account: &Account,
    status_code: StatusCode,
    created: Option<Created>,
    refusal: Option<Refusal<'_>>,
) -> Result<Response, AppError> {
    let now = now();
    let projects = state.store.projects_of_account(&account.id).await?;
    let keys = state
        .store
        .api_keys(Some(&account.id))
        .await?
        .into_iter()
        .map(|k| Row {
            kind: kind(k.project_id.as_deref(), &projects),
            access: access_label(&k.scope),
            created: when(k.created_at),
            expires: k.expires_at.map_or_else(|| "never".into(), when),
            last_used: k.last_used_at.map_or_else(|| "never".into(), when),
            status: status_label(k.revoked_at, k.expires_at, now),
            tools: ToolFilter::from_stored(k.tool_filter.as_deref()).in_words(),
            id: k.id,
            name: k.name,
        })
        .collect();
    let urls = state
        .store
        .personal_urls(Some(&account.id))
        .await?
        .into_iter()
        .map(|u| Row {
            kind: kind(u.project_id.as_deref(), &projects),
            access: access_label(&u.scope),
            created: when(u.created_at),
            expires: u.expires_at.map_or_else(|| "never".into(), when),
            last_used: u.last_used_at.map_or_else(|| "never".into(), when),
            status: status_label(u.revoked_at, u.expires_at, now),
            tools: ToolFilter::from_stored(u.tool_filter.as_deref()).in_words(),
            id: u.id,
            name: u.name,
        })
        .collect();
    let notice = take_notice(session).await?;
    let csrf = csrf_token(session).await?;
    let default_url = CreateForm {
        name: crate::domain::api_key::DEFAULT_URL_NAME.to_string(),
        access: "read".into(),
        expires: "30".into(),
        ..Default::default()
    };
    let default_key = CreateForm {
        access: "read".into(),
        expires: "none".into(),
        ..Default::default()
    };
    let (key_error, key_form, url_error, url_form) = match refusal {
        Some(Refusal::Key(e, f)) => (Some(e), f, None, default_url),
        Some(Refusal::Url(e, f)) => (None, default_key, Some(e), f),
        None => (None, default_key, None, default_url),
    };
    render(
        status_code,
        &KeysPage {
            keys,
            urls,
            projects,
            notice,
            created,
            key_error,
            key_form,
            url_error,
            url_form,
            key_expiries: KEY_EXPIRIES,
            max_url_days: MAX_URL_DAYS,
            csrf_token: &csrf,
            oauth_enabled: state.config.oauth_enabled,
            operator: account.admin,
        },
    )
}

/// `GET /keys`.
pub async fn show(State(state): State<AppState>, session: Session) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Fkeys"));
    };
    keys_page(&state, &session, &account, StatusCode::OK, None, None).await
}

/// Reads a create form: the name, the project (the account must be a member of it), the
/// access and the expiry (a key: `none` or one of [`KEY_EXPIRIES`] days; a URL: 1 to
/// [`MAX_URL_DAYS`] days). `Err`: what to tell the person.
async fn read_form(
    state: &AppState,
    account: &Account,
    kind: IssuedCredential,
    form: &CreateForm,
) -> Result<Result<(String, Option<String>, bool, Option<i64>), String>, AppError> {
    let name = match parse_name(&form.name) {
        Ok(n) => n,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let project = Some(form.project.trim())
        .filter(|p| !p.is_empty())
        .map(str::to_string);
    if let Some(project_id) = &project
        && state
            .store
            .membership(&account.id, project_id)
            .await?
            .is_none()
    {
        return Ok(Err("you are not a member of that project".into()));
    }
    let write = match form.access.as_str() {
        "read" => false,
        "write" => true,
        _ => return Ok(Err("choose read-only or read-write".into())),
    };
    let days = match kind {
        IssuedCredential::ApiKey => match form.expires.as_str() {
            "none" => None,
            days if KEY_EXPIRIES.contains(&days) => Some(days.to_string()),
            _ => return Ok(Err("choose an expiry".to_string())),
        },
        IssuedCredential::PersonalUrl => match form.expires.trim().parse::<i64>() {
            Ok(d) if (1..=MAX_URL_DAYS).contains(&d) => Some(d.to_string()),
            _ => {
                return Ok(Err(format!("the expiry must be 1 to {MAX_URL_DAYS} days")));
            }
        },
    };
    let lifetime = match days.map(|d| parse_lifetime(&format!("{d}d"))).transpose() {
        Ok(l) => l,
        Err(e) => return Ok(Err(e.to_string())),
    };
    if let Some(full) = credentials::room_for(&state.store, kind, &account.id, now()).await? {
        return Ok(Err(full));
    }
    Ok(Ok((name, project, write, lifetime)))
}

/// Makes the credential a create form asks for and answers the page with its secret shown
/// once; a refused form answers the page again (422) with the reason and what was typed.
async fn create(
    state: &AppState,
    client: &ClientAddr,
    session: &Session,
    kind: IssuedCredential,
    form: CreateForm,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(state, session).await? else {
        return Ok(see_other("/signin?next=%2Fkeys"));
    };
    let (name, project, write, lifetime) = match read_form(state, &account, kind, &form).await? {
        Ok(read) => read,
        Err(e) => {
            let refusal = match kind {
                IssuedCredential::ApiKey => Refusal::Key(&e, form),
                IssuedCredential::PersonalUrl => Refusal::Url(&e, form),
            };
            let status = StatusCode::UNPROCESSABLE_ENTITY;
            return keys_page(state, session, &account, status, None, Some(refusal)).await;
        }
    };
    let now = now();
    let ip = client.to_string();
    let issued = credentials::issue(
        &state.store,
        &NewCredential {
            kind,
            account_id: &account.id,
            project_id: project.as_deref(),
            name: &name,
            write,
            allowed_ips: &[],
            expires_at: lifetime.map(|secs| now + secs),
            tools: &Default::default(),
        },
        Actor::Console { source_ip: &ip },
        now,
    )
    .await?;
    let url = &state.config.mcp_server_url;
    let secret = issued.secret.expose();
    let created = match kind {
        IssuedCredential::ApiKey => Created {
            what: kind.label(),
            claude: Some(format!(
                "claude mcp add --transport http gatehouse {url} --header \"X-Api-Key: {secret}\""
            )),
            cursor: Some(
                serde_json::to_string_pretty(&serde_json::json!({
                    "mcpServers": { "gatehouse": { "url": url, "headers": { "X-Api-Key": secret } } }
                }))
                .unwrap_or_default(),
            ),
            secret: secret.to_string(),
        },
        IssuedCredential::PersonalUrl => Created {
            what: kind.label(),
            secret: crate::domain::api_key::personal_url(url, secret),
            claude: None,
            cursor: None,
        },
    };
    keys_page(
        state,
        session,
        &account,
        StatusCode::OK,
        Some(created),
        None,
    )
    .await
}

/// `POST /keys/create`.
pub async fn create_key(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<CreateForm>,
) -> Result<Response, AppError> {
    create(&state, &client, &session, IssuedCredential::ApiKey, form).await
}

/// `POST /keys/urls/create`.
pub async fn create_url(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<CreateForm>,
) -> Result<Response, AppError> {
    create(
        &state,
        &client,
        &session,
        IssuedCredential::PersonalUrl,
        form,
    )
    .await
}

/// Body of the revoke forms and query of their confirmation pages.
#[derive(Deserialize)]
pub struct RevokeForm {
    #[serde(default)]
    id: String,
}

/// The name of the account's credential `id` of `kind`, if the account has one.
async fn credential_name(
    state: &AppState,
    account: &Account,
    kind: IssuedCredential,
    id: &str,
) -> Result<Option<(String, bool)>, AppError> {
    let now = now();
    Ok(match kind {
        IssuedCredential::ApiKey => state
            .store
            .api_keys(Some(&account.id))
            .await?
            .into_iter()
            .find(|k| k.id == id)
            .map(|k| {
                let active = status_label(k.revoked_at, k.expires_at, now) == "active";
                (k.name, active)
            }),
        IssuedCredential::PersonalUrl => state
            .store
            .personal_urls(Some(&account.id))
            .await?
            .into_iter()
            .find(|u| u.id == id)
            .map(|u| {
                let active = status_label(u.revoked_at, u.expires_at, now) == "active";
                (u.name, active)
            }),
    })
}

fn no_such(kind: IssuedCredential) -> Response {
    error_page(
        StatusCode::NOT_FOUND,
        "Not found",
        &format!("There is no such {} on your account.", kind.label()),
    )
}

/// The confirmation page of revoking the account's credential `id`: 404 like a missing one for
/// another account's; an inactive one goes back to `/keys` with a notice.
async fn confirm_revoke(
    state: &AppState,
    session: &Session,
    kind: IssuedCredential,
    id: &str,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(state, session).await? else {
        return Ok(see_other("/signin?next=%2Fkeys"));
    };
    let Some((name, active)) = credential_name(state, &account, kind, id).await? else {
        return Ok(no_such(kind));
    };
    let label = kind.label();
    if !active {
        set_notice(
            session,
            &format!("The {label} “{name}” no longer works: nothing to revoke."),
        )
        .await?;
        return Ok(see_other("/keys"));
    }
    let (action, consequence) = match kind {
        IssuedCredential::ApiKey => (
            "/keys/revoke",
            format!(
                "Every client that sends the API key “{name}” is refused from its next call. This cannot be undone: to connect such a client again, create a new key and give it to the client."
            ),
        ),
        IssuedCredential::PersonalUrl => (
            "/keys/urls/revoke",
            format!(
                "Every client that uses the personal URL “{name}” is refused from its next call. This cannot be undone: to connect such a client again, create a new URL and give it to the client."
            ),
        ),
    };
    let confirmation = Confirmation {
        title: format!("Revoke the {label} “{name}”?"),
        consequence,
        action: action.into(),
        fields: vec![("id", id.to_string())],
        button: format!("Revoke {label}"),
        cancel: "/keys".into(),
    };
    confirm_page(state, session, &confirmation).await
}

/// `GET /keys/revoke?id=…`: the confirmation page of revoking an API key.
pub async fn confirm_revoke_key(
    State(state): State<AppState>,
    session: Session,
    PageQuery(form): PageQuery<RevokeForm>,
) -> Result<Response, AppError> {
    confirm_revoke(&state, &session, IssuedCredential::ApiKey, &form.id).await
}

/// `GET /keys/urls/revoke?id=…`: the confirmation page of revoking a personal URL.
pub async fn confirm_revoke_url(
    State(state): State<AppState>,
    session: Session,
    PageQuery(form): PageQuery<RevokeForm>,
) -> Result<Response, AppError> {
    confirm_revoke(&state, &session, IssuedCredential::PersonalUrl, &form.id).await
}

/// Revokes the signed-in account's credential named by the form, then 303 back to `/keys`
/// with a notice; another account's id answers 404 like a missing one.
async fn revoke(
    state: &AppState,
    client: &ClientAddr,
    session: &Session,
    kind: IssuedCredential,
    id: &str,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(state, session).await? else {
        return Ok(see_other("/signin?next=%2Fkeys"));
    };
    let ip = client.to_string();
    let name = credential_name(state, &account, kind, id)
        .await?
        .map(|(name, _)| name)
        .unwrap_or_default();
    let done = credentials::revoke(
        &state.store,
        kind,
        id,
        Some(&account.id),
        Actor::Console { source_ip: &ip },
        now(),
    )
    .await?;
    let label = kind.label();
    let notice = match done {
        Revocation::NotFound => return Ok(no_such(kind)),
        Revocation::Revoked => format!(
            "{} “{name}” revoked: clients using it are refused from their next call.",
            capitalized(label)
        ),
        Revocation::AlreadyRevoked => format!("That {label} was already revoked."),
    };
    set_notice(session, &notice).await?;
    Ok(see_other("/keys"))
}

/// `API key` → `API key`, `personal URL` → `Personal URL`.
fn capitalized(label: &str) -> String {
    let mut chars = label.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// `POST /keys/revoke`: only the account's own keys.
pub async fn revoke_key(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<RevokeForm>,
) -> Result<Response, AppError> {
    revoke(
        &state,
        &client,
        &session,
        IssuedCredential::ApiKey,
        &form.id,
    )
    .await
}

/// `POST /keys/urls/revoke`: only the account's own personal URLs.
pub async fn revoke_url(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<RevokeForm>,
) -> Result<Response, AppError> {
    revoke(
        &state,
        &client,
        &session,
        IssuedCredential::PersonalUrl,
        &form.id,
    )
    .await
}
