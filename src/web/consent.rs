//! The authorization endpoint's pages: `GET/POST /oauth/authorize` (sign-in redirect, remembered
//! consent, the consent page) and `POST /oauth/authorize/decision`. The rules are in
//! [`crate::oauth::authorize`].

use askama::Template;
use axum::extract::{FromRequest, RawQuery, State};

use crate::client_addr::ClientAddr;
use crate::domain::audit::{Event, Outcome};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use tower_sessions::Session;

use super::session::{csrf_token, signed_in};
use super::{
    CsrfForm, PageForm, PageQuery, authorization_error_page, error_page, error_page_with, render,
    see_other,
};
use crate::domain::authorization::AuthorizationErrorCode;
use crate::domain::cimd::is_url_client_id;
use crate::domain::loopback::is_loopback_host;
use crate::domain::redirect_uri::host_for_display;
use crate::domain::scope::Scope;
use crate::domain::secret::random_urlsafe;
use crate::error::AppError;
use crate::oauth::authorize::{
    self, AuthorizationRequest, AuthorizeError, consent_covers, error_redirect, issue_code,
    validate,
};
use crate::oauth::clients::FetchFor;
use crate::oauth::register::registration_budget;
use crate::state::AppState;
use crate::store::now;
use crate::store::oauth::GrantChoice;

/// How long the consent page may stay open before its answer is refused, in seconds.
pub const CONSENT_TTL_SECS: i64 = 600;

#[derive(Template)]
#[template(path = "consent.html")]
struct ConsentPage<'a> {
    /// What can be verified about the app: the host of its metadata document (a URL client
    /// ID), else the host it returns to.
    verified_host: String,
    /// The host of a URL client ID's metadata document.
    publisher: Option<String>,
    /// The name the app gave itself, if any (a claim).
    client_name: Option<&'a str>,
    /// The name claims to be official or verified ([`claims_authority`]).
    claims_authority: bool,
    client_id: &'a str,
    redirect_host: &'a str,
    loopback: bool,
    /// For a device authorization: the user code the person typed.
    user_code: Option<&'a str>,
    /// A registered resource the request is for: its host and name.
    server: Option<String>,
    /// `(text, href, host)` of the client's homepage, privacy policy and terms.
    links: Vec<(&'static str, String, String)>,
    /// "first registered 3 minutes ago".
    registered: Option<String>,
    scopes: Vec<String>,
    /// On a step-up: what the account already allowed this app.
    already: Vec<String>,
    email: &'a str,
    csrf_token: &'a str,
    request_id: &'a str,
    /// The choice of projects, access and duration (`None` for a registered resource).
    chooser: Option<Chooser>,
    /// The choice starts from named projects (a step-up of such a grant).
    limited: bool,
}

/// The fields of the per-app project choice (issue 37) on the consent page and the app's
/// page, as they start: from the live grant's choice, else every project, read and write
/// (when asked for), until revoked.
pub(super) struct Chooser {
    /// Every project chosen, including later ones.
    pub all: bool,
    /// `(id, name, checked)` of each active project of the account, oldest first.
    pub projects: Vec<(String, String, bool)>,
    /// The grant may write (the client asked for `mcp:write`): read and write is offered.
    pub offer_write: bool,
    /// Reading only is chosen.
    pub read_only: bool,
    /// `(value, label, checked)` of each duration.
    pub durations: Vec<(String, String, bool)>,
}

impl Chooser {
    pub(super) fn new(
        projects: &[crate::store::projects::ProjectMembership],
        current: Option<&GrantChoice>,
        offer_write: bool,
        read_only: bool,
    ) -> Chooser {
        let chosen = current.and_then(|c| c.project_ids.as_ref());
        let end = current.and_then(|c| c.expires_at);
        let mut durations = Vec::new();
        if let Some(end) = end {
            durations.push((
                format!("at:{end}"),
                format!("As before: until {}", super::when(end)),
                true,
            ));
        }
        durations.push(("revoked".into(), "Until I revoke it".into(), end.is_none()));
        durations.push(("30d".into(), "30 days from now".into(), false));
        durations.push(("1d".into(), "1 day from now".into(), false));
        Chooser {
            all: chosen.is_none(),
            projects: projects
                .iter()
                .map(|p| {
                    let checked = chosen.is_some_and(|ids| ids.contains(&p.project_id));
                    (p.project_id.clone(), p.name.clone(), checked)
                })
                .collect(),
            offer_write,
            read_only: read_only || !offer_write,
            durations,
        }
    }
}

/// The fields of a form that carries the project choice: every pair as sent, read by
/// [`read_choice`]. Any field but `project` (one per ticked project) given twice makes the
/// form not understood (400), as with every other form of the console.
pub struct ChoiceForm(pub Vec<(String, String)>);

impl<'de> Deserialize<'de> for ChoiceForm {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let pairs = Vec::<(String, String)>::deserialize(d)?;
        for (i, (k, _)) in pairs.iter().enumerate() {
            if k != "project" && pairs[..i].iter().any(|(seen, _)| seen == k) {
                return Err(serde::de::Error::custom(format!("duplicate field `{k}`")));
            }
        }
        Ok(ChoiceForm(pairs))
    }
}

/// Reads the choice of projects, access and duration from a submitted consent or app page
/// (fields `reach` = `all` | `named`, `project` once per checked project id, `access` =
/// `read` | `write`, `duration` = `revoked` | `30d` | `1d` | `at:T`, the end T in Unix
/// seconds chosen before and kept). `Ok(None)` when the form
/// carries no choice (`reach` absent: an older page, a scripted answer), so the live choice
/// is kept. Only projects of `own` count (a made-up id is dropped); named with none left is
/// refused with the sentence to show.
pub(super) fn read_choice(
    pairs: &[(String, String)],
    own: &[crate::store::projects::ProjectMembership],
    now: i64,
) -> Result<Option<GrantChoice>, &'static str> {
    let field = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let Some(reach) = field("reach") else {
        return Ok(None);
    };
    let project_ids = match reach {
        "all" => None,
        "named" => {
            let ids: Vec<String> = own
                .iter()
                .filter(|p| {
                    pairs
                        .iter()
                        .any(|(k, v)| k == "project" && *v == p.project_id)
                })
                .map(|p| p.project_id.clone())
                .collect();
            if ids.is_empty() {
                return Err("Choose at least one project, or all projects.");
            }
            Some(ids)
        }
        _ => return Err("Choose all projects or named projects."),
    };
    let read_only = match field("access").unwrap_or("write") {
        "read" => true,
        "write" => false,
        _ => return Err("Choose read only, or read and write."),
    };
    // `at:T` keeps an end chosen before (the person's own grant: any end still to come is
    // theirs to keep).
    let expires_at = match field("duration").unwrap_or("revoked") {
        "revoked" => None,
        "30d" => Some(now + 30 * 86_400),
        "1d" => Some(now + 86_400),
        other => match other
            .strip_prefix("at:")
            .and_then(|t| t.parse::<i64>().ok())
        {
            Some(end) if end > now => Some(end),
            _ => return Err("Choose how long the app may use your account."),
        },
    };
    Ok(Some(GrantChoice {
        project_ids,
        read_only,
        expires_at,
    }))
}

/// Words in an app's self-chosen name that claim an authority Gatehouse cannot check
/// ("Claude (Official Anthropic connector) - verified"): the consent page warns about them.
const AUTHORITY_WORDS: [&str; 7] = [
    "official",
    "verified",
    "certified",
    "trusted",
    "authentic",
    "genuine",
    "approved",
];

/// Whether `name` claims to be official or verified: one of [`AUTHORITY_WORDS`] in it, in any
/// case, also inside a longer word ("Officially", "unverified" is warned about too, as a name
/// has no business speaking of verification at all).
fn claims_authority(name: &str) -> bool {
    let lower = name.to_lowercase();
    AUTHORITY_WORDS.iter().any(|w| lower.contains(w))
}

/// `GET /oauth/authorize?…`.
pub async fn authorize_get(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    RawQuery(query): RawQuery,
) -> Result<Response, AppError> {
    let pairs: Vec<(String, String)> =
        url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    authorize(state, client, session, pairs).await
}

/// `POST /oauth/authorize` with a form body (OAuth 2.1 §4.1.1 allows POST).
pub async fn authorize_post(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    PageForm(pairs): PageForm<Vec<(String, String)>>,
) -> Result<Response, AppError> {
    authorize(state, client, session, pairs).await
}

fn redirect_error(state: &AppState, e: AuthorizeError) -> Response {
    match e {
        AuthorizeError::Storage { unavailable: true } => crate::error::unavailable_page(),
        AuthorizeError::Storage { unavailable: false } => crate::error::internal_error_page(),
        AuthorizeError::ClientUnavailable => super::retry_after(
            authorization_error_page(
                StatusCode::SERVICE_UNAVAILABLE,
                "Try again in a moment",
                "This application's identity could not be checked right now: its metadata document could not be fetched. Try again in a minute.",
            ),
            http::HeaderValue::from_static(crate::oauth::error::RETRY_AFTER_SECS),
        ),
        AuthorizeError::Throttled { retry_after } => super::retry_after(
            authorization_error_page(
                StatusCode::TOO_MANY_REQUESTS,
                "Too many new applications",
                "This address has asked for too many applications this server did not know yet. Sign in first, or try again later.",
            ),
            retry_after,
        ),
        AuthorizeError::Page(message) => authorization_error_page(
            StatusCode::BAD_REQUEST,
            "This sign-in request is not valid",
            &message,
        ),
        AuthorizeError::Redirect {
            redirect_uri,
            state: s,
            error,
            description,
        } => see_other(&error_redirect(
            &state.config.issuer,
            &redirect_uri,
            s.as_deref(),
            error,
            &description,
        )),
    }
}

/// The sign-in page (`reauth=1`: even for a signed-in account), then back to the
/// authorization request of `pairs` without `prompt=login`, so that sign-in is asked for once.
fn signin_then_authorize(pairs: &[(String, String)], reauth: bool) -> String {
    let again: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| {
            if k == "prompt" {
                let rest: Vec<&str> = v.split(' ').filter(|p| *p != "login").collect();
                (k.clone(), rest.join(" "))
            } else {
                (k.clone(), v.clone())
            }
        })
        .collect();
    let query: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(again.iter())
        .finish();
    let next = format!("/oauth/authorize?{query}");
    let mut signin = url::form_urlencoded::Serializer::new(String::new());
    signin.append_pair("next", &next);
    if reauth {
        signin.append_pair("reauth", "1");
    }
    format!("/signin?{}", signin.finish())
}

/// Records an authorization request of a known client for its connection timeline
/// (`authorization_request`, `success` or `refused` with the reason a person reads), with the
/// signed-in account if there is one. Written at once, like a sign-in attempt's row, so that
/// the timeline orders it among the consent and token rows that follow.
async fn note_request(
    state: &AppState,
    client: &ClientAddr,
    account: Option<&crate::store::accounts::Account>,
    client_id: &str,
    outcome: Outcome,
    detail: &str,
) {
    state
        .store
        .audit(
            crate::store::audit::AuditEvent {
                event: Event::AuthorizationRequest,
                outcome,
                account_id: account.map(|a| a.id.as_str()),
                client_id: Some(client_id),
                subject: None,
                source_ip: Some(&client.to_string()),
                detail: Some(detail),
            },
            now(),
        )
        .await;
}

/// Validates the authorization request of `pairs` ([`validate`]) and records it for the
/// client's timeline ([`note_request`]: `success` with its resource and scope, or `refused`
/// with the reason when the client is known), with the signed-in `account` if any. A metadata
/// document not yet known, fetched for an anonymous visitor, spends the address's budget of
/// new applications (a signed-in person has none). Refusal: the error page or the error
/// redirect to the client ([`redirect_error`]).
async fn validated(
    state: &AppState,
    client: &ClientAddr,
    account: Option<&crate::store::accounts::Account>,
    pairs: &[(String, String)],
) -> Result<AuthorizationRequest, Response> {
    let for_whom = match account {
        Some(_) => FetchFor::SignedIn,
        None => FetchFor::Budgeted(registration_budget(state, &client.to_string(), 0)),
    };
    let req = match validate(state, pairs, &for_whom).await {
        Ok(r) => r,
        Err(refusal) => {
            if let (Some(client_id), Some(reason)) = (&refusal.client_id, refusal.error.reason()) {
                note_request(state, client, account, client_id, Outcome::Refused, reason).await;
            }
            return Err(redirect_error(state, refusal.error));
        }
    };
    note_request(
        state,
        client,
        account,
        &req.client_id,
        Outcome::Success,
        &format!("resource={} scope={}", req.resource, req.scope),
    )
    .await;
    Ok(req)
}

/// What `account`'s remembered consent to `req`'s client, redirect URI and resource decides at
/// `now`. A live consent that covers the request answers it at once (unless `forced`, i.e.
/// `prompt=consent`): the code is issued ([`issue_code`]) and the redirect to the client is
/// returned as `Err`. Otherwise `Ok((step_up, current))` for the consent page: `step_up` is
/// what the account allowed this app before, when the request asks for more (the page then
/// lists only what is new), `current` the live grant's choice. What the grant allows now is
/// its effective scope (without `mcp:write` when the person chose reading only); a grant whose
/// chosen duration has passed is not remembered (approving starts a new one). Errors: the
/// store's.
async fn remembered_consent(
    state: &AppState,
    req: &AuthorizationRequest,
    account: &str,
    forced: bool,
    now: i64,
) -> Result<Result<(Option<String>, Option<GrantChoice>), Response>, AppError> {
    let remembered = state
        .store
        .consent_for(
            account,
            &req.client_id,
            &req.registered_redirect_uri,
            req.consent_resource(),
        )
        .await?;
    let mut step_up = None;
    let mut current = None;
    if let Some(consent) = remembered.filter(|c| !c.ended(now)) {
        let effective = consent.effective_scope();
        if consent_covers(&effective, &req.scope) {
            if !forced {
                let location = issue_code(state, req, account, &consent.id, now).await?;
                return Ok(Err(see_other(&location)));
            }
        } else {
            step_up = Some(effective);
        }
        current = Some(consent.choice());
    }
    Ok(Ok((step_up, current)))
}

async fn authorize(
    state: AppState,
    client: ClientAddr,
    session: Session,
    pairs: Vec<(String, String)>,
) -> Result<Response, AppError> {
    let account = signed_in(&state, &session).await?;
    let req = match validated(&state, &client, account.as_ref(), &pairs).await {
        Ok(r) => r,
        Err(refused) => return Ok(refused),
    };
    let fail = |error: AuthorizationErrorCode, description: &str| {
        redirect_error(
            &state,
            AuthorizeError::Redirect {
                redirect_uri: req.redirect_uri.clone(),
                state: req.state.clone(),
                error,
                description: description.to_string(),
            },
        )
    };
    let prompt = req.prompt.as_deref().unwrap_or("");
    let wants = |value: &str| prompt.split(' ').any(|p| p == value);
    // Not signed in, or `prompt=login` (OpenID Connect Core §3.1.2.1: authenticate again): the
    // sign-in page, then back to this request without `login`, so it is asked for once.
    let account = match account {
        Some(account) if !wants("login") => account,
        signed_in => {
            if wants("none") {
                return Ok(fail(
                    AuthorizationErrorCode::LoginRequired,
                    "the user is not signed in",
                ));
            }
            return Ok(see_other(&signin_then_authorize(
                &pairs,
                signed_in.is_some(),
            )));
        }
    };
    let now = now();
    let (step_up, current) =
        match remembered_consent(&state, &req, &account.id, wants("consent"), now).await? {
            Ok(remembered) => remembered,
            Err(issued) => return Ok(issued),
        };
    if prompt.split(' ').any(|p| p == "none") {
        return Ok(fail(
            AuthorizationErrorCode::ConsentRequired,
            "the user has not approved this application",
        ));
    }
    consent_page(
        &state,
        &session,
        &account,
        &req,
        None,
        step_up,
        current.as_ref(),
        now,
    )
    .await
}

/// Keeps `req` as a pending authorization request of `account` ([`CONSENT_TTL_SECS`]) and
/// shows its consent page, answered at `POST /oauth/authorize/decision`. For a device
/// authorization, `user_code` is the code the person typed, shown for them to compare with
/// their device's (RFC 8628 §5.4); `step_up` is the scope the account allowed this app before
/// when the request asks for more (the page then lists only what is new); `current` the
/// person's choice kept with the live consent, which the page starts from (a step-up keeps it
/// unless they change it).
#[allow(clippy::too_many_arguments)]
pub(super) async fn consent_page(
    state: &AppState,
    session: &Session,
    account: &crate::store::accounts::Account,
    req: &AuthorizationRequest,
    user_code: Option<&str>,
    step_up: Option<String>,
    current: Option<&GrantChoice>,
    now: i64,
) -> Result<Response, AppError> {
    let request_id = random_urlsafe(16);
    let request_json = serde_json::to_string(req)
        .map_err(|e| AppError::Other(format!("authorization request: {e}")))?;
    state
        .store
        .create_authorization_request(
            &request_id,
            &account.id,
            &request_json,
            now,
            now + CONSENT_TTL_SECS,
        )
        .await?;
    let csrf = csrf_token(session).await?;
    let host = host_for_display(&req.redirect_uri);
    let loopback = url::Url::parse(&req.redirect_uri)
        .ok()
        .and_then(|u| u.host_str().map(is_loopback_host))
        .unwrap_or(false);
    let publisher = is_url_client_id(&req.client_id).then(|| host_for_display(&req.client_id));
    let (already, scopes) = match &step_up {
        Some(granted) => req.step_up(granted),
        None => (Vec::new(), req.abilities()),
    };
    let about = &req.about;
    let links = [
        ("Its homepage", &about.homepage),
        ("Its privacy policy", &about.policy),
        ("Its terms", &about.terms),
    ]
    .into_iter()
    .filter_map(|(text, href)| {
        href.as_ref()
            .map(|h| (text, h.clone(), host_for_display(h)))
    })
    .collect();
    // The choice of projects, access and duration: for Gatehouse's own MCP endpoint only (a
    // registered resource's projects are its own business).
    let chooser = if req.registered.is_none() {
        let projects = state.store.projects_of_account(&account.id).await?;
        // A step-up asks for what reading only withholds: it starts at read and write; a
        // page shown again keeps the grant's reading only.
        Some(Chooser::new(
            &projects,
            current,
            req.scope
                .split_ascii_whitespace()
                .any(|s| s == Scope::McpWrite.as_str()),
            step_up.is_none() && current.is_some_and(|c| c.read_only),
        ))
    } else {
        None
    };
    render(
        StatusCode::OK,
        &ConsentPage {
            limited: chooser.as_ref().is_some_and(|c| !c.all),
            chooser,
            verified_host: publisher.clone().unwrap_or_else(|| host.clone()),
            publisher,
            client_name: req.client_name.as_deref(),
            claims_authority: req.client_name.as_deref().is_some_and(claims_authority),
            client_id: &req.client_id,
            redirect_host: &host,
            loopback,
            user_code,
            server: req
                .registered
                .as_ref()
                .map(|r| format!("{} ({})", host_for_display(&req.resource), r.name)),
            links,
            registered: (about.registered_at > 0).then(|| super::ago(now, about.registered_at)),
            scopes,
            already,
            email: &account.email,
            csrf_token: &csrf,
            request_id: &request_id,
        },
    )
}

/// Body of `POST /oauth/authorize/decision`: `request`, `decision` (`approve` | `deny`),
/// and the choice [`read_choice`] reads.
struct DecisionForm {
    request: String,
    decision: String,
}

/// Query of `POST /oauth/authorize/decision` and `GET /oauth/authorize/resume`: the pending
/// authorization request the consent page showed.
#[derive(Deserialize)]
pub struct RequestQuery {
    #[serde(default)]
    request: String,
}

/// The page for an answer sent after the browser was signed out (another tab signed out, the
/// session ended): nothing is decided; a link signs in and goes back to the same authorization
/// request ([`resume`]).
fn signed_out_page(request_id: &str) -> Response {
    let resume = format!(
        "/oauth/authorize/resume?{}",
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("request", request_id)
            .finish()
    );
    let signin = format!(
        "/signin?{}",
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("next", &resume)
            .finish()
    );
    error_page_with(
        StatusCode::UNAUTHORIZED,
        "You were signed out",
        "You were signed out while this page was open, so nothing was decided. Sign in to continue: you will see the same request again.",
        true,
        Some((&signin, "Sign in to continue")),
    )
}

/// `POST /oauth/authorize/decision?request=ID`: approve (`code`, `state`, `iss`) or deny
/// (`error=access_denied`), always by a 303 so the browser follows with GET. A browser that
/// is no longer signed in gets a page to sign in and continue the same request (401; nothing
/// decided), checked before the form's CSRF token, which ended with the session.
pub async fn decide(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    PageQuery(query): PageQuery<RequestQuery>,
    request: axum::extract::Request,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(signed_out_page(&query.request));
    };
    let pairs = match CsrfForm::<ChoiceForm>::from_request(request, &state).await {
        Ok(CsrfForm(ChoiceForm(pairs))) => pairs,
        Err(refused) => return Ok(refused),
    };
    let field = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let form = DecisionForm {
        request: field("request"),
        decision: field("decision"),
    };
    // Check the choice before using up the request, so a bad value can be corrected.
    let approved = match form.decision.as_str() {
        "approve" => true,
        "deny" => false,
        _ => {
            return Ok(authorization_error_page(
                StatusCode::BAD_REQUEST,
                "Unknown choice",
                "Choose Allow or Deny.",
            ));
        }
    };
    let now = now();
    // The person's choice of projects, access and duration (issue 37), read against the
    // account's own projects and the live grant's choice ("as before").
    let choice = if approved && pairs.iter().any(|(k, _)| k == "reach") {
        let own = state.store.projects_of_account(&account.id).await?;
        match read_choice(&pairs, &own, now) {
            Ok(choice) => choice,
            Err(why) => {
                return Ok(authorization_error_page(
                    StatusCode::BAD_REQUEST,
                    "Choose what the app may reach",
                    &format!("{why} Go back and choose again."),
                ));
            }
        }
    } else {
        None
    };
    let Some(req) = authorize::take_request(&state, &form.request, &account.id, now).await? else {
        return Ok(request_expired());
    };
    let ip = client.to_string();
    if req.device.is_some() {
        return device_answered(
            &state,
            &req,
            &account.id,
            &ip,
            approved,
            choice.as_ref(),
            now,
        )
        .await;
    }
    let location = if approved {
        authorize::approve(&state, &req, &account.id, &ip, choice.as_ref(), now).await?
    } else {
        authorize::deny(&state, &req, &account.id, &ip, now).await
    };
    Ok(see_other(&location))
}

fn request_expired() -> Response {
    authorization_error_page(
        StatusCode::BAD_REQUEST,
        "Request expired",
        "This authorization request was already answered, has expired, or was opened by another account. Start the connection again from the application.",
    )
}

/// `GET /oauth/authorize/resume?request=ID`: after signing in again, the authorization request
/// a consent page showed before the browser was signed out. The pending request (the signed-in
/// account's, unanswered, unexpired) is used up and its parameters are sent to
/// `/oauth/authorize` again, which checks them anew: the same client, redirect URI, `state`,
/// PKCE challenge, resource and scope, so the client's callback completes as if nothing had
/// happened. A device authorization (RFC 8628) goes back to `/device`, where its code is
/// entered again. Signed out: the sign-in page first.
pub async fn resume(
    State(state): State<AppState>,
    session: Session,
    PageQuery(query): PageQuery<RequestQuery>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(signed_out_page(&query.request));
    };
    let Some(req) = authorize::take_request(&state, &query.request, &account.id, now()).await?
    else {
        return Ok(request_expired());
    };
    if req.device.is_some() {
        // A device authorization has no authorization URL to go back to: its code is typed
        // again on the device page (the device keeps polling with the same device code).
        return Ok(see_other("/device"));
    }
    let mut pairs = vec![
        ("response_type", "code".to_string()),
        ("client_id", req.client_id.clone()),
        ("redirect_uri", req.redirect_uri.clone()),
        ("scope", req.scope.clone()),
        ("code_challenge", req.code_challenge.clone()),
        ("code_challenge_method", "S256".to_string()),
        ("resource", req.resource.clone()),
    ];
    if let Some(s) = &req.state {
        pairs.push(("state", s.clone()));
    }
    // Signing in again was just done: `login` is not asked for twice.
    if let Some(prompt) = &req.prompt {
        let rest: Vec<&str> = prompt.split(' ').filter(|p| *p != "login").collect();
        if !rest.is_empty() {
            pairs.push(("prompt", rest.join(" ")));
        }
    }
    let query: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs.iter())
        .finish();
    Ok(see_other(&format!("/oauth/authorize?{query}")))
}

#[derive(Template)]
#[template(path = "device_done.html")]
/// The page a device authorization's answer ends on.
struct DonePage<'a> {
    title: &'a str,
    message: &'a str,
}

/// The person's answer on the consent page of a device authorization `req` (RFC 8628 §3.3): marks it approved
/// (with the code its client's poll redeems) or denied, and says so; the "Request expired" page
/// when it was answered meanwhile or has expired.
async fn device_answered(
    state: &AppState,
    req: &AuthorizationRequest,
    account_id: &str,
    ip: &str,
    approved: bool,
    choice: Option<&GrantChoice>,
    now: i64,
) -> Result<Response, AppError> {
    let done = if approved {
        authorize::approve_device(state, req, account_id, ip, choice, now).await?
    } else {
        authorize::deny_device(state, req, account_id, ip, now).await?
    };
    if !done {
        return Ok(error_page(
            StatusCode::BAD_REQUEST,
            "Request expired",
            "This device sign-in was already answered or has expired. Start again on your device.",
        ));
    }
    let (title, message) = if approved {
        (
            "Device connected",
            "The application on your device now has the access you allowed. It may take a few seconds to notice.",
        )
    } else {
        (
            "Access denied",
            "The application on your device was told that you denied access.",
        )
    };
    render(StatusCode::OK, &DonePage { title, message })
}

#[cfg(test)]
mod tests {
    use super::claims_authority;

    #[test]
    fn names_claiming_authority_are_recognised() {
        for name in [
            "Claude (Official Anthropic connector) - verified",
            "OFFICIAL GitHub",
            "Verified by Gatehouse",
            "Trusted notes app",
        ] {
            assert!(claims_authority(name), "{name}");
        }
        for name in ["Claude", "Cursor", "My notes helper", "VS Code"] {
            assert!(!claims_authority(name), "{name}");
        }
    }
}
