//! Tool-call quotas (issue "The rest of the MCP surface", part 3): each account may make a
//! budget of calls per rolling hour — tool calls, and since issue 30 also `resources/read` and
//! `prompts/get` (reads of notes and exports cost as much as the tools that return them); calls
//! refused for the caller's reach or role (outcomes `forbidden`, `not_found`) are taken back,
//! so one credential's refused calls do not spend the budget of the account's other ones — `GATEHOUSE_QUOTA_CALLS_PER_HOUR`, or the account's
//! own value set with `gatehouse account quota` (0 = unlimited). A call over budget is answered
//! with an `isError` result saying when the budget resets, never an HTTP error (which would make
//! a client authenticate again).
//!
//! Counting adds no database write per call: each process keeps a per-account sliding window of
//! per-minute counts ([`Window`]), seeded from the tool-call audit rows of the last hour (which
//! the batching audit writer writes anyway) and seeded again from them every [`RESYNC_SECS`],
//! so the calls other instances admitted are counted from then on. With several instances on
//! one `PostgreSQL` database an account can therefore overshoot its budget by at most the calls
//! the other instances admitted since this instance's last resync (at most a minute's worth),
//! and never by more than (instances − 1) × budget (docs/design-notes.md).
//!
//! The account's own budget is read with the credential on every call (the lookup that
//! authenticates it joins the account row anyway), so a change made with the command line
//! applies to the next call; with the validation cache on, changing it empties the caches
//! (migration 0013) like any change a lookup reads.

use std::collections::HashMap;
use std::sync::Mutex;

use rmcp::model::{CallToolResult, ContentBlock};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::McpState;
use super::auth::Principal;
use crate::domain::audit::{Event, Outcome};
use crate::domain::quota::{Budget, Window};
use crate::store::Store;
use crate::store::audit::AuditEvent;

/// How often a process counts an account's calls again from the audit rows, in seconds.
pub const RESYNC_SECS: i64 = 60;
/// Accounts tracked before those without a call in the last hour are forgotten.
const PRUNE_AT: usize = 10_000;
/// The audit outcome of a call refused for being over budget.
pub const OVER_QUOTA: Outcome = Outcome::OverQuota;
/// Audit outcomes of admitted calls refused for the caller's reach or role (a project out of
/// reach, a write its role does not allow, something it may not see, a scope it lacks): taken
/// back from the budget ([`QuotaTracker::refund`]) and not counted from the audit rows either.
pub const REFUSED_FOR_REACH: [Outcome; 3] = [
    Outcome::Forbidden,
    Outcome::NotFound,
    Outcome::InsufficientScope,
];

struct Entry {
    window: Window,
    synced_at: i64,
}

/// This process's per-account windows. Cheap to share; one per MCP route.
pub struct QuotaTracker {
    accounts: Mutex<HashMap<String, Entry>>,
    /// Turns of counting an account's window from the database, [`SYNC_TURNS`] of them, an
    /// account's turn chosen by the hash of its id: calls that find the same account's count
    /// due wait for the one counting it and use its result, rather than each counting (and
    /// each waiting for the audit queue, which by then holds the rows of calls admitted by the
    /// first count). Accounts of other turns count at the same time.
    syncing: Box<[tokio::sync::Mutex<()>]>,
    turn_of: std::hash::RandomState,
}

/// How many accounts' windows may be counted from the database at once (at most; two accounts
/// may share a turn).
const SYNC_TURNS: usize = 64;

impl Default for QuotaTracker {
    fn default() -> Self {
        QuotaTracker {
            accounts: Mutex::default(),
            syncing: (0..SYNC_TURNS)
                .map(|_| tokio::sync::Mutex::new(()))
                .collect(),
            turn_of: std::hash::RandomState::new(),
        }
    }
}

/// Whether a call may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It fits the budget and is counted.
    Admitted,
    /// The budget of `limit` calls per hour is spent until `resets_at` (Unix seconds).
    Over {
        /// The account's budget, calls per rolling hour.
        limit: u64,
        /// When one more call fits again.
        resets_at: i64,
    },
}

impl QuotaTracker {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        match self.accounts.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Decides whether `account_id` may make one more call at `now` and counts it if so.
    /// `own` is the account's own budget as read with its credential
    /// ([`Principal::calls_per_hour`]), `default` the server's (0 = unlimited). If the calls of
    /// the last hour cannot be counted, this process's count decides (the failure is logged): a
    /// quota never stops a call because of an outage it did not cause.
    pub async fn admit(
        &self,
        store: &Store,
        account_id: &str,
        own: Option<u64>,
        default: u64,
        now: i64,
    ) -> Verdict {
        let Budget::PerHour(limit) = Budget::from_calls_per_hour(own.unwrap_or(default)) else {
            return Verdict::Admitted;
        };
        let due = |tracker: &QuotaTracker| {
            tracker
                .lock()
                .get(account_id)
                .is_none_or(|e| now - e.synced_at >= RESYNC_SECS || now < e.synced_at)
        };
        let syncing = if due(self) {
            let turn = std::hash::BuildHasher::hash_one(&self.turn_of, account_id) as usize;
            let turn = self.syncing[turn % SYNC_TURNS].lock().await;
            // Another call may have counted this account while this one waited.
            due(self).then_some(turn)
        } else {
            None
        };
        if syncing.is_some() {
            // This process's queued rows first, so its own recent calls are counted.
            store.flush_audit().await;
            match store.tool_calls_per_minute(account_id, now).await {
                Ok(counts) => {
                    let mut accounts = self.lock();
                    if accounts.len() >= PRUNE_AT {
                        accounts.retain(|_, e| !e.window.is_idle(now));
                    }
                    accounts.insert(
                        account_id.to_string(),
                        Entry {
                            window: Window::from_counts(counts, now),
                            synced_at: now,
                        },
                    );
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not count an account's tool calls; using this process's count");
                }
            }
        }
        let mut accounts = self.lock();
        let entry = accounts
            .entry(account_id.to_string())
            .or_insert_with(|| Entry {
                window: Window::default(),
                synced_at: now,
            });
        match entry.window.check(Budget::PerHour(limit), now) {
            Ok(()) => {
                entry.window.record(now);
                Verdict::Admitted
            }
            Err(resets_at) => Verdict::Over { limit, resets_at },
        }
    }
}

impl QuotaTracker {
    /// Takes back the call `account_id` made at `at` if it was refused for its reach or role
    /// (`outcome` one of [`REFUSED_FOR_REACH`]); other outcomes keep it counted.
    pub fn refund(&self, account_id: &str, outcome: Outcome, at: i64) {
        if !REFUSED_FOR_REACH.contains(&outcome) {
            return;
        }
        if let Some(entry) = self.lock().get_mut(account_id) {
            entry.window.unrecord(at);
        }
    }
}

/// The audit outcome of a successful call that continued a read already counted: not counted
/// against the budget, here or from the audit rows.
pub const CONTINUED: Outcome = Outcome::Continued;
/// How long an offered continuation stays free, in seconds.
pub const CONTINUATION_SECS: i64 = 600;
/// Continuations remembered at once; past this, new ones are not offered (their calls count).
const MAX_CONTINUATIONS: usize = 50_000;

/// Continuation calls of one read count once against the quota (issue 38, part 3): when a
/// result names its continuation — the next part of a note (`next_body_from`), the next page of
/// a search (`nextCursor`) or of an export (`next_page`) — this process remembers that exact
/// next call for the account for [`CONTINUATION_SECS`], and that call, made once, is admitted
/// without spending the budget (audited [`CONTINUED`]). Only the SHA-256 of the account and
/// the call is kept. A continuation that reaches another instance is counted like any call.
#[derive(Default)]
pub struct Continuations {
    offered: Mutex<HashMap<[u8; 32], i64>>,
}

impl Continuations {
    fn key(account_id: &str, call: &str) -> [u8; 32] {
        use sha2::Digest;
        sha2::Sha256::digest(format!("{account_id}\n{call}").as_bytes()).into()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], i64>> {
        match self.offered.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Remembers `call` ([`tool_continuation`], [`read_continuation`]) as free for
    /// `account_id` until `now` + [`CONTINUATION_SECS`].
    pub fn offer(&self, account_id: &str, call: &str, now: i64) {
        let mut offered = self.lock();
        if offered.len() >= MAX_CONTINUATIONS {
            offered.retain(|_, until| *until > now);
            if offered.len() >= MAX_CONTINUATIONS {
                return;
            }
        }
        offered.insert(Self::key(account_id, call), now + CONTINUATION_SECS);
    }

    /// Whether `call` was offered to `account_id` and is still free; it is free once.
    pub fn take(&self, account_id: &str, call: &str, now: i64) -> bool {
        self.lock()
            .remove(&Self::key(account_id, call))
            .is_some_and(|until| until > now)
    }
}

/// The continuation a `tools/call` of `tool` with `arguments` makes, if it continues a read:
/// a `cursor` (it names its search), or a `body_from` of a note.
pub fn call_continuation(
    tool: &str,
    arguments: Option<&rmcp::model::JsonObject>,
) -> Option<String> {
    let args = arguments?;
    if let Some(cursor) = args.get("cursor").and_then(serde_json::Value::as_str) {
        return Some(format!("{tool} cursor={cursor}"));
    }
    let from = args.get("body_from").and_then(serde_json::Value::as_u64)?;
    let project = args.get("project_id").and_then(serde_json::Value::as_str)?;
    let note = args.get("note_id").and_then(serde_json::Value::as_str)?;
    Some(format!("{tool} note={project}/{note} body_from={from}"))
}

/// The continuation a tool result offers: the call [`call_continuation`] would see for the
/// next page (`nextCursor`) or part (`next_body_from` of the note `project_id`/`id`).
pub fn tool_continuation(tool: &str, result: &CallToolResult) -> Option<String> {
    let sc = result.structured_content.as_ref()?;
    if let Some(cursor) = sc.get("nextCursor").and_then(serde_json::Value::as_str) {
        return Some(format!("{tool} cursor={cursor}"));
    }
    let from = sc
        .get("next_body_from")
        .and_then(serde_json::Value::as_u64)?;
    let project = sc.get("project_id").and_then(serde_json::Value::as_str)?;
    let note = sc.get("id").and_then(serde_json::Value::as_str)?;
    Some(format!("{tool} note={project}/{note} body_from={from}"))
}

/// The continuation of a `resources/read` of `uri`: a page (`?from=N`) of a document.
pub fn read_continuation(uri: &str) -> Option<String> {
    uri.contains("?from=")
        .then(|| format!("resources/read {uri}"))
}

/// The page a `resources/read` result names (`next_page` of its JSON document), as the
/// continuation its read would make.
pub fn next_page_continuation(result: &rmcp::model::ReadResourceResult) -> Option<String> {
    let rmcp::model::ResourceContents::TextResourceContents { text, .. } =
        result.contents.first()?
    else {
        return None;
    };
    if !text.contains("\"next_page\"") {
        return None;
    }
    let document: serde_json::Value = serde_json::from_str(text).ok()?;
    read_continuation(document.get("next_page")?.as_str()?)
}

/// Admits one counted request of `principal`: `None` when it may run (it is counted), or the
/// budget and its reset time (Unix seconds) when it is spent, after recording the refusal in
/// the audit log as `event` on `subject` (outcome [`OVER_QUOTA`], which never counts against
/// the budget).
async fn admit_or_audit_refusal(
    mcp: &McpState,
    principal: &Principal,
    event: Event,
    subject: &str,
    source_ip: Option<&str>,
    now: i64,
) -> Option<(u64, i64)> {
    let store = &mcp.app.store;
    let default = mcp.app.config.quota_calls_per_hour;
    let Verdict::Over { limit, resets_at } = mcp
        .quotas
        .admit(
            store,
            &principal.account_id,
            principal.calls_per_hour,
            default,
            now,
        )
        .await
    else {
        return None;
    };
    let detail = format!("{} duration_ms=0", principal.audit_credential());
    store
        .audit_batched(
            AuditEvent {
                event,
                outcome: OVER_QUOTA,
                account_id: Some(&principal.account_id),
                client_id: principal.client_id.as_deref(),
                subject: Some(subject),
                source_ip,
                detail: Some(&detail),
            },
            now,
        )
        .await;
    Some((limit, resets_at))
}

/// The quota step of a `resources/read` or `prompts/get` (`event`, the audit event, and
/// `subject`, what it names): `None` when it may run (it is counted), or the JSON-RPC error to
/// answer (these methods have no `isError` result), after auditing the refusal.
pub async fn refuse_read_over_budget(
    mcp: &McpState,
    principal: &Principal,
    event: Event,
    subject: &str,
    source_ip: Option<&str>,
    now: i64,
) -> Option<rmcp::ErrorData> {
    let (limit, resets_at) =
        admit_or_audit_refusal(mcp, principal, event, subject, source_ip, now).await?;
    Some(rmcp::ErrorData::new(
        OVER_QUOTA_CODE,
        over_budget_message(limit, resets_at, now),
        Some(serde_json::json!({ "resetsAt": resets_at, "limit": limit })),
    ))
}

/// The JSON-RPC error code of a `resources/read` or `prompts/get` refused for the budget (in
/// the range JSON-RPC 2.0 §5.1 leaves to servers).
pub const OVER_QUOTA_CODE: rmcp::model::ErrorCode = rmcp::model::ErrorCode(-32029);

/// What the model is told when the budget is spent: the budget and when it resets (RFC 3339,
/// UTC, and in minutes from `now`).
pub fn over_budget_message(limit: u64, resets_at: i64, now: i64) -> String {
    let at = OffsetDateTime::from_unix_timestamp(resets_at)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| resets_at.to_string());
    let minutes = ((resets_at - now).max(0) + 59) / 60;
    let minutes = minutes.max(1);
    format!(
        "This account's budget of {limit} tool calls per rolling hour is spent (resource \
         reads and prompts count too). It resets at {at} (in about {minutes} minute{}); call \
         again then. Nothing was done. The account's usage is shown on its page in the \
         Gatehouse console.",
        if minutes == 1 { "" } else { "s" }
    )
}

/// The quota step of a `tools/call`: `None` when the call may run (it is counted), or the
/// `isError` result to answer — after recording the refusal in the audit log (outcome
/// [`OVER_QUOTA`], which never counts against the budget).
pub async fn refuse_over_budget(
    mcp: &McpState,
    principal: &Principal,
    tool: &str,
    source_ip: Option<&str>,
    now: i64,
) -> Option<CallToolResult> {
    let (limit, resets_at) =
        admit_or_audit_refusal(mcp, principal, Event::ToolCall, tool, source_ip, now).await?;
    Some(CallToolResult::error(vec![ContentBlock::text(
        over_budget_message(limit, resets_at, now),
    )]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_budget_and_the_reset_time() {
        let m = over_budget_message(100, 1_700_000_040, 1_700_000_000);
        assert!(m.contains("100 tool calls per rolling hour"), "{m}");
        assert!(m.contains("2023-11-14T22:14:00Z"), "{m}");
        assert!(m.contains("in about 1 minute)"), "{m}");
        let m = over_budget_message(5, 1_700_000_000 + 600, 1_700_000_000);
        assert!(m.contains("in about 10 minutes"), "{m}");
    }
}
