//! Reading the audit log for people (`gatehouse audit`, a project's activity page) and
//! deleting what is past its retention, in bounded batches, one instance at a time.

use super::{Backend, Store, StoreError};

/// Which audit rows to read; every member narrows the answer (none: every row).
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// Rows about this account (its id).
    pub account_id: Option<String>,
    /// Rows about this OAuth client.
    pub client_id: Option<String>,
    /// Rows about this project.
    pub project_id: Option<String>,
    /// Rows of this event kind (`tool_call`, `signin`, …).
    pub event: Option<String>,
    /// Rows at or after this time (Unix seconds).
    pub since: Option<i64>,
    /// Only the MCP activity: tool calls, resource reads and prompt gets.
    pub mcp_only: bool,
    /// Only what the Connections page is about ([`CONNECTION_EVENTS`]): linking, renewing and
    /// unlinking accounts at upstream services, one's own servers added, approved, turned on
    /// or off and removed, and the calls forwarded to an upstream.
    pub connections_only: bool,
}

/// One audit row as people read it: the account's email and the client's registered name
/// beside their ids.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
pub struct AuditEntry {
    /// Row id: increasing in the order rows were written.
    pub id: i64,
    /// Unix seconds.
    pub at: i64,
    /// What happened.
    pub event: String,
    /// How it ended.
    pub outcome: String,
    /// The account concerned.
    pub account_id: Option<String>,
    /// Its email, while the account exists.
    pub email: Option<String>,
    /// The OAuth client concerned.
    pub client_id: Option<String>,
    /// The client's registered name (people's words: shown escaped).
    pub client_name: Option<String>,
    /// What it was about (a tool name, a URI template, a prompt).
    pub subject: Option<String>,
    /// The project concerned.
    pub project_id: Option<String>,
    /// The caller's address.
    pub source_ip: Option<String>,
    /// Short non-secret detail (the credential kind and id, a duration).
    pub detail: Option<String>,
}

/// The MCP activity among audit events (tool calls, resource reads, prompt gets), as SQL.
const MCP_EVENTS: &str = "e.event IN ('tool_call', 'resource_read', 'prompt_get')";

/// The events of the Connections page (issue 35 item 6), as SQL: a person's connections to
/// upstream services, their own servers' changes, and every call forwarded to an upstream
/// (whose detail names it, `… upstream=NAME …`).
pub const CONNECTION_EVENTS: &str = "(e.event IN ('connection_connected', \
     'connection_refresh_failed', 'connection_disconnected', 'personal_upstream_added', \
     'personal_upstream_approved', 'personal_upstream_enabled', 'personal_upstream_disabled', \
     'personal_upstream_removed') OR (e.event = 'tool_call' AND e.detail LIKE '% upstream=%'))";

/// The steps of a connection timeline, as SQL: every event but the MCP activity and the
/// refreshes, which the timeline counts instead.
const TIMELINE_STEP_EVENTS: &str =
    "e.event NOT IN ('tool_call', 'resource_read', 'prompt_get', 'token_refreshed')";

/// Most steps a connection timeline shows (the newest), and most clients listed as tried.
pub const TIMELINE_STEPS: i64 = 200;

/// A client's connection timeline as stored ([`Store::client_timeline`]): its steps and a
/// summary of its MCP calls and refreshes.
#[derive(Debug, Clone, Default)]
pub struct ClientTimeline {
    /// The audit rows other than MCP calls and refreshes, oldest first (the newest
    /// [`TIMELINE_STEPS`]).
    pub steps: Vec<AuditEntry>,
    /// The first MCP call (tool call, resource read or prompt get).
    pub first_call: Option<AuditEntry>,
    /// The latest MCP call.
    pub last_call: Option<AuditEntry>,
    /// How many MCP calls are recorded.
    pub calls: i64,
    /// How many refresh-token rotations are recorded.
    pub refreshes: i64,
    /// When the latest one was, Unix seconds.
    pub last_refresh: Option<i64>,
}

/// Runs one statement of [`Store::client_timeline`]: `$1` the client, `$2` the account when
/// given.
async fn timeline_query<T>(
    pool: &sqlx::AnyPool,
    sql: &str,
    (client_id, account_id): (&str, Option<&str>),
) -> Result<Vec<T>, sqlx::Error>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> + Send + Unpin,
{
    let mut query = sqlx::query_as::<_, T>(sql).bind(client_id.to_string());
    if let Some(account) = account_id {
        query = query.bind(account.to_string());
    }
    query.fetch_all(pool).await
}

/// Most rows one reading returns.
pub const MAX_AUDIT_ROWS: i64 = 10_000;

/// One kind of old rows the upkeep task deletes: its name (for logs and metrics) and the
/// statement that deletes at most `$2` rows older than `$1` (Unix seconds), oldest first.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// What is pruned, e.g. `audit_events`.
    pub name: &'static str,
    /// `DELETE …` of at most `$2` rows older than `$1`.
    pub delete_batch: &'static str,
}

/// Ended browser sessions on `SQLite`: tower-sessions' rows (table `tower_sessions`, the
/// expiry an RFC 3339 text) whose expiry is before `$1`.
pub const SESSIONS_SQLITE: Retention = Retention {
    name: "sessions",
    delete_batch: "DELETE FROM tower_sessions WHERE id IN \
                   (SELECT id FROM tower_sessions \
                    WHERE datetime(expiry_date) < datetime($1, 'unixepoch') LIMIT $2)",
};

/// Ended browser sessions on `PostgreSQL`: tower-sessions' rows (`tower_sessions.session`,
/// the expiry a `timestamptz`) whose expiry is before `$1`.
pub const SESSIONS_POSTGRES: Retention = Retention {
    name: "sessions",
    delete_batch: "DELETE FROM tower_sessions.session WHERE id IN \
                   (SELECT id FROM tower_sessions.session \
                    WHERE expiry_date < to_timestamp($1) LIMIT $2)",
};

/// The audit rows past `GATEHOUSE_AUDIT_RETENTION_DAYS`.
pub const AUDIT_RETENTION: Retention = Retention {
    name: "audit_events",
    delete_batch: "DELETE FROM audit_events WHERE id IN \
                   (SELECT id FROM audit_events WHERE at < $1 ORDER BY id LIMIT $2)",
};

/// How long a rotated refresh token is kept so that presenting it again is recognised as
/// replay (OAuth 2.1 §4.3.1, RFC 9700 §4.14.2: the family is revoked), in seconds: 30 days.
/// Past it the token is deleted and presenting it is an unknown token (`invalid_grant`).
pub const REFRESH_REPLAY_WINDOW_SECS: i64 = 30 * 24 * 3600;

/// What the upkeep task deletes besides audit rows, with how long past its time each row is
/// kept (seconds; the cutoff is `now - age`). In this order, so that a family goes after its
/// tokens:
/// - `access_tokens` a day after they expired, and those of families revoked 30 days ago;
/// - `refresh_tokens` rotated more than [`REFRESH_REPLAY_WINDOW_SECS`] ago, and those of
///   families revoked 30 days ago;
/// - `token_families` revoked 30 days ago with no token left;
/// - `authorization_codes` (used or not) and `authorization_requests` a day after they expired;
/// - `setup_tokens`, `password_reset_tokens`, `project_invitations`, `signin_devices` and
///   `device_authorizations` (RFC 8628) a day after they expired, `idp_signins` (sign-ins waiting on an identity
///   provider) once expired;
/// - `client_assertion_jtis` once the assertion expired (RFC 7523 §3: a `jti` need only be
///   remembered until `exp`), `spent_confirmations` once the confirmation expired, and
///   `dpop_proofs` once the proof's `iat` window passed (RFC 9449 §11.1);
/// - `rate_limits` counters once they no longer count.
pub const CREDENTIAL_RETENTIONS: [(Retention, i64); 17] = [
    (
        Retention {
            name: "access_tokens",
            delete_batch: "DELETE FROM access_tokens WHERE token_hash IN \
                           (SELECT token_hash FROM access_tokens WHERE expires_at < $1 LIMIT $2)",
        },
        super::EXPIRED_RETENTION_SECS,
    ),
    (
        Retention {
            name: "access_tokens",
            delete_batch: "DELETE FROM access_tokens WHERE token_hash IN \
                           (SELECT a.token_hash FROM access_tokens a JOIN token_families f \
                            ON f.id = a.family_id WHERE f.revoked_at < $1 LIMIT $2)",
        },
        super::REVOKED_RETENTION_SECS,
    ),
    (
        Retention {
            name: "refresh_tokens",
            delete_batch: "DELETE FROM refresh_tokens WHERE token_hash IN \
                           (SELECT token_hash FROM refresh_tokens WHERE rotated_at < $1 LIMIT $2)",
        },
        REFRESH_REPLAY_WINDOW_SECS,
    ),
    (
        Retention {
            name: "refresh_tokens",
            delete_batch: "DELETE FROM refresh_tokens WHERE token_hash IN \
                           (SELECT r.token_hash FROM refresh_tokens r JOIN token_families f \
                            ON f.id = r.family_id WHERE f.revoked_at < $1 LIMIT $2)",
        },
        super::REVOKED_RETENTION_SECS,
    ),
    (
        Retention {
            name: "token_families",
            delete_batch: "DELETE FROM token_families WHERE id IN \
                           (SELECT f.id FROM token_families f WHERE f.revoked_at < $1 \
                            AND NOT EXISTS (SELECT 1 FROM access_tokens a WHERE a.family_id = f.id) \
                            AND NOT EXISTS (SELECT 1 FROM refresh_tokens r WHERE r.family_id = f.id) \
                            LIMIT $2)",
        },
        super::REVOKED_RETENTION_SECS,
    ),
    (
        Retention {
            name: "authorization_codes",
            delete_batch: "DELETE FROM authorization_codes WHERE code_hash IN \
                           (SELECT code_hash FROM authorization_codes WHERE expires_at < $1 LIMIT $2)",
        },
        super::EXPIRED_RETENTION_SECS,
    ),
    (
        Retention {
            name: "authorization_requests",
            delete_batch: "DELETE FROM authorization_requests WHERE id IN \
                           (SELECT id FROM authorization_requests WHERE expires_at < $1 LIMIT $2)",
        },
        super::EXPIRED_RETENTION_SECS,
    ),
    (
        Retention {
            name: "setup_tokens",
            delete_batch: "DELETE FROM setup_tokens WHERE token_hash IN \
                           (SELECT token_hash FROM setup_tokens WHERE expires_at < $1 LIMIT $2)",
        },
        super::EXPIRED_RETENTION_SECS,
    ),
    (
        Retention {
            name: "password_reset_tokens",
            delete_batch: "DELETE FROM password_reset_tokens WHERE token_hash IN \
                           (SELECT token_hash FROM password_reset_tokens WHERE expires_at < $1 \
                           LIMIT $2)",
        },
        super::EXPIRED_RETENTION_SECS,
    ),
    (
        Retention {
            name: "project_invitations",
            delete_batch: "DELETE FROM project_invitations WHERE token_hash IN \
                           (SELECT token_hash FROM project_invitations WHERE expires_at < $1 \
                           LIMIT $2)",
        },
        super::EXPIRED_RETENTION_SECS,
    ),
    (
        Retention {
            name: "signin_devices",
            delete_batch: "DELETE FROM signin_devices WHERE device_hash IN \
                           (SELECT device_hash FROM signin_devices WHERE expires_at < $1 LIMIT $2)",
        },
        super::EXPIRED_RETENTION_SECS,
    ),
    (
        Retention {
            name: "device_authorizations",
            delete_batch: "DELETE FROM device_authorizations WHERE device_code_hash IN \
                           (SELECT device_code_hash FROM device_authorizations \
                            WHERE expires_at < $1 LIMIT $2)",
        },
        super::EXPIRED_RETENTION_SECS,
    ),
    (
        Retention {
            name: "idp_signins",
            delete_batch: "DELETE FROM idp_signins WHERE state_hash IN \
                           (SELECT state_hash FROM idp_signins WHERE expires_at < $1 LIMIT $2)",
        },
        0,
    ),
    (
        Retention {
            name: "client_assertion_jtis",
            delete_batch: "DELETE FROM client_assertion_jtis WHERE (client_id, jti_hash) IN \
                           (SELECT client_id, jti_hash FROM client_assertion_jtis \
                            WHERE expires_at < $1 LIMIT $2)",
        },
        0,
    ),
    (
        Retention {
            name: "spent_confirmations",
            delete_batch: "DELETE FROM spent_confirmations WHERE state_hash IN \
                           (SELECT state_hash FROM spent_confirmations WHERE expires_at < $1 LIMIT $2)",
        },
        0,
    ),
    (
        Retention {
            name: "dpop_proofs",
            delete_batch: "DELETE FROM dpop_proofs WHERE proof_hash IN \
                           (SELECT proof_hash FROM dpop_proofs WHERE expires_at < $1 LIMIT $2)",
        },
        0,
    ),
    (
        Retention {
            name: "rate_limits",
            delete_batch: "DELETE FROM rate_limits WHERE key IN \
                           (SELECT key FROM rate_limits WHERE expires_at < $1 LIMIT $2)",
        },
        0,
    ),
];

/// The `PostgreSQL` advisory-lock key every instance's upkeep takes for a batch, so that one
/// instance at a time deletes ("gatehouse-upkeep" as an integer).
pub const UPKEEP_LOCK_KEY: i64 = 0x6761_7465_7570_6b70;

impl Store {
    /// The newest rows matching `filter`, at most `limit` (capped at [`MAX_AUDIT_ROWS`]),
    /// newest first. Tool-call rows still queued are committed first.
    ///
    /// Errors: the database could not be read.
    pub async fn audit_entries(
        &self,
        filter: &AuditFilter,
        limit: i64,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        self.flush_audit().await;
        let mut sql = String::from(
            "SELECT e.id, e.at, e.event, e.outcome, e.account_id, a.email, e.client_id, \
             c.client_name, e.subject, e.project_id, e.source_ip, e.detail \
             FROM audit_events e LEFT JOIN accounts a ON a.id = e.account_id \
             LEFT JOIN oauth_clients c ON c.client_id = e.client_id WHERE 1 = 1",
        );
        let mut texts: Vec<&str> = Vec::new();
        for (column, value) in [
            ("e.account_id", &filter.account_id),
            ("e.client_id", &filter.client_id),
            ("e.project_id", &filter.project_id),
            ("e.event", &filter.event),
        ] {
            if let Some(v) = value {
                texts.push(v);
                sql.push_str(&format!(" AND {column} = ${}", texts.len()));
            }
        }
        if filter.mcp_only {
            sql.push_str(" AND e.event IN ('tool_call', 'resource_read', 'prompt_get')");
        }
        if filter.connections_only {
            sql.push_str(" AND ");
            sql.push_str(CONNECTION_EVENTS);
        }
        let n = texts.len();
        if filter.since.is_some() {
            sql.push_str(&format!(" AND e.at >= ${}", n + 1));
        }
        let limit_at = n + 1 + usize::from(filter.since.is_some());
        sql.push_str(&format!(" ORDER BY e.id DESC LIMIT ${limit_at}"));
        let mut query = sqlx::query_as::<_, AuditEntry>(&sql);
        for t in texts {
            query = query.bind(t);
        }
        if let Some(since) = filter.since {
            query = query.bind(since);
        }
        Ok(query
            .bind(limit.clamp(1, MAX_AUDIT_ROWS))
            .fetch_all(&self.pool())
            .await?)
    }

    /// What a client's connection timeline reads ([`ClientTimeline`]): its audit rows, only
    /// `account_id`'s when given (a person's own view), every account's otherwise (the
    /// operator's). Flushes queued rows first, like [`Store::audit_entries`].
    ///
    /// Errors: the database failed.
    pub async fn client_timeline(
        &self,
        client_id: &str,
        account_id: Option<&str>,
    ) -> Result<ClientTimeline, StoreError> {
        self.flush_audit().await;
        let pool = self.pool();
        let whose = if account_id.is_some() {
            " AND e.account_id = $2"
        } else {
            ""
        };
        let rows = |kinds: &str, order: &str, limit: i64| {
            format!(
                "SELECT e.id, e.at, e.event, e.outcome, e.account_id, a.email, e.client_id, \
                 c.client_name, e.subject, e.project_id, e.source_ip, e.detail \
                 FROM audit_events e LEFT JOIN accounts a ON a.id = e.account_id \
                 LEFT JOIN oauth_clients c ON c.client_id = e.client_id \
                 WHERE e.client_id = $1{whose} AND {kinds} ORDER BY e.id {order} LIMIT {limit}"
            )
        };
        let counted = |kinds: &str| {
            format!(
                "SELECT COUNT(*), MAX(e.at) FROM audit_events e \
                 WHERE e.client_id = $1{whose} AND {kinds}"
            )
        };
        let key = (client_id, account_id);
        let mut steps: Vec<AuditEntry> = timeline_query(
            &pool,
            &rows(TIMELINE_STEP_EVENTS, "DESC", TIMELINE_STEPS),
            key,
        )
        .await?;
        steps.reverse();
        let first_call = timeline_query::<AuditEntry>(&pool, &rows(MCP_EVENTS, "ASC", 1), key)
            .await?
            .pop();
        let last_call = timeline_query::<AuditEntry>(&pool, &rows(MCP_EVENTS, "DESC", 1), key)
            .await?
            .pop();
        let (calls, _) = timeline_query::<(i64, Option<i64>)>(&pool, &counted(MCP_EVENTS), key)
            .await?
            .pop()
            .unwrap_or_default();
        let (refreshes, last_refresh) = timeline_query::<(i64, Option<i64>)>(
            &pool,
            &counted("e.event = 'token_refreshed'"),
            key,
        )
        .await?
        .pop()
        .unwrap_or_default();
        Ok(ClientTimeline {
            steps,
            first_call,
            last_call,
            calls,
            refreshes,
            last_refresh,
        })
    }

    /// The clients `account_id` tried to connect since `since` (Unix seconds): each with its
    /// registered name and the time of the account's latest authorization request, consent
    /// or refused code, newest first, at most [`TIMELINE_STEPS`].
    ///
    /// Errors: the database failed.
    pub async fn attempted_clients(
        &self,
        account_id: &str,
        since: i64,
    ) -> Result<Vec<(String, Option<String>, i64)>, StoreError> {
        self.flush_audit().await;
        Ok(sqlx::query_as(
            "SELECT e.client_id, MAX(c.client_name), MAX(e.at) FROM audit_events e \
             LEFT JOIN oauth_clients c ON c.client_id = e.client_id \
             WHERE e.account_id = $1 AND e.client_id IS NOT NULL AND e.at >= $2 \
             AND e.event IN ('authorization_request', 'consent', 'code_refused') \
             GROUP BY e.client_id ORDER BY MAX(e.at) DESC LIMIT $3",
        )
        .bind(account_id)
        .bind(since)
        .bind(TIMELINE_STEPS)
        .fetch_all(&self.pool())
        .await?)
    }

    /// The ended browser sessions of this store's engine ([`SESSIONS_SQLITE`],
    /// [`SESSIONS_POSTGRES`]), pruned like the other retentions, with no age beyond the expiry.
    pub fn sessions_retention(&self) -> Retention {
        match self.backend {
            Backend::Sqlite => SESSIONS_SQLITE,
            Backend::Postgres => SESSIONS_POSTGRES,
        }
    }

    /// `VACUUM (ANALYZE)` of `table` on `PostgreSQL` (outside any transaction, as `VACUUM`
    /// needs), so that the space of the rows pruning deleted is reused
    /// ([`crate::upkeep::Vacuums`]); nothing on `SQLite`. `table` must be one of the pruned
    /// tables ([`CREDENTIAL_RETENTIONS`], [`AUDIT_RETENTION`]): it is named in the statement.
    ///
    /// Errors: another name, or the database refused the statement.
    pub async fn vacuum(&self, table: &'static str) -> Result<(), StoreError> {
        let known = AUDIT_RETENTION.name == table
            || CREDENTIAL_RETENTIONS.iter().any(|(r, _)| r.name == table);
        if !known {
            return Err(StoreError::NotFound(format!("pruned table {table}")));
        }
        if self.backend != Backend::Postgres {
            return Ok(());
        }
        sqlx::raw_sql(&format!("VACUUM (ANALYZE) {table}"))
            .execute(&self.pool())
            .await?;
        Ok(())
    }

    /// Deletes at most `batch` rows of `retention` older than `cutoff` in one transaction.
    /// On `PostgreSQL` the transaction first takes the advisory lock [`UPKEEP_LOCK_KEY`]
    /// (`pg_try_advisory_xact_lock`, released at commit): `None` when another instance holds
    /// it (it is pruning now). On `SQLite` the write turn orders it with the other writes.
    ///
    /// Errors: the database refused the statement.
    pub async fn prune_batch(
        &self,
        retention: &Retention,
        cutoff: i64,
        batch: i64,
    ) -> Result<Option<u64>, StoreError> {
        let mut tx = self.begin_write().await?;
        if self.backend == Backend::Postgres {
            let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
                .bind(UPKEEP_LOCK_KEY)
                .fetch_one(&mut *tx)
                .await?;
            if !locked {
                return Ok(None);
            }
        }
        let deleted = sqlx::query(retention.delete_batch)
            .bind(cutoff)
            .bind(batch)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(Some(deleted))
    }
}
