//! The console's projects: `GET /` (the account's projects with role and note count),
//! `GET /projects/{id}` (the `console_url` handed to agents: notes, search, members) and the
//! owner's member forms `POST /projects/{id}/members` and `POST /projects/{id}/members/remove`.
//!
//! A project the account is not a member of answers exactly like a missing one (404).

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use tower_sessions::Session;

use super::invitations::{self, Invited};
use super::session::{csrf_token, set_notice, signed_in, take_notice};
use super::{Confirmation, CsrfForm, PageQuery, confirm_page, error_page, render, see_other, when};
use crate::client_addr::ClientAddr;
use crate::domain::account::{Email, Role, parse_project_name};
use crate::domain::audit::{Event, Outcome};
use crate::error::AppError;
use crate::state::AppState;
use crate::store::accounts::Account;
use crate::store::audit::AuditEvent;
use crate::store::now;
use crate::store::projects::{Member, ProjectMembership, ProjectSummary};

/// Notes listed on a project page (newest first) and search hits shown (best first).
pub const NOTES_SHOWN: i64 = 100;

#[derive(Template)]
#[template(path = "home.html")]
struct HomePage<'a> {
    email: &'a str,
    projects: Vec<ProjectSummary>,
    notice: Option<String>,
    /// Why the create-project form was refused, and what it held.
    error: Option<&'a str>,
    name: &'a str,
    mcp_url: &'a str,
    csrf_token: &'a str,
    oauth_enabled: bool,
    /// The signed-in account is an operator: the nav links the upstream page.
    operator: bool,
}

/// Projects an account may be a member of before the console refuses to create another (the
/// operator's `gatehouse project add` is not limited).
pub const MAX_PROJECTS_PER_ACCOUNT: usize = 100;

async fn home_page(
    state: &AppState,
    session: &Session,
    account: &Account,
    status: StatusCode,
    refused: Option<(&str, &str)>,
) -> Result<Response, AppError> {
    let projects = state.store.project_summaries(&account.id).await?;
    let csrf = csrf_token(session).await?;
    let (error, name) = match refused {
        Some((error, name)) => (Some(error), name),
        None => (None, ""),
    };
    render(
        status,
        &HomePage {
            email: &account.email,
            projects,
            notice: take_notice(session).await?,
            error,
            name,
            mcp_url: &state.config.mcp_server_url,
            csrf_token: &csrf,
            oauth_enabled: state.config.oauth_enabled,
            operator: account.admin,
        },
    )
}

/// `GET /`: the account's projects, the form to create one and how to connect an MCP client
/// (the server's MCP URL and steps per client); the sign-in page when signed out.
pub async fn home(State(state): State<AppState>, session: Session) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin"));
    };
    home_page(&state, &session, &account, StatusCode::OK, None).await
}

/// Body of `POST /projects`.
#[derive(Deserialize)]
pub struct CreateProjectForm {
    #[serde(default)]
    name: String,
}

/// `POST /projects`: creates a project owned by the signed-in account (the name follows the
/// CLI's rule, [`parse_project_name`]), audited `project_created`, then `303` to its page. A
/// refused name answers the home page again (422) with the reason and the name kept.
pub async fn create(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    CsrfForm(form): CsrfForm<CreateProjectForm>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(see_other("/signin"));
    };
    let name = match parse_project_name(&form.name) {
        Ok(name) => name,
        Err(e) => {
            let status = StatusCode::UNPROCESSABLE_ENTITY;
            return home_page(&state, &session, &account, status, Some((&e, &form.name))).await;
        }
    };
    if state.store.project_summaries(&account.id).await?.len() >= MAX_PROJECTS_PER_ACCOUNT {
        let e = format!(
            "you are a member of {MAX_PROJECTS_PER_ACCOUNT} projects already; ask the operator for more"
        );
        let status = StatusCode::UNPROCESSABLE_ENTITY;
        return home_page(&state, &session, &account, status, Some((&e, &form.name))).await;
    }
    let now = now();
    let project_id = state.store.create_project(name, &account.id, now).await?;
    let detail = format!("project={project_id} by=console");
    state
        .store
        .audit(
            AuditEvent {
                account_id: Some(&account.id),
                subject: Some(&project_id),
                source_ip: Some(&client.to_string()),
                detail: Some(&detail),
                ..AuditEvent::new(Event::ProjectCreated, Outcome::Success)
            },
            now,
        )
        .await;
    set_notice(
        &session,
        &format!("Project {name} created. Connect an MCP client to write its first notes."),
    )
    .await?;
    Ok(see_other(&format!("/projects/{project_id}")))
}

struct NoteRow {
    id: String,
    title: String,
    updated: String,
    /// A search hit's passage: `(text, matched)` pieces.
    snippet: Vec<(String, bool)>,
}

/// A search snippet as pieces to show, the matched words (between the engine's `[` and `]`
/// markers, [`crate::store::notes::NoteHit::snippet`]) marked.
fn snippet_pieces(snippet: &str) -> Vec<(String, bool)> {
    let mut pieces = Vec::new();
    let mut rest = snippet;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']').map(|c| open + c) else {
            break;
        };
        if open > 0 {
            pieces.push((rest[..open].to_string(), false));
        }
        pieces.push((rest[open + 1..close].to_string(), true));
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        pieces.push((rest.to_string(), false));
    }
    pieces
}

#[derive(Template)]
#[template(path = "project.html")]
struct ProjectPage<'a> {
    project_id: &'a str,
    name: &'a str,
    role: &'a str,
    notes: Vec<NoteRow>,
    query: &'a str,
    searching: bool,
    members: Vec<Member>,
    is_owner: bool,
    error: Option<&'a str>,
    member_email: &'a str,
    member_role: &'a str,
    /// Invitations not yet accepted: (email, role, link works until).
    invitations: Vec<(String, String, String)>,
    /// The invitation link just made for an operator, and whether it was mailed too.
    invited: Option<(String, bool)>,
    notice: Option<String>,
    csrf_token: &'a str,
    oauth_enabled: bool,
    /// The signed-in account is an operator: the nav links the upstream page.
    operator: bool,
}

/// The one answer for a project that is missing or not the account's.
fn project_not_found() -> Response {
    error_page(
        StatusCode::NOT_FOUND,
        "Project not found",
        "There is no project at this address, or you are not a member of it.",
    )
}

/// Where a signed-out browser goes: sign in, then back to `path`.
fn signin_then(path: &str) -> Response {
    let next: String = url::form_urlencoded::byte_serialize(path.as_bytes()).collect();
    see_other(&format!("/signin?next={next}"))
}

/// Query of `GET /projects/{id}`.
#[derive(Debug, Deserialize)]
pub struct ProjectQuery {
    /// Words to search the notes for.
    #[serde(default)]
    q: String,
}

/// What the member form held when it is shown again with an error, or the invitation link
/// just made for an operator who owns the project.
struct MemberFormState<'a> {
    status: StatusCode,
    error: Option<&'a str>,
    email: &'a str,
    role: &'a str,
    /// The invitation link to hand over, and whether it was mailed too.
    invited: Option<(String, bool)>,
}

async fn project_page(
    state: &AppState,
    session: &Session,
    account: &Account,
    project: &ProjectMembership,
    query: &str,
    form: Option<MemberFormState<'_>>,
) -> Result<Response, AppError> {
    let store = &state.store;
    let searching = !query.trim().is_empty();
    let notes = if searching {
        // The same search as the `search_notes` tool.
        store
            .search_notes(&project.project_id, query, NOTES_SHOWN)
            .await?
            .into_iter()
            .map(|h| NoteRow {
                updated: String::new(),
                snippet: snippet_pieces(&h.snippet),
                id: h.id,
                title: h.title,
            })
            .collect()
    } else {
        store
            .recent_notes(&project.project_id, NOTES_SHOWN)
            .await?
            .into_iter()
            .map(|n| NoteRow {
                updated: when(n.updated_at),
                snippet: Vec::new(),
                id: n.id,
                title: n.title,
            })
            .collect()
    };
    let members = store.members_of_project(&project.project_id).await?;
    let is_owner = members
        .iter()
        .any(|m| m.is_owner && m.account_id == account.id);
    let invitations = if is_owner {
        store
            .pending_invitations(&project.project_id, now())
            .await?
            .into_iter()
            .map(|i| (i.email, i.role, when(i.expires_at)))
            .collect()
    } else {
        Vec::new()
    };
    let csrf = csrf_token(session).await?;
    let (status, error, email, role, invited) = match form {
        Some(f) => (f.status, f.error, f.email, f.role, f.invited),
        None => (StatusCode::OK, None, "", "read", None),
    };
    render(
        status,
        &ProjectPage {
            project_id: &project.project_id,
            name: &project.name,
            role: project.role.as_str(),
            notes,
            query,
            searching,
            members,
            is_owner,
            error,
            member_email: email,
            member_role: role,
            invitations,
            invited,
            notice: take_notice(session).await?,
            csrf_token: &csrf,
            oauth_enabled: state.config.oauth_enabled,
            operator: account.admin,
        },
    )
}

/// `GET /projects/{id}[?q=words]`: the project's notes (or those matching `q`), its members
/// and, for the owner, the member forms.
pub async fn show(
    State(state): State<AppState>,
    session: Session,
    Path(project_id): Path<String>,
    PageQuery(q): PageQuery<ProjectQuery>,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(&state, &session).await? else {
        return Ok(signin_then(&format!("/projects/{project_id}")));
    };
    let Some(project) = state.store.membership(&account.id, &project_id).await? else {
        return Ok(project_not_found());
    };
    project_page(&state, &session, &account, &project, &q.q, None).await
}

/// Body of `POST /projects/{id}/members`.
#[derive(Deserialize)]
pub struct AddMemberForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    role: String,
}

/// The signed-in owner and their membership of the project, or the response to send instead:
/// the sign-in page for no session, 404 for a project that is missing or not the account's,
/// 403 for a member who is not the owner.
async fn owned_project(
    state: &AppState,
    session: &Session,
    project_id: &str,
) -> Result<Result<(Account, ProjectMembership), Response>, AppError> {
    let Some(account) = signed_in(state, session).await? else {
        return Ok(Err(signin_then(&format!("/projects/{project_id}"))));
    };
    let Some(project) = state.store.membership(&account.id, project_id).await? else {
        return Ok(Err(project_not_found()));
    };
    if state.store.project_owner(project_id).await?.as_deref() != Some(account.id.as_str()) {
        return Ok(Err(error_page(
            StatusCode::FORBIDDEN,
            "Only the owner manages members",
            "Ask the project's owner to add or remove members.",
        )));
    }
    Ok(Ok((account, project)))
}

/// Audits a change of the project's members by its owner, then sends the owner back to the
/// project page.
async fn member_changed(
    state: &AppState,
    client: ClientAddr,
    owner: &Account,
    project: &ProjectMembership,
    event: Event,
    detail: &str,
    now: i64,
) -> Response {
    state
        .store
        .audit(
            AuditEvent {
                account_id: Some(&owner.id),
                subject: Some(&project.project_id),
                source_ip: Some(&client.to_string()),
                detail: Some(detail),
                ..AuditEvent::new(event, Outcome::Success)
            },
            now,
        )
        .await;
    see_other(&format!("/projects/{}", project.project_id))
}

/// The answer to a member form that is neither an addition nor an invitation.
pub const NOT_ADDABLE: &str = "That person cannot be added.";

/// `POST /projects/{id}/members`: the owner adds an account that already shares a project
/// with them (or changes a member's role), or invites anyone else by email
/// ([`invitations::invite`]: mailed, and shown to an operator; 422 with [`invitations::NO_MAIL`]
/// when neither can be).
pub async fn add_member(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    Path(project_id): Path<String>,
    CsrfForm(form): CsrfForm<AddMemberForm>,
) -> Result<Response, AppError> {
    let (account, project) = match owned_project(&state, &session, &project_id).await? {
        Ok(owned) => owned,
        Err(response) => return Ok(response),
    };
    let role = form.role.parse::<Role>().ok();
    let email = Email::parse(&form.email).ok();
    let member = match &email {
        Some(email) => state.store.account_by_email(email).await?,
        None => None,
    };
    // Accounts that already share a project with the owner are added at once. Everyone else
    // is invited, with the same answer whether or not the email has an account, so the form
    // does not tell (issue 30).
    let shares = match &member {
        Some(m) if m.id != account.id => state.store.share_a_project(&account.id, &m.id).await?,
        _ => false,
    };
    let refuse = |error: &'static str| MemberFormState {
        status: StatusCode::UNPROCESSABLE_ENTITY,
        error: Some(error),
        email: &form.email,
        role: &form.role,
        invited: None,
    };
    let problem = match (&email, &member, role) {
        (_, _, None) => Some("Choose the role read or write."),
        (None, _, _) => Some("Enter an email address, such as name@example.com."),
        (_, Some(m), _) if m.id == account.id => Some("You own this project already."),
        _ => None,
    };
    let (Some(email), Some(role), None) = (email, role, problem) else {
        let form_state = refuse(problem.unwrap_or(NOT_ADDABLE));
        return project_page(&state, &session, &account, &project, "", Some(form_state)).await;
    };
    let Some(member) = member.filter(|_| shares) else {
        return match invitations::invite(&state, client, &account, &project, &email, role).await? {
            Invited::NoMail => {
                let form_state = refuse(invitations::NO_MAIL);
                project_page(&state, &session, &account, &project, "", Some(form_state)).await
            }
            Invited::Mailed => {
                set_notice(
                    &session,
                    &format!(
                        "Invitation mailed to {}: they join with the role {} when they open its link (it works for 7 days).",
                        email.as_str(),
                        role.as_str()
                    ),
                )
                .await?;
                Ok(see_other(&format!("/projects/{}", project.project_id)))
            }
            Invited::Shown { link, mailed } => {
                let form_state = MemberFormState {
                    status: StatusCode::OK,
                    error: None,
                    email: "",
                    role: "read",
                    invited: Some((link, mailed)),
                };
                project_page(&state, &session, &account, &project, "", Some(form_state)).await
            }
        };
    };
    let now = now();
    let was_member = state
        .store
        .membership(&member.id, &project.project_id)
        .await?
        .is_some();
    state
        .store
        .add_member(&project.project_id, &member.id, role, now)
        .await?;
    let detail = format!("member={} role={}", member.id, role.as_str());
    Ok(member_changed(
        &state,
        client,
        &account,
        &project,
        if was_member {
            Event::MemberRoleChanged
        } else {
            Event::MemberAdded
        },
        &detail,
        now,
    )
    .await)
}

/// Body of `POST /projects/{id}/members/remove` and query of its confirmation page.
#[derive(Deserialize)]
pub struct RemoveMemberForm {
    #[serde(default)]
    account_id: String,
}

/// `GET /projects/{id}/members/remove?account_id=…`: the owner's confirmation page naming the
/// member, the project and what removal does. Not a removable member (the owner, someone not
/// in the project): the project page with the reason (422).
pub async fn confirm_remove_member(
    State(state): State<AppState>,
    session: Session,
    Path(project_id): Path<String>,
    PageQuery(form): PageQuery<RemoveMemberForm>,
) -> Result<Response, AppError> {
    let (account, project) = match owned_project(&state, &session, &project_id).await? {
        Ok(owned) => owned,
        Err(response) => return Ok(response),
    };
    let member = state
        .store
        .members_of_project(&project.project_id)
        .await?
        .into_iter()
        .find(|m| m.account_id == form.account_id && !m.is_owner);
    let Some(member) = member else {
        return project_page(
            &state,
            &session,
            &account,
            &project,
            "",
            Some(not_removable()),
        )
        .await;
    };
    let confirmation = Confirmation {
        title: format!("Remove {} from {}?", member.email, project.name),
        consequence: format!(
            "{} will no longer read or change the notes of {}: not in the console, and not through any app, API key or personal URL, from their next request. You can add them again later.",
            member.email, project.name
        ),
        action: format!("/projects/{}/members/remove", project.project_id),
        fields: vec![("account_id", member.account_id)],
        button: format!("Remove {}", member.email),
        cancel: format!("/projects/{}", project.project_id),
    };
    confirm_page(&state, &session, &confirmation).await
}

/// The project page's member form, empty, refused with `error` (422).
fn refused(error: &'static str) -> MemberFormState<'static> {
    MemberFormState {
        status: StatusCode::UNPROCESSABLE_ENTITY,
        error: Some(error),
        email: "",
        role: "read",
        invited: None,
    }
}

fn not_removable() -> MemberFormState<'static> {
    refused("That person is not a member who can be removed (the owner always stays).")
}

/// `POST /projects/{id}/members/remove`: the owner removes a member (never the owner).
pub async fn remove_member(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    Path(project_id): Path<String>,
    CsrfForm(form): CsrfForm<RemoveMemberForm>,
) -> Result<Response, AppError> {
    let (account, project) = match owned_project(&state, &session, &project_id).await? {
        Ok(owned) => owned,
        Err(response) => return Ok(response),
    };
    let email = state
        .store
        .members_of_project(&project.project_id)
        .await?
        .into_iter()
        .find(|m| m.account_id == form.account_id)
        .map(|m| m.email);
    if !state
        .store
        .remove_member(&project.project_id, &form.account_id, now())
        .await?
    {
        return project_page(
            &state,
            &session,
            &account,
            &project,
            "",
            Some(not_removable()),
        )
        .await;
    }
    set_notice(
        &session,
        &format!(
            "{} was removed from {}.",
            email.as_deref().unwrap_or("The member"),
            project.name
        ),
    )
    .await?;
    let detail = format!("member={}", form.account_id);
    Ok(member_changed(
        &state,
        client,
        &account,
        &project,
        Event::MemberRemoved,
        &detail,
        now(),
    )
    .await)
}

/// Body of `POST /projects/{id}/invitations/withdraw` and query of its confirmation page.
#[derive(Deserialize)]
pub struct WithdrawForm {
    #[serde(default)]
    email: String,
}

/// `GET /projects/{id}/invitations/withdraw?email=…`: the owner's confirmation page naming the
/// invitation; no pending invitation of that email: the project page with the reason (422).
pub async fn confirm_withdraw(
    State(state): State<AppState>,
    session: Session,
    Path(project_id): Path<String>,
    PageQuery(form): PageQuery<WithdrawForm>,
) -> Result<Response, AppError> {
    let (account, project) = match owned_project(&state, &session, &project_id).await? {
        Ok(owned) => owned,
        Err(response) => return Ok(response),
    };
    let pending = state
        .store
        .pending_invitations(&project.project_id, now())
        .await?
        .into_iter()
        .any(|i| i.email == form.email);
    if !pending {
        return project_page(
            &state,
            &session,
            &account,
            &project,
            "",
            Some(no_invitation()),
        )
        .await;
    }
    let confirmation = Confirmation {
        title: format!("Withdraw the invitation of {}?", form.email),
        consequence: format!(
            "The link sent to {} will no longer work, so they cannot join {} with it. You can invite them again later.",
            form.email, project.name
        ),
        action: format!("/projects/{}/invitations/withdraw", project.project_id),
        fields: vec![("email", form.email.clone())],
        button: format!("Withdraw the invitation of {}", form.email),
        cancel: format!("/projects/{}", project.project_id),
    };
    confirm_page(&state, &session, &confirmation).await
}

fn no_invitation() -> MemberFormState<'static> {
    refused("There is no pending invitation of that email to withdraw.")
}

/// `POST /projects/{id}/invitations/withdraw`: the owner withdraws a pending invitation (its
/// link stops working), audited `invitation_withdrawn`, then the project page with a notice.
pub async fn withdraw(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    Path(project_id): Path<String>,
    CsrfForm(form): CsrfForm<WithdrawForm>,
) -> Result<Response, AppError> {
    let (account, project) = match owned_project(&state, &session, &project_id).await? {
        Ok(owned) => owned,
        Err(response) => return Ok(response),
    };
    if !state
        .store
        .withdraw_invitation(&project.project_id, &form.email)
        .await?
    {
        return project_page(
            &state,
            &session,
            &account,
            &project,
            "",
            Some(no_invitation()),
        )
        .await;
    }
    set_notice(
        &session,
        &format!(
            "The invitation of {} was withdrawn: its link no longer works.",
            form.email
        ),
    )
    .await?;
    let detail = format!("email={}", form.email);
    Ok(member_changed(
        &state,
        client,
        &account,
        &project,
        Event::InvitationWithdrawn,
        &detail,
        now(),
    )
    .await)
}

#[cfg(test)]
mod tests {
    use super::snippet_pieces;

    #[test]
    fn snippets_mark_the_engine_s_matches() {
        let p = |s: &str, m: bool| (s.to_string(), m);
        assert_eq!(
            snippet_pieces("…check the [consent] page on a [phone]."),
            vec![
                p("…check the ", false),
                p("consent", true),
                p(" page on a ", false),
                p("phone", true),
                p(".", false),
            ]
        );
        assert_eq!(snippet_pieces("no match"), vec![p("no match", false)]);
        assert_eq!(
            snippet_pieces("open [bracket"),
            vec![p("open [bracket", false)]
        );
        assert!(snippet_pieces("").is_empty());
    }
}
