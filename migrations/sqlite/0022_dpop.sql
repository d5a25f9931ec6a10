-- DPoP (RFC 9449). An access token issued with a valid DPoP proof is bound to the proof's key:
-- `jkt` holds the key's RFC 7638 thumbprint (base64url SHA-256), NULL for a bearer token. A
-- family whose refresh tokens are bound (a public client's, RFC 9449 §5) holds the same in its
-- own `jkt`. Both are written when the row is inserted and never changed.
ALTER TABLE access_tokens ADD COLUMN jkt TEXT;
ALTER TABLE token_families ADD COLUMN jkt TEXT;
-- The `dpop_jkt` of the authorization request (RFC 9449 §10): the code is redeemed only with a
-- proof by that key.
ALTER TABLE authorization_codes ADD COLUMN dpop_jkt TEXT;

-- DPoP proofs seen (RFC 9449 §11.1): the SHA-256 (hex) of each accepted proof's key
-- thumbprint and `jti`, until the proof's `iat` window has passed, so that a proof is accepted
-- once across the instances sharing this database. The token endpoint spends a proof with one
-- conditional statement; the MCP route records its proofs in batches and its credential
-- lookup reads this table in the same statement. Housekeeping deletes expired rows.
CREATE TABLE dpop_proofs (
    proof_hash TEXT PRIMARY KEY,                 -- SHA-256 hex of jkt "." jti
    expires_at BIGINT NOT NULL                   -- Unix seconds
);
CREATE INDEX dpop_proofs_expires ON dpop_proofs (expires_at);
