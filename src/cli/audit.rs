//! `gatehouse audit`: the audit log for operators (issue 38 part 5; the seeds' call log that
//! people can read): who, with which client, did what, in which project, when and how it
//! ended — never arguments, results or secrets, which are not kept.

use super::{CliError, account_filter, listing, timestamp};
use crate::store::Store;
use crate::store::audit_query::{AuditEntry, AuditFilter, MAX_AUDIT_ROWS};

/// `gatehouse audit [filters] [--json]`.
#[derive(Debug, Clone, clap::Args)]
pub struct AuditArgs {
    /// Only rows about this account (by email).
    #[arg(long, value_name = "EMAIL")]
    pub account: Option<String>,
    /// Only rows about this OAuth client.
    #[arg(long, value_name = "CLIENT_ID")]
    pub client: Option<String>,
    /// Only rows about this project.
    #[arg(long, value_name = "PROJECT_ID")]
    pub project: Option<String>,
    /// Only rows of this event kind, e.g. `tool_call`, `signin`, `consent`, `key_created`.
    #[arg(long, value_name = "KIND")]
    pub event: Option<String>,
    /// Only rows of the last DURATION: seconds, minutes, hours or days, e.g. 90s, 15m, 1h, 7d.
    #[arg(long, value_name = "DURATION")]
    pub since: Option<String>,
    /// Most rows shown, newest first (1 to 10000).
    #[arg(long, default_value_t = 100)]
    pub limit: i64,
    /// One JSON array of the rows instead of text lines.
    #[arg(long)]
    pub json: bool,
}

/// A duration such as `90s`, `15m`, `1h` or `7d`, in seconds (at most 100 years).
///
/// Errors: a sentence naming the accepted forms.
pub fn parse_since(raw: &str) -> Result<i64, CliError> {
    let bad = || {
        CliError(format!(
            "--since must be a number followed by s, m, h or d, e.g. 1h or 7d (got \"{raw}\")"
        ))
    };
    let raw = raw.trim();
    let unit = raw.chars().last().ok_or_else(bad)?;
    let seconds = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return Err(bad()),
    };
    let n: i64 = raw[..raw.len() - 1].parse().map_err(|_| bad())?;
    if !(1..=36_500 * 86_400).contains(&n) {
        return Err(bad());
    }
    n.checked_mul(seconds)
        .filter(|s| *s <= 36_500 * 86_400)
        .ok_or_else(bad)
}

/// One text line of a row: time, event, outcome, account, client, subject, project, address,
/// detail (tab-separated; `-` for what is absent; names quoted with their escapes).
fn line(e: &AuditEntry) -> String {
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_string());
    let who = e.email.clone().or_else(|| e.account_id.clone());
    let client = match (&e.client_id, &e.client_name) {
        (Some(id), Some(name)) => format!("{name:?} ({id})"),
        (Some(id), None) => id.clone(),
        _ => "-".to_string(),
    };
    [
        timestamp(e.at),
        e.event.clone(),
        e.outcome.clone(),
        dash(&who),
        client,
        dash(&e.subject),
        dash(&e.project_id),
        dash(&e.source_ip),
        dash(&e.detail),
    ]
    .join("\t")
}

/// Runs `gatehouse audit`; the text to print.
pub(super) async fn run(store: &Store, args: AuditArgs, now: i64) -> Result<String, CliError> {
    if !(1..=MAX_AUDIT_ROWS).contains(&args.limit) {
        return Err(CliError(format!(
            "--limit must be from 1 to {MAX_AUDIT_ROWS} (got {})",
            args.limit
        )));
    }
    let since = args.since.as_deref().map(parse_since).transpose()?;
    let filter = AuditFilter {
        account_id: account_filter(store, args.account.as_deref()).await?,
        client_id: args.client,
        project_id: args.project,
        event: args.event,
        since: since.map(|s| now - s),
        mcp_only: false,
        connections_only: false,
    };
    let entries = store.audit_entries(&filter, args.limit).await?;
    if args.json {
        return serde_json::to_string_pretty(&entries)
            .map_err(|e| CliError(format!("cannot encode the rows: {e}")));
    }
    Ok(listing(
        "at\tevent\toutcome\taccount\tclient\tsubject\tproject\tsource\tdetail",
        entries.iter().map(line),
        "no audit rows match",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_read_in_their_units() {
        assert_eq!(parse_since("90s").unwrap(), 90);
        assert_eq!(parse_since("15m").unwrap(), 900);
        assert_eq!(parse_since("1h").unwrap(), 3600);
        assert_eq!(parse_since("7d").unwrap(), 604_800);
        for bad in ["", "h", "1", "1w", "-1h", "0d", "99999999d", "1.5h", "é"] {
            assert!(parse_since(bad).is_err(), "{bad}");
        }
    }
}
