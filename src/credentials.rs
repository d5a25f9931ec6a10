//! Issuing and revoking the credentials a person makes for headless clients: API keys and
//! personal MCP URLs (product spec "API keys"). The command line (`gatehouse key …`,
//! `gatehouse url …`) and the console's `/keys` page both go through here, so the secret is
//! made, stored hashed and audited (never the secret itself) the same way whoever asks.
//!
//! Callers validate what they read (names, lifetimes, the project membership) and decide how
//! to answer; this module owns the steps after that.

use crate::domain::audit::{Event, Outcome};
use crate::domain::principal::{IssuedCredential, ToolFilter, key_scopes};
use crate::domain::secret::{Secret, TokenKind};
use crate::store::audit::AuditEvent;
use crate::store::keys::NewApiKey;
use crate::store::urls::NewPersonalUrl;
use crate::store::{Store, StoreError};

/// Who acts: recorded in the audit row's detail as `actor=cli` or `actor=console`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor<'a> {
    /// `gatehouse …` on the command line (no address).
    Cli,
    /// A signed-in person on the console, from this client address.
    Console {
        /// The client address as the server decided it (`ClientAddr`).
        source_ip: &'a str,
    },
}

impl<'a> Actor<'a> {
    fn name(self) -> &'static str {
        match self {
            Actor::Cli => "cli",
            Actor::Console { .. } => "console",
        }
    }

    fn source_ip(self) -> Option<&'a str> {
        match self {
            Actor::Cli => None,
            Actor::Console { source_ip } => Some(source_ip),
        }
    }
}

/// The audit event of `kind` being `created` or revoked.
fn event(kind: IssuedCredential, what: &str) -> Event {
    match (kind, what) {
        (IssuedCredential::ApiKey, "created") => Event::KeyCreated,
        (IssuedCredential::ApiKey, _) => Event::KeyRevoked,
        (IssuedCredential::PersonalUrl, "created") => Event::UrlCreated,
        (IssuedCredential::PersonalUrl, _) => Event::UrlRevoked,
    }
}

/// A credential to issue, already validated by the caller.
#[derive(Debug, Clone)]
pub struct NewCredential<'a> {
    /// Key or URL.
    pub kind: IssuedCredential,
    /// The account it acts for (active).
    pub account_id: &'a str,
    /// The one project it reaches (the account is a member); `None`: every active project.
    pub project_id: Option<&'a str>,
    /// Its name (checked by [`crate::domain::api_key::parse_name`]).
    pub name: &'a str,
    /// `true`: `mcp:read mcp:write`; `false`: `mcp:read`.
    pub write: bool,
    /// CIDR blocks an API key may be used from; empty: any address. Ignored for URLs.
    pub allowed_ips: &'a [String],
    /// Expiry, Unix seconds; `None`: none.
    pub expires_at: Option<i64>,
    /// The tools it may use (`--tools` / `--deny-tools`).
    pub tools: &'a ToolFilter,
}

/// A credential just issued: its id and its secret, to show once.
#[derive(Debug)]
pub struct Issued {
    /// The id (UUID text) that lists and revocation use.
    pub id: String,
    /// The secret; only its SHA-256 is stored.
    pub secret: Secret,
    /// The scope it carries (`mcp:read` or `mcp:read mcp:write`).
    pub scope: String,
}

/// Most live API keys, and most live personal URLs, one account may hold (each kind counted on
/// its own). Past it a new one is refused until one is revoked or expires: every key in use
/// is a secret to keep, and its uses are written to the database.
pub const MAX_LIVE_PER_ACCOUNT: i64 = 100;

/// `None` when `account_id` may make one more credential of `kind` at `now`, else the reason
/// to show (it holds [`MAX_LIVE_PER_ACCOUNT`] live ones).
///
/// Errors: the store's.
pub async fn room_for(
    store: &Store,
    kind: IssuedCredential,
    account_id: &str,
    now: i64,
) -> Result<Option<String>, StoreError> {
    let live = store
        .live_credentials(kind == IssuedCredential::PersonalUrl, account_id, now)
        .await?;
    Ok((live >= MAX_LIVE_PER_ACCOUNT).then(|| {
        format!(
            "the account already holds {live} live {}s, the most it may have; revoke one first",
            kind.label()
        )
    }))
}

/// Makes a credential: a fresh 256-bit secret of the kind's prefix, stored as its SHA-256,
/// and a `key_created` / `url_created` audit row naming the actor, the kind and the scope.
///
/// Errors: the store's.
pub async fn issue(
    store: &Store,
    new: &NewCredential<'_>,
    actor: Actor<'_>,
    now: i64,
) -> Result<Issued, StoreError> {
    // The callers check first, to answer in their own words; this holds the bound for all.
    if let Some(full) = room_for(store, new.kind, new.account_id, now).await? {
        return Err(StoreError::Conflict(full));
    }
    let scope = key_scopes(new.write).to_string();
    let (secret, id, detail) = match new.kind {
        IssuedCredential::ApiKey => {
            let secret = Secret::generate(TokenKind::ApiKey);
            let id = store
                .create_api_key(
                    &NewApiKey {
                        account_id: new.account_id,
                        project_id: new.project_id,
                        name: new.name,
                        scope: &scope,
                        allowed_ips: new.allowed_ips,
                        expires_at: new.expires_at,
                    },
                    &secret.hash(),
                    now,
                )
                .await?;
            let kind = if new.project_id.is_some() {
                "project_key"
            } else {
                "account_key"
            };
            let detail = format!("actor={} {kind} scope={scope}", actor.name());
            (secret, id, detail)
        }
        IssuedCredential::PersonalUrl => {
            let secret = Secret::generate(TokenKind::PersonalUrl);
            let id = store
                .create_personal_url(
                    &NewPersonalUrl {
                        account_id: new.account_id,
                        project_id: new.project_id,
                        name: new.name,
                        scope: &scope,
                        expires_at: new.expires_at,
                    },
                    &secret.hash(),
                    now,
                )
                .await?;
            let project = new
                .project_id
                .map(|p| format!(" project={p}"))
                .unwrap_or_default();
            let detail = format!("actor={} personal_url scope={scope}{project}", actor.name());
            (secret, id, detail)
        }
    };
    let personal_url = matches!(new.kind, IssuedCredential::PersonalUrl);
    let detail = match new.tools.to_stored() {
        None => detail,
        Some(filter) => {
            // The secret has not been shown yet: nobody can use it before this is set. Should
            // it fail, the credential is revoked rather than left broader than asked.
            if let Err(e) = store
                .set_credential_tool_filter(personal_url, &id, Some(&filter))
                .await
            {
                let revoked = if personal_url {
                    store.revoke_personal_url(&id, now).await
                } else {
                    store.revoke_api_key(&id, now).await
                };
                if let Err(r) = revoked {
                    tracing::error!(error = %r, credential = %id, "could not revoke a credential whose tool list was not stored");
                }
                return Err(e);
            }
            format!("{detail} tools={}", new.tools.describe())
        }
    };
    audit(
        store,
        event(new.kind, "created"),
        new.account_id,
        &id,
        actor,
        &detail,
        now,
    )
    .await;
    Ok(Issued { id, secret, scope })
}

/// What [`revoke`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revocation {
    /// Revoked now; the next request with it is refused.
    Revoked,
    /// It was revoked before; nothing changed.
    AlreadyRevoked,
    /// No such credential (or, with an owner given, not that account's: answered alike).
    NotFound,
}

/// Revokes credential `id` at once and audits it (`key_revoked` / `url_revoked`). With
/// `owner`, only a credential of that account is touched; another account's answers
/// [`Revocation::NotFound`] exactly like a missing one.
///
/// Errors: the store's.
pub async fn revoke(
    store: &Store,
    kind: IssuedCredential,
    id: &str,
    owner: Option<&str>,
    actor: Actor<'_>,
    now: i64,
) -> Result<Revocation, StoreError> {
    let account_id = match kind {
        IssuedCredential::ApiKey => store.api_key(id).await?.map(|k| k.account_id),
        IssuedCredential::PersonalUrl => store.personal_url(id).await?.map(|u| u.account_id),
    };
    let Some(account_id) = account_id.filter(|a| owner.is_none_or(|o| o == a)) else {
        return Ok(Revocation::NotFound);
    };
    let revoked = match kind {
        IssuedCredential::ApiKey => store.revoke_api_key(id, now).await,
        IssuedCredential::PersonalUrl => store.revoke_personal_url(id, now).await,
    };
    match revoked {
        Ok(true) => {}
        Ok(false) => return Ok(Revocation::AlreadyRevoked),
        Err(StoreError::NotFound(_)) => return Ok(Revocation::NotFound),
        Err(e) => return Err(e),
    }
    let detail = format!("actor={}", actor.name());
    audit(
        store,
        event(kind, "revoked"),
        &account_id,
        id,
        actor,
        &detail,
        now,
    )
    .await;
    Ok(Revocation::Revoked)
}

async fn audit(
    store: &Store,
    event: Event,
    account_id: &str,
    subject: &str,
    actor: Actor<'_>,
    detail: &str,
    now: i64,
) {
    store
        .audit(
            AuditEvent {
                event,
                outcome: Outcome::Success,
                account_id: Some(account_id),
                subject: Some(subject),
                source_ip: actor.source_ip(),
                client_id: None,
                detail: Some(detail),
            },
            now,
        )
        .await;
}
