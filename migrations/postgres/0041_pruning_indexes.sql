-- The upkeep task deletes old rows in batches of a thousand, oldest first
-- (src/upkeep.rs, CREDENTIAL_RETENTIONS in src/store/audit_query.rs): these indexes let each
-- batch find its rows without reading the whole table. Only indexes: an older release
-- serving the same database during a rolling upgrade is unaffected.
CREATE INDEX IF NOT EXISTS access_tokens_expires ON access_tokens (expires_at);
CREATE INDEX IF NOT EXISTS authorization_codes_expires ON authorization_codes (expires_at);
CREATE INDEX IF NOT EXISTS authorization_requests_expires ON authorization_requests (expires_at);
CREATE INDEX IF NOT EXISTS refresh_tokens_rotated ON refresh_tokens (rotated_at) WHERE rotated_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS token_families_revoked ON token_families (revoked_at) WHERE revoked_at IS NOT NULL;
