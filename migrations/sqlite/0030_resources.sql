-- Registered resources: other MCP servers that use Gatehouse as their authorization server
-- (RFC 8707). Gatehouse's own MCP endpoint (MCP_SERVER_URL) is the built-in resource and has
-- no row. `url` is the normalised resource indicator every comparison uses; `scopes` a JSON
-- array of {"scope", "description"}; `introspection_client_id` the confidential client the
-- resource server introspects with (RFC 7662), if it was given one.
CREATE TABLE resources (
    name                    TEXT PRIMARY KEY,
    url                     TEXT NOT NULL UNIQUE,
    scopes                  TEXT NOT NULL,
    token_format            TEXT NOT NULL CHECK (token_format IN ('opaque', 'jwt')),
    token_ttl               INTEGER NOT NULL,
    introspection_client_id TEXT REFERENCES oauth_clients(client_id),
    created_at              INTEGER NOT NULL
);

-- Remembered consent is per client, redirect URI and resource: '' is the built-in resource,
-- anything else a registered resource's URL.
ALTER TABLE consents ADD COLUMN resource TEXT NOT NULL DEFAULT '';
DROP INDEX consents_live;
CREATE UNIQUE INDEX consents_live ON consents (account_id, client_id, redirect_uri, resource) WHERE revoked_at IS NULL;
