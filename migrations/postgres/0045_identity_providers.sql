-- Trusted identity providers (`gatehouse idp add|list|remove`): one registry for OpenID Connect
-- sign-in (a client id and its secret at the provider) and for assertions the provider signs
-- (ID-JAG, RFC 7523 JWT-bearer grant, verified against its `jwks_uri`). `identity_links` ties a
-- provider's `sub` to an account; `idp_signins` holds the sign-ins under way (state, nonce and
-- PKCE verifier), so any instance can finish one another began, once, within minutes.
CREATE TABLE identity_providers (
    name                 TEXT PRIMARY KEY,            -- [a-z0-9-]{1,20}
    issuer               TEXT NOT NULL,               -- the provider's issuer URL
    display_name         TEXT,                        -- the sign-in button's words
    client_id            TEXT,                        -- sign-in: our client id at the provider
    client_secret_sealed TEXT,                        -- sign-in: server-key sealed client secret
    domains              TEXT,                        -- JSON array of allowed email domains; NULL: any
    create_accounts      BIGINT NOT NULL DEFAULT 0,   -- 1: a first sign-in may make an account
    jwks_uri             TEXT,                        -- assertions: the provider's key set
    assertions           BIGINT NOT NULL DEFAULT 0,   -- 1: trusted for ID-JAG assertions
    created_at           BIGINT NOT NULL
);

CREATE TABLE identity_links (
    provider     TEXT NOT NULL REFERENCES identity_providers(name) ON DELETE CASCADE,
    subject      TEXT NOT NULL,                       -- the provider's `sub`
    account_id   TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT NOT NULL,
    PRIMARY KEY (provider, subject)
);
CREATE INDEX identity_links_account ON identity_links (account_id);

CREATE TABLE idp_signins (
    state_hash TEXT PRIMARY KEY,                      -- SHA-256 hex of the `state` sent
    provider   TEXT NOT NULL,
    sealed     TEXT NOT NULL,                         -- server-key sealed JSON: nonce, PKCE verifier
    next       TEXT NOT NULL,                         -- where the browser goes once signed in
    expires_at BIGINT NOT NULL
);
CREATE INDEX idp_signins_expiry ON idp_signins (expires_at);
