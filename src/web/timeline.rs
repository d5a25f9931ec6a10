//! `GET /apps/timeline?client_id=…`: a client's connection timeline (issue "console" item 3),
//! the steps of connecting an app in the order they happened, each with its time and, for a
//! step that failed, a reason a person can act on: registered, asked for access (or refused:
//! redirect URI not registered, no PKCE, another resource…), signed in, approved, code redeemed
//! (or refused: PKCE failed, another redirect URI or resource, expired), the first and latest
//! MCP call, refreshes, and a token issued but not used yet.
//!
//! A person sees their own steps with the app, whether or not they approved it (the page is
//! where a failed connection is explained). An operator adds `&all=1` and sees every
//! account's steps, and the requests made before anyone signed in.

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use tower_sessions::Session;

use super::activity::{outcome_words, to_the_second};
use super::session::{csrf_token, signed_in};
use super::{PageQuery, error_page, render, see_other};
use crate::domain::audit::{Event, Outcome};
use crate::domain::cimd::is_url_client_id;
use crate::domain::redirect_uri::host_for_display;
use crate::error::AppError;
use crate::state::AppState;
use crate::store::audit_query::{AuditEntry, AuditFilter, ClientTimeline};
use crate::store::oauth::ClientRecord;

/// How long before an authorization request or consent a sign-in counts as part of it, in
/// seconds (the sign-in page sends the person back to the waiting request).
pub const SIGNIN_WINDOW_SECS: i64 = 600;

/// Sign-ins read for a person's timeline, at most.
const SIGNINS_READ: i64 = 100;

/// One step of a connection timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Unix seconds.
    pub at: i64,
    /// Order within a second: the audit row's id (rows are numbered as written), the
    /// registration first.
    pub order: i64,
    /// What happened, in words.
    pub what: String,
    /// For a step that failed: why, and what to do about it.
    pub reason: Option<String>,
    /// Whether the step failed.
    pub failed: bool,
    /// The account's email (operator view), or `None`.
    pub who: Option<String>,
    /// The address the step came from, for authorization steps.
    pub source: Option<String>,
}

impl Step {
    fn done(at: i64, what: impl Into<String>) -> Step {
        Step {
            at,
            order: 0,
            what: what.into(),
            reason: None,
            failed: false,
            who: None,
            source: None,
        }
    }

    fn failed(at: i64, what: impl Into<String>, reason: impl Into<String>) -> Step {
        Step {
            reason: Some(reason.into()),
            failed: true,
            ..Step::done(at, what)
        }
    }
}

/// What to do about a refused authorization code, from the refusal's description.
fn code_advice(detail: &str) -> &'static str {
    if detail.contains("code_verifier") {
        "PKCE failed: the app did not prove it began this sign-in. It must start again; if it keeps failing, its developer must fix how it keeps its code_verifier."
    } else if detail.contains("redirect_uri") {
        "The app redeemed the code with another redirect_uri than it asked with. Its developer must fix this."
    } else if detail.contains("expired") {
        "The app took too long to redeem the code. Start connecting again."
    } else if detail.contains("DPoP") {
        "The app named a DPoP key but did not prove it holds it. Its developer must fix this."
    } else if detail.contains("has ended") {
        "The time you allowed this app had passed when it redeemed the code. Connect it again and choose how long it may stay."
    } else if detail.contains("revoked") {
        "Its access was revoked before it redeemed the code. Connect it again if you want it back."
    } else if detail.contains("disabled") {
        "The account is disabled: no app can get access to it."
    } else if detail.contains("scope") {
        "The app asked for more than you allow it now. Connect it again to approve what it asks for."
    } else {
        "The app asked for another server (resource) than the one it was authorized for. Check the server URL configured in the app, then connect again."
    }
}

/// The step an audit row of the client stands for; `None` for rows that are no step.
fn step_of(e: &AuditEntry) -> Option<Step> {
    let detail = e.detail.clone().unwrap_or_default();
    let step = match (Event::parse(&e.event), Outcome::parse(&e.outcome)) {
        (Some(Event::ClientRegistered | Event::ClientCreated), _) => return None,
        (Some(Event::AuthorizationRequest), Some(Outcome::Success)) => {
            Step::done(e.at, "Asked for access")
        }
        (Some(Event::AuthorizationRequest), _) => {
            Step::failed(e.at, "Its request for access was refused", detail)
        }
        (Some(Event::Consent), Some(Outcome::Denied)) => {
            Step::done(e.at, "Denied on the consent page")
        }
        (Some(Event::Consent), _) => Step::done(e.at, "Approved on the consent page"),
        (Some(Event::ConsentChanged), _) => {
            Step::done(e.at, "What it reaches was changed on its page")
        }
        (Some(Event::ConsentRevoked), _) => Step::done(e.at, "Access revoked"),
        (Some(Event::CodeRedeemed), _) => Step::done(
            e.at,
            if detail.contains("grant=device_code") {
                "Device code redeemed: tokens issued"
            } else {
                "Authorization code redeemed: tokens issued"
            },
        ),
        (Some(Event::CodeRefused), _) => Step::failed(
            e.at,
            "Authorization code refused",
            format!("{} ({detail}).", code_advice(&detail)),
        ),
        (Some(Event::CodeReplay), _) => Step::failed(
            e.at,
            "An authorization code was used twice",
            "Every token its first use gave was revoked, in case it was stolen. Connect the app again.",
        ),
        (Some(Event::RefreshReuse), _) => Step::failed(
            e.at,
            "An old refresh token was used again",
            "Its tokens were revoked, in case one was stolen. Connect the app again.",
        ),
        (Some(Event::FamilyRevoked), _) if detail.is_empty() => Step::done(e.at, "Tokens revoked"),
        (Some(Event::FamilyRevoked), _) => Step::done(e.at, format!("Tokens revoked: {detail}")),
        (Some(Event::TokenIssued), _) => Step::done(e.at, "Token issued"),
        (Some(Event::DeviceAuthorization), _) => Step::done(e.at, "Began signing in on a device"),
        _ => Step::done(e.at, format!("{} ({})", e.event, outcome_words(&e.outcome))),
    };
    Some(Step {
        order: e.id,
        who: e.email.clone(),
        source: matches!(
            Event::parse(&e.event),
            Some(Event::AuthorizationRequest | Event::Consent | Event::ConsentRevoked)
        )
        .then(|| e.source_ip.clone())
        .flatten(),
        ..step
    })
}

/// What an MCP call row was, in words: `tool list_projects`.
fn call_words(e: &AuditEntry) -> String {
    let kind = match Event::parse(&e.event) {
        Some(Event::ResourceRead) => "resource",
        Some(Event::PromptGet) => "prompt",
        _ => "tool",
    };
    format!(
        "{kind} {} ({})",
        e.subject.as_deref().unwrap_or("?"),
        outcome_words(&e.outcome)
    )
}

/// The first step of `client`'s timeline: its registration, or for a URL client ID the first
/// read of its metadata document; ordered before every other step of that second.
fn registration_step(client: &ClientRecord) -> Step {
    Step {
        order: i64::MIN,
        ..Step::done(
            client.created_at,
            if is_url_client_id(&client.client_id) {
                format!(
                    "Known to this server: its metadata document at {} was first read",
                    host_for_display(&client.client_id)
                )
            } else {
                "Registered with this server".to_string()
            },
        )
    }
}

/// The steps of the person's `signins` that led to an authorization request or a consent of
/// `timeline` (within [`SIGNIN_WINDOW_SECS`] before it), in the order of `signins`, each with
/// its method (`password` when the row names none).
fn signin_steps(timeline: &ClientTimeline, signins: &[AuditEntry]) -> Vec<Step> {
    let asked: Vec<i64> = timeline
        .steps
        .iter()
        .filter(|e| {
            matches!(
                Event::parse(&e.event),
                Some(Event::AuthorizationRequest | Event::Consent)
            )
        })
        .map(|e| e.at)
        .collect();
    signins
        .iter()
        .filter(|s| {
            asked
                .iter()
                .any(|&t| s.at <= t && t - s.at <= SIGNIN_WINDOW_SECS)
        })
        .map(|s| {
            let method = s
                .detail
                .as_deref()
                .and_then(|d| d.split(' ').find_map(|p| p.strip_prefix("method=")))
                .unwrap_or("password");
            Step {
                order: s.id,
                who: s.email.clone(),
                ..Step::done(s.at, format!("Signed in ({method})"))
            }
        })
        .collect()
}

/// The steps of `timeline`'s use: its first MCP call, its latest (when there was more than
/// one), then its refreshes (the last one, with their count), each only when there is one.
fn use_steps(timeline: &ClientTimeline) -> Vec<Step> {
    let mut out = Vec::new();
    if let Some(first) = &timeline.first_call {
        out.push(Step {
            order: first.id,
            ..Step::done(first.at, format!("First MCP call: {}", call_words(first)))
        });
    }
    if let Some(last) = timeline.last_call.as_ref().filter(|_| timeline.calls > 1) {
        out.push(Step {
            order: last.id,
            ..Step::done(
                last.at,
                format!(
                    "Latest MCP call: {} — {} calls in all",
                    call_words(last),
                    timeline.calls
                ),
            )
        });
    }
    if let Some(at) = timeline.last_refresh {
        out.push(Step {
            order: i64::MAX,
            ..Step::done(
                at,
                format!("Tokens refreshed ({} times in all)", timeline.refreshes),
            )
        });
    }
    out
}

/// The failed step "Token issued but not used yet": the last code redeemed with success for
/// `mcp_url` when no MCP call came after it; `None` otherwise.
fn unused_token_step(timeline: &ClientTimeline, mcp_url: &str) -> Option<Step> {
    let issued = timeline.steps.iter().rev().find(|e| {
        Event::parse(&e.event) == Some(Event::CodeRedeemed)
            && Outcome::parse(&e.outcome) == Some(Outcome::Success)
            && e.detail
                .as_deref()
                .is_some_and(|d| d.split(' ').any(|p| p == format!("resource={mcp_url}")))
    })?;
    timeline
        .last_call
        .as_ref()
        .is_none_or(|c| c.at < issued.at)
        .then(|| Step {
            order: issued.id,
            ..Step::failed(
            issued.at,
            "Token issued but not used yet",
            format!(
                "The app has not called this server's MCP endpoint since it got its token. If it says it is connected but nothing works, check that its MCP server URL is exactly {mcp_url}"
            ),
        )
        })
}

/// The steps of `client`'s timeline in time order: its registration, the stored steps, the
/// person's `signins` that led to one of them (within [`SIGNIN_WINDOW_SECS`] before it), the
/// first and latest MCP call, the refreshes, and a token issued for `mcp_url` after which no
/// MCP call came.
pub fn steps(
    client: &ClientRecord,
    timeline: &ClientTimeline,
    signins: &[AuditEntry],
    mcp_url: &str,
) -> Vec<Step> {
    let mut out = vec![registration_step(client)];
    out.extend(timeline.steps.iter().filter_map(step_of));
    out.extend(signin_steps(timeline, signins));
    out.extend(use_steps(timeline));
    out.extend(unused_token_step(timeline, mcp_url));
    // Stable: a step made from a row (the token not used yet) stays after that row's step.
    out.sort_by_key(|s| (s.at, s.order));
    out
}

/// The query of the page.
#[derive(Debug, Deserialize)]
pub struct TimelineQuery {
    /// The client.
    pub client_id: String,
    /// `1`: every account's steps (operators only).
    #[serde(default)]
    pub all: Option<String>,
}

struct Row {
    at: String,
    what: String,
    reason: Option<String>,
    failed: bool,
    who: String,
    source: Option<String>,
}

#[derive(Template)]
#[template(path = "timeline.html")]
struct TimelinePage {
    name: String,
    client_id: String,
    /// `client_id=…`, URL-encoded, for the links to the other view.
    query: String,
    everyone: bool,
    operator: bool,
    rows: Vec<Row>,
    csrf_token: String,
    oauth_enabled: bool,
}

/// `GET /apps/timeline?client_id=…[&all=1]`: signed in; an unknown client is 404; `all=1`
/// from anyone but an operator is 403.
pub async fn show(
    State(state): State<AppState>,
    session: Session,
    PageQuery(query): PageQuery<TimelineQuery>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        let next = url::form_urlencoded::Serializer::new(String::new())
            .append_pair(
                "next",
                &format!(
                    "/apps/timeline?{}",
                    super::apps::timeline_query(&query.client_id)
                ),
            )
            .finish();
        return Ok(see_other(&format!("/signin?{next}")));
    };
    let everyone = query.all.as_deref() == Some("1");
    if everyone && !account.admin {
        return Ok(error_page(
            StatusCode::FORBIDDEN,
            "Only operators see every account's steps",
            "Leave out all=1 to see your own steps with this app.",
        ));
    }
    let Some(client) = state.store.client(&query.client_id).await? else {
        return Ok(error_page(
            StatusCode::NOT_FOUND,
            "App not found",
            "No application with this client ID is known to this server.",
        ));
    };
    let whose = (!everyone).then_some(account.id.as_str());
    let timeline = state
        .store
        .client_timeline(&client.client_id, whose)
        .await?;
    let signins = match (whose, timeline.steps.first()) {
        (Some(id), Some(first)) => {
            state
                .store
                .audit_entries(
                    &AuditFilter {
                        account_id: Some(id.to_string()),
                        event: Some("signin".into()),
                        since: Some(first.at - SIGNIN_WINDOW_SECS),
                        ..AuditFilter::default()
                    },
                    SIGNINS_READ,
                )
                .await?
        }
        _ => Vec::new(),
    };
    let signins: Vec<AuditEntry> = signins
        .into_iter()
        .filter(|s| Outcome::parse(&s.outcome) == Some(Outcome::Success))
        .collect();
    let rows = steps(&client, &timeline, &signins, &state.config.mcp_server_url)
        .into_iter()
        .map(|s| Row {
            at: to_the_second(s.at),
            what: s.what,
            reason: s.reason,
            failed: s.failed,
            who: s.who.unwrap_or_else(|| "not signed in".into()),
            source: s.source,
        })
        .collect();
    let name = client
        .client_name
        .clone()
        .filter(|n| crate::domain::text::check_line(n).is_ok())
        .unwrap_or_else(|| host_for_display(&client.client_id));
    render(
        StatusCode::OK,
        &TimelinePage {
            name,
            query: super::apps::timeline_query(&client.client_id),
            client_id: client.client_id,
            everyone,
            operator: account.admin,
            rows,
            csrf_token: csrf_token(&session).await?,
            oauth_enabled: state.config.oauth_enabled,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::refresh::GrantRefusal;

    fn client() -> ClientRecord {
        ClientRecord {
            client_id: "c1".into(),
            client_secret_hash: None,
            token_endpoint_auth_method: "none".into(),
            client_name: Some("Claude".into()),
            redirect_uris: vec!["https://claude.ai/api/mcp/auth_callback".into()],
            grant_types: vec!["authorization_code".into()],
            scope: None,
            metadata: serde_json::json!({}),
            can_introspect: false,
            created_at: 100,
        }
    }

    fn row(id: i64, at: i64, event: Event, outcome: Outcome, detail: Option<&str>) -> AuditEntry {
        AuditEntry {
            id,
            at,
            event: event.as_str().into(),
            outcome: outcome.as_str().into(),
            account_id: Some("a1".into()),
            email: Some("alice@example.com".into()),
            client_id: Some("c1".into()),
            client_name: Some("Claude".into()),
            subject: None,
            project_id: None,
            source_ip: Some("203.0.113.9".into()),
            detail: detail.map(str::to_string),
        }
    }

    const MCP: &str = "https://mcp.example.com/mcp";

    #[test]
    fn a_token_never_used_and_a_pkce_failure_say_what_to_do() {
        let timeline = ClientTimeline {
            steps: vec![
                row(1, 200, Event::AuthorizationRequest, Outcome::Success, None),
                row(2, 230, Event::Consent, Outcome::Granted, None),
                row(
                    3,
                    240,
                    Event::CodeRefused,
                    Outcome::Denied,
                    Some("code_verifier does not match the code_challenge"),
                ),
                row(
                    4,
                    300,
                    Event::CodeRedeemed,
                    Outcome::Success,
                    Some(&format!("resource={MCP}")),
                ),
            ],
            ..ClientTimeline::default()
        };
        let signins = [
            row(
                9,
                220,
                Event::Signin,
                Outcome::Success,
                Some("method=provider idp=acme"),
            ),
            // After every request of this app: not a step of it.
            row(10, 5000, Event::Signin, Outcome::Success, None),
        ];
        let steps = steps(&client(), &timeline, &signins, MCP);
        let what: Vec<&str> = steps.iter().map(|s| s.what.as_str()).collect();
        assert_eq!(
            what,
            [
                "Registered with this server",
                "Asked for access",
                "Signed in (provider)",
                "Approved on the consent page",
                "Authorization code refused",
                "Authorization code redeemed: tokens issued",
                "Token issued but not used yet",
            ]
        );
        let pkce = &steps[4];
        assert!(pkce.failed);
        assert!(
            pkce.reason.as_deref().unwrap().starts_with("PKCE failed"),
            "{pkce:?}"
        );
        assert!(steps[6].reason.as_deref().unwrap().ends_with(MCP));
        assert_eq!(steps[1].source.as_deref(), Some("203.0.113.9"));
    }

    #[test]
    fn a_call_after_the_token_ends_the_warning_and_calls_are_summed_up() {
        let mut first = row(5, 310, Event::ToolCall, Outcome::Success, None);
        first.subject = Some("list_projects".into());
        let mut last = row(6, 400, Event::ToolCall, Outcome::Forbidden, None);
        last.subject = Some("update_note".into());
        let timeline = ClientTimeline {
            steps: vec![row(
                4,
                300,
                Event::CodeRedeemed,
                Outcome::Success,
                Some(&format!("resource={MCP}")),
            )],
            first_call: Some(first),
            last_call: Some(last),
            calls: 7,
            refreshes: 2,
            last_refresh: Some(350),
        };
        let steps = steps(&client(), &timeline, &[], MCP);
        let what: Vec<&str> = steps.iter().map(|s| s.what.as_str()).collect();
        assert_eq!(
            what,
            [
                "Registered with this server",
                "Authorization code redeemed: tokens issued",
                "First MCP call: tool list_projects (Done)",
                "Tokens refreshed (2 times in all)",
                "Latest MCP call: tool update_note (Refused: your role in the project does not allow it) — 7 calls in all",
            ]
        );
        assert!(steps.iter().all(|s| !s.failed));
    }

    #[test]
    fn a_token_for_another_resource_is_not_expected_here() {
        let timeline = ClientTimeline {
            steps: vec![row(
                4,
                300,
                Event::CodeRedeemed,
                Outcome::Success,
                Some("resource=https://files.example.com/mcp"),
            )],
            ..ClientTimeline::default()
        };
        assert!(
            steps(&client(), &timeline, &[], MCP)
                .iter()
                .all(|s| !s.failed)
        );
    }

    #[test]
    fn each_refused_code_names_its_remedy() {
        for (detail, start) in [
            (
                "code_verifier is required: the code was issued with a code_challenge (PKCE)",
                "PKCE failed",
            ),
            (
                "redirect_uri differs from the one in the authorization request",
                "The app redeemed the code with another redirect_uri",
            ),
            (
                "the authorization code expired: it must be redeemed within 10 minutes",
                "The app took too long",
            ),
            (
                "resource https://x.example/mcp is not the resource this code was issued for",
                "The app asked for another server",
            ),
            (GrantRefusal::Ended.as_str(), "The time you allowed"),
            (GrantRefusal::Revoked.as_str(), "Its access was revoked"),
            (
                GrantRefusal::AccountDisabled.as_str(),
                "The account is disabled",
            ),
            (
                GrantRefusal::ScopeExceedsApproval.as_str(),
                "The app asked for more",
            ),
        ] {
            assert!(code_advice(detail).starts_with(start), "{detail}");
        }
    }
}
