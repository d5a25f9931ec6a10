-- OAuth clients, remembered consents, authorization codes, refresh-token families and tokens.
-- Every secret is stored only as its SHA-256 hex (client secrets, codes, tokens).
CREATE TABLE oauth_clients (
    client_id          TEXT PRIMARY KEY,
    client_secret_hash TEXT,                     -- NULL for public clients
    auth_method        TEXT NOT NULL CHECK (auth_method IN ('none', 'client_secret_basic', 'client_secret_post')),
    client_name        TEXT,
    redirect_uris      TEXT NOT NULL,            -- JSON array of strings
    grant_types        TEXT NOT NULL,            -- JSON array of strings
    scope              TEXT,
    metadata           TEXT NOT NULL,            -- JSON object: the registered metadata echoed (RFC 7591 §3.2.1)
    can_introspect     INTEGER NOT NULL DEFAULT 0,
    created_at         INTEGER NOT NULL
);

-- A person's approval of a client at a redirect URI (remembered consent = the grant).
CREATE TABLE consents (
    id           TEXT PRIMARY KEY,
    account_id   TEXT NOT NULL REFERENCES accounts(id),
    client_id    TEXT NOT NULL REFERENCES oauth_clients(client_id),
    redirect_uri TEXT NOT NULL,
    scope        TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    revoked_at   INTEGER
);
CREATE UNIQUE INDEX consents_live ON consents (account_id, client_id, redirect_uri);

CREATE TABLE authorization_codes (
    code_hash      TEXT PRIMARY KEY,
    client_id      TEXT NOT NULL REFERENCES oauth_clients(client_id),
    account_id     TEXT NOT NULL REFERENCES accounts(id),
    consent_id     TEXT NOT NULL REFERENCES consents(id),
    redirect_uri   TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    resource       TEXT NOT NULL,
    scope          TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL,
    used_at        INTEGER,
    family_id      TEXT                          -- the refresh-token family the code was redeemed into
);

-- One family per redeemed authorization code: every refresh token and access token descends from it.
CREATE TABLE token_families (
    id             TEXT PRIMARY KEY,
    account_id     TEXT NOT NULL REFERENCES accounts(id),
    client_id      TEXT NOT NULL REFERENCES oauth_clients(client_id),
    consent_id     TEXT NOT NULL REFERENCES consents(id),
    scope          TEXT NOT NULL,
    resource       TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    revoked_at     INTEGER,
    revoked_reason TEXT
);
CREATE INDEX token_families_consent ON token_families (consent_id);

CREATE TABLE refresh_tokens (
    token_hash       TEXT PRIMARY KEY,
    family_id        TEXT NOT NULL REFERENCES token_families(id),
    created_at       INTEGER NOT NULL,
    rotated_at       INTEGER,                         -- set once, by the one request that rotates it
    successor_hash   TEXT,
    successor_sealed BLOB                          -- successor pair sealed under a key derived from this token
);
CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);

CREATE TABLE access_tokens (
    token_hash TEXT PRIMARY KEY,
    family_id  TEXT NOT NULL REFERENCES token_families(id),
    account_id TEXT NOT NULL REFERENCES accounts(id),
    client_id  TEXT NOT NULL,
    scope      TEXT NOT NULL,
    audience   TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE INDEX access_tokens_family ON access_tokens (family_id);
