//! The one upkeep task that deletes what is past its retention, so the database stops
//! growing: the audit rows older than `GATEHOUSE_AUDIT_RETENTION_DAYS`, and the expired or
//! revoked credentials, spent codes, replay records and rate-limit counters of
//! [`crate::store::audit_query::CREDENTIAL_RETENTIONS`], and the ended browser sessions
//! ([`sessions_pruning`]). Another kind of old rows joins by
//! adding a [`Pruning`] to [`prunings`] (a [`crate::store::audit_query::Retention`]: a name
//! and a statement deleting one batch). Deleted rows are counted in
//! `gatehouse_pruned_rows_total{what="<table>"}`.
//!
//! Every [`UPKEEP_EVERY`] (the first round [`FIRST_ROUND_AFTER`] after start) each pruning
//! deletes in batches of [`BATCH`] rows, each batch its own short transaction, at most
//! [`MAX_BATCHES`] batches per round with a pause of [`PAUSE`] between them, so neither a
//! long lock nor a long burst of writes competes with requests; what is left waits for the
//! next round. On `PostgreSQL` every batch takes an advisory lock first, so one instance at a
//! time prunes and the others skip the round.

use std::time::Duration;

use crate::config::Config;
use crate::store::Store;
use crate::store::audit_query::{AUDIT_RETENTION, CREDENTIAL_RETENTIONS, Retention};

/// Time between rounds: ten minutes.
pub const UPKEEP_EVERY: Duration = Duration::from_secs(600);
/// Time from start to the first round.
pub const FIRST_ROUND_AFTER: Duration = Duration::from_secs(60);
/// Rows deleted per transaction ([`crate::store::PRUNE_BATCH`]).
pub const BATCH: i64 = crate::store::PRUNE_BATCH;
/// Batches per pruning per round.
pub const MAX_BATCHES: usize = 100;
/// Pause between two batches.
pub const PAUSE: Duration = Duration::from_millis(50);

/// One kind of old rows and how old they may get.
#[derive(Debug, Clone, Copy)]
pub struct Pruning {
    /// What to delete.
    pub retention: Retention,
    /// Rows older than this many seconds go.
    pub max_age_secs: i64,
}

/// The prunings `config` asks for: the audit rows unless `GATEHOUSE_AUDIT_RETENTION_DAYS` is 0,
/// then every [`CREDENTIAL_RETENTIONS`].
pub fn prunings(config: &Config) -> Vec<Pruning> {
    let mut list = Vec::new();
    let days = config.surface.audit_retention_days;
    if days > 0 {
        list.push(Pruning {
            retention: AUDIT_RETENTION,
            max_age_secs: days * 86_400,
        });
    }
    list.extend(credential_prunings());
    list
}

/// The [`CREDENTIAL_RETENTIONS`] as prunings.
pub fn credential_prunings() -> impl Iterator<Item = Pruning> {
    CREDENTIAL_RETENTIONS
        .iter()
        .map(|&(retention, max_age_secs)| Pruning {
            retention,
            max_age_secs,
        })
}

/// The ended browser sessions of `store`'s engine, deleted once past their expiry
/// ([`Store::sessions_retention`]).
pub fn sessions_pruning(store: &Store) -> Pruning {
    Pruning {
        retention: store.sessions_retention(),
        max_age_secs: 0,
    }
}

/// What one round did for one pruning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pruned {
    /// The pruning's name.
    pub name: &'static str,
    /// Rows deleted.
    pub deleted: u64,
    /// Another instance held the lock: this round left it to that instance.
    pub skipped: bool,
}

/// One round at `now`: each pruning deletes in batches of `batch` rows until a batch deletes
/// fewer, `max_batches` have run, another instance holds the lock, or the database refuses
/// (logged). Ends: at most `max_batches` batches per pruning.
pub async fn prune_round(
    store: &Store,
    prunings: &[Pruning],
    now: i64,
    batch: i64,
    max_batches: usize,
) -> Vec<Pruned> {
    let mut done = Vec::new();
    for p in prunings {
        let cutoff = now - p.max_age_secs;
        let mut pruned = Pruned {
            name: p.retention.name,
            deleted: 0,
            skipped: false,
        };
        for round in 0..max_batches {
            if round > 0 {
                tokio::time::sleep(PAUSE).await;
            }
            match store.prune_batch(&p.retention, cutoff, batch).await {
                Ok(Some(n)) => {
                    pruned.deleted += n;
                    if (n as i64) < batch {
                        break;
                    }
                }
                Ok(None) => {
                    pruned.skipped = true;
                    break;
                }
                Err(e) => {
                    tracing::error!(pruning = p.retention.name, error = %e, "could not prune");
                    break;
                }
            }
        }
        metrics::counter!(crate::metrics::PRUNED_ROWS, "what" => p.retention.name)
            .increment(pruned.deleted);
        if pruned.deleted > 0 {
            tracing::info!(pruning = pruned.name, deleted = pruned.deleted, "pruned");
        }
        done.push(pruned);
    }
    done
}

/// Runs the upkeep rounds for as long as the server runs.
pub async fn run(store: Store, config: std::sync::Arc<Config>) {
    let mut prunings = prunings(&config);
    prunings.push(sessions_pruning(&store));
    tokio::time::sleep(FIRST_ROUND_AFTER).await;
    let mut tick = tokio::time::interval(UPKEEP_EVERY);
    loop {
        tick.tick().await;
        prune_round(&store, &prunings, crate::store::now(), BATCH, MAX_BATCHES).await;
    }
}
