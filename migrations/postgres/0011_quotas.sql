-- Tool-call quotas (issue "The rest of the MCP surface", part 3): an account's own budget of
-- tool calls per rolling hour, set with `gatehouse account quota EMAIL --calls-per-hour N`.
-- NULL: the server's default (GATEHOUSE_QUOTA_CALLS_PER_HOUR); 0: unlimited. Calls are
-- counted from the tool-call audit rows, never written per call.
ALTER TABLE accounts ADD COLUMN calls_per_hour BIGINT;
-- Counting an account's recent tool calls reads the audit rows by account and time.
CREATE INDEX audit_events_account_at ON audit_events (account_id, at);
