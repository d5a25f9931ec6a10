-- private_key_jwt clients (RFC 7523 §2.2): `auth_method` may now say so (their keys live in
-- `metadata`: `jwks_uri` or `jwks`). SQLite cannot alter a CHECK constraint, and rebuilding the
-- table inside the migration's transaction would rewrite or break the foreign keys that name it
-- (foreign_keys cannot be turned off in a transaction). So the constraint's text is widened in
-- place, SQLite's documented way to change a CHECK constraint
-- (https://www.sqlite.org/lang_altertable.html, "Making Other Kinds Of Table Schema Changes"):
-- every existing row satisfies the wider rule. `writable_schema = RESET` reloads the schema on
-- this connection, and the CREATE TABLE below raises the schema version, so every other
-- connection reloads it too.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql, '''client_secret_post'')', '''client_secret_post'', ''private_key_jwt'')')
WHERE type = 'table' AND name = 'oauth_clients';
PRAGMA writable_schema = RESET;

-- Client assertions spent (RFC 7523 §3 rule 7, OpenID Connect Core §9): the `jti` of every
-- accepted assertion, as its SHA-256, until the assertion expires, so that each is accepted
-- once across every instance sharing this database. A row past its expiry may be taken over
-- by a new assertion with the same `jti`; housekeeping deletes the others.
CREATE TABLE client_assertion_jtis (
    client_id  TEXT NOT NULL,
    jti_hash   TEXT NOT NULL,                    -- SHA-256 hex of the jti
    expires_at BIGINT NOT NULL,                  -- the assertion's exp, Unix seconds
    PRIMARY KEY (client_id, jti_hash)
);
CREATE INDEX client_assertion_jtis_expires ON client_assertion_jtis (expires_at);
