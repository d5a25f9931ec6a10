-- Notes: a per-project knowledge base with full-text search, and background jobs (exports).
-- Full-text search is an FTS5 external-content table over `notes`, kept in step by triggers;
-- its rowid is `notes.seq` (an INTEGER PRIMARY KEY, so VACUUM never renumbers it).
CREATE TABLE notes (
    seq               INTEGER PRIMARY KEY,
    id                TEXT NOT NULL UNIQUE,
    project_id        TEXT NOT NULL REFERENCES projects(id),
    author_account_id TEXT REFERENCES accounts(id),
    title             TEXT NOT NULL,
    body              TEXT NOT NULL,
    tags              TEXT NOT NULL DEFAULT '[]',   -- JSON array of strings
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);
CREATE INDEX notes_project ON notes (project_id, created_at);

CREATE VIRTUAL TABLE notes_fts USING fts5(
    title, body, tags,
    content = 'notes', content_rowid = 'seq'
);

CREATE TRIGGER notes_fts_insert AFTER INSERT ON notes BEGIN
    INSERT INTO notes_fts (rowid, title, body, tags) VALUES (new.seq, new.title, new.body, new.tags);
END;
CREATE TRIGGER notes_fts_delete AFTER DELETE ON notes BEGIN
    INSERT INTO notes_fts (notes_fts, rowid, title, body, tags) VALUES ('delete', old.seq, old.title, old.body, old.tags);
END;
CREATE TRIGGER notes_fts_update AFTER UPDATE ON notes BEGIN
    INSERT INTO notes_fts (notes_fts, rowid, title, body, tags) VALUES ('delete', old.seq, old.title, old.body, old.tags);
    INSERT INTO notes_fts (rowid, title, body, tags) VALUES (new.seq, new.title, new.body, new.tags);
END;

CREATE TABLE jobs (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('export')),
    status      TEXT NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed')),
    project_id  TEXT NOT NULL REFERENCES projects(id),
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    client_id   TEXT,
    result      TEXT,                              -- the finished document (JSON), when completed
    error       TEXT,                              -- why it failed, when failed
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    finished_at INTEGER
);
CREATE INDEX jobs_project ON jobs (project_id, created_at);
