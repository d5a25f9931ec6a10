-- Upstream MCP servers behind Gatehouse (issue "Upstream MCP servers behind Gatehouse"): the
-- registry the operator administers with `gatehouse upstream …`, the tool definitions seen on
-- each upstream with the hash of the one approved, and one version counter that every change
-- raises so running instances reload the registry within a second.
CREATE TABLE upstreams (
    name              TEXT PRIMARY KEY,            -- [a-z0-9-]{1,20}
    transport         TEXT NOT NULL,               -- 'http' (Streamable HTTP) or 'stdio'
    url               TEXT,                        -- http: the upstream's MCP endpoint
    header_names      TEXT NOT NULL DEFAULT '[]',  -- JSON array of the configured header names
    headers_sealed    TEXT,                        -- server-key sealed JSON [[name, value], …]
    command           TEXT,                        -- stdio: JSON array, program then arguments
    env_names         TEXT NOT NULL DEFAULT '[]',  -- stdio: JSON array of the --env names
    env_sealed        TEXT,                        -- server-key sealed JSON [[name, value], …]
    timeout_ms        INTEGER NOT NULL,            -- per call
    max_concurrency   INTEGER NOT NULL,            -- calls in flight per instance
    trust_definitions INTEGER NOT NULL DEFAULT 0,  -- 1: definitions listed without approval
    enabled           INTEGER NOT NULL DEFAULT 1,
    accounts          TEXT,                        -- JSON array of account ids; NULL: everyone
    projects          TEXT,                        -- JSON array of project ids; NULL: any
    last_error        TEXT,                        -- the last failure seen (no secrets)
    last_error_at     INTEGER,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);

CREATE TABLE upstream_tools (
    upstream            TEXT NOT NULL REFERENCES upstreams(name) ON DELETE CASCADE,
    tool                TEXT NOT NULL,             -- the upstream's own tool name
    definition          TEXT NOT NULL,             -- the definition last seen (JSON)
    hash                TEXT NOT NULL,             -- SHA-256 hex of the definition last seen
    approved_definition TEXT,                      -- the definition approved (JSON), if any
    approved_hash       TEXT,                      -- its SHA-256 hex
    allow_destructive   INTEGER NOT NULL DEFAULT 0,
    first_seen_at       INTEGER NOT NULL,
    changed_at          INTEGER NOT NULL,
    PRIMARY KEY (upstream, tool)
);

CREATE TABLE upstream_registry (
    id      INTEGER PRIMARY KEY,
    version INTEGER NOT NULL
);
INSERT INTO upstream_registry (id, version) VALUES (1, 0);
