-- private_key_jwt clients (RFC 7523 §2.2): `auth_method` may now say so (their keys live in
-- `metadata`: `jwks_uri` or `jwks`).
ALTER TABLE oauth_clients DROP CONSTRAINT IF EXISTS oauth_clients_auth_method_check;
ALTER TABLE oauth_clients ADD CONSTRAINT oauth_clients_auth_method_check
    CHECK (auth_method IN ('none', 'client_secret_basic', 'client_secret_post', 'private_key_jwt'));

-- Client assertions spent (private_key_jwt: RFC 7523 §3 rule 7, OpenID Connect Core §9): the
-- `jti` of every accepted assertion, as its SHA-256, until the assertion expires, so that each
-- is accepted once across every instance sharing this database. A row past its expiry may be
-- taken over by a new assertion with the same `jti`; housekeeping deletes the others.
CREATE TABLE client_assertion_jtis (
    client_id  TEXT NOT NULL,
    jti_hash   TEXT NOT NULL,                    -- SHA-256 hex of the jti
    expires_at BIGINT NOT NULL,                  -- the assertion's exp, Unix seconds
    PRIMARY KEY (client_id, jti_hash)
);
CREATE INDEX client_assertion_jtis_expires ON client_assertion_jtis (expires_at);
