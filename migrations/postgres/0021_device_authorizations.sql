-- The device authorization grant (RFC 8628): one row per device authorization request, from
-- `POST /oauth/device_authorization` until it expires. Both codes are kept only as their
-- SHA-256 (the user code in its normal form: upper case, no separator). The person's answer
-- on the consent page moves `status` from `pending` to `approved` (with the authorization code
-- row, `code_hash`, that the polling client redeems once) or `denied`, by a conditional update,
-- so a request is answered once across every instance sharing the database.
CREATE TABLE device_authorizations (
    device_code_hash TEXT PRIMARY KEY,           -- SHA-256 hex of the device_code
    user_code_hash   TEXT NOT NULL UNIQUE,       -- SHA-256 hex of the normalised user_code
    client_id        TEXT NOT NULL,
    request          TEXT NOT NULL,              -- the validated request (JSON: scope, resource)
    status           TEXT NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'approved', 'denied')),
    account_id       TEXT,                       -- who answered
    code_hash        TEXT,                       -- the authorization code issued on approval
    poll_interval    BIGINT NOT NULL,            -- seconds; grows by 5 at each slow_down
    last_polled_at   BIGINT,                     -- Unix seconds
    created_at       BIGINT NOT NULL,
    expires_at       BIGINT NOT NULL
);
CREATE INDEX device_authorizations_expires ON device_authorizations (expires_at);
