-- Passkeys (issue 36, item 2): WebAuthn credentials people sign in with, and the ceremonies
-- (registration, sign-in) begun and not yet finished.
--
-- passkey holds the webauthn-rs Passkey as JSON: the credential's public key, its signature
-- counter and backup flags (no secret: a passkey's private key never leaves the authenticator).
-- credential_id is the credential's id in unpadded base64url, unique across accounts: an
-- assertion names it, and it finds the row.
CREATE TABLE passkeys (
    id            TEXT PRIMARY KEY,
    account_id    TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    credential_id TEXT NOT NULL UNIQUE,
    name          TEXT NOT NULL,
    passkey       TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    last_used_at  INTEGER
);
CREATE INDEX passkeys_account ON passkeys (account_id);

-- A ceremony begun: the browser holds its id, the row only the id's SHA-256. state is the
-- webauthn-rs ceremony state as JSON (the challenge the answer must sign). A row is taken
-- (deleted) by the first answer, right or wrong, so a challenge is answered at most once;
-- rows past expires_at are never taken and are pruned. Any instance sharing the database can
-- finish a ceremony another began.
CREATE TABLE webauthn_ceremonies (
    id_hash    TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    account_id TEXT REFERENCES accounts(id) ON DELETE CASCADE,
    name       TEXT,
    state      TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX webauthn_ceremonies_expiry ON webauthn_ceremonies (expires_at);
