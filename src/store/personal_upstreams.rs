//! A person's own upstream servers (issue "Connections", item 5; seed 001's per-account
//! registry): rows of `upstreams` with an `owner_account` (migration 0061). They share the
//! operator's pinned definitions (`upstream_tools`) and the registry's version: every change
//! here raises it in the same transaction, so every instance reloads within a second and
//! drops what it cached of the changed upstream.
//!
//! Every function takes the owner and touches only that owner's rows: another person's
//! upstream answers [`StoreError::NotFound`] like one that does not exist.

use sqlx::Row;

use super::upstreams::{NewUpstream, UPSTREAM_COLUMNS, UpstreamRecord, bump_version, upstream_of};
use super::{Store, StoreError};

/// One tool definition seen on an upstream, with the one approved (if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolDefinition {
    /// The upstream's own name for the tool.
    pub tool: String,
    /// The definition last seen (JSON text).
    pub definition: String,
    /// Its SHA-256 hex.
    pub hash: String,
    /// The definition approved (JSON text), if any.
    pub approved_definition: Option<String>,
    /// Its SHA-256 hex.
    pub approved_hash: Option<String>,
}

impl ToolDefinition {
    /// Whether the definition seen waits for approval (new, or changed since approved).
    pub fn is_pending(&self) -> bool {
        self.approved_hash.as_deref() != Some(self.hash.as_str())
    }
}

fn not_found(name: &str) -> StoreError {
    StoreError::NotFound(format!("upstream {name}"))
}

/// Whether `name` is `owner`'s own upstream, inside `tx`.
async fn owned(tx: &mut sqlx::AnyConnection, owner: &str, name: &str) -> Result<bool, StoreError> {
    Ok(
        sqlx::query("SELECT 1 AS one FROM upstreams WHERE name = $1 AND owner_account = $2")
            .bind(name)
            .bind(owner)
            .fetch_optional(tx)
            .await?
            .is_some(),
    )
}

impl Store {
    /// Adds `new` (its `accounts` must name `owner` alone) as `owner`'s own upstream called
    /// `label`, enabled, last in their order; raises the registry's version. At most `max` per
    /// person.
    ///
    /// Errors: [`StoreError::Conflict`] when the name or the label is taken (the label names
    /// the conflict: `label LABEL`), or `owner` already has `max`
    /// ([`StoreError::Conflict`] `limit`).
    pub async fn create_personal_upstream(
        &self,
        new: &NewUpstream,
        owner: &str,
        label: &str,
        max: usize,
        now: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        let row = sqlx::query(
            "SELECT COUNT(*) AS n, COALESCE(MAX(position), 0) AS last, \
             SUM(CASE WHEN label = $2 THEN 1 ELSE 0 END) AS same \
             FROM upstreams WHERE owner_account = $1",
        )
        .bind(owner)
        .bind(label)
        .fetch_one(&mut *tx)
        .await?;
        let count: i64 = row.try_get("n")?;
        let last: i64 = row.try_get("last")?;
        let same: Option<i64> = row.try_get("same")?;
        if same.unwrap_or(0) > 0 {
            return Err(StoreError::Conflict(format!("label {label}")));
        }
        if usize::try_from(count).unwrap_or(usize::MAX) >= max {
            return Err(StoreError::Conflict("limit".to_string()));
        }
        sqlx::query(
            "INSERT INTO upstreams (name, transport, url, header_names, headers_sealed, env_names, \
             timeout_ms, max_concurrency, trust_definitions, enabled, accounts, created_at, updated_at, \
             owner_account, label, position) \
             VALUES ($1, 'http', $2, $3, $4, '[]', $5, $6, 0, 1, $7, $8, $8, $9, $10, $11)",
        )
        .bind(&new.name)
        .bind(new.url.as_deref())
        .bind(serde_json::Value::from(new.header_names.clone()).to_string())
        .bind(new.headers_sealed.as_deref())
        .bind(new.timeout_ms)
        .bind(new.max_concurrency)
        .bind(serde_json::Value::from(vec![owner.to_string()]).to_string())
        .bind(now)
        .bind(owner)
        .bind(label)
        .bind(last + 1)
        .execute(&mut *tx)
        .await
        .map_err(|e| StoreError::from_insert(e, &format!("upstream {}", new.name)))?;
        bump_version(&mut tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// `owner`'s own upstreams in their order.
    pub async fn personal_upstreams(&self, owner: &str) -> Result<Vec<UpstreamRecord>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {UPSTREAM_COLUMNS} FROM upstreams u WHERE u.owner_account = $1 \
             ORDER BY u.position, u.name"
        ))
        .bind(owner)
        .fetch_all(&self.pool())
        .await?;
        Ok(rows.iter().map(upstream_of).collect::<Result<_, _>>()?)
    }

    /// The definitions seen on upstream `name`, by tool name.
    pub async fn upstream_tool_definitions(
        &self,
        name: &str,
    ) -> Result<Vec<ToolDefinition>, StoreError> {
        let rows = sqlx::query(
            "SELECT tool, definition, hash, approved_definition, approved_hash \
             FROM upstream_tools WHERE upstream = $1 ORDER BY tool",
        )
        .bind(name)
        .fetch_all(&self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ToolDefinition {
                    tool: r.try_get("tool")?,
                    definition: r.try_get("definition")?,
                    hash: r.try_get("hash")?,
                    approved_definition: r.try_get("approved_definition")?,
                    approved_hash: r.try_get("approved_hash")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    /// Approves the definitions of `owner`'s upstream `name` whose current hash is one of
    /// `hashes` (what the person was shown: a definition that changed since is not approved);
    /// raises the registry's version when any was. Returns how many were approved.
    ///
    /// Errors: [`StoreError::NotFound`] when `name` is not `owner`'s.
    pub async fn approve_personal_upstream_tools(
        &self,
        owner: &str,
        name: &str,
        hashes: &[(String, String)],
        now: i64,
    ) -> Result<u64, StoreError> {
        let mut tx = self.begin_write().await?;
        if !owned(&mut tx, owner, name).await? {
            return Err(not_found(name));
        }
        let mut approved = 0;
        for (tool, hash) in hashes {
            approved += sqlx::query(
                "UPDATE upstream_tools SET approved_definition = definition, approved_hash = hash, changed_at = $4 \
                 WHERE upstream = $1 AND tool = $2 AND hash = $3 \
                 AND (approved_hash IS NULL OR approved_hash <> hash)",
            )
            .bind(name)
            .bind(tool)
            .bind(hash)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        if approved > 0 {
            bump_version(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(approved)
    }

    /// Serves (`true`) or stops serving `owner`'s upstream `name`; raises the registry's
    /// version when it changed.
    ///
    /// Errors: [`StoreError::NotFound`] when `name` is not `owner`'s.
    pub async fn set_personal_upstream_enabled(
        &self,
        owner: &str,
        name: &str,
        enabled: bool,
        now: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        if !owned(&mut tx, owner, name).await? {
            return Err(not_found(name));
        }
        let changed = sqlx::query(
            "UPDATE upstreams SET enabled = $2, updated_at = $3 WHERE name = $1 AND enabled <> $2",
        )
        .bind(name)
        .bind(i64::from(enabled))
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if changed > 0 {
            bump_version(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Moves `owner`'s upstream `name` one place earlier (`up`) or later in their order
    /// (swapping with its neighbour; nothing at either end); raises the registry's version when
    /// it moved.
    ///
    /// Errors: [`StoreError::NotFound`] when `name` is not `owner`'s.
    pub async fn move_personal_upstream(
        &self,
        owner: &str,
        name: &str,
        up: bool,
        now: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        let rows = sqlx::query(
            "SELECT name FROM upstreams WHERE owner_account = $1 ORDER BY position, name",
        )
        .bind(owner)
        .fetch_all(&mut *tx)
        .await?;
        let names: Vec<String> = rows
            .iter()
            .map(|r| r.try_get("name"))
            .collect::<Result<_, _>>()?;
        let Some(at) = names.iter().position(|n| n == name) else {
            return Err(not_found(name));
        };
        let other = if up {
            at.checked_sub(1)
        } else {
            Some(at + 1).filter(|o| *o < names.len())
        };
        let Some(other) = other else {
            return Ok(());
        };
        let mut order = names;
        order.swap(at, other);
        for (i, n) in order.iter().enumerate() {
            sqlx::query("UPDATE upstreams SET position = $2, updated_at = $3 WHERE name = $1")
                .bind(n)
                .bind(i64::try_from(i).unwrap_or(i64::MAX) + 1)
                .bind(now)
                .execute(&mut *tx)
                .await?;
        }
        bump_version(&mut tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Removes `owner`'s upstream `name` and every definition seen on it; raises the
    /// registry's version.
    ///
    /// Errors: [`StoreError::NotFound`] when `name` is not `owner`'s.
    pub async fn remove_personal_upstream(
        &self,
        owner: &str,
        name: &str,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        if !owned(&mut tx, owner, name).await? {
            return Err(not_found(name));
        }
        sqlx::query("DELETE FROM upstream_tools WHERE upstream = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM upstreams WHERE name = $1 AND owner_account = $2")
            .bind(name)
            .bind(owner)
            .execute(&mut *tx)
            .await?;
        bump_version(&mut tx).await?;
        tx.commit().await?;
        Ok(())
    }
}
