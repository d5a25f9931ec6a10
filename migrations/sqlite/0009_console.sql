-- Console: "sign out everywhere" and "sign out other sessions" raise the account's session
-- epoch; a browser session is valid only while it carries the epoch it was signed in under.
ALTER TABLE accounts ADD COLUMN session_epoch INTEGER NOT NULL DEFAULT 0;

-- The connected-apps page reads one account's activity per client, newest first.
CREATE INDEX audit_events_account_client ON audit_events (account_id, client_id, id);
