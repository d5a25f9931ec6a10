//! A person's own MCP servers on the Connections page (issue "Connections", item 5; seed 001's
//! per-account registry), for the signed-in person only:
//!
//! - `POST /connections/servers`: adds one (label, URL, optional bearer token sealed with the
//!   server key like an operator's header values), after the URL passed
//!   [`crate::mcp::upstream::personal::check_url`]; its tools are listed at once, so that their
//!   definitions wait on the page for approval;
//! - `POST /connections/servers/{name}/check`: lists its tools again (new or changed
//!   definitions wait for approval);
//! - `POST /connections/servers/{name}/approve`: approves the definitions the page showed
//!   (`definitions` = `TOOL=HASH …`; one that changed since is not approved);
//! - `POST /connections/servers/{name}/{enable|disable|up|down}`;
//! - `GET /connections/servers/{name}/remove` (the confirmation) and `POST` (removes it).
//!
//! Another person's server answers 404 like one that does not exist. With
//! `GATEHOUSE_PERSONAL_UPSTREAMS=off` every route answers 404 and nothing is served.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use rand::RngCore as _;
use serde::Deserialize;
use tower_sessions::Session;

use super::session::{set_notice, signed_in};
use super::{Confirmation, CsrfForm, confirm_page, error_page, see_other};
use crate::client_addr::ClientAddr;
use crate::domain::audit::{Event, Outcome};
use crate::domain::server_key::Keyring;
use crate::domain::upstream::{
    MAX_PERSONAL_UPSTREAMS, PERSONAL_MAX_CONCURRENCY, PERSONAL_SUFFIX_LEN, PERSONAL_TIMEOUT,
    UpstreamName, parse_personal_label, seal_context,
};
use crate::error::AppError;
use crate::mcp::upstream::personal::check_url;
use crate::mcp::upstream::server::UpstreamServer;
use crate::state::AppState;
use crate::store::StoreError;
use crate::store::audit::AuditEvent;
use crate::store::now;
use crate::store::personal_upstreams::ToolDefinition;
use crate::store::upstreams::{NewUpstream, Transport, UpstreamRecord};

/// The longest bearer token accepted, in bytes.
const MAX_TOKEN_BYTES: usize = 4096;

/// One of the person's servers as the page shows it.
pub struct OwnServer {
    /// The stored name, the prefix of its tools' names.
    pub name: String,
    /// The person's label.
    pub label: String,
    /// Its URL.
    pub url: String,
    /// Whether it is served.
    pub enabled: bool,
    /// Whether a bearer token is kept for it.
    pub has_token: bool,
    /// The last failure seen.
    pub last_error: Option<String>,
    /// Tools whose definition is approved, by their catalog name.
    pub approved: Vec<String>,
    /// Definitions waiting for approval.
    pub pending: Vec<PendingTool>,
    /// `TOOL=HASH …` of the pending definitions shown (what "Approve" approves).
    pub pending_hashes: String,
}

/// A definition waiting for approval, with what changed.
pub struct PendingTool {
    /// The upstream's own tool name.
    pub tool: String,
    /// `true`: never approved; `false`: changed since it was.
    pub new: bool,
    /// For a changed definition, each field that differs: name, approved value, new value.
    pub changes: Vec<(String, String, String)>,
    /// For a new one, the definition shown whole (pretty JSON).
    pub definition: String,
}

fn pretty(value: Option<&serde_json::Value>) -> String {
    value.map_or_else(
        || "(none)".to_string(),
        |v| serde_json::to_string_pretty(v).unwrap_or_default(),
    )
}

/// What changed between two definitions, field by field (`description`, `inputSchema`, …).
pub fn definition_diff(approved: &str, seen: &str) -> Vec<(String, String, String)> {
    let parse = |t: &str| serde_json::from_str::<serde_json::Value>(t).unwrap_or_default();
    let (old, new) = (parse(approved), parse(seen));
    let empty = serde_json::Map::new();
    let (o, n) = (
        old.as_object().unwrap_or(&empty),
        new.as_object().unwrap_or(&empty),
    );
    let mut keys: Vec<&String> = o.keys().chain(n.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| o.get(*k) != n.get(*k))
        .map(|k| (k.clone(), pretty(o.get(k)), pretty(n.get(k))))
        .collect()
}

fn pending_of(d: &ToolDefinition) -> PendingTool {
    match &d.approved_definition {
        Some(approved) => PendingTool {
            tool: d.tool.clone(),
            new: false,
            changes: definition_diff(approved, &d.definition),
            definition: String::new(),
        },
        None => PendingTool {
            tool: d.tool.clone(),
            new: true,
            changes: Vec::new(),
            definition: pretty(serde_json::from_str(&d.definition).ok().as_ref()),
        },
    }
}

/// The person's servers for the Connections page, in their order; none when the operator
/// turned them off.
pub async fn own_servers(state: &AppState, account_id: &str) -> Result<Vec<OwnServer>, AppError> {
    if !state.config.personal_upstreams {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for record in state.store.personal_upstreams(account_id).await? {
        let definitions = state.store.upstream_tool_definitions(&record.name).await?;
        let pending: Vec<&ToolDefinition> = definitions.iter().filter(|d| d.is_pending()).collect();
        out.push(OwnServer {
            approved: definitions
                .iter()
                .filter(|d| !d.is_pending())
                .map(|d| format!("{}__{}", record.name, d.tool))
                .collect(),
            pending_hashes: pending
                .iter()
                .map(|d| format!("{}={}", d.tool, d.hash))
                .collect::<Vec<_>>()
                .join(" "),
            pending: pending.into_iter().map(pending_of).collect(),
            label: record.label.clone().unwrap_or_default(),
            url: record.url.clone().unwrap_or_default(),
            enabled: record.enabled,
            has_token: record.headers_sealed.is_some(),
            last_error: record.last_error.as_ref().map(|(e, _)| e.clone()),
            name: record.name,
        });
    }
    Ok(out)
}

fn not_found() -> Response {
    error_page(
        StatusCode::NOT_FOUND,
        "Server not found",
        "No server of yours is at this address. It may have been removed already.",
    )
}

fn bad_input(message: &str) -> Response {
    error_page(
        StatusCode::BAD_REQUEST,
        "The server was not added",
        &format!("{message} Go back to the Connections page to try again."),
    )
}

async fn audit(state: &AppState, client: &ClientAddr, account: &str, event: Event, name: &str) {
    state
        .store
        .audit(
            AuditEvent {
                event,
                outcome: Outcome::Success,
                account_id: Some(account),
                client_id: None,
                subject: Some(name),
                source_ip: Some(&client.to_string()),
                detail: None,
            },
            now(),
        )
        .await;
}

/// Lists `record`'s tools now with a client of its own (the definitions seen are recorded:
/// new and changed ones wait for approval). Returns the failure, if any, in one line.
async fn list_now(state: &AppState, record: UpstreamRecord) -> Option<String> {
    match UpstreamServer::new(state.clone(), record) {
        Ok(server) => {
            let server = std::sync::Arc::new(server);
            let result = server.tools().await;
            server.stop().await;
            result.err().map(|e| e.0)
        }
        Err(e) => Some(e.0),
    }
}

/// The signed-in person's own server `name`, or the answer to give instead.
async fn own(
    state: &AppState,
    session: &Session,
    name: &str,
) -> Result<Result<(String, UpstreamRecord), Response>, AppError> {
    if !state.config.personal_upstreams {
        return Ok(Err(not_found()));
    }
    let Some(account) = signed_in(state, session).await? else {
        return Ok(Err(see_other("/signin?next=%2Fconnections")));
    };
    match state.store.upstream(name).await? {
        Some(record) if record.owner.as_deref() == Some(account.id.as_str()) => {
            Ok(Ok((account.id, record)))
        }
        _ => Ok(Err(not_found())),
    }
}

/// The add form.
#[derive(Debug, Deserialize)]
pub struct AddForm {
    /// The person's name for it.
    pub label: String,
    /// Its MCP endpoint.
    pub url: String,
    /// An optional bearer token (sent as `Authorization: Bearer …`).
    #[serde(default)]
    pub token: String,
}

/// The add form checked: the label ([`parse_personal_label`]), the URL ([`check_url`]: the
/// operator's allowed hosts, no private address) and the bearer token, trimmed (visible text
/// without spaces, at most [`MAX_TOKEN_BYTES`]; empty: none). Refusal: the 400 page saying
/// what is wrong.
async fn checked_input<'f>(
    state: &AppState,
    form: &'f AddForm,
) -> Result<(String, url::Url, &'f str), Response> {
    let label = match parse_personal_label(&form.label) {
        Ok(label) => label,
        Err(e) => return Err(bad_input(&e.0)),
    };
    let url = match check_url(&state.config.upstream_allow_hosts, &form.url).await {
        Ok(url) => url,
        Err(e) => return Err(bad_input(&e)),
    };
    let token = form.token.trim();
    if token.len() > MAX_TOKEN_BYTES
        || http::HeaderValue::from_str(&format!("Bearer {token}")).is_err()
    {
        return Err(bad_input(
            "The token must be visible text without spaces, at most 4096 characters.",
        ));
    }
    Ok((label, url, token))
}

/// The record of `account`'s new server `name` at `url`: HTTP, the personal timeout and
/// concurrency, definitions not trusted, served to `account` only; a non-empty `token` is kept
/// as its `authorization` header, sealed with `keys` for this server's headers.
fn new_upstream(
    name: &UpstreamName,
    url: &url::Url,
    token: &str,
    keys: &Keyring,
    account: &str,
) -> NewUpstream {
    let (header_names, headers_sealed) = if token.is_empty() {
        (Vec::new(), None)
    } else {
        let pairs = vec![("authorization".to_string(), format!("Bearer {token}"))];
        let plain = serde_json::to_vec(&pairs).unwrap_or_default();
        (
            vec!["authorization".to_string()],
            Some(keys.seal(&seal_context(name, "headers"), &plain)),
        )
    };
    NewUpstream {
        name: name.as_str().to_string(),
        transport: Transport::Http,
        url: Some(url.to_string()),
        header_names,
        headers_sealed,
        command: Vec::new(),
        env_names: Vec::new(),
        env_sealed: None,
        timeout_ms: i64::try_from(PERSONAL_TIMEOUT.as_millis()).unwrap_or(30_000),
        max_concurrency: i64::from(PERSONAL_MAX_CONCURRENCY),
        trust_definitions: false,
        accounts: Some(vec![account.to_string()]),
        projects: None,
    }
}

/// Stores `account`'s new server `label` ([`new_upstream`]) under a name of its label and a
/// random suffix, drawing another suffix on a name conflict, three times at most. Returns the
/// name, or the 400 page: the name is not usable, the account already has
/// [`MAX_PERSONAL_UPSTREAMS`] servers or one of that label, or three names were taken. Errors:
/// the store's.
async fn create(
    state: &AppState,
    account: &str,
    label: &str,
    url: &url::Url,
    token: &str,
    keys: &Keyring,
) -> Result<Result<UpstreamName, Response>, AppError> {
    for _ in 0..3 {
        let mut bytes = [0u8; PERSONAL_SUFFIX_LEN / 2];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        let Some(name) = UpstreamName::personal(label, &hex::encode(bytes)) else {
            return Ok(Err(bad_input("The name is not usable.")));
        };
        let new = new_upstream(&name, url, token, keys, account);
        match state
            .store
            .create_personal_upstream(&new, account, label, MAX_PERSONAL_UPSTREAMS, now())
            .await
        {
            Ok(()) => return Ok(Ok(name)),
            Err(StoreError::Conflict(what)) if what == "limit" => {
                return Ok(Err(bad_input(&format!(
                    "You already have {MAX_PERSONAL_UPSTREAMS} servers of your own; remove one first."
                ))));
            }
            Err(StoreError::Conflict(what)) if what.starts_with("label ") => {
                return Ok(Err(bad_input(&format!(
                    "You already have a server named {label}."
                ))));
            }
            Err(StoreError::Conflict(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Err(bad_input("The name is not usable; try again.")))
}

/// `POST /connections/servers`.
pub async fn add(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<AddForm>,
) -> Result<Response, AppError> {
    if !state.config.personal_upstreams {
        return Ok(not_found());
    }
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin?next=%2Fconnections"));
    };
    let (label, url, token) = match checked_input(&state, &form).await {
        Ok(input) => input,
        Err(refused) => return Ok(refused),
    };
    let keys = match state.keyring() {
        Ok(keys) => keys,
        Err(e) => {
            return Ok(error_page(
                StatusCode::SERVICE_UNAVAILABLE,
                "Servers cannot be added now",
                &format!("This Gatehouse cannot keep secrets yet: {e}."),
            ));
        }
    };
    let name = match create(&state, &account.id, &label, &url, token, keys).await? {
        Ok(name) => name,
        Err(refused) => return Ok(refused),
    };
    audit(
        &state,
        &client,
        &account.id,
        Event::PersonalUpstreamAdded,
        name.as_str(),
    )
    .await;
    let failure = match state.store.upstream(name.as_str()).await? {
        Some(record) => list_now(&state, record).await,
        None => None,
    };
    let notice = match failure {
        None => format!(
            "{label} is added. Check its tools below and approve them: until then your apps do not see them."
        ),
        Some(e) => format!(
            "{label} is added, but its tools could not be listed yet ({e}). Use \"Check tools\" once it answers."
        ),
    };
    set_notice(&session, &notice).await?;
    Ok(see_other("/connections"))
}

/// `POST /connections/servers/{name}/check`.
pub async fn check(
    State(state): State<AppState>,
    session: Session,
    Path(name): Path<String>,
    CsrfForm(_): CsrfForm<super::NoFields>,
) -> Result<Response, AppError> {
    let (_, record) = match own(&state, &session, &name).await? {
        Ok(found) => found,
        Err(answer) => return Ok(answer),
    };
    let label = record.label.clone().unwrap_or_default();
    let notice = match list_now(&state, record).await {
        None => format!("The tools of {label} were listed again."),
        Some(e) => format!("The tools of {label} could not be listed: {e}"),
    };
    set_notice(&session, &notice).await?;
    Ok(see_other("/connections"))
}

/// The approve form: the pending definitions the page showed.
#[derive(Debug, Deserialize)]
pub struct ApproveForm {
    /// `TOOL=HASH` pairs separated by spaces.
    pub definitions: String,
}

/// `POST /connections/servers/{name}/approve`.
pub async fn approve(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    Path(name): Path<String>,
    CsrfForm(form): CsrfForm<ApproveForm>,
) -> Result<Response, AppError> {
    let (account, record) = match own(&state, &session, &name).await? {
        Ok(found) => found,
        Err(answer) => return Ok(answer),
    };
    let pairs: Vec<(String, String)> = form
        .definitions
        .split_whitespace()
        .filter_map(|p| p.split_once('='))
        .map(|(t, h)| (t.to_string(), h.to_string()))
        .collect();
    let approved = match state
        .store
        .approve_personal_upstream_tools(&account, &name, &pairs, now())
        .await
    {
        Ok(n) => n,
        Err(StoreError::NotFound(_)) => return Ok(not_found()),
        Err(e) => return Err(e.into()),
    };
    if approved > 0 {
        audit(
            &state,
            &client,
            &account,
            Event::PersonalUpstreamApproved,
            &name,
        )
        .await;
    }
    let label = record.label.unwrap_or_default();
    let notice = if usize::try_from(approved).unwrap_or(0) == pairs.len() {
        format!("{approved} tools of {label} are approved; your apps see them now.")
    } else {
        format!(
            "{approved} of {} tools of {label} are approved; the others changed since the page was shown, look again.",
            pairs.len()
        )
    };
    set_notice(&session, &notice).await?;
    Ok(see_other("/connections"))
}

/// `POST /connections/servers/{name}/{action}` for `enable`, `disable`, `up` and `down`.
pub async fn act(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    Path((name, action)): Path<(String, String)>,
    CsrfForm(_): CsrfForm<super::NoFields>,
) -> Result<Response, AppError> {
    let (account, record) = match own(&state, &session, &name).await? {
        Ok(found) => found,
        Err(answer) => return Ok(answer),
    };
    let label = record.label.unwrap_or_default();
    let now = now();
    let notice = match action.as_str() {
        "enable" | "disable" => {
            let on = action == "enable";
            state
                .store
                .set_personal_upstream_enabled(&account, &name, on, now)
                .await?;
            let event = if on {
                Event::PersonalUpstreamEnabled
            } else {
                Event::PersonalUpstreamDisabled
            };
            audit(&state, &client, &account, event, &name).await;
            if on {
                format!("{label} is on: your apps see its approved tools.")
            } else {
                format!("{label} is off: your apps no longer see its tools.")
            }
        }
        "up" | "down" => {
            state
                .store
                .move_personal_upstream(&account, &name, action == "up", now)
                .await?;
            format!("{label} is moved.")
        }
        _ => return Ok(super::not_found().await),
    };
    set_notice(&session, &notice).await?;
    Ok(see_other("/connections"))
}

/// `GET /connections/servers/{name}/remove`: the confirmation.
pub async fn confirm_remove(
    State(state): State<AppState>,
    session: Session,
    Path(name): Path<String>,
) -> Result<Response, AppError> {
    let (_, record) = match own(&state, &session, &name).await? {
        Ok(found) => found,
        Err(answer) => return Ok(answer),
    };
    let label = record.label.unwrap_or_default();
    let confirmation = Confirmation {
        title: format!("Remove {label}?"),
        consequence: format!(
            "Your apps will no longer see or call the tools of {label} ({}), and the token kept for it is forgotten. To use it again, add it again and approve its tools.",
            record.url.unwrap_or_default()
        ),
        action: format!("/connections/servers/{name}/remove"),
        fields: Vec::new(),
        button: format!("Remove {label}"),
        cancel: "/connections".into(),
    };
    confirm_page(&state, &session, &confirmation).await
}

/// `POST /connections/servers/{name}/remove`.
pub async fn remove(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    Path(name): Path<String>,
    CsrfForm(_): CsrfForm<super::NoFields>,
) -> Result<Response, AppError> {
    let (account, record) = match own(&state, &session, &name).await? {
        Ok(found) => found,
        Err(answer) => return Ok(answer),
    };
    match state.store.remove_personal_upstream(&account, &name).await {
        Ok(()) => {}
        Err(StoreError::NotFound(_)) => return Ok(not_found()),
        Err(e) => return Err(e.into()),
    }
    audit(
        &state,
        &client,
        &account,
        Event::PersonalUpstreamRemoved,
        &name,
    )
    .await;
    let label = record.label.unwrap_or_default();
    set_notice(&session, &format!("{label} is removed.")).await?;
    Ok(see_other("/connections"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diff_names_each_changed_field() {
        let old = r#"{"name":"t","description":"reads","inputSchema":{"type":"object"}}"#;
        let new =
            r#"{"name":"t","description":"reads and sends mail","inputSchema":{"type":"object"}}"#;
        let diff = definition_diff(old, new);
        assert_eq!(diff.len(), 1, "{diff:?}");
        assert_eq!(diff[0].0, "description");
        assert_eq!(diff[0].1, "\"reads\"");
        assert_eq!(diff[0].2, "\"reads and sends mail\"");
        assert!(definition_diff(old, old).is_empty());
    }
}
