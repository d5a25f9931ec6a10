-- Notes: a per-project knowledge base with full-text search, and background jobs (exports).
-- Full-text search is a generated `tsvector` column (title weighted A, body B, tags C) with a
-- GIN index; queries rank with ts_rank and cut snippets with ts_headline.
CREATE TABLE notes (
    id                TEXT PRIMARY KEY,
    project_id        TEXT NOT NULL REFERENCES projects(id),
    author_account_id TEXT REFERENCES accounts(id),
    title             TEXT NOT NULL,
    body              TEXT NOT NULL,
    tags              TEXT NOT NULL DEFAULT '[]',   -- JSON array of strings
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    search            tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('simple', title), 'A')
        || setweight(to_tsvector('simple', body), 'B')
        || setweight(to_tsvector('simple', tags), 'C')
    ) STORED
);
CREATE INDEX notes_project ON notes (project_id, created_at);
CREATE INDEX notes_search ON notes USING GIN (search);

CREATE TABLE jobs (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('export')),
    status      TEXT NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed')),
    project_id  TEXT NOT NULL REFERENCES projects(id),
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    client_id   TEXT,
    result      TEXT,                              -- the finished document (JSON), when completed
    error       TEXT,                              -- why it failed, when failed
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    finished_at BIGINT
);
CREATE INDEX jobs_project ON jobs (project_id, created_at);
