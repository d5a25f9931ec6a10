-- Keys that sign JWT access tokens (RFC 9068) for resources registered with
-- `--token-format jwt`. The ES256 private key (PKCS#8) is sealed with the server key (the kid as
-- associated data); the public key is kept as its JWK (RFC 7517) for the JWKS. At most one
-- current key (retired_at NULL); a retired key stays published until every token it signed
-- has expired, then is deleted.
CREATE TABLE signing_keys (
    kid        TEXT PRIMARY KEY,
    sealed_key TEXT NOT NULL,
    public_jwk TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    retired_at INTEGER
);
CREATE UNIQUE INDEX signing_keys_current ON signing_keys ((retired_at IS NULL)) WHERE retired_at IS NULL;
