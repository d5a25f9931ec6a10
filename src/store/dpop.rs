//! DPoP proofs seen (table `dpop_proofs`, migration 0022; RFC 9449 §11.1): a proof is accepted
//! once while its `iat` window lasts, on every instance sharing the database.
//!
//! - The token endpoint spends a proof with one conditional statement
//!   ([`Store::spend_dpop_proof`]), exactly once across instances, like a client assertion.
//! - The MCP route must stay at one database round trip per request, so it does not write per
//!   request. Each instance remembers the proofs it accepted in memory
//!   ([`Store::dpop_proof_seen_here`], exact for that instance) and records them in the table
//!   in batches ([`Store::record_dpop_proof`]: gathered for [`RECORD_GATHER`], then one
//!   statement for all of them); the credential lookup of a DPoP request reads the table in the
//!   same statement ([`Store::live_access_token_with_proof`]). So a proof replayed on another
//!   instance is refused once its batch is committed, a few milliseconds after it was first
//!   accepted; a replay inside that gap on another instance is the price of not writing per
//!   request (the proof is still bound to the one token, method and URL).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::{Store, StoreError};

/// How long accepted MCP proofs gather before their batch is written.
pub const RECORD_GATHER: Duration = Duration::from_millis(5);
/// Most proofs written by one statement.
pub const RECORD_BATCH_MAX: usize = 256;
/// Proofs remembered in memory before expired ones are pruned.
const PRUNE_AT: usize = 10_000;

/// This instance's memory of DPoP proofs: those seen (until they expire) and those still to be
/// written to the shared table.
#[derive(Debug, Default)]
pub struct ProofLog {
    seen: Mutex<HashMap<String, i64>>,
    pending: Mutex<Pending>,
}

#[derive(Debug, Default)]
struct Pending {
    rows: Vec<(String, i64)>,
    flushing: bool,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl Store {
    /// Spends the DPoP proof `proof_hash` (see [`crate::domain::dpop::VerifiedProof::replay_key`])
    /// until `expires_at` (Unix seconds): `true` the first time, `false` while an earlier use has
    /// not expired at `now` (a replay). One conditional statement, so concurrent uses on any
    /// number of instances cannot both win. Also remembered in this instance's memory.
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn spend_dpop_proof(
        &self,
        proof_hash: &str,
        expires_at: i64,
        now: i64,
    ) -> Result<bool, StoreError> {
        if self.dpop_proof_seen_here(proof_hash, expires_at, now) {
            return Ok(false);
        }
        let done = sqlx::query(
            "INSERT INTO dpop_proofs (proof_hash, expires_at) VALUES ($1, $2) \
             ON CONFLICT (proof_hash) DO UPDATE SET expires_at = excluded.expires_at \
             WHERE dpop_proofs.expires_at <= $3",
        )
        .bind(proof_hash)
        .bind(expires_at)
        .bind(now)
        .execute(&self.writer())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Whether this instance has seen the proof `proof_hash` before (unexpired at `now`);
    /// remembers it until `expires_at` (Unix seconds) either way. Memory only: O(1), no I/O.
    pub fn dpop_proof_seen_here(&self, proof_hash: &str, expires_at: i64, now: i64) -> bool {
        let mut seen = locked(&self.dpop_proofs.seen);
        if seen.get(proof_hash).is_some_and(|&until| until > now) {
            return true;
        }
        if seen.len() >= PRUNE_AT {
            seen.retain(|_, until| *until > now);
        }
        seen.insert(proof_hash.to_string(), expires_at);
        false
    }

    /// Records an accepted MCP proof in the shared table, in a batch: the rows gather for
    /// [`RECORD_GATHER`], then one task writes them (at most [`RECORD_BATCH_MAX`] per
    /// statement). Returns at once; a failed write is logged (the proof stays refused on this
    /// instance, which remembers it in memory).
    pub fn record_dpop_proof(&self, proof_hash: String, expires_at: i64) {
        let start = {
            let mut pending = locked(&self.dpop_proofs.pending);
            pending.rows.push((proof_hash, expires_at));
            !std::mem::replace(&mut pending.flushing, true)
        };
        if start {
            let store = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(RECORD_GATHER).await;
                store.flush_dpop_proofs().await;
            });
        }
    }

    /// Writes every pending proof (see [`Store::record_dpop_proof`]).
    async fn flush_dpop_proofs(&self) {
        loop {
            let rows = {
                let mut pending = locked(&self.dpop_proofs.pending);
                if pending.rows.is_empty() {
                    pending.flushing = false;
                    return;
                }
                let take = pending.rows.len().min(RECORD_BATCH_MAX);
                pending.rows.drain(..take).collect::<Vec<_>>()
            };
            if let Err(e) = self.insert_dpop_proofs(&rows).await {
                tracing::warn!(error = %e, rows = rows.len(), "could not record DPoP proofs");
            }
        }
    }

    /// One statement inserting `rows` (proof hash, expiry), keeping existing rows.
    async fn insert_dpop_proofs(&self, rows: &[(String, i64)]) -> Result<(), StoreError> {
        let mut sql = String::from("INSERT INTO dpop_proofs (proof_hash, expires_at) VALUES ");
        for i in 0..rows.len() {
            if i > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!("(${}, ${})", 2 * i + 1, 2 * i + 2));
        }
        sql.push_str(" ON CONFLICT (proof_hash) DO NOTHING");
        let mut query = sqlx::query(&sql);
        for (hash, until) in rows {
            query = query.bind(hash.as_str()).bind(*until);
        }
        query.execute(&self.writer()).await?;
        Ok(())
    }
}
