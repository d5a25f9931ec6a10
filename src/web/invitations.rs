//! Invitations to a project (issue 37 item 4: "members invited in the console").
//!
//! A project's owner enters an email and a role on the project page. Someone who already
//! shares a project with the owner is added at once (`projects::add_member`); anyone else is
//! invited ([`invite`]): a one-time link (`/invite?token=gate_inv_…`, the token kept only as
//! its SHA-256, working for [`INVITATION_TTL_SECS`]) is mailed to the address when mail is set
//! up, and shown to an owner who is an operator (operators create accounts anyway). An owner
//! who is not an operator never sees the link, so an invitation proves the invitee reads that
//! mailbox, and the form answers alike whether or not the email has an account.
//!
//! `GET /invite?token=…` then asks the invitee, by case: signed in with the invited email, to
//! join; signed in as someone else, to sign out first; signed out with an account, to sign in
//! (and come back); without an account, to choose a password, which creates the account,
//! spends the link and makes it a member in one transaction (`POST /invite`).

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use tower_sessions::Session;

use super::session::{PageCsrf, set_notice, signed_in};
use super::{CsrfForm, PageQuery, error_page, render, see_other, when};
use crate::client_addr::ClientAddr;
use crate::domain::account::{Email, Role, validate_password};
use crate::domain::audit::{Event, Outcome};
use crate::domain::secret::{Secret, TokenKind};
use crate::error::AppError;
use crate::mail::Mail;
use crate::state::AppState;
use crate::store::accounts::Account;
use crate::store::audit::AuditEvent;
use crate::store::invitations::{Accepted, INVITATION_TTL_SECS, Invitation, NewInvitation};
use crate::store::now;
use crate::store::projects::ProjectMembership;

/// What became of an owner's invitation, for the project page.
pub enum Invited {
    /// Mailed to the address; the owner is not shown the link.
    Mailed,
    /// Shown to the operator who owns the project (and mailed too when `mailed`).
    Shown {
        /// The link, `<issuer>/invite?token=…`.
        link: String,
        /// Whether it was mailed as well.
        mailed: bool,
    },
    /// Neither possible: no mail set up and the owner is not an operator. Nothing was stored.
    NoMail,
}

/// The answer to an owner who is not an operator inviting someone when no mail is set up.
pub const NO_MAIL: &str = "You can add people who already share a project with you. Others are invited by mail, and this server has no mail set up: ask the operator to set GATEHOUSE_SMTP_URL, or to run gatehouse project add-member.";

/// Invites `email` to `project` with `role` for the owner `owner`: stores the invitation
/// (replacing an unused one of the same email), audits `invitation_created`, mails the link
/// when mail is set up, and returns what the owner may be told ([`Invited`]).
pub async fn invite(
    state: &AppState,
    client: ClientAddr,
    owner: &Account,
    project: &ProjectMembership,
    email: &Email,
    role: Role,
) -> Result<Invited, AppError> {
    let mailer = state.mailer.clone();
    if mailer.is_none() && !owner.admin {
        return Ok(Invited::NoMail);
    }
    let now = now();
    let token = Secret::generate(TokenKind::Invitation);
    state
        .store
        .create_invitation(
            &NewInvitation {
                token_hash: &token.hash(),
                project_id: &project.project_id,
                email,
                role,
                invited_by: &owner.id,
            },
            now,
        )
        .await?;
    let link = state
        .config
        .url(&format!("/invite?token={}", token.expose()));
    state
        .store
        .audit(
            AuditEvent {
                account_id: Some(&owner.id),
                subject: Some(&project.project_id),
                source_ip: Some(&client.to_string()),
                detail: Some(&format!(
                    "email={} role={}{}",
                    email.as_str(),
                    role.as_str(),
                    if mailer.is_some() { " mailed" } else { "" }
                )),
                ..AuditEvent::new(Event::InvitationCreated, Outcome::Success)
            },
            now,
        )
        .await;
    if let Some(mailer) = &mailer {
        let mail = Mail {
            to: email.as_str().to_string(),
            subject: format!(
                "{} invited you to {} on Gatehouse",
                owner.email, project.name
            ),
            body: format!(
                "{} invited you to the project \"{}\" on Gatehouse ({}), to {}.\r\n\r\n\
                 Open this link within {} days to join; if you have no account there yet, you \
                 choose its password on the way:\r\n\r\n{link}\r\n\r\n\
                 It works once, for {} only. If you did not expect it, ignore this mail.\r\n",
                owner.email,
                project.name,
                state.config.issuer,
                role_words(role.as_str()),
                INVITATION_TTL_SECS / 86_400,
                email.as_str(),
            ),
        };
        mailer.send_later(async move { Some(mail) });
    }
    Ok(if owner.admin {
        Invited::Shown {
            link,
            mailed: mailer.is_some(),
        }
    } else {
        Invited::Mailed
    })
}

/// What a role lets a member do, in words.
fn role_words(role: &str) -> &'static str {
    if role == "write" {
        "read, create and change its notes"
    } else {
        "read its notes"
    }
}

/// How the invitation page asks.
enum Ask<'a> {
    /// Signed in with the invited email: a button to join.
    Join,
    /// Signed in as someone else: sign out first.
    OtherAccount { signed_in_as: &'a str },
    /// No account with the invited email yet: choose a password.
    CreateAccount { error: Option<&'a str> },
}

#[derive(Template)]
#[template(path = "invite.html")]
struct InvitePage<'a> {
    csrf_token: &'a str,
    token: &'a str,
    project: &'a str,
    email: &'a str,
    invited_by: &'a str,
    role: &'a str,
    role_words: &'static str,
    until: String,
    join: bool,
    signed_in_as: Option<&'a str>,
    create: bool,
    error: Option<&'a str>,
}

async fn invite_page(
    session: &Session,
    csrf: PageCsrf,
    status: StatusCode,
    token: &str,
    invitation: &Invitation,
    ask: Ask<'_>,
) -> Result<Response, AppError> {
    csrf.page(session, |csrf_token| {
        render(
            status,
            &InvitePage {
                csrf_token,
                token,
                project: &invitation.project_name,
                email: &invitation.email,
                invited_by: &invitation.invited_by_email,
                role: &invitation.role,
                role_words: role_words(&invitation.role),
                until: when(invitation.expires_at),
                join: matches!(ask, Ask::Join),
                signed_in_as: match ask {
                    Ask::OtherAccount { signed_in_as } => Some(signed_in_as),
                    _ => None,
                },
                create: matches!(ask, Ask::CreateAccount { .. }),
                error: match ask {
                    Ask::CreateAccount { error } => error,
                    _ => None,
                },
            },
        )
    })
    .await
}

/// The page of an unknown, used or expired invitation, or one whose project is archived (404;
/// nothing changed).
fn invitation_invalid() -> Response {
    error_page(
        StatusCode::NOT_FOUND,
        "Invitation not valid",
        "This invitation link is unknown, was already used or withdrawn, has expired (links work for 7 days), or its project was archived. Ask the project's owner to invite you again if you still need to join.",
    )
}

/// The answer for a link that no longer works: the project, with a notice, for the account
/// that already joined with it (a second click, the link opened again); else
/// [`invitation_invalid`].
async fn no_longer_works(
    state: &AppState,
    session: &Session,
    hash: &crate::domain::secret::TokenHash,
) -> Result<Response, AppError> {
    let Some(account) = signed_in(state, session).await? else {
        return Ok(invitation_invalid());
    };
    let Some((project_id, Some(used_by))) = state.store.used_invitation(hash).await? else {
        return Ok(invitation_invalid());
    };
    if used_by != account.id {
        return Ok(invitation_invalid());
    }
    let Some(project) = state.store.membership(&account.id, &project_id).await? else {
        return Ok(invitation_invalid());
    };
    set_notice(
        session,
        &format!(
            "You are a member of {} already, with the role {}.",
            project.name,
            project.role.as_str()
        ),
    )
    .await?;
    Ok(see_other(&format!("/projects/{project_id}")))
}

/// Where an invitee with an account goes: sign in, then back to the invitation.
fn signin_then_back(token: &str) -> Response {
    let back = format!("/invite?token={token}");
    let next: String = url::form_urlencoded::byte_serialize(back.as_bytes()).collect();
    see_other(&format!("/signin?next={next}"))
}

/// Query of `GET /invite`, and body of `POST /invite`.
#[derive(Deserialize)]
pub struct InviteForm {
    #[serde(default)]
    token: String,
    /// The new account's password (only when creating one).
    #[serde(default)]
    password: String,
}

/// `GET /invite?token=…`: what the invitee is asked (module docs), or 404 for a link that
/// does not work.
pub async fn show(
    State(state): State<AppState>,
    session: Session,
    csrf: PageCsrf,
    PageQuery(q): PageQuery<InviteForm>,
) -> Result<Response, AppError> {
    let hash = Secret::from_presented(q.token.clone()).hash();
    let Some(invitation) = state.store.invitation(&hash, now()).await? else {
        return no_longer_works(&state, &session, &hash).await;
    };
    let ask = match signed_in(&state, &session).await? {
        Some(account) if account.email == invitation.email => Ask::Join,
        Some(account) => {
            let page = invite_page(
                &session,
                csrf,
                StatusCode::FORBIDDEN,
                &q.token,
                &invitation,
                Ask::OtherAccount {
                    signed_in_as: &account.email,
                },
            );
            return page.await;
        }
        None => {
            let invited = Email::parse(&invitation.email).ok();
            let exists = match &invited {
                Some(email) => state.store.account_by_email(email).await?.is_some(),
                None => false,
            };
            if exists {
                return Ok(signin_then_back(&q.token));
            }
            Ask::CreateAccount { error: None }
        }
    };
    invite_page(&session, csrf, StatusCode::OK, &q.token, &invitation, ask).await
}

/// `POST /invite`: joins the project. Signed in with the invited email: spends the link and
/// adds the membership. Signed out: validates the password (422 with the form again), hashes
/// it on the password pool (503 when full), then creates the account, spends the link and adds
/// the membership in one transaction, and signs the new account in (through its second-factor
/// enrolment when the server requires one). Audited `invitation_accepted` (and
/// `account_created`); lands on the project.
pub async fn accept(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    csrf: PageCsrf,
    CsrfForm(form): CsrfForm<InviteForm>,
) -> Result<Response, AppError> {
    let now = now();
    let hash = Secret::from_presented(form.token.clone()).hash();
    let Some(invitation) = state.store.invitation(&hash, now).await? else {
        return no_longer_works(&state, &session, &hash).await;
    };
    if let Some(account) = signed_in(&state, &session).await? {
        if account.email != invitation.email {
            return invite_page(
                &session,
                csrf,
                StatusCode::FORBIDDEN,
                &form.token,
                &invitation,
                Ask::OtherAccount {
                    signed_in_as: &account.email,
                },
            )
            .await;
        }
        return match state.store.accept_invitation(&hash, &account, now).await? {
            Some(project_id) => {
                let new_account = false;
                let joining = (&account, &invitation, project_id.as_str(), new_account);
                joined(&state, &session, client, joining, now).await
            }
            None => no_longer_works(&state, &session, &hash).await,
        };
    }
    create_and_join(
        &state,
        client,
        &session,
        csrf,
        &form,
        &hash,
        &invitation,
        now,
    )
    .await
}

/// The signed-out half of `POST /invite`: checks the password (422), hashes it on the
/// password pool (503 when full), then creates the account and joins ([`joined`]); an
/// account made with the email meanwhile is sent to sign in.
#[allow(clippy::too_many_arguments)]
async fn create_and_join(
    state: &AppState,
    client: ClientAddr,
    session: &Session,
    csrf: PageCsrf,
    form: &InviteForm,
    hash: &crate::domain::secret::TokenHash,
    invitation: &Invitation,
    now: i64,
) -> Result<Response, AppError> {
    if let Err(e) = validate_password(&form.password) {
        let problem = e.to_string();
        return invite_page(
            session,
            csrf,
            StatusCode::UNPROCESSABLE_ENTITY,
            &form.token,
            invitation,
            Ask::CreateAccount {
                error: Some(&problem),
            },
        )
        .await;
    }
    let Ok(slot) = state.passwords.try_reserve() else {
        let r = invite_page(
            session,
            csrf,
            StatusCode::SERVICE_UNAVAILABLE,
            &form.token,
            invitation,
            Ask::CreateAccount {
                error: Some("The server is busy. Try again in a moment."),
            },
        )
        .await?;
        return Ok(super::password_busy(r));
    };
    let Ok(email) = Email::parse(&invitation.email) else {
        return Ok(invitation_invalid());
    };
    let password_hash = slot.hash(form.password.clone()).await?;
    match state
        .store
        .accept_invitation_as_new(hash, &email, &password_hash, now)
        .await?
    {
        Accepted::Joined {
            project_id,
            account,
        } => {
            state
                .store
                .audit(
                    AuditEvent {
                        account_id: Some(&account.id),
                        source_ip: Some(&client.to_string()),
                        detail: Some("invitation"),
                        ..AuditEvent::new(Event::AccountCreated, Outcome::Success)
                    },
                    now,
                )
                .await;
            let new_account = true;
            let joining = (&account, invitation, project_id.as_str(), new_account);
            joined(state, session, client, joining, now).await
        }
        Accepted::AccountExists => Ok(signin_then_back(&form.token)),
        Accepted::Invalid => Ok(invitation_invalid()),
    }
}

/// After `account` joined `project_id` with `invitation` (`new_account`: created by it just
/// now): audits `invitation_accepted`, signs a new account in (through the second factor when
/// the server requires one), and lands on the project with a notice.
async fn joined(
    state: &AppState,
    session: &Session,
    client: ClientAddr,
    (account, invitation, project_id, new_account): (&Account, &Invitation, &str, bool),
    now: i64,
) -> Result<Response, AppError> {
    state
        .store
        .audit(
            AuditEvent {
                account_id: Some(&account.id),
                subject: Some(project_id),
                source_ip: Some(&client.to_string()),
                detail: Some(&format!("role={}", invitation.role)),
                ..AuditEvent::new(Event::InvitationAccepted, Outcome::Success)
            },
            now,
        )
        .await;
    let project = format!("/projects/{project_id}");
    if new_account {
        if state.config.identity.require_2fa {
            super::second_factor::begin(session, account, &project, true, now).await?;
            return Ok(see_other("/signin/second-factor"));
        }
        super::session::sign_in(session, account).await?;
    }
    set_notice(
        session,
        &format!(
            "You joined {} with the role {}: you can {}.",
            invitation.project_name,
            invitation.role,
            role_words(&invitation.role)
        ),
    )
    .await?;
    Ok(see_other(&project))
}
