//! API keys (product spec "API keys"): created and revoked from the command line, looked up
//! by the SHA-256 of the presented key on every MCP request (one query), their last use
//! written at most once a minute.

use sqlx::FromRow;
use sqlx::any::AnyRow;

use super::hot::{HotLookup, Lookup, Param};
use super::in_place::{self, FromSqliteRow};
use super::{JsonStrings, Store, StoreError, new_id};
use crate::domain::api_key::LAST_USED_INTERVAL_SECS;
use crate::domain::principal::IssuedCredential;
use crate::domain::secret::TokenHash;

/// A key to create.
#[derive(Debug, Clone)]
pub struct NewApiKey<'a> {
    /// The account it acts for.
    pub account_id: &'a str,
    /// The one project it reaches; `None` for an account key.
    pub project_id: Option<&'a str>,
    /// Its name (checked by [`crate::domain::api_key::parse_name`]).
    pub name: &'a str,
    /// `mcp:read` or `mcp:read mcp:write`.
    pub scope: &'a str,
    /// CIDR blocks it may be used from (project keys only); empty: any address.
    pub allowed_ips: &'a [String],
    /// Expiry, Unix seconds; `None`: none.
    pub expires_at: Option<i64>,
}

/// A key as `gatehouse key list` shows it (never the secret).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ApiKeyRecord {
    /// Key id (UUID text): what `gatehouse key revoke` takes.
    pub id: String,
    /// The account it acts for.
    pub account_id: String,
    /// That account's email.
    #[sqlx(rename = "email")]
    pub account_email: String,
    /// The one project it reaches (`None`: an account key).
    pub project_id: Option<String>,
    /// Its name.
    pub name: String,
    /// `mcp:read` or `mcp:read mcp:write`.
    pub scope: String,
    /// CIDR blocks it may be used from; empty: any address.
    #[sqlx(try_from = "JsonStrings")]
    pub allowed_ips: Vec<String>,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds; `None`: no expiry.
    pub expires_at: Option<i64>,
    /// Unix seconds, to within a minute; `None`: never used.
    pub last_used_at: Option<i64>,
    /// Unix seconds; `None`: live.
    pub revoked_at: Option<i64>,
    /// The tools it may use, stored form of [`crate::domain::principal::ToolFilter`]
    /// (`None`: every tool).
    pub tool_filter: Option<String>,
}

/// A live key found by its hash: what authentication needs.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct KeyGrant {
    /// Key id.
    pub id: String,
    /// The account it acts for (active).
    pub account_id: String,
    /// The one project it reaches (active, and the account still a member); `None` for an
    /// account key.
    pub project_id: Option<String>,
    /// `mcp:read` or `mcp:read mcp:write`.
    pub scope: String,
    /// CIDR blocks it may be used from; empty: any address.
    #[sqlx(try_from = "JsonStrings")]
    pub allowed_ips: Vec<String>,
    /// Unix seconds; `None`: never used.
    pub last_used_at: Option<i64>,
    /// The account's own tool-call budget (`accounts.calls_per_hour`; `None`: the server's).
    pub calls_per_hour: Option<i64>,
    /// The tools it may use, stored form of [`crate::domain::principal::ToolFilter`]
    /// (`None`: every tool).
    pub tool_filter: Option<String>,
}

/// A [`KeyGrant`] with the credential's expiry (Unix seconds, `None`: none).
#[derive(Clone, sqlx::FromRow)]
pub(super) struct KeyLookup {
    #[sqlx(flatten)]
    grant: KeyGrant,
    expires_at: Option<i64>,
}

impl FromSqliteRow for KeyLookup {
    const COLUMNS: &'static [&'static str] = &[
        "id",
        "account_id",
        "project_id",
        "scope",
        "allowed_ips",
        "last_used_at",
        "expires_at",
        "calls_per_hour",
        "tool_filter",
    ];

    fn from_sqlite(row: &in_place::Named<'_, '_>) -> rusqlite::Result<Self> {
        let ips = row.index("allowed_ips")?;
        Ok(KeyLookup {
            grant: KeyGrant {
                id: row.get("id")?,
                account_id: row.get("account_id")?,
                project_id: row.get("project_id")?,
                scope: row.get("scope")?,
                allowed_ips: Vec::try_from(JsonStrings(row.get_at(ips)?))
                    .map_err(|e| in_place::conversion(ips, e))?,
                last_used_at: row.get("last_used_at")?,
                calls_per_hour: row.get("calls_per_hour")?,
                tool_filter: row.get("tool_filter")?,
            },
            expires_at: row.get("expires_at")?,
        })
    }
}

/// What [`Store::record_key_use`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyUse {
    /// The key had never been used: this is its first use (audited once, by whichever
    /// request or instance wrote it).
    First,
    /// `last_used_at` was moved forward.
    Updated,
    /// Nothing to write: another request wrote it less than a minute ago, or the key is gone.
    Unchanged,
}

/// Where each [`IssuedCredential`] is stored: API keys and personal URLs are one
/// implementation over two tables (fixed names, never input).
pub(super) trait Credentials: Copy {
    /// The table: `api_keys`, `personal_urls`.
    fn name(self) -> &'static str;
    /// The name in errors.
    fn what(self) -> &'static str;
    /// The column holding the SHA-256 of the secret.
    fn hash_column(self) -> &'static str;
    /// The expression read as `allowed_ips` (table alias `c`): personal URLs have no
    /// address allow-list.
    fn allowed_ips(self) -> &'static str;
    /// The hot lookup of a live credential of this table by its hash.
    fn lookup(self) -> &'static Lookup<KeyLookup, Option<KeyLookup>>;
}

impl Credentials for IssuedCredential {
    fn name(self) -> &'static str {
        match self {
            IssuedCredential::ApiKey => "api_keys",
            IssuedCredential::PersonalUrl => "personal_urls",
        }
    }

    fn what(self) -> &'static str {
        match self {
            IssuedCredential::ApiKey => "api key",
            IssuedCredential::PersonalUrl => "personal url",
        }
    }

    fn hash_column(self) -> &'static str {
        match self {
            IssuedCredential::ApiKey => "key_hash",
            IssuedCredential::PersonalUrl => "url_hash",
        }
    }

    fn allowed_ips(self) -> &'static str {
        match self {
            IssuedCredential::ApiKey => "c.allowed_ips",
            IssuedCredential::PersonalUrl => "NULL",
        }
    }

    fn lookup(self) -> &'static Lookup<KeyLookup, Option<KeyLookup>> {
        match self {
            IssuedCredential::ApiKey => &API_KEY,
            IssuedCredential::PersonalUrl => &PERSONAL_URL,
        }
    }
}

/// The lookup of a live credential in `$table` by the hash `$1` in `$hash_column` at Unix
/// time `$2` (a [`KeyLookup`]; `$allowed_ips` the expression read as `allowed_ips`), a literal.
macro_rules! key_lookup {
    ($table:literal, $hash_column:literal, $allowed_ips:literal) => {
        concat!(
            "SELECT c.id AS id, c.account_id AS account_id, c.project_id AS project_id, \
             c.scope AS scope, ",
            $allowed_ips,
            " AS allowed_ips, c.last_used_at AS last_used_at, \
             c.expires_at AS expires_at, a.calls_per_hour AS calls_per_hour, \
             c.tool_filter AS tool_filter \
             FROM ",
            $table,
            " c \
             JOIN accounts a ON a.id = c.account_id \
             LEFT JOIN projects p ON p.id = c.project_id \
             LEFT JOIN memberships m ON m.project_id = c.project_id AND m.account_id = c.account_id \
             WHERE c.",
            $hash_column,
            " = $1 AND c.revoked_at IS NULL \
             AND (c.expires_at IS NULL OR c.expires_at > $2) AND a.status = 'active' \
             AND (c.project_id IS NULL OR (p.status = 'active' AND m.account_id IS NOT NULL))"
        )
    };
}

/// The live API key whose hash is `$1` at `$2` (Unix seconds): a [`KeyLookup`].
const API_KEY: Lookup<KeyLookup, Option<KeyLookup>> = Lookup::new(
    HotLookup::ApiKey,
    key_lookup!("api_keys", "key_hash", "c.allowed_ips"),
);

/// The live personal MCP URL whose hash is `$1` at `$2` (Unix seconds): a [`KeyLookup`]
/// (personal URLs have no address allow-list).
const PERSONAL_URL: Lookup<KeyLookup, Option<KeyLookup>> = Lookup::new(
    HotLookup::PersonalUrl,
    key_lookup!("personal_urls", "url_hash", "NULL"),
);

/// The SQL of the lookup of a live credential of `table` ([`Credentials::lookup`]).
#[cfg(test)]
pub(super) fn key_lookup_sql(table: IssuedCredential) -> &'static str {
    table.lookup().sql
}

/// Which credentials [`Store::credential_rows`] reads.
#[derive(Debug, Clone, Copy)]
pub(super) enum Pick<'a> {
    /// Every one, or one account's (`Some`).
    Account(Option<&'a str>),
    /// The one with this id.
    Id(&'a str),
}

impl Store {
    /// Stores a new key under `hash` (the SHA-256 of the key, which is not kept). Returns its id.
    pub async fn create_api_key(
        &self,
        key: &NewApiKey<'_>,
        hash: &TokenHash,
        now: i64,
    ) -> Result<String, StoreError> {
        self.insert_credential(IssuedCredential::ApiKey, key, hash, now)
            .await
    }

    /// Stores a new credential of `table` under `hash` and returns its id. A personal URL has
    /// no address allow-list: `new.allowed_ips` is then empty and not written.
    pub(super) async fn insert_credential(
        &self,
        table: IssuedCredential,
        new: &NewApiKey<'_>,
        hash: &TokenHash,
        now: i64,
    ) -> Result<String, StoreError> {
        let id = new_id();
        let (name, hash_column) = (table.name(), table.hash_column());
        let (allowed_column, allowed_value) = match table {
            IssuedCredential::ApiKey => (", allowed_ips", ", $9"),
            IssuedCredential::PersonalUrl => ("", ""),
        };
        let sql = format!(
            "INSERT INTO {name} (id, {hash_column}, account_id, project_id, name, scope, created_at, expires_at{allowed_column}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8{allowed_value})"
        );
        let query = sqlx::query(&sql)
            .bind(&id)
            .bind(hash.as_str())
            .bind(new.account_id)
            .bind(new.project_id)
            .bind(new.name)
            .bind(new.scope)
            .bind(now)
            .bind(new.expires_at);
        let query = match table {
            IssuedCredential::ApiKey if !new.allowed_ips.is_empty() => query.bind(Some(
                serde_json::Value::from(new.allowed_ips.to_vec()).to_string(),
            )),
            IssuedCredential::ApiKey => query.bind(None::<String>),
            IssuedCredential::PersonalUrl => query,
        };
        query
            .execute(&self.writer())
            .await
            .map_err(|e| StoreError::from_insert(e, table.what()))?;
        Ok(id)
    }

    /// Sets the tools the API key (`personal_url` false) or personal URL `id` may use: the
    /// stored form of [`crate::domain::principal::ToolFilter`], `None` for every tool.
    ///
    /// Errors: [`StoreError::NotFound`] for an unknown id.
    pub async fn set_credential_tool_filter(
        &self,
        personal_url: bool,
        id: &str,
        filter: Option<&str>,
    ) -> Result<(), StoreError> {
        let table = if personal_url {
            IssuedCredential::PersonalUrl
        } else {
            IssuedCredential::ApiKey
        };
        let sql = format!("UPDATE {} SET tool_filter = $2 WHERE id = $1", table.name());
        let changed = sqlx::query(&sql)
            .bind(id)
            .bind(filter)
            .execute(&self.writer())
            .await?
            .rows_affected();
        if changed == 0 {
            return Err(StoreError::NotFound(format!("{} {id}", table.what())));
        }
        Ok(())
    }

    /// How many live (neither revoked nor expired at `now`) API keys (`personal_urls`
    /// false) or personal URLs (true) `account_id` holds.
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn live_credentials(
        &self,
        personal_urls: bool,
        account_id: &str,
        now: i64,
    ) -> Result<i64, StoreError> {
        let table = if personal_urls {
            IssuedCredential::PersonalUrl
        } else {
            IssuedCredential::ApiKey
        };
        Ok(sqlx::query_scalar(&format!(
            "SELECT COUNT(*) FROM {} WHERE account_id = $1 AND revoked_at IS NULL \
             AND (expires_at IS NULL OR expires_at > $2)",
            table.name()
        ))
        .bind(account_id)
        .bind(now)
        .fetch_one(&self.pool())
        .await?)
    }

    /// Every key, or those of one account, oldest first.
    pub async fn api_keys(
        &self,
        account_id: Option<&str>,
    ) -> Result<Vec<ApiKeyRecord>, StoreError> {
        self.credentials(IssuedCredential::ApiKey, Pick::Account(account_id))
            .await
    }

    /// One key by id.
    pub async fn api_key(&self, id: &str) -> Result<Option<ApiKeyRecord>, StoreError> {
        Ok(self
            .credentials(IssuedCredential::ApiKey, Pick::Id(id))
            .await?
            .pop())
    }

    /// Revokes a key at once (the next request with it gets 401). Returns `false` if it was
    /// already revoked.
    ///
    /// Errors: [`StoreError::NotFound`] for an unknown id.
    pub async fn revoke_api_key(&self, id: &str, now: i64) -> Result<bool, StoreError> {
        self.revoke_credential(IssuedCredential::ApiKey, id, now)
            .await
    }

    /// The records of `table` (with the account's email) that `pick` names, oldest first.
    pub(super) async fn credentials<R>(
        &self,
        table: IssuedCredential,
        pick: Pick<'_>,
    ) -> Result<Vec<R>, StoreError>
    where
        R: for<'r> FromRow<'r, AnyRow> + Send + Unpin,
    {
        let (name, allowed_ips) = (table.name(), table.allowed_ips());
        let filter = match pick {
            Pick::Account(_) => "c.account_id = COALESCE($1, c.account_id)",
            Pick::Id(_) => "c.id = $1",
        };
        let bound = match pick {
            Pick::Account(account) => account,
            Pick::Id(id) => Some(id),
        };
        Ok(sqlx::query_as(&format!(
            "SELECT c.id AS id, c.account_id AS account_id, a.email AS email, \
             c.project_id AS project_id, c.name AS name, c.scope AS scope, \
             {allowed_ips} AS allowed_ips, c.created_at AS created_at, \
             c.expires_at AS expires_at, c.last_used_at AS last_used_at, \
             c.revoked_at AS revoked_at, c.tool_filter AS tool_filter \
             FROM {name} c JOIN accounts a ON a.id = c.account_id \
             WHERE {filter} ORDER BY c.created_at, c.id"
        ))
        .bind(bound)
        .fetch_all(&self.pool())
        .await?)
    }

    /// Sets `revoked_at` of credential `id` of `table` unless already set. `false`: it was.
    ///
    /// Errors: [`StoreError::NotFound`] for an unknown id.
    pub(super) async fn revoke_credential(
        &self,
        table: IssuedCredential,
        id: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        let name = table.name();
        let done = sqlx::query(&format!(
            "UPDATE {name} SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL"
        ))
        .bind(id)
        .bind(now)
        .execute(&self.writer())
        .await?
        .rows_affected();
        self.auth_changed().await;
        if done == 1 {
            return Ok(true);
        }
        let exists = sqlx::query(&format!("SELECT id FROM {name} WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool())
            .await?;
        match exists {
            Some(_) => Ok(false),
            None => Err(StoreError::NotFound(format!("{} {id}", table.what()))),
        }
    }

    /// The live key whose SHA-256 is `hash`, in one query: not revoked, not expired at `now`,
    /// of an active account, and for a project key, of an active project the account is still a
    /// member of. `None` otherwise (callers answer all of these alike).
    pub async fn authenticate_api_key(
        &self,
        hash: &TokenHash,
        now: i64,
    ) -> Result<Option<KeyGrant>, StoreError> {
        Ok(self
            .api_key_lookup(hash, now)
            .await?
            .map(|(grant, _)| grant))
    }

    /// [`Store::authenticate_api_key`] with the key's expiry (Unix seconds, `None`: none).
    pub(crate) async fn api_key_lookup(
        &self,
        hash: &TokenHash,
        now: i64,
    ) -> Result<Option<(KeyGrant, Option<i64>)>, StoreError> {
        self.credential_lookup(IssuedCredential::ApiKey, hash, now)
            .await
    }

    /// The live credential of `table` whose secret's SHA-256 is `hash`, with its expiry, in
    /// one query (see [`Store::authenticate_api_key`] for what live means).
    pub(super) async fn credential_lookup(
        &self,
        table: IssuedCredential,
        hash: &TokenHash,
        now: i64,
    ) -> Result<Option<(KeyGrant, Option<i64>)>, StoreError> {
        let row = self
            .hot(
                table.lookup(),
                &[Param::Text(hash.as_str()), Param::Int(now)],
            )
            .await?;
        Ok(row.map(|r| (r.grant, r.expires_at)))
    }

    /// Writes a use of key `id` at `now`, conditionally so that any number of requests and
    /// instances write it at most once a minute: `first` (the key was read as never used)
    /// sets it only while still unset, which exactly one writer wins; otherwise it moves
    /// only if the stored value is at least a minute old.
    pub async fn record_key_use(
        &self,
        id: &str,
        first: bool,
        now: i64,
    ) -> Result<KeyUse, StoreError> {
        self.record_use(IssuedCredential::ApiKey, id, first, now)
            .await
    }

    /// [`Store::record_key_use`] for the credentials of `table`.
    pub(super) async fn record_use(
        &self,
        table: IssuedCredential,
        id: &str,
        first: bool,
        now: i64,
    ) -> Result<KeyUse, StoreError> {
        let table = table.name();
        if first {
            let won = sqlx::query(&format!(
                "UPDATE {table} SET last_used_at = $2 WHERE id = $1 AND last_used_at IS NULL"
            ))
            .bind(id)
            .bind(now)
            .execute(&self.writer())
            .await?
            .rows_affected();
            if won == 1 {
                return Ok(KeyUse::First);
            }
        }
        let moved = sqlx::query(&format!(
            "UPDATE {table} SET last_used_at = $2 WHERE id = $1 AND last_used_at <= $3"
        ))
        .bind(id)
        .bind(now)
        .bind(now - LAST_USED_INTERVAL_SECS)
        .execute(&self.writer())
        .await?
        .rows_affected();
        Ok(if moved == 1 {
            KeyUse::Updated
        } else {
            KeyUse::Unchanged
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_place_lookups_answer_the_declared_columns() {
        for table in [IssuedCredential::ApiKey, IssuedCredential::PersonalUrl] {
            in_place::tests::assert_columns::<KeyLookup>(key_lookup_sql(table));
        }
    }
}
