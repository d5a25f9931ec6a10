-- Tool lists per credential (issue "Upstream MCP servers behind Gatehouse" §4): an API key or a
-- personal URL may be limited to some tools (`--tools`) or kept from some (`--deny-tools`).
-- NULL: every tool; else JSON {"only": [names]} or {"except": [names]} (catalog names).
ALTER TABLE api_keys ADD COLUMN tool_filter TEXT;
ALTER TABLE personal_urls ADD COLUMN tool_filter TEXT;

-- A change of the list is announced to the validation caches like every other column but
-- `last_used_at` (0015_last_use_unannounced; `tests/integration/cache.rs` checks the lists).
DROP TRIGGER auth_gen_api_keys_update;
CREATE TRIGGER auth_gen_api_keys_update
AFTER UPDATE OF id, key_hash, account_id, project_id, name, scope, allowed_ips, created_at,
    expires_at, revoked_at, tool_filter ON api_keys
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
DROP TRIGGER auth_gen_personal_urls_update;
CREATE TRIGGER auth_gen_personal_urls_update
AFTER UPDATE OF id, url_hash, account_id, project_id, name, scope, created_at, expires_at,
    revoked_at, tool_filter ON personal_urls
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
