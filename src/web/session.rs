//! Session helpers: the signed-in account and CSRF tokens.
//!
//! A session row exists only once a session holds something: signing in creates it. Pages that
//! anonymous browsers see (sign-in, first-run setup) keep their CSRF token in a cookie of its
//! own instead ([`PageCsrf`]), so a page view writes nothing to the database.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use tower_sessions::Session;
use tower_sessions::cookie::{Cookie, SameSite};

use crate::domain::account::AccountStatus;
use crate::domain::secret::{constant_time_eq, random_urlsafe};
use crate::error::AppError;
use crate::state::AppState;
use crate::store::accounts::Account;

const ACCOUNT_KEY: &str = "account_id";
const CSRF_KEY: &str = "csrf";
/// The account's session epoch when this session was signed in (see
/// [`crate::store::accounts::Account::session_epoch`]).
const EPOCH_KEY: &str = "epoch";
const NOTICE_KEY: &str = "notice";
const ERROR_KEY: &str = "error_notice";
/// How this session was signed in ([`SignInMethod`]).
const METHOD_KEY: &str = "method";

/// How a session was signed in (issue 36): audited with every sign-in, and what decides
/// whether the sign-in was strong (more than a password).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignInMethod {
    /// A password alone.
    Password,
    /// A password and a TOTP code (RFC 6238).
    PasswordAndTotp,
    /// A password and a recovery code.
    PasswordAndRecoveryCode,
    /// A passkey (WebAuthn): possession and, with user verification, a second factor in one.
    Passkey,
    /// The organisation's identity provider (`OpenID Connect`), which did its own checks.
    Provider,
}

impl SignInMethod {
    /// The stored and audited spelling: `password`, `password+totp`,
    /// `password+recovery_code`, `passkey`, `provider`.
    pub fn as_str(self) -> &'static str {
        match self {
            SignInMethod::Password => "password",
            SignInMethod::PasswordAndTotp => "password+totp",
            SignInMethod::PasswordAndRecoveryCode => "password+recovery_code",
            SignInMethod::Passkey => "passkey",
            SignInMethod::Provider => "provider",
        }
    }

    /// Whether the sign-in was strong: anything but a password alone.
    pub fn is_strong(self) -> bool {
        self != SignInMethod::Password
    }

    fn parse(s: &str) -> Option<SignInMethod> {
        [
            SignInMethod::Password,
            SignInMethod::PasswordAndTotp,
            SignInMethod::PasswordAndRecoveryCode,
            SignInMethod::Passkey,
            SignInMethod::Provider,
        ]
        .into_iter()
        .find(|m| m.as_str() == s)
    }
}

/// How the session was signed in (`None`: not signed in, or signed in before methods were
/// recorded).
pub async fn sign_in_method(session: &Session) -> Result<Option<SignInMethod>, AppError> {
    Ok(session
        .get::<String>(METHOD_KEY)
        .await?
        .as_deref()
        .and_then(SignInMethod::parse))
}

/// The session's CSRF token, created on first use (32 random bytes, base64url).
pub async fn csrf_token(session: &Session) -> Result<String, AppError> {
    if let Some(t) = session.get::<String>(CSRF_KEY).await? {
        return Ok(t);
    }
    let t = random_urlsafe(32);
    session.insert(CSRF_KEY, &t).await?;
    Ok(t)
}

/// Name of the cookie that carries the CSRF token of a browser without a session.
pub const CSRF_COOKIE: &str = "gatehouse_csrf";

/// Length of a CSRF token: 32 random bytes in unpadded base64url.
const CSRF_TOKEN_LEN: usize = 43;

/// The CSRF token of a page anonymous browsers see (double-submit cookie).
///
/// The token is the session's when the browser has a session, otherwise the value of the
/// `gatehouse_csrf` cookie (`HttpOnly`, `SameSite=Lax`, `Secure` for https issuers), minted on
/// first use and set by [`PageCsrf::respond`]. A cross-site page can neither read the cookie nor
/// make the browser send a form with its value, which is what the session-held token guarded
/// against too. Signing the cookie would bind it to nothing more: before sign-in there is no
/// identity to bind it to, and someone able to plant cookies could plant a session cookie just
/// as well.
#[derive(Debug, Clone)]
pub struct PageCsrf {
    cookie: Option<String>,
    minted: Option<String>,
    secure: bool,
}

impl FromRequestParts<AppState> for PageCsrf {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let cookie = parts
            .headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(Cookie::split_parse)
            .filter_map(Result::ok)
            .find(|c| c.name() == CSRF_COOKIE)
            .map(|c| c.value().to_string())
            .filter(|v| {
                v.len() == CSRF_TOKEN_LEN
                    && v.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            });
        Ok(PageCsrf {
            cookie,
            minted: None,
            secure: state.config.secure_cookies(),
        })
    }
}

impl PageCsrf {
    /// The token to put in the page's form: the session's, else the cookie's, else a new one
    /// (remembered for [`PageCsrf::respond`]). Never writes to the session.
    pub async fn token(&mut self, session: &Session) -> Result<String, AppError> {
        if let Some(t) = session.get::<String>(CSRF_KEY).await? {
            return Ok(t);
        }
        if let Some(t) = &self.cookie {
            return Ok(t.clone());
        }
        Ok(self
            .minted
            .get_or_insert_with(|| random_urlsafe(32))
            .clone())
    }

    /// Whether `presented` equals the page's token (constant time): the session's when the
    /// session holds one (then the cookie does not count, so a planted cookie cannot stand in
    /// for it), else the cookie's. Without either, nothing matches.
    pub async fn verify(&self, session: &Session, presented: &str) -> Result<bool, AppError> {
        let matches = |expected: &str| constant_time_eq(expected.as_bytes(), presented.as_bytes());
        Ok(match session.get::<String>(CSRF_KEY).await? {
            Some(expected) => matches(&expected),
            None => self.cookie.as_deref().is_some_and(matches),
        })
    }

    /// Whether there is a token a form could be checked against: the session's or the
    /// cookie's. Without one every form is refused, so it is refused before its body is read.
    pub async fn has_token(&self, session: &Session) -> Result<bool, AppError> {
        Ok(self.cookie.is_some() || session.get::<String>(CSRF_KEY).await?.is_some())
    }

    /// A page with a form: rendered by `render` around the form's token
    /// ([`PageCsrf::token`]), sent with the cookie of a newly minted token.
    pub async fn page(
        mut self,
        session: &Session,
        render: impl FnOnce(&str) -> Result<Response, AppError>,
    ) -> Result<Response, AppError> {
        let token = self.token(session).await?;
        let response = render(&token)?;
        Ok(self.respond(response))
    }

    /// `response` with the cookie of a newly minted token.
    pub fn respond(self, mut response: Response) -> Response {
        if let Some(token) = self.minted {
            let cookie = Cookie::build((CSRF_COOKIE, token))
                .path("/")
                .http_only(true)
                .same_site(SameSite::Lax)
                .secure(self.secure)
                .build();
            if let Ok(v) = HeaderValue::from_str(&cookie.to_string()) {
                response.headers_mut().append(header::SET_COOKIE, v);
            }
        }
        response
    }
}

/// The signed-in, active account. A session whose account was disabled, or whose sessions
/// were all ended since it signed in (a raised session epoch), is ended.
pub async fn signed_in(state: &AppState, session: &Session) -> Result<Option<Account>, AppError> {
    let Some(id) = session.get::<String>(ACCOUNT_KEY).await? else {
        return Ok(None);
    };
    let epoch = session.get::<i64>(EPOCH_KEY).await?.unwrap_or(0);
    match state.store.account_by_id(&id).await? {
        Some(a) if a.status == AccountStatus::Active && a.session_epoch == epoch => Ok(Some(a)),
        _ => {
            session.flush().await?;
            Ok(None)
        }
    }
}

/// Signs `account` in with a password alone ([`sign_in_with`]).
pub async fn sign_in(session: &Session, account: &Account) -> Result<(), AppError> {
    sign_in_with(session, account, SignInMethod::Password).await
}

/// Signs `account` in by `method`: a new session id (against fixation), a new CSRF token, the
/// method kept ([`sign_in_method`]).
pub async fn sign_in_with(
    session: &Session,
    account: &Account,
    method: SignInMethod,
) -> Result<(), AppError> {
    session.cycle_id().await?;
    session.insert(ACCOUNT_KEY, &account.id).await?;
    session.insert(EPOCH_KEY, account.session_epoch).await?;
    session.insert(CSRF_KEY, random_urlsafe(32)).await?;
    session.insert(METHOD_KEY, method.as_str()).await?;
    Ok(())
}

/// Keeps this session signed in after its account's session epoch was raised to `epoch` (the
/// other sessions end): a new session id, the new epoch.
pub async fn keep_after_epoch(session: &Session, epoch: i64) -> Result<(), AppError> {
    session.cycle_id().await?;
    session.insert(EPOCH_KEY, epoch).await?;
    Ok(())
}

/// Keeps a one-time notice for the next page this session shows ("Password changed.").
pub async fn set_notice(session: &Session, notice: &str) -> Result<(), AppError> {
    session.insert(NOTICE_KEY, notice).await?;
    Ok(())
}

/// Takes the session's one-time notice, if any.
pub async fn take_notice(session: &Session) -> Result<Option<String>, AppError> {
    Ok(session.remove::<String>(NOTICE_KEY).await?)
}

/// Keeps a one-time error for the next page this session shows: what a form posted could not
/// do, shown as an alert rather than as a notice of success ("Tool list not changed: …").
pub async fn set_error(session: &Session, error: &str) -> Result<(), AppError> {
    session.insert(ERROR_KEY, error).await?;
    Ok(())
}

/// Takes the session's one-time error, if any.
pub async fn take_error(session: &Session) -> Result<Option<String>, AppError> {
    Ok(session.remove::<String>(ERROR_KEY).await?)
}

/// Ends the session server-side: the old cookie no longer works.
pub async fn sign_out(session: &Session) -> Result<(), AppError> {
    session.flush().await?;
    Ok(())
}

/// `next` if it points back into this server (a path starting with a single `/`), else `/`.
/// Absolute URLs, protocol-relative `//host` and backslash tricks are ignored.
pub fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && !n.starts_with("/\\")
                && !n.chars().any(|c| c.is_control() || c == '\\') =>
        {
            n.to_string()
        }
        _ => "/".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn next_only_points_into_this_server() {
        assert_eq!(
            safe_next(Some("/oauth/authorize?x=1")),
            "/oauth/authorize?x=1"
        );
        assert_eq!(safe_next(Some("https://evil.example/")), "/");
        assert_eq!(safe_next(Some("//evil.example/")), "/");
        assert_eq!(safe_next(Some("/\\evil.example")), "/");
        assert_eq!(safe_next(Some("javascript:alert(1)")), "/");
        assert_eq!(safe_next(Some("/a\r\nLocation: x")), "/");
        assert_eq!(safe_next(None), "/");
    }
}
