-- Personal MCP URLs (issue "Credentials beyond the browser"): `<MCP path>/<secret>` for clients
-- that cannot send a header. Like an account or project key without an address allow-list:
-- project_id NULL reaches every active project of the account. The secret is stored only as
-- its SHA-256 hex.
CREATE TABLE personal_urls (
    id           TEXT PRIMARY KEY,
    url_hash     TEXT NOT NULL UNIQUE,
    account_id   TEXT NOT NULL REFERENCES accounts(id),
    project_id   TEXT REFERENCES projects(id),   -- NULL: every active project of the account
    name         TEXT NOT NULL,
    scope        TEXT NOT NULL,                  -- 'mcp:read' or 'mcp:read mcp:write'
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER,                        -- NULL: no expiry
    last_used_at INTEGER,                        -- written at most once a minute per URL
    revoked_at   INTEGER
);
CREATE INDEX personal_urls_account ON personal_urls (account_id);
