-- A second factor (issue 36, item 3): one TOTP authenticator per account (RFC 6238) and ten
-- single-use recovery codes.
--
-- The TOTP secret must be read back to check codes, so it is sealed with the server key
-- (GATEHOUSE_SECRET_KEY or the key file, like upstream secrets), never stored in the clear.
-- confirmed_at is NULL while the person is enrolling (a code not yet entered): such a row asks
-- nothing at sign-in. last_step is the RFC 6238 time step (Unix seconds / 30) of the last code
-- accepted: a code is accepted only for a later step, so none is accepted twice (§5.2).
CREATE TABLE totp_factors (
    account_id    TEXT PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
    secret_sealed TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    confirmed_at  INTEGER,
    last_step     INTEGER NOT NULL DEFAULT 0
);

-- Recovery codes: random, kept only as their SHA-256, each good once.
CREATE TABLE recovery_codes (
    code_hash  TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL,
    used_at    INTEGER
);
CREATE INDEX recovery_codes_account ON recovery_codes (account_id);
