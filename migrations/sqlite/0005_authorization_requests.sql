-- Authorization requests waiting for the person's decision on the consent page. Answering one
-- is a conditional update, so a request is answered once even when its form is submitted
-- twice at the same moment or to two instances.
CREATE TABLE authorization_requests (
    id         TEXT PRIMARY KEY,                 -- random, carried by the consent form
    account_id TEXT NOT NULL REFERENCES accounts(id),
    request    TEXT NOT NULL,                    -- the validated request (JSON)
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER
);
