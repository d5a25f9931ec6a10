-- API keys for the MCP route (product spec "API keys"). An account key (project_id NULL)
-- reaches every active project of its account; a project key reaches that one project, and
-- only from the addresses in allowed_ips when that is set. The key itself is stored only as
-- its SHA-256 hex.
CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    key_hash     TEXT NOT NULL UNIQUE,
    account_id   TEXT NOT NULL REFERENCES accounts(id),
    project_id   TEXT REFERENCES projects(id),   -- NULL: account key
    name         TEXT NOT NULL,
    scope        TEXT NOT NULL,                  -- 'mcp:read' or 'mcp:read mcp:write'
    allowed_ips  TEXT,                           -- JSON array of CIDRs; NULL: any address
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER,                        -- NULL: no expiry
    last_used_at INTEGER,                        -- written at most once a minute per key
    revoked_at   INTEGER
);
CREATE INDEX api_keys_account ON api_keys (account_id);

-- Service clients (client_credentials, RFC 6749 §4.4): a confidential client made on the
-- command line that acts for its owner account, or only for one project of it, with at most
-- `scope`. Its access tokens descend from one consent and one family made with it, so the
-- access-token lookup checks them like any other (the owner can revoke it on Connected apps).
CREATE TABLE service_clients (
    client_id  TEXT PRIMARY KEY REFERENCES oauth_clients(client_id),
    account_id TEXT NOT NULL REFERENCES accounts(id),
    project_id TEXT REFERENCES projects(id),     -- NULL: every active project of the account
    scope      TEXT NOT NULL,
    consent_id TEXT NOT NULL REFERENCES consents(id),
    family_id  TEXT NOT NULL REFERENCES token_families(id),
    created_at INTEGER NOT NULL
);
CREATE INDEX service_clients_family ON service_clients (family_id);
