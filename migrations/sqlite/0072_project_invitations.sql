-- Invitations to a project (issue 37): an owner invites an email address with a role. The
-- link's random token is kept only as its SHA-256; it works once within its time, for the
-- invited email alone, whether that person has an account yet or creates one with it.
CREATE TABLE project_invitations (
    token_hash  TEXT PRIMARY KEY,                -- SHA-256 hex of the link's token
    project_id  TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    email       TEXT NOT NULL,                   -- lowercased, as accounts.email
    role        TEXT NOT NULL,                   -- 'read' or 'write'
    invited_by  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    used_at     INTEGER,
    used_by     TEXT
);
CREATE INDEX project_invitations_project ON project_invitations (project_id, expires_at);
