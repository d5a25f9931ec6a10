-- Connections (issue "Connections: each person links their own account at an upstream
-- service"): upstreams registered with `--per-person-oauth`, where each person signs in at the
-- upstream's own authorization server and Gatehouse keeps the tokens (sealed with the server
-- key) and never hands them to an MCP client.

-- How Gatehouse is an OAuth client of a per-person upstream: what discovery found when the
-- upstream was added (RFC 9728 protected-resource metadata, RFC 8414 server metadata) and the
-- client registration used there.
CREATE TABLE upstream_oauth (
    upstream               TEXT PRIMARY KEY REFERENCES upstreams(name) ON DELETE CASCADE,
    resource               TEXT NOT NULL,     -- RFC 8707 `resource`: the upstream's MCP URL
    issuer                 TEXT NOT NULL,
    authorization_endpoint TEXT NOT NULL,
    token_endpoint         TEXT NOT NULL,
    revocation_endpoint    TEXT,              -- RFC 7009, when the server has one
    registration           TEXT NOT NULL,     -- 'pre-registered', 'dynamic' or 'metadata-document'
    client_id              TEXT NOT NULL,
    client_secret_sealed   TEXT,              -- server-key sealed, when the client has a secret
    scope                  TEXT,              -- the scope asked for; NULL: the server's default
    created_at             INTEGER NOT NULL
);

-- A link Gatehouse gave an MCP client for one person (URL-mode elicitation): it works only
-- for that person, and records which client asked.
CREATE TABLE connection_requests (
    id_hash     TEXT PRIMARY KEY,             -- SHA-256 hex of the random id in the link
    upstream    TEXT NOT NULL REFERENCES upstreams(name) ON DELETE CASCADE,
    account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    client_id   TEXT,                         -- the MCP client that asked (NULL: a credential without one)
    expires_at  INTEGER NOT NULL
);

-- One authorization request in flight at an upstream: single use, short lived, bound to the
-- person and their browser session.
CREATE TABLE connection_states (
    state_hash      TEXT PRIMARY KEY,         -- SHA-256 hex of `state`
    upstream        TEXT NOT NULL REFERENCES upstreams(name) ON DELETE CASCADE,
    account_id      TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    session_hash    TEXT NOT NULL,            -- SHA-256 hex of the browser's binding secret
    client_id       TEXT,                     -- the MCP client that asked, if any
    verifier_sealed TEXT NOT NULL,            -- the PKCE verifier, sealed
    expires_at      INTEGER NOT NULL
);
CREATE INDEX connection_states_expiry ON connection_states (expires_at);

-- The vault: each person's grant at each per-person upstream, tokens sealed with the server
-- key under a context naming the person and the upstream.
CREATE TABLE upstream_grants (
    account_id          TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    upstream            TEXT NOT NULL REFERENCES upstreams(name) ON DELETE CASCADE,
    access_sealed       TEXT NOT NULL,
    refresh_sealed      TEXT,
    expires_at          INTEGER,              -- the access token's end (Unix seconds), if told
    scope               TEXT,                 -- the scope granted, as the server said
    client_id           TEXT,                 -- the MCP client whose call led to the connection
    connected_at        INTEGER NOT NULL,
    refreshed_at        INTEGER,
    last_used_at        INTEGER,
    refresh_lease_until INTEGER NOT NULL DEFAULT 0, -- one refresh at a time, across instances
    PRIMARY KEY (account_id, upstream)
);
