-- Confirmations of destructive upstream calls that were used (an answer, accepted or not, sent
-- back with their `requestState`): the SHA-256 of each state until it expires, so that a state
-- is answered once across every instance sharing this database and a confirmed call cannot be
-- sent again on the same confirmation. Housekeeping deletes the expired rows.
CREATE TABLE spent_confirmations (
    state_hash TEXT PRIMARY KEY,                 -- SHA-256 hex of the sealed requestState
    expires_at BIGINT NOT NULL                   -- the state's expiry, Unix seconds
);
CREATE INDEX spent_confirmations_expires ON spent_confirmations (expires_at);
