//! Connected apps: `GET /apps` lists the clients the signed-in person granted, `GET
//! /apps/{consent_id}` shows what one of them did (from the audit log); `POST /apps/revoke`
//! revokes one, killing its live tokens at once.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Path, State};

use crate::client_addr::ClientAddr;
use crate::domain::audit::{Event, Outcome};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use tower_sessions::Session;

use super::session::{csrf_token, set_error, set_notice, signed_in, take_error, take_notice};
use super::{Confirmation, CsrfForm, PageQuery, confirm_page, error_page, render, see_other, when};
use crate::domain::cimd::is_url_client_id;
use crate::domain::device::DEVICE_CODE_GRANT;
use crate::domain::principal::ToolFilter;
use crate::domain::redirect_uri::host_for_display;
use crate::domain::scope::{Scope, ScopeSet};
use crate::domain::text::check_line;
use crate::error::AppError;
use crate::state::AppState;
use crate::store::audit::{AuditEvent, AuditRecord};
use crate::store::now;
use crate::store::oauth::{BUILT_IN, ConnectedApp, GrantChoice};
use crate::store::resources::ResourceRecord;

struct AppRow {
    consent_id: String,
    client_id: String,
    name: String,
    /// The host of a client ID metadata document URL; `None`: the name is unverified.
    publisher: Option<String>,
    host: String,
    /// The MCP server (resource) the app may use: its host, and its name when registered.
    server: String,
    abilities: Vec<String>,
    granted: String,
    last_used: Option<String>,
    /// The person's project choice in words (issue 37); `None` for a registered resource's
    /// grant, which has none.
    reach: Option<String>,
    /// `Read only` or `Read and write`.
    access: &'static str,
    /// `Until you revoke it`, `Until 2026-01-02 03:04 UTC`, or that it has ended.
    until: String,
    /// The tools it may use, in words.
    tools: String,
    /// `client_id=…` for its timeline link.
    timeline: String,
}

#[derive(Template)]
#[template(path = "apps.html")]
struct AppsPage {
    apps: Vec<AppRow>,
    /// Apps that asked for access in the last [`TRIED_WITHIN_SECS`] and have none now.
    tried: Vec<TriedRow>,
    notice: Option<String>,
    mcp_url: String,
    csrf_token: String,
    oauth_enabled: bool,
    /// The signed-in account is an operator: the nav links the upstream page.
    operator: bool,
}

/// How far back the apps page lists apps that tried to connect, in seconds (30 days).
pub const TRIED_WITHIN_SECS: i64 = 30 * 86_400;

/// An app that tried to connect and has no access now.
struct TriedRow {
    name: String,
    /// When it last asked, to the minute.
    when: String,
    /// `client_id=…` for its timeline link.
    query: String,
}

/// `client_id=…`, URL-encoded: the query of a client's timeline page.
pub fn timeline_query(client_id: &str) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("client_id", client_id)
        .finish()
}

/// The name to show: the registered one when it follows the visible-text rule (a name stored
/// before the rule is never shown, RFC 7591 §5).
fn display_name(app: &ConnectedApp) -> String {
    app.client_name
        .clone()
        .filter(|n| check_line(n).is_ok())
        .unwrap_or_else(|| "An unnamed application".into())
}

/// The MCP server `app`'s grant is for and what it may do there, in words: this Gatehouse
/// (`mcp_server_url`) with the scopes it may use now (reading only leaves writing out), a
/// registered resource of `resources` (by host and name) with its scopes as the resource
/// describes them, or the host of a resource no longer registered, with nothing.
fn server_and_abilities(
    mcp_server_url: &str,
    app: &ConnectedApp,
    resources: &[ResourceRecord],
) -> (String, Vec<String>) {
    let registered = resources.iter().find(|r| r.url == app.resource);
    match registered {
        None if app.resource == BUILT_IN => (
            format!("{} (this Gatehouse)", host_for_display(mcp_server_url)),
            // What it may do now: reading only leaves writing out.
            ScopeSet::parse(&app.scope)
                .map(|s| {
                    s.iter()
                        .filter(|s| !(app.read_only && *s == Scope::McpWrite))
                        .map(|s| s.describe().to_string())
                        .collect()
                })
                .unwrap_or_default(),
        ),
        None => (host_for_display(&app.resource), Vec::new()),
        Some(r) => (
            format!("{} ({})", host_for_display(&r.url), r.name),
            app.scope
                .split_ascii_whitespace()
                .filter_map(|s| r.describe(s).map(ToString::to_string))
                .collect(),
        ),
    }
}

/// The row of the granted app `a` on the apps page: its names and hosts, the server and what
/// it may do there ([`server_and_abilities`]), when it was granted and last called a tool
/// (`last_used`, by client), the projects it reaches (`names`: the account's projects by id),
/// its access, until when (at `now`) and its tools.
fn app_row(
    mcp_server_url: &str,
    a: ConnectedApp,
    resources: &[ResourceRecord],
    last_used: &HashMap<String, i64>,
    names: &HashMap<String, String>,
    now: i64,
) -> AppRow {
    let (server, abilities) = server_and_abilities(mcp_server_url, &a, resources);
    AppRow {
        name: display_name(&a),
        publisher: is_url_client_id(&a.client_id).then(|| host_for_display(&a.client_id)),
        host: if a.redirect_uri == DEVICE_CODE_GRANT {
            "a device (signed in with a code)".to_string()
        } else {
            host_for_display(&a.redirect_uri)
        },
        server,
        abilities,
        granted: when(a.updated_at),
        last_used: last_used.get(&a.client_id).copied().map(when),
        reach: (a.resource == BUILT_IN).then(|| reach_words(&a, names)),
        access: if a.read_only || !a.scope.contains("mcp:write") {
            "Read only"
        } else {
            "Read and write"
        },
        until: until_words(a.expires_at, now),
        tools: ToolFilter::from_stored(a.tool_filter.as_deref()).in_words(),
        consent_id: a.consent_id,
        timeline: timeline_query(&a.client_id),
        client_id: a.client_id,
    }
}

/// `GET /apps`: each granted client with its name (the host of its metadata document, or
/// marked unverified), redirect host, what it may do in words, when it was granted and last
/// called a tool.
pub async fn list(State(state): State<AppState>, session: Session) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Fapps"));
    };
    let last_used: HashMap<String, i64> = state
        .store
        .last_tool_use_by_client(&account.id)
        .await?
        .into_iter()
        .collect();
    let resources = state.store.resources().await?;
    let names: HashMap<String, String> = state
        .store
        .projects_of_account(&account.id)
        .await?
        .into_iter()
        .map(|p| (p.project_id, p.name))
        .collect();
    let now = now();
    let apps = state
        .store
        .connected_apps(&account.id)
        .await?
        .into_iter()
        .map(|a| {
            app_row(
                &state.config.mcp_server_url,
                a,
                &resources,
                &last_used,
                &names,
                now,
            )
        })
        .collect::<Vec<_>>();
    let tried = state
        .store
        .attempted_clients(&account.id, now - TRIED_WITHIN_SECS)
        .await?
        .into_iter()
        .filter(|(id, _, _)| !apps.iter().any(|a| &a.client_id == id))
        .map(|(id, name, at)| TriedRow {
            name: name
                .filter(|n| check_line(n).is_ok())
                .unwrap_or_else(|| host_for_display(&id)),
            when: when(at),
            query: timeline_query(&id),
        })
        .collect();
    render(
        StatusCode::OK,
        &AppsPage {
            apps,
            tried,
            notice: take_notice(&session).await?,
            mcp_url: state.config.mcp_server_url.clone(),
            csrf_token: csrf_token(&session).await?,
            oauth_enabled: state.config.oauth_enabled,
            operator: account.admin,
        },
    )
}

/// The projects a grant reaches, in words: every project, or the chosen ones by name (a
/// chosen project the account has left or that was archived is not named: it is out of reach).
fn reach_words(app: &ConnectedApp, names: &HashMap<String, String>) -> String {
    match &app.project_ids {
        None => "All your projects, including ones you join later".to_string(),
        Some(stored) => {
            let ids: Vec<String> = serde_json::from_str(stored).unwrap_or_default();
            let named: Vec<&str> = ids
                .iter()
                .filter_map(|id| names.get(id).map(String::as_str))
                .collect();
            if named.is_empty() {
                "No project (the projects chosen are gone)".to_string()
            } else {
                format!("Only {}", named.join(", "))
            }
        }
    }
}

/// How long a grant lasts, in words.
fn until_words(expires_at: Option<i64>, now: i64) -> String {
    match expires_at {
        None => "Until you revoke it".to_string(),
        Some(end) if end <= now => format!("Ended {} (it has to ask you again)", when(end)),
        Some(end) => format!("Until {}", when(end)),
    }
}

#[derive(Template)]
#[template(path = "app_access.html")]
struct AccessPage {
    name: String,
    consent_id: String,
    chooser: Option<super::consent::Chooser>,
    error: Option<&'static str>,
    csrf_token: String,
    oauth_enabled: bool,
    /// The signed-in account is an operator: the nav links the upstream page.
    operator: bool,
}

/// The live, unended grant `consent_id` of the signed-in account, for the access page.
async fn live_app(
    state: &AppState,
    account_id: &str,
    consent_id: &str,
    now: i64,
) -> Result<Option<ConnectedApp>, AppError> {
    Ok(state
        .store
        .connected_apps(account_id)
        .await?
        .into_iter()
        .find(|a| {
            a.consent_id == consent_id
                && a.resource == BUILT_IN
                && a.expires_at.is_none_or(|end| end > now)
        }))
}

/// The choice kept with a grant.
fn choice_of(app: &ConnectedApp) -> GrantChoice {
    GrantChoice {
        project_ids: app
            .project_ids
            .as_deref()
            .map(|t| serde_json::from_str(t).unwrap_or_default()),
        read_only: app.read_only,
        expires_at: app.expires_at,
    }
}

async fn access_page(
    state: &AppState,
    session: &Session,
    account: &crate::store::accounts::Account,
    app: &ConnectedApp,
    shown: Option<&GrantChoice>,
    error: Option<&'static str>,
) -> Result<Response, AppError> {
    let projects = state.store.projects_of_account(&account.id).await?;
    let kept = choice_of(app);
    let current = shown.unwrap_or(&kept);
    render(
        if error.is_some() {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        },
        &AccessPage {
            name: display_name(app),
            consent_id: app.consent_id.clone(),
            chooser: Some(super::consent::Chooser::new(
                &projects,
                Some(current),
                app.scope.contains("mcp:write"),
                current.read_only,
            )),
            error,
            csrf_token: csrf_token(session).await?,
            oauth_enabled: state.config.oauth_enabled,
            operator: account.admin,
        },
    )
}

/// `GET /apps/{consent_id}/access`: the app's project choice (issue 37) to narrow or widen
/// without the app authorizing again: which projects, reading only or reading and writing
/// (within what it was approved for), and for how long. 404 for another account's grant, a
/// revoked or ended one, or a registered resource's.
pub async fn access(
    State(state): State<AppState>,
    session: Session,
    Path(consent_id): Path<String>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Fapps"));
    };
    let Some(app) = live_app(&state, &account.id, &consent_id, now()).await? else {
        return Ok(app_not_found());
    };
    access_page(&state, &session, &account, &app, None, None).await
}

/// `POST /apps/{consent_id}/access`: stores the new choice ([`crate::store::Store::set_grant_choice`]),
/// which every instance applies to the app's next request; nothing revoked comes back (a
/// revoked token, family or grant stays so). Audited as `consent_changed`; then `303` to
/// `/apps` with a notice. A choice of named projects with none ticked shows the page again
/// (400) with the reason.
pub async fn change_access(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    Path(consent_id): Path<String>,
    CsrfForm(super::consent::ChoiceForm(pairs)): CsrfForm<super::consent::ChoiceForm>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Fapps"));
    };
    let now = now();
    let Some(app) = live_app(&state, &account.id, &consent_id, now).await? else {
        return Ok(app_not_found());
    };
    let own = state.store.projects_of_account(&account.id).await?;
    let name = display_name(&app);
    let choice = match super::consent::read_choice(&pairs, &own, now) {
        Ok(Some(choice)) => choice,
        // A form that chose nothing changes nothing, and says so.
        Ok(None) => {
            set_notice(
                &session,
                &format!("{name}'s access is unchanged: the form chose nothing."),
            )
            .await?;
            return Ok(see_other("/apps"));
        }
        Err(why) => {
            return access_page(&state, &session, &account, &app, None, Some(why)).await;
        }
    };
    let changed = state
        .store
        .set_grant_choice(&account.id, &consent_id, &choice, now)
        .await?;
    if !changed {
        return Ok(app_not_found());
    }
    state
        .store
        .audit(
            AuditEvent {
                account_id: Some(&account.id),
                client_id: Some(&app.client_id),
                source_ip: Some(&client.to_string()),
                ..AuditEvent::new(Event::ConsentChanged, Outcome::Success)
            },
            now,
        )
        .await;
    set_notice(
        &session,
        &format!("{name} now reaches only what you chose, from its next request."),
    )
    .await?;
    Ok(see_other("/apps"))
}

/// Tool calls, resource reads and prompt gets shown on an app's activity page.
pub const ACTIVITY_SHOWN: i64 = 50;

struct EventRow {
    /// `2026-01-02 03:04:05 UTC`.
    at: String,
    /// `Tool call`, `Resource read`, `Prompt`, `Approved`, `Denied`, `Revoked`.
    kind: &'static str,
    /// The tool name, the resource's URI template, the prompt name or the scopes approved.
    what: String,
    /// The note the call touched: `(path of its console page, title)`.
    note: Option<(String, String)>,
    project: String,
    /// What happened, in words.
    outcome: &'static str,
    /// Where an authorization event came from (the browser's address).
    source: Option<String>,
}

/// How the activity page names an audit event (`event` and `outcome` as the row holds them).
fn event_kind(event: &str, outcome: &str) -> &'static str {
    match (Event::parse(event), Outcome::parse(outcome)) {
        (Some(Event::ResourceRead), _) => "Resource read",
        (Some(Event::PromptGet), _) => "Prompt",
        (Some(Event::Consent), Some(Outcome::Denied)) => "Denied",
        (Some(Event::Consent), _) => "Approved",
        (Some(Event::ConsentRevoked), _) => "Revoked",
        (Some(Event::ConsentChanged), _) => "Access changed by you",
        (Some(Event::FamilyRevoked), _) => "Token revoked by the app",
        _ => "Tool call",
    }
}

#[derive(Template)]
#[template(path = "app_activity.html")]
struct ActivityPage {
    name: String,
    consent_id: String,
    /// `client_id=…` for the timeline link.
    timeline: String,
    notice: Option<String>,
    /// What the last tool-list form could not do.
    error: Option<String>,
    /// The tool list of the grant, in words.
    tools: String,
    /// `all`, `only` or `except`: which choice the form shows selected.
    tools_mode: &'static str,
    /// The names of the list, comma-separated, for the form.
    tool_names: String,
    limit: i64,
    /// The grant was revoked: the page says so.
    revoked: bool,
    events: Vec<EventRow>,
    csrf_token: String,
    oauth_enabled: bool,
    /// The signed-in account is an operator: the nav links the upstream page.
    operator: bool,
}

/// The project id in a `tool_call`, `resource_read` or `prompt_get` audit record's detail
/// (`credential=… project=ID duration_ms=N`).
fn project_of(detail: Option<&str>) -> Option<&str> {
    detail?
        .split(' ')
        .find_map(|part| part.strip_prefix("project="))
}

/// The activity page's rows of the audit `records`, in their order: the time, the project
/// (named from `projects`, the account's projects by id, else said to be one the account left),
/// the kind, what it was, the note a call touched (its console path and title, each note looked
/// up once, only in a project of `projects`), the outcome in words, and the address of an
/// authorization event. Errors: the store's.
async fn event_rows(
    state: &AppState,
    records: Vec<AuditRecord>,
    projects: &HashMap<String, String>,
) -> Result<Vec<EventRow>, AppError> {
    let mut events = Vec::with_capacity(records.len());
    let mut titles: HashMap<String, Option<String>> = HashMap::new();
    for e in records {
        let project_id = project_of(e.detail.as_deref()).map(str::to_string);
        let note_id = super::notes::note_of(e.detail.as_deref()).map(str::to_string);
        // Each note looked up once (at most ACTIVITY_SHOWN of them).
        let note = match (&project_id, note_id) {
            (Some(p), Some(n)) if projects.contains_key(p) => {
                let path = format!("/projects/{p}/notes/{n}");
                match titles.get(&path) {
                    Some(title) => title.clone().map(|t| (path, t)),
                    None => {
                        let title = state.store.note(p, &n).await?.map(|note| note.title);
                        titles.insert(path.clone(), title.clone());
                        title.map(|t| (path, t))
                    }
                }
            }
            _ => None,
        };
        let authorization = matches!(
            e.event.as_str(),
            "consent" | "consent_revoked" | "consent_changed" | "family_revoked"
        );
        events.push(EventRow {
            at: super::activity::to_the_second(e.at),
            project: match &project_id {
                Some(id) => projects
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| "a project you are no longer a member of".into()),
                None => "—".into(),
            },
            kind: event_kind(&e.event, &e.outcome),
            // A consent row's subject is the scopes approved; a revocation has none to show.
            what: if authorization && e.event != "consent" {
                String::new()
            } else {
                e.subject.clone().unwrap_or_default()
            },
            note,
            outcome: super::activity::outcome_words(&e.outcome),
            source: if authorization {
                e.source_ip.clone()
            } else {
                None
            },
        });
    }
    Ok(events)
}

/// `GET /apps/{consent_id}`: what the app did with the account's access — the last
/// [`ACTIVITY_SHOWN`] tool calls, resource reads and prompt gets with the note they touched
/// (a link), their project and outcome in words, never their arguments or results, and the
/// authorization events (approved, denied, revoked, with the address they came from), times to
/// the second. Readable after the grant was revoked; another account's grant answers 404.
pub async fn activity(
    State(state): State<AppState>,
    session: Session,
    Path(consent_id): Path<String>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Fapps"));
    };
    let Some(app) = state
        .store
        .consent_of_account(&account.id, &consent_id)
        .await?
    else {
        return Ok(app_not_found());
    };
    let revoked = !state
        .store
        .connected_apps(&account.id)
        .await?
        .iter()
        .any(|a| a.consent_id == consent_id);
    // Project names only for projects the account is still a member of.
    let projects: HashMap<String, String> = state
        .store
        .projects_of_account(&account.id)
        .await?
        .into_iter()
        .map(|p| (p.project_id, p.name))
        .collect();
    let records = state
        .store
        .client_activity(&account.id, &app.client_id, ACTIVITY_SHOWN)
        .await?;
    let events = event_rows(&state, records, &projects).await?;
    let filter = ToolFilter::from_stored(app.tool_filter.as_deref());
    let (tools_mode, tool_names) = match &filter {
        ToolFilter::All => ("all", String::new()),
        ToolFilter::Only(names) => ("only", names.join(", ")),
        ToolFilter::Except(names) => ("except", names.join(", ")),
    };
    render(
        StatusCode::OK,
        &ActivityPage {
            name: display_name(&app),
            consent_id: app.consent_id.clone(),
            timeline: timeline_query(&app.client_id),
            notice: take_notice(&session).await?,
            error: take_error(&session).await?,
            tools: filter.in_words(),
            tools_mode,
            tool_names,
            limit: ACTIVITY_SHOWN,
            revoked,
            events,
            csrf_token: csrf_token(&session).await?,
            oauth_enabled: state.config.oauth_enabled,
            operator: account.admin,
        },
    )
}

/// Body of `POST /apps/revoke` and query of `GET /apps/revoke`.
#[derive(Deserialize)]
pub struct RevokeForm {
    #[serde(default)]
    consent_id: String,
}

/// `GET /apps/revoke?consent_id=…`: the confirmation page naming the app and what revoking
/// it does; another account's (or an already revoked) grant answers 404.
pub async fn confirm_revoke(
    State(state): State<AppState>,
    session: Session,
    PageQuery(form): PageQuery<RevokeForm>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Fapps"));
    };
    let Some(app) = state
        .store
        .connected_apps(&account.id)
        .await?
        .into_iter()
        .find(|a| a.consent_id == form.consent_id)
    else {
        return Ok(app_not_found());
    };
    let name = display_name(&app);
    let confirmation = Confirmation {
        title: format!("Revoke {name}?"),
        consequence: format!(
            "{name} (returning to {}) will no longer be able to use your account: its access and refresh tokens stop working at once, and its next call is refused. To use your account again it has to ask you again.",
            host_for_display(&app.redirect_uri)
        ),
        action: "/apps/revoke".into(),
        fields: vec![("consent_id", app.consent_id)],
        button: format!("Revoke {name}"),
        cancel: "/apps".into(),
    };
    confirm_page(&state, &session, &confirmation).await
}

fn app_not_found() -> Response {
    error_page(
        StatusCode::NOT_FOUND,
        "App not found",
        "No connected app of yours is at this address. It may have been revoked already.",
    )
}

/// `POST /apps/revoke`: revokes the grant, then `303` to `/apps` with a notice naming the app.
pub async fn revoke(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<RevokeForm>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Fapps"));
    };
    let now = now();
    let name = state
        .store
        .connected_apps(&account.id)
        .await?
        .into_iter()
        .find(|a| a.consent_id == form.consent_id)
        .map(|a| display_name(&a));
    let revoked = state
        .store
        .revoke_consent(&account.id, &form.consent_id, now)
        .await?;
    let notice = match (&revoked, name) {
        (Some(_), Some(name)) => format!("{name} can no longer use your account."),
        (Some(_), None) => "The app can no longer use your account.".to_string(),
        (None, _) => "That app had no access to revoke: it was revoked already.".to_string(),
    };
    set_notice(&session, &notice).await?;
    if let Some(client_id) = revoked {
        crate::metrics::token_event(crate::domain::audit::TokenEvent::Revoked);
        state
            .store
            .audit(
                AuditEvent {
                    account_id: Some(&account.id),
                    client_id: Some(&client_id),
                    source_ip: Some(&client.to_string()),
                    ..AuditEvent::new(Event::ConsentRevoked, Outcome::Success)
                },
                now,
            )
            .await;
    }
    Ok(see_other("/apps"))
}

/// Body of `POST /apps/tools`.
#[derive(Deserialize)]
pub struct ToolsForm {
    #[serde(default)]
    consent_id: String,
    /// `all`, `only` or `except`.
    #[serde(default)]
    mode: String,
    /// Comma-separated catalog names (`list_projects`, `memory__read_graph`).
    #[serde(default)]
    tools: String,
}

/// `POST /apps/tools`: sets which tools the app's grant may use — every tool, only the named
/// ones, or all but the named ones (issue "Upstream MCP servers behind Gatehouse" §4, the same
/// lists as `gatehouse key create --tools|--deny-tools`). It applies to the next request of
/// every token of the grant on every instance: `tools/list` leaves the others out and a call
/// of one answers like an unknown tool. Then `303` to the app's page with a notice; a list
/// that does not parse changes nothing and says why. Another account's (or a revoked) grant
/// answers 404.
pub async fn set_tools(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<ToolsForm>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Fapps"));
    };
    let Some(app) = state
        .store
        .connected_apps(&account.id)
        .await?
        .into_iter()
        .find(|a| a.consent_id == form.consent_id)
    else {
        return Ok(app_not_found());
    };
    let back = format!("/apps/{}", app.consent_id);
    let parsed = match form.mode.as_str() {
        "only" => ToolFilter::parse(Some(&form.tools), None),
        "except" => ToolFilter::parse(None, Some(&form.tools)),
        "all" => Ok(ToolFilter::All),
        _ => Err("choose every tool, only some, or every tool but some".to_string()),
    };
    let filter = match parsed {
        Ok(filter) => filter,
        Err(why) => {
            let why = why
                .replace("--deny-tools", "the list")
                .replace("--tools", "the list");
            set_error(&session, &format!("Tool list not changed: {why}.")).await?;
            return Ok(see_other(&back));
        }
    };
    let name = display_name(&app);
    state
        .store
        .set_consent_tool_filter(&account.id, &app.consent_id, filter.to_stored().as_deref())
        .await?;
    let now = now();
    state
        .store
        .audit(
            AuditEvent {
                event: Event::AppToolsSet,
                outcome: Outcome::Success,
                account_id: Some(&account.id),
                client_id: Some(&app.client_id),
                subject: Some(&app.consent_id),
                source_ip: Some(&client.to_string()),
                detail: Some(&format!("tools={}", filter.describe())),
            },
            now,
        )
        .await;
    set_notice(
        &session,
        &format!("{name} may now use: {}.", filter.in_words()),
    )
    .await?;
    Ok(see_other(&back))
}
