-- Accounts, projects, memberships, first-run setup tokens and the audit log.
CREATE TABLE accounts (
    id            TEXT PRIMARY KEY,
    email         TEXT NOT NULL UNIQUE,          -- stored lowercased: unique case-insensitively
    password_hash TEXT NOT NULL,                 -- argon2id PHC string
    status        TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
    created_at    INTEGER NOT NULL
);

CREATE TABLE projects (
    id               TEXT PRIMARY KEY,
    name             TEXT NOT NULL,
    owner_account_id TEXT NOT NULL REFERENCES accounts(id),
    status           TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
    created_at       INTEGER NOT NULL
);

CREATE TABLE memberships (
    project_id TEXT NOT NULL REFERENCES projects(id),
    account_id TEXT NOT NULL REFERENCES accounts(id),
    role       TEXT NOT NULL CHECK (role IN ('read', 'write')),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (project_id, account_id)
);
CREATE INDEX memberships_account ON memberships (account_id);

CREATE TABLE setup_tokens (
    token_hash TEXT PRIMARY KEY,                 -- SHA-256 hex of the one-time link token
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER
);

CREATE TABLE audit_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    at         INTEGER NOT NULL,
    event      TEXT NOT NULL,
    outcome    TEXT NOT NULL,
    account_id TEXT,
    client_id  TEXT,
    subject    TEXT,                             -- what: a tool name, a project id, a family id
    source_ip  TEXT,
    detail     TEXT
);
CREATE INDEX audit_events_at ON audit_events (at);
