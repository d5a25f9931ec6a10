//! The validation cache is only as fresh as the triggers that announce changes
//! ([`super::auth_cache`]): a cached lookup that reads a table (or a column) no trigger watches
//! would serve an answer revoked in that table for up to
//! [`CACHE_TTL`](super::auth_cache::CACHE_TTL) seconds. This test reads the SQL of every cached
//! lookup and both migration folders, and asserts that every table a lookup names announces
//! every change that can turn a live answer dead, on both engines:
//!
//! - a deleted row, always;
//! - an updated row, for every column of the table the lookup names (a trigger limited to
//!   `UPDATE OF a, b`, or `PostgreSQL`'s `WHEN (to_jsonb(OLD) - 'c' ...)`, must cover them);
//! - a new row, where its mere presence changes the answer ([`INSERT_MATTERS`]).
//!
//! Triggers are followed through the migrations in order (`DROP TRIGGER` removes one, a later
//! `CREATE TRIGGER` of the same name replaces it). A `SQLite` trigger announces when its body
//! raises the generation row; a `PostgreSQL` trigger when it runs the function that notifies
//! [`AUTH_CHANNEL`](super::auth_cache::AUTH_CHANNEL).

// Test code: the 100-line bound is for the library.
#![allow(clippy::too_many_lines)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::auth_cache::{AUTH_CHANNEL, Kind};

/// Columns a lookup reads whose changes are deliberately not announced, with the reason.
const UNANNOUNCED: &[(&str, &str, &str)] = &[
    (
        "api_keys",
        "last_used_at",
        "written at most once a minute per key; only decides whether the next use is written, \
         by a conditional UPDATE (migration 0015_last_use_unannounced)",
    ),
    (
        "personal_urls",
        "last_used_at",
        "as for api_keys (migration 0015_last_use_unannounced)",
    ),
];

/// Tables a new row of which can turn a live answer dead: a `service_clients` row makes the
/// family's tokens project tokens, live only while the project is active and the account a
/// member (the other joined tables only add life by a new row, or are reached by a key that
/// must already exist).
const INSERT_MATTERS: &[&str] = &["service_clients"];

/// Which updates of a table a trigger announces.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Updates {
    /// Every update.
    All,
    /// Updates of these columns (`UPDATE OF ...`).
    Of(BTreeSet<String>),
    /// Updates that change any column but these (`WHEN (to_jsonb(OLD) - 'c') IS DISTINCT ...`).
    AllBut(BTreeSet<String>),
}

impl Updates {
    fn covers(&self, column: &str) -> bool {
        match self {
            Updates::All => true,
            Updates::Of(columns) => columns.contains(column),
            Updates::AllBut(columns) => !columns.contains(column),
        }
    }
}

/// One announcing trigger, as the migrations leave it.
#[derive(Debug, Clone)]
struct Trigger {
    table: String,
    insert: bool,
    delete: bool,
    update: Option<Updates>,
}

fn migrations(engine: &str) -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(engine);
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                text,
            )
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no migrations in {}", dir.display());
    files
}

/// `text` without `--` comments, lowercased, on one line.
fn normalized(text: &str) -> String {
    text.lines()
        .map(|line| line.split_once("--").map_or(line, |(code, _)| code))
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Words of `text`: identifiers (with one `.` for `alias.column`) and single punctuation.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '$' {
            current.push(c);
        } else {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Every announcing trigger left standing by `engine`'s migrations, by (table, name).
fn triggers(engine: &str) -> BTreeMap<(String, String), Trigger> {
    let announce = match engine {
        "sqlite" => "update auth_generation set generation = generation + 1".to_string(),
        _ => "execute function gatehouse_auth_changed()".to_string(),
    };
    if engine == "postgres" {
        let all = migrations(engine)
            .into_iter()
            .map(|(_, text)| text)
            .collect::<String>();
        assert!(
            all.contains(&format!("pg_notify('{AUTH_CHANNEL}'")),
            "no PostgreSQL migration notifies {AUTH_CHANNEL}"
        );
    }
    let mut standing: BTreeMap<(String, String), Trigger> = BTreeMap::new();
    for (file, text) in migrations(engine) {
        let text = normalized(&text);
        // Each statement that creates or drops a trigger, up to the next one that does.
        let mut rest = text.as_str();
        while let Some(at) = [rest.find("create trigger "), rest.find("drop trigger ")]
            .into_iter()
            .flatten()
            .min()
        {
            rest = &rest[at..];
            let next = [
                rest[1..].find("create trigger "),
                rest[1..].find("drop trigger "),
                rest[1..].find("create function "),
                rest[1..].find("create table "),
            ]
            .into_iter()
            .flatten()
            .min()
            .map_or(rest.len(), |n| n + 1);
            let statement = &rest[..next];
            rest = &rest[next..];
            // The statement alone: a SQLite trigger ends at its body's `END;`, anything else
            // at its first `;`.
            let end = match statement.find(" begin ") {
                Some(_) => statement.find(" end;").map(|n| n + 5),
                None => statement.find(';').map(|n| n + 1),
            };
            let statement = &statement[..end.unwrap_or(statement.len())];
            let w = words(statement);
            if w[0] == "drop" {
                // drop trigger [if exists] NAME [on TABLE]
                let mut i = 2;
                if w[i] == "if" {
                    i += 2;
                }
                let name = w[i].clone();
                let table =
                    (w.get(i + 1).map(String::as_str) == Some("on")).then(|| w[i + 2].clone());
                standing.retain(|(t, n), _| {
                    !(n == &name && table.as_ref().is_none_or(|table| table == t))
                });
                continue;
            }
            let name = w[2].clone();
            if !statement.contains(&announce) {
                continue;
            }
            assert_eq!(w[3], "after", "{file}: trigger {name} is not AFTER");
            let on = w
                .iter()
                .position(|x| x == "on")
                .unwrap_or_else(|| panic!("{file}: trigger {name} names no table"));
            let table = w[on + 1].clone();
            let mut trigger = Trigger {
                table: table.clone(),
                insert: false,
                delete: false,
                update: None,
            };
            // The events: UPDATE [OF a, b] [OR DELETE] [OR INSERT] ...
            let events = &w[4..on];
            let mut i = 0;
            while i < events.len() {
                match events[i].as_str() {
                    "insert" => trigger.insert = true,
                    "delete" => trigger.delete = true,
                    "update" => {
                        if events.get(i + 1).map(String::as_str) == Some("of") {
                            let mut columns = BTreeSet::new();
                            i += 2;
                            while i < events.len() && events[i] != "or" {
                                if events[i] != "," {
                                    columns.insert(events[i].clone());
                                }
                                i += 1;
                            }
                            trigger.update = Some(Updates::Of(columns));
                            continue;
                        }
                        trigger.update = Some(Updates::All);
                    }
                    "or" => {}
                    other => panic!("{file}: trigger {name}: unexpected event word {other:?}"),
                }
                i += 1;
            }
            // A WHEN condition narrows the updates it announces; only the shape that compares
            // whole rows less some columns is understood (anything else fails the test).
            if let Some((_, when)) = statement.split_once(" when ") {
                let when = when.split(" execute ").next().unwrap_or(when);
                let compared = "(to_jsonb(old)";
                assert!(
                    when.contains(compared) && when.contains("is distinct from (to_jsonb(new)"),
                    "{file}: trigger {name}: WHEN condition not understood: {when}"
                );
                let before = when.split(" is distinct from ").next().unwrap_or_default();
                let left_out: BTreeSet<String> = before
                    .split("- '")
                    .skip(1)
                    .filter_map(|s| s.split('\'').next())
                    .map(str::to_string)
                    .collect();
                if trigger.update.is_some() {
                    trigger.update = Some(Updates::AllBut(left_out));
                }
            }
            standing.insert((table, name), trigger);
        }
    }
    standing
}

/// The tables `sql` names (`FROM`/`JOIN`), each with the columns it reads of it.
fn tables_read(sql: &str) -> BTreeMap<String, BTreeSet<String>> {
    const KEYWORDS: &[&str] = &[
        "select", "from", "join", "left", "inner", "on", "where", "and", "or", "not", "is", "null",
        "as", "in", "exists", "order", "by", "limit", "group", "true", "false",
    ];
    // String literals ('active') are values, not names.
    let unquoted: String = normalized(sql)
        .split('\'')
        .step_by(2)
        .collect::<Vec<_>>()
        .join(" ");
    let w = words(&unquoted);
    // alias → table
    let mut aliases: BTreeMap<String, String> = BTreeMap::new();
    let mut tables: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (i, word) in w.iter().enumerate() {
        if word == "from" || word == "join" {
            let table = w[i + 1].clone();
            tables.entry(table.clone()).or_default();
            if let Some(alias) = w.get(i + 2).filter(|a| !KEYWORDS.contains(&a.as_str())) {
                aliases.insert(alias.clone(), table.clone());
            }
            aliases.insert(table.clone(), table);
        }
    }
    let only = (tables.len() == 1).then(|| tables.keys().next().unwrap().clone());
    for (i, word) in w.iter().enumerate() {
        let after_as = i > 0 && w[i - 1] == "as";
        let is_name = word.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
        if !is_name || after_as || KEYWORDS.contains(&word.as_str()) {
            continue;
        }
        if let Some((alias, column)) = word.split_once('.') {
            let table = aliases
                .get(alias)
                .unwrap_or_else(|| panic!("unknown alias {alias} in {sql}"));
            tables.get_mut(table).unwrap().insert(column.to_string());
        } else if !aliases.contains_key(word) && w.get(i + 1).map(String::as_str) != Some("(") {
            // An unqualified column: of the only table, or a name this reading cannot place
            // (the test then fails rather than miss a column).
            let table = only
                .as_ref()
                .unwrap_or_else(|| panic!("unqualified column {word} in a join: {sql}"));
            tables.get_mut(table).unwrap().insert(word.clone());
        }
    }
    tables
}

fn gaps(engine: &str) -> Vec<String> {
    let standing = triggers(engine);
    let mut gaps = Vec::new();
    for kind in Kind::ALL {
        let sql = kind.lookup_sql();
        for (table, columns) in tables_read(&sql) {
            let on_table: Vec<&Trigger> = standing.values().filter(|t| t.table == table).collect();
            if !on_table.iter().any(|t| t.delete) {
                gaps.push(format!(
                    "{engine}: {kind:?} reads {table}: a deleted row is not announced"
                ));
            }
            if INSERT_MATTERS.contains(&table.as_str()) && !on_table.iter().any(|t| t.insert) {
                gaps.push(format!(
                    "{engine}: {kind:?} reads {table}: a new row is not announced"
                ));
            }
            for column in &columns {
                let exempt = UNANNOUNCED
                    .iter()
                    .any(|(t, c, _)| *t == table && c == column);
                let covered = on_table
                    .iter()
                    .any(|t| t.update.as_ref().is_some_and(|u| u.covers(column)));
                if !exempt && !covered {
                    gaps.push(format!(
                        "{engine}: {kind:?} reads {table}.{column}: its update is not announced"
                    ));
                }
            }
        }
    }
    gaps
}

#[test]
fn every_table_a_cached_lookup_reads_announces_its_changes_on_both_engines() {
    let mut missed = gaps("sqlite");
    missed.extend(gaps("postgres"));
    assert!(
        missed.is_empty(),
        "changes the validation cache would miss:\n{}",
        missed.join("\n")
    );
}

#[test]
fn the_lookups_are_read_as_the_tables_and_columns_they_name() {
    let access = tables_read(&Kind::AccessToken.lookup_sql());
    let names: Vec<&str> = access.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "access_tokens",
            "accounts",
            "consents",
            "memberships",
            "projects",
            "service_clients",
            "token_families"
        ]
    );
    for (table, column) in [
        ("accounts", "calls_per_hour"),
        ("accounts", "status"),
        ("projects", "status"),
        ("memberships", "account_id"),
        ("access_tokens", "revoked_at"),
    ] {
        assert!(access[table].contains(column), "{table}.{column}");
    }
    assert!(
        !access["accounts"].contains("active"),
        "a literal read as a column"
    );
    let client = tables_read(&Kind::Client.lookup_sql());
    assert_eq!(client.keys().collect::<Vec<_>>(), ["oauth_clients"]);
    assert!(client["oauth_clients"].contains("revoked_at"));
    assert!(client["oauth_clients"].contains("client_secret_hash"));
    let url = tables_read(&Kind::PersonalUrl.lookup_sql());
    assert!(url["personal_urls"].contains("url_hash"));
    assert!(url["personal_urls"].contains("last_used_at"));
}

#[test]
fn the_migrations_are_read_as_the_triggers_they_leave() {
    let only = |columns: &[&str]| columns.iter().map(|c| (*c).to_string()).collect();
    let key = |table: &str, name: &str| (table.to_string(), name.to_string());
    // SQLite: 0015 replaced the api_keys trigger by one naming every column but the last use.
    let sqlite = triggers("sqlite");
    let keys = &sqlite[&key("api_keys", "auth_gen_api_keys_update")];
    assert!(
        matches!(&keys.update, Some(Updates::Of(c)) if c.contains("revoked_at") && !c.contains("last_used_at")),
        "{keys:?}"
    );
    assert!(sqlite[&key("service_clients", "auth_gen_service_clients_insert")].insert);
    // PostgreSQL: 0015 dropped the statement trigger of 0012 and compares rows less the last use.
    let postgres = triggers("postgres");
    assert!(!postgres.contains_key(&key("api_keys", "auth_gen_api_keys")));
    let keys = &postgres[&key("api_keys", "auth_gen_api_keys_update")];
    assert_eq!(keys.update, Some(Updates::AllBut(only(&["last_used_at"]))));
    let accounts = &postgres[&key("accounts", "auth_gen_accounts")];
    assert!(accounts.delete && !accounts.insert);
    assert!(
        accounts
            .update
            .as_ref()
            .is_some_and(|u| u.covers("calls_per_hour"))
    );
    assert!(!Updates::Of(only(&["status"])).covers("calls_per_hour"));
}
