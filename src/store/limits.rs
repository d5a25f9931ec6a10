//! Rate-limit counters (table `rate_limits`) and the expiry of clients that were registered
//! but never used.
//!
//! Each counter is one row keyed by the SHA-256 of what it counts (so a key has a fixed size
//! and holds no email or address in the clear). An attempt reads its counters by primary key;
//! the rules of [`crate::domain::throttle`] decide; a refused attempt stops there and writes
//! nothing. An admitted attempt is counted by conditional writes (compare-and-set on the state
//! just read) in one transaction, so concurrent attempts on any number of instances cannot
//! both take the last place.

use std::collections::HashMap;

use super::{Store, StoreError};
use crate::domain::secret::TokenHash;
use crate::domain::throttle::{CounterState, Decision, Policy};

/// How many times [`Store::admit`] retries when a concurrent attempt changed a counter between
/// its read and its write, before refusing.
const ADMIT_ROUNDS: usize = 3;

/// One counter an attempt is checked against.
#[derive(Debug, Clone)]
pub struct Limit {
    /// The stored key: SHA-256 hex of `<kind>:<value>` (see [`Limit::new`]).
    pub key: String,
    /// The rule.
    pub policy: Policy,
    /// The attempt's cost in the counter's units (bytes for registrations, else 0).
    pub amount: i64,
}

impl Limit {
    /// A counter of `kind` (e.g. `signin-address`) for `value` (e.g. an IP address).
    pub fn new(kind: &str, value: &str, policy: Policy, amount: i64) -> Limit {
        Limit {
            key: TokenHash::of(&format!("{kind}:{value}"))
                .as_str()
                .to_string(),
            policy,
            amount,
        }
    }
}

/// The outcome of [`Store::admit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Counted; the counters' new states in the order of the limits given.
    Admitted(Vec<CounterState>),
    /// Refused, nothing written; retry after this many seconds (at least 1).
    Refused {
        /// Seconds.
        retry_after: i64,
        /// The index in the limits given of the one that refused with the longest wait;
        /// `None` when the attempt lost every round to concurrent ones.
        limit: Option<usize>,
    },
}

impl Store {
    /// Checks one attempt against every limit in `limits` at `now` (Unix seconds): refused
    /// (nothing written) when any refuses, otherwise counted in all of them atomically.
    ///
    /// Cost: one primary-key read of the counters; for an admitted attempt, one transaction
    /// with one conditional write per counter. A counter changed by a concurrent attempt
    /// between the read and the write makes the round start again, at most three rounds;
    /// after that the attempt is refused for a second.
    pub async fn admit(&self, limits: &[Limit], now: i64) -> Result<Admission, StoreError> {
        for _ in 0..ADMIT_ROUNDS {
            let stored = self.counters(limits).await?;
            let mut next = Vec::with_capacity(limits.len());
            let mut refused: Option<(i64, usize)> = None;
            for (i, l) in limits.iter().enumerate() {
                let old = stored.get(&l.key).copied();
                match l.policy.admit(old, now, l.amount) {
                    Decision::Admit(new) => next.push((l, old, new)),
                    Decision::Refuse { retry_after } => {
                        if refused.is_none_or(|(w, _)| retry_after > w) {
                            refused = Some((retry_after, i));
                        }
                    }
                }
            }
            if let Some((retry_after, i)) = refused {
                return Ok(Admission::Refused {
                    retry_after,
                    limit: Some(i),
                });
            }
            if self.write_counters(&next).await? {
                return Ok(Admission::Admitted(
                    next.into_iter().map(|(_, _, n)| n).collect(),
                ));
            }
        }
        Ok(Admission::Refused {
            retry_after: 1,
            limit: None,
        })
    }

    /// Whether an attempt would be refused now, without counting it or writing anything: the
    /// longest wait in seconds among the limits that would refuse, `None` when every limit
    /// would admit it. One primary-key read; lets a route refuse before it reads a request
    /// body (the body's own cost, such as bytes, is not known yet: `amount` as given).
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn refusal(&self, limits: &[Limit], now: i64) -> Result<Option<i64>, StoreError> {
        let stored = self.counters(limits).await?;
        Ok(limits
            .iter()
            .filter_map(
                |l| match l.policy.admit(stored.get(&l.key).copied(), now, l.amount) {
                    Decision::Refuse { retry_after } => Some(retry_after),
                    Decision::Admit(_) => None,
                },
            )
            .max())
    }

    /// Forgets a counter (a successful sign-in clears the account's failures).
    pub async fn clear_counter(&self, limit: &Limit) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM rate_limits WHERE key = $1")
            .bind(&limit.key)
            .execute(&self.writer())
            .await?;
        Ok(())
    }

    /// Takes back one attempt counted in the window that started at `since` (a sign-in that
    /// succeeded was counted as a failure while it was checked). Nothing happens when the
    /// window has moved on.
    pub async fn refund_counter(&self, limit: &Limit, since: i64) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE rate_limits SET hits = hits - 1, blocked_until = 0 \
             WHERE key = $1 AND since = $2 AND hits > 0",
        )
        .bind(&limit.key)
        .bind(since)
        .execute(&self.writer())
        .await?;
        Ok(())
    }

    /// Deletes counters that no longer have any effect at `now`. Returns how many.
    pub async fn delete_expired_counters(&self, now: i64) -> Result<u64, StoreError> {
        Ok(sqlx::query("DELETE FROM rate_limits WHERE expires_at < $1")
            .bind(now)
            .execute(&self.writer())
            .await?
            .rows_affected())
    }

    /// Deletes dynamically registered clients and clients known from a client ID metadata
    /// document (URL-shaped ids) created before `created_before` (Unix seconds) that never
    /// completed an authorization: no consent, no code, no token family ever referred to them,
    /// and no authorization request waiting on a consent page or device authorization
    /// (RFC 8628) waiting for its user code now (`now`, Unix seconds). A metadata-document
    /// client used again later is fetched again. Clients made on the command line (no redirect
    /// URIs, and not registered for the device grant, whose clients have none) are never
    /// touched. Returns how many were deleted.
    pub async fn expire_unused_clients(
        &self,
        created_before: i64,
        now: i64,
    ) -> Result<u64, StoreError> {
        // A waiting request names its client inside its JSON; there are few (they live
        // minutes), so matching the text is cheap. `_` in an id matches any character, which
        // can only keep a client longer.
        let deleted = sqlx::query(
            "DELETE FROM oauth_clients WHERE created_at < $1 \
             AND (substr(client_id, 1, 3) = 'gc_' OR substr(client_id, 1, 8) = 'https://') \
             AND (redirect_uris <> '[]' OR grant_types LIKE '%:device_code\"%') \
             AND NOT EXISTS (SELECT 1 FROM consents c WHERE c.client_id = oauth_clients.client_id) \
             AND NOT EXISTS (SELECT 1 FROM authorization_codes a WHERE a.client_id = oauth_clients.client_id) \
             AND NOT EXISTS (SELECT 1 FROM token_families f WHERE f.client_id = oauth_clients.client_id) \
             AND NOT EXISTS (SELECT 1 FROM device_authorizations d WHERE d.client_id = oauth_clients.client_id \
                 AND d.expires_at > $2) \
             AND NOT EXISTS (SELECT 1 FROM authorization_requests r WHERE r.used_at IS NULL \
                 AND r.expires_at > $2 \
                 AND r.request LIKE '%\"client_id\":\"' || oauth_clients.client_id || '\"%')",
        )
        .bind(created_before)
        .bind(now)
        .execute(&self.writer())
        .await?
        .rows_affected();
        if deleted > 0 {
            // The validation cache may hold them (other processes hear the trigger).
            self.auth_changed().await;
        }
        Ok(deleted)
    }

    async fn counters(
        &self,
        limits: &[Limit],
    ) -> Result<HashMap<String, CounterState>, StoreError> {
        let placeholders = (1..=limits.len())
            .map(|i| format!("${i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT key, hits, amount, since, blocked_until, expires_at FROM rate_limits \
             WHERE key IN ({placeholders})"
        );
        let mut q = sqlx::query_as::<_, (String, i64, i64, i64, i64, i64)>(&sql);
        for l in limits {
            q = q.bind(&l.key);
        }
        let rows = q.fetch_all(&self.pool()).await?;
        Ok(rows
            .into_iter()
            .map(|(key, hits, amount, since, blocked_until, expires_at)| {
                let state = CounterState {
                    hits,
                    amount,
                    since,
                    blocked_until,
                    expires_at,
                };
                (key, state)
            })
            .collect())
    }

    /// Writes the new states if every counter still holds the state it was read with; returns
    /// whether they were written (all or none).
    async fn write_counters(
        &self,
        next: &[(&Limit, Option<CounterState>, CounterState)],
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        for (limit, old, new) in next {
            // The insert of a new counter or the update of the state it was read with: the
            // new state binds $1 to $6 in both, the state read $7 to $10 in the update.
            let sql = match old {
                None => {
                    "INSERT INTO rate_limits (key, hits, amount, since, blocked_until, expires_at) \
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (key) DO NOTHING"
                }
                Some(_) => {
                    "UPDATE rate_limits SET hits = $2, amount = $3, since = $4, blocked_until = $5, \
                     expires_at = $6 WHERE key = $1 AND hits = $7 AND amount = $8 AND since = $9 \
                     AND blocked_until = $10"
                }
            };
            let mut query = sqlx::query(sql)
                .bind(&limit.key)
                .bind(new.hits)
                .bind(new.amount)
                .bind(new.since)
                .bind(new.blocked_until)
                .bind(new.expires_at);
            if let Some(old) = old {
                query = query
                    .bind(old.hits)
                    .bind(old.amount)
                    .bind(old.since)
                    .bind(old.blocked_until);
            }
            let written = query.execute(&mut *tx).await?.rows_affected();
            if written != 1 {
                tx.rollback().await?;
                return Ok(false);
            }
        }
        tx.commit().await?;
        Ok(true)
    }
}
