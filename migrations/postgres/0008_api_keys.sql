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
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT,                         -- NULL: no expiry
    last_used_at BIGINT,                         -- written at most once a minute per key
    revoked_at   BIGINT
);
CREATE INDEX api_keys_account ON api_keys (account_id);
