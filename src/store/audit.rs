//! The audit log: who did what, with which client, when, and how it ended — never arguments,
//! results, tokens or passwords.

use sqlx::Row;

use super::{Store, StoreError};

/// One audit record to write.
#[derive(Debug, Clone, Default)]
pub struct AuditEvent<'a> {
    /// What happened, e.g. `signin`, `consent`, `client_registered`, `code_redeemed`,
    /// `code_replay`, `refresh_reuse`, `family_revoked`, `tool_call`.
    pub event: &'a str,
    /// `success`, `failure`, `denied`, …
    pub outcome: &'a str,
    /// The account concerned, when known.
    pub account_id: Option<&'a str>,
    /// The OAuth client concerned, when known.
    pub client_id: Option<&'a str>,
    /// What it was about: a tool name, a project id, a family id.
    pub subject: Option<&'a str>,
    /// The caller's IP address.
    pub source_ip: Option<&'a str>,
    /// Short non-secret detail (a reason, a duration in ms).
    pub detail: Option<&'a str>,
}

/// An audit record read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// Unix seconds.
    pub at: i64,
    /// See [`AuditEvent::event`].
    pub event: String,
    /// See [`AuditEvent::outcome`].
    pub outcome: String,
    /// See [`AuditEvent::account_id`].
    pub account_id: Option<String>,
    /// See [`AuditEvent::client_id`].
    pub client_id: Option<String>,
    /// See [`AuditEvent::subject`].
    pub subject: Option<String>,
    /// See [`AuditEvent::source_ip`].
    pub source_ip: Option<String>,
    /// See [`AuditEvent::detail`].
    pub detail: Option<String>,
}

impl Store {
    /// Appends one record. A failure to audit is logged by the caller, never shown to a client.
    pub async fn record_audit(&self, e: &AuditEvent<'_>, now: i64) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO audit_events (at, event, outcome, account_id, client_id, subject, source_ip, detail) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(now)
        .bind(e.event)
        .bind(e.outcome)
        .bind(e.account_id)
        .bind(e.client_id)
        .bind(e.subject)
        .bind(e.source_ip)
        .bind(e.detail)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Writes a record, logging (not returning) a failure: auditing never fails a request.
    pub async fn audit(&self, e: AuditEvent<'_>, now: i64) {
        if let Err(err) = self.record_audit(&e, now).await {
            tracing::error!(event = e.event, error = %err, "could not write audit record");
        }
    }

    /// The most recent records, newest first (at most `limit`).
    pub async fn recent_audit(&self, limit: i64) -> Result<Vec<AuditRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT at, event, outcome, account_id, client_id, subject, source_ip, detail \
             FROM audit_events ORDER BY id DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(AuditRecord {
                    at: r.try_get("at")?,
                    event: r.try_get("event")?,
                    outcome: r.try_get("outcome")?,
                    account_id: r.try_get("account_id")?,
                    client_id: r.try_get("client_id")?,
                    subject: r.try_get("subject")?,
                    source_ip: r.try_get("source_ip")?,
                    detail: r.try_get("detail")?,
                })
            })
            .collect()
    }

    /// When each client last called a tool for the account: `(client_id, unix seconds)`.
    pub async fn last_tool_use_by_client(
        &self,
        account_id: &str,
    ) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT client_id, MAX(at) AS last_at FROM audit_events \
             WHERE account_id = $1 AND event = 'tool_call' AND client_id IS NOT NULL GROUP BY client_id",
        )
        .bind(account_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("client_id")?, r.try_get("last_at")?)))
            .collect()
    }

    /// The tool calls one client made for the account, newest first (at most `limit`).
    pub async fn client_activity(
        &self,
        account_id: &str,
        client_id: &str,
        limit: i64,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT at, event, outcome, account_id, client_id, subject, source_ip, detail \
             FROM audit_events WHERE account_id = $1 AND client_id = $2 AND event = 'tool_call' \
             ORDER BY id DESC LIMIT $3",
        )
        .bind(account_id)
        .bind(client_id)
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(record_from_row).collect()
    }
}

fn record_from_row(r: &sqlx::any::AnyRow) -> Result<AuditRecord, StoreError> {
    Ok(AuditRecord {
        at: r.try_get("at")?,
        event: r.try_get("event")?,
        outcome: r.try_get("outcome")?,
        account_id: r.try_get("account_id")?,
        client_id: r.try_get("client_id")?,
        subject: r.try_get("subject")?,
        source_ip: r.try_get("source_ip")?,
        detail: r.try_get("detail")?,
    })
}
