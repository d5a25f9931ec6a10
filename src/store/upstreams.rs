//! The registry of upstream MCP servers (`upstreams`), the tool definitions seen on each
//! (`upstream_tools`, with the one approved), and the registry's version counter
//! (`upstream_registry`): every change here raises it in the same transaction, and running
//! instances poll it ([`Store::upstream_registry_version`]) to reload the registry.
//!
//! Header and environment values arrive sealed with the server key
//! ([`crate::domain::server_key`]); this layer stores and returns them as opaque text.

use sqlx::Row;

use super::{Store, StoreError};

/// How an upstream is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// MCP Streamable HTTP at a URL.
    Http,
    /// A local child process spoken to over stdin/stdout.
    Stdio,
}

impl Transport {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Stdio => "stdio",
        }
    }

    fn parse(text: &str) -> Transport {
        if text == "stdio" {
            Transport::Stdio
        } else {
            Transport::Http
        }
    }
}

/// An upstream as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamRecord {
    /// `[a-z0-9-]{1,20}`.
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// HTTP: its MCP endpoint.
    pub url: Option<String>,
    /// HTTP: the names of its configured headers (lowercase).
    pub header_names: Vec<String>,
    /// HTTP: the header values, sealed ([`crate::domain::upstream::seal_context`] `headers`).
    pub headers_sealed: Option<String>,
    /// Stdio: the program and its arguments.
    pub command: Vec<String>,
    /// Stdio: the names of its `--env` variables.
    pub env_names: Vec<String>,
    /// Stdio: the variables' values, sealed (context `env`).
    pub env_sealed: Option<String>,
    /// Per-call timeout in milliseconds.
    pub timeout_ms: i64,
    /// Calls in flight per instance.
    pub max_concurrency: i64,
    /// Definitions are listed without approval (development).
    pub trust_definitions: bool,
    /// Whether it is served.
    pub enabled: bool,
    /// The account ids that may use it; `None`: every account.
    pub accounts: Option<Vec<String>>,
    /// The project ids whose members may use it; `None`: no project condition.
    pub projects: Option<Vec<String>>,
    /// The last failure seen (no secrets) and since when (Unix seconds): when an instance
    /// first recorded this text, so the start of a run of the same failure.
    pub last_error: Option<(String, i64)>,
    /// Tools seen on it.
    pub tools_seen: i64,
    /// Tools whose definition seen is the one approved.
    pub tools_approved: i64,
    /// Created (Unix seconds).
    pub created_at: i64,
    /// Each person connects their own account (`--per-person-oauth`; the client settings are
    /// in [`crate::store::vault`]).
    pub per_person: bool,
    /// A person's own upstream ([`crate::store::personal_upstreams`]): the account it belongs
    /// to; `None` for the operator's.
    pub owner: Option<String>,
    /// A person's own upstream: the label they gave it.
    pub label: Option<String>,
    /// A person's own upstream: its place in their order (smallest first).
    pub position: i64,
}

impl UpstreamRecord {
    /// Tools waiting for approval: new, or changed since they were approved.
    pub fn tools_pending(&self) -> i64 {
        self.tools_seen - self.tools_approved
    }

    /// Where it is reached, as `upstream list` and the console show it: its URL, or its
    /// command quoted so that it reads back to the same words
    /// ([`crate::domain::upstream::command_line`]).
    pub fn target(&self) -> String {
        match self.transport {
            Transport::Http => self.url.clone().unwrap_or_default(),
            Transport::Stdio => crate::domain::upstream::command_line(&self.command),
        }
    }
}

/// A tool definition waiting for the operator's approval: new, or changed since approved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingTool {
    /// The upstream's own name for the tool (without `NAME__`).
    pub tool: String,
    /// The definition last seen (JSON text, as the upstream listed it).
    pub definition: String,
    /// Its SHA-256 (hex).
    pub hash: String,
    /// The definition approved before (JSON text); `None`: a new tool.
    pub approved_definition: Option<String>,
}

/// What `gatehouse upstream add` stores.
#[derive(Debug, Clone)]
pub struct NewUpstream {
    /// The name (already checked).
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// HTTP: the URL (already checked).
    pub url: Option<String>,
    /// HTTP: header names.
    pub header_names: Vec<String>,
    /// HTTP: header values, sealed.
    pub headers_sealed: Option<String>,
    /// Stdio: program and arguments.
    pub command: Vec<String>,
    /// Stdio: variable names.
    pub env_names: Vec<String>,
    /// Stdio: variable values, sealed.
    pub env_sealed: Option<String>,
    /// Per-call timeout in milliseconds.
    pub timeout_ms: i64,
    /// Calls in flight per instance.
    pub max_concurrency: i64,
    /// List definitions without approval.
    pub trust_definitions: bool,
    /// Account ids that may use it; `None`: everyone.
    pub accounts: Option<Vec<String>>,
    /// Project ids whose members may use it; `None`: no condition.
    pub projects: Option<Vec<String>>,
}

fn to_json(list: &[String]) -> String {
    serde_json::Value::from(list.to_vec()).to_string()
}

fn from_json(text: Option<String>) -> Option<Vec<String>> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

pub(super) const UPSTREAM_COLUMNS: &str = "u.name, u.transport, u.url, u.header_names, u.headers_sealed, u.command, \
     u.env_names, u.env_sealed, u.timeout_ms, u.max_concurrency, u.trust_definitions, u.enabled, \
     u.accounts, u.projects, u.last_error, u.last_error_at, u.created_at, \
     (SELECT COUNT(*) FROM upstream_tools t WHERE t.upstream = u.name) AS tools_seen, \
     (SELECT COUNT(*) FROM upstream_tools t WHERE t.upstream = u.name AND t.approved_hash = t.hash) AS tools_approved, \
     (SELECT COUNT(*) FROM upstream_oauth o WHERE o.upstream = u.name) AS per_person, \
     u.owner_account, u.label, u.position";

pub(super) fn upstream_of(row: &sqlx::any::AnyRow) -> Result<UpstreamRecord, sqlx::Error> {
    let last_error: Option<String> = row.try_get("last_error")?;
    let last_error_at: Option<i64> = row.try_get("last_error_at")?;
    Ok(UpstreamRecord {
        name: row.try_get("name")?,
        transport: Transport::parse(&row.try_get::<String, _>("transport")?),
        url: row.try_get("url")?,
        header_names: from_json(row.try_get("header_names")?).unwrap_or_default(),
        headers_sealed: row.try_get("headers_sealed")?,
        command: from_json(row.try_get("command")?).unwrap_or_default(),
        env_names: from_json(row.try_get("env_names")?).unwrap_or_default(),
        env_sealed: row.try_get("env_sealed")?,
        timeout_ms: row.try_get("timeout_ms")?,
        max_concurrency: row.try_get("max_concurrency")?,
        trust_definitions: row.try_get::<i64, _>("trust_definitions")? != 0,
        enabled: row.try_get::<i64, _>("enabled")? != 0,
        accounts: from_json(row.try_get("accounts")?),
        projects: from_json(row.try_get("projects")?),
        last_error: last_error.zip(last_error_at),
        tools_seen: row.try_get("tools_seen")?,
        tools_approved: row.try_get("tools_approved")?,
        created_at: row.try_get("created_at")?,
        per_person: row.try_get::<i64, _>("per_person")? != 0,
        owner: row.try_get("owner_account")?,
        label: row.try_get("label")?,
        position: row.try_get("position")?,
    })
}

/// Raises the registry's version inside `tx`.
pub(super) async fn bump_version(tx: &mut sqlx::AnyConnection) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE upstream_registry SET version = version + 1 WHERE id = 1")
        .execute(tx)
        .await?;
    Ok(())
}

impl Store {
    /// Adds an upstream (enabled) and raises the registry's version.
    ///
    /// Errors: [`StoreError::Conflict`] when the name is taken.
    pub async fn create_upstream(&self, new: &NewUpstream, now: i64) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO upstreams (name, transport, url, header_names, headers_sealed, command, env_names, \
             env_sealed, timeout_ms, max_concurrency, trust_definitions, enabled, accounts, projects, \
             created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 1, $12, $13, $14, $14)",
        )
        .bind(&new.name)
        .bind(new.transport.as_str())
        .bind(new.url.as_deref())
        .bind(to_json(&new.header_names))
        .bind(new.headers_sealed.as_deref())
        .bind((!new.command.is_empty()).then(|| to_json(&new.command)))
        .bind(to_json(&new.env_names))
        .bind(new.env_sealed.as_deref())
        .bind(new.timeout_ms)
        .bind(new.max_concurrency)
        .bind(i64::from(new.trust_definitions))
        .bind(new.accounts.as_deref().map(to_json))
        .bind(new.projects.as_deref().map(to_json))
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(|e| StoreError::from_insert(e, &format!("upstream {}", new.name)))?;
        bump_version(&mut tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Every upstream with its tool counts: the operator's by name, then people's own by
    /// owner, their order and name.
    pub async fn upstreams(&self) -> Result<Vec<UpstreamRecord>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {UPSTREAM_COLUMNS} FROM upstreams u \
             ORDER BY CASE WHEN u.owner_account IS NULL THEN 0 ELSE 1 END, u.owner_account, u.position, u.name"
        ))
        .fetch_all(&self.pool())
        .await?;
        Ok(rows.iter().map(upstream_of).collect::<Result<_, _>>()?)
    }

    /// One upstream by name.
    pub async fn upstream(&self, name: &str) -> Result<Option<UpstreamRecord>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {UPSTREAM_COLUMNS} FROM upstreams u WHERE u.name = $1"
        ))
        .bind(name)
        .fetch_optional(&self.pool())
        .await?;
        Ok(row.as_ref().map(upstream_of).transpose()?)
    }

    /// Serves (`true`) or stops serving an upstream; raises the registry's version. Returns
    /// whether it changed.
    ///
    /// Errors: [`StoreError::NotFound`] for an unknown name.
    pub async fn set_upstream_enabled(
        &self,
        name: &str,
        enabled: bool,
        now: i64,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let exists = sqlx::query("SELECT enabled FROM upstreams WHERE name = $1")
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?
            .map(|row| row.try_get::<i64, _>("enabled"))
            .transpose()?;
        let Some(was) = exists else {
            return Err(StoreError::NotFound(format!("upstream {name}")));
        };
        if (was != 0) == enabled {
            return Ok(false);
        }
        sqlx::query("UPDATE upstreams SET enabled = $2, updated_at = $3 WHERE name = $1")
            .bind(name)
            .bind(i64::from(enabled))
            .bind(now)
            .execute(&mut *tx)
            .await?;
        bump_version(&mut tx).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Removes an upstream and every definition seen on it; raises the registry's version.
    ///
    /// Errors: [`StoreError::NotFound`] for an unknown name.
    pub async fn remove_upstream(&self, name: &str) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM upstream_tools WHERE upstream = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        let removed = sqlx::query("DELETE FROM upstreams WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if removed == 0 {
            return Err(StoreError::NotFound(format!("upstream {name}")));
        }
        bump_version(&mut tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Approves every definition of the upstream's tools as last seen (new or changed ones);
    /// raises the registry's version when any was waiting. Returns how many were approved.
    ///
    /// Errors: [`StoreError::NotFound`] for an unknown name.
    pub async fn approve_upstream_tools(&self, name: &str, now: i64) -> Result<u64, StoreError> {
        let mut tx = self.begin_write().await?;
        let exists = sqlx::query("SELECT 1 AS one FROM upstreams WHERE name = $1")
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?;
        if exists.is_none() {
            return Err(StoreError::NotFound(format!("upstream {name}")));
        }
        let approved = sqlx::query(
            "UPDATE upstream_tools SET approved_definition = definition, approved_hash = hash, changed_at = $2 \
             WHERE upstream = $1 AND (approved_hash IS NULL OR approved_hash <> hash)",
        )
        .bind(name)
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if approved > 0 {
            bump_version(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(approved)
    }

    /// The definitions of upstream `name` waiting for approval (new, or changed since they
    /// were approved), by tool name: what [`Store::approve_upstream_tools`] would approve.
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn pending_upstream_tools(&self, name: &str) -> Result<Vec<PendingTool>, StoreError> {
        let rows = sqlx::query(
            "SELECT tool, definition, hash, approved_definition FROM upstream_tools \
             WHERE upstream = $1 AND (approved_hash IS NULL OR approved_hash <> hash) ORDER BY tool",
        )
        .bind(name)
        .fetch_all(&self.pool())
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            out.push(PendingTool {
                tool: row.try_get("tool")?,
                definition: row.try_get("definition")?,
                hash: row.try_get("hash")?,
                approved_definition: row.try_get("approved_definition")?,
            });
        }
        Ok(out)
    }

    /// Allows (`true`) or stops allowing the destructive tool `tool` of upstream `name`
    /// (`gatehouse upstream allow-destructive`): once allowed, it is listed and each call asks
    /// the person to confirm. Raises the registry's version when it changed; returns whether
    /// it did.
    ///
    /// Errors: [`StoreError::NotFound`] when the upstream is unknown or no tool of that name was
    /// seen on it yet.
    pub async fn set_upstream_tool_destructive(
        &self,
        name: &str,
        tool: &str,
        allowed: bool,
        now: i64,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let was = sqlx::query(
            "SELECT allow_destructive FROM upstream_tools WHERE upstream = $1 AND tool = $2",
        )
        .bind(name)
        .bind(tool)
        .fetch_optional(&mut *tx)
        .await?
        .map(|row| row.try_get::<i64, _>("allow_destructive"))
        .transpose()?;
        let Some(was) = was else {
            return Err(StoreError::NotFound(format!("upstream {name} tool {tool}")));
        };
        if (was != 0) == allowed {
            return Ok(false);
        }
        sqlx::query(
            "UPDATE upstream_tools SET allow_destructive = $3, changed_at = $4 \
             WHERE upstream = $1 AND tool = $2",
        )
        .bind(name)
        .bind(tool)
        .bind(i64::from(allowed))
        .bind(now)
        .execute(&mut *tx)
        .await?;
        bump_version(&mut tx).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The definition of upstream `name`'s tool `tool` last seen (JSON), if it was seen.
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn upstream_tool_definition(
        &self,
        name: &str,
        tool: &str,
    ) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT definition FROM upstream_tools WHERE upstream = $1 AND tool = $2",
        )
        .bind(name)
        .bind(tool)
        .fetch_optional(&self.pool())
        .await?)
    }

    /// Every (upstream, tool) whose destructive calls the operator allowed.
    pub async fn destructive_allowed_upstream_tools(
        &self,
    ) -> Result<std::collections::HashSet<(String, String)>, StoreError> {
        let rows =
            sqlx::query("SELECT upstream, tool FROM upstream_tools WHERE allow_destructive <> 0")
                .fetch_all(&self.pool())
                .await?;
        let mut out = std::collections::HashSet::with_capacity(rows.len());
        for row in rows {
            out.insert((row.try_get("upstream")?, row.try_get("tool")?));
        }
        Ok(out)
    }

    /// The registry's version: raised by every change to the upstreams or their approvals.
    pub async fn upstream_registry_version(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT version FROM upstream_registry WHERE id = 1")
            .fetch_one(&self.pool())
            .await?;
        Ok(row.try_get("version")?)
    }

    /// The approved hash of every (upstream, tool) that has one.
    pub async fn approved_upstream_tools(
        &self,
    ) -> Result<std::collections::HashMap<(String, String), String>, StoreError> {
        let rows = sqlx::query(
            "SELECT upstream, tool, approved_hash FROM upstream_tools WHERE approved_hash IS NOT NULL",
        )
        .fetch_all(&self.pool())
        .await?;
        let mut out = std::collections::HashMap::with_capacity(rows.len());
        for row in rows {
            out.insert(
                (row.try_get("upstream")?, row.try_get("tool")?),
                row.try_get("approved_hash")?,
            );
        }
        Ok(out)
    }

    /// Records the definitions `seen` on upstream `name` (tool, definition JSON, SHA-256
    /// hex): a new tool is stored pending, a changed definition replaces the one last seen
    /// (the approved one stays, so the tool is withheld until approved again); an unchanged
    /// one is not written. Returns how many were new or changed.
    pub async fn record_upstream_tools(
        &self,
        name: &str,
        seen: &[(String, String, String)],
        now: i64,
    ) -> Result<u64, StoreError> {
        let rows = sqlx::query("SELECT tool, hash FROM upstream_tools WHERE upstream = $1")
            .bind(name)
            .fetch_all(&self.pool())
            .await?;
        let mut known = std::collections::HashMap::with_capacity(rows.len());
        for row in rows {
            known.insert(
                row.try_get::<String, _>("tool")?,
                row.try_get::<String, _>("hash")?,
            );
        }
        let changes: Vec<&(String, String, String)> = seen
            .iter()
            .filter(|(tool, _, hash)| known.get(tool) != Some(hash))
            .collect();
        if changes.is_empty() {
            return Ok(0);
        }
        let mut tx = self.begin_write().await?;
        for (tool, definition, hash) in &changes {
            let updated = sqlx::query(
                "UPDATE upstream_tools SET definition = $3, hash = $4, changed_at = $5 \
                 WHERE upstream = $1 AND tool = $2",
            )
            .bind(name)
            .bind(tool)
            .bind(definition)
            .bind(hash)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if updated == 0 {
                // The upstream may have been removed meanwhile: then nothing is recorded.
                sqlx::query(
                    "INSERT INTO upstream_tools (upstream, tool, definition, hash, first_seen_at, changed_at) \
                     SELECT $1, $2, $3, $4, $5, $5 WHERE EXISTS (SELECT 1 FROM upstreams WHERE name = $1)",
                )
                .bind(name)
                .bind(tool)
                .bind(definition)
                .bind(hash)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        Ok(changes.len() as u64)
    }

    /// Records the last failure seen on upstream `name` at `now` (`None`: it answered again).
    /// The text must name no secret. Callers write only when the text changes, so the time
    /// kept is when this failure began.
    pub async fn set_upstream_error(
        &self,
        name: &str,
        error: Option<&str>,
        now: i64,
    ) -> Result<(), StoreError> {
        let error: Option<String> = error.map(|e| e.chars().take(500).collect());
        let mut tx = self.begin_write().await?;
        sqlx::query("UPDATE upstreams SET last_error = $2, last_error_at = $3 WHERE name = $1")
            .bind(name)
            .bind(error.as_deref())
            .bind(error.as_ref().map(|_| now))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
