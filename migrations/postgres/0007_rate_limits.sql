-- Rate-limit counters: sign-in failures per source address, per (address, email) and per
-- account, and dynamic registrations per source address. One row per counter, keyed by the
-- SHA-256 of what is counted, so an attempt reads a few rows by primary key and a refused
-- attempt writes nothing.
CREATE TABLE rate_limits (
    key           TEXT PRIMARY KEY,              -- SHA-256 hex of "<kind>:<value>"
    hits          BIGINT NOT NULL,               -- attempts in the window / consecutive failures
    amount        BIGINT NOT NULL,               -- units (bytes) in the window
    since         BIGINT NOT NULL,               -- window start / last failure, Unix seconds
    blocked_until BIGINT NOT NULL,               -- no attempt before this time
    expires_at    BIGINT NOT NULL                -- housekeeping deletes the row after this time
);
CREATE INDEX IF NOT EXISTS rate_limits_expires ON rate_limits (expires_at);
-- Sign-in throttling no longer counts from the audit log.
DROP INDEX IF EXISTS audit_events_source;
-- Housekeeping finds clients that never completed an authorization.
CREATE INDEX IF NOT EXISTS consents_client ON consents (client_id);
CREATE INDEX IF NOT EXISTS authorization_codes_client ON authorization_codes (client_id);
CREATE INDEX IF NOT EXISTS token_families_client ON token_families (client_id);
