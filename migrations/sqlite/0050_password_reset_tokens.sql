-- A way back from a lost password: one-time reset links (`gatehouse account reset-link`, and
-- "Forgot your password?" mailed when SMTP is configured). Like setup_tokens, the link's random
-- token is kept only as its SHA-256; it is good for one use within an hour, and spending one
-- voids the account's other unused links.
CREATE TABLE password_reset_tokens (
    token_hash TEXT PRIMARY KEY,                 -- SHA-256 hex of the link's token
    account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER
);
CREATE INDEX password_reset_tokens_account ON password_reset_tokens (account_id);
