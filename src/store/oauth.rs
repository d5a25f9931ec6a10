//! OAuth clients, remembered consents, authorization codes, refresh-token families and tokens.
//!
//! Every secret arrives here already hashed ([`TokenHash`]). Single use of a code and rotation
//! of a refresh token are conditional `UPDATE … WHERE used_at IS NULL` / `rotated_at IS NULL`
//! statements inside a transaction, so two requests — or two server instances — can never both
//! win (OAuth 2.1 §4.1.3, §4.3.1).
//!
//! A consent row is one grant generation: revoking it revokes every family and access token
//! minted under it and uses up its unused codes, and approving the client again creates a new
//! row, so nothing minted before a revocation joins a later approval. Redeeming a code and
//! rotating a refresh token first lock the consent row with a conditional update and check, in
//! the same transaction as single use, that it is live, that its account is active and that it
//! still covers the scope being issued (RFC 7009 §2.1, RFC 6749 §3.3); a concurrent revocation
//! either waits for the redemption (and then revokes what it issued) or makes it fail.

use super::hot::{HotLookup, Lookup, Param};
use super::in_place::{self, FromSqliteRow};
use super::rotations::RotationWrite;
use super::{Flag, JsonStrings, JsonText, Store, StoreError, StoredHash, WriteTx, new_id};
use crate::domain::grant::GrantType;
use crate::domain::refresh::RefreshFacts;
use crate::domain::registry::scopes_within;
use crate::domain::scope::ScopeSet;
use crate::domain::secret::TokenHash;

/// A registered client (RFC 7591 §2).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ClientRecord {
    /// `client_id`.
    pub client_id: String,
    /// SHA-256 of `client_secret`; `None` for public clients.
    #[sqlx(try_from = "StoredHash")]
    pub client_secret_hash: Option<TokenHash>,
    /// `none`, `client_secret_basic`, `client_secret_post` or `private_key_jwt` (its keys
    /// at `metadata.jwks_uri` or in `metadata.jwks`).
    #[sqlx(rename = "auth_method")]
    pub token_endpoint_auth_method: String,
    /// `client_name`, if given.
    pub client_name: Option<String>,
    /// Registered redirect URIs (a JSON array in the row).
    #[sqlx(try_from = "JsonStrings")]
    pub redirect_uris: Vec<String>,
    /// Registered grant types (a JSON array in the row).
    #[sqlx(try_from = "JsonStrings")]
    pub grant_types: Vec<String>,
    /// Registered scope restriction, if any.
    pub scope: Option<String>,
    /// The registered metadata as echoed at registration (JSON object).
    #[sqlx(try_from = "JsonText")]
    pub metadata: serde_json::Value,
    /// Whether this client may call the introspection endpoint.
    #[sqlx(try_from = "Flag")]
    pub can_introspect: bool,
    /// Unix seconds.
    pub created_at: i64,
}

impl ClientRecord {
    /// Whether the client authenticates with a credential of its own: a secret
    /// (`client_secret_basic`, `client_secret_post`) or a signed JWT (`private_key_jwt`).
    pub fn is_confidential(&self) -> bool {
        self.client_secret_hash.is_some()
            || self.token_endpoint_auth_method == crate::domain::client_assertion::PRIVATE_KEY_JWT
    }
}

/// The registered client whose `client_id` is `$1`, unless revoked (`gatehouse client
/// revoke`): a [`ClientRecord`].
pub(super) const CLIENT: Lookup<ClientRecord, Option<ClientRecord>> = Lookup::new(
    HotLookup::Client,
    "SELECT client_id, client_secret_hash, auth_method, client_name, redirect_uris, grant_types, scope, \
     metadata, can_introspect, created_at FROM oauth_clients WHERE client_id = $1 AND revoked_at IS NULL",
);

impl FromSqliteRow for ClientRecord {
    const COLUMNS: &'static [&'static str] = &[
        "client_id",
        "client_secret_hash",
        "auth_method",
        "client_name",
        "redirect_uris",
        "grant_types",
        "scope",
        "metadata",
        "can_introspect",
        "created_at",
    ];

    fn from_sqlite(row: &in_place::Named<'_, '_>) -> rusqlite::Result<Self> {
        let json_strings = |column: &str| -> rusqlite::Result<Vec<String>> {
            let index = row.index(column)?;
            Vec::try_from(JsonStrings(row.get_at::<Option<String>>(index)?))
                .map_err(|e| in_place::conversion(index, e))
        };
        let metadata_index = row.index("metadata")?;
        Ok(ClientRecord {
            client_id: row.get("client_id")?,
            client_secret_hash: row
                .get::<Option<String>>("client_secret_hash")?
                .map(TokenHash::from_hex),
            token_endpoint_auth_method: row.get("auth_method")?,
            client_name: row.get("client_name")?,
            redirect_uris: json_strings("redirect_uris")?,
            grant_types: json_strings("grant_types")?,
            scope: row.get("scope")?,
            metadata: serde_json::from_str(&row.get_at::<String>(metadata_index)?)
                .map_err(|e| in_place::conversion(metadata_index, e))?,
            can_introspect: row.get::<i64>("can_introspect")? != 0,
            created_at: row.get("created_at")?,
        })
    }
}

/// Whether `held` (space-delimited scopes of a code, family or token) stays within `granted`
/// (the live consent's scopes): every held scope is granted or implied by a granted one
/// (`mcp:write` implies `mcp:read`); `offline_access` is not a permission and is ignored. A
/// token outside the scope grammar is never within (RFC 6749 §3.3: a token carries at most
/// the scope the resource owner granted). Tokens are compared one by one
/// ([`scopes_within`]), so a registered resource's own scopes follow the same rule.
fn within_approval(granted: &str, held: &str) -> bool {
    scopes_within(granted, held)
}

/// `scope` (space-delimited) without `mcp:write`, for a grant the person limited to reading:
/// `mcp:read` stays (or comes in, as `mcp:write` implied it).
fn without_write(scope: &str) -> String {
    use crate::domain::scope::Scope;
    let (read, write) = (Scope::McpRead.as_str(), Scope::McpWrite.as_str());
    let mut kept: Vec<&str> = scope
        .split_ascii_whitespace()
        .filter(|s| *s != write)
        .collect();
    if scope.split_ascii_whitespace().any(|s| s == write) && !kept.contains(&read) {
        kept.insert(0, read);
    }
    kept.join(" ")
}

/// The consent resource of the built-in resource (Gatehouse's own MCP endpoint): consents for a
/// registered resource hold its URL instead.
pub const BUILT_IN: &str = "";

/// The scopes of a widened consent: `granted` and `requested` together, in the fixed order when
/// both are the built-in scopes, else the granted tokens then the new ones.
fn scope_union(granted: &str, requested: &str) -> String {
    if let (Ok(a), Ok(b)) = (ScopeSet::parse(granted), ScopeSet::parse(requested)) {
        return a.union(&b).to_string();
    }
    let mut tokens: Vec<&str> = granted.split_ascii_whitespace().collect();
    for t in requested.split_ascii_whitespace() {
        if !tokens.contains(&t) {
            tokens.push(t);
        }
    }
    tokens.join(" ")
}

pub use crate::domain::refresh::GrantRefusal;

/// What rotating a refresh token did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rotation {
    /// This request rotated it: the successor pair now exists.
    Rotated,
    /// Another request rotated it first; nothing was written.
    Lost,
    /// The grant no longer allows it; nothing was written.
    Refused(GrantRefusal),
}

/// A live remembered consent.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Consent {
    /// Consent id.
    pub id: String,
    /// Scopes granted (space-delimited): what the person approved, the most the grant can
    /// do; [`Consent::effective_scope`] is what it may do now.
    pub scope: String,
    /// The projects the person chose (a JSON array of ids), `None` for every project.
    pub project_ids: Option<String>,
    /// The person allowed reading only.
    #[sqlx(try_from = "Flag")]
    pub read_only: bool,
    /// When the grant ends (Unix seconds), `None` until revoked.
    pub expires_at: Option<i64>,
}

impl Consent {
    /// Whether the grant has ended at `now` (a duration the person chose has passed).
    pub fn ended(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|end| end <= now)
    }

    /// What the grant allows now: its scopes, without `mcp:write` when the person allowed
    /// reading only (a request for `mcp:write` is then a step-up).
    pub fn effective_scope(&self) -> String {
        if self.read_only {
            without_write(&self.scope)
        } else {
            self.scope.clone()
        }
    }

    /// The person's choice as it stands (what a step-up keeps unless they change it).
    pub fn choice(&self) -> GrantChoice {
        GrantChoice {
            project_ids: self
                .project_ids
                .as_deref()
                .map(|t| serde_json::from_str(t).unwrap_or_default()),
            read_only: self.read_only,
            expires_at: self.expires_at,
        }
    }
}

/// What a person chose for one app's grant on the consent page or the app's page (issue 37,
/// per-app project choice), kept with the consent row (migration 0065).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrantChoice {
    /// The project ids the grant reaches; `None`: every project of the account, including
    /// ones it joins later.
    pub project_ids: Option<Vec<String>>,
    /// Reading only: the grant's tokens act without `mcp:write`.
    pub read_only: bool,
    /// When the grant ends (Unix seconds); `None`: until revoked.
    pub expires_at: Option<i64>,
}

impl GrantChoice {
    /// The stored form of [`GrantChoice::project_ids`] (`consents.project_ids`).
    pub fn stored_projects(&self) -> Option<String> {
        self.project_ids
            .as_ref()
            .map(|ids| serde_json::json!(ids).to_string())
    }
}

/// An authorization code's bindings (OAuth 2.1 §4.1.2).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CodeRecord {
    /// SHA-256 of the code.
    #[sqlx(try_from = "StoredHash")]
    pub code_hash: TokenHash,
    /// The client it was issued to.
    pub client_id: String,
    /// The account that approved.
    pub account_id: String,
    /// The consent it came from.
    pub consent_id: String,
    /// The redirect URI of the authorization request, exactly as sent.
    pub redirect_uri: String,
    /// PKCE S256 challenge.
    pub code_challenge: String,
    /// RFC 8707 resource (the MCP server URL).
    pub resource: String,
    /// Granted scopes (space-delimited).
    pub scope: String,
    /// The issuer that issued it (`None` for codes stored before issuers were recorded).
    pub issuer: Option<String>,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub expires_at: i64,
    /// When it was redeemed (or used up by a revocation).
    pub used_at: Option<i64>,
    /// The DPoP key thumbprint the authorization request named (`dpop_jkt`, RFC 9449 §10): the
    /// code is redeemed only with a proof by that key.
    pub dpop_jkt: Option<String>,
    /// When its grant ends (the consent's `expires_at`, Unix seconds; `None`: until revoked),
    /// read with the code and never stored with it: the tokens it redeems for end by then.
    #[sqlx(default)]
    pub grant_expires_at: Option<i64>,
}

impl CodeRecord {
    /// The grant its tokens descend from: RFC 8628's device code grant for a code made by an
    /// approval on the device page (whose `redirect_uri` is that grant's name, as nothing is
    /// redirected), else `authorization_code`.
    pub fn grant_type(&self) -> GrantType {
        if self.redirect_uri == GrantType::DeviceCode.as_str() {
            GrantType::DeviceCode
        } else {
            GrantType::AuthorizationCode
        }
    }
}

/// Tokens to create when a code is redeemed or a refresh token rotated.
#[derive(Debug, Clone)]
pub struct NewTokens {
    /// SHA-256 of the new refresh token.
    pub refresh_hash: TokenHash,
    /// SHA-256 of the new access token.
    pub access_hash: TokenHash,
    /// Access-token expiry, Unix seconds.
    pub access_expires_at: i64,
    /// Scopes of the access token.
    pub scope: String,
    /// The RFC 7638 thumbprint of the DPoP key the access token is bound to (RFC 9449 §6);
    /// `None`: a bearer token.
    pub jkt: Option<String>,
    /// At a code's redemption, the thumbprint the new family's refresh tokens are bound to (a
    /// public client's, RFC 9449 §5); ignored by a rotation, which keeps its family's.
    pub refresh_jkt: Option<String>,
}

/// What redeeming a code did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redeemed {
    /// The code was unused and unexpired: the family and tokens now exist.
    Issued {
        /// The new family.
        family_id: String,
    },
    /// The code had already been redeemed: the family it produced is now revoked.
    Replayed {
        /// The revoked family, if the first redemption had produced one.
        family_id: Option<String>,
    },
    /// The code is valid but its grant no longer allows redeeming it; nothing was written.
    Refused(GrantRefusal),
    /// Unknown or expired code.
    Invalid,
}

/// A refresh token with its family, read in one query.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RefreshState {
    /// Family id.
    pub family_id: String,
    /// The consent (grant generation) the family was minted under.
    pub consent_id: String,
    /// The family's client.
    pub client_id: String,
    /// The family's account.
    pub account_id: String,
    /// Scopes of the family (the consent at redemption time).
    pub scope: String,
    /// The family's resource.
    pub resource: String,
    /// The scopes of the consent behind the family, as read (a rotation goes ahead only while
    /// the consent still has exactly these: [`Store::rotate_refresh`]).
    pub consent_scope: String,
    /// The issuer that issued the family (`None` for families made before issuers were recorded).
    pub issuer: Option<String>,
    /// When the grant the person chose to limit in time ends (`consents.expires_at`, Unix
    /// seconds; `None`: until revoked). A refresh at or after it is refused with
    /// `invalid_grant` ([`RefreshState::grant_ended`]).
    pub consent_expires_at: Option<i64>,
    /// Whether the family's scope stays within its consent's scope (`mcp:write` implying
    /// `mcp:read`; RFC 6749 §3.3): not a column, worked out from the consent's scope.
    #[sqlx(skip)]
    pub within_approval: bool,
    /// Whether the family is revoked.
    #[sqlx(try_from = "Flag")]
    pub family_revoked: bool,
    /// Whether the account is active.
    #[sqlx(try_from = "Flag")]
    pub account_active: bool,
    /// Whether the consent behind the family is revoked.
    #[sqlx(try_from = "Flag")]
    pub consent_revoked: bool,
    /// When this token was rotated (`None` = current).
    pub rotated_at: Option<i64>,
    /// The successor pair sealed under a key derived from this token.
    pub successor_sealed: Option<Vec<u8>>,
    /// Whether the successor refresh token has itself been rotated (used).
    #[sqlx(try_from = "Flag")]
    pub successor_used: bool,
    /// The thumbprint of the DPoP key the family's refresh tokens are bound to (RFC 9449 §5);
    /// `None`: unbound.
    pub jkt: Option<String>,
}

/// The refresh token whose hash is `$1` with its family, consent and account: a
/// [`RefreshState`] (its `within_approval` still to be worked out). Batched on `PostgreSQL`.
pub(super) const REFRESH_TOKEN: Lookup<RefreshState, Option<RefreshState>> = Lookup::new(
    HotLookup::RefreshToken,
    "SELECT f.id AS family_id, f.consent_id AS consent_id, f.client_id AS client_id, \
     f.account_id AS account_id, f.scope AS scope, f.resource AS resource, f.issuer AS issuer, \
     c.scope AS consent_scope, c.expires_at AS consent_expires_at, \
     f.revoked_at IS NOT NULL AS family_revoked, \
     a.status = 'active' AS account_active, c.revoked_at IS NOT NULL AS consent_revoked, \
     r.rotated_at AS rotated_at, r.successor_sealed AS successor_sealed, \
     s.rotated_at IS NOT NULL AS successor_used, f.jkt AS jkt \
     FROM refresh_tokens r \
     JOIN token_families f ON f.id = r.family_id \
     JOIN accounts a ON a.id = f.account_id \
     JOIN consents c ON c.id = f.consent_id \
     LEFT JOIN refresh_tokens s ON s.token_hash = r.successor_hash \
     WHERE r.token_hash = $1",
)
.batched(|store| &store.refresh_reads);

impl FromSqliteRow for RefreshState {
    const COLUMNS: &'static [&'static str] = &[
        "family_id",
        "consent_id",
        "client_id",
        "account_id",
        "scope",
        "resource",
        "issuer",
        "consent_scope",
        "consent_expires_at",
        "family_revoked",
        "account_active",
        "consent_revoked",
        "rotated_at",
        "successor_sealed",
        "successor_used",
        "jkt",
    ];

    fn from_sqlite(row: &in_place::Named<'_, '_>) -> rusqlite::Result<Self> {
        Ok(RefreshState {
            family_id: row.get("family_id")?,
            consent_id: row.get("consent_id")?,
            client_id: row.get("client_id")?,
            account_id: row.get("account_id")?,
            scope: row.get("scope")?,
            resource: row.get("resource")?,
            consent_scope: row.get("consent_scope")?,
            consent_expires_at: row.get("consent_expires_at")?,
            issuer: row.get("issuer")?,
            within_approval: false,
            family_revoked: row.get::<i64>("family_revoked")? != 0,
            account_active: row.get::<i64>("account_active")? != 0,
            consent_revoked: row.get::<i64>("consent_revoked")? != 0,
            rotated_at: row.get("rotated_at")?,
            successor_sealed: row.get("successor_sealed")?,
            successor_used: row.get::<i64>("successor_used")? != 0,
            jkt: row.get("jkt")?,
        })
    }
}

impl RefreshState {
    /// Whether the grant ended at `now` (Unix seconds): the person chose a duration on the
    /// consent page or the app's page and it has passed.
    pub fn grant_ended(&self, now: i64) -> bool {
        self.consent_expires_at.is_some_and(|end| end <= now)
    }

    /// What the refresh rule ([`crate::domain::refresh::decide`]) needs of this state.
    pub fn facts(&self) -> RefreshFacts {
        RefreshFacts {
            family_revoked: self.family_revoked,
            consent_revoked: self.consent_revoked,
            account_active: self.account_active,
            within_approval: self.within_approval,
            rotated_at: self.rotated_at,
            successor_sealed: self.successor_sealed.is_some(),
            successor_used: self.successor_used,
        }
    }
}

/// An access token that authenticates a request (one round trip: token, family, consent, account).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AccessGrant {
    /// The account the token acts for.
    pub account_id: String,
    /// The client it was issued to.
    pub client_id: String,
    /// Scopes (space-delimited).
    pub scope: String,
    /// The resource (RFC 8707) it is bound to: its audience.
    pub resource: String,
    /// Issued at, Unix seconds.
    pub issued_at: i64,
    /// Expiry, Unix seconds.
    pub expires_at: i64,
    /// The family it descends from.
    pub family_id: String,
    /// Issued by `client_credentials` to a service client ([`super::services`]).
    #[sqlx(try_from = "Flag")]
    pub service: bool,
    /// The grant the token descends from (RFC 6749 §4 grant type names: `authorization_code`,
    /// `client_credentials`, RFC 8628's `urn:ietf:params:oauth:grant-type:device_code`, or RFC
    /// 7523's `urn:ietf:params:oauth:grant-type:jwt-bearer` for an identity assertion or a
    /// workload's token): the token's own, else its family's (migration 0073). A refreshed
    /// token names the grant that started its family.
    pub grant_type: String,
    /// The one project a service client limited to one project reaches (active, and the
    /// account still a member); `None`: every active project of the account.
    pub project_id: Option<String>,
    /// The account's own tool-call budget (`accounts.calls_per_hour`; `None`: the server's).
    pub calls_per_hour: Option<i64>,
    /// The projects the person chose for this grant (`consents.project_ids`, a JSON array of
    /// project ids; issue 37, per-app project choice), `None` for every project of the
    /// account, including later ones. Read as [`crate::domain::principal::Reach::from_choice`].
    pub chosen_projects: Option<String>,
    /// The RFC 7638 thumbprint of the DPoP key the token is bound to (RFC 9449 §6): it is then
    /// accepted only as `Authorization: DPoP` with a proof signed by that key. `None`: a bearer
    /// token.
    pub jkt: Option<String>,
    /// The tools the grant may use, set on the connected app's console page: stored form of
    /// [`crate::domain::principal::ToolFilter`] (`consents.tool_filter`; `None`: every tool).
    pub tool_filter: Option<String>,
}

/// An [`AccessGrant`] with the two scopes its own must stay within, and the person's choice of
/// access (read only) and duration kept with the consent.
#[derive(Clone, sqlx::FromRow)]
pub(super) struct AccessRow {
    #[sqlx(flatten)]
    grant: AccessGrant,
    family_scope: String,
    consent_scope: String,
    #[sqlx(try_from = "Flag")]
    consent_read_only: bool,
    consent_expires_at: Option<i64>,
}

impl AccessRow {
    /// The grant, when neither the family's nor the token's scope exceeds the consent's (RFC
    /// 6749 §3.3), with the person's choice kept with the consent applied: reading only takes
    /// `mcp:write` away from whatever the token carries (it is not revoked: widening the choice
    /// again gives it back, within what was approved), and the grant's end caps the token's,
    /// so that no cached answer outlives it.
    fn live_grant(self) -> Option<AccessGrant> {
        if !within_approval(&self.consent_scope, &self.family_scope)
            || !within_approval(&self.consent_scope, &self.grant.scope)
        {
            return None;
        }
        let mut grant = self.grant;
        if self.consent_read_only {
            grant.scope = without_write(&grant.scope);
        }
        if let Some(end) = self.consent_expires_at {
            grant.expires_at = grant.expires_at.min(end);
        }
        Some(grant)
    }
}

/// The columns of an [`AccessRow`] then `$extra` (more columns, each led by a comma), for the
/// live access token whose hash is `$1` at `$2` (Unix seconds), with its family's and
/// consent's scopes (a literal, so that both statements are `&'static str`).
macro_rules! access_lookup {
    ($extra:literal) => {
        concat!(
            "SELECT t.account_id AS account_id, t.client_id AS client_id, t.scope AS scope, t.audience AS resource, \
             t.created_at AS issued_at, t.expires_at AS expires_at, t.family_id AS family_id, \
             f.scope AS family_scope, c.scope AS consent_scope, \
             s.client_id IS NOT NULL AS service, s.project_id AS project_id, \
             COALESCE(t.grant_type, f.grant_type) AS grant_type, \
             a.calls_per_hour AS calls_per_hour, t.jkt AS jkt, c.project_ids AS chosen_projects, \
             c.read_only AS consent_read_only, c.expires_at AS consent_expires_at, \
             c.tool_filter AS tool_filter",
            $extra,
            " FROM access_tokens t \
             JOIN token_families f ON f.id = t.family_id \
             JOIN consents c ON c.id = f.consent_id \
             JOIN accounts a ON a.id = t.account_id \
             LEFT JOIN service_clients s ON s.family_id = t.family_id \
             LEFT JOIN projects p ON p.id = s.project_id \
             LEFT JOIN memberships m ON m.project_id = s.project_id AND m.account_id = t.account_id \
             WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND t.expires_at > $2 \
             AND f.revoked_at IS NULL AND c.revoked_at IS NULL AND a.status = 'active' \
             AND (c.expires_at IS NULL OR c.expires_at > $2) \
             AND (s.project_id IS NULL OR (p.status = 'active' AND m.account_id IS NOT NULL))"
        )
    };
}

/// The live access token whose hash is `$1` at `$2` (Unix seconds), with its family's and
/// consent's scopes: an [`AccessRow`].
pub(super) const ACCESS_TOKEN: Lookup<AccessRow, Option<AccessRow>> =
    Lookup::new(HotLookup::AccessToken, access_lookup!(""));

/// [`ACCESS_TOKEN`] and whether the DPoP proof whose replay key is `$3` was recorded by any
/// instance and has not expired at `$2` (`proof_seen`): a [`ProofAccessRow`]. One statement,
/// so a DPoP request still costs one round trip ([`super::dpop`]).
const ACCESS_TOKEN_WITH_PROOF: Lookup<ProofAccessRow, Option<ProofAccessRow>> = Lookup::new(
    HotLookup::AccessTokenWithProof,
    access_lookup!(
        ", EXISTS (SELECT 1 FROM dpop_proofs d WHERE d.proof_hash = $3 AND d.expires_at > $2) AS proof_seen"
    ),
);

/// An [`AccessRow`] and whether its request's DPoP proof was seen before.
#[derive(Clone, sqlx::FromRow)]
struct ProofAccessRow {
    #[sqlx(flatten)]
    access: AccessRow,
    #[sqlx(try_from = "Flag")]
    proof_seen: bool,
}

impl FromSqliteRow for ProofAccessRow {
    const COLUMNS: &'static [&'static str] = &[
        "account_id",
        "client_id",
        "scope",
        "resource",
        "issued_at",
        "expires_at",
        "family_id",
        "family_scope",
        "consent_scope",
        "service",
        "project_id",
        "grant_type",
        "calls_per_hour",
        "jkt",
        "chosen_projects",
        "consent_read_only",
        "consent_expires_at",
        "tool_filter",
        "proof_seen",
    ];

    fn from_sqlite(row: &in_place::Named<'_, '_>) -> rusqlite::Result<Self> {
        Ok(ProofAccessRow {
            access: AccessRow::from_sqlite(row)?,
            proof_seen: row.get::<i64>("proof_seen")? != 0,
        })
    }
}

impl FromSqliteRow for AccessRow {
    const COLUMNS: &'static [&'static str] = &[
        "account_id",
        "client_id",
        "scope",
        "resource",
        "issued_at",
        "expires_at",
        "family_id",
        "family_scope",
        "consent_scope",
        "service",
        "project_id",
        "grant_type",
        "calls_per_hour",
        "jkt",
        "chosen_projects",
        "consent_read_only",
        "consent_expires_at",
        "tool_filter",
    ];

    fn from_sqlite(row: &in_place::Named<'_, '_>) -> rusqlite::Result<Self> {
        Ok(AccessRow {
            grant: AccessGrant {
                account_id: row.get("account_id")?,
                client_id: row.get("client_id")?,
                scope: row.get("scope")?,
                resource: row.get("resource")?,
                issued_at: row.get("issued_at")?,
                expires_at: row.get("expires_at")?,
                family_id: row.get("family_id")?,
                service: row.get::<i64>("service")? != 0,
                project_id: row.get("project_id")?,
                grant_type: row.get("grant_type")?,
                calls_per_hour: row.get("calls_per_hour")?,
                chosen_projects: row.get("chosen_projects")?,
                jkt: row.get("jkt")?,
                tool_filter: row.get("tool_filter")?,
            },
            family_scope: row.get("family_scope")?,
            consent_scope: row.get("consent_scope")?,
            consent_read_only: row.get::<i64>("consent_read_only")? != 0,
            consent_expires_at: row.get("consent_expires_at")?,
        })
    }
}

/// A client the account has granted, for the connected-apps page.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ConnectedApp {
    /// Consent id (what is revoked).
    pub consent_id: String,
    /// Client id.
    pub client_id: String,
    /// Client name, if registered.
    pub client_name: Option<String>,
    /// Redirect URI approved.
    pub redirect_uri: String,
    /// Scopes granted.
    pub scope: String,
    /// The resource the grant is for: [`BUILT_IN`] (`""`) or a registered resource's URL.
    pub resource: String,
    /// Unix seconds of the last approval.
    pub updated_at: i64,
    /// The projects the person chose (a JSON array of ids), `None` for every project.
    pub project_ids: Option<String>,
    /// The person allowed reading only.
    #[sqlx(try_from = "Flag")]
    pub read_only: bool,
    /// When the grant ends (Unix seconds), `None` until revoked.
    pub expires_at: Option<i64>,
    /// When it was revoked (Unix seconds), `None` while live.
    pub revoked_at: Option<i64>,
    /// The tools the grant may use, set on the app's console page: stored form of
    /// [`crate::domain::principal::ToolFilter`] (`None`: every tool).
    pub tool_filter: Option<String>,
}

async fn insert_tokens(
    tx: &mut WriteTx,
    family_id: &str,
    account_id: &str,
    client_id: &str,
    resource: &str,
    new: &NewTokens,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO refresh_tokens (token_hash, family_id, created_at) VALUES ($1, $2, $3)",
    )
    .bind(new.refresh_hash.as_str())
    .bind(family_id)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    sqlx::query(
        "INSERT INTO access_tokens (token_hash, family_id, account_id, client_id, scope, audience, created_at, expires_at, jkt) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(new.access_hash.as_str())
    .bind(family_id)
    .bind(account_id)
    .bind(client_id)
    .bind(&new.scope)
    .bind(resource)
    .bind(now)
    .bind(new.access_expires_at)
    .bind(&new.jkt)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Reads the consent row under a lock held for the rest of `tx` and returns the consent's
/// scopes when it is live and its account active (the account's status comes back through a
/// subquery, one statement on both engines). The lock ([`super::Dialect::lock_consent_sql`]:
/// `FOR SHARE` on `PostgreSQL`; on `SQLite` the write lock `tx` holds already) makes a
/// concurrent revocation, which updates the same row, either wait for `tx` or be seen by it,
/// while issuances under one consent (one user's client with several sessions) do not queue
/// on the row, and nothing is written to take it.
async fn lock_live_consent(
    tx: &mut WriteTx,
    dialect: &dyn super::Dialect,
    consent_id: &str,
    now: i64,
) -> Result<Result<String, GrantRefusal>, StoreError> {
    let sql = dialect.lock_consent_sql();
    let row: Option<ConsentReadRow> = sqlx::query_as(sql)
        .bind(consent_id)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(live_consent_scope(row, now))
}

/// A consent row as [`super::consent_read`] returns it: `scope, revoked_at, account_status,
/// expires_at`.
type ConsentReadRow = (String, Option<i64>, Option<String>, Option<i64>);

/// A consent row as [`super::consent_read`] returns it: its scopes when it is live at `now`
/// (Unix seconds: unrevoked, its chosen duration not passed) and its account active, or why
/// not.
fn live_consent_scope(row: Option<ConsentReadRow>, now: i64) -> Result<String, GrantRefusal> {
    match row {
        None | Some((_, Some(_), _, _)) => Err(GrantRefusal::Revoked),
        Some((_, None, status, _)) if status.as_deref() != Some("active") => {
            Err(GrantRefusal::AccountDisabled)
        }
        Some((_, None, _, Some(end))) if end <= now => Err(GrantRefusal::Ended),
        Some((scope, None, _, _)) => Ok(scope),
    }
}

/// Whether a consent's `granted` scopes cover every scope string of `scopes` (see
/// [`within_approval`]).
fn approves_all(granted: &str, scopes: &[&str]) -> bool {
    scopes.iter().all(|held| within_approval(granted, held))
}

/// Why the grant behind `consent_id` does not allow issuing `scopes` at `now`, if it does not:
/// locks the consent row (see [`lock_live_consent`]) and checks every scope string given.
async fn grant_refusal(
    tx: &mut WriteTx,
    dialect: &dyn super::Dialect,
    consent_id: &str,
    scopes: &[&str],
    now: i64,
) -> Result<Option<GrantRefusal>, StoreError> {
    Ok(
        match lock_live_consent(tx, dialect, consent_id, now).await? {
            Ok(granted) if approves_all(&granted, scopes) => None,
            Ok(_) => Some(GrantRefusal::ScopeExceedsApproval),
            Err(refusal) => Some(refusal),
        },
    )
}

impl Store {
    /// Stores a newly registered client.
    pub async fn create_client(&self, c: &ClientRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO oauth_clients (client_id, client_secret_hash, auth_method, client_name, redirect_uris, \
             grant_types, scope, metadata, can_introspect, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&c.client_id)
        .bind(c.client_secret_hash.as_ref().map(|h| h.as_str().to_string()))
        .bind(&c.token_endpoint_auth_method)
        .bind(&c.client_name)
        .bind(serde_json::to_string(&c.redirect_uris).unwrap_or_default())
        .bind(serde_json::to_string(&c.grant_types).unwrap_or_default())
        .bind(&c.scope)
        .bind(c.metadata.to_string())
        .bind(i64::from(c.can_introspect))
        .bind(c.created_at)
        .execute(&self.writer())
        .await
        .map_err(|e| StoreError::from_insert(e, &format!("client {}", c.client_id)))?;
        Ok(())
    }

    /// The client with this `client_id`, if registered, read from the database (in place on
    /// `SQLite`); [`Store::client`] is the same through the validation cache.
    pub(crate) async fn client_lookup(
        &self,
        client_id: &str,
    ) -> Result<Option<ClientRecord>, StoreError> {
        self.hot(&CLIENT, &[Param::Text(client_id)]).await
    }

    /// The live consent of `account_id` for `client_id` at `redirect_uri` for the built-in
    /// resource, if any ([`Store::consent_for`] with [`BUILT_IN`]).
    pub async fn consent(
        &self,
        account_id: &str,
        client_id: &str,
        redirect_uri: &str,
    ) -> Result<Option<Consent>, StoreError> {
        self.consent_for(account_id, client_id, redirect_uri, BUILT_IN)
            .await
    }

    /// The live consent of `account_id` for `client_id` at `redirect_uri` for `resource`
    /// ([`BUILT_IN`] or a registered resource's URL), if any: remembered consent is per client
    /// and resource.
    pub async fn consent_for(
        &self,
        account_id: &str,
        client_id: &str,
        redirect_uri: &str,
        resource: &str,
    ) -> Result<Option<Consent>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT id, scope, project_ids, read_only, expires_at FROM consents \
             WHERE account_id = $1 AND client_id = $2 AND redirect_uri = $3 \
             AND resource = $4 AND revoked_at IS NULL",
        )
        .bind(account_id)
        .bind(client_id)
        .bind(redirect_uri)
        .bind(resource)
        .fetch_optional(&self.pool())
        .await?)
    }

    /// Records an approval of `requested` (space-delimited scopes) and returns the consent id.
    ///
    /// A live consent is widened to the union of what it granted and `requested` (remembered
    /// consent grows with incremental approvals). A revoked consent is never revived: without a
    /// live one a new row is created, a new grant generation that nothing minted under a revoked
    /// row can join. If the live consent is revoked while this runs, the new row holds only
    /// `requested`; if another approval creates a live row at the same moment, this approval's
    /// `requested` replaces its scopes, so a code issued by the other one may then be refused
    /// at redemption as exceeding the approval, never the reverse.
    pub async fn approve_consent(
        &self,
        account_id: &str,
        client_id: &str,
        redirect_uri: &str,
        requested: &str,
        now: i64,
    ) -> Result<String, StoreError> {
        self.approve_consent_for(
            account_id,
            client_id,
            redirect_uri,
            BUILT_IN,
            requested,
            now,
        )
        .await
    }

    /// [`Store::approve_consent`] for `resource` ([`BUILT_IN`] or a registered resource's URL):
    /// the consent widened or created is the one of that resource only.
    pub async fn approve_consent_for(
        &self,
        account_id: &str,
        client_id: &str,
        redirect_uri: &str,
        resource: &str,
        requested: &str,
        now: i64,
    ) -> Result<String, StoreError> {
        self.approve_consent_with(
            account_id,
            client_id,
            redirect_uri,
            resource,
            requested,
            None,
            now,
        )
        .await
    }

    /// [`Store::approve_consent_for`] with the person's `choice` of projects, access and
    /// duration (issue 37): stored with the consent, replacing the live one's; `None` keeps
    /// the live consent's choice (a new consent then reaches every project, until revoked).
    /// A live consent whose chosen duration has passed is revoked first (with its tokens, as
    /// [`Store::revoke_consent`] does) and a new grant generation starts: nothing of the
    /// ended grant comes back.
    #[allow(clippy::too_many_arguments)]
    pub async fn approve_consent_with(
        &self,
        account_id: &str,
        client_id: &str,
        redirect_uri: &str,
        resource: &str,
        requested: &str,
        choice: Option<&GrantChoice>,
        now: i64,
    ) -> Result<String, StoreError> {
        if let Some(live) = self
            .consent_for(account_id, client_id, redirect_uri, resource)
            .await?
        {
            if live.ended(now) {
                self.revoke_consent(account_id, &live.id, now).await?;
            } else {
                let union = scope_union(&live.scope, requested);
                let kept = live.choice();
                let choice = choice.unwrap_or(&kept);
                let widened: Option<String> = sqlx::query_scalar(
                    "UPDATE consents SET scope = $1, updated_at = $2, project_ids = $4, read_only = $5, \
                     expires_at = $6 WHERE id = $3 AND revoked_at IS NULL RETURNING id",
                )
                .bind(&union)
                .bind(now)
                .bind(&live.id)
                .bind(choice.stored_projects())
                .bind(i64::from(choice.read_only))
                .bind(choice.expires_at)
                .fetch_optional(&self.writer())
                .await?;
                self.auth_changed().await;
                if let Some(id) = widened {
                    return Ok(id);
                }
            }
        }
        let fresh = GrantChoice::default();
        let choice = choice.unwrap_or(&fresh);
        let id: String = sqlx::query_scalar(
            "INSERT INTO consents (id, account_id, client_id, redirect_uri, resource, scope, created_at, updated_at, \
             project_ids, read_only, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9, $10) \
             ON CONFLICT (account_id, client_id, redirect_uri, resource) WHERE revoked_at IS NULL DO UPDATE \
             SET scope = excluded.scope, updated_at = excluded.updated_at, project_ids = excluded.project_ids, \
             read_only = excluded.read_only, expires_at = excluded.expires_at \
             RETURNING id",
        )
        .bind(new_id())
        .bind(account_id)
        .bind(client_id)
        .bind(redirect_uri)
        .bind(resource)
        .bind(requested)
        .bind(now)
        .bind(choice.stored_projects())
        .bind(i64::from(choice.read_only))
        .bind(choice.expires_at)
        .fetch_one(&self.writer())
        .await?;
        self.auth_changed().await;
        Ok(id)
    }

    /// Changes the person's choice for one of their live grants from the app's page (issue 37:
    /// narrow or widen without the client authorizing again): projects, reading only, and the
    /// end (computed by the caller from `now`). Within what was approved: read-and-write gives
    /// `mcp:write` back only to tokens that carry it, so nothing goes beyond the consent's
    /// scopes, and a revoked token, family or consent stays revoked (only a live, unended
    /// consent is changed). The change is announced like a revocation (the consent row's
    /// trigger, migration 0012), so every instance's validation cache drops what it held.
    /// `false` when the consent is not the account's, revoked or ended.
    pub async fn set_grant_choice(
        &self,
        account_id: &str,
        consent_id: &str,
        choice: &GrantChoice,
        now: i64,
    ) -> Result<bool, StoreError> {
        let changed = sqlx::query(
            "UPDATE consents SET project_ids = $1, read_only = $2, expires_at = $3, updated_at = $4 \
             WHERE id = $5 AND account_id = $6 AND revoked_at IS NULL \
             AND (expires_at IS NULL OR expires_at > $4)",
        )
        .bind(choice.stored_projects())
        .bind(i64::from(choice.read_only))
        .bind(choice.expires_at)
        .bind(now)
        .bind(consent_id)
        .bind(account_id)
        .execute(&self.writer())
        .await?
        .rows_affected();
        self.auth_changed().await;
        Ok(changed == 1)
    }

    /// Stores an authorization code's bindings.
    pub async fn insert_code(&self, c: &CodeRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO authorization_codes (code_hash, client_id, account_id, consent_id, redirect_uri, \
             code_challenge, resource, scope, issuer, created_at, expires_at, dpop_jkt) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(c.code_hash.as_str())
        .bind(&c.client_id)
        .bind(&c.account_id)
        .bind(&c.consent_id)
        .bind(&c.redirect_uri)
        .bind(&c.code_challenge)
        .bind(&c.resource)
        .bind(&c.scope)
        .bind(&c.issuer)
        .bind(c.created_at)
        .bind(c.expires_at)
        .bind(&c.dpop_jkt)
        .execute(&self.writer())
        .await?;
        Ok(())
    }

    /// The code's bindings, used or not, with when its grant ends.
    pub async fn code(&self, hash: &TokenHash) -> Result<Option<CodeRecord>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT k.code_hash, k.client_id, k.account_id, k.consent_id, k.redirect_uri, k.code_challenge, \
             k.resource, k.scope, k.issuer, k.created_at, k.expires_at, k.used_at, k.dpop_jkt, \
             c.expires_at AS grant_expires_at \
             FROM authorization_codes k LEFT JOIN consents c ON c.id = k.consent_id WHERE k.code_hash = $1",
        )
        .bind(hash.as_str())
        .fetch_optional(&self.pool())
        .await?)
    }

    /// Redeems a code once (OAuth 2.1 §4.1.3): in one transaction, locks the code's consent and
    /// checks that it is live, that its account is active and that it covers the code's and the
    /// new tokens' scopes, marks the code used, and creates its family and first token pair.
    ///
    /// Returns [`Redeemed::Refused`] (writing nothing) when the grant no longer allows it, and
    /// [`Redeemed::Replayed`] for a code already redeemed, whose family it then revokes.
    pub async fn redeem_code(
        &self,
        code: &CodeRecord,
        new: &NewTokens,
        now: i64,
    ) -> Result<Redeemed, StoreError> {
        let family_id = new_id();
        let mut tx = self.begin_write().await?;
        let refusal = grant_refusal(
            &mut tx,
            self.dialect(),
            &code.consent_id,
            &[&code.scope, &new.scope],
            now,
        )
        .await?;
        let won = refusal.is_none()
            && sqlx::query(
                "UPDATE authorization_codes SET used_at = $1, family_id = $2 \
                 WHERE code_hash = $3 AND used_at IS NULL AND expires_at > $1",
            )
            .bind(now)
            .bind(&family_id)
            .bind(code.code_hash.as_str())
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1;
        if won {
            sqlx::query(
                "INSERT INTO token_families (id, account_id, client_id, consent_id, scope, resource, issuer, created_at, jkt, grant_type) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            )
            .bind(&family_id)
            .bind(&code.account_id)
            .bind(&code.client_id)
            .bind(&code.consent_id)
            .bind(&code.scope)
            .bind(&code.resource)
            .bind(&code.issuer)
            .bind(now)
            .bind(&new.refresh_jkt)
            .bind(code.grant_type().as_str())
            .execute(&mut *tx)
            .await?;
            insert_tokens(
                &mut tx,
                &family_id,
                &code.account_id,
                &code.client_id,
                &code.resource,
                new,
                now,
            )
            .await?;
            tx.commit().await?;
            return Ok(Redeemed::Issued { family_id });
        }
        tx.rollback().await?;
        let row: Option<(Option<i64>, Option<String>)> = sqlx::query_as(
            "SELECT used_at, family_id FROM authorization_codes WHERE code_hash = $1",
        )
        .bind(code.code_hash.as_str())
        .fetch_optional(&self.pool())
        .await?;
        let Some((used_at, family)) = row else {
            return Ok(Redeemed::Invalid);
        };
        if let Some(f) = &family {
            // Redeemed before: a replay, whatever became of the grant since.
            self.revoke_family(f, "authorization code replayed", now)
                .await?;
            return Ok(Redeemed::Replayed { family_id: family });
        }
        Ok(match (refusal, used_at) {
            (Some(refusal), _) => Redeemed::Refused(refusal),
            (None, Some(_)) => Redeemed::Replayed { family_id: None },
            (None, None) => Redeemed::Invalid, // expired, never used
        })
    }

    /// Revokes a family and every access token it issued. Returns whether it was live.
    pub async fn revoke_family(
        &self,
        family_id: &str,
        reason: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let changed = sqlx::query(
            "UPDATE token_families SET revoked_at = $1, revoked_reason = $2 WHERE id = $3 AND revoked_at IS NULL",
        )
        .bind(now)
        .bind(reason)
        .bind(family_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        sqlx::query(
            "UPDATE access_tokens SET revoked_at = $1 WHERE family_id = $2 AND revoked_at IS NULL",
        )
        .bind(now)
        .bind(family_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.auth_changed().await;
        Ok(changed == 1)
    }

    /// A refresh token with its family, consent and account, in one query.
    pub async fn refresh_state(
        &self,
        hash: &TokenHash,
    ) -> Result<Option<RefreshState>, StoreError> {
        let row = self
            .hot(&REFRESH_TOKEN, &[Param::Text(hash.as_str())])
            .await?;
        Ok(row.map(|mut state| {
            state.within_approval = within_approval(&state.consent_scope, &state.scope);
            state
        }))
    }

    /// Rotates a refresh token (OAuth 2.1 §4.3.1) with the consent read in `state`: checked
    /// here first (the family's and the new tokens' scopes within `state.consent_scope`), then
    /// the rotation statement of its engine ([`super::rotations`]) marks the token rotated (storing the sealed
    /// successor) while it is unrotated, its family unrevoked, its consent unrevoked with
    /// exactly that scope (read under a lock: `FOR SHARE` on `PostgreSQL`) and its account
    /// active, and only then inserts the successor refresh and access tokens. `PostgreSQL`
    /// runs that as one statement (its own transaction, one round trip); `SQLite` as three
    /// statements in one round trip inside a `BEGIN IMMEDIATE` transaction shared with the
    /// rotations that wait beside it (group commit, [`super::rotations`]).
    ///
    /// Writes nothing unless it returns [`Rotation::Rotated`]. When nothing was written, the
    /// consent is read again to tell [`Rotation::Refused`] (revoked, account disabled, scope
    /// no longer covering) from [`Rotation::Lost`] (rotated by another request first, or the
    /// family revoked); a consent whose scope changed in between but still covers (approved
    /// again) is tried once more with its new scope.
    pub async fn rotate_refresh(
        &self,
        presented: &TokenHash,
        state: &RefreshState,
        successor_sealed: &[u8],
        new: &NewTokens,
        now: i64,
    ) -> Result<Rotation, StoreError> {
        let covers = |granted: &str| approves_all(granted, &[&state.scope, &new.scope]);
        let mut consent_scope = state.consent_scope.clone();
        // A second try only when the consent's scope changed in between (approved again,
        // widened) and still covers: the first try's guard saw another scope string.
        for retry in [false, true] {
            if !covers(&consent_scope) {
                return Ok(Rotation::Refused(GrantRefusal::ScopeExceedsApproval));
            }
            let write = RotationWrite {
                now,
                refresh_hash: new.refresh_hash.as_str().to_string(),
                successor_sealed: successor_sealed.to_vec(),
                presented: presented.as_str().to_string(),
                family_id: state.family_id.clone(),
                account_id: state.account_id.clone(),
                client_id: state.client_id.clone(),
                scope: new.scope.clone(),
                resource: state.resource.clone(),
                access_hash: new.access_hash.as_str().to_string(),
                access_expires_at: new.access_expires_at,
                consent_id: state.consent_id.clone(),
                consent_scope: consent_scope.clone(),
                jkt: new.jkt.clone(),
            };
            let won = self.rotate_in_group(write).await?;
            if won {
                return Ok(Rotation::Rotated);
            }
            let row: Option<ConsentReadRow> = sqlx::query_as(super::consent_read!())
                .bind(&state.consent_id)
                .fetch_optional(&self.pool())
                .await?;
            match live_consent_scope(row, now) {
                Err(refusal) => return Ok(Rotation::Refused(refusal)),
                Ok(granted) if !covers(&granted) => {
                    return Ok(Rotation::Refused(GrantRefusal::ScopeExceedsApproval));
                }
                Ok(granted) if granted != consent_scope && !retry => consent_scope = granted,
                Ok(_) => return Ok(Rotation::Lost),
            }
        }
        Ok(Rotation::Lost)
    }

    /// Authenticates an access token in one round trip: the token must be unrevoked and
    /// unexpired, its family and consent live, its account active, and neither the family's
    /// nor the token's scope may exceed the consent's (RFC 6749 §3.3; `mcp:write` implies
    /// `mcp:read`); a service token limited to one project also needs that project active and
    /// the account still its member. `None` for anything else.
    pub async fn authenticate_access_token(
        &self,
        hash: &TokenHash,
        now: i64,
    ) -> Result<Option<AccessGrant>, StoreError> {
        let row = self
            .hot(
                &ACCESS_TOKEN,
                &[Param::Text(hash.as_str()), Param::Int(now)],
            )
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        Ok(row.live_grant())
    }

    /// [`Store::authenticate_access_token`] for a request with a DPoP proof, in the same one
    /// round trip, never through the validation cache: the grant, and whether the proof whose
    /// replay key is `proof_hash` ([`crate::domain::dpop::VerifiedProof::replay_key`]) was
    /// already recorded by an instance ([`Store::record_dpop_proof`]) and is unexpired.
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn live_access_token_with_proof(
        &self,
        hash: &TokenHash,
        proof_hash: &str,
        now: i64,
    ) -> Result<Option<(AccessGrant, bool)>, StoreError> {
        let row = self
            .hot(
                &ACCESS_TOKEN_WITH_PROOF,
                &[
                    Param::Text(hash.as_str()),
                    Param::Int(now),
                    Param::Text(proof_hash),
                ],
            )
            .await?;
        let Some(ProofAccessRow { access, proof_seen }) = row else {
            return Ok(None);
        };
        Ok(access.live_grant().map(|grant| (grant, proof_seen)))
    }

    /// RFC 7009 revocation of a token presented by `client_id`: a refresh token revokes its
    /// whole family; an access token is revoked alone. Unknown tokens and other clients' tokens
    /// change nothing. Returns the revoked family id, if any.
    pub async fn revoke_token(
        &self,
        hash: &TokenHash,
        client_id: &str,
        now: i64,
    ) -> Result<Option<String>, StoreError> {
        let family: Option<String> = sqlx::query_scalar(
            "SELECT f.id AS id FROM refresh_tokens r JOIN token_families f ON f.id = r.family_id \
             WHERE r.token_hash = $1 AND f.client_id = $2",
        )
        .bind(hash.as_str())
        .bind(client_id)
        .fetch_optional(&self.pool())
        .await?;
        if let Some(f) = &family {
            self.revoke_family(f, "revoked by the client", now).await?;
            return Ok(family);
        }
        sqlx::query(
            "UPDATE access_tokens SET revoked_at = $1 WHERE token_hash = $2 AND client_id = $3 AND revoked_at IS NULL",
        )
        .bind(now)
        .bind(hash.as_str())
        .bind(client_id)
        .execute(&self.writer())
        .await?;
        self.auth_changed().await;
        Ok(None)
    }

    /// The clients an account has granted (live consents), most recent first.
    pub async fn connected_apps(&self, account_id: &str) -> Result<Vec<ConnectedApp>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT c.id AS consent_id, c.client_id AS client_id, k.client_name AS client_name, c.redirect_uri AS redirect_uri, \
             c.scope AS scope, c.resource AS resource, c.updated_at AS updated_at, c.project_ids AS project_ids, \
             c.read_only AS read_only, c.expires_at AS expires_at, c.revoked_at AS revoked_at, \
             c.tool_filter AS tool_filter FROM consents c JOIN oauth_clients k ON k.client_id = c.client_id \
             WHERE c.account_id = $1 AND c.revoked_at IS NULL ORDER BY c.updated_at DESC, c.id",
        )
        .bind(account_id)
        .fetch_all(&self.pool())
        .await?)
    }

    /// One of the account's consents by id, live or revoked (the activity page stays readable
    /// after a revocation): a [`ConnectedApp`]; `None` for another account's or an unknown id.
    pub async fn consent_of_account(
        &self,
        account_id: &str,
        consent_id: &str,
    ) -> Result<Option<ConnectedApp>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT c.id AS consent_id, c.client_id AS client_id, k.client_name AS client_name, c.redirect_uri AS redirect_uri, \
             c.scope AS scope, c.resource AS resource, c.updated_at AS updated_at, c.project_ids AS project_ids, \
             c.read_only AS read_only, c.expires_at AS expires_at, c.revoked_at AS revoked_at, \
             c.tool_filter AS tool_filter FROM consents c JOIN oauth_clients k ON k.client_id = c.client_id \
             WHERE c.account_id = $1 AND c.id = $2",
        )
        .bind(account_id)
        .bind(consent_id)
        .fetch_optional(&self.pool())
        .await?)
    }

    /// Sets the tools the account's live consent `consent_id` lets its app use: the stored form
    /// of [`crate::domain::principal::ToolFilter`], `None` for every tool. It applies to every
    /// token of the grant, on every instance: the update is announced to the validation
    /// caches (migration `0012_auth_generation`'s `consents` triggers) and this method returns
    /// once every instance has dropped what it cached (like a revocation). Returns whether a
    /// live consent of the account was changed (`false`: another account's, unknown or
    /// revoked).
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn set_consent_tool_filter(
        &self,
        account_id: &str,
        consent_id: &str,
        filter: Option<&str>,
    ) -> Result<bool, StoreError> {
        let changed = sqlx::query(
            "UPDATE consents SET tool_filter = $1 WHERE id = $2 AND account_id = $3 AND revoked_at IS NULL",
        )
        .bind(filter)
        .bind(consent_id)
        .bind(account_id)
        .execute(&self.writer())
        .await?
        .rows_affected();
        self.auth_changed().await;
        Ok(changed > 0)
    }

    /// Revokes one of the account's consents and, at once, every family and access token that
    /// came from it, and uses up its unused authorization codes (RFC 7009 §2.1). Returns the
    /// client id when something was revoked (`None` for a consent that is not the account's or
    /// already revoked).
    pub async fn revoke_consent(
        &self,
        account_id: &str,
        consent_id: &str,
        now: i64,
    ) -> Result<Option<String>, StoreError> {
        let mut tx = self.begin_write().await?;
        let client_id: Option<String> = sqlx::query_scalar(
            "UPDATE consents SET revoked_at = $1 WHERE id = $2 AND account_id = $3 AND revoked_at IS NULL \
             RETURNING client_id",
        )
        .bind(now)
        .bind(consent_id)
        .bind(account_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(client_id) = client_id else {
            tx.rollback().await?;
            return Ok(None);
        };
        // Unused codes of this grant are used up: they can never be redeemed.
        sqlx::query(
            "UPDATE authorization_codes SET used_at = $1 WHERE consent_id = $2 AND used_at IS NULL",
        )
        .bind(now)
        .bind(consent_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE access_tokens SET revoked_at = $1 WHERE revoked_at IS NULL AND family_id IN \
             (SELECT id FROM token_families WHERE consent_id = $2)",
        )
        .bind(now)
        .bind(consent_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE token_families SET revoked_at = $1, revoked_reason = 'consent revoked' \
             WHERE consent_id = $2 AND revoked_at IS NULL",
        )
        .bind(now)
        .bind(consent_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.auth_changed().await;
        Ok(Some(client_id))
    }
}

impl Store {
    /// Uses up every unused authorization code of an account (when it is disabled), so none is
    /// redeemed later, even if the account is enabled again. Returns how many were used up.
    pub async fn use_up_codes_of_account(
        &self,
        account_id: &str,
        now: i64,
    ) -> Result<u64, StoreError> {
        Ok(sqlx::query(
            "UPDATE authorization_codes SET used_at = $1 WHERE account_id = $2 AND used_at IS NULL",
        )
        .bind(now)
        .bind(account_id)
        .execute(&self.writer())
        .await?
        .rows_affected())
    }
}

impl Store {
    /// Records (or refreshes) a client known from its metadata document, keyed by its URL.
    pub async fn upsert_metadata_client(&self, c: &ClientRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO oauth_clients (client_id, client_secret_hash, auth_method, client_name, redirect_uris, \
             grant_types, scope, metadata, can_introspect, created_at) VALUES ($1, NULL, $2, $3, $4, $5, NULL, $6, 0, $7) \
             ON CONFLICT (client_id) DO UPDATE SET client_name = excluded.client_name, \
             redirect_uris = excluded.redirect_uris, grant_types = excluded.grant_types, metadata = excluded.metadata, \
             auth_method = excluded.auth_method",
        )
        .bind(&c.client_id)
        .bind(&c.token_endpoint_auth_method)
        .bind(&c.client_name)
        .bind(serde_json::to_string(&c.redirect_uris).unwrap_or_default())
        .bind(serde_json::to_string(&c.grant_types).unwrap_or_default())
        .bind(c.metadata.to_string())
        .bind(c.created_at)
        .execute(&self.writer())
        .await?;
        Ok(())
    }
}

impl Store {
    /// Stores an authorization request shown on the consent page to `account_id`, answerable
    /// until `expires_at` (Unix seconds).
    pub async fn create_authorization_request(
        &self,
        id: &str,
        account_id: &str,
        request_json: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO authorization_requests (id, account_id, request, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(id)
        .bind(account_id)
        .bind(request_json)
        .bind(now)
        .bind(expires_at)
        .execute(&self.writer())
        .await?;
        Ok(())
    }

    /// Takes a pending authorization request once: the one conditional update that marks it
    /// answered. `None` for an unknown, expired, already answered or another account's request.
    pub async fn take_authorization_request(
        &self,
        id: &str,
        account_id: &str,
        now: i64,
    ) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "UPDATE authorization_requests SET used_at = $3 \
             WHERE id = $1 AND account_id = $2 AND used_at IS NULL AND expires_at > $3 RETURNING request",
        )
        .bind(id)
        .bind(account_id)
        .bind(now)
        .fetch_optional(&self.writer())
        .await?)
    }
}

/// A registered client as `gatehouse client list` shows it (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ClientListing {
    /// The `client_id`.
    pub client_id: String,
    /// Its `client_name`, if any.
    pub client_name: Option<String>,
    /// Its `token_endpoint_auth_method` (RFC 7591 §2): `none`, `client_secret_basic`,
    /// `client_secret_post`.
    pub auth_method: String,
    /// Whether it is a service client (`client_credentials`, acting for one account).
    #[sqlx(try_from = "Flag")]
    pub service: bool,
    /// Live consents (grants) given to it.
    pub grants: i64,
    /// Unix seconds.
    pub created_at: i64,
    /// When it was revoked (Unix seconds), if it was.
    pub revoked_at: Option<i64>,
}

/// What [`Store::revoke_client`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientRevocation {
    /// Revoked now, with every grant it held.
    Revoked,
    /// It was revoked before.
    AlreadyRevoked,
    /// No client has this id.
    NotFound,
}

impl Store {
    /// Every registered client, newest first, with its count of live grants.
    pub async fn clients(&self) -> Result<Vec<ClientListing>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT k.client_id AS client_id, k.client_name AS client_name, k.auth_method AS auth_method, \
             EXISTS (SELECT 1 FROM service_clients s WHERE s.client_id = k.client_id) AS service, \
             (SELECT COUNT(*) FROM consents c WHERE c.client_id = k.client_id AND c.revoked_at IS NULL) AS grants, \
             k.created_at AS created_at, k.revoked_at AS revoked_at \
             FROM oauth_clients k ORDER BY k.created_at DESC, k.client_id",
        )
        .fetch_all(&self.pool())
        .await?)
    }

    /// Revokes a client for good, in one transaction: its lookup finds nothing from now on (the
    /// authorization endpoint, the token endpoint and introspection refuse it as unknown), its
    /// consents are revoked, its unused codes used up, and every token family and access token
    /// issued to it revoked (RFC 7009 §2.1: revoking a grant ends its tokens).
    pub async fn revoke_client(
        &self,
        client_id: &str,
        now: i64,
    ) -> Result<ClientRevocation, StoreError> {
        let mut tx = self.begin_write().await?;
        let state: Option<Option<i64>> =
            sqlx::query_scalar("SELECT revoked_at FROM oauth_clients WHERE client_id = $1")
                .bind(client_id)
                .fetch_optional(&mut *tx)
                .await?;
        match state {
            None => {
                tx.rollback().await?;
                return Ok(ClientRevocation::NotFound);
            }
            Some(Some(_)) => {
                tx.rollback().await?;
                return Ok(ClientRevocation::AlreadyRevoked);
            }
            Some(None) => {}
        }
        for sql in [
            "UPDATE oauth_clients SET revoked_at = $2 WHERE client_id = $1",
            "UPDATE consents SET revoked_at = $2 WHERE client_id = $1 AND revoked_at IS NULL",
            "UPDATE authorization_codes SET used_at = $2 WHERE client_id = $1 AND used_at IS NULL",
            "UPDATE access_tokens SET revoked_at = $2 WHERE client_id = $1 AND revoked_at IS NULL",
            "UPDATE token_families SET revoked_at = $2, revoked_reason = 'client revoked' \
             WHERE client_id = $1 AND revoked_at IS NULL",
        ] {
            sqlx::query(sql)
                .bind(client_id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        self.auth_changed().await;
        Ok(ClientRevocation::Revoked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_place_lookups_answer_the_declared_columns() {
        in_place::tests::assert_columns::<ClientRecord>(CLIENT.sql);
        in_place::tests::assert_columns::<RefreshState>(REFRESH_TOKEN.sql);
        in_place::tests::assert_columns::<AccessRow>(ACCESS_TOKEN.sql);
        in_place::tests::assert_columns::<ProofAccessRow>(ACCESS_TOKEN_WITH_PROOF.sql);
    }
}
