//! The vault: a person's access token at a per-person upstream, for one call.
//!
//! The token is refreshed when it ends within [`REFRESH_MARGIN_SECS`]. One refresh at a time
//! per grant, across instances: the caller that takes the grant's refresh lease in the
//! database ([`crate::store::Store::lease_grant_refresh`], conditioned on the refresh token it
//! read) rotates the refresh token; the others wait for its result (at most
//! [`REFRESH_WAIT`]) and use the new access token. An upstream answering `invalid_grant`
//! ends the grant (it is deleted: the person connects again); an unreachable token endpoint
//! keeps it (the call answers "try again").

use std::time::Duration;

use super::{FlowError, grant_context};
use crate::domain::audit::{Event, Outcome};
use crate::state::AppState;
use crate::store::StoreError;
use crate::store::audit::AuditEvent;
use crate::store::vault::{Grant, Refreshed};

/// Refresh when the access token ends within this many seconds.
pub const REFRESH_MARGIN_SECS: i64 = 60;
/// How long a refresh lease holds (longer than the token request's timeout).
pub const LEASE_SECS: i64 = 30;
/// How long a caller waits for another's refresh.
pub const REFRESH_WAIT: Duration = Duration::from_secs(20);

/// What the vault has for a person's call.
pub enum Access {
    /// A live access token.
    Token(String),
    /// No grant (never connected, disconnected, or ended by the upstream).
    NotConnected,
    /// The grant is kept but no token could be had now (the token endpoint is down); the
    /// sentence says why, with no secret in it.
    TryAgain(String),
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Access::Token(_) => f.write_str("Token(…)"),
            Access::NotConnected => f.write_str("NotConnected"),
            Access::TryAgain(why) => write!(f, "TryAgain({why})"),
        }
    }
}

fn open(app: &AppState, grant: &Grant, what: &str, sealed: &str) -> Option<String> {
    let keys = app.keyring().ok()?;
    let plain = keys
        .open(
            &grant_context(&grant.upstream, &grant.account_id, what),
            sealed,
        )
        .ok()?;
    String::from_utf8(plain).ok()
}

/// Seals `value` as `account_id`'s `what` at `upstream`.
///
/// Errors: no server key.
pub fn seal(
    app: &AppState,
    upstream: &str,
    account_id: &str,
    what: &str,
    value: &str,
) -> Result<String, &'static str> {
    Ok(app
        .keyring()?
        .seal(&grant_context(upstream, account_id, what), value.as_bytes()))
}

fn fresh(grant: &Grant, now: i64) -> bool {
    grant
        .expires_at
        .is_none_or(|end| end - now > REFRESH_MARGIN_SECS)
}

fn alive(grant: &Grant, now: i64) -> bool {
    grant.expires_at.is_none_or(|end| end > now)
}

/// Audits a refresh that ended the grant or failed.
async fn audit_refresh(app: &AppState, grant: &Grant, outcome: Outcome, now: i64) {
    app.store
        .audit(
            AuditEvent {
                event: Event::ConnectionRefreshFailed,
                outcome,
                account_id: Some(&grant.account_id),
                client_id: grant.client_id.as_deref(),
                subject: Some(&grant.upstream),
                source_ip: None,
                detail: None,
            },
            now,
        )
        .await;
}

/// The access token `account_id` holds at `upstream`, refreshed first when it ends within
/// [`REFRESH_MARGIN_SECS`] (see the module documentation).
///
/// Errors: the database could not be read.
pub async fn access_token(
    app: &AppState,
    account_id: &str,
    upstream: &str,
) -> Result<Access, StoreError> {
    let now = crate::store::now();
    let Some(grant) = app.store.grant(account_id, upstream).await? else {
        return Ok(Access::NotConnected);
    };
    if fresh(&grant, now) {
        return Ok(match open(app, &grant, "access", &grant.access_sealed) {
            Some(token) => Access::Token(token),
            None => Access::TryAgain(
                "the stored connection could not be opened with the server key".into(),
            ),
        });
    }
    let Some(refresh_sealed) = grant.refresh_sealed.clone() else {
        if alive(&grant, now) {
            return Ok(open(app, &grant, "access", &grant.access_sealed)
                .map_or(Access::NotConnected, Access::Token));
        }
        // Ended, and nothing to refresh it with: the person connects again.
        app.store.delete_grant(account_id, upstream).await?;
        return Ok(Access::NotConnected);
    };
    if app
        .store
        .lease_grant_refresh(account_id, upstream, &refresh_sealed, now, now + LEASE_SECS)
        .await?
    {
        return refresh_now(app, &grant, &refresh_sealed).await;
    }
    wait_for_refresh(app, &grant).await
}

/// Refreshes `grant` while holding its lease.
async fn refresh_now(
    app: &AppState,
    grant: &Grant,
    refresh_sealed: &str,
) -> Result<Access, StoreError> {
    let (account_id, upstream) = (grant.account_id.as_str(), grant.upstream.as_str());
    let now = crate::store::now();
    let (Some(oauth), Ok(keys), Some(refresh_token)) = (
        app.store.upstream_oauth(upstream).await?,
        app.keyring(),
        open(app, grant, "refresh", refresh_sealed),
    ) else {
        app.store
            .release_grant_refresh(account_id, upstream)
            .await?;
        return Ok(Access::TryAgain(
            "the stored connection could not be opened".into(),
        ));
    };
    match super::refresh(&oauth, keys, &refresh_token, now).await {
        Ok(tokens) => {
            let (Ok(access_sealed), refresh) = (
                seal(app, upstream, account_id, "access", &tokens.access),
                tokens
                    .refresh
                    .as_deref()
                    .map(|r| seal(app, upstream, account_id, "refresh", r)),
            ) else {
                app.store
                    .release_grant_refresh(account_id, upstream)
                    .await?;
                return Ok(Access::TryAgain("no server key".into()));
            };
            let refresh = refresh.and_then(Result::ok);
            app.store
                .finish_grant_refresh(
                    account_id,
                    upstream,
                    &Refreshed {
                        access_sealed: &access_sealed,
                        refresh_sealed: refresh.as_deref(),
                        expires_at: tokens.expires_at,
                        scope: tokens.scope.as_deref(),
                    },
                    now,
                )
                .await?;
            Ok(Access::Token(tokens.access))
        }
        Err(FlowError::InvalidGrant) => {
            app.store.delete_grant(account_id, upstream).await?;
            audit_refresh(app, grant, Outcome::InvalidGrant, now).await;
            tracing::info!(
                upstream,
                "a connection ended: the upstream refused its refresh token"
            );
            Ok(Access::NotConnected)
        }
        Err(e) => {
            app.store
                .release_grant_refresh(account_id, upstream)
                .await?;
            audit_refresh(app, grant, Outcome::Unavailable, now).await;
            tracing::warn!(upstream, error = %e, "could not refresh a connection; kept for the next try");
            Ok(Access::TryAgain(e.to_string()))
        }
    }
}

/// Waits for another caller's refresh of `before` and uses its result.
async fn wait_for_refresh(app: &AppState, before: &Grant) -> Result<Access, StoreError> {
    let started = tokio::time::Instant::now();
    let (account_id, upstream) = (before.account_id.as_str(), before.upstream.as_str());
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = crate::store::now();
        let Some(grant) = app.store.grant(account_id, upstream).await? else {
            return Ok(Access::NotConnected);
        };
        if grant.access_sealed != before.access_sealed {
            return Ok(open(app, &grant, "access", &grant.access_sealed)
                .map_or(Access::NotConnected, Access::Token));
        }
        if grant.refresh_lease_until < now {
            // The other refresh gave up (the token endpoint is down) or its lease ran out.
            return Ok(if alive(&grant, now) {
                open(app, &grant, "access", &grant.access_sealed)
                    .map_or(Access::NotConnected, Access::Token)
            } else {
                Access::TryAgain(
                    "the upstream's token endpoint did not renew the connection".into(),
                )
            });
        }
        if started.elapsed() >= REFRESH_WAIT {
            return Ok(Access::TryAgain(
                "the connection's renewal is taking too long".into(),
            ));
        }
    }
}
