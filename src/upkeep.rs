//! The one upkeep task that deletes what is past its retention, so the database stops
//! growing: the audit rows older than `GATEHOUSE_AUDIT_RETENTION_DAYS`, and the expired or
//! revoked credentials, spent codes, replay records and rate-limit counters of
//! [`crate::store::audit_query::CREDENTIAL_RETENTIONS`], and the ended browser sessions
//! ([`sessions_pruning`]). Another kind of old rows joins by
//! adding a [`Pruning`] to [`prunings`] (a [`crate::store::audit_query::Retention`]: a name
//! and a statement deleting one batch). Deleted rows are counted in
//! `gatehouse_pruned_rows_total{what="<table>"}`.
//!
//! Every [`UPKEEP_EVERY`] (the first round [`FIRST_ROUND_AFTER`] after start; both shorter
//! with a shorter `GATEHOUSE_UPKEEP_INTERVAL`, see [`first_round_after`]) each pruning
//! deletes in batches of [`BATCH`] rows, each batch its own short transaction, at most
//! [`MAX_BATCHES`] batches per round with a pause of [`PAUSE`] between them, so neither a
//! long lock nor a long burst of writes competes with requests; what is left waits for the
//! next round. On `PostgreSQL` every batch takes an advisory lock first, so one instance at a
//! time prunes and the others skip the round.

use std::time::Duration;

use crate::config::Config;
use crate::store::Store;
use crate::store::audit_query::{AUDIT_RETENTION, CREDENTIAL_RETENTIONS, Retention};

/// Time between rounds by default (`GATEHOUSE_UPKEEP_INTERVAL`): ten minutes.
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

/// The prunings `config` asks for: the audit rows older than
/// `GATEHOUSE_AUDIT_RETENTION_SECONDS`, or else `GATEHOUSE_AUDIT_RETENTION_DAYS` unless that is
/// 0; then every [`CREDENTIAL_RETENTIONS`], each kept for `GATEHOUSE_CREDENTIAL_RETENTION_SECONDS`
/// when that is set (those deleted at once, after 0 s, stay at 0).
pub fn prunings(config: &Config) -> Vec<Pruning> {
    let mut list = Vec::new();
    let audit_secs = config
        .surface
        .audit_retention_secs
        .unwrap_or(config.surface.audit_retention_days * 86_400);
    if audit_secs > 0 {
        list.push(Pruning {
            retention: AUDIT_RETENTION,
            max_age_secs: audit_secs,
        });
    }
    let kept = config.surface.credential_retention_secs;
    list.extend(credential_prunings().map(|p| Pruning {
        max_age_secs: match kept {
            Some(secs) if p.max_age_secs > 0 => secs,
            _ => p.max_age_secs,
        },
        ..p
    }));
    list
}

/// Time between two rounds: `GATEHOUSE_UPKEEP_INTERVAL` ([`UPKEEP_EVERY`] by default).
pub fn interval(config: &Config) -> Duration {
    Duration::from_secs(config.surface.upkeep_interval_secs.max(1).unsigned_abs())
}

/// Time from start to the first round: [`FIRST_ROUND_AFTER`], or the interval when shorter.
pub fn first_round_after(config: &Config) -> Duration {
    FIRST_ROUND_AFTER.min(interval(config))
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

/// Rows an instance deletes from one table, over its rounds, before it vacuums that table
/// (`PostgreSQL`; [`Vacuums`]).
pub const VACUUM_AFTER_ROWS: u64 = 10_000;

/// When to vacuum what was pruned, on `PostgreSQL`: the rows a `DELETE` removes stay in the
/// table's files until a vacuum marks their space free for new rows, and autovacuum comes
/// when a fifth of a table is dead and at most once a minute, so under steady churn (tool
/// calls adding audit rows as fast as pruning deletes them) the files kept growing in the
/// soak. After [`VACUUM_AFTER_ROWS`] rows deleted from a table the instance that deleted
/// them runs `VACUUM (ANALYZE)` on it, which takes no lock that stops reads or writes. The
/// files then stay at the size the live rows and one interval's churn need (they are not
/// shrunk: that would be `VACUUM FULL`, which locks the table). `SQLite` reuses freed pages
/// itself.
#[derive(Debug, Default)]
pub struct Vacuums {
    deleted: std::collections::HashMap<&'static str, u64>,
}

impl Vacuums {
    /// Counts `round`'s deletions; returns the tables now due a vacuum (counts reset).
    pub fn due(&mut self, round: &[Pruned]) -> Vec<&'static str> {
        let mut due = Vec::new();
        for p in round {
            // Sessions live in tower-sessions' own table, under another name.
            if p.deleted == 0 || p.name == "sessions" {
                continue;
            }
            let n = self.deleted.entry(p.name).or_default();
            *n += p.deleted;
            if *n >= VACUUM_AFTER_ROWS {
                *n = 0;
                due.push(p.name);
            }
        }
        due
    }
}

/// Runs the upkeep rounds for as long as the server runs.
pub async fn run(store: Store, config: std::sync::Arc<Config>) {
    let mut prunings = prunings(&config);
    prunings.push(sessions_pruning(&store));
    tokio::time::sleep(first_round_after(&config)).await;
    let mut tick = tokio::time::interval(interval(&config));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut vacuums = Vacuums::default();
    loop {
        tick.tick().await;
        let round = prune_round(&store, &prunings, crate::store::now(), BATCH, MAX_BATCHES).await;
        if store.backend() == crate::store::Backend::Postgres {
            for table in vacuums.due(&round) {
                if let Err(e) = store.vacuum(table).await {
                    tracing::warn!(table, error = %e, "could not vacuum a pruned table");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Config {
        let vars: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_vars(&vars).unwrap()
    }

    fn ages(list: &[Pruning]) -> Vec<(&'static str, i64)> {
        list.iter()
            .map(|p| (p.retention.name, p.max_age_secs))
            .collect()
    }

    #[test]
    fn a_table_is_due_a_vacuum_after_ten_thousand_rows_pruned_over_rounds() {
        let pruned = |name: &'static str, deleted: u64| Pruned {
            name,
            deleted,
            skipped: false,
        };
        let mut vacuums = Vacuums::default();
        let none: Vec<&str> = Vec::new();
        assert_eq!(
            vacuums.due(&[pruned("audit_events", 6_000), pruned("sessions", 50_000)]),
            none,
            "sessions are another table; 6,000 rows are not enough"
        );
        assert_eq!(
            vacuums.due(&[
                pruned("audit_events", 4_000),
                pruned("access_tokens", 10_000)
            ]),
            ["audit_events", "access_tokens"]
        );
        assert_eq!(
            vacuums.due(&[pruned("audit_events", 9_999)]),
            none,
            "counted again from 0"
        );
    }

    #[test]
    fn built_in_retention_by_default() {
        let c = config(&[]);
        let list = prunings(&c);
        assert_eq!(list[0].retention.name, "audit_events");
        assert_eq!(list[0].max_age_secs, 90 * 86_400);
        assert_eq!(
            ages(&list[1..]),
            ages(&credential_prunings().collect::<Vec<_>>())
        );
        assert!(list.iter().any(|p| p.max_age_secs == 30 * 86_400));
        assert_eq!(interval(&c), Duration::from_secs(600));
        assert_eq!(first_round_after(&c), Duration::from_secs(60));
        let c = config(&[("GATEHOUSE_AUDIT_RETENTION_DAYS", "0")]);
        assert!(
            prunings(&c)
                .iter()
                .all(|p| p.retention.name != "audit_events")
        );
    }

    #[test]
    fn retention_in_seconds_replaces_the_built_in_times() {
        let c = config(&[
            ("GATEHOUSE_AUDIT_RETENTION_DAYS", "0"),
            ("GATEHOUSE_AUDIT_RETENTION_SECONDS", "120"),
            ("GATEHOUSE_CREDENTIAL_RETENTION_SECONDS", "30"),
            ("GATEHOUSE_UPKEEP_INTERVAL", "5"),
        ]);
        let list = prunings(&c);
        assert_eq!(list[0].retention.name, "audit_events");
        assert_eq!(list[0].max_age_secs, 120);
        let built_in: Vec<_> = credential_prunings().collect();
        assert_eq!(list.len(), built_in.len() + 1);
        for (p, b) in list[1..].iter().zip(&built_in) {
            assert_eq!(p.retention.name, b.retention.name);
            let want = if b.max_age_secs == 0 { 0 } else { 30 };
            assert_eq!(p.max_age_secs, want, "{}", p.retention.name);
        }
        assert_eq!(interval(&c), Duration::from_secs(5));
        assert_eq!(first_round_after(&c), Duration::from_secs(5));
    }
}
