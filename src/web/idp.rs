//! `GET /signin/idp/{name}` and `GET /signin/idp/{name}/callback`: signing in at an
//! organisation's identity provider with OpenID Connect ([`crate::idp`]).
//!
//! The start records the sign-in under way in the database under the SHA-256 of its `state`
//! (nonce and PKCE verifier sealed with the server key, [`crate::domain::idp::signin_context`];
//! ten minutes; [`crate::store::idps`]), so any instance can finish it, and gives the browser
//! the `state` in a cookie ([`STATE_COOKIE`]) so that only the browser that began a sign-in can
//! finish it (a callback URL sent to someone else signs nobody in). The callback takes the
//! record back once, redeems the code, checks the ID token, then finds the account:
//!
//! 1. the account linked to the provider's `sub`;
//! 2. else, when the provider says the email is verified (`email_verified: true`) and its domain
//!    is allowed (`--domains`), the account with that email, which is then linked;
//! 3. else, with `--create-accounts`, a new account for that email, linked.
//!
//! A disabled account stays disabled. Every outcome is audited (`signin`, detail
//! `method=provider idp=NAME`); the browser lands where the sign-in was started for (`next`:
//! a pending authorization request continues as after a password sign-in).

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use tower_sessions::Session;
use tower_sessions::cookie::{Cookie, SameSite};

use super::session::{PageCsrf, safe_next};
use super::signin::signin_page;
use super::{PageQuery, see_other};
use crate::client_addr::ClientAddr;
use crate::domain::account::{AccountStatus, Email};
use crate::domain::audit::{Event, Outcome};
use crate::domain::idp::{
    SIGNIN_LIFETIME_SECS, callback_url, client_secret_context, domain_allowed, signin_context,
};
use crate::domain::secret::{TokenHash, constant_time_eq};
use crate::error::AppError;
use crate::idp::IdpError;
use crate::state::AppState;
use crate::store::StoreError;
use crate::store::accounts::Account;
use crate::store::audit::AuditEvent;
use crate::store::idps::{IdentityProvider, PendingSignin};
use crate::store::now;

/// The cookie holding the `state` of the browser's provider sign-in under way (path
/// `/signin/idp`, `HttpOnly`, `SameSite=Lax` so that it comes back with the provider's
/// redirect, `Secure` for https issuers, ten minutes).
pub const STATE_COOKIE: &str = "gatehouse_idp_state";

/// Query of `GET /signin/idp/{name}`.
#[derive(Debug, Deserialize)]
pub struct StartQuery {
    next: Option<String>,
}

/// Query of the callback (OAuth 2.0 authorization response, RFC 6749 §4.1.2 and §4.1.2.1).
#[derive(Debug, Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

/// What is sealed for the callback.
#[derive(Serialize, Deserialize)]
struct Secrets {
    nonce: String,
    pkce_verifier: String,
}

/// The provider `name`, when it exists and signs people in.
async fn signin_provider(
    state: &AppState,
    name: &str,
) -> Result<Option<IdentityProvider>, StoreError> {
    if crate::domain::idp::ProviderName::parse(name).is_err() {
        return Ok(None);
    }
    Ok(state
        .store
        .identity_provider(name)
        .await?
        .filter(IdentityProvider::signs_in))
}

/// `GET /signin/idp/{name}?next=/path`: records the sign-in under way and sends the browser to
/// the provider (303). An unknown provider: 404 page; a provider that cannot be reached (its
/// discovery document): the sign-in page saying so (502), password sign-in still offered.
pub async fn start(
    State(state): State<AppState>,
    session: Session,
    csrf: PageCsrf,
    Path(name): Path<String>,
    PageQuery(q): PageQuery<StartQuery>,
) -> Result<Response, AppError> {
    let next = safe_next(q.next.as_deref());
    let Some(provider) = signin_provider(&state, &name).await? else {
        return Ok(super::error_page(
            StatusCode::NOT_FOUND,
            "No such identity provider",
            "This server has no identity provider of that name. Go back to the sign-in page.",
        ));
    };
    let keys = match state.keyring() {
        Ok(keys) => keys.clone(),
        Err(message) => {
            tracing::error!(provider = %provider.name, "provider sign-in needs the server key: {message}");
            let text = format!(
                "Sign-in with {} is not available on this server right now.",
                provider.label()
            );
            return signin_page(
                &state,
                &session,
                csrf,
                StatusCode::SERVICE_UNAVAILABLE,
                &next,
                "",
                Some(&text),
            )
            .await;
        }
    };
    let client_id = provider.client_id.as_deref().unwrap_or_default();
    let redirect = callback_url(&state.config.issuer, &provider.name);
    let begun = match crate::idp::start(&provider.issuer, client_id, &redirect).await {
        Ok(begun) => begun,
        Err(e) => {
            tracing::warn!(provider = %provider.name, error = %e, "provider sign-in could not start");
            return unavailable(&state, &session, csrf, &provider, &next).await;
        }
    };
    let state_hash = TokenHash::of(&begun.state);
    let secrets = Secrets {
        nonce: begun.nonce,
        pkce_verifier: begun.pkce_verifier,
    };
    let plain = serde_json::to_vec(&secrets).unwrap_or_default();
    let now = now();
    let pending = PendingSignin {
        provider: provider.name.clone(),
        sealed: keys.seal(&signin_context(state_hash.as_str()), &plain),
        next,
    };
    state
        .store
        .begin_idp_signin(&state_hash, &pending, now + SIGNIN_LIFETIME_SECS, now)
        .await?;
    let mut response = see_other(&begun.url);
    set_state_cookie(&mut response, &begun.state, &state, SIGNIN_LIFETIME_SECS);
    Ok(response)
}

fn set_state_cookie(response: &mut Response, value: &str, state: &AppState, max_age: i64) {
    let cookie = Cookie::build((STATE_COOKIE, value.to_string()))
        .path("/signin/idp")
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(state.config.secure_cookies())
        .max_age(time::Duration::seconds(max_age));
    if let Ok(v) = HeaderValue::from_str(&cookie.to_string()) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
}

/// The value of the browser's [`STATE_COOKIE`], if it sent one.
fn state_cookie(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == STATE_COOKIE)
        .map(|c| c.value().to_string())
}

/// The sign-in page saying the provider is unavailable (502).
async fn unavailable(
    state: &AppState,
    session: &Session,
    csrf: PageCsrf,
    provider: &IdentityProvider,
    next: &str,
) -> Result<Response, AppError> {
    let text = if state.config.password_signin {
        format!(
            "{} is not answering right now. Try again in a moment, or sign in with your email and password.",
            provider.label()
        )
    } else {
        format!(
            "{} is not answering right now. Try again in a moment.",
            provider.label()
        )
    };
    signin_page(
        state,
        session,
        csrf,
        StatusCode::BAD_GATEWAY,
        next,
        "",
        Some(&text),
    )
    .await
}

/// `GET /signin/idp/{name}/callback?code=…&state=…`: finishes the sign-in this browser began
/// (module docs). Every refusal is the sign-in page with a message (400 for a sign-in that is
/// unknown, used, expired or from another browser; 403 for an ID token or an account that is
/// refused; 502 for a provider that cannot be reached); nothing is created or changed then.
pub async fn callback(
    State(state): State<AppState>,
    client: ClientAddr,
    session: Session,
    csrf: PageCsrf,
    Path(name): Path<String>,
    headers: http::HeaderMap,
    PageQuery(q): PageQuery<CallbackQuery>,
) -> Result<Response, AppError> {
    let now = now();
    let callback = Callback {
        state: &state,
        session: &session,
        csrf: &csrf,
        name: &name,
        ip: client.0.to_string(),
        now,
    };
    let underway = match callback.take_underway(q.state.as_deref(), &headers).await? {
        Ok(underway) => underway,
        Err(refusal) => return Ok(refusal),
    };
    let code = match callback.answer_code(&underway, &q).await? {
        Ok(code) => code,
        Err(refusal) => return Ok(refusal),
    };
    let (secrets, client_secret) = match callback.open_secrets(&underway).await? {
        Ok(opened) => opened,
        Err(refusal) => return Ok(refusal),
    };
    let identity = match callback
        .redeem(&underway, code, &secrets, client_secret.as_deref())
        .await?
    {
        Ok(identity) => identity,
        Err(refusal) => return Ok(refusal),
    };
    let next = &underway.pending.next;
    let account = match resolve_account(&state, &underway.provider, &identity, now).await? {
        Ok(account) => account,
        Err((reason, text)) => {
            callback.failed(reason).await;
            return callback.refuse(StatusCode::FORBIDDEN, next, &text).await;
        }
    };
    // A provider sign-in counts as strong: no second factor is asked here.
    super::session::sign_in_with(&session, &account, super::session::SignInMethod::Provider)
        .await?;
    audit(
        &state,
        Outcome::Success,
        Some(&account.id),
        &name,
        &callback.ip,
        "",
        now,
    )
    .await;
    crate::signin::count(Outcome::Success);
    let mut response = see_other(next);
    set_state_cookie(&mut response, "", &state, 0);
    Ok(response)
}

/// The words of a refused callback whose sign-in cannot go on (400): start again.
const EXPIRED: &str =
    "This sign-in has expired, was already used, or was started in another browser. Start again.";

/// What the steps of one callback share: the request's application state, session, page
/// CSRF token, the provider named in the path, the browser's address and the time.
struct Callback<'a> {
    state: &'a AppState,
    session: &'a Session,
    csrf: &'a PageCsrf,
    name: &'a str,
    ip: String,
    now: i64,
}

/// A sign-in under way, taken back (once) for this callback.
struct Underway {
    /// The SHA-256 of its `state`, in the context its secrets were sealed with.
    state_hash: TokenHash,
    /// Its record: the sealed secrets and where the browser goes next.
    pending: PendingSignin,
    /// The provider it was started at (the one named in the path).
    provider: IdentityProvider,
}

impl Callback<'_> {
    /// The sign-in page with `status`, `next` and `text`, clearing the state cookie (the
    /// sign-in under way is over either way). Errors: the page's.
    async fn refuse(
        &self,
        status: StatusCode,
        next: &str,
        text: &str,
    ) -> Result<Response, AppError> {
        let mut r = signin_page(
            self.state,
            self.session,
            self.csrf.clone(),
            status,
            next,
            "",
            Some(text),
        )
        .await?;
        set_state_cookie(&mut r, "", self.state, 0);
        Ok(r)
    }

    /// A refusal of this sign-in, in the audit log (`reason` never a secret).
    async fn failed(&self, reason: &str) {
        audit(
            self.state,
            Outcome::Failure,
            None,
            self.name,
            &self.ip,
            reason,
            self.now,
        )
        .await;
    }

    /// [`Callback::refuse`] as the outcome of a step that did not go through.
    async fn refusal<T>(
        &self,
        status: StatusCode,
        next: &str,
        text: &str,
    ) -> Result<Result<T, Response>, AppError> {
        self.refuse(status, next, text).await.map(Err)
    }

    /// The sign-in page saying the provider's sign-in is not available on this server (503),
    /// as the outcome of a step that did not go through.
    async fn not_available<T>(&self, underway: &Underway) -> Result<Result<T, Response>, AppError> {
        let label = underway.provider.label();
        let text = format!("Sign-in with {label} is not available on this server right now.");
        let next = &underway.pending.next;
        self.refusal(StatusCode::SERVICE_UNAVAILABLE, next, &text)
            .await
    }

    /// Takes back the sign-in under way that the answer's `state` names, when this browser
    /// began it (its [`STATE_COOKIE`]) at the provider named in the path. Otherwise the
    /// refusal (audited but for a missing `state`): the sign-in page saying it expired (400).
    /// Errors: the store's.
    async fn take_underway(
        &self,
        sent_state: Option<&str>,
        headers: &http::HeaderMap,
    ) -> Result<Result<Underway, Response>, AppError> {
        let Some(sent_state) = sent_state.filter(|s| !s.is_empty() && s.len() <= 512) else {
            return self.refusal(StatusCode::BAD_REQUEST, "/", EXPIRED).await;
        };
        // Only the browser that began the sign-in may finish it.
        let same_browser = state_cookie(headers)
            .is_some_and(|c| constant_time_eq(c.as_bytes(), sent_state.as_bytes()));
        if !same_browser {
            self.failed("state from another browser").await;
            return self.refusal(StatusCode::BAD_REQUEST, "/", EXPIRED).await;
        }
        let state_hash = TokenHash::of(sent_state);
        let Some(pending) = self
            .state
            .store
            .take_idp_signin(&state_hash, self.now)
            .await?
        else {
            self.failed("state unknown, used or expired").await;
            return self.refusal(StatusCode::BAD_REQUEST, "/", EXPIRED).await;
        };
        let provider = match signin_provider(self.state, self.name).await? {
            Some(p) if p.name == pending.provider => p,
            _ => {
                self.failed("state of another provider").await;
                let next = &pending.next;
                return self.refusal(StatusCode::BAD_REQUEST, next, EXPIRED).await;
            }
        };
        Ok(Ok(Underway {
            state_hash,
            pending,
            provider,
        }))
    }

    /// The authorization code of the provider's answer (RFC 6749 §4.1.2), or the refusal
    /// (audited): an error answer (§4.1.2.1: 403 naming its code, or saying the request was
    /// declined), no code or an oversized one (400).
    async fn answer_code<'q>(
        &self,
        underway: &Underway,
        q: &'q CallbackQuery,
    ) -> Result<Result<&'q str, Response>, AppError> {
        let next = &underway.pending.next;
        if let Some(error) = &q.error {
            let label = underway.provider.label();
            let word: String = error
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                .take(40)
                .collect();
            self.failed(&format!("provider error {word}")).await;
            let text = if word == "access_denied" {
                format!("{label} did not sign you in (the request was declined).")
            } else {
                format!("{label} did not sign you in ({word}).")
            };
            return self.refusal(StatusCode::FORBIDDEN, next, &text).await;
        }
        let Some(code) = q
            .code
            .as_deref()
            .filter(|c| !c.is_empty() && c.len() <= 4096)
        else {
            self.failed("no code").await;
            return self.refusal(StatusCode::BAD_REQUEST, next, EXPIRED).await;
        };
        Ok(Ok(code))
    }

    /// Opens with the server key the sign-in's nonce and PKCE verifier and the provider's
    /// client secret, if it has one. Or the refusal: no server key or a client secret that does
    /// not open (503), secrets that do not open (400).
    async fn open_secrets(
        &self,
        underway: &Underway,
    ) -> Result<Result<(Secrets, Option<String>), Response>, AppError> {
        let Ok(keys) = self.state.keyring() else {
            return self.not_available(underway).await;
        };
        let context = signin_context(underway.state_hash.as_str());
        let secrets: Option<Secrets> = keys
            .open(&context, &underway.pending.sealed)
            .ok()
            .and_then(|plain| serde_json::from_slice(&plain).ok());
        let Some(secrets) = secrets else {
            let next = &underway.pending.next;
            return self.refusal(StatusCode::BAD_REQUEST, next, EXPIRED).await;
        };
        let provider = &underway.provider;
        let client_secret = match &provider.client_secret_sealed {
            Some(sealed) => match keys.open(&client_secret_context_of(provider), sealed) {
                Ok(plain) => Some(String::from_utf8_lossy(&plain).into_owned()),
                Err(e) => {
                    tracing::error!(provider = %provider.name, error = %e, "the provider's client secret does not open");
                    return self.not_available(underway).await;
                }
            },
            None => None,
        };
        Ok(Ok((secrets, client_secret)))
    }

    /// Redeems `code` at the provider and checks its ID token ([`crate::idp::finish`]): the
    /// identity it vouches for. Or the refusal (audited): the provider cannot be reached
    /// (502), its answer is refused (403).
    async fn redeem(
        &self,
        underway: &Underway,
        code: &str,
        secrets: &Secrets,
        client_secret: Option<&str>,
    ) -> Result<Result<crate::idp::Identity, Response>, AppError> {
        let provider = &underway.provider;
        let next = &underway.pending.next;
        let redirect = callback_url(&self.state.config.issuer, &provider.name);
        let identity = crate::idp::finish(
            &provider.issuer,
            provider.client_id.as_deref().unwrap_or_default(),
            client_secret,
            &redirect,
            code,
            &secrets.nonce,
            &secrets.pkce_verifier,
        )
        .await;
        match identity {
            Ok(identity) => Ok(Ok(identity)),
            Err(IdpError::Unavailable(e)) => {
                tracing::warn!(provider = %provider.name, error = %e, "provider sign-in could not finish");
                self.failed("provider unavailable").await;
                let csrf = self.csrf.clone();
                let mut r = unavailable(self.state, self.session, csrf, provider, next).await?;
                set_state_cookie(&mut r, "", self.state, 0);
                Ok(Err(r))
            }
            Err(IdpError::Refused(e)) => {
                tracing::warn!(provider = %provider.name, error = %e, "provider sign-in refused");
                let detail = format!("refused: {}", e.chars().take(120).collect::<String>());
                self.failed(&detail).await;
                let label = provider.label();
                let text = format!(
                    "{label}'s answer could not be verified, so you were not signed in. Start again."
                );
                self.refusal(StatusCode::FORBIDDEN, next, &text).await
            }
        }
    }
}

fn client_secret_context_of(provider: &IdentityProvider) -> Vec<u8> {
    match crate::domain::idp::ProviderName::parse(&provider.name) {
        Ok(name) => client_secret_context(&name),
        Err(_) => Vec::new(),
    }
}

/// Why no account is signed in to: (audit reason, the page's words).
type Refusal = (&'static str, String);

/// The refusal of a disabled account.
fn disabled() -> Refusal {
    (
        "account disabled",
        "This account is disabled. Ask an administrator to enable it.".to_string(),
    )
}

/// The account `identity` signs in to at `provider` (module docs), or why none: (audit reason,
/// the page's words). Errors: the store's, the password hashing's.
async fn resolve_account(
    state: &AppState,
    provider: &IdentityProvider,
    identity: &crate::idp::Identity,
    now: i64,
) -> Result<Result<Account, Refusal>, AppError> {
    let label = provider.label();
    if let Some(id) = state
        .store
        .linked_account(&provider.name, &identity.subject, now)
        .await?
    {
        return Ok(match state.store.account_by_id(&id).await? {
            Some(a) if a.status == AccountStatus::Active => Ok(a),
            Some(_) => Err(disabled()),
            None => Err((
                "linked account gone",
                format!("No account is linked to your {label} sign-in."),
            )),
        });
    }
    let email = match verified_email(provider, identity) {
        Ok(email) => email,
        Err(refusal) => return Ok(Err(refusal)),
    };
    if let Some(account) = state.store.account_by_email(&email).await? {
        if account.status != AccountStatus::Active {
            return Ok(Err(disabled()));
        }
        match state
            .store
            .link_identity(&provider.name, &identity.subject, &account.id, now)
            .await
        {
            Ok(()) | Err(StoreError::Conflict(_)) => {}
            Err(e) => return Err(e.into()),
        }
        return Ok(Ok(account));
    }
    if !provider.create_accounts {
        return Ok(Err((
            "no account",
            format!(
                "There is no account for {} on this server. Ask an administrator to add one.",
                email.as_str()
            ),
        )));
    }
    create_account(state, provider, identity, &email, now).await
}

/// The email `identity` has at `provider`, when the provider says it is verified and its
/// domain is allowed (`--domains`); otherwise why no account can be found by it.
fn verified_email(
    provider: &IdentityProvider,
    identity: &crate::idp::Identity,
) -> Result<Email, Refusal> {
    let label = provider.label();
    let email = identity.email.as_deref().and_then(|e| Email::parse(e).ok());
    let Some(email) = email.filter(|_| identity.email_verified) else {
        return Err((
            "email not verified",
            format!(
                "{label} did not confirm a verified email address for you, so no account could be found."
            ),
        ));
    };
    if !domain_allowed(provider.domains.as_deref(), email.as_str()) {
        return Err((
            "email domain not allowed",
            format!(
                "Accounts for {} cannot sign in with {label}.",
                email.as_str()
            ),
        ));
    }
    Ok(email)
}

/// A new account for `email`, linked to `identity` at `provider` (`--create-accounts`), its
/// creation audited (`account_created`). Two first sign-ins at once: the account and link the
/// other made (refused if not active). Errors: the store's, the password hashing's.
async fn create_account(
    state: &AppState,
    provider: &IdentityProvider,
    identity: &crate::idp::Identity,
    email: &Email,
    now: i64,
) -> Result<Result<Account, Refusal>, AppError> {
    // An account that signs in through its provider: its password is random and never shown
    // (the person may set one later through the account page's reset, if the server offers it).
    let password = crate::domain::secret::random_urlsafe(32);
    let hash = crate::password::hash_password(password).await?;
    match state
        .store
        .create_linked_account(email, &hash, &provider.name, &identity.subject, now)
        .await
    {
        Ok(account) => {
            state
                .store
                .audit(
                    AuditEvent {
                        account_id: Some(&account.id),
                        subject: Some(&provider.name),
                        detail: Some("method=provider"),
                        ..AuditEvent::new(Event::AccountCreated, Outcome::Success)
                    },
                    now,
                )
                .await;
            Ok(Ok(account))
        }
        // Two first sign-ins at once: the other made the account and link; use them.
        Err(StoreError::Conflict(_)) => Ok(match state.store.account_by_email(email).await? {
            Some(a) if a.status == AccountStatus::Active => Ok(a),
            _ => Err(disabled()),
        }),
        Err(e) => Err(e.into()),
    }
}

/// Audits a provider sign-in: `signin` with `outcome`, detail `method=provider idp=NAME` and
/// the reason, if any (never a token or code).
async fn audit(
    state: &AppState,
    outcome: Outcome,
    account_id: Option<&str>,
    provider: &str,
    ip: &str,
    reason: &str,
    now: i64,
) {
    let provider: String = provider
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(20)
        .collect();
    let detail = if reason.is_empty() {
        format!("method=provider idp={provider}")
    } else {
        format!("method=provider idp={provider} {reason}")
    };
    state
        .store
        .audit(
            AuditEvent {
                account_id,
                subject: Some(&provider),
                source_ip: Some(ip),
                detail: Some(&detail),
                ..AuditEvent::new(Event::Signin, outcome)
            },
            now,
        )
        .await;
}
