-- Browsers that signed in to an account before (issue 30, finding 3; NIST SP 800-63B §5.2.2):
-- after a successful sign-in the browser gets a random device cookie, stored here as its
-- SHA-256. A right password from such a browser gets through the account's sign-in delay, so
-- strangers guessing from elsewhere cannot lock the owner out. A wrong one from it while the
-- delay runs deletes the row (a stolen cookie is good for one guess at most).
CREATE TABLE signin_devices (
    device_hash TEXT PRIMARY KEY,                -- SHA-256 hex of the cookie's value
    account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX signin_devices_account ON signin_devices (account_id, created_at);
CREATE INDEX signin_devices_expires ON signin_devices (expires_at);
