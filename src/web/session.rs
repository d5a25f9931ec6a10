//! Session helpers: the signed-in account and CSRF tokens.

use tower_sessions::Session;

use crate::app::AppState;
use crate::domain::account::AccountStatus;
use crate::domain::secret::{constant_time_eq, random_urlsafe};
use crate::error::AppError;
use crate::store::accounts::Account;

const ACCOUNT_KEY: &str = "account_id";
const CSRF_KEY: &str = "csrf";

/// The session's CSRF token, created on first use (32 random bytes, base64url).
pub async fn csrf_token(session: &Session) -> Result<String, AppError> {
    if let Some(t) = session.get::<String>(CSRF_KEY).await? {
        return Ok(t);
    }
    let t = random_urlsafe(32);
    session.insert(CSRF_KEY, &t).await?;
    Ok(t)
}

/// Whether `presented` equals the session's CSRF token (constant time). A session without a
/// token never matches.
pub async fn csrf_ok(session: &Session, presented: &str) -> Result<bool, AppError> {
    Ok(match session.get::<String>(CSRF_KEY).await? {
        Some(expected) => constant_time_eq(expected.as_bytes(), presented.as_bytes()),
        None => false,
    })
}

/// The signed-in, active account. A session whose account was disabled is ended.
pub async fn signed_in(state: &AppState, session: &Session) -> Result<Option<Account>, AppError> {
    let Some(id) = session.get::<String>(ACCOUNT_KEY).await? else {
        return Ok(None);
    };
    match state.store.account_by_id(&id).await? {
        Some(a) if a.status == AccountStatus::Active => Ok(Some(a)),
        _ => {
            session.flush().await?;
            Ok(None)
        }
    }
}

/// Signs `account` in: a new session id (against fixation), a new CSRF token.
pub async fn sign_in(session: &Session, account: &Account) -> Result<(), AppError> {
    session.cycle_id().await?;
    session.insert(ACCOUNT_KEY, &account.id).await?;
    session.insert(CSRF_KEY, random_urlsafe(32)).await?;
    Ok(())
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
