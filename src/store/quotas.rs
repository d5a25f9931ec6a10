//! What tool-call quotas read and write: an account's own budget (`accounts.calls_per_hour`)
//! and its recent tool calls, counted from the audit rows the batching writer already makes
//! (issue "The rest of the MCP surface", part 3). Nothing here is written per call.

use super::{Store, StoreError};
use crate::domain::audit::Outcome;
use crate::domain::quota::{BUCKET_SECS, WINDOW_SECS};

/// Audit outcomes of calls that do not count against a budget: never admitted (over the
/// budget, a scope missing), or refused for the caller's reach or role (a project out of reach,
/// a write the role does not allow: issue 30, finding 8), so that one credential's refused
/// calls do not spend the account's budget.
/// `continued` is a successful continuation of a read already counted (the next part of a
/// note, the next page of a search or an export: issue 38, part 3).
const NOT_COUNTED: [Outcome; 5] = [
    Outcome::OverQuota,
    Outcome::InsufficientScope,
    Outcome::Forbidden,
    Outcome::NotFound,
    Outcome::Continued,
];

impl Store {
    /// The account's own budget: `Some(n)` calls per hour (0 = unlimited), `None` for the
    /// server's default. Errors: [`StoreError::NotFound`] for an unknown account.
    pub async fn account_calls_per_hour(
        &self,
        account_id: &str,
    ) -> Result<Option<u64>, StoreError> {
        let n: Option<i64> =
            sqlx::query_scalar("SELECT calls_per_hour FROM accounts WHERE id = $1")
                .bind(account_id)
                .fetch_optional(&self.pool())
                .await?
                .ok_or_else(|| StoreError::NotFound(format!("account {account_id}")))?;
        Ok(n.map(|n| u64::try_from(n).unwrap_or(0)))
    }

    /// Sets (`Some`) or clears (`None`, back to the default) the account's own budget.
    /// Errors: [`StoreError::NotFound`] for an unknown account.
    pub async fn set_account_calls_per_hour(
        &self,
        account_id: &str,
        calls_per_hour: Option<u64>,
    ) -> Result<(), StoreError> {
        let value = calls_per_hour.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        let done = sqlx::query("UPDATE accounts SET calls_per_hour = $1 WHERE id = $2")
            .bind(value)
            .bind(account_id)
            .execute(&self.writer())
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("account {account_id}")));
        }
        Ok(())
    }

    /// The account's counted calls (tool calls, resource reads, prompt gets) of the hour ending
    /// at `now`, per minute:
    /// `(Unix seconds / 60, calls)`. Reads the audit rows (committed ones only: rows still in
    /// the writer's queue are not seen).
    pub async fn tool_calls_per_minute(
        &self,
        account_id: &str,
        now: i64,
    ) -> Result<Vec<(i64, u64)>, StoreError> {
        let since = (now.div_euclid(BUCKET_SECS) - WINDOW_SECS / BUCKET_SECS + 1) * BUCKET_SECS;
        let rows: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT at / 60 AS minute, COUNT(*) AS calls FROM audit_events \
             WHERE account_id = $1 AND at >= $2 \
             AND event IN ('tool_call', 'resource_read', 'prompt_get') \
             AND outcome NOT IN ($3, $4, $5, $6, $7) GROUP BY at / 60",
        )
        .bind(account_id)
        .bind(since)
        .bind(NOT_COUNTED[0].as_str())
        .bind(NOT_COUNTED[1].as_str())
        .bind(NOT_COUNTED[2].as_str())
        .bind(NOT_COUNTED[3].as_str())
        .bind(NOT_COUNTED[4].as_str())
        .fetch_all(&self.pool())
        .await?;
        Ok(rows
            .into_iter()
            .map(|(minute, calls)| (minute, u64::try_from(calls).unwrap_or(0)))
            .collect())
    }
}
